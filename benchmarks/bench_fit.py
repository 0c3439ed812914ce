"""Time factor-model fitting: the reference AdamW-2000 against the alternating Newton solver.

The bank is paper-scale and semi-synthetic: the seed paper's published factors
(``../shared/data/paper_factors_bbh.npz``, 2211 models x 9574 questions, k = 64) give
true logits ``u_i . v_j``; one fixed 0/1 bank is drawn from them with a fixed seed and
a seeded 10% of its cells (MCAR) are held out. Every solver is fitted on the other 90%
and scored by the mean log-loss of its logits ``U V'`` on the held-out cells (lower is
better; the true logits' held-out log-loss is printed as the floor).

Fits run one at a time, each in a fresh subprocess, so that its peak memory is its own:
``peak RSS`` is the child's ``ru_maxrss`` minus its resident size just before the fit
(torch's allocations are invisible to tracemalloc), ``py peak`` the tracemalloc peak of
Python/numpy allocations during the fit. The machine is shared: the load average
(``os.getloadavg``) is recorded before and after each fit; compare ratios from one run.

    python benchmarks/bench_fit.py            # full size (the reference takes tens of minutes)
    python benchmarks/bench_fit.py --quick    # smoke run, well under a minute

The full run rewrites the "Factor fit" section of ``docs/performance.md`` (``--quick``
only with ``--write-docs``).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.special import expit

ROOT = Path(__file__).resolve().parents[1]
FACTORS = ROOT.parent / "shared" / "data" / "paper_factors_bbh.npz"
DOCS = ROOT / "docs" / "performance.md"
SECTION = "## Factor fit"


def draw_bank(path, n_models=None, n_questions=None, held_out=0.1, seed=0):
    """A fixed 0/1 bank z_ij ~ Bernoulli(sigmoid(u_i . v_j)) from the published factors.

    Returns ``(Z, held, logits)``: outcomes (float64 0/1), the boolean held-out mask (MCAR,
    ``held_out`` of the cells) and the true logits. With ``n_models``/``n_questions`` a
    seeded subset of rows/columns is drawn first (``--quick``).
    """
    rng = np.random.default_rng(seed)
    with np.load(path) as f:
        U = f["model_factors"].astype(np.float64)
        V = f["question_factors"].astype(np.float64)
    if n_models is not None:
        U = U[np.sort(rng.choice(U.shape[0], n_models, replace=False))]
    if n_questions is not None:
        V = V[np.sort(rng.choice(V.shape[0], n_questions, replace=False))]
    logits = U @ V.T
    Z = (rng.random(logits.shape) < expit(logits)).astype(np.float64)
    held = rng.random(logits.shape) < held_out
    return Z, held, logits


def _rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _fit_child(history_path, params, threads, conn):
    """Runs in a fresh process: fit one model, send back factors, time and memory."""
    import resource
    import tracemalloc

    import torch

    import faqstats as fq

    torch.set_num_threads(threads)
    H = np.load(history_path)
    fm = fq.LogisticFactorModel(**params)
    # warm torch up on a tiny problem so one-off library start-up is not timed
    fq.LogisticFactorModel(**{**params, "max_iter": 2}).fit(np.eye(3))
    base = _rss_mib()
    load0 = os.getloadavg()[0]
    tracemalloc.start()
    t0 = time.perf_counter()
    fm.fit(H)
    seconds = time.perf_counter() - t0
    py_peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    conn.send(dict(
        seconds=seconds, U=fm.model_factors_, V=fm.question_factors_, n_iter=fm.n_iter_,
        train=float(fm.loss_curve_[-1]), peak_rss=peak - base, py_peak=py_peak,
        load=(load0, os.getloadavg()[0]),
    ))
    conn.close()


def run_fit(history_path, params, threads):
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_fit_child, args=(history_path, params, threads, child))
    proc.start()
    child.close()
    result = parent.recv()
    proc.join()
    return result


def machine_line(threads):
    import torch

    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    except OSError:  # pragma: no cover
        cpu = platform.processor() or platform.machine()
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB; python {platform.python_version()}, "
        f"numpy {np.__version__}, torch {torch.__version__}, torch threads {threads}"
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small bank (100 x 300, k=8, 1 thread) for a smoke run")
    ap.add_argument("--models", type=int, default=None, help="row subset (default: all 2211)")
    ap.add_argument("--questions", type=int, default=None, help="column subset (default: all 9574)")
    ap.add_argument("--components", type=int, default=None, help="k (default 64; 16 with --quick)")
    ap.add_argument("--reference-steps", type=int, default=2000)
    ap.add_argument("--newton-regularization", default="3,10",
                    help="comma-separated regularization values for solver='newton'")
    ap.add_argument("--tol", type=float, default=1e-3, help="tol of solver='newton'")
    ap.add_argument("--threads", type=int, default=None, help="torch threads per fit (default: all cores; 1 with --quick)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write-docs", action="store_true", help="also rewrite docs/performance.md after --quick")
    ap.add_argument("--factors", default=str(FACTORS))
    args = ap.parse_args(argv)
    if args.quick:
        args.models = args.models or 100
        args.questions = args.questions or 300
        args.components = args.components or 8
        # tiny ops: a second thread only adds synchronisation, badly so on a loaded machine
        args.threads = args.threads or 1
    args.threads = args.threads or os.cpu_count() or 1
    k = args.components or 64

    Z, held, true_logits = draw_bank(args.factors, args.models, args.questions, seed=args.seed)
    from faqstats.factor_model import log_loss_on_cells

    H = np.where(held, np.nan, Z)
    M, N = Z.shape
    floor = log_loss_on_cells(Z, true_logits, held)
    header = [
        f"machine: {machine_line(args.threads)}",
        f"bank: {M} models x {N} questions drawn from the published factors (seed {args.seed}), "
        f"{int((~held).sum())} training cells, {int(held.sum())} held out (10% MCAR); k = {k}",
        f"held-out log-loss of the true logits: {floor:.5f}",
    ]
    for line in header:
        print(line, flush=True)

    # Newton fits first (minutes), the long reference last; the table lists the reference first.
    fits = [
        (f"newton, regularization {a:g}, tol {args.tol:g}",
         dict(solver="newton", regularization=a, max_iter=100, tol=args.tol))
        for a in (float(x) for x in args.newton_regularization.split(","))
    ]
    fits.append((f"reference: AdamW lr 1e-2, {args.reference_steps} steps, regularization 0.1",
                 # a progress bar (stderr) for the long full-size run
                 dict(solver="adamw", regularization=0.1, learning_rate=1e-2, max_iter=args.reference_steps,
                      verbose=not args.quick)))

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "H.npy")
        np.save(path, H)
        for name, params in fits:
            params = dict(n_components=k, device="cpu", dtype="float32", random_state=args.seed, **params)
            r = run_fit(path, params, args.threads)
            r["name"] = name
            r["held"] = log_loss_on_cells(Z, r["U"] @ r["V"].T, held)
            rows.append(r)
            print(f"  {name}: {r['seconds']:.1f} s, {r['n_iter']} iterations, held-out {r['held']:.5f}, "
                  f"load {r['load'][0]:.1f}->{r['load'][1]:.1f}", flush=True)

    rows.insert(0, rows.pop())  # the reference first
    ref = rows[0]
    table = [
        f"{'solver':<46} {'time s':>8} {'speed-up':>8} {'iters':>6} {'held-out':>9} {'vs ref':>7} "
        f"{'train':>7} {'peak RSS MiB':>12} {'py peak MiB':>11} {'load before/after':>17}"
    ]
    for r in rows:
        rel = (r["held"] - ref["held"]) / ref["held"]
        table.append(
            f"{r['name']:<46} {r['seconds']:>8.1f} {ref['seconds'] / r['seconds']:>8.2f} {r['n_iter']:>6d} "
            f"{r['held']:>9.5f} {100 * rel:>+6.2f}% {r['train']:>7.4f} {r['peak_rss']:>12.0f} {r['py_peak']:>11.1f} "
            f"{r['load'][0]:>8.1f}/{r['load'][1]:<8.1f}"
        )
    print()
    print("\n".join(table))
    if not args.quick or args.write_docs:
        write_docs(header, table, args)


def write_docs(header, table, args):
    """Replace (or append) the "Factor fit" section of docs/performance.md."""
    cmd = "python benchmarks/bench_fit.py" + (" --quick" if args.quick else "")
    body = (
        f"{SECTION}\n\n"
        f"Measured with `{cmd}` on {time.strftime('%Y-%m-%d')} (each fit in its own process, one after the "
        "other; the machine is shared, so the load average is given next to each fit and the ratio, from "
        "one run, is what compares). `held-out` is the mean log-loss of `U V'` on the held-out cells (lower "
        "is better), `vs ref` its relative difference from the reference; `peak RSS` the fit's peak "
        "resident memory above the process's size before it.\n\n"
        "```\n" + "\n".join(header + [""] + table) + "\n```\n\n"
        "The two solvers do not minimise the same function. AdamW's decoupled weight decay is not an L2 "
        "penalty (it shrinks each entry by `lr * regularization` per step whatever the gradient's scale), so the "
        "reference is defined by its trajectory (N(0, 1) start, 2000 steps); `solver=\"newton\"` minimises "
        "the explicit MAP objective mean BCE + `regularization / (2 n_obs)` (||U||^2 + ||V||^2) to a relative "
        "tolerance. They are compared by what matters downstream, the held-out log-loss.\n"
    )
    text = DOCS.read_text() if DOCS.exists() else "# Performance\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda m: body + "\n", text, count=1).rstrip("\n") + "\n"
    else:
        text = text.rstrip("\n") + "\n\n" + body
    DOCS.write_text(text)
    print(f"\nwrote the '{SECTION}' section of {DOCS}")


if __name__ == "__main__":
    sys.exit(main())
