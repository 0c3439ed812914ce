"""Cost budgets (issue 15): the Neyman rule with costs and the fixed-draw design.

The exactness checks enumerate every sampling path on tiny banks (as tests/exactness/test_unbiasedness.py);
``fit(..., costs=)`` changes the policy only, and ``budget_cost`` fixes the number of draws
before the run, so the estimator must stay exactly unbiased with an exactly unbiased variance.
"""

import copy

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import faqstats as fq
from faqstats.estimator import martingale_variance
from faqstats.loop_setup import new_loop
from faqstats.sampling import CostWeightedSampler, PolicyState, draws_for_cost, within_round
from tests.exactness.test_unbiasedness import (
    SETTINGS,
    TOL,
    assert_exact_with_predictor,
    banks,
    enumerate_sequential,
    moments_sequential,
    sequential_samplers,
)
from tests.paths import SHARED_DATA

costs_lists = st.lists(st.floats(0.1, 10.0, allow_subnormal=False), min_size=4, max_size=4)


class _WithCosts:
    """An estimator as :func:`enumerate_sequential` sees it, its loops started with ``costs``
    (its ``budget`` the draws the run makes, from ``budget_cost`` when set)."""

    def __init__(self, estimator, costs, groups=None):
        self.estimator, self.costs = estimator, np.asarray(costs, dtype=float)
        self.batch_size = estimator.batch_size
        self.budget = new_loop(estimator, self.costs.size, groups=groups, costs=self.costs).run.budget

    def new_loop(self, n_questions, groups=None):
        return new_loop(self.estimator, n_questions, groups=groups, costs=self.costs)


@SETTINGS
@given(data=st.data(), replace=st.booleans())
def test_cost_weighted_pai_unbiased_and_variance_exact(data, replace):
    """Every sequential policy weighed by cost, a cost budget or a question budget, batches,
    with and without replacement: E[estimate] = theta and E[V_hat] = Var exactly."""
    z, fm = data.draw(banks(min_n=2 if not replace else 1))
    costs = np.array(data.draw(costs_lists))[: z.size]
    sampler = data.draw(sequential_samplers(replace))
    options = {"batch_size": data.draw(st.integers(1, 3))}
    if data.draw(st.booleans()):  # a cost budget buying 2 or 3 draws at the first law's cost per draw
        q1 = new_loop(fq.PAIEstimator(fm, sampler, budget=2, **options), z.size, costs=costs).run.law()
        draws = data.draw(st.sampled_from([2.5, 3.5])) if replace or z.size > 2 else 2.5
        options["budget_cost"] = float(q1 @ costs) * draws
    else:
        options["budget"] = data.draw(st.integers(2, min(3, z.size) if not replace else 3))
    est = _WithCosts(fq.PAIEstimator(fm, sampler, **options), costs)
    assert 2 <= est.budget <= 3
    mean, var, e_vhat = moments_sequential(enumerate_sequential(est, z))
    assert abs(mean - z.mean()) < TOL
    assert abs(e_vhat - var) < TOL


@SETTINGS
@given(data=st.data(), replace=st.booleans())
def test_cost_budget_with_groups_and_a_floor_is_exact(data, replace):
    """Groups and min_group_share alongside costs: every group's increments keep the martingale
    property at every node (checked inside the enumeration) and the headline stays exact."""
    z, fm = data.draw(banks(min_n=3, max_n=4))
    costs = np.array(data.draw(costs_lists))[: z.size]
    groups = np.arange(z.size) % 2
    est = fq.PAIEstimator(fm, fq.HybridSampler(tau=data.draw(st.floats(0.05, 0.9)), replace=replace),
                          budget=3, min_group_share=data.draw(st.floats(0.0, 0.5)))
    leaves = enumerate_sequential(_WithCosts(est, costs, groups), z, groups=groups)
    p = np.array([w for w, _ in leaves])
    head = np.array([rows[:, 0].mean() for _, rows in leaves])
    vhat = np.array([martingale_variance(rows[:, 0]) for _, rows in leaves])
    assert abs(p @ head - z.mean()) < TOL
    assert abs(p @ vhat - p @ (head - p @ head) ** 2) < TOL


class _CostlyHybrid(CostWeightedSampler):
    """The hybrid policy weighed by fixed costs (the first N of four), built from ``tau`` and
    ``replace`` as :func:`assert_exact_with_predictor` builds its samplers."""

    COSTS = np.array([1.0, 4.0, 0.5, 9.0])

    def __init__(self, tau=0.5, replace=False):
        super().__init__(fq.HybridSampler(tau=tau, replace=replace), self.COSTS)

    def scores(self, state):
        s = np.asarray(self.base_sampler.scores(state), dtype=float)
        return s / np.sqrt(self.COSTS[: s.size])


def test_cost_weighted_exact_with_a_fitted_predictor():
    """Factor models fitted on random tiny histories (0/1 and graded), a cost-weighted hybrid
    policy, with and without replacement, batches of 1-2: exact mean and variance estimate."""

    def fit(trial, history):
        return fq.LogisticFactorModel(n_components=1, max_iter=50, random_state=trial).fit(history)

    assert_exact_with_predictor(fit, _CostlyHybrid, trials=6)
    assert_exact_with_predictor(fit, _CostlyHybrid, seed=1, trials=6, graded_history=True)


def test_enumeration_detects_stopping_when_the_cost_runs_out():
    """Guard against a check that cannot fail: stopping once the spend reaches the budget and
    averaging the increments (a random number of them) is biased, and the enumeration sees it."""
    z = np.array([1.0, 0.0, 0.0, 1.0])
    costs = np.array([1.0, 6.0, 1.0, 6.0])
    fm = fq.LogisticFactorModel.from_factors(np.array([[2.0], [-1.0], [0.5], [1.0]]), np.array([0.3]), np.eye(1))
    est = fq.PAIEstimator(fm, fq.NeymanSampler(tau=0.3, replace=False), budget=4)
    budget_cost = 7.0
    total = 0.0

    def walk(run, prob, phis, spent):
        nonlocal total
        if spent >= budget_cost or len(phis) == 4:
            total += prob * np.mean(phis)
            return
        q = within_round(run.law(), run.available, False)
        for j in np.flatnonzero(q > 0):
            child = copy.deepcopy(run)
            phi = child.record(int(j), float(q[j]), float(z[j]))
            child.end_round([int(j)], [float(z[j])])
            walk(child, prob * q[j], phis + [phi], spent + costs[j])

    walk(new_loop(est, 4, costs=costs).run, 1.0, [], 0.0)
    assert abs(total - z.mean()) > 1e-3


def test_law_is_score_over_root_cost_mixed_with_uniform():
    """A hand example: q_j = tau / N + (1 - tau) (s_j / sqrt(c_j)) / sum_k s_k / sqrt(c_k)."""
    p = np.array([0.5, 0.9, 0.99])
    costs = np.array([1.0, 4.0, 0.25])
    state = PolicyState(predictions=p, available=np.ones(3, bool), step=1, budget=2)
    q = CostWeightedSampler(fq.NeymanSampler(tau=0.2), costs).probabilities(state)
    s = np.sqrt(p * (1 - p)) / np.sqrt(costs)  # 0.5, 0.15, 0.199
    np.testing.assert_allclose(q, 0.2 / 3 + 0.8 * s / s.sum(), rtol=1e-12)
    np.testing.assert_allclose(q, [0.5378, 0.2080, 0.2542], atol=1e-4)  # by hand
    # without replacement the asked question gets nothing, the rest renormalised as usual
    state = PolicyState(predictions=p, available=np.array([True, False, True]), step=2, budget=2)
    q = CostWeightedSampler(fq.NeymanSampler(tau=0.2, replace=False), costs).probabilities(state)
    np.testing.assert_allclose(q, [0.1 + 0.8 * 0.5 / (0.5 + s[2]), 0.0, 0.1 + 0.8 * s[2] / (0.5 + s[2])], rtol=1e-12)


def test_draws_from_budget_cost():
    """n = floor(C / E_q1[cost]): the uniform law's mean cost, and a cost-weighted law's."""
    costs = np.array([1.0, 2.0, 3.0, 10.0])
    z = np.array([1.0, 0.0, 1.0, 0.0])
    est = fq.PAIEstimator(None, fq.UniformSampler(), budget_cost=12.0, random_state=0).fit(z, costs=costs)
    assert len(est.queries_) == 3 and est.cost_per_draw_ == 4.0  # floor(12 / 4)
    assert est.result_.method == "sample_mean"  # tau = 1: the FPC sample mean, unweighted
    assert est.cost_spent_ == costs[est.queries_["question"]].sum()
    # equal predictions (V = 0): the law is tau / N + (1 - tau) c^-1/2 / sum c^-1/2
    fm = fq.LogisticFactorModel.from_factors(np.zeros((4, 1)), np.zeros(1), np.eye(1))
    w = costs**-0.5
    q1 = 0.5 / 4 + 0.5 * w / w.sum()
    per_draw = q1 @ costs
    est = fq.PAIEstimator(fm, fq.NeymanSampler(tau=0.5, replace=True), budget_cost=14.0, random_state=0)
    est.fit(z, costs=costs)
    assert len(est.queries_) == int(14.0 // per_draw) == 4  # 14 / 3.405
    assert est.cost_per_draw_ == pytest.approx(per_draw, rel=1e-12)
    assert "Cost spent:" in str(est.summary())
    # without replacement the draws stop at the bank
    n, _ = draws_for_cost(1e6, costs, lambda n: np.full(4, 0.25), False, 4)
    assert n == 4


@pytest.mark.parametrize(
    "costs, message",
    [
        ([1.0, 0.0, 2.0, 1.0], "finite and positive"),
        ([1.0, -1.0, 2.0, 1.0], "finite and positive"),
        ([1.0, np.nan, 2.0, 1.0], "finite and positive"),
        ([1.0, np.inf, 2.0, 1.0], "finite and positive"),
        ([1.0, 2.0, 1.0], "one cost per question"),
        ([[1.0, 2.0, 1.0, 1.0]], "one cost per question"),
        (["a", "b", "c", "d"], "positive numbers"),
    ],
)
def test_bad_costs_raise(costs, message):
    z = np.array([1.0, 0.0, 1.0, 0.0])
    with pytest.raises(ValueError, match=message):
        fq.PAIEstimator(None, fq.UniformSampler(), budget=2).fit(z, costs=costs)


def test_bad_cost_designs_raise():
    z = np.array([1.0, 0.0, 1.0, 0.0])
    costs = np.ones(4)
    with pytest.raises(ValueError, match="budget_cost needs costs"):
        fq.PAIEstimator(None, fq.UniformSampler(), budget_cost=3.0).fit(z)
    with pytest.raises(ValueError, match="buys 1 draw"):
        fq.PAIEstimator(None, fq.UniformSampler(), budget_cost=1.5).fit(z, costs=costs)
    with pytest.raises(ValueError, match="budget_cost must be in"):
        fq.PAIEstimator(None, fq.UniformSampler(), budget_cost=-1.0).fit(z, costs=costs)
    with pytest.raises(ValueError, match="sequential Sampler"):
        fq.PAIEstimator(None, fq.BernoulliAIPW(score="uniform"), budget=2).fit(z, costs=costs)
    with pytest.raises(ValueError, match="already a CostWeightedSampler"):
        fq.PAIEstimator(None, CostWeightedSampler(fq.UniformSampler(), costs), budget=2).fit(z, costs=costs)
    with pytest.raises(ValueError, match="stratify"):
        fq.PAIEstimator(None, fq.UniformSampler(), budget=2, stratify=True).fit(z, costs=costs, groups=[0, 0, 1, 1])

    class Fixed(fq.Sampler):
        def probabilities(self, state):
            return np.where(state.available, 1.0, 0.0)

    fm = fq.LogisticFactorModel.from_factors(np.zeros((4, 1)), np.zeros(1), np.eye(1))
    with pytest.raises(ValueError, match="overrides probabilities"):
        fq.PAIEstimator(fm, Fixed(tau=0.5), budget=2).fit(z, costs=costs)


def test_batched_engine_runs_the_cost_weighted_policy_as_the_estimator():
    """The batched engine takes the wrapper through its numpy scores: same draws, same estimate."""
    pytest.importorskip("torch")
    from faqstats.batched import simulate

    bank = fq.make_synthetic_bank(n_models=40, n_questions=60, n_components=2, random_state=1)
    fm = fq.LogisticFactorModel(n_components=2, max_iter=100, random_state=0).fit(bank.history)
    costs = np.random.default_rng(0).uniform(1.0, 9.0, 60)
    base = fq.HybridSampler(tau=0.3)
    est = fq.PAIEstimator(fm, base, budget_cost=0.2 * costs.sum(), random_state=np.random.default_rng(3))
    est.fit(bank.new_outcomes[0], costs=costs)
    n = len(est.queries_)
    runs = simulate(bank.new_outcomes, [np.random.default_rng(3)], predictor=fm,
                    sampler=CostWeightedSampler(base, costs), budget=n, rows=[0])
    assert abs(runs.estimate[0] - est.estimate_) < 1e-9


OPENLLM = SHARED_DATA / "openllm_v1.npz"


@pytest.mark.slow
@pytest.mark.skipif(not OPENLLM.exists(), reason="../shared/data/openllm_v1.npz not available")
def test_cost_budget_on_openllm_v1():
    """openllm_v1 with assumed tokens per benchmark at a 10% cost budget, the first 100 test models x 2
    seeds (200 runs): coverage >= 0.91 (measured 0.950 on 6,150 runs), mean spend within 10% of the
    budget, and variance x spend at least 1.5x better than the uniform sample mean's (exact; measured
    2.45x: docs/results/run_log.md, "Cost budgets")."""
    from faqstats.experiments import split_matrix

    matrix, meta = fq.load_response_matrix(OPENLLM)
    tokens = {"arc": 1300, "gsm8k": 1500, "mmlu": 600, "truthfulqa": 400, "winogrande": 200}
    costs = np.array([tokens[g] for g in meta["groups"]], dtype=float)
    history, new, _ = split_matrix(matrix, complete_rows=True, split_seed=0)
    fm = fq.LogisticFactorModel(n_components=16, regularization=0.1, max_iter=2000, random_state=0).fit(history)
    C, N = 0.1 * costs.sum(), costs.size
    n_uniform = int(C // costs.mean())
    errors, covered, spent, uniform_var = [], [], [], []
    for m in range(100):
        z = new[m].astype(float)
        uniform_var.append((1 - n_uniform / N) * z.var(ddof=1) / n_uniform)
        for s in range(2):
            est = fq.PAIEstimator(fm, budget_cost=C, random_state=[m, s]).fit(z, costs=costs)
            low, high = est.conf_int()
            errors.append(est.estimate_ - z.mean())
            covered.append(low <= z.mean() <= high)
            spent.append(est.cost_spent_)
    efficiency = np.mean(uniform_var) * n_uniform * costs.mean() / (np.mean(np.square(errors)) * np.mean(spent))
    print("coverage", np.mean(covered), "spend / C", np.mean(spent) / C, "efficiency per cost", efficiency)
    assert np.mean(covered) >= 0.91 and abs(np.mean(spent) / C - 1) < 0.1 and efficiency > 1.5
