"""Experiments runner: a reduced experiment end to end (CLI, CSV, figures), reproducibility
across n_jobs and backends, exact ESS on a hand-made table, the split, bad input."""

import csv

import numpy as np
import pandas as pd
import pytest

import faqstats as fq
from faqstats.cli import main
from faqstats.experiments import (
    METHODS,
    budget_sizes,
    per_model_coverage,
    read_csv,
    run_experiment,
    split_matrix,
    summarize,
    write_csv,
)
from faqstats.experiments.records import MODEL_COVERAGE_COLUMNS, RECORD_COLUMNS, SUMMARY_COLUMNS, clustered_se
from pandas.testing import assert_frame_equal

#: small and quick: the fit's quality does not matter here, only that the pipeline runs
FM = {"n_components": 3, "max_iter": 30}
#: the split of the reproducibility test: 5 of the 10 complete rows are new models, 4 of them evaluated
SPLIT = dict(history_fraction=0.5, split_seed=0, max_models=4)


@pytest.fixture(scope="module")
def matrix():
    """60 x 80 bank with 10% of the first 50 rows missing (so not every row can be a new model)."""
    bank = fq.make_synthetic_bank(n_models=50, n_questions=80, n_new=10, n_components=3, missing_rate=0.1,
                                  random_state=0)
    return np.vstack([bank.history, bank.new_outcomes])


@pytest.fixture(scope="module")
def npz_file(matrix, tmp_path_factory):
    raw = np.where(np.isnan(matrix), -1, matrix).astype(np.int8)  # the openllm_v1 convention
    path = tmp_path_factory.mktemp("data") / "bank.npz"
    np.savez(path, outcomes=raw)
    return path


# ------------------------------------------------------------------ end to end
def test_experiment_cli_writes_tables_and_figures(npz_file, tmp_path, capsys):
    out = tmp_path / "exp"
    rc = main([
        "experiment", "--data", str(npz_file), "--out", str(out), "--budgets", "0.1", "0.25", "--seeds", "2",
        "--methods", "faq", "uniform-fpc", "ht-uniform", "--max-models", "5", "--history-fraction", "0.5",
        "--n-components", "3", "--max-iter", "30", "--quiet",
    ])
    printed = capsys.readouterr().out
    assert rc == 0
    assert "ESS vs FPC" in printed and "uniform-fpc" in printed and "coverage" in printed

    with (out / "records.csv").open() as fh:
        assert next(csv.reader(fh)) == list(RECORD_COLUMNS)
    records = read_csv(out / "records.csv")
    assert len(records) == 3 * 2 * 5 * 2  # methods x budgets x models x seeds
    assert set(records["budget"]) == {8, 20}  # round(0.1 * 80), round(0.25 * 80)
    assert np.all((records["low"] <= records["estimate"]) | (records["low"] == 0))
    assert np.all(records["covered"] == ((records["low"] <= records["truth"]) & (records["truth"] <= records["high"])))
    assert np.all(records["n_queries"][records["method"] != "ht-uniform"] == records["budget"][records["method"] != "ht-uniform"])

    summary = read_csv(out / "summary.csv", SUMMARY_COLUMNS)
    assert len(summary) == 3 * 2
    np.testing.assert_allclose(summary["ess_fpc"][summary["method"] == "uniform-fpc"], 1.0)
    np.testing.assert_allclose(summary["ess_ht"][summary["method"] == "ht-uniform"], 1.0)
    np.testing.assert_allclose(summary["coverage"], summarize(records)["coverage"])
    models = read_csv(out / "model_coverage.csv", MODEL_COVERAGE_COLUMNS)
    assert len(models) == 3 * 2 * 5

    for name in ("ess_vs_budget", "coverage_vs_budget", "width_vs_budget", "model_coverage_vs_accuracy"):
        png = out / f"{name}.png"
        assert png.stat().st_size > 5000
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "config.json").exists()
    md = (out / "summary.md").read_text().splitlines()
    assert md[0].startswith("| method |") and len(md) == 2 + len(summary)
    # faq's increment weights, learned from the history per budget
    with (out / "step_weights.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 8 + 20 and {r["method"] for r in rows} == {"faq"}
    assert all(float(r["weight"]) > 0 for r in rows)
    assert (out / "step_weights.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_parametrised_method_names(matrix):
    from faqstats.experiments.methods import parse_method

    assert parse_method("aipw-min:tau=0.05,order=natural") == ("aipw-min", {"tau": 0.05, "order": "natural"})
    assert parse_method("faq:replace=true") == ("faq", {"replace": True})
    res = run_experiment(matrix, budgets=[0.1], seeds=1, methods=["uniform-fpc", "uniform-fpc:replace=true"],
                         max_models=3, verbose=False)
    r = res.records
    assert set(r["method"]) == {"uniform-fpc", "uniform-fpc:replace=true"}
    with pytest.raises(ValueError, match="tau"):
        run_experiment(matrix, budgets=[0.1], methods=["faq:tau=7"], verbose=False)
    with pytest.raises(ValueError, match="key=value"):
        run_experiment(matrix, budgets=[0.1], methods=["faq:tau"], verbose=False)
    with pytest.raises(ValueError, match="unknown method"):
        run_experiment(matrix, budgets=[0.1], methods=["nope:tau=0.1"], verbose=False)


def test_new_models_are_complete_rows_and_truth_is_their_accuracy(matrix):
    res = run_experiment(matrix, budgets=[0.1], seeds=1, methods=["uniform-fpc"], verbose=False)
    assert res.factor_model is None  # no method needed one: nothing fitted
    rows = res.records["row"]
    assert not np.isnan(matrix[rows]).any()
    np.testing.assert_allclose(res.records["truth"], matrix[rows].mean(axis=1))
    # 50 history rows are incomplete, 10 complete: 75% of those (8) join the history
    assert res.history_shape == (58, 80) and res.new_rows.size == 2


# ------------------------------------------------------------------ reproducibility
@pytest.fixture(scope="module")
def fitted_fm(matrix):
    history, _, _ = split_matrix(matrix, **SPLIT)
    return fq.LogisticFactorModel(random_state=0, **FM).fit(history)


def test_results_do_not_depend_on_n_jobs_backend_or_other_methods(matrix, fitted_fm):
    kw = dict(budgets=[0.05, 0.25], seeds=2, methods=["faq", "ht-uniform"], verbose=False, **SPLIT)
    first = run_experiment(matrix, n_jobs=1, factor_model=FM, **kw)
    serial = first.records
    # a fitted model is used as is; the dict spec fits the same model (torch CPU is deterministic here)
    np.testing.assert_allclose(first.factor_model.question_factors_, fitted_fm.question_factors_, rtol=1e-6)
    kw["factor_model"] = fitted_fm
    loky = run_experiment(matrix, n_jobs=2, **kw).records
    threads = run_experiment(matrix, n_jobs=2, backend="threading", **kw).records
    assert_frame_equal(serial, loky)
    assert_frame_equal(serial, threads)
    # a run's seed depends on its own (method, budget, model, seed) only
    again = run_experiment(matrix, n_jobs=1, **kw)
    assert again.factor_model is fitted_fm and again.fit_seconds == 0.0
    assert_frame_equal(serial, again.records)
    alone = run_experiment(matrix, n_jobs=1, **dict(kw, methods=["faq"], budgets=[0.25])).records
    same = serial[(serial["method"] == "faq") & (serial["budget"] == 20)]
    assert_frame_equal(alone, same.reset_index(drop=True))
    # different seeds, different draws
    s0, s1 = same[same["seed"] == 0], same[same["seed"] == 1]
    assert not np.array_equal(s0["estimate"].to_numpy(), s1["estimate"].to_numpy())


def test_surrogate_methods_fit_the_gp_only_and_match_the_estimator(matrix):
    """"gp"/"gp-equal" use the Gaussian-process surrogate fitted on the history (no factor model fit),
    "gp" with increment weights learned on it; a record is the estimator's run with the same seed."""
    from faqstats.experiments.records import method_key

    out = run_experiment(matrix, budgets=[0.25], seeds=1, methods=["gp", "gp-equal"], verbose=False,
                         step_weights={"n_runs": 20}, **SPLIT)
    assert out.factor_model is None and isinstance(out.surrogate, fq.GaussianProcessSurrogate)
    assert set(out.step_weights) == {("gp", 20)}
    history, new, _ = split_matrix(matrix, history_fraction=0.5, split_seed=0, max_models=4)
    np.testing.assert_allclose(out.surrogate.question_means_, fq.GaussianProcessSurrogate().fit(history).question_means_)
    rec = out.records[out.records["method"] == "gp-equal"].iloc[1]
    rng = np.random.default_rng([0, method_key("gp-equal"), 20, 1, 0])
    est = fq.PAIEstimator(out.surrogate, fq.HybridSampler(), budget=20, random_state=rng,
                          step_weights=np.ones(20)).fit(new[1])  # "-equal": literally equal weights
    assert abs(rec["estimate"] - est.estimate_) < 1e-12 and abs(rec["std_error"] - est.std_error_) < 1e-12


# ------------------------------------------------------------------ summaries
def _hand_records():
    rows = []
    # (method, model, seed, estimate, std_error, low, high); truth 0.5 for model 0, 0.7 for model 1
    truth = {0: 0.5, 1: 0.7, 2: 0.6}
    spec = [
        ("faq", 0, 0, 0.52, 0.1, 0.4, 0.6),
        ("faq", 0, 1, 0.45, 0.2, 0.46, 0.8),  # covered
        ("faq", 1, 0, 0.80, 0.1, 0.75, 0.85),  # misses 0.7
        ("faq", 1, 1, 0.70, 0.3, 0.5, 0.9),
        ("faq", 2, 0, 0.60, 5.0, 0.0, 1.0),  # no baseline run for model 2: left out of the ESS
        ("uniform-fpc", 0, 0, 0.5, 0.2, 0.3, 0.7),
        ("uniform-fpc", 0, 1, 0.5, 0.4, 0.3, 0.7),
        ("uniform-fpc", 1, 0, 0.7, 0.2, 0.3, 0.9),
        ("uniform-fpc", 1, 1, 0.7, 0.4, 0.3, 0.9),
        ("ht-uniform", 0, 0, 0.5, 0.5, 0.0, 1.0),
        ("ht-uniform", 1, 1, 0.7, 0.5, 0.0, 1.0),
    ]
    for m, model, seed, est, se, low, high in spec:
        t = truth[model]
        rows.append((m, 0.1, 10, model, model, seed, t, est, se, low, high, low <= t <= high, 10))
    return pd.DataFrame(rows, columns=RECORD_COLUMNS)


def test_summarize_ess_is_ratio_of_mean_variances_over_shared_runs():
    records = _hand_records()
    s = summarize(records)
    assert s["method"].tolist() == ["faq", "uniform-fpc", "ht-uniform"]
    faq = s[s["method"] == "faq"].iloc[0]
    # ESS vs FPC over (model, seed) in {0, 1} x {0, 1}: mean(0.04, 0.16, 0.04, 0.16) / mean(0.01, 0.04, 0.01, 0.09)
    assert faq["ess_fpc"] == pytest.approx(0.10 / 0.0375)
    # vs HT: only (0, 0) and (1, 1) are shared: mean(0.25, 0.25) / mean(0.01, 0.09)
    assert faq["ess_ht"] == pytest.approx(0.25 / 0.05)
    # not the mean of per-run ratios (which would be (4 + 4 + 4 + 16/9) / 4 for FPC)
    assert faq["ess_fpc"] != pytest.approx(np.mean([4, 4, 4, 16 / 9]))
    assert faq["n_runs"] == 5
    assert faq["coverage"] == pytest.approx(4 / 5)
    # clustered by model (models 0, 1, 2 cover 2/2, 1/2, 1/1; residuals 0.2 each, -0.8 and 0.2, 0.2): CR1
    totals = np.array([0.4, -0.6, 0.2])
    assert faq["coverage_se"] == pytest.approx(np.sqrt(3 / 2 * np.sum(totals**2)) / 5)
    assert faq["mean_width"] == pytest.approx(np.mean([0.2, 0.34, 0.1, 0.4, 1.0]))
    assert faq["rmse"] == pytest.approx(np.sqrt(np.mean([0.02**2, 0.05**2, 0.1**2, 0, 0])))
    assert faq["mean_variance"] == pytest.approx(np.mean([0.01, 0.04, 0.01, 0.09, 25.0]))
    assert s[s["method"] == "uniform-fpc"].iloc[0]["ess_fpc"] == pytest.approx(1.0)
    # without the baselines the ESS columns are NaN
    alone = summarize(records[records["method"] == "faq"])
    assert np.isnan(alone["ess_fpc"]).all() and np.isnan(alone["ess_ht"]).all()


def test_per_model_coverage_and_csv_round_trip(tmp_path):
    records = _hand_records()
    table = per_model_coverage(records)
    faq = table[table["method"] == "faq"]
    assert faq["model"].tolist() == [0, 1, 2]
    assert faq["coverage"].tolist() == [1.0, 0.5, 1.0]
    assert faq["n_runs"].tolist() == [2, 2, 1]
    assert_frame_equal(read_csv(write_csv(records, tmp_path / "r.csv")), records, check_dtype=False)
    assert_frame_equal(read_csv(write_csv(table, tmp_path / "m.csv"), MODEL_COVERAGE_COLUMNS), table,
                       check_dtype=False)
    with pytest.raises(ValueError, match="columns"):
        read_csv(tmp_path / "m.csv")  # a per-model table is not a records table


# ------------------------------------------------------------------ split and budgets
def test_split_masks_history_but_keeps_full_rows():
    m = (np.random.default_rng(0).random((40, 30)) < 0.6).astype(float)
    h, new, rows = split_matrix(m, history_fraction=0.5, split_seed=3, n_full_obs=5, p_obs=0.3)
    assert h.shape == (20, 30) and new.shape == (20, 30)
    assert not np.isnan(h[:5]).any()
    assert 0.2 < np.mean(~np.isnan(h[5:])) < 0.45
    assert (~np.isnan(h)).any(axis=1).all()
    h2, _, rows2 = split_matrix(m, history_fraction=0.5, split_seed=3, n_full_obs=5, p_obs=0.3)
    np.testing.assert_array_equal(h, h2)
    np.testing.assert_array_equal(rows, rows2)
    order = np.arange(40)[::-1]
    h3, new3, rows3 = split_matrix(m, history_fraction=0.25, order=order)
    np.testing.assert_array_equal(rows3, order[10:])
    np.testing.assert_array_equal(h3, m[order[:10]])


def test_budget_sizes_round_clip_and_merge():
    fr, sizes = budget_sizes([0.01, 0.1, 0.25, 1.0], 80)
    assert sizes.tolist() == [2, 8, 20, 80]
    with pytest.warns(UserWarning, match="same number of queries"):
        fr, sizes = budget_sizes([0.01, 0.02, 0.1], 80)
    assert fr.tolist() == [0.01, 0.1] and sizes.tolist() == [2, 8]


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("budgets", [[0.0], [0.1, 1.5], [-0.1]])
def test_budget_fractions_outside_unit_interval_are_refused(matrix, budgets):
    with pytest.raises(ValueError, match=r"in \(0, 1\]"):
        run_experiment(matrix, budgets=budgets, seeds=1, methods=["uniform-fpc"], verbose=False)


def test_unknown_method_is_refused_with_the_choices(matrix, npz_file, tmp_path, capsys):
    with pytest.raises(ValueError, match="unknown method.*'fqa'.*faq-paper"):
        run_experiment(matrix, methods=["faq", "fqa"], verbose=False)
    rc = main(["experiment", "--data", str(npz_file), "--out", str(tmp_path), "--methods", "fqa", "--quiet"])
    assert rc == 2
    assert "unknown method" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing written


def test_other_bad_inputs(matrix):
    with pytest.raises(ValueError, match="n_full_obs needs p_obs"):
        split_matrix(matrix, n_full_obs=3)
    with pytest.raises(ValueError, match="complete rows"):
        split_matrix(matrix, order=[0, 55, 56])  # row 0 has missing entries
    with pytest.raises(ValueError, match="seeds"):
        run_experiment(matrix, seeds=[1, 1], methods=["uniform-fpc"], verbose=False)
    with pytest.raises(TypeError, match="factor_model"):
        run_experiment(matrix, budgets=[0.1], seeds=1, methods=["faq"], factor_model="big", verbose=False)
    assert set(METHODS) >= {"faq", "faq-paper", "neyman", "active", "uniform-fpc", "ht-uniform", "aipw-neyman",
                            "aipw-min"}


@pytest.mark.slow
def test_sweep_on_a_dask_local_cluster_matches_serial(matrix, fitted_fm):
    """The issue's distributed check: a real dask.distributed LocalCluster with 2 worker
    processes runs the sweep through joblib's dask backend and gives the serial numbers."""
    distributed = pytest.importorskip("dask.distributed")
    import joblib

    kw = dict(budgets=[0.05, 0.25], seeds=2, methods=["faq", "uniform-fpc"], verbose=False,
              factor_model=fitted_fm, **SPLIT)
    serial = run_experiment(matrix, n_jobs=1, **kw).records
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster):
            with distributed.get_task_stream() as tasks, joblib.parallel_config(backend="dask"):
                distributed_records = run_experiment(matrix, **kw).records
    assert len(tasks.data) > 0  # the work really ran on the cluster
    assert_frame_equal(serial, distributed_records)


@pytest.mark.slow
def test_experiment_cli_on_a_dask_scheduler_matches_serial(npz_file, tmp_path, capsys):
    """``faqstats experiment --scheduler ADDRESS``: the sweep of the command line on a real dask.distributed
    LocalCluster (2 worker processes), its tables those of the serial run."""
    distributed = pytest.importorskip("dask.distributed")
    argv = ["experiment", "--data", str(npz_file), "--budgets", "0.05", "0.25", "--seeds", "2", "--methods", "faq",
            "uniform-fpc", "--max-models", "4", "--history-fraction", "0.5", "--n-components", "3", "--max-iter", "30",
            "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "serial")]) == 0
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            client.get_task_stream()  # starts recording the scheduler's tasks, of every client
            assert main([*argv, "--out", str(tmp_path / "cluster"), "--scheduler", cluster.scheduler_address]) == 0
            assert len(client.get_task_stream()) > 0  # the work really ran on the cluster
    capsys.readouterr()
    for table, columns in (("records.csv", RECORD_COLUMNS), ("summary.csv", SUMMARY_COLUMNS)):
        assert_frame_equal(read_csv(tmp_path / "serial" / table, columns),
                           read_csv(tmp_path / "cluster" / table, columns))


def test_experiment_scheduler_refusals(npz_file, tmp_path, capsys):
    assert main(["experiment", "--data", str(npz_file), "--out", str(tmp_path / "x"), "--scheduler", "tcp://h:1",
                 "--backend", "loky", "--methods", "uniform-fpc"]) == 2
    err = capsys.readouterr().err
    assert "--scheduler runs the sweep on a dask cluster (joblib's dask backend): drop --backend loky" in err


def test_draw_bank_cli_writes_a_bank_the_experiment_reads(tmp_path, capsys):
    from faqstats.datasets import draw_bank_from_factors, load_response_matrix

    rng = np.random.default_rng(0)
    U, V = rng.normal(size=(30, 3)), rng.normal(size=(40, 3))
    np.savez(tmp_path / "factors.npz", model_factors=U, question_factors=V)
    assert main(["draw-bank", "--factors", str(tmp_path / "factors.npz"), "--out", str(tmp_path / "bank.npz"),
                 "--seed", "3"]) == 0
    Z, _ = load_response_matrix(tmp_path / "bank.npz")
    np.testing.assert_array_equal(Z, draw_bank_from_factors(U, V, random_state=3))
    # the draws follow the factors: strongly positive logits come out 1 far more often
    logits = U @ V.T
    assert Z[logits > 2].mean() > 0.8 > 0.2 > Z[logits < -2].mean()
    np.savez(tmp_path / "bad.npz", model_factors=U)
    assert main(["draw-bank", "--factors", str(tmp_path / "bad.npz"), "--out", str(tmp_path / "x.npz")]) == 2
    assert "question_factors" in capsys.readouterr().err


# ------------------------------------------------------------------ the demo
def test_demo_prints_both_methods_and_leaves_the_backend_alone(tmp_path, capsys):
    import matplotlib

    backend = matplotlib.get_backend()
    assert main(["demo", "--out", str(tmp_path), "--budgets", "10", "20", "--models", "6", "--seeds", "2",
                 "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "first 5 of 6 new models" in printed and "faq-equal" in printed and "uniform-fpc" in printed
    assert "ESS vs FPC" in printed and "ESS vs HT" not in printed  # no HT baseline in the demo
    assert (tmp_path / "width_vs_budget.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert matplotlib.get_backend() == backend
    demo = fq.experiments.run_demo(budgets=(10,), n_models=60, n_questions=80, n_new=2, seeds=3, verbose=False)
    s = demo.summary()
    assert s["n_runs"].tolist() == [6, 6] and s.loc[s["method"] == "uniform-fpc", "ess_fpc"].item() == 1.0


def test_coverage_se_is_clustered_by_model():
    # 10 models x 20 seeds: half the models always covered, half never: the i.i.d. se (0.035) would claim a
    # coverage known to +-0.07; the clustered one says what 10 models can show (0.167)
    covered = np.repeat([1.0, 0.0] * 5, 20)
    models = np.repeat(np.arange(10), 20)
    assert clustered_se(covered, models) == pytest.approx(np.sqrt(10 / 9 * 10 * (20 * 0.5) ** 2) / 200)
    assert clustered_se(covered, models) > 4 * np.std(covered, ddof=1) / np.sqrt(200)
    # runs independent of the model: close to the i.i.d. se
    rng = np.random.default_rng(0)
    iid = rng.random(2000) < 0.9
    iid_se = np.std(iid, ddof=1) / np.sqrt(2000)
    assert clustered_se(iid, np.repeat(np.arange(100), 20)) == pytest.approx(iid_se, rel=0.25)
    assert clustered_se([1.0, 0.0], [0, 0]) == pytest.approx(np.std([1, 0], ddof=1) / np.sqrt(2))
    assert np.isnan(clustered_se([1.0], [0]))
