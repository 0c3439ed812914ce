"""Paper-scale simulation: every model of a 2,211 x 9,574 bank evaluated once at a 10% budget.

The bank is drawn once from the seed paper's published factors
(``../shared/data/paper_factors_bbh.npz``, k = 64; ``faqstats.draw_bank_from_factors``,
seed 0). Each of the 2,211 models is a "new model": the factor model is the published
question factors with the mean and covariance of all model factors as prior. The
default policy (``HybridSampler()``) runs 957 queries (10%) per model, one seed.

Side by side in the same process:

* **batched**: ``faqstats.batched.simulate`` (all models in lockstep, torch),
* **reference**: the paper's per-model loop in its O(N k^2) formulation (every round
  forms ``V @ Sigma`` and all quadratic forms ``v_j' Sigma v_j`` for the
  active-learning score), timed on ``--reference-models`` models and scaled to all of
  them (it would take hours in full); the per-model time is the median over those models.

Ratios, not absolute times, compare across machines. Peak memory is the process's
maximum resident set size. Run on an otherwise idle machine.

    python benchmarks/bench_simulation.py [--dtype float64] [--reference-models 2] [--quick]
                                          [--write docs/performance.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import time
from pathlib import Path

import numpy as np
import torch

import faqstats as fq
from faqstats.batched import simulate

FACTORS = Path(__file__).resolve().parents[2] / "shared" / "data" / "paper_factors_bbh.npz"
MARK_BEGIN = "<!-- bench_simulation:begin -->"
MARK_END = "<!-- bench_simulation:end -->"


def reference_run(V, prior_mean, prior_cov, z, budget, rng, tau=0.5):
    """One model, the paper's formulation: O(N k^2) active-learning terms every round
    (computed as the paper's code does even when their weight is zero), with-replacement
    draws, Laplace updates; returns the PAI estimate."""
    from scipy.special import expit

    mean, cov = prior_mean.copy(), prior_cov.copy()
    N = V.shape[0]
    phi = []
    for _ in range(budget):
        p = expit(V @ mean)
        w = p * (1 - p)
        SV = V @ cov
        g = (w[:, None] * V).mean(0)
        d = w * (SV @ g) ** 2 / (1 + w * np.einsum("jk,jk->j", SV, V))  # noqa: F841 (paper computes it)
        s = np.sqrt(w)
        q = tau / N + (1 - tau) * s / s.sum()
        j = rng.choice(N, p=q)
        phi.append((p.sum() + (z[j] - p[j]) / q[j]) / N)
        Sv = cov @ V[j]
        denom = 1 + w[j] * V[j] @ Sv
        cov = cov - w[j] * np.outer(Sv, Sv) / denom
        mean = mean + Sv / denom * (z[j] - p[j])
    return float(np.mean(phi))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--budget-fraction", type=float, default=0.10)
    ap.add_argument("--reference-models", type=int, default=2)
    ap.add_argument("--estimator-models", type=int, default=5,
                    help="models also run one at a time through PAIEstimator (same draws) for a third row")
    ap.add_argument("--quick", action="store_true", help="300 models x 2,000 questions (a smoke run)")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads (default torch's; 1 is far faster when other processes load the cores)")
    ap.add_argument("--write", default=None, help="replace the simulation section of this markdown file")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if not FACTORS.exists():
        raise SystemExit(f"{FACTORS} not found: this benchmark needs ../shared/data.")
    with np.load(FACTORS) as d:
        U, V = d["model_factors"].astype(float), d["question_factors"].astype(float)
    if args.quick:
        U, V = U[:300], V[:2000]
    t0 = time.perf_counter()
    Z = fq.draw_bank_from_factors(U, V, random_state=0)
    draw_s = time.perf_counter() - t0
    M, N = Z.shape
    k = V.shape[1]
    budget = int(round(args.budget_fraction * N))
    fm = fq.LogisticFactorModel.from_factors(V, U.mean(0), np.cov(U.T))
    gens = [np.random.default_rng([0, i]) for i in range(M)]

    t0 = time.perf_counter()
    runs = simulate(Z, gens, predictor=fm, budget=budget, device=args.device, dtype=args.dtype)
    batched_s = time.perf_counter() - t0
    truth = Z.mean(1)
    coverage = np.mean((runs.low <= truth) & (truth <= runs.high))

    ref_times = []
    for i in range(args.reference_models):
        t0 = time.perf_counter()
        reference_run(V, U.mean(0), np.cov(U.T), Z[i], budget, np.random.default_rng([1, i]))
        ref_times.append(time.perf_counter() - t0)
    ref_per_model = float(np.median(ref_times))
    est_times, agree = [], []
    for i in range(args.estimator_models):
        t0 = time.perf_counter()
        est = fq.PAIEstimator(fm, budget=budget, random_state=np.random.default_rng([0, i])).fit(Z[i])
        est_times.append(time.perf_counter() - t0)
        agree.append(abs(float(est.estimate_) - float(runs.estimate[i])))  # in float64, also for float32 runs
    est_per_model = float(np.median(est_times)) if est_times else float("nan")
    ref_total = ref_per_model * M
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")

    lines = [
        f"machine: {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), numpy {np.__version__}; load average at the end {load:.1f}",
        f"bank {M} x {N} (k = {k}, drawn in {draw_s:.0f} s), budget {budget} queries ({100 * args.budget_fraction:g}%), "
        f"one seed, HybridSampler(), dtype {args.dtype}, device {args.device}",
        "",
        "| what | time | per model | ratio |",
        "|---|---:|---:|---:|",
        f"| batched engine, all {M} models | {batched_s:.0f} s | {1000 * batched_s / M:.0f} ms | 1 |",
        f"| PAIEstimator one model at a time (O(N k) per step), {args.estimator_models} models timed, x {M} | "
        f"{est_per_model * M / 60:.0f} min (extrapolated) | {est_per_model:.2f} s | "
        f"{est_per_model * M / batched_s:.1f}x slower |",
        f"| paper's O(N k^2) loop, {args.reference_models} models timed, x {M} | {ref_total / 3600:.1f} h "
        f"(extrapolated) | {ref_per_model:.1f} s | {ref_total / batched_s:.0f}x slower |",
        "",
        f"coverage of the 95% intervals over the {M} models: {coverage:.3f}; peak RSS {peak_mib:.0f} MiB; "
        f"batched vs PAIEstimator (float64) estimates differ by at most {max(agree, default=float('nan')):.1e}"
        + (" (float32 runs round differently and now and then draw another question)" if args.dtype == "float32" else ""),
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        path = Path(args.write)
        doc = path.read_text() if path.exists() else ""
        section = (f"{MARK_BEGIN}\n## Paper-scale simulation\n\n`python benchmarks/bench_simulation.py"
                   f"{' --dtype ' + args.dtype if args.dtype != 'float64' else ''}` ({time.strftime('%Y-%m-%d')}):\n\n"
                   f"{text}\n{MARK_END}")
        if MARK_BEGIN in doc:
            doc = doc[: doc.index(MARK_BEGIN)] + section + doc[doc.index(MARK_END) + len(MARK_END):]
        else:
            doc = doc.rstrip() + "\n\n" + section + "\n"
        path.write_text(doc)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
