"""A leaderboard of sample means: a model whose answers drawn were all equal (or two models that agreed on every
shared draw) gets the exact interval at its share of the joint level, where the zero variance estimate would give
a zero width. Checked by enumerating every draw of small banks, with the zero-width rule as the negative control."""

from itertools import combinations, product

import numpy as np
import pytest

import faqstats as fq
from faqstats._inference import all_equal_interval
from faqstats.joint import JointResults, SampleMeans
from faqstats.shared_draws import sample_mean_inference

ALPHA = 0.05


def shared_result(z, draws, N, means=True):
    """The shared design's result for the rows ``draws`` of the (N, K) answers ``z`` (Bonferroni: no Monte Carlo)."""
    est, cov, df, pair_df = sample_mean_inference(z[list(draws)], N)
    K = z.shape[1]
    return JointResults(est, cov, tuple("abcdefgh"[:K]), np.full(K, len(draws)), "bonferroni", df, pair_df=pair_df,
                        sample_means=SampleMeans(N, shared=True) if means else None)


@pytest.fixture(scope="module")
def bank():
    # 12 questions: a model right on all but one, a near-copy that also misses another, a middling one
    a = np.ones(12)
    a[0] = 0
    b = a.copy()
    b[1] = 0
    c = np.array([1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 0], dtype=float)
    return np.column_stack([a, b, c])


def test_every_shared_draw_covers_the_equal_answers_exactly(bank):
    N, n = bank.shape[0], 4
    theta = bank.mean(axis=0)
    subsets = list(combinations(range(N), n))
    share = ALPHA / 3  # Bonferroni over three models (and over three differences)
    covered, covered_without, diff_covered, diff_without = [], [], [], []
    for draws in subsets:
        for means, rows, diffs in ((True, covered, diff_covered), (False, covered_without, diff_without)):
            r = shared_result(bank, draws, N, means)
            ci = r.conf_int(ALPHA)
            rows.append((ci["lower"] <= theta) & (theta <= ci["upper"]))
            d = r.differences(ALPHA).loc[("a", "b")]  # a - b: 1/12, but the two agree on most draws of four
            diffs.append(d["lower"] <= theta[0] - theta[1] <= d["upper"])
    coverage, without = np.mean(covered, axis=0), np.mean(covered_without, axis=0)
    # a's answers are all 1 in 2/3 of the draws: the zero-width rule covers a's 11/12 only in the rest
    assert without[0] == pytest.approx(1 - 330 / 495) and coverage[0] >= 1 - share
    assert np.mean(diff_without) == pytest.approx(1 - 330 / 495) and np.mean(diff_covered) >= 1 - share
    assert coverage[2] >= without[2] >= 0.9  # c's draws of four equal answers gain; its mixed ones are unchanged
    mixed, mixed_without = shared_result(bank, (0, 1, 2, 3), N), shared_result(bank, (0, 1, 2, 3), N, False)
    assert mixed.conf_int(ALPHA).loc["c"].equals(mixed_without.conf_int(ALPHA).loc["c"])
    # the exact interval is all_equal_interval at the model's share, the same one on its own
    r = shared_result(bank, (2, 3, 4, 5), N)
    assert tuple(r.conf_int(ALPHA).loc["a"]) == pytest.approx(all_equal_interval(1.0, n, N, share))


def test_every_pair_of_independent_draws_covers_the_difference(bank):
    # each model its own 3 draws of 7 questions: a pair with a model of equal answers combines the two intervals
    z = bank[:7, :2]
    N, n = z.shape[0], 3
    theta = z.mean(axis=0)
    subsets = list(combinations(range(N), n))
    covered, covered_without = [], []
    for da, db in product(subsets, subsets):
        ests, var = [], []
        for k, draws in enumerate((da, db)):
            est, v = fq._inference.fpc_mean(z[list(draws), k], N)
            ests.append(est)
            var.append(v)
        df = np.array([fq._inference.interval_df("robust-t", z[list(d), k][None] - e)[0]
                       for k, (d, e) in enumerate(zip((da, db), ests))])
        for means, out in ((True, covered), (False, covered_without)):
            r = JointResults(np.array(ests), np.diag(var), ("a", "b"), np.array([n, n]), "bonferroni", df,
                             sample_means=SampleMeans(N, shared=False) if means else None)
            d = r.differences(ALPHA).loc[("a", "b")]
            out.append(d["lower"] <= theta[0] - theta[1] <= d["upper"])
    assert np.mean(covered) >= 1 - ALPHA
    assert np.mean(covered_without) < np.mean(covered) - 0.05  # zero variance for a understates the difference


@pytest.mark.parametrize("design", ["independent", "shared"])
def test_a_leaderboard_of_sample_means_gives_a_perfect_run_an_interval(design):
    N = 200
    strong = np.ones(N)
    strong[:2] = 0
    mid = (np.random.default_rng(0).random(N) < 0.6).astype(float)
    board = fq.LeaderboardEstimator(budget=60, design=design, random_state=1, verbose=False)
    r = board.fit([strong, mid, strong.copy()]).result_
    assert r.sample_means == SampleMeans(N, shared=design == "shared")
    assert r.estimate[0] == 1.0 and r.cov[0, 0] == 0.0  # every answer drawn right: the variance says nothing
    ci = r.conf_int()
    assert ci.loc["0", "lower"] < 0.99 and ci.loc["0", "upper"] == 1.0
    same = r.differences().loc[("0", "2")]
    assert same["lower"] < 0 < same["upper"]  # two perfect runs: equal only within the exact interval
    # with a predictor the estimates are PAI's: no sample means
    fm = fq.GaussianProcessSurrogate(n_components=2).fit(
        fq.make_synthetic_bank(n_models=30, n_questions=N, n_components=2, random_state=0).history)
    with_predictor = fq.LeaderboardEstimator(fm, budget=60, design=design, random_state=1, verbose=False)
    assert with_predictor.fit([strong, mid]).result_.sample_means is None


def test_sample_means_are_checked():
    with pytest.raises(ValueError, match="n_queries must lie in"):
        JointResults(np.array([0.5, 0.5]), np.eye(2) * 0.01, ("a", "b"), np.array([5, 50]),
                     sample_means=SampleMeans(20, shared=True))
    with pytest.raises(ValueError, match="sample_means must be a SampleMeans"):
        JointResults(np.array([0.5, 0.5]), np.eye(2) * 0.01, ("a", "b"), np.array([5, 5]), "confidence-sequence",
                     bounds=np.array([[0.4, 0.6], [0.4, 0.6]]), alpha=0.05, sample_means=SampleMeans(20, shared=True))
