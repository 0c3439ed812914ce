"""EvaluationSession with costs, cost budgets and groups (issue 15): stored with the session,
restored on load, and the same results as one uninterrupted PAIEstimator run with the same seed.

A small planted bank (80 questions) with its true factors as the model: runs in a few seconds.
"""

import json

import numpy as np
import pandas as pd
import pytest

import faqstats as fq
from faqstats.io import session_checksums
from faqstats.session import EvaluationSession

N = 80


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=60, n_questions=N, n_new=2, n_components=3, random_state=1)


@pytest.fixture(scope="module")
def ids():
    return [f"t{j % 3}/{j}" for j in range(N)]


@pytest.fixture(scope="module")
def costs():
    return np.random.default_rng(3).uniform(1.0, 20.0, N).round(2)


@pytest.fixture(scope="module")
def groups(ids):
    return np.array([q.split("/")[0] for q in ids])


def _drive_reloading(directory, z):
    """Answer every round from ``z``, loading the session from disk before each round."""
    while True:
        s = EvaluationSession.load(directory)
        if s.done:
            return s
        qids, _ = s.next_questions()
        s.record(qids, [float(z[int(q.split("/")[1])]) for q in qids])


OPTIONS = {
    "costs": {},
    "cost-budget": {"budget_cost": 200.0},
    "cost-budget-groups-macro": {"budget_cost": 250.0, "estimand": "macro", "min_group_share": 0.3},
    "cost-budget-replace": {"budget_cost": 150.0, "sampler": "replace"},
}


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_session_with_costs_resumes_to_the_estimators_results(tmp_path, bank, fm, ids, costs, groups, name):
    options = dict(OPTIONS[name])
    sampler = fq.HybridSampler(tau=0.3, replace=options.pop("sampler", None) == "replace")
    z = bank.new_outcomes[0]
    use_groups = "estimand" in options or name == "costs"
    fit_groups = groups if use_groups else None
    est = fq.PAIEstimator(fm, sampler, budget=20, batch_size=3, random_state=7, **options)
    est.fit(z, groups=fit_groups, costs=costs)
    # the session takes the costs (and groups) as mappings {question id: value}, in any order
    cost_map = dict(reversed(list(zip(ids, costs.tolist()))))
    group_map = None if fit_groups is None else dict(zip(ids, fit_groups.tolist()))
    created = EvaluationSession.create(tmp_path / "s", fm, ids, sampler=sampler, budget=20, batch_size=3,
                                       random_state=7, costs=cost_map, groups=group_map, **options)
    assert created.budget == est.result_.n_queries or sampler.replace or created.budget == len(est.queries_)
    s = _drive_reloading(tmp_path / "s", z)
    assert s.result() == est.result_
    assert s.result().cost_spent == pytest.approx(est.cost_spent_)
    np.testing.assert_array_equal(s.costs, costs)
    assert s.budget == len(est.queries_) and s.budget_cost == options.get("budget_cost")
    st = s.status()
    assert st["costs"] and st["cost_spent"] == pytest.approx(est.cost_spent_)
    assert st["budget_cost"] == options.get("budget_cost") and st["cost_per_draw"] == est.cost_per_draw_
    assert st["budget"] == s.budget and st["n_draws"] == s.budget
    if fit_groups is not None:
        pd.testing.assert_frame_equal(s.group_results().to_frame(), est.group_results_.to_frame())
        rows = st["groups"]
        assert [r["group"] for r in rows] == ["t0", "t1", "t2"]
        frame = est.group_results_.to_frame()
        assert [r["estimate"] for r in rows] == frame["estimate"].tolist()
        assert [r["upper"] for r in rows] == frame["upper"].tolist()
        simultaneous = s.status(simultaneous=True)["groups"]
        wide = est.group_results_.conf_int(simultaneous=True)
        assert [r["simultaneous_lower"] for r in simultaneous] == wide["lower"].tolist()
        assert json.loads(json.dumps(s.status(simultaneous=True))) == s.status(simultaneous=True)
    else:
        assert st["groups"] is None


def test_costs_and_budget_cost_are_stored_and_hand_edits_detected(tmp_path, fm, ids, costs):
    EvaluationSession.create(tmp_path, fm, ids, budget=10, costs=costs, budget_cost=120.0, random_state=0)
    state = json.loads((tmp_path / "session.json").read_text())
    assert state["config"]["costs"] == costs.tolist() and state["config"]["budget_cost"] == 120.0
    s = EvaluationSession.load(tmp_path)
    np.testing.assert_array_equal(s.costs, costs)
    s.next_questions()
    state = json.loads((tmp_path / "session.json").read_text())
    for edit in ("costs", "budget_cost"):
        forged = json.loads(json.dumps(state))
        if edit == "costs":
            forged["config"]["costs"][0] = 0.5
        else:
            forged["config"]["budget_cost"] = 1000.0
        (tmp_path / "session.json").write_text(json.dumps(forged))
        with pytest.raises(ValueError, match="settings differ from the checksums"):
            EvaluationSession.load(tmp_path)
    # a forger who rewrites the checksums too: the costs change the policy, the replayed draws do not match
    forged = json.loads(json.dumps(state))
    forged["config"]["costs"] = (np.asarray(costs)[::-1]).tolist()
    forged["checksums"] = session_checksums(forged)
    (tmp_path / "session.json").write_text(json.dumps(forged))
    with pytest.raises(ValueError, match="does not match the factor model or sampler"):
        EvaluationSession.load(tmp_path)


def test_sessions_without_costs_store_no_cost_fields(tmp_path, fm, ids):
    EvaluationSession.create(tmp_path, fm, ids, budget=6, random_state=0)
    config = json.loads((tmp_path / "session.json").read_text())["config"]
    assert "costs" not in config and "budget_cost" not in config
    st = EvaluationSession.load(tmp_path).status()
    assert st["costs"] is False and st["cost_spent"] is None and st["groups"] is None


@pytest.mark.parametrize("kwargs, error, match", [
    ({"budget_cost": 50.0}, ValueError, "budget_cost needs costs"),
    ({"costs": "cheap"}, TypeError, "not a string"),
    ({"costs": {"t0/0": 1.0}}, ValueError, r"costs has no entry for 79 of the bank's 80 question ids: 't1/1'"),
    ({"costs": "zero"}, ValueError, r"costs must be finite and positive; question id 't1/4' has cost 0.0 \(1 such"),
    ({"costs": "ones", "budget_cost": 1.5}, ValueError, "buys 1 draw"),
    ({"groups": {"t0/0": "a"}}, ValueError, "groups has no entry for 79"),
])
def test_bad_costs_and_groups_are_named(fm, ids, kwargs, error, match):
    kwargs = dict(kwargs)
    special = {"zero": [0.0 if j == 4 else 1.0 for j in range(N)],
               "ones": [1.0] * N}
    if isinstance(kwargs.get("costs"), str) and kwargs["costs"] in special:
        kwargs["costs"] = special[kwargs["costs"]]
    with pytest.raises(error, match=match):
        EvaluationSession(fm, ids, budget=10, random_state=0, **kwargs)


def test_mappings_may_hold_other_questions(fm, ids, costs):
    """A table of a larger bank: the ids that are not the bank's are ignored."""
    table = {**dict(zip(ids, costs.tolist())), "other/1": -1.0}
    s = EvaluationSession(fm, ids, budget=10, random_state=0, costs=table, groups={**{q: "a" for q in ids}, "x/1": "b"})
    np.testing.assert_array_equal(s.costs, costs)
    assert set(s.groups) == {"a"}
