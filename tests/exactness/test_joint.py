"""Joint inference for several models: the max-t critical value, rank intervals and the may-be-best set."""

import numpy as np
import pytest
from scipy import stats

import faqstats as fq
from faqstats.joint import JointResults, max_t_quantile
from faqstats.leaderboard import LeaderboardEstimator


@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_max_t_is_the_normal_quantile_for_one_mean_and_sidak_for_independent_means(alpha):
    assert max_t_quantile([[1.0]], alpha) == pytest.approx(stats.norm.ppf(1 - alpha / 2))
    sidak = stats.norm.ppf(0.5 + 0.5 * (1 - alpha) ** (1 / 4))
    assert max_t_quantile(np.eye(4), alpha) == pytest.approx(sidak)
    near = np.eye(4)
    near[0, 1] = near[1, 0] = 1e-6  # not the identity to np.allclose: the Monte Carlo path, which must agree
    assert max_t_quantile(near, alpha) == pytest.approx(sidak, abs=0.02)


def test_max_t_of_perfectly_correlated_means_is_one_means_and_lies_below_bonferroni():
    assert max_t_quantile(np.ones((5, 5)), 0.05) == pytest.approx(1.96, abs=0.02)
    R = 0.5 * np.eye(6) + 0.5
    c = max_t_quantile(R, 0.05)
    assert stats.norm.ppf(0.975) < c < stats.norm.ppf(1 - 0.05 / 12)


def test_differences_of_a_singular_correlation_have_a_finite_critical_value():
    D = np.array([[1.0, -1.0, 0.0], [1.0, 0.0, -1.0], [0.0, 1.0, -1.0]])
    cov = D @ D.T
    sd = np.sqrt(np.diag(cov))
    assert 1.96 < max_t_quantile(cov / np.outer(sd, sd), 0.05) < stats.norm.ppf(1 - 0.05 / 6)


def test_rank_intervals_and_the_may_be_best_set_follow_the_simultaneous_differences():
    r = JointResults(np.array([0.40, 0.60, 0.55, 0.10]), np.diag([0.02] * 4) ** 2, ("a", "b", "c", "d"),
                     np.array([50] * 4))
    ranks = r.rank_intervals()
    assert ranks.loc["b"].tolist() == [1, 2] and ranks.loc["c"].tolist() == [1, 2]
    assert ranks.loc["a"].tolist() == [3, 3] and ranks.loc["d"].tolist() == [4, 4]
    assert r.may_be_best() == ["b", "c"]
    assert r.to_frame().index.tolist() == ["b", "c", "a", "d"]
    # a wider interval (smaller alpha) can only widen the rank intervals
    wide = r.rank_intervals(alpha=1e-6)
    assert np.all(wide.best <= ranks.best) and np.all(wide.worst >= ranks.worst)


def test_bonferroni_is_wider_than_max_t_and_per_model_intervals_narrower():
    cov = np.array([[4.0, 3.0], [3.0, 4.0]]) * 1e-4
    est = np.array([0.5, 0.6])
    maxt = JointResults(est, cov, ("a", "b"), np.array([40, 40])).conf_int()
    bonf = JointResults(est, cov, ("a", "b"), np.array([40, 40]), "bonferroni").conf_int()
    single = JointResults(est, cov, ("a", "b"), np.array([40, 40])).conf_int(simultaneous=False)
    w = lambda ci: (ci.upper - ci.lower).to_numpy()  # noqa: E731
    assert np.all(w(single) < w(maxt)) and np.all(w(maxt) < w(bonf))


def test_the_leaderboard_runs_each_model_as_its_own_pai_run():
    bank = fq.make_synthetic_bank(n_models=40, n_questions=80, n_new=3, random_state=0)
    fm = fq.LogisticFactorModel(n_components=2, max_iter=50, random_state=0).fit(bank.history)
    board = LeaderboardEstimator(fm, budget=31, random_state=3).fit(bank.new_outcomes, names=["x", "y", "z"])
    assert [e.n_queries_ for e in board.estimators_] == [11, 10, 10]
    seed = np.random.default_rng(3).spawn(3)[1]
    alone = fq.PAIEstimator(fm, budget=10, random_state=seed).fit(bank.new_outcomes[1])
    assert board.estimate_[1] == alone.estimate_
    assert board.result_.cov[0, 1] == 0.0 and board.result_.cov[1, 1] == pytest.approx(alone.std_error_**2)
    ax = board.result_.plot()
    assert len(ax.get_yticklabels()) == 3


def test_step_weights_and_predict_every_go_to_every_models_run_in_the_independent_design_only():
    bank = fq.make_synthetic_bank(n_models=40, n_questions=80, n_new=3, random_state=0)
    fm = fq.LogisticFactorModel(n_components=2, max_iter=50, random_state=0).fit(bank.history)
    weights = np.linspace(1.0, 2.0, 11)
    board = LeaderboardEstimator(fm, budget=31, step_weights=weights, predict_every=2, random_state=3)
    board.fit(bank.new_outcomes)
    seed = np.random.default_rng(3).spawn(3)[0]
    alone = fq.PAIEstimator(fm, budget=11, step_weights=weights, predict_every=2, random_state=seed)
    assert board.estimate_[0] == alone.fit(bank.new_outcomes[0]).estimate_
    unweighted = LeaderboardEstimator(fm, budget=31, random_state=3).fit(bank.new_outcomes)
    assert board.estimate_[0] != unweighted.estimate_[0]  # (the weights were used)
    with pytest.raises(ValueError, match="independent design"):
        board.set_params(design="shared").fit(bank.new_outcomes)


@pytest.mark.parametrize("kwargs, match", [
    (dict(outcomes=np.zeros((1, 10))), "at least 2 models"),
    (dict(outcomes=np.zeros((2, 10)), names=["a", "a"]), "distinct names"),
    (dict(outcomes=np.zeros((3, 10)), budget=5), "budget"),
])
def test_bad_input_is_refused_with_a_clear_error(kwargs, match):
    budget = kwargs.pop("budget", 20)
    with pytest.raises((ValueError, TypeError), match=match):
        LeaderboardEstimator(None, fq.UniformSampler(), budget).fit(**kwargs)
