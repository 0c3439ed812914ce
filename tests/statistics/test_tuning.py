"""Policy tuning on validation models from the history."""

import numpy as np
import pytest

import faqstats as fq
from faqstats.experiments import run_experiment, tune_policy


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=100, n_questions=90, n_components=2, random_state=3)


FM = fq.LogisticFactorModel(n_components=2, max_iter=150, random_state=0)


def test_winner_is_the_narrowest_qualifying_point(bank):
    grid = {"tau": (0.05, 0.5), "rho": (0.0, 0.5)}
    res = {8: tune_policy(bank.history, FM, budget=8, grid=grid, seeds=2, random_state=0)}
    res[12] = tune_policy(bank.history, FM, budget=12, grid=grid, seeds=2, random_state=0,
                          fitted_factor_model=res[8].factor_model)  # the same split: one refit
    assert set(res) == {8, 12}
    for b, r in res.items():
        t = r.table
        assert len(t) == 4 and set(t["tau"]) == {0.05, 0.5} and set(t["rho"]) == {0.0, 0.5}
        np.testing.assert_array_equal(t["qualifies"], t["coverage"] >= 0.95 - 0.01)
        ok = t[t["qualifies"]]
        best = ok.loc[ok["mean_width"].idxmin()] if len(ok) else t.loc[t["coverage"].idxmax()]
        assert r.best_params == {"tau": best["tau"], "rho": best["rho"]}
        assert r.sampler().get_params() == fq.HybridSampler(tau=best["tau"], rho=best["rho"]).get_params()
        assert (t["n_runs"] == 2 * r.n_validation).all()
    # one factor fit serves every budget
    assert res[8].factor_model is res[12].factor_model


def test_validation_models_come_from_complete_history_rows(bank):
    H = bank.history.copy()
    H[:, 0] = np.nan  # no complete row left
    with pytest.raises(ValueError, match="complete history rows"):
        tune_policy(H, FM, budget=5, grid={"tau": (0.5,)})
    H[:40, 0] = 1.0
    res = tune_policy(H, FM, budget=5, grid={"tau": (0.5,)}, seeds=1, validation_fraction=0.25)
    assert res.n_validation == 10
    with pytest.raises(ValueError, match="grid keys"):
        tune_policy(H, FM, budget=5, grid={"temperature": (1,)})


def test_experiment_runs_the_tuned_method(bank):
    matrix = np.vstack([np.nan_to_num(bank.history, nan=1.0), bank.new_outcomes])
    out = run_experiment(matrix, budgets=(0.1,), seeds=1, max_models=5, methods=("faq-tuned", "uniform-fpc"),
                         factor_model={"n_components": 2, "max_iter": 100}, tuning={"grid": {"tau": (0.25, 0.5)},
                                                                                     "seeds": 1}, verbose=False)
    assert list(out.tuning) == [9]
    assert set(out.records["method"]) == {"faq-tuned", "uniform-fpc"}


def test_cli_writes_the_tuning_table(bank, tmp_path, capsys):
    from faqstats.cli import main

    matrix = np.vstack([np.nan_to_num(bank.history, nan=1.0), bank.new_outcomes]).astype(np.int8)
    np.savez(tmp_path / "m.npz", outcomes=matrix)
    rc = main(["experiment", "--data", str(tmp_path / "m.npz"), "--out", str(tmp_path / "out"), "--methods",
               "faq-tuned", "uniform-fpc", "--seeds", "1", "--budgets", "0.1", "--max-models", "3", "--tune-seeds", "1",
               "--n-components", "2", "--max-iter", "50", "--quiet"])
    assert rc == 0
    lines = (tmp_path / "out" / "tuning.csv").read_text().splitlines()
    assert lines[0].split(",") == ["budget", "beta0", "rho", "gamma", "tau", "n_runs", "coverage", "mean_width",
                                   "rmse", "qualifies"]
    assert len(lines) == 1 + 24  # the paper's grid at one budget


def test_cli_chooses_k_and_alpha_by_cross_validation(bank, tmp_path, capsys):
    import json

    from faqstats.cli import main

    matrix = np.vstack([np.nan_to_num(bank.history, nan=1.0), bank.new_outcomes]).astype(np.int8)
    np.savez(tmp_path / "m.npz", outcomes=matrix)
    argv = ["experiment", "--data", str(tmp_path / "m.npz"), "--out", str(tmp_path / "out"), "--methods", "faq",
            "uniform-fpc", "--seeds", "1", "--budgets", "0.1", "--max-models", "3", "--cv-components", "1", "2",
            "--cv-regularization", "0.01", "--cv-folds", "2", "--max-iter", "40", "--quiet"]
    assert main(argv) == 0
    assert "Cross-validated factor model" in capsys.readouterr().out
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    assert cfg["factor_model_cv"]["n_components"] in (1, 2) and cfg["factor_model_cv"]["regularization"] == 0.01
    assert main(argv + ["--n-components", "2"]) == 2  # both ways of choosing k is refused
