"""The adaptive leaderboard design's logic: the per-model design of ``stop="budget"`` (its LUCB allocation), what every
stop shares (refusals, reproducibility), and the joint results built from given anytime-valid bounds; the elimination
design of the other stops is in test_pairwise_elimination.py."""

import numpy as np
import pandas as pd
import pytest

import faqstats as fq
from faqstats.adaptive_allocation import lucb_choice
from faqstats.joint import JointResults
from faqstats.leaderboard import LeaderboardEstimator


def _bank(means, n=300, seed=0):
    """Rows of 0/1 outcomes whose exact means are ``means`` (rounded to 1/n), shuffled."""
    rng = np.random.default_rng(seed)
    rows = [rng.permutation((np.arange(n) < round(m * n)).astype(float)) for m in means]
    return np.array(rows)


def _adaptive(Z, budget, stop="best", seed=0, **kwargs):
    return LeaderboardEstimator(None, fq.UniformSampler(), budget, design="adaptive", stop=stop, random_state=seed,
                                **kwargs).fit(Z)


def test_lucb_queries_the_wider_of_the_leader_and_its_strongest_challenger():
    est, low, high = [0.70, 0.65, 0.60, 0.2], [0.65, 0.40, 0.50, 0.0], [0.75, 0.80, 0.85, 0.9]
    # leader 0 (width 0.10); challenger: highest upper bound among the others, model 3 (width 0.9)
    assert lucb_choice(est, low, high, [True] * 4) == 3
    assert lucb_choice(est, low, high, [True, True, True, False]) == 0  # the challenger is closed: the leader
    assert lucb_choice(est, low, high, [False, True, True, False]) == 1  # both closed: the widest open interval
    with pytest.raises(ValueError, match="no model"):
        lucb_choice(est, low, high, [False] * 4)


def test_the_allocation_favours_the_two_close_leaders_over_a_far_behind_model():
    Z = _bank([0.80, 0.76, 0.20])
    board = _adaptive(Z, budget=600, stop="budget")
    n = board.n_queries_
    assert n.sum() == 600 and board.stop_reason_ == "budget"
    assert n[2] < 0.15 * n[0] and n[2] < 0.15 * n[1], n
    assert np.array_equal(np.bincount(board.allocation_, minlength=3), n)
    assert board.allocation_[:6].tolist() == [0, 1, 2, 0, 1, 2]  # two queries each first, in turn


def test_equal_models_are_never_separated_and_the_budget_is_spent():
    Z = _bank([0.6, 0.6, 0.6], n=200)
    board = _adaptive(Z, budget=300)
    assert board.stop_reason_ == "budget" and board.n_queries_.sum() == 300
    assert len(board.result_.may_be_best()) == 3


def test_a_model_asked_every_question_has_its_exact_accuracy_as_a_point_interval():
    Z = _bank([0.5, 0.5], n=6)
    board = _adaptive(Z, budget=40, stop="budget")
    assert board.stop_reason_ == "exhausted" and board.n_queries_.tolist() == [6, 6]
    ci = board.result_.conf_int()
    assert ci.lower.tolist() == ci.upper.tolist() == [0.5, 0.5]
    assert board.estimate_.tolist() == [0.5, 0.5]


def test_the_fit_is_reproducible_and_takes_callables():
    Z = _bank([0.8, 0.7, 0.4], n=200, seed=1)
    a = _adaptive(Z, budget=400, seed=3)
    b = _adaptive([Z[0]] + [lambda i, z=z: z[i] for z in Z[1:]], budget=400, seed=3)  # the array sizes the bank
    assert a.allocation_.tolist() == b.allocation_.tolist()
    pd.testing.assert_frame_equal(a.result_.conf_int(), b.result_.conf_int())


def test_other_levels_and_per_model_intervals_are_refused_after_an_adaptive_run():
    board = _adaptive(_bank([0.8, 0.5]), budget=100, alpha=0.1)
    r = board.result_
    assert r.simultaneous_method == "confidence-sequence" and r.alpha == 0.1
    r.conf_int()  # alpha=None: the run's level
    r.conf_int(alpha=0.1)
    with pytest.raises(ValueError, match="alpha=0.1"):
        r.conf_int(alpha=0.05)
    with pytest.raises(ValueError, match="simultaneous"):
        r.conf_int(alpha=0.1, simultaneous=False)
    with pytest.raises(ValueError, match="alpha=0.1"):
        r.summary(alpha=0.05)
    assert "confidence sequences" in " ".join(str(r.summary()).split())  # (the notes wrap with the table width)


@pytest.mark.parametrize("kwargs, match", [
    (dict(stop="rank"), "stop must be one of"),
    (dict(sampler=fq.BernoulliAIPW()), "sequential sampler"),
])
def test_bad_adaptive_settings_are_refused(kwargs, match):
    sampler = kwargs.pop("sampler", fq.UniformSampler())
    with pytest.raises(ValueError, match=match):
        LeaderboardEstimator(None, sampler, 40, design="adaptive", **kwargs).fit(_bank([0.5, 0.6], n=50))


def test_given_bounds_make_the_differences_ranks_and_the_best():
    bounds = np.array([[0.50, 0.70], [0.55, 0.65], [0.10, 0.30]])
    r = JointResults(np.array([0.6, 0.6, 0.2]), np.diag([1e-4] * 3), ("a", "b", "c"), np.array([9, 9, 3]),
                     "confidence-sequence", bounds=bounds, alpha=0.05)
    d = r.differences()
    assert d.loc[("a", "b"), ["lower", "upper"]].tolist() == pytest.approx([0.50 - 0.65, 0.70 - 0.55])
    assert d.loc[("a", "c"), ["lower", "upper"]].tolist() == pytest.approx([0.50 - 0.30, 0.70 - 0.10])
    assert r.rank_intervals().to_dict("index") == {"a": {"best": 1, "worst": 2}, "b": {"best": 1, "worst": 2},
                                                   "c": {"best": 3, "worst": 3}}
    assert r.may_be_best() == ["a", "b"]
    assert r.to_frame()[["lower", "upper"]].loc["c"].tolist() == [0.10, 0.30]
    ax = r.plot()
    assert len(ax.get_yticklabels()) == 3 and "confidence-sequence" in ax.get_xlabel()
    # the covariance design is unchanged: alpha=None is 0.05 there
    plain = JointResults(np.array([0.6, 0.2]), np.diag([1e-4] * 2), ("a", "b"), np.array([9, 9]))
    pd.testing.assert_frame_equal(plain.conf_int(), plain.conf_int(alpha=0.05))
    assert not plain.conf_int(alpha=0.2).equals(plain.conf_int())


@pytest.mark.parametrize("kwargs, match", [
    (dict(simultaneous_method="confidence-sequence"), "bounds and alpha"),
    (dict(bounds=np.zeros((2, 2)), alpha=0.05), "bounds and alpha"),
    (dict(simultaneous_method="confidence-sequence", bounds=np.zeros((3, 2)), alpha=0.05), r"\(2, 2\)"),
    (dict(simultaneous_method="confidence-sequence", bounds=np.array([[0.5, 0.4], [0.1, 0.2]]), alpha=0.05),
     "lower <= upper"),
    (dict(simultaneous_method="confidence-sequence", bounds=np.zeros((2, 2)), alpha=1.5), "alpha"),
])
def test_inconsistent_bounds_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        JointResults(np.array([0.5, 0.6]), np.eye(2) * 1e-4, ("a", "b"), np.array([5, 5]), **kwargs)


def test_the_rank_width_stop_orders_the_models_as_asked():
    Z = _bank([0.9, 0.55, 0.2, 0.5], n=300)
    # rank_width=1: the two close models may stay tied; the others' ranks are known
    board = LeaderboardEstimator(None, fq.UniformSampler(), 1200, design="adaptive", stop="rank-width", rank_width=1,
                                 random_state=0).fit(Z)
    ranks = board.result_.rank_intervals()
    assert board.stop_reason_ == "rank-width" and board.n_queries_.sum() < 1200
    assert np.all(ranks.worst - ranks.best <= 1) and ranks.loc["0"].tolist() == [1, 1]
    assert ranks.loc["2"].tolist() == [4, 4]


def test_the_rank_width_stop_needs_a_rank_width():
    board = LeaderboardEstimator(None, fq.UniformSampler(), 40, design="adaptive", stop="rank-width")
    with pytest.raises(ValueError, match="needs rank_width"):
        board.fit(_bank([0.5, 0.6], n=50))
    with pytest.raises(ValueError, match="rank_width"):
        board.set_params(rank_width=-1).fit(_bank([0.5, 0.6], n=50))
