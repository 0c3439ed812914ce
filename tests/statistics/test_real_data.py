"""Validity and efficiency of FAQ/PAI on real leaderboard data (openllm_v1).

Setting of ``../shared/NOTES.md`` fact 1: complete rows of ``openllm_v1.npz`` (2461
models x 693 items), a seeded random 75% of them as history for a
``LogisticFactorModel(k=16, regularization=0.1, 2000 AdamW steps)``, the remaining 615 as new
models, budget 10% of the bank (69 queries), hybrid policy beta0=1, rho=gamma=0.

The data live outside the repository (``<repo>/../shared/data``) and are never
copied into it; every test here is skipped when the file is absent.

Run the statistical checks with ``python -m pytest tests/statistics/test_real_data.py -m slow -q -s``.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from scipy import stats

import faqstats as fq
from tests.paths import SHARED_DATA

DATA_DIR = SHARED_DATA
DATA_FILE = DATA_DIR / "openllm_v1.npz"
pytestmark = pytest.mark.slow  # real data: out of the default run (pyproject.toml)

#: seed of the random permutation of the complete rows that splits history / new models
SPLIT_SEED = 0
HISTORY_FRACTION = 0.75
#: 10% of the 693-item bank
BUDGET = 69
#: root of every per-run seed: run (model i, repeat r) uses default_rng([RUN_SEED, i, r])
RUN_SEED = 1
#: repeats per new model in the coverage study: 615 models x 3 = 1845 runs
N_REPEATS = 3


def _run_rng(model, repeat):
    return np.random.default_rng([RUN_SEED, model, repeat])


@pytest.fixture(scope="module")
def openllm_split():
    """``(history, new)``: complete rows of openllm_v1, permuted with seed ``SPLIT_SEED`` (0), 75% / 25%."""
    if not DATA_FILE.exists():
        pytest.skip(f"real data not available: {DATA_FILE} is absent")
    matrix, _ = fq.load_response_matrix(DATA_FILE)
    complete = matrix[~np.isnan(matrix).any(axis=1)]
    perm = np.random.default_rng(SPLIT_SEED).permutation(complete.shape[0])
    n_history = int(round(HISTORY_FRACTION * complete.shape[0]))
    history = complete[perm[:n_history]]
    new = complete[perm[n_history:]]
    return history, new


@pytest.fixture(scope="module")
def factor_model(openllm_split):
    """The NOTES fact 1 fit: k=16, alpha=0.1, 2000 full-batch AdamW steps (tens of seconds on 2 CPUs)."""
    history, _ = openllm_split
    start = time.perf_counter()
    fm = fq.LogisticFactorModel(n_components=16, regularization=0.1, max_iter=2000, random_state=0).fit(history)
    print(f"\n[openllm_v1] factor fit, 2000 steps on {history.shape}: {time.perf_counter() - start:.1f} s")
    return fm


@pytest.fixture(scope="module")
def quick_factor_model(openllm_split):
    """Same model with 500 steps (about 8 s on 2 idle CPUs) so the smoke test stays fast."""
    history, _ = openllm_split
    return fq.LogisticFactorModel(n_components=16, regularization=0.1, max_iter=500, random_state=0).fit(history)


def test_split_shape(openllm_split):
    history, new = openllm_split
    assert history.shape == (1846, 693)
    assert new.shape == (615, 693)
    assert not np.isnan(history).any() and not np.isnan(new).any()


def test_smoke_without_replacement(openllm_split, quick_factor_model):
    """A few new models, 69 queries, hybrid tau=0.25 without replacement."""
    _, new = openllm_split
    models = np.random.default_rng(RUN_SEED).choice(new.shape[0], size=3, replace=False)
    for i in models:
        theta = new[i].mean()
        est = fq.PAIEstimator(
            quick_factor_model, fq.HybridSampler(tau=0.25, replace=False), budget=BUDGET, random_state=int(i)
        ).fit(new[i])
        low, high = est.confint(alpha=0.05)
        assert 0.0 <= low <= est.estimate_ <= high <= 1.0
        assert est.n_queries_ == BUDGET  # without replacement: 69 distinct questions
        assert np.unique(est.queries_["question"]).size == BUDGET
        # typical standard error is about 0.03; 0.15 is a loose sanity bound
        assert abs(est.estimate_ - theta) < 0.15, (i, est.estimate_, theta)


@pytest.fixture(scope="module")
def uniform_baseline(openllm_split):
    """FPC sample mean (uniform without replacement, no predictor) on every (model, repeat) run.

    Returns arrays ``estimate`` and ``variance`` of shape (n_new, N_REPEATS).
    """
    _, new = openllm_split
    est = np.empty((new.shape[0], N_REPEATS))
    var = np.empty_like(est)
    for i in range(new.shape[0]):
        for r in range(N_REPEATS):
            e = fq.PAIEstimator(
                predictor=None, sampler=fq.UniformSampler(replace=False), budget=BUDGET, random_state=_run_rng(i, r)
            ).fit(new[i])
            est[i, r] = e.estimate_
            var[i, r] = e.std_error_**2
    return est, var


# The default policy, HybridSampler() = tau 0.5 without replacement, carries the
# validity bar (issue 2: >= 0.93 at 10%). With the default robust-t interval the
# measured coverage was 0.943-0.944 for tau 0.5/0.25 and 0.933 for the paper's
# tau=0.05 with replacement (whose increments are heaviest-tailed), so that one
# gets a 0.92 floor. The printout also gives the normal and t(n-1) coverages.
@pytest.mark.slow
@pytest.mark.parametrize(
    "tau, replace, min_coverage",
    [
        pytest.param(0.5, False, 0.93, id="default-tau0.5-without"),
        pytest.param(0.5, True, 0.93, id="tau0.5-with"),
        pytest.param(0.25, False, 0.93, id="tau0.25-without"),
        pytest.param(0.05, True, 0.92, id="paper-tau0.05-with"),
    ],
)
def test_coverage_and_efficiency(openllm_split, factor_model, uniform_baseline, tau, replace, min_coverage):
    """Coverage of the default 95% interval (martingale variance) at a 10% budget over 1845 runs."""
    _, new = openllm_split
    theta = new.mean(axis=1)
    n_new = new.shape[0]
    est = np.empty((n_new, N_REPEATS))
    var = np.empty_like(est)
    covered = np.empty_like(est, dtype=bool)
    covered_other = {"normal": np.empty_like(est, dtype=bool), "t": np.empty_like(est, dtype=bool)}
    width = np.empty_like(est)
    start = time.perf_counter()
    for i in range(n_new):
        for r in range(N_REPEATS):
            sampler = fq.HybridSampler(tau=tau, beta0=1.0, rho=0.0, gamma=0.0, replace=replace)
            e = fq.PAIEstimator(factor_model, sampler, budget=BUDGET, random_state=_run_rng(i, r)).fit(new[i])
            low, high = e.confint(alpha=0.05)  # default interval: robust t
            for name, df in (("normal", None), ("t", BUDGET - 1)):
                lo_, hi_ = e.result_.__class__(**{**e.result_.to_dict(), "df": df}).conf_int(0.05)
                covered_other[name][i, r] = lo_ <= theta[i] <= hi_
            est[i, r] = e.estimate_
            var[i, r] = e.std_error_**2
            covered[i, r] = low <= theta[i] <= high
            width[i, r] = high - low
    elapsed = time.perf_counter() - start

    uni_est, uni_var = uniform_baseline
    n_runs = covered.size
    coverage = covered.mean()
    mc_se = np.sqrt(coverage * (1 - coverage) / n_runs)
    # ESS as in NOTES fact 4: ratio of mean variances over the same runs (not the mean of ratios)
    ess = uni_var.mean() / var.mean()
    err2 = (est - theta[:, None]) ** 2
    ess_mse = np.mean((uni_est - theta[:, None]) ** 2) / err2.mean()
    uni_covered = np.abs(uni_est - theta[:, None]) <= stats.norm.ppf(0.975) * np.sqrt(uni_var)
    print(
        f"\n[openllm_v1 tau={tau} replace={replace} budget={BUDGET} runs={n_runs}] "
        f"coverage={coverage:.4f} (MC se {mc_se:.4f}; normal quantile {covered_other['normal'].mean():.4f}, t(n-1) {covered_other['t'].mean():.4f}) mean width={width.mean():.4f} "
        f"ESS(var)={ess:.2f} ESS(mse)={ess_mse:.2f} E[V]/MSE={var.mean() / err2.mean():.3f} | "
        f"FPC sample mean: coverage={uni_covered.mean():.4f} "
        f"mean width={np.mean(2 * stats.norm.ppf(0.975) * np.sqrt(uni_var)):.4f} | {elapsed:.1f} s"
    )
    assert coverage >= min_coverage
    # measured 2.2-2.5 (variance) and 1.9-2.3 (MSE): a wide margin
    assert ess > 1.5
