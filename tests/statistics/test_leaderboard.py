"""The leaderboard's joint guarantees, by seeded Monte Carlo on a synthetic bank (slow)."""

import numpy as np
import pytest
from scipy.stats import rankdata

import faqstats as fq
from faqstats.leaderboard import LeaderboardEstimator

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]


def test_joint_coverage_of_accuracies_differences_and_ranks_with_a_negative_control():
    bank = fq.make_synthetic_bank(n_models=150, n_questions=200, n_new=40, random_state=1)
    fm = fq.LogisticFactorModel(n_components=3, max_iter=150, random_state=0).fit(bank.history)
    Z, K, runs = bank.new_outcomes, 5, 240
    theta = Z.mean(axis=1)
    rng = np.random.default_rng(0)
    hits = {"accuracies": [], "differences": [], "ranks": [], "per-model 95%": []}
    for rep in range(runs):
        idx = rng.choice(Z.shape[0], K, replace=False)
        th = theta[idx]
        r = LeaderboardEstimator(fm, budget=K * 25, random_state=rep).fit(Z[idx]).result_
        ci, single = r.conf_int(), r.conf_int(simultaneous=False)
        hits["accuracies"].append(np.all((ci.lower <= th) & (th <= ci.upper)))
        hits["per-model 95%"].append(np.all((single.lower <= th) & (th <= single.upper)))
        d = r.differences()
        true_d = np.array([th[i] - th[j] for i in range(K) for j in range(i + 1, K)])
        hits["differences"].append(np.all((d.lower <= true_d) & (true_d <= d.upper)))
        ranks, true_rank = r.rank_intervals(), rankdata(-th, method="min")
        hits["ranks"].append(np.all((ranks.best.to_numpy() <= true_rank) & (true_rank <= ranks.worst.to_numpy())))
    cover = {k: float(np.mean(v)) for k, v in hits.items()}
    # 240 runs: a binomial standard error of 0.014 at 0.95; the band is about +-2.5 of them
    assert 0.915 <= cover["accuracies"] <= 0.985, cover
    assert 0.915 <= cover["differences"] <= 0.985, cover
    assert cover["ranks"] >= 0.93, cover
    assert cover["per-model 95%"] <= 0.86, cover  # five separate 95% intervals cover jointly about 0.77


def test_shared_design_joint_coverage_and_narrower_differences_than_independent_draws():
    """The shared design (one question per draw for all five models): joint coverage of the accuracies and of
    the ten differences with a factor model, and, without a predictor (the sample means, whose answers are
    correlated across models), difference intervals narrower than the independent design's at the same total
    budget. With a factor model the residuals are nearly uncorrelated across models and the two designs' widths
    are close (measured 1.1x on this bank): the shared design gains where the models' errors move together."""
    bank = fq.make_synthetic_bank(n_models=150, n_questions=200, n_new=40, random_state=1)
    fm = fq.LogisticFactorModel(n_components=3, max_iter=150, random_state=0).fit(bank.history)
    Z, K, runs = bank.new_outcomes, 5, 200
    theta = Z.mean(axis=1)
    rng = np.random.default_rng(2)
    hits = {"accuracies": [], "differences": [], "per-model 95%": []}
    for rep in range(runs):
        idx = rng.choice(Z.shape[0], K, replace=False)
        th = theta[idx]
        true_d = np.array([th[i] - th[j] for i in range(K) for j in range(i + 1, K)])
        r = LeaderboardEstimator(fm, budget=K * 25, design="shared", random_state=rep).fit(Z[idx]).result_
        ci, single, d = r.conf_int(), r.conf_int(simultaneous=False), r.differences()
        hits["accuracies"].append(np.all((ci.lower <= th) & (th <= ci.upper)))
        hits["per-model 95%"].append(np.all((single.lower <= th) & (th <= single.upper)))
        hits["differences"].append(np.all((d.lower <= true_d) & (true_d <= d.upper)))
    cover = {k: float(np.mean(v)) for k, v in hits.items()}
    # 200 runs: a binomial standard error of 0.015 at 0.95; the band is about +-2.5 of them
    assert 0.91 <= cover["accuracies"] <= 0.99, cover
    assert 0.91 <= cover["differences"] <= 0.99, cover
    assert cover["per-model 95%"] <= 0.87, cover  # the negative control: five separate 95% intervals
    widths, covered = {"shared": [], "independent": []}, {"shared": [], "independent": []}
    for rep in range(80):
        idx = rng.choice(Z.shape[0], K, replace=False)
        th = theta[idx]
        true_d = np.array([th[i] - th[j] for i in range(K) for j in range(i + 1, K)])
        for design in widths:
            d = LeaderboardEstimator(None, budget=K * 25, design=design, random_state=rep).fit(Z[idx]).result_
            d = d.differences()
            widths[design].append(np.mean(d.upper - d.lower))
            covered[design].append(np.all((d.lower <= true_d) & (true_d <= d.upper)))
    ratio = np.mean(widths["shared"]) / np.mean(widths["independent"])
    assert ratio <= 0.93, ratio  # measured 0.88: the answers' correlation across models (0.3-0.5) cancels
    assert np.mean(covered["shared"]) >= 0.9, covered


def test_from_history_configures_each_model_as_one_model_with_its_share_of_the_budget():
    bank = fq.make_synthetic_bank(n_models=120, n_questions=80, n_new=3, n_components=2, random_state=0)
    board = LeaderboardEstimator.from_history(bank.history, budget=61, n_models=3, design="shared", n_runs=40,
                                              interval="t", verbose=False, random_state=3)
    one = fq.PAIEstimator.from_history(bank.history, budget=20, n_runs=40, verbose=False, random_state=3)
    assert (board.budget, board.design, board.interval, board.random_state) == (61, "shared", "t", 3)
    assert type(board.predictor) is type(one.predictor) and repr(board.sampler) == repr(one.sampler)
    assert board.fit(bank.new_outcomes).n_queries_.tolist() == [20, 20, 20]
    independent = LeaderboardEstimator.from_history(bank.history, budget=61, n_models=3, n_runs=40, verbose=False,
                                                    random_state=3)
    alone = fq.PAIEstimator.from_history(bank.history, budget=21, n_runs=40, verbose=False, random_state=3)
    assert repr(independent.sampler) == repr(alone.sampler) and independent.predict_every == alone.predict_every
    assert (independent.step_weights is None) == (alone.step_weights is None)
    assert independent.fit(bank.new_outcomes).n_queries_.tolist() == [21, 20, 20]
    with pytest.raises(ValueError, match="n_models"):
        LeaderboardEstimator.from_history(bank.history, budget=60, n_models=1)
