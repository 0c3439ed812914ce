"""Experiments with groups and costs (issue 15): group records, per-group and simultaneous coverage,
the cost spent; ``faqstats experiment --groups-from/--costs-from``."""

import json

import numpy as np
import pandas as pd
import pytest

import faqstats as fq
from faqstats.cli import main
from faqstats.experiments import run_methods, summarize, summarize_groups
from faqstats.experiments.records import GROUP_RECORD_COLUMNS

N = 45
GROUPS = np.repeat(["alg", "bio", "chem"], [10, 15, 20])
COSTS = np.random.default_rng(0).uniform(1.0, 9.0, N).round(3)


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=60, n_questions=N, n_new=3, n_components=2, random_state=2)


def test_group_records_are_each_runs_estimator_results(bank, fm):
    runs = run_methods(bank.history, bank.new_outcomes, [10, 20], seeds=2, methods=["faq-equal", "uniform-fpc"],
                       factor_model=fm, groups=GROUPS, costs=COSTS, verbose=False, random_state=3)
    g = runs.group_records
    assert list(g.columns) == list(GROUP_RECORD_COLUMNS) and len(g) == len(runs.records) * 3
    # one run, redone by hand with the seed the runner gives it
    rec = runs.records.iloc[7]
    from faqstats.experiments.records import method_key

    assert rec["method"] == "faq-equal"
    sampler = fq.HybridSampler()
    gen = np.random.default_rng([3, method_key(rec["method"]), int(rec["budget"]), int(rec["model"]), int(rec["seed"])])
    est = fq.PAIEstimator(fm, sampler, budget=int(rec["budget"]), step_weights=np.ones(int(rec["budget"])),
                          random_state=gen).fit(bank.new_outcomes[rec["model"]], groups=GROUPS, costs=COSTS)
    assert rec["estimate"] == est.estimate_ and rec["cost_spent"] == pytest.approx(est.cost_spent_)
    mine = g[(g["method"] == rec["method"]) & (g["budget"] == rec["budget"]) & (g["model"] == rec["model"])
             & (g["seed"] == rec["seed"])]
    frame = est.group_results_.to_frame()
    np.testing.assert_array_equal(mine["estimate"], frame["estimate"])
    np.testing.assert_array_equal(mine["simultaneous_high"], est.group_results_.conf_int(simultaneous=True)["upper"])
    truth = pd.Series(bank.new_outcomes[rec["model"]]).groupby(GROUPS).mean()
    np.testing.assert_allclose(mine["truth"], truth.to_numpy())
    assert (mine["covered"] == ((mine["low"] <= mine["truth"]) & (mine["truth"] <= mine["high"]))).all()
    # the summaries
    table = summarize_groups(runs)
    assert table[["method", "budget", "group"]].values.tolist()[:3] == [["faq-equal", 10, "alg"], ["faq-equal", 10, "bio"],
                                                                       ["faq-equal", 10, "chem"]]
    assert (table["n_runs"] == 6).all() and table["n_questions"].tolist()[:3] == [10, 15, 20]
    joint = g.groupby(["method", "budget", "model", "seed"])["simultaneous_covered"].all()
    assert table.groupby(["method", "budget"])["joint_simultaneous_coverage"].first().to_dict() == \
        pytest.approx(joint.groupby(["method", "budget"]).mean().to_dict())
    summary = summarize(runs)
    assert "mean_cost" in summary and summary["mean_cost"].notna().all()


def test_without_groups_nothing_changes(bank, fm):
    runs = run_methods(bank.history, bank.new_outcomes, [10], seeds=1, methods=["faq-equal"], factor_model=fm,
                       verbose=False, engine="sequential")
    assert runs.group_records is None and "cost_spent" not in runs.records and "mean_cost" not in summarize(runs)
    with pytest.raises(ValueError, match="no group records"):
        summarize_groups(runs)
    # groups leave the draws alone: the same records as the estimator's without them
    grouped = run_methods(bank.history, bank.new_outcomes, [10], seeds=1, methods=["faq-equal"], factor_model=fm,
                          groups=GROUPS, verbose=False)
    pd.testing.assert_frame_equal(grouped.records, runs.records)


@pytest.mark.parametrize("kwargs, match", [
    ({"methods": ["ht-uniform"], "groups": GROUPS}, "method 'ht-uniform' cannot take groups"),
    ({"methods": ["faq-equal"], "costs": COSTS * 0}, "costs must be finite and positive"),
    ({"methods": ["faq-equal"], "groups": GROUPS[:5]}, "groups"),
])
def test_refusals(bank, fm, kwargs, match):
    with pytest.raises(ValueError, match=match):
        run_methods(bank.history, bank.new_outcomes, [10], seeds=1, factor_model=fm, verbose=False, **kwargs)


def test_experiment_command_writes_group_tables(tmp_path, capsys, bank):
    data = tmp_path / "bank.npz"
    matrix = np.vstack([bank.history, bank.new_outcomes])
    ids = [f"{g}/{j}" for j, g in enumerate(GROUPS)]
    np.savez(data, outcomes=np.where(np.isnan(matrix), -1, matrix).astype(np.int8), items=np.array(ids))
    (tmp_path / "costs.json").write_text(json.dumps(dict(zip(ids, COSTS.tolist()))))
    code = main(["experiment", "--data", str(data), "--out", str(tmp_path / "out"), "--budgets", "0.3",
                 "--seeds", "1", "--methods", "uniform-fpc", "--max-models", "3", "--groups-from", "tasks",
                 "--costs-from", str(tmp_path / "costs.json"), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Per group" in out and "joint_simultaneous_coverage" in out
    table = pd.read_csv(tmp_path / "out" / "group_summary.csv")
    assert table["group"].tolist() == ["alg", "bio", "chem"] and (table["n_runs"] == 3).all()
    assert len(pd.read_csv(tmp_path / "out" / "group_records.csv")) == 9
    assert "mean_cost" in pd.read_csv(tmp_path / "out" / "summary.csv")
    code = main(["experiment", "--data", str(data), "--out", str(tmp_path / "x"), "--budgets", "0.3", "--seeds", "1",
                 "--methods", "ht-uniform", "--groups-from", "tasks", "--quiet"])
    assert code == 2 and "cannot take groups" in capsys.readouterr().err
