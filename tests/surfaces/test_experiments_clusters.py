"""Experiments with clusters (issue 15): every run is the cluster design, budgets count cluster
draws, uniform-fpc is the cluster sample mean; ``faqstats experiment --clusters-from/--cluster-size``."""

import json

import numpy as np
import pandas as pd
import pytest

import faqstats as fq
from faqstats.cli import main
from faqstats.experiments import run_experiment, run_methods, summarize
from faqstats.experiments.records import method_key

N = 48
CLUSTERS = np.arange(N) // 4  # 12 clusters of 4


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=60, n_questions=N, n_new=3, n_components=2, random_state=2)


def test_cluster_runs_are_each_runs_estimator_results(bank, fm):
    runs = run_methods(bank.history, bank.new_outcomes, [3, 6], seeds=2, methods=["faq-equal", "uniform-fpc"],
                       factor_model=fm, clusters=CLUSTERS, verbose=False, random_state=3)
    r = runs.records
    assert len(r) == 2 * 2 * 2 * 3
    assert (r["n_queries"] == 4 * r["budget"]).all()  # whole clusters of 4, without replacement
    for k in (4, 20):  # one run of each method, redone by hand with the seed the runner gives it
        rec = r.iloc[k]
        gen = np.random.default_rng([3, method_key(rec["method"]), int(rec["budget"]), int(rec["model"]),
                                     int(rec["seed"])])
        if rec["method"] == "faq-equal":
            est = fq.PAIEstimator(fm, fq.HybridSampler(), budget=int(rec["budget"]),
                                  step_weights=np.ones(int(rec["budget"])), random_state=gen)
        else:
            est = fq.PAIEstimator(None, fq.UniformSampler(replace=False), budget=int(rec["budget"]), random_state=gen)
        est.fit(bank.new_outcomes[rec["model"]], clusters=CLUSTERS)
        assert est.result_.method == ("pai-cluster" if rec["method"] == "faq-equal" else "cluster_sample_mean")
        assert rec["estimate"] == est.estimate_ and rec["std_error"] == est.std_error_
    # the baseline of the ESS columns is the cluster sample mean
    table = summarize(runs)
    assert table.loc[table["method"] == "uniform-fpc", "ess_fpc"].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("options, match", [
    ({"methods": ["ht-uniform"]}, "method 'ht-uniform' cannot take clusters"),
    ({"methods": ["uniform-fpc"], "budgets": [13]}, r"distinct numbers of cluster draws in \[2, 12\]"),
    ({"methods": ["uniform-fpc"], "groups": np.arange(N) % 2}, "spans groups"),
    ({"methods": ["uniform-fpc"], "clusters": np.zeros(N)}, "at least 2 clusters"),
])
def test_refusals(bank, options, match):
    kwargs = {"budgets": [3], "clusters": CLUSTERS, "seeds": 1, "verbose": False} | options
    with pytest.raises(ValueError, match=match):
        run_methods(bank.history, bank.new_outcomes, **kwargs)


def test_budget_fractions_are_of_the_clusters(bank):
    out = run_experiment(np.vstack([bank.history, bank.new_outcomes]), budgets=[0.25, 0.5], seeds=1,
                         methods=["uniform-fpc"], clusters=CLUSTERS, max_models=2, verbose=False)
    assert sorted(set(out.records["budget"])) == [3, 6]


def test_experiment_command_with_clusters(tmp_path, capsys, bank):
    data = tmp_path / "bank.npz"
    matrix = np.vstack([bank.history, bank.new_outcomes])
    ids = [f"q{j}" for j in range(N)]
    np.savez(data, outcomes=np.where(np.isnan(matrix), -1, matrix).astype(np.int8), items=np.array(ids))
    (tmp_path / "clusters.json").write_text(json.dumps({q: f"p{c:02d}" for q, c in zip(ids, CLUSTERS.tolist())}))
    common = ["experiment", "--data", str(data), "--budgets", "0.25", "--seeds", "1", "--methods", "uniform-fpc",
              "--max-models", "3", "--quiet"]
    assert main([*common, "--out", str(tmp_path / "a"), "--clusters-from", str(tmp_path / "clusters.json")]) == 0
    assert main([*common, "--out", str(tmp_path / "b"), "--cluster-size", "4"]) == 0
    capsys.readouterr()
    a, b = (pd.read_csv(tmp_path / d / "records.csv") for d in ("a", "b"))
    assert (a["budget"] == 3).all() and (a["n_queries"] == 12).all()
    pd.testing.assert_frame_equal(a, b)  # the same clusters (in the same order), named two ways
    config = json.loads((tmp_path / "b" / "config.json").read_text())
    assert config["clusters"] == {"from": None, "cluster_size": 4, "n_clusters": 12}
    code = main([*common, "--out", str(tmp_path / "c"), "--cluster-size", "4", "--methods", "ht-uniform"])
    assert code == 2 and "cannot take clusters" in capsys.readouterr().err
    code = main([*common, "--out", str(tmp_path / "d"), "--cluster-size", "0"])
    assert code == 2 and "--cluster-size must be a positive" in capsys.readouterr().err
