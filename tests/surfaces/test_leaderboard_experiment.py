"""The leaderboard experiment on a tiny synthetic bank: its tables through the Python function and the CLI, the
groups it draws, the design passed through to the estimator, and the refusal of a bad K."""

import json

import numpy as np
import pandas as pd
import pytest

import faqstats as fq
import faqstats.experiments.leaderboard as lb_module
from faqstats.cli import main
from faqstats.experiments import (format_leaderboard_summary, read_csv, run_leaderboard_experiment,
                                  summarize_leaderboard)
from faqstats.experiments.leaderboard import (LEADERBOARD_METHODS, LEADERBOARD_RECORD_COLUMNS,
                                              LEADERBOARD_SUMMARY_COLUMNS)

COVERAGES = ["acc_coverage", "diff_coverage", "rank_coverage", "best_identified", "best_in_set"]


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=40, n_questions=100, n_new=8, n_components=2, random_state=0)


@pytest.fixture(scope="module")
def experiment(bank, fm):
    return run_leaderboard_experiment(bank.new_outcomes, fm, [2, 3], budgets=[0.1, 0.2], n_groups=2, verbose=False)


def test_tables_have_their_columns_and_coverages_are_shares(experiment):
    records, summary = experiment.records, experiment.summary
    assert list(records.columns) == list(LEADERBOARD_RECORD_COLUMNS)
    assert len(records) == 2 * 2 * 3 * 2  # K x budgets x methods x group-runs
    assert list(summary.columns) == list(LEADERBOARD_SUMMARY_COLUMNS)
    assert len(summary) == 2 * 2 * 3 and set(summary["method"]) == set(LEADERBOARD_METHODS)
    assert summary[COVERAGES].apply(lambda c: c.between(0, 1)).all().all()
    assert (summary["n_runs"] == 2).all()
    # every method spends K x the per-model budget
    assert (records["n_queries"] == records["K"] * records["budget"]).all()
    assert set(records["budget"]) == {10, 20}
    base = summary[summary["method"] == "fpc-bonferroni"]
    np.testing.assert_allclose(base["diff_width_ratio"], 1.0)
    text = format_leaderboard_summary(summary)
    assert "joint acc" in text and "fpc-bonferroni" in text


def test_naive_intervals_are_the_same_estimates_unadjusted(experiment):
    records = experiment.records
    both = records[records["method"] != "fpc-bonferroni"].pivot_table(
        index=["K", "budget", "group"], columns="method", values=["acc_width", "diff_width", "rank_width"])
    # per-model 95% intervals are never wider than simultaneous ones, nor their rank intervals
    assert (both[("acc_width", "naive")] <= both[("acc_width", "faqstats")] + 1e-12).all()
    assert (both[("diff_width", "naive")] <= both[("diff_width", "faqstats")] + 1e-12).all()
    three = both.loc[3]  # one difference (K = 2) needs no adjustment; three do
    assert (three[("diff_width", "naive")] < three[("diff_width", "faqstats")]).all()
    assert (both[("rank_width", "naive")] <= both[("rank_width", "faqstats")]).all()
    # a set that names the best alone and rightly has it in the set
    assert not (records["best_identified"] & ~records["best_in_set"]).any()


def test_groups_are_half_close_half_far_and_shared_by_budgets(bank, experiment):
    truths = bank.new_outcomes.mean(axis=1)
    rank_of = np.argsort(np.argsort(truths, kind="stable"), kind="stable")
    records = experiment.records
    for K in (2, 3):
        one = records[(records["K"] == K) & (records["method"] == "faqstats")]
        assert sorted(one["kind"].value_counts().to_dict().items()) == [("close", 2), ("far", 2)]
        assert one.groupby("group")["models"].nunique().eq(1).all()  # the same groups at every budget
        for models in one.loc[one["kind"] == "close", "models"]:
            ranks = np.sort(rank_of[[int(m) for m in models.split()]])
            assert np.array_equal(ranks, np.arange(ranks[0], ranks[0] + K))  # consecutive in accuracy order
    by_kind = summarize_leaderboard(records, by_kind=True)
    assert "kind" in by_kind.columns and len(by_kind) == 2 * len(experiment.summary)


def test_design_is_passed_through(bank, fm, monkeypatch):
    seen = []

    class Spy(fq.LeaderboardEstimator):
        def fit(self, outcomes, y=None, names=None):
            seen.append((self.design, self.budget))
            self.design = "independent"  # the other designs are someone else's: only the pass-through is tested
            return super().fit(outcomes, y, names)

    monkeypatch.setattr(lb_module, "LeaderboardEstimator", Spy)
    out = run_leaderboard_experiment(bank.new_outcomes, fm, 2, budgets=[0.1], n_groups=1, design="adaptive",
                                     verbose=False)
    assert seen == [("adaptive", 20), ("independent", 20)]  # the estimator's design, then the baseline
    assert out.summary["design"].tolist() == ["adaptive", "adaptive", "independent"]


def test_bad_K_is_refused(bank, fm):
    for K in (1, 9, [2, 0]):
        with pytest.raises(ValueError, match=r"K \(models per group\) must be in \[2, 8\]"):
            run_leaderboard_experiment(bank.new_outcomes, fm, K, n_groups=1, verbose=False)
    with pytest.raises(TypeError, match="K must be"):
        run_leaderboard_experiment(bank.new_outcomes, fm, 2.5, n_groups=1, verbose=False)


@pytest.fixture(scope="module")
def npz_file(bank, tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "bank.npz"
    matrix = np.vstack([bank.history, bank.new_outcomes])
    np.savez(path, outcomes=np.where(np.isnan(matrix), -1, matrix).astype(np.int8))
    return path


def test_cli_writes_the_tables(npz_file, tmp_path, capsys):
    out = tmp_path / "lb"
    rc = main(["experiment", "--data", str(npz_file), "--out", str(out), "--leaderboard", "2", "3", "--groups", "2",
               "--budgets", "0.1", "--history-fraction", "0.75", "--n-components", "2", "--max-iter", "5",
               "--quiet"])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    assert "joint acc" in printed and "Wrote leaderboard_records.csv" in printed
    records = read_csv(out / "leaderboard_records.csv", columns=LEADERBOARD_RECORD_COLUMNS)
    assert len(records) == 2 * 3 * 2 and set(records["K"]) == {2, 3}
    summary = read_csv(out / "leaderboard_summary.csv", columns=LEADERBOARD_SUMMARY_COLUMNS)
    assert summary[COVERAGES].apply(lambda c: c.between(0, 1)).all().all()
    assert pd.DataFrame(json.loads((out / "leaderboard_summary.json").read_text())).shape == summary.shape
    config = json.loads((out / "config.json").read_text())
    assert config["K"] == [2, 3] and config["n_test"] == 12 and config["designs"] == ["independent"]


def test_cli_refuses_a_bad_K_and_options_of_the_sweep(npz_file, tmp_path, capsys):
    common = ["experiment", "--data", str(npz_file), "--out", str(tmp_path / "x"), "--quiet"]
    assert main([*common, "--leaderboard", "1"]) == 2
    assert "K (models per group) must be in [2, 12]" in capsys.readouterr().err
    assert main([*common, "--leaderboard", "3", "--groups-from", "tasks"]) == 2
    assert "does not take --groups-from" in capsys.readouterr().err
    assert main([*common, "--design", "shared"]) == 2
    assert "add --leaderboard K" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_configure_runs_each_model_as_configured_from_the_history(bank, monkeypatch):
    seen = []
    real = lb_module.LeaderboardEstimator.fit

    def spy(self, outcomes, *args, **kwargs):
        seen.append((type(self.predictor).__name__, self.step_weights is not None))
        return real(self, outcomes, *args, **kwargs)

    monkeypatch.setattr(lb_module.LeaderboardEstimator, "fit", spy)
    out = run_leaderboard_experiment(bank.new_outcomes, bank.history, 2, budgets=[0.1], n_groups=2, configure=True,
                                     verbose=False)
    one = fq.configure_from_history(bank.history, 10, random_state=0, verbose=False).estimator
    assert out.config["configure"] and len(seen) == 4  # two groups: the method and the baseline
    assert seen[0] == (type(one.factor_model).__name__, one.step_weights is not None)
    with pytest.raises(ValueError, match="configure=True"):
        run_leaderboard_experiment(bank.new_outcomes, bank.history, 2, budgets=[0.1], n_groups=1, configure=True,
                                   factor_model={"n_components": 2}, verbose=False)
