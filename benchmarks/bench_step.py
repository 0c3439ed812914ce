"""Time one live evaluation step (select + answer + update) side by side with a reference.

The reference is the seed paper's formulation written plainly: at every round it forms
``V @ Sigma`` and the quadratic forms ``v_j' Sigma v_j`` from scratch, O(N k^2). The
library's step is one round of one draw of a run (``SequentialRun.draw_round`` then
``record`` and ``end_round``: the policy's law, the two-level draw, the increment, the
Laplace update and new predictions; what earlier versions timed as ``draw_next`` then
``record``), timed in the same process on the same inputs, and the ratio is reported
(ratios, not absolute times, are what compare across machines). The row "through
QueryLoop" adds the loop's bookkeeping that ``PAIEstimator.fit`` and the session run
around it. The library keeps the quadratic forms up to date with one
O(N k) downdate per answer; the row "scores from scratch" times the library with that
cache bypassed (its behaviour before the cache), on the same draws.

A breakdown of the active-learning step follows: each part timed alone on the same data
(median over repeats), to show what dominates. Every pass over ``V`` (N x k float64,
N k 8 bytes) is a memory-bound matrix-vector product; one step makes four of them.

Shared machines are noisy: each loop is run ``--repeats`` times (library and reference
alternating) and the best of the per-repeat medians is reported.

    python benchmarks/bench_step.py [--questions 12032] [--components 64] [--steps 200]
                                    [--repeats 3] [--blas-threads 1]
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import time
import tracemalloc

import numpy as np
from scipy.special import expit

import faqstats as fq
from faqstats._engine import QueryLoop, SequentialRun
from faqstats.posterior import FactorPosterior, GaussianPosterior, laplace_step
from faqstats.sampling import PolicyState, draw_from, oracle_scores, quadratic_forms_from_scratch


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


def gaussian_posterior(V, prior_mean, prior_cov, z):
    """The Gaussian-process surrogate's predictor on the same factors (mean 0.5, noise 0.1)."""
    N = V.shape[0]
    return GaussianPosterior(V, prior_mean, prior_cov, np.full(N, 0.5), np.full(N, 0.1))


def time_library(V, prior_mean, prior_cov, z, steps, sampler, dtype="float64", loop=False, predict_every=1):
    """One round of one draw per step: the run's ``draw_round``, ``record`` and
    ``end_round``; with ``loop=True`` through the ``QueryLoop`` ``PAIEstimator.fit`` drives;
    with ``dtype="gp"`` the Gaussian-process surrogate's predictor instead of the factor posterior;
    ``predict_every`` as in ``PAIEstimator``."""
    if dtype == "gp":
        predictor = gaussian_posterior(V, prior_mean, prior_cov, z)
    else:
        predictor = FactorPosterior(V, prior_mean, prior_cov, dtype=dtype, predict_every=predict_every)
    run = SequentialRun(sampler, predictor, V.shape[0], steps)
    query_loop = QueryLoop(run)
    rng = np.random.default_rng(0)
    times, questions = [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        if loop:
            (draw,) = query_loop.draw_round(rng)
            j = draw.question
            query_loop.record(float(z[j]))
        else:
            ((j, q_j, _),) = run.draw_round(rng, 1)
            run.record(j, q_j, float(z[j]))
            run.end_round([j], [float(z[j])])
        times.append(time.perf_counter() - t0)
        questions.append(j)
    return np.array(times), questions


def time_reference(V, prior_mean, prior_cov, z, steps, rho_weight):
    rng = np.random.default_rng(0)
    mean, cov = prior_mean.copy(), prior_cov.copy()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        mean, cov = reference_step(V, mean, cov, z, rng, 0.5, rho_weight)
        times.append(time.perf_counter() - t0)
    return np.array(times)


@contextlib.contextmanager
def scores_from_scratch():
    """Bypass the posterior's cache: the quadratic forms recomputed every round (O(N k^2))."""
    cached = PolicyState.quadratic_forms
    PolicyState.quadratic_forms = lambda s: quadratic_forms_from_scratch(s.question_factors, s.posterior_cov)
    try:
        yield
    finally:
        PolicyState.quadratic_forms = cached


def peak_mib(fn):
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return peak


def median_us(fn, repeat=200):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e6 * float(np.median(times))


def _warm_run(V, prior_mean, prior_cov, z, sampler, answers=20):
    """A run after ``answers`` answers of ``sampler``'s draws, and its generator."""
    run = SequentialRun(sampler, FactorPosterior(V, prior_mean, prior_cov), V.shape[0], 200)
    rng = np.random.default_rng(0)
    for _ in range(answers):
        ((j, q_j, _),) = run.draw_round(rng, 1)
        run.record(j, q_j, float(z[j]))
        run.end_round([j], [float(z[j])])
    return run, rng


def breakdown(V, prior_mean, prior_cov, z, sampler):
    """Median time of each part of one active-learning step, after 20 warm-up answers."""
    N = V.shape[0]
    run, rng = _warm_run(V, prior_mean, prior_cov, z, sampler)
    post, state = run.predictor, run.state()
    p, S, mean = post.predictions, post.cov, post.mean
    w = p * (1 - p)
    g = (w @ V) / N
    q = sampler.probabilities(state)
    j = int(np.argmax(q))
    Sv = S @ V[j]

    def update_copy():
        clone = FactorPosterior(V, post.mean, post.cov)
        clone.quadratic_forms()
        clone.update(j, float(z[j]))
        clone.quadratic_forms()

    parts = [
        ("run.state() (copies `available`)", lambda: run.state()),
        ("sampler.probabilities (whole select)", lambda: sampler.probabilities(state)),
        ("  g = w @ V / N            (pass over V)", lambda: (w @ V) / N),
        ("  V @ (S g)                (pass over V)", lambda: V @ (S @ g)),
        ("  rest of select (by difference)", None),
        ("draw_from (two-level inverse CDF)", lambda: draw_from(q, rng)),
        ("  rng.choice(N, p=q), for comparison", lambda: rng.choice(N, p=q)),
        ("update + quad downdate (incl. a fresh cache)", update_copy),
        ("  laplace_step (O(k^2))", lambda: laplace_step(mean, S, V[j], 1.0)),
        ("  V @ mean                 (pass over V)", lambda: V @ mean),
        ("  expit over N", lambda: expit(V[:, 0])),
        ("  V @ (S v)                (pass over V)", lambda: V @ Sv),
    ]
    timed = {name: (median_us(fn) if fn is not None else None) for name, fn in parts}
    rest = timed["sampler.probabilities (whole select)"] - timed["  g = w @ V / N            (pass over V)"]
    timed["  rest of select (by difference)"] = rest - timed["  V @ (S g)                (pass over V)"]
    return timed


def breakdown_default(V, prior_mean, prior_cov, z, sampler):
    """Median time of each part of one default-policy step, after 20 warm-up answers."""
    N = V.shape[0]
    run, rng = _warm_run(V, prior_mean, prior_cov, z, sampler)
    post, state = run.predictor, run.state()
    q = run.law()
    parts = [
        ("run.draw_round(rng, 1) (law + draw)", lambda: run.draw_round(rng, 1)),
        ("  run.state()", run.state),
        ("  run.law() (scores, mixture, checks)", run.law),
        ("    sampler.probabilities (mixture)", lambda: sampler.probabilities(state)),
        ("  draw_from (two-level inverse CDF)", lambda: draw_from(q, rng)),
        ("  rng.choice(N, p=q), for comparison", lambda: rng.choice(N, p=q)),
        ("  oracle_scores from p (posterior: h p)", lambda: oracle_scores(post.predictions)),
        ("record: sum of unasked predictions", run.base),
        ("Laplace step (O(k^2))", lambda: laplace_step(post.mean, post.cov, V[0], 1.0)),
        ("predictions (V @ mean, exp-based sigmoid)", post._predict),
        ("  V @ mean                 (pass over V)", lambda: V @ post.mean),
        ("  scipy expit over N, for comparison", lambda: expit(V @ post.mean)),
    ]
    return {name: median_us(fn) for name, fn in parts}


def same_as_choice(q, draws=2000):
    """Whether ``draw_from`` picks ``Generator.choice(p=q)``'s questions from the same generator."""
    a, b = np.random.default_rng(7), np.random.default_rng(7)
    picks_a = [int(a.choice(q.size, p=q)) for _ in range(draws)]
    picks_b = [draw_from(q, b)[0] for _ in range(draws)]
    return picks_a == picks_b and a.random() == b.random()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=12032)
    ap.add_argument("--components", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--blas-threads", type=int, default=None, help="limit BLAS threads (threadpoolctl)")
    args = ap.parse_args(argv)
    limit = contextlib.nullcontext()
    if args.blas_threads is not None:
        from threadpoolctl import threadpool_limits

        limit = threadpool_limits(limits=args.blas_threads, user_api="blas")
    with limit:
        run_benchmark(args)


def run_benchmark(args):
    rng = np.random.default_rng(0)
    N, k = args.questions, args.components
    V = rng.normal(size=(N, k)) / np.sqrt(k)
    U = rng.normal(size=(500, k))
    fm = fq.LogisticFactorModel.from_factors(V, model_factors=U)
    z = (rng.random(N) < expit(V @ U[0])).astype(float)
    try:
        from threadpoolctl import threadpool_info

        threads = ",".join(str(i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas")
    except ImportError:  # pragma: no cover
        threads = "?"

    print(f"machine: {platform.processor() or platform.machine()}, numpy {np.__version__}, BLAS threads {threads}, N={N}, k={k}")
    print(f"best of {args.repeats} medians of {args.steps} steps (select + draw + answer + update); rows with a "
          "schedule: means (every few steps pays for the predictions)")
    print(f"{'policy':<44} {'library ms':>10} {'reference ms':>12} {'ratio':>6} {'peak MiB':>9}")
    al = fq.HybridSampler(rho=1.0, replace=True)
    default = fq.HybridSampler()
    rows = [
        ("default: HybridSampler() (rho=0, no replace)", default, 0.0, contextlib.nullcontext, "float64"),
        ("  same, through QueryLoop (as in fit)", default, 0.0, contextlib.nullcontext, "loop"),
        ("  same, dtype='float32' predictions (opt-in)", default, 0.0, contextlib.nullcontext, "float32"),
        ("  same, GP surrogate's predictor (issue 18)", default, 0.0, contextlib.nullcontext, "gp"),
        ("  same, predict_every=2 (issue 16)", default, 0.0, contextlib.nullcontext, 2),
        ("  same, predict_every=4", default, 0.0, contextlib.nullcontext, 4),
        ("hybrid, oracle score only (rho=0, replace)", fq.HybridSampler(replace=True), 0.0, contextlib.nullcontext,
         "float64"),
        ("hybrid, with active learning (rho=1)", al, 1.0, contextlib.nullcontext, "float64"),
        ("  same, scores from scratch (no cache)", al, 1.0, scores_from_scratch, "float64"),
    ]
    ref_cache = {}
    picked, step_ms = {}, {}
    for name, sampler, rho_weight, ctx, dtype in rows:
        lib_medians, ref_medians = [], []
        for _ in range(args.repeats):
            every = dtype if isinstance(dtype, int) else 1
            with ctx():
                lib, picked[name] = time_library(V, fm.prior_mean_, fm.prior_cov_, z, args.steps, sampler,
                                                 "float64" if dtype == "loop" or every > 1 else dtype,
                                                 dtype == "loop", every)
            lib_medians.append(np.median(lib) if every == 1 else np.mean(lib))
            if rho_weight not in ref_cache:
                ref = time_reference(V, fm.prior_mean_, fm.prior_cov_, z, args.steps, rho_weight)
                ref_medians.append(np.median(ref))
        if rho_weight not in ref_cache:
            ref_cache[rho_weight] = min(ref_medians)
        with ctx():
            peak = peak_mib(lambda: time_library(V, fm.prior_mean_, fm.prior_cov_, z, 20, sampler))
        ml, mr = 1e3 * min(lib_medians), 1e3 * ref_cache[rho_weight]
        step_ms[name] = ml
        print(f"{name:<44} {ml:>10.3f} {mr:>12.3f} {mr / ml:>6.2f} {peak:>9.1f}")
    gp_ms, fp_ms = step_ms[rows[3][0]], step_ms[rows[0][0]]
    post = gaussian_posterior(V, fm.prior_mean_, fm.prior_cov_, z)
    update_us = median_us(lambda: post.update(int(rng.integers(N)), 1.0))
    print(f"GP surrogate's step: {gp_ms:.3f} ms, {gp_ms / fp_ms:.2f}x the factor posterior's; its update alone "
          f"(Kalman step + predictions) {update_us / 1e3:.3f} ms")
    agree = np.mean(np.array(picked[rows[0][0]]) == np.array(picked[rows[2][0]]))
    print(f"float32 predictions asked the same question as float64 at {agree:.0%} of the {args.steps} steps")
    same = picked[rows[7][0]] == picked[rows[8][0]] and picked[rows[0][0]] == picked[rows[1][0]]
    print(f"cached and from-scratch scores, run and loop, asked the same {args.steps} questions: {same}")
    print(f"\nbreakdown of one default-policy step (median us, parts timed alone with warm caches)")
    for part, us in breakdown_default(V, fm.prior_mean_, fm.prior_cov_, z, default).items():
        print(f"  {part:<44} {us:>8.0f}")
    print(f"\nbreakdown of one active-learning step (median us; N k float64 = {N * k * 8 / 2**20:.1f} MiB per pass over V)")
    for part, us in breakdown(V, fm.prior_mean_, fm.prior_cov_, z, al).items():
        print(f"  {part:<44} {us:>8.0f}")
    q = np.random.default_rng(3).random(N)
    print(f"draw_from asks what Generator.choice asks, with one uniform per draw: {same_as_choice(q / q.sum())}")


if __name__ == "__main__":
    main()
