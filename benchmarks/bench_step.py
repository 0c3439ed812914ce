"""Time one live evaluation step (select + answer + update) side by side with a reference.

The reference is the seed paper's formulation written plainly: at every round it forms
``V @ Sigma`` and the quadratic forms ``v_j' Sigma v_j`` from scratch, O(N k^2). The
library's step is timed in the same process on the same inputs, and the ratio is
reported (ratios, not absolute times, are what compare across machines). The library
keeps the quadratic forms up to date with one O(N k) downdate per answer; the row
"scores from scratch" times the library with that cache bypassed (its behaviour before
the cache), on the same draws.

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
from faqstats.estimator import SequentialRun, _FactorPosterior, draw_next, draw_question, within_round
from faqstats.factor_model import _laplace_step
from faqstats.sampling import PolicyState, Sampler, oracle_draw, oracle_scores, quadratic_forms_from_scratch


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


def time_library(V, prior_mean, prior_cov, z, steps, sampler, generic=False, dtype="float64"):
    """The estimator's step (``PAIEstimator._loop_sequential`` with ``batch_size=1``:
    ``draw_next`` then ``record``); ``generic=True``: the same step through the code paths
    before issue 7 (generic ``probabilities``, ``within_round`` copies, ``Generator.choice``,
    scipy's ``expit``)."""
    post = _FactorPosterior(V, prior_mean, prior_cov, dtype=dtype)
    if generic:
        post._predict = lambda: _expit_predict(post)
        post.predictions = post._predict()
    run = SequentialRun(V.shape[0], steps, sampler.replace, posterior=post)
    rng = np.random.default_rng(0)
    times, questions = [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        if generic:
            q = within_round(sampler.probabilities(run.state()), run.available.copy(), run.replace)
            j = int(rng.choice(q.size, p=q))
            q_j = float(q[j])
        else:
            j, q_j = draw_next(sampler, run, rng)
        run.record(j, q_j, float(z[j]))
        times.append(time.perf_counter() - t0)
        questions.append(j)
    return np.array(times), questions


def _expit_predict(post):
    post._scores = None
    return expit(post.V @ post.mean)


@contextlib.contextmanager
def generic_select():
    """Bypass the fused oracle-score path of ``Sampler.probabilities`` (before issue 7)."""
    fused = {cls: cls.__dict__["_oracle_normalisations"] for cls in (fq.HybridSampler, fq.NeymanSampler)}
    for cls in fused:
        cls._oracle_normalisations = Sampler._oracle_normalisations
    try:
        yield
    finally:
        for cls, fn in fused.items():
            cls._oracle_normalisations = fn


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


def breakdown(V, prior_mean, prior_cov, z, sampler):
    """Median time of each part of one active-learning step, after 20 warm-up answers."""
    N = V.shape[0]
    run = SequentialRun(N, 200, sampler.replace, posterior=_FactorPosterior(V, prior_mean, prior_cov))
    rng = np.random.default_rng(0)
    for _ in range(20):
        q = sampler.probabilities(run.state())
        j = int(rng.choice(q.size, p=q))
        run.record(j, float(q[j]), float(z[j]))
    post, state = run.posterior, run.state()
    p, S, mean = post.predictions, post.cov, post.mean
    w = p * (1 - p)
    g = (w @ V) / N
    q = sampler.probabilities(state)
    Sv = S @ V[j]
    cdf_rng = np.random.default_rng(1)

    def inverse_cdf():
        cdf = q.cumsum()
        cdf /= cdf[-1]
        return int(cdf.searchsorted(cdf_rng.random(), side="right"))

    def update_copy():
        clone = _FactorPosterior.__new__(_FactorPosterior)
        clone.__dict__.update(post.__dict__, _queued=[])
        clone.update(j, float(z[j]))
        clone.quadratic_forms()

    parts = [
        ("run.state() (copies `available`)", lambda: run.state()),
        ("sampler.probabilities (whole select)", lambda: sampler.probabilities(state)),
        ("  g = w @ V / N            (pass over V)", lambda: (w @ V) / N),
        ("  V @ (S g)                (pass over V)", lambda: V @ (S @ g)),
        ("  rest of select (by difference)", None),
        ("rng.choice(N, p=q)", lambda: rng.choice(N, p=q)),
        ("  inverse-CDF draw (cumsum+searchsorted)", inverse_cdf),
        ("update + quad downdate (whole)", update_copy),
        ("  laplace_update (O(k^2))", lambda: fq.laplace_update(mean, S, V[j], 1.0)),
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
    run = SequentialRun(N, 200, sampler.replace, posterior=_FactorPosterior(V, prior_mean, prior_cov))
    rng = np.random.default_rng(0)
    for _ in range(20):
        j, q_j = draw_next(sampler, run, rng)
        run.record(j, q_j, float(z[j]))
    post, state = run.posterior, run.state()
    q = within_round(sampler.probabilities(state), run.available, run.replace, own=True)
    x = V @ post.mean
    parts = [
        ("draw_next (oracle_draw: two-level, no q)", lambda: draw_next(sampler, run, rng)),
        ("  oracle_draw alone", lambda: oracle_draw(post.oracle_scores, run.asked, sampler.tau, rng)),
        ("  oracle_scores from p (sqrt; posterior: h p)", lambda: oracle_scores(post.predictions)),
        ("  before: probabilities (fused, full q)", lambda: sampler.probabilities(state)),
        ("  before: generic probabilities", lambda: _generic_probabilities(sampler, state)),
        ("  before: within_round (in place)", lambda: within_round(q.copy(), run.available, False, own=True)),
        ("  before: draw_question (exact choice)", lambda: draw_question(rng, q)),
        ("  before: rng.choice(N, p=q)", lambda: rng.choice(N, p=q)),
        ("record: sum of unasked predictions", run._base),
        ("Laplace step (O(k^2))", lambda: _laplace_step(post.mean, post.cov, V[j], 1.0, symmetric=True)),
        ("predictions (V @ mean, exp-based sigmoid)", post._predict),
        ("  V @ mean                 (pass over V)", lambda: V @ post.mean),
        ("  before: scipy expit over N", lambda: expit(x)),
    ]
    return {name: median_us(fn) for name, fn in parts}


def _generic_probabilities(sampler, state):
    with generic_select():
        return sampler.probabilities(state)


def same_stream_as_choice(q, draws=2000):
    """Whether the inverse-CDF draw consumes a Generator exactly as ``Generator.choice(p=...)``."""
    a, b = np.random.default_rng(7), np.random.default_rng(7)
    picks_a = [int(a.choice(q.size, p=q)) for _ in range(draws)]
    picks_b = [draw_question(b, q) for _ in range(draws)]
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
    print(f"best of {args.repeats} medians of {args.steps} steps (select + draw + answer + update)")
    print(f"{'policy':<44} {'library ms':>10} {'reference ms':>12} {'ratio':>6} {'peak MiB':>9}")
    al = fq.HybridSampler(rho=1.0, replace=True)
    default = fq.HybridSampler()
    rows = [
        ("default: HybridSampler() (rho=0, no replace)", default, 0.0, contextlib.nullcontext, False),
        ("  same, dtype='float32' predictions (opt-in)", default, 0.0, contextlib.nullcontext, "float32"),
        ("  same, generic select and choice (before)", default, 0.0, generic_select, True),
        ("hybrid, oracle score only (rho=0, replace)", fq.HybridSampler(replace=True), 0.0, contextlib.nullcontext,
         False),
        ("hybrid, with active learning (rho=1)", al, 1.0, contextlib.nullcontext, False),
        ("  same, scores from scratch (no cache)", al, 1.0, scores_from_scratch, False),
    ]
    ref_cache = {}
    picked = {}
    for name, sampler, rho_weight, ctx, generic in rows:
        lib_medians, ref_medians = [], []
        for _ in range(args.repeats):
            with ctx():
                lib, picked[name] = time_library(V, fm.prior_mean_, fm.prior_cov_, z, args.steps, sampler,
                                                 generic is True, "float32" if generic == "float32" else "float64")
            lib_medians.append(np.median(lib))
            if rho_weight not in ref_cache:
                ref = time_reference(V, fm.prior_mean_, fm.prior_cov_, z, args.steps, rho_weight)
                ref_medians.append(np.median(ref))
        if rho_weight not in ref_cache:
            ref_cache[rho_weight] = min(ref_medians)
        with ctx():
            peak = peak_mib(lambda: time_library(V, fm.prior_mean_, fm.prior_cov_, z, 20, sampler))
        ml, mr = 1e3 * min(lib_medians), 1e3 * ref_cache[rho_weight]
        print(f"{name:<44} {ml:>10.3f} {mr:>12.3f} {mr / ml:>6.2f} {peak:>9.1f}")
    same = picked[rows[0][0]] == picked[rows[2][0]]
    print(f"fused and generic select/draw asked the same {args.steps} questions: {same}")
    agree = np.mean(np.array(picked[rows[0][0]]) == np.array(picked[rows[1][0]]))
    print(f"float32 predictions asked the same question as float64 at {agree:.0%} of the {args.steps} steps")
    same = picked[rows[4][0]] == picked[rows[5][0]]
    print(f"cached and from-scratch scores asked the same {args.steps} questions: {same}")
    print(f"\nbreakdown of one default-policy step (median us, parts timed alone with warm caches)")
    for part, us in breakdown_default(V, fm.prior_mean_, fm.prior_cov_, z, default).items():
        print(f"  {part:<44} {us:>8.0f}")
    print(f"\nbreakdown of one active-learning step (median us; N k float64 = {N * k * 8 / 2**20:.1f} MiB per pass over V)")
    for part, us in breakdown(V, fm.prior_mean_, fm.prior_cov_, z, al).items():
        print(f"  {part:<44} {us:>8.0f}")
    q = np.random.default_rng(3).random(N)
    print(f"draw_question consumes the generator exactly like Generator.choice: {same_stream_as_choice(q / q.sum())}")


if __name__ == "__main__":
    main()
