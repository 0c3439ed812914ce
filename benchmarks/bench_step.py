"""Time one live evaluation step (select + answer + update) side by side with a reference.

The reference is the seed paper's formulation written plainly: at every round it forms
``V @ Sigma`` and the quadratic forms ``v_j' Sigma v_j`` from scratch, O(N k^2). The
library's step is timed in the same process on the same inputs, and the ratio is
reported (ratios, not absolute times, are what compare across machines).

    python benchmarks/bench_step.py [--questions 12032] [--components 64] [--steps 200]
"""

from __future__ import annotations

import argparse
import platform
import time
import tracemalloc

import numpy as np
from scipy.special import expit

import faqstats as fq
from faqstats.estimator import SequentialRun, _FactorPosterior


def reference_step(V, mean, cov, z, rng, tau, rho_weight):
    """Paper-style hybrid step: recompute every score from scratch, then Laplace update."""
    p = expit(V @ mean)
    w = p * (1 - p)
    SV = V @ cov
    g = (w[:, None] * V).mean(0)
    d = w * (SV @ g) ** 2 / (1 + w * np.einsum("jk,jk->j", SV, V))
    s = np.sqrt(w)
    h = (1 - rho_weight) * s / s.sum() + rho_weight * d / d.sum()
    q = tau / V.shape[0] + (1 - tau) * h / h.sum()
    j = rng.choice(V.shape[0], p=q)
    Sv = cov @ V[j]
    denom = 1 + w[j] * V[j] @ Sv
    cov = cov - w[j] * np.outer(Sv, Sv) / denom
    mean = mean + Sv / denom * (z[j] - p[j])
    return mean, cov


def time_library(V, prior_mean, prior_cov, z, steps, sampler):
    run = SequentialRun(V.shape[0], steps, sampler.replace, posterior=_FactorPosterior(V, prior_mean, prior_cov))
    rng = np.random.default_rng(0)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        q = sampler.probabilities(run.state())
        j = int(rng.choice(q.size, p=q))
        run.record(j, float(q[j]), float(z[j]))
        times.append(time.perf_counter() - t0)
    return np.array(times)


def time_reference(V, prior_mean, prior_cov, z, steps, rho_weight):
    rng = np.random.default_rng(0)
    mean, cov = prior_mean.copy(), prior_cov.copy()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        mean, cov = reference_step(V, mean, cov, z, rng, 0.5, rho_weight)
        times.append(time.perf_counter() - t0)
    return np.array(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=12032)
    ap.add_argument("--components", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    N, k = args.questions, args.components
    V = rng.normal(size=(N, k)) / np.sqrt(k)
    U = rng.normal(size=(500, k))
    fm = fq.LogisticFactorModel.from_factors(V, model_factors=U)
    z = (rng.random(N) < expit(V @ U[0])).astype(float)

    print(f"machine: {platform.processor() or platform.machine()}, numpy {np.__version__}, N={N}, k={k}")
    print(f"{'policy':<40} {'library ms':>10} {'reference ms':>12} {'ratio':>6} {'peak MiB':>9}")
    for name, sampler, rho_weight in [
        ("hybrid, oracle score only (rho=0)", fq.HybridSampler(replace=True), 0.0),
        ("hybrid, with active learning (rho=1)", fq.HybridSampler(rho=1.0, replace=True), 1.0),
    ]:
        tracemalloc.start()
        lib = time_library(V, fm.prior_mean_, fm.prior_cov_, z, args.steps, sampler)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        ref = time_reference(V, fm.prior_mean_, fm.prior_cov_, z, args.steps, rho_weight)
        ml, mr = 1e3 * np.median(lib), 1e3 * np.median(ref)
        print(f"{name:<40} {ml:>10.3f} {mr:>12.3f} {mr / ml:>6.2f} {peak:>9.1f}")


if __name__ == "__main__":
    main()
