"""Time and memory of the model-based estimator: its default (the surrogate averaged with an ability model) against
the surrogate alone, the reference, side by side in one run.

The bank is openllm_v1's complete rows (``../shared/data/openllm_v1.npz``: 400 of them as the history, 10 new models),
or a synthetic bank of the same shape when that file is absent. For each predictor: the calibration (``from_history``:
cross-fitted runs on up to 200 held-out history models), then ``fit`` on new models; ``peak`` is the tracemalloc
peak of Python/numpy allocations during the calibration. Then ``budget_report`` at 2.5/5/10/25% of the bank,
against the reference of one ``from_history`` calibration per budget (the same reports: the folds' predictors are
fitted once for every budget). The machine may be shared: compare the ratios of one run.

    python benchmarks/bench_model_based.py                 # budget 35 (5% of 693 questions)
    python benchmarks/bench_model_based.py --quick         # a smaller synthetic bank, seconds
    python benchmarks/bench_model_based.py --write docs/performance.md   # replace the section there
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import tracemalloc
from pathlib import Path

import numpy as np

import faqstats as fq
from faqstats.model_based import ModelBasedEstimator

ROOT = Path(__file__).resolve().parents[1]
OPENLLM = ROOT.parent / "shared" / "data" / "openllm_v1.npz"
MARK_BEGIN = "<!-- bench_model_based:begin -->"
MARK_END = "<!-- bench_model_based:end -->"


def load_bank(quick):
    """``(history, new models, description)``."""
    if not quick and OPENLLM.exists():
        with np.load(OPENLLM, allow_pickle=False) as f:
            O = f["outcomes"].astype(float)
        O[O < 0] = np.nan
        M = O[~np.isnan(O).any(axis=1)]
        perm = np.random.default_rng(0).permutation(M.shape[0])
        return M[perm[10:410]], M[perm[:10]], f"openllm_v1 complete rows: history {400} x {M.shape[1]}, 10 new"
    shape = (60, 150) if quick else (400, 693)
    bank = fq.make_synthetic_bank(n_models=shape[0], n_questions=shape[1], n_new=10, random_state=0)
    return bank.history, bank.new_outcomes, f"synthetic: history {shape[0]} x {shape[1]}, 10 new"


def measure(history, new, budget, predictor, n_fits):
    """``(calibration seconds, fit milliseconds per run, calibration peak MiB)``."""
    tracemalloc.start()
    t0 = time.perf_counter()
    est = ModelBasedEstimator.from_history(history, budget=budget, predictor=predictor, random_state=0, verbose=False)
    t1 = time.perf_counter()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    for s in range(n_fits):
        est.set_params(random_state=s).fit(new[s % len(new)])
    t2 = time.perf_counter()
    return t1 - t0, 1000 * (t2 - t1) / n_fits, peak


def time_budget_report(history, budgets):
    """``(seconds of one calibration per budget, seconds of budget_report)``, after checking they report the same."""
    t0 = time.perf_counter()
    alone = [ModelBasedEstimator.from_history(history, budget=b, random_state=0, verbose=False).calibration_report()
             for b in budgets]
    t1 = time.perf_counter()
    report = ModelBasedEstimator.budget_report(history, budgets, random_state=0, verbose=False)
    t2 = time.perf_counter()
    if not all(report.loc[b].equals(r) for b, r in zip(budgets, alone)):
        raise AssertionError("budget_report differs from the per-budget calibrations")
    return t1 - t0, t2 - t1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=int, default=None, help="queries per model (default: 5%% of the bank)")
    ap.add_argument("--fits", type=int, default=40, help="new-model runs timed")
    ap.add_argument("--quick", action="store_true", help="a 60 x 150 synthetic bank (a smoke run)")
    ap.add_argument("--write", default=None, help="replace the model-based section of this markdown file")
    args = ap.parse_args()
    history, new, label = load_bank(args.quick)
    budget = args.budget or max(2, round(0.05 * history.shape[1]))
    rows = {"surrogate alone (reference)": fq.GaussianProcessSurrogate(noise_floor=0.1, random_state=0),
            "default: surrogate + ability, averaged": None}
    results = {name: measure(history, new, budget, predictor, args.fits) for name, predictor in rows.items()}
    ref = results["surrogate alone (reference)"]
    lines = [MARK_BEGIN, "## Model-based estimates", "",
             f"`python benchmarks/bench_model_based.py{' --quick' if args.quick else ''}` (with nothing else running):",
             "", f"machine: {platform.machine()}, {os.cpu_count()} cores, numpy {np.__version__}",
             f"bank: {label}; budget {budget} queries; calibration on up to 200 held-out history models (10 folds)", "",
             "| predictor | calibration | ratio | fit, per new model | ratio | calibration peak (Python/numpy) |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, (cal, fit, peak) in results.items():
        lines.append(f"| {name} | {cal:.1f} s | {cal / ref[0]:.1f} | {fit:.1f} ms | {fit / ref[1]:.1f} "
                     f"| {peak:.0f} MiB |")
    budgets = sorted({max(2, round(f * history.shape[1])) for f in (0.025, 0.05, 0.1, 0.25)})
    alone, shared = time_budget_report(history, budgets)
    lines += ["", f"`budget_report` at {', '.join(map(str, budgets))} queries (the same reports):", "",
              "| calibrations | time | ratio |", "|---|---:|---:|",
              f"| one `from_history` per budget (reference) | {alone:.1f} s | 1.0 |",
              f"| `budget_report`: the folds' predictors fitted once | {shared:.1f} s | {shared / alone:.2f} |",
              MARK_END]
    text = "\n".join(lines)
    print(text)
    if args.write:
        path = Path(args.write)
        doc = path.read_text()
        if MARK_BEGIN in doc:
            head, rest = doc.split(MARK_BEGIN, 1)
            doc = head + text + rest.split(MARK_END, 1)[1]
        else:
            doc = doc.rstrip("\n") + "\n\n" + text + "\n"
        path.write_text(doc)


if __name__ == "__main__":
    main()
