"""simulate with groups, weighted estimands, costs and clusters reproduces PAIEstimator.fit run for run."""

import numpy as np
import pytest

import faqstats as fq
from faqstats.batched import simulate


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=60, n_questions=48, n_components=2, random_state=3)


@pytest.fixture(scope="module")
def fm(bank):
    return fq.LogisticFactorModel(n_components=2, max_iter=200, random_state=0).fit(bank.history)


class NumpyNeyman(fq.Sampler):
    """A policy with numpy scores only (no torch path): the oracle score plus a constant."""

    def __init__(self, tau=0.2, replace=False):
        self.tau = tau
        self.replace = replace

    def scores(self, state):
        p = np.asarray(state.predictions, dtype=float)
        return np.sqrt(p * (1.0 - p)) + 0.1


N = 48
GROUPS = np.repeat(["a", "b", "c"], [9, 15, 24])
COSTS = np.linspace(0.5, 3.0, N)
CLUSTERS = np.arange(N) // 3  # 16 clusters of 3, each within one group

POLICIES = [
    ("fm", fq.HybridSampler()),
    ("fm", fq.NeymanSampler(tau=0.2, replace=True)),
    ("fm", NumpyNeyman()),
    ("fm", NumpyNeyman(replace=True)),
    (None, fq.UniformSampler()),
]

DESIGNS = [
    dict(fit=dict(groups=GROUPS)),
    dict(fit=dict(groups=GROUPS), estimand="macro"),
    dict(fit=dict(groups=GROUPS), min_group_share=0.3, batch_size=3),
    dict(fit=dict(groups=GROUPS), stratify=True),
    dict(fit=dict(groups=np.arange(N) % 2), estimand=np.linspace(1.0, 2.0, N)),
    dict(fit=dict(costs=COSTS)),
    dict(fit=dict(costs=COSTS), budget_cost=20.0),
    dict(fit=dict(costs=COSTS, groups=GROUPS), confidence_sequence=0.05),
    dict(fit=dict(clusters=CLUSTERS)),
    dict(fit=dict(clusters=CLUSTERS, groups=GROUPS, costs=COSTS), batch_size=2),
    dict(fit=dict(clusters=CLUSTERS, costs=COSTS), budget_cost=30.0, cluster_score="sum"),
]


def _design_id(design):
    extra = [k for k in design if k != "fit"]
    return "+".join(list(design["fit"]) + extra)


@pytest.mark.parametrize("design", DESIGNS, ids=_design_id)
@pytest.mark.parametrize("which, sampler", POLICIES, ids=lambda x: getattr(x, "__name__", repr(x))[:40])
def test_designs_are_the_estimator_run_for_run(bank, fm, which, sampler, design):
    predictor = fm if which == "fm" else None
    options = {k: v for k, v in design.items() if k != "fit"}
    budget = 8
    Z, rows = bank.new_outcomes, np.array([0, 1, 1, 2])
    gens = [np.random.default_rng([5, r]) for r in range(4)]
    alpha = options.get("confidence_sequence") or 0.1
    runs = simulate(Z, gens, predictor=predictor, sampler=sampler, budget=budget, rows=rows, alpha=alpha,
                    keep_increments=True, **options, **design["fit"])
    for r, i in enumerate(rows):
        g = np.random.default_rng([5, r])
        est = fq.PAIEstimator(predictor, sampler, budget=budget, random_state=g, **options).fit(Z[i], **design["fit"])
        assert runs.estimate[r] == pytest.approx(est.estimate_, abs=1e-10)
        assert runs.std_error[r] == pytest.approx(est.std_error_, abs=1e-10)
        np.testing.assert_allclose([runs.low[r], runs.high[r]], est.conf_int(alpha=alpha), atol=1e-10)
        assert runs.n_queries[r] == est.n_queries_ and runs.n_draws[r] == len(est.queries_)
        assert runs.stop_reason[r] == est.stop_reason_ and runs.method == est.result_.method
        assert gens[r].bit_generator.state == g.bit_generator.state  # the same draws, then the same state
        values = est.queries_["outcome" if runs.method.endswith("sample_mean") else "increment"]
        np.testing.assert_allclose(runs.increments[r, :len(values)], values, atol=1e-12)
        if "costs" in design["fit"]:
            assert runs.cost_spent[r] == pytest.approx(est.cost_spent_, abs=1e-10)
        else:
            assert runs.cost_spent is None
        if "groups" in design["fit"]:
            groups = est.group_results_
            np.testing.assert_array_equal(runs.group_labels, groups.labels)
            np.testing.assert_allclose(runs.group_estimate[r], groups.estimate, atol=1e-10)
            np.testing.assert_allclose(runs.group_std_error[r], groups.std_error, atol=1e-10)
            bounds = groups.conf_int(alpha=alpha).to_numpy()
            np.testing.assert_allclose(runs.group_low[r], bounds[:, 0], atol=1e-10)
            np.testing.assert_allclose(runs.group_high[r], bounds[:, 1], atol=1e-10)
        else:
            assert runs.group_estimate is None
        if options.get("confidence_sequence"):
            np.testing.assert_allclose([runs.anytime_low[r], runs.anytime_high[r]], est.result_.anytime_interval)


def test_group_arrays_have_a_column_per_group(bank, fm):
    runs = simulate(bank.new_outcomes, [np.random.default_rng(s) for s in range(3)], predictor=fm, budget=12,
                    groups=GROUPS, estimand="macro")
    assert runs.group_estimate.shape == runs.group_low.shape == runs.group_high.shape == (3, 3)
    # intervals clipped to [0, 1] around unbiased (unclipped) estimates
    assert np.all((0 <= runs.group_low) & (runs.group_low < runs.group_high) & (runs.group_high <= 1))
    centre = np.clip(runs.group_estimate, 0, 1)
    assert np.all((runs.group_low <= centre) & (centre <= runs.group_high))
    # the macro estimate is the mean of the groups' estimates
    np.testing.assert_allclose(runs.estimate, runs.group_estimate.mean(1), atol=1e-12)


def test_a_census_of_every_group_is_exact(bank):
    z = bank.new_outcomes[:2]
    runs = simulate(z, [0, 1], sampler=fq.UniformSampler(), budget=N, groups=GROUPS, estimand="macro")
    truth = np.stack([[row[GROUPS == g].mean() for g in "abc"] for row in z])
    np.testing.assert_allclose(runs.group_estimate, truth, atol=1e-12)
    np.testing.assert_allclose(runs.estimate, truth.mean(1), atol=1e-12)
    np.testing.assert_allclose(runs.std_error, 0.0, atol=1e-12)


def test_designs_errors_are_the_estimators(bank, fm):
    with pytest.raises(ValueError, match="simulate does not cover variance='paper'"):
        simulate(bank.new_outcomes, [0], predictor=fm, sampler=fq.HybridSampler(replace=True), budget=5,
                 variance="paper", groups=GROUPS)
    with pytest.raises(ValueError, match="budget_cost needs costs"):
        simulate(bank.new_outcomes, [0], predictor=fm, budget=5, budget_cost=10.0)
    with pytest.raises(ValueError, match="stratify needs groups"):
        simulate(bank.new_outcomes, [0], predictor=fm, budget=5, stratify=True)
    with pytest.raises(ValueError, match="spans groups"):
        simulate(bank.new_outcomes, [0], predictor=fm, budget=5, clusters=np.arange(N) // 6,
                 groups=np.arange(N) % 2)


@pytest.mark.parametrize("kw", [dict(sampler=fq.HybridSampler(tau=0.2), budget_cost=25.0, batch_size=2),
                                dict(sampler=fq.NeymanSampler(replace=True), budget=40, stop_when_width=0.5,
                                     alpha=0.05)], ids=["budget_cost", "stop_when_width"])
def test_costs_run_in_the_lockstep_loop(bank, fm, monkeypatch, kw):
    import faqstats.batched as batched

    def refuse(*args, **kwargs):
        raise AssertionError("costs alone should not need the estimator's own loops")

    monkeypatch.setattr(batched, "run_designs", refuse)
    runs = simulate(bank.new_outcomes, [np.random.default_rng(s) for s in range(3)], predictor=fm, costs=COSTS,
                    rows=[0, 1, 2], **kw)
    options = {k: v for k, v in kw.items() if k != "alpha"}
    if "stop_when_width" in kw:
        assert set(runs.stop_reason) == {"width"}  # every run stops early: its spend is of its draws only
    for r in range(3):
        g = np.random.default_rng(r)
        est = fq.PAIEstimator(fm, random_state=g, **options).fit(bank.new_outcomes[r], costs=COSTS)
        assert runs.n_draws[r] == len(est.queries_) and runs.stop_reason[r] == est.stop_reason_
        if "budget_cost" in kw:
            assert runs.n_draws[r] == int(25.0 // est.cost_per_draw_)
        assert runs.estimate[r] == pytest.approx(est.estimate_, abs=1e-10)
        np.testing.assert_allclose([runs.low[r], runs.high[r]], est.conf_int(), atol=1e-10)
        assert runs.cost_spent[r] == pytest.approx(est.cost_spent_, abs=1e-10)
