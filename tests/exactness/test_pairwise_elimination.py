"""The adaptive design's elimination on shared draws: every pair's difference increment exactly unbiased under the
shared law (enumeration), its announced range, the active sets, the stop, the query count and the refusals."""

from itertools import combinations

import numpy as np
import pytest

import faqstats as fq
from faqstats._engine import SequentialRun
from faqstats.leaderboard import LeaderboardEstimator
from faqstats.pairwise_elimination import active_models, difference_range, elimination_horizon
from faqstats.posterior import FixedPredictions


def _bank(means, n=300, seed=0):
    """Rows of 0/1 outcomes whose exact means are ``means`` (rounded to 1/n), shuffled."""
    rng = np.random.default_rng(seed)
    return np.array([rng.permutation((np.arange(n) < round(m * n)).astype(float)) for m in means])


def _adaptive(Z, budget, stop="best", seed=0, **kwargs):
    return LeaderboardEstimator(None, fq.UniformSampler(), budget, design="adaptive", stop=stop, random_state=seed,
                                **kwargs).fit(Z)


def _runs(P, sampler):
    return [SequentialRun(sampler, FixedPredictions(p), P.shape[1], P.shape[1]) for p in P]


def test_every_pair_increment_is_exactly_unbiased_under_the_shared_law_and_within_its_range():
    # 3 models, 5 questions, informative and different predictions, a non-uniform policy: after any first draw
    # (asked of all three) and with model 2 then dropped, the second draw's law is the mean of the two active
    # models' laws, and every difference increment has conditional mean theta_a - theta_b exactly
    Z = np.array([[1, 0, 1, 1, 0], [0, 0, 1, 1, 1], [1, 1, 0, 0, 0]], dtype=float)
    P = np.array([[0.9, 0.2, 0.6, 0.7, 0.1], [0.3, 0.1, 0.8, 0.6, 0.5], [0.5, 0.5, 0.5, 0.2, 0.4]])
    theta, N = Z.mean(axis=1), Z.shape[1]
    sampler = fq.HybridSampler(tau=0.3)
    for first in range(N):
        for active in ([0, 1, 2], [0, 1]):
            runs = _runs(P, sampler)
            law0 = np.mean([r.law() for r in runs], axis=0)
            for k, run in enumerate(runs):
                run.record(first, law0[first], Z[k, first])
            law = np.mean([runs[k].law() for k in active], axis=0)
            assert law[first] == 0 and law.sum() == pytest.approx(1.0) and np.all(law[law > 0] >= 0.3 / (N - 1) - 1e-15)
            laws = [runs[k].law() for k in active]
            assert not np.allclose(laws[0], laws[1])  # (the models' own laws differ: the mean is a real compromise)
            for a, b in combinations(active, 2):
                low, high = difference_range(runs[a].base(), runs[b].base(), runs[a].predictions, runs[b].predictions,
                                             law, N)
                expected, seen = 0.0, []
                for j in np.flatnonzero(law > 0):
                    ra, rb = (_runs(P, sampler)[k] for k in (a, b))  # fresh copies in the same state
                    for r, k in ((ra, a), (rb, b)):
                        r.record(first, law0[first], Z[k, first])
                    d = ra.record(j, law[j], Z[a, j]) - rb.record(j, law[j], Z[b, j])
                    expected += law[j] * d
                    # the range holds whatever the two outcomes would have been
                    for za in (0.0, 1.0):
                        for zb in (0.0, 1.0):
                            ra2, rb2 = (_runs(P, sampler)[k] for k in (a, b))
                            for r, k in ((ra2, a), (rb2, b)):
                                r.record(first, law0[first], Z[k, first])
                            seen.append(ra2.record(j, law[j], za) - rb2.record(j, law[j], zb))
                assert expected == pytest.approx(theta[a] - theta[b], abs=1e-12)
                assert low - 1e-12 <= min(seen) and max(seen) <= high + 1e-12
                assert min(seen) == pytest.approx(low) and max(seen) == pytest.approx(high)  # and is tight


def test_a_biased_difference_is_caught_by_the_enumeration():
    # negative control: the same increments under a law other than the one drawn from are biased
    Z = np.array([[1, 0, 1, 1], [0, 0, 1, 1]], dtype=float)
    P = np.array([[0.9, 0.2, 0.6, 0.7], [0.3, 0.1, 0.8, 0.6]])
    runs = _runs(P, fq.HybridSampler(tau=0.3))
    law = np.mean([r.law() for r in runs], axis=0)
    wrong = runs[0].law()  # model 0's own law, claimed while drawing from the mean
    expected = 0.0
    for j in range(4):
        ra, rb = _runs(P, fq.HybridSampler(tau=0.3))
        expected += law[j] * (ra.record(j, wrong[j], Z[0, j]) - rb.record(j, wrong[j], Z[1, j]))
    assert abs(expected - (Z[0].mean() - Z[1].mean())) > 1e-3


def test_the_active_sets():
    B = np.zeros((4, 4), dtype=bool)
    assert active_models(B, "best").all() and active_models(B, "rank-width", 3).sum() == 0
    B[0, 1] = B[0, 2] = B[0, 3] = B[1, 3] = True  # 0 first; 1 and 2 unordered; 2 and 3 unordered
    assert active_models(B, "best").tolist() == [True, False, False, False]
    # ranks: 0 [1, 1], 1 [2, 3], 2 [2, 4], 3 [3, 4]
    assert active_models(B, "rank-width", 0).tolist() == [False, True, True, True]
    assert active_models(B, "rank-width", 1).tolist() == [False, True, True, True]  # 2 is 2 wide: its pairs stay
    assert active_models(B, "rank-width", 2).tolist() == [False, False, False, False]
    assert elimination_horizon(1000, 693, False) == 50 and elimination_horizon(10**6, 693, False) == 69
    assert elimination_horizon(1000, 50, True) == 50


def test_stop_best_stops_at_the_first_elimination_of_all_but_one():
    Z = _bank([0.9, 0.5, 0.3], n=400)
    board = _adaptive(Z, budget=1200)
    r = board.result_
    assert board.stop_reason_ == "best" and board.n_queries_.sum() < 1200
    assert r.may_be_best() == ["0"] and r.rank_intervals().loc["0"].tolist() == [1, 1]
    assert r.not_best.tolist() == [False, True, True]  # (by the wealths: the differences need not separate them)
    assert np.array_equal(np.bincount(board.allocation_, minlength=3), board.n_queries_)
    n = board.n_queries_
    assert n[0] == n.max() and n[2] < n[0]  # the best is asked every round; a model out is asked no more
    # a budget that ends the run first: the last round that fits is played, the best is not yet named
    short = _adaptive(Z, budget=40)
    assert short.stop_reason_ == "budget" and 38 <= short.n_queries_.sum() <= 40
    assert len(short.result_.may_be_best()) > 1


def test_the_weak_models_get_fewer_queries():
    board = _adaptive(_bank([0.85, 0.8, 0.3, 0.2], n=400), budget=1600)
    n = board.n_queries_
    assert board.stop_reason_ == "best" and n[2] < n[1] / 2 and n[3] < n[1] / 2, n


def test_cached_answers_cost_nothing():
    # with replacement a question drawn again is answered from the cache: queries count distinct questions
    Z = _bank([0.5, 0.5], n=8)
    calls = []

    def model(idx, z=Z[1]):
        calls.extend(np.asarray(idx).tolist())
        return z[idx]

    board = LeaderboardEstimator(None, fq.UniformSampler(replace=True), 100, design="adaptive", stop="best",
                                 random_state=0).fit([Z[0], model])
    assert board.n_queries_.tolist() == [8, 8] and sorted(calls) == list(range(8))  # each question asked once
    assert len(board.allocation_) > 16  # more rounds than questions: the repeats were free
    # both have answered everything: exact and equal, nothing left to ask
    assert board.stop_reason_ == "exhausted" and board.result_.conf_int().to_numpy().tolist() == [[0.5, 0.5]] * 2


def test_a_census_names_exact_accuracies_and_equal_models_exhaust_the_bank():
    Z = _bank([0.5, 0.5], n=6)
    board = _adaptive(Z, budget=40)
    assert board.stop_reason_ == "exhausted" and board.n_queries_.tolist() == [6, 6]
    assert board.result_.conf_int().to_numpy().tolist() == [[0.5, 0.5], [0.5, 0.5]]
    assert board.result_.differences()[["lower", "upper"]].to_numpy().tolist() == [[0.0, 0.0]]
    assert board.result_.may_be_best() == ["0", "1"]


def test_equal_models_spend_the_budget_in_whole_rounds():
    board = _adaptive(_bank([0.6, 0.6, 0.6], n=200), budget=301)
    assert board.stop_reason_ == "budget" and board.n_queries_.tolist() == [100, 100, 100]
    assert len(board.result_.may_be_best()) == 3


def test_the_elimination_never_drops_the_true_best_when_the_sequences_hold():
    theta = np.array([0.7, 0.62, 0.5, 0.35])
    covered = eliminated = 0
    for seed in range(20):
        Z = _bank(theta, n=100, seed=seed)
        th = Z.mean(axis=1)
        r = _adaptive(Z, budget=400, seed=seed).result_
        d = r.differences()
        true_d = np.array([th[a] - th[b] for a, b in combinations(range(4), 2)])
        if np.all((d.lower.to_numpy() <= true_d) & (true_d <= d.upper.to_numpy())):
            covered += 1
            assert "0" in r.may_be_best()  # the sequences are running intersections: they held all along
        eliminated += len(r.may_be_best()) < 4
    assert covered >= 18 and eliminated >= 15, (covered, eliminated)  # (alpha = 0.05; and not vacuous)


def test_difference_bounds_need_the_confidence_sequence_bounds():
    est, cov, names, n = np.array([0.5, 0.6]), np.eye(2) * 1e-4, ("a", "b"), np.array([5, 5])
    with pytest.raises(ValueError, match="difference_bounds go with"):
        fq.JointResults(est, cov, names, n, difference_bounds=np.array([[-0.2, 0.1]]))
    with pytest.raises(ValueError, match=r"\(1, 2\)"):
        fq.JointResults(est, cov, names, n, "confidence-sequence", bounds=np.array([[0.4, 0.6], [0.5, 0.7]]),
                        alpha=0.05, difference_bounds=np.array([[0.1, -0.1]]))
    r = fq.JointResults(est, cov, names, n, "confidence-sequence", bounds=np.array([[0.4, 0.6], [0.5, 0.7]]),
                        alpha=0.05, difference_bounds=np.array([[-0.15, -0.05]]))
    assert r.differences()[["lower", "upper"]].to_numpy()[0].tolist() == pytest.approx([-0.15, -0.05])
    assert r.may_be_best() == ["b"] and "every pairwise difference" in " ".join(str(r.summary()).split())


@pytest.mark.parametrize("kwargs, match", [
    (dict(sampler=fq.BernoulliAIPW()), "sequential sampler"),
    (dict(sampler=fq.HybridSampler()), "needs a fitted factor_model"),
    (dict(stop="rank-width"), "needs rank_width"),
])
def test_bad_settings_are_refused(kwargs, match):
    sampler = kwargs.pop("sampler", fq.UniformSampler())
    with pytest.raises(ValueError, match=match):
        LeaderboardEstimator(None, sampler, 40, design="adaptive", **{"stop": "best", **kwargs}).fit(_bank([0.5, 0.6]))


class _ScriptedRng:
    """``random()`` returns the next scripted uniform (one draw per round)."""

    def __init__(self, u):
        self.u = u

    def random(self):
        return self.u


def _expected_wealth(Z, rounds, alpha=0.05):
    """``E[W^a]`` after ``rounds`` rounds of the elimination design (uniform law), by enumerating every path."""
    import copy

    from faqstats import pairwise_elimination as pe
    K, N = Z.shape
    board = LeaderboardEstimator(None, fq.UniformSampler(), K * N, design="adaptive", stop="best")
    total, n_paths = np.zeros(K), 0

    def walk(state, weight, depth):
        nonlocal total, n_paths
        active = ~state.not_best
        if depth == rounds or active.sum() <= 1:
            total = total + weight * np.exp(state.log_wealth)
            n_paths += 1
            return
        left = np.flatnonzero(state.runs[0].available)
        for pos, j in enumerate(left):
            child = copy.deepcopy(state)
            child.round(active, _ScriptedRng((pos + 0.5) / left.size), K * N)
            assert child.runs[0].table()["question"][-1] == j
            walk(child, weight / left.size, depth + 1)

    walk(pe._Board(board, list(Z), N, alpha), 1.0, 0)
    return total, n_paths


@pytest.mark.parametrize("rebalance", [0.0, 0.5, 1.0])
def test_the_wealth_against_each_model_being_best_is_a_supermartingale(monkeypatch, rebalance):
    # W^a bets, challenger by challenger, against "model a is the best"; its shares move with the data (predictable).
    # Enumeration over every path of 3 rounds: with all models tied every W^a is an exact martingale (E = 1); with a
    # clear order the true best's wealth loses on average (E < 1) and the worst's grows (negative control: E > 1)
    from faqstats import pairwise_elimination as pe
    monkeypatch.setattr(pe, "REBALANCE", rebalance)
    tied = np.array([[1, 1, 0, 0, 1], [1, 0, 1, 0, 1], [0, 1, 1, 1, 0]], dtype=float)
    expected, n_paths = _expected_wealth(tied, 3)
    assert n_paths == 60 and expected == pytest.approx(np.ones(3), abs=1e-12)
    ordered = np.array([[1, 1, 1, 1, 0], [1, 0, 1, 0, 1], [0, 1, 0, 0, 0]], dtype=float)
    expected, _ = _expected_wealth(ordered, 3)
    assert expected[0] < 1.0 and expected[2] > 1.05, expected


def test_the_best_stop_names_the_best_and_the_result_says_so():
    # the wealths name the best of four in (nearly) every run, and the result's ranks agree with the stop: the
    # named model ranks first, the others second or worse, though their difference intervals may not separate them
    theta = np.array([0.8, 0.72, 0.45, 0.3])
    named = []
    for seed in range(10):
        board = _adaptive(_bank(theta, n=300, seed=seed), budget=1200, seed=seed)
        assert board.stop_reason_ == "best"
        ranks = board.result_.rank_intervals()
        named.append(board.result_.may_be_best())
        assert ranks.loc[named[-1][0]].tolist() == [1, 1] and (ranks.drop(named[-1][0])["best"] >= 2).all()
        assert (~board.result_.not_best).sum() == 1
    assert named.count(["0"]) >= 9, named


def test_not_best_needs_the_bounds_and_leaves_a_model():
    est, cov, names, n = np.array([0.6, 0.5]), np.eye(2) * 1e-3, ("a", "b"), np.array([10, 10])
    bounds = np.array([[0.5, 0.7], [0.4, 0.6]])
    with pytest.raises(ValueError, match="not_best goes with"):
        fq.JointResults(est, cov, names, n, not_best=np.array([False, True]))
    for bad in (np.array([True, True]), np.array([0, 1]), np.array([False])):
        with pytest.raises(ValueError, match="not_best goes with"):
            fq.JointResults(est, cov, names, n, "confidence-sequence", bounds=bounds, alpha=0.05, not_best=bad)
    r = fq.JointResults(est, cov, names, n, "confidence-sequence", bounds=bounds, alpha=0.05,
                        not_best=np.array([False, True]))
    plain = fq.JointResults(est, cov, names, n, "confidence-sequence", bounds=bounds, alpha=0.05)
    assert plain.may_be_best() == ["a", "b"]  # negative control: the overlapping bounds alone do not decide
    assert r.may_be_best() == ["a"] and r.rank_intervals().to_dict("list") == {"best": [1, 2], "worst": [1, 2]}
