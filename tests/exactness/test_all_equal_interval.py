"""The sample mean's interval when every answer drawn is the same: exact by the hypergeometric law, where the
variance estimate is zero (and a Wald interval would have zero width)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import faqstats as fq
from faqstats._inference import all_equal_interval, fpc_mean, interval_df
from faqstats.batched import simulate
from faqstats.results import AccuracyResult

ALPHA = 0.05


def exact_coverage(K, N, n, method="sample_mean", alpha=ALPHA):
    """Coverage of the sample mean's interval on a 0/1 bank with ``K`` ones, by enumerating the ones drawn (the
    estimate, variance and degrees of freedom depend on the draws only through their count)."""
    theta, law, total = K / N, stats.hypergeom(N, K, n), 0.0
    for k in range(n + 1):
        z = np.r_[np.ones(k), np.zeros(n - k)]
        est, var = fpc_mean(z, N)
        result = AccuracyResult(est, float(np.sqrt(var)), n, N, method, "finite-population", interval_df("robust-t", z))
        low, high = result.conf_int(alpha)
        total += law.pmf(k) * (low <= theta <= high)
    return total


@pytest.mark.parametrize("N, n", [(30, 2), (30, 8), (200, 10), (200, 40)])
def test_all_ones_excludes_a_mean_only_where_all_ones_has_chance_below_alpha_over_2(N, n):
    low, high = all_equal_interval(1.0, n, N, ALPHA)
    assert high == 1.0
    for K in range(N + 1):  # every 0/1 bank: P(all n draws are ones and its mean is below the interval)
        p_all = stats.hypergeom(N, K, n).pmf(n)
        if K / N < low - 1e-12:
            assert p_all < ALPHA / 2
    # and the bound is as high as that allows: the bank at the bound draws all ones with chance >= alpha / 2
    assert stats.hypergeom(N, round(low * N), n).pmf(n) >= ALPHA / 2


@settings(max_examples=60, deadline=None)
@given(v=st.floats(0.0, 1.0), n=st.integers(2, 30), extra=st.integers(1, 300),
       alternative=st.sampled_from(["two-sided", "larger", "smaller"]))
def test_graded_answers_the_interval_holds_the_answer_and_its_bound_is_exact(v, n, extra, alternative):
    N = n + extra
    low, high = all_equal_interval(v, n, N, ALPHA, alternative)
    assert 0.0 <= low <= v + 1e-12 and v - 1e-12 <= high <= 1.0
    tail = ALPHA / 2 if alternative == "two-sided" else ALPHA
    if alternative != "smaller" and low > 0:
        # just below the bound, a bank with that mean holds too few answers equal to v (at most N theta / v) for
        # n draws to find only them with chance tail
        theta = low - 1e-9
        if theta > 0:
            K = int(min(N, np.floor(N * theta / v + 1e-12)))
            assert stats.hypergeom(N, K, n).pmf(n) < tail


@pytest.mark.parametrize("theta", [0.9, 0.95, 0.98])
@pytest.mark.parametrize("n", [10, 20, 40])
def test_sample_mean_coverage_on_high_accuracy_banks(theta, n):
    N = 500
    assert exact_coverage(round(theta * N), N, n) >= 0.95


def test_negative_control_the_wald_rule_alone_undercovers():
    # the same numbers reported as PAI's (no exact branch): all-ones runs get a zero-width interval
    assert exact_coverage(475, 500, 20, method="pai") < 0.70
    assert exact_coverage(475, 500, 20) >= 0.95


def test_every_bank_of_40_questions_is_covered_at_8_draws():
    assert min(exact_coverage(K, 40, 8) for K in range(41)) >= 0.95


def test_estimator_batched_and_summary_agree():
    z = np.ones(300)
    z[:3] = 0.0  # a few wrong answers, rarely drawn
    est = fq.PAIEstimator(sampler=fq.UniformSampler(replace=False), budget=12, random_state=1).fit(z)
    assert est.result_.method == "sample_mean" and est.std_error_ == 0.0 and est.estimate_ == 1.0
    low, high = est.confint()
    assert (low, high) == all_equal_interval(1.0, 12, 300) and low < 1.0
    assert "exact (all answers equal)" in str(est.summary())
    assert est.result_.conf_int(alternative="larger") == all_equal_interval(1.0, 12, 300, alternative="larger")
    runs = simulate(z[None, :], [1], sampler=fq.UniformSampler(replace=False), budget=12)
    assert (runs.low[0], runs.high[0]) == (low, high)
    with pytest.raises(ValueError, match="alternative"):
        est.result_.conf_int(alternative="both")


def test_a_census_and_pai_keep_their_intervals():
    z = np.ones(20)
    census = fq.PAIEstimator(sampler=fq.UniformSampler(replace=False), budget=20, random_state=0).fit(z)
    assert census.confint() == (1.0, 1.0)
    with pytest.raises(ValueError, match="1 <= n < N"):
        all_equal_interval(1.0, 20, 20)


def exact_paired_coverage(n_plus, n_minus, N, n, alpha=ALPHA):
    """Coverage of the paired sample mean's interval for ``theta_a - theta_b`` on a bank where A alone is right on
    ``n_plus`` questions and B alone on ``n_minus``, by enumerating the draws' counts of +1 and -1 (the estimate,
    variance and degrees of freedom depend on the draws only through them)."""
    delta, total, N0 = (n_plus - n_minus) / N, 0.0, N - n_plus - n_minus
    for k_plus in range(n + 1):
        for k_minus in range(n - k_plus + 1):
            k_zero = n - k_plus - k_minus
            if k_plus > n_plus or k_minus > n_minus or k_zero > N0:
                continue
            p = stats.multivariate_hypergeom.pmf([k_plus, k_minus, k_zero], [n_plus, n_minus, N0], n)
            d = np.r_[np.ones(k_plus), -np.ones(k_minus), np.zeros(k_zero)]
            est, var = fpc_mean(d, N)
            result = fq.ComparisonResult(estimate=est, std_error=float(np.sqrt(var)), estimate_a=np.nan,
                                         estimate_b=np.nan, n_queries=n, n_questions=N, method="paired_sample_mean",
                                         variance_method="finite-population", df=interval_df("robust-t", d))
            low, high = result.conf_int(alpha)
            total += p * (low <= delta <= high)
    return total


def test_paired_differences_that_all_agree_get_an_exact_interval_and_p_value():
    # two models that disagree on 10% of 300 questions, always in A's favour: 20 draws often all agree
    z_a, z_b = np.ones(300), np.ones(300)
    z_b[:30] = 0.0

    def paired(seed):
        sampler = fq.UniformSampler(replace=False)
        return fq.PairedPAIEstimator(sampler=sampler, budget=20, random_state=seed).fit(z_a, z_b).result_

    r = next(r for r in map(paired, range(100)) if r.std_error == 0.0)  # a run whose 20 draws all agree
    assert r.method == "paired_sample_mean" and r.estimate == 0.0 and r.std_error == 0.0
    low, high = r.conf_int()
    u_low, u_high = all_equal_interval(0.5, 20, 300)
    assert (low, high) == pytest.approx((2 * u_low - 1, 2 * u_high - 1)) and low < -0.1 and high > 0.1
    assert low <= 0.1 <= high  # the true difference
    assert r.pvalue(0.0) == 1.0
    # the p-value and the interval agree: the null is rejected at 5% exactly where it leaves the interval
    for null in (low - 1e-3, low + 1e-3, high - 1e-3, high + 1e-3):
        assert (r.pvalue(null) < ALPHA) == (not low <= null <= high)


@pytest.mark.parametrize("n_plus, n_minus", [(0, 0), (4, 0), (8, 2), (20, 0), (3, 3)])
def test_paired_sample_mean_coverage_by_enumeration(n_plus, n_minus):
    assert exact_paired_coverage(n_plus, n_minus, 80, 12) >= 0.95


def test_negative_control_paired_without_the_exact_branch(monkeypatch):
    # two models disagreeing on 4 of 80 questions: 12 draws all agree with chance 0.51, and a Wald interval is [0, 0]
    monkeypatch.setattr("faqstats.results.SAMPLE_MEANS", ("sample_mean",))
    assert exact_paired_coverage(4, 0, 80, 12) < 0.6
