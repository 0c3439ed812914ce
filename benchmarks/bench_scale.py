"""Scale targets of issue 16, side by side with today's code (the reference commit).

Three targets on the 2-core CPU:

(a) ``PAIEstimator.from_history(history, budget=...)`` on a 12,032-question x 29-model bank
    in <= 2 min (a thin history: the 23 history models of the experiment split, 5 of them
    observed on one block of the bank only; budget 10%, 1,203 queries);
(b) ``faqstats experiment --methods auto uniform-fpc --budgets 0.025 0.05 0.1 --seeds 10`` on
    an 82,756-question x 90-model bank in <= 5 min (68 history models, 22 new ones): ``auto``, the
    default method (configured from the history, as ``PAIEstimator.from_history``), unless
    ``--b-methods faq uniform-fpc`` measures the factor model's method as before;
(c) a live step (select + answer + update) at N = 100,000, k = 16 in <= 1 ms.

The banks are semi-synthetic: ``z_ij ~ Bernoulli(sigmoid(u_i . v_j))`` from the seed paper's
published factors (``../shared/data/paper_factors_bbh.npz``, k = 64): a seeded subset of the
models and a seeded permutation of the 9,574 questions tiled with seeded repeats up to N. Without
that file the banks come from ``faqstats.make_synthetic_bank`` (said so in the output).

Each target runs in a subprocess that imports either this tree's faqstats or the reference's
(``git archive <commit> faqstats`` unpacked into a temporary folder, or ``--reference-tree``).
The reference is far too slow to run in full (its from_history took 33 min under load, its
experiment does not finish in 34 min), so by default it is **extrapolated** from a measured
subset, printed next to the measurement: (a) its two candidate fits and refit measured in full,
each candidate's 1,000 validation runs scaled from one chunk of runs; (b) its AdamW fit scaled
from 100 of its 2,000 steps, its weights' validation runs, ``faq`` runs and ``uniform-fpc`` runs
each scaled from one chunk at the 2.5% budget by runs and by queries (per-query cost taken as
constant: it grows a little with the query index, so the extrapolation understates the
reference; the AdamW steps are timed after a warm-up fit). ``--full-reference`` runs (a) in full
instead. (b)'s reference is extrapolated for ``faq`` only (with ``--b-methods faq uniform-fpc``).
(c) runs in full in both trees.

    python benchmarks/bench_scale.py [--quick] [--no-reference] [--full-reference]
                                     [--reference-commit 78f7e3b] [--reference-tree DIR]
                                     [--only a b c] [--b-methods auto uniform-fpc]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FACTORS = ROOT.parent / "shared" / "data" / "paper_factors_bbh.npz"
REFERENCE_COMMIT = "78f7e3b"

FULL = {"a": dict(n_models=29, n_questions=12032, n_incomplete=5, budget=0.10, ref_runs=84),
        "b": dict(n_models=90, n_questions=82756, budgets=(0.025, 0.05, 0.10), seeds=10, ref_runs=12,
                  ref_fit_steps=100),
        "c": dict(n_questions=100_000, k=16, steps=100, repeats=3)}
QUICK = {"a": dict(n_models=29, n_questions=3000, n_incomplete=5, budget=0.10, ref_runs=20),
         "b": dict(n_models=40, n_questions=6000, budgets=(0.025, 0.05), seeds=2, ref_runs=6, ref_fit_steps=20),
         "c": dict(n_questions=20_000, k=16, steps=30, repeats=1)}
TARGETS = {"a": 120.0, "b": 300.0, "c": 1e-3}
THREADS = 1  # OMP_NUM_THREADS of every subprocess (--threads)


# ---------------------------------------------------------------- banks (both trees' workers use these)
def draw_bank(n_models, n_questions, seed, n_incomplete=0):
    """``(matrix, source)``: a fixed 0/1 bank, ``n_incomplete`` rows observed on one block only."""
    rng = np.random.default_rng(seed)
    if FACTORS.exists():
        with np.load(FACTORS) as data:
            U, V = data["model_factors"].astype(float), data["question_factors"].astype(float)
        U = U[rng.choice(U.shape[0], n_models, replace=False)]
        extra = rng.integers(V.shape[0], size=max(0, n_questions - V.shape[0]))
        V = V[np.concatenate([rng.permutation(V.shape[0]), extra])[:n_questions]]
        logits = U @ V.T
        Z = (rng.random(logits.shape) < 1.0 / (1.0 + np.exp(-logits))).astype(float)
        source = f"paper factors ({FACTORS.name}), seed {seed}"
    else:
        import faqstats as fq

        bank = fq.make_synthetic_bank(n_models=n_models, n_questions=n_questions, n_new=1, n_components=8,
                                      random_state=seed)
        Z, source = bank.history, f"faqstats.make_synthetic_bank (k = 8; {FACTORS} absent), seed {seed}"
    for i in rng.choice(n_models, n_incomplete, replace=False):  # a model run on one part of the bank
        keep = int(rng.uniform(0.3, 0.7) * n_questions)
        start = int(rng.integers(n_questions - keep))
        Z[i, :start] = np.nan
        Z[i, start + keep:] = np.nan
    return Z, source


def bank_a(cfg):
    from faqstats.experiments import split_matrix

    Z, source = draw_bank(cfg["n_models"], cfg["n_questions"], 0, cfg["n_incomplete"])
    history, new, _ = split_matrix(Z, history_fraction=0.75, split_seed=0)
    return history, new, source


def write_bank_b(cfg, folder):
    Z, source = draw_bank(cfg["n_models"], cfg["n_questions"], 1)
    path = Path(folder) / "bank_b.npz"
    np.savez(path, outcomes=np.where(np.isnan(Z), -1, Z).astype(np.int8))
    return path, source


# ---------------------------------------------------------------- workers (run in a subprocess)
def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def work_a(cfg, extrapolate):
    """(a): from_history in full, or (reference) its parts with the validation runs scaled."""
    import faqstats as fq
    from faqstats.configure import default_candidates
    from faqstats.step_weights import learn_step_weights, validation_split

    history, _, source = bank_a(cfg)
    budget = int(round(cfg["budget"] * history.shape[1]))
    out = {"history": list(history.shape), "observed": float(np.mean(~np.isnan(history))), "budget": budget,
           "source": source}
    if not extrapolate:
        est, seconds = _timed(lambda: fq.PAIEstimator.from_history(history, budget=budget, random_state=0))
        out.update(seconds=seconds, predict_every=int(getattr(est, "predict_every", 1)),
                   chosen=type(est.factor_model).__name__)
        return out
    _, val = validation_split(history, 0.25, 0)
    n_val = val.shape[0]
    full_rows = n_val * math.ceil(1000 / n_val)  # configure_from_history's n_runs=1000 at the reference
    sub_rows = n_val * math.ceil(cfg["ref_runs"] / n_val)
    parts, total, best = {}, 0.0, None
    for name, candidate in default_candidates(history.shape[0], 0).items():
        train, _ = validation_split(history, 0.25, 0)
        model, fit_s = _timed(lambda: candidate.fit(train))
        sw, val_s = _timed(lambda: learn_step_weights(history, None, budget=budget, sampler=fq.HybridSampler(),
                                                      n_runs=cfg["ref_runs"], random_state=0,
                                                      fitted_factor_model=model))
        lam = sw.weights / sw.weights.sum()
        var = float(np.sum(lam**2 * sw.step_variance))
        if best is None or var < best[1]:
            best = (name, var, candidate)
        parts[name] = {"fit": fit_s, "validation_measured": val_s, "validation_scaled": val_s * full_rows / sub_rows}
        total += fit_s + val_s * full_rows / sub_rows
    from sklearn.base import clone

    _, refit_s = _timed(lambda: clone(best[2]).fit(history))
    total += refit_s
    out.update(seconds=total, parts=parts, refit=refit_s, runs_measured=sub_rows, runs_full=full_rows,
               predict_every=1, chosen=best[0])
    return out


def work_b_reference(cfg, bank_path):
    """(b) at the reference: the experiment's pieces, each measured on a subset and scaled."""
    import faqstats as fq
    from faqstats.batched import simulate
    from faqstats.experiments import budget_sizes, split_matrix
    from faqstats.step_weights import learn_step_weights, validation_split

    matrix, _ = fq.load_response_matrix(bank_path)
    (history, new, _), split_s = _timed(lambda: split_matrix(matrix, history_fraction=0.75, split_seed=0))
    _, sizes = budget_sizes(cfg["budgets"], new.shape[1])
    b0, steps_scale = int(sizes[0]), float(np.sum(sizes) / sizes[0])
    steps = cfg["ref_fit_steps"]
    # the CLI's default factor model at the reference: AdamW, 2,000 steps; its cost per step from
    # `steps` steps after a warm-up fit (torch's first calls are slow)
    fq.LogisticFactorModel(n_components=16, max_iter=3, random_state=0).fit(history)
    fm, fit_s = _timed(lambda: fq.LogisticFactorModel(n_components=16, regularization=0.1, max_iter=steps,
                                                      random_state=0).fit(history))
    fit_full = fit_s * 2000 / steps
    _, val = validation_split(history, 0.25, 0)
    n_val = val.shape[0]
    train, _ = validation_split(history, 0.25, 0)
    cross, cross_s = _timed(lambda: fq.LogisticFactorModel(n_components=16, regularization=0.1, max_iter=steps,
                                                           random_state=0).fit(train))
    cross_full = cross_s * 2000 / steps  # the weights' refit on the training part of the split
    sub_rows = n_val * math.ceil(cfg["ref_runs"] / n_val)
    full_rows = n_val * math.ceil(2000 / n_val)  # the CLI's --weight-runs 2000 at the reference
    _, w_s = _timed(lambda: learn_step_weights(history, None, budget=b0, sampler=fq.HybridSampler(),
                                               n_runs=cfg["ref_runs"], random_state=0, fitted_factor_model=cross))
    m = min(cfg["ref_runs"], new.shape[0])
    gens = lambda: [np.random.default_rng(s) for s in range(m)]  # noqa: E731
    _, faq_s = _timed(lambda: simulate(new[:m], gens(), predictor=fm, budget=b0, step_weights=np.ones(b0)))
    _, uni_s = _timed(lambda: simulate(new[:m], gens(), predictor=None, sampler=fq.UniformSampler(replace=False),
                                       budget=b0))
    runs_full = new.shape[0] * cfg["seeds"]
    parts = {"factor fit (2000 AdamW steps)": (fit_s, fit_full),
             "weights' refit on the split (2000 steps)": (cross_s, cross_full),
             "weights' validation runs": (w_s, w_s * full_rows / sub_rows * steps_scale),
             "faq runs": (faq_s, faq_s * runs_full / m * steps_scale),
             "uniform-fpc runs": (uni_s, uni_s * runs_full / m * steps_scale)}
    total = split_s + sum(full for _, full in parts.values())
    return {"seconds": total, "parts": parts, "budget_measured": b0, "steps_scale": steps_scale,
            "runs": {"weights": [sub_rows, full_rows], "faq/uniform": [m, runs_full]}, "history": list(history.shape),
            "new": new.shape[0]}


def work_c(cfg):
    """(c): the live step (one round: draw, answer, update), default policy, r = 1, 4 and the automatic r."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_step import time_library

    import faqstats as fq

    rng = np.random.default_rng(0)
    N, k = cfg["n_questions"], cfg["k"]
    V = rng.normal(size=(N, k)) / np.sqrt(k)
    U = rng.normal(size=(500, k))
    fm = fq.LogisticFactorModel.from_factors(V, model_factors=U)
    z = (rng.random(N) < 1.0 / (1.0 + np.exp(-(V @ U[0])))).astype(float)
    try:
        from faqstats.configure import default_predict_every

        auto = default_predict_every(N)
    except ImportError:  # the reference: every answer
        auto = 1
    out = {}
    for every in sorted({1, 4, auto}):
        means = []
        for _ in range(cfg["repeats"]):
            times, _ = time_library(V, fm.prior_mean_, fm.prior_cov_, z, cfg["steps"], fq.HybridSampler(),
                                    "float64", False, every)
            means.append(float(np.mean(times)))
        out[str(every)] = min(means)
    out["auto"] = auto
    return out


def worker(args):
    cfg = (QUICK if args.quick else FULL)[args.worker]
    if args.worker == "a":
        out = work_a(cfg, extrapolate=args.extrapolate)
    elif args.worker == "b":
        out = work_b_reference(cfg, args.bank)
    else:
        out = work_c(cfg)
    print("RESULT " + json.dumps(out))


# ---------------------------------------------------------------- driver
def run_in(tree, argv, timeout=None):
    """Run this script's worker with ``tree``'s faqstats; its JSON result and wall seconds."""
    env = dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS=str(THREADS))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), *argv], env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"worker {argv} in {tree} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):]), wall


def reference_tree(args, folder):
    if args.reference_tree:
        return Path(args.reference_tree)
    target = Path(folder) / "reference"
    target.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.reference_commit, "faqstats"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def experiment_cli(tree, cfg, bank, out, methods=("auto", "uniform-fpc")):
    cmd = [sys.executable, "-c", "from faqstats.cli import main; main()", "experiment", "--data", str(bank), "--out",
           str(out), "--methods", *methods, "--budgets", *map(str, cfg["budgets"]), "--seeds", str(cfg["seeds"]),
           "--quiet"]
    env = dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS=str(THREADS))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"faqstats experiment failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return wall, proc.stdout


def _fmt_s(x):
    return f"{x:.1f} s" if x < 600 else f"{x / 60:.1f} min"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small banks, few seeds: a smoke run")
    ap.add_argument("--no-reference", action="store_true", help="measure this tree only")
    ap.add_argument("--full-reference", action="store_true", help="run the reference's (a) in full (half an hour)")
    ap.add_argument("--reference-commit", default=REFERENCE_COMMIT)
    ap.add_argument("--reference-tree", default=None, help="a folder holding the reference's faqstats package")
    ap.add_argument("--only", nargs="+", choices=["a", "b", "c"], default=["a", "b", "c"])
    ap.add_argument("--threads", type=int, default=1,
                    help="OMP_NUM_THREADS (torch and BLAS threads) of both trees' processes (default 1: the "
                         "2-core machine is shared; two threads under load mostly wait at barriers)")
    ap.add_argument("--b-methods", nargs="+", default=["auto", "uniform-fpc"],
                    help="(b)'s --methods (default: auto, the default method, and uniform-fpc; the reference is "
                         "extrapolated only for faq)")
    ap.add_argument("--worker", choices=["a", "b", "c"], help=argparse.SUPPRESS)
    ap.add_argument("--extrapolate", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--bank", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)
    global THREADS
    THREADS = args.threads
    cfgs = QUICK if args.quick else FULL
    quick = ["--quick"] if args.quick else []
    load0 = os.getloadavg()[0]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, python "
          f"{platform.python_version()}, numpy {np.__version__}, OMP_NUM_THREADS={THREADS}; load average at the "
          f"start {load0:.1f}"
          + ("; QUICK (smoke) sizes" if args.quick else ""))
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as folder:
        ref = None if args.no_reference else reference_tree(args, folder)
        if ref is not None:
            print(f"reference: {args.reference_commit} ({ref})")
        if "a" in args.only:
            new, _ = run_in(ROOT, ["--worker", "a", *quick])
            print(f"\n(a) from_history: history {new['history'][0]} x {new['history'][1]} "
                  f"({100 * new['observed']:.1f}% observed), budget {new['budget']}; bank: {new['source']}")
            print(f"    this tree: {_fmt_s(new['seconds'])} (chose {new['chosen']}, predict_every "
                  f"{new['predict_every']})")
            refs = None
            if ref is not None:
                refs, _ = run_in(ref, ["--worker", "a", *quick, *([] if args.full_reference else ["--extrapolate"])])
                how = "measured in full" if args.full_reference else (
                    f"extrapolated: fits measured, validation runs scaled from {refs['runs_measured']} to "
                    f"{refs['runs_full']} per candidate")
                print(f"    reference: {_fmt_s(refs['seconds'])} ({how})")
                for name, p in refs.get("parts", {}).items():
                    print(f"      {name}: fit {p['fit']:.1f} s, validation {p['validation_measured']:.1f} s measured "
                          f"-> {p['validation_scaled']:.1f} s")
            rows.append(("(a) from_history, 12,032 x 29 bank" if not args.quick else "(a) from_history (quick)",
                         new["seconds"], refs and refs["seconds"], TARGETS["a"], "s"))
        if "b" in args.only:
            cfg = cfgs["b"]
            bank, source = write_bank_b(cfg, folder)
            methods = args.b_methods
            wall, stdout = experiment_cli(ROOT, cfg, bank, Path(folder) / "out_new", methods)
            fit = [x for x in stdout.splitlines() if x.startswith("Factor model fit")]
            print(f"\n(b) faqstats experiment --methods {' '.join(methods)} "
                  f"--budgets {' '.join(map(str, cfg['budgets']))} "
                  f"--seeds {cfg['seeds']} on {cfg['n_models']} x {cfg['n_questions']}; bank: {source}")
            print(f"    this tree: {_fmt_s(wall)} wall ({fit[0] if fit else 'no fit line'})")
            summary = [x for x in stdout.splitlines() if x.strip().startswith(tuple(methods))]
            for line in summary:
                print("      " + line.strip())
            refb = None
            if ref is not None and "faq" in methods:
                refb, _ = run_in(ref, ["--worker", "b", *quick, "--bank", str(bank)])
                print(f"    reference: {_fmt_s(refb['seconds'])} (extrapolated from one chunk per piece at "
                      f"{refb['budget_measured']} queries, x{refb['steps_scale']:.1f} for all budgets' queries)")
                for name, (measured, full) in refb["parts"].items():
                    print(f"      {name}: {measured:.1f} s measured -> {_fmt_s(full)}")
            rows.append((f"(b) experiment {' '.join(methods)}, 82,756 x 90" if not args.quick else
                         "(b) experiment (quick)",
                         wall, refb and refb["seconds"], TARGETS["b"], "s"))
        if "c" in args.only:
            cfg = cfgs["c"]
            new, _ = run_in(ROOT, ["--worker", "c", *quick])
            refc = run_in(ref, ["--worker", "c", *quick])[0] if ref is not None else None
            print(f"\n(c) live step, N = {cfg['n_questions']}, k = {cfg['k']}: mean of {cfg['steps']} steps, best of "
                  f"{cfg['repeats']}; automatic predict_every here: {new['auto']}")
            for every in sorted({k for k in new if k != "auto"}, key=int):
                r_ms = refc.get(every) if refc else None
                print(f"    predict_every={every}: {1e3 * new[every]:.3f} ms"
                      + (f" (reference {1e3 * r_ms:.3f} ms, ratio {r_ms / new[every]:.2f})" if r_ms else ""))
            auto = str(new["auto"])
            rows.append((f"(c) live step, N = {cfg['n_questions']:,}, predict_every {auto} (auto)", new[auto],
                         refc and refc["1"], TARGETS["c"], "ms"))
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    print(f"\n| target | this tree | reference ({args.reference_commit}) | speed-up | target | met |")
    print("|---|---:|---:|---:|---:|---|")
    for name, mine, theirs, target, unit in rows:
        scale = 1e3 if unit == "ms" else 1.0
        show = (lambda x: f"{scale * x:.3f} ms") if unit == "ms" else _fmt_s
        print(f"| {name} | {show(mine)} | {show(theirs) if theirs else '-'} | "
              f"{f'{theirs / mine:.1f}x' if theirs else '-'} | {show(target)} | {'yes' if mine <= target else 'no'} |")


if __name__ == "__main__":
    main()
