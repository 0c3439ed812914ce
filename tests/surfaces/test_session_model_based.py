"""A session's answers read by the model-based estimate: the same result as ModelBasedEstimator running the
session's design, refusals for designs its calibration cannot replay, and ``session report --model-based``."""

import json

import numpy as np
import pandas as pd
import pytest

import faqstats as fq
from faqstats.cli import main

N, BUDGET = 40, 6
pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny problems (conftest.py)


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=24, n_questions=N, n_new=2, n_components=2, random_state=3)


@pytest.fixture(scope="module")
def fm(bank):  # fitted on the history, as the calibration refits it
    return fq.LogisticFactorModel(n_components=2, max_iter=60, random_state=0, verbose=False).fit(bank.history)


def answered(session, z):
    while not session.done:
        ids, _ = session.next_questions()
        session.record(ids, [z[i] for i in ids])
    return session


CALIBRATION = dict(max_calibration_models=8, n_folds=2, random_state=1, verbose=False)


def test_the_session_gives_the_estimators_result_for_its_design(bank, fm):
    z = bank.new_outcomes[0]
    session = answered(fq.EvaluationSession(fm, budget=BUDGET, batch_size=2, random_state=5), z)
    from_session = session.model_based(bank.history, **CALIBRATION)
    direct = fq.ModelBasedEstimator(sampler=fq.HybridSampler(), budget=BUDGET, pai_params={"batch_size": 2},
                                    policy_predictor=fq.LogisticFactorModel(n_components=2, max_iter=60, random_state=0,
                                                                            verbose=False), **CALIBRATION)
    direct.calibrate(bank.history).set_params(random_state=5).fit(z)  # the new model's draws: the session's seed
    pd.testing.assert_frame_equal(from_session.calibration_, direct.calibration_)
    assert from_session.estimate_ == direct.estimate_ and from_session.scale_ == direct.scale_
    assert from_session.result_.design_based == session.result() == direct.result_.design_based
    assert from_session.result_.flagged == direct.result_.flagged
    # another policy is another procedure: its calibration runs differ (the session's design is what is replayed)
    other = answered(fq.EvaluationSession(fm, sampler=fq.HybridSampler(tau=0.2), budget=BUDGET, batch_size=2,
                                          random_state=5), z)
    assert not np.allclose(other.model_based(bank.history, **CALIBRATION).calibration_["pai_estimate"],
                           direct.calibration_["pai_estimate"])


def test_the_sessions_estimator_makes_its_draws(bank, fm):
    z = bank.new_outcomes[0]
    session = answered(fq.EvaluationSession(fm, budget=BUDGET, batch_size=3, random_state=2), z)
    assert session.estimator().fit(z).result_ == session.result()


def test_refusals(bank, fm):
    z = bank.new_outcomes[0]
    unfinished = fq.EvaluationSession(fm, budget=BUDGET, random_state=0)
    ids, _ = unfinished.next_questions()
    unfinished.record(ids, [z[i] for i in ids])
    with pytest.raises(ValueError, match="finished session"):
        unfinished.model_based(bank.history, **CALIBRATION)
    done = answered(fq.EvaluationSession(fm, budget=BUDGET, random_state=0), z)
    with pytest.raises(TypeError, match="session's own"):
        done.model_based(bank.history, budget=3)
    with pytest.raises(ValueError, match="40 questions"):
        done.model_based(bank.history[:, :30], **CALIBRATION)
    grouped = answered(fq.EvaluationSession(fm, budget=BUDGET, groups=np.arange(N) % 2, random_state=0), z)
    with pytest.raises(ValueError, match="groups"):
        grouped.model_based(bank.history, **CALIBRATION)
    mean = answered(fq.EvaluationSession(None, list(range(N)), sampler=fq.UniformSampler(), budget=BUDGET,
                                         random_state=0), z)
    with pytest.raises(ValueError, match="predictor"):
        mean.model_based(bank.history, **CALIBRATION)
    with pytest.raises(ValueError, match="pai_params takes"):
        fq.ModelBasedEstimator(budget=4, pai_params={"groups": 1}).calibrate(bank.history)


def test_cli_report_prints_both_guarantees(capsys, tmp_path, bank, fm):
    ids = [f"q{j}" for j in range(N)]
    model = fq.save_factor_model(fm, tmp_path / "fm.npz", question_ids=ids)
    history = tmp_path / "history.npz"
    reordered = np.arange(N)[::-1]  # the history's columns in another order: matched by id
    H = np.where(np.isnan(bank.history), -1, bank.history).astype(np.int8)[:, reordered]
    np.savez(history, outcomes=H, items=np.array(ids)[reordered])
    assert main(["session", "new", str(tmp_path / "s"), "--model", str(model), "--budget", str(BUDGET)]) == 0
    z = bank.new_outcomes[0]
    answered(fq.EvaluationSession.load(tmp_path / "s"), dict(zip(ids, z)))  # answers by question id
    capsys.readouterr()
    assert main(["session", "report", str(tmp_path / "s"), "--model-based", str(history), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["model_based"]
    low, high = out["interval"]
    assert low <= out["estimate"] <= high and out["calibration_runs"] >= 2
    assert out["recommended_interval"] == (out["design_based_interval"] if out["flagged"] else out["interval"])
    assert main(["session", "report", str(tmp_path / "s"), "--model-based", str(history), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "valid if this model is like the history's" in text and "valid for every model" in text
    np.savez(history, outcomes=H, items=np.array([f"x{j}" for j in range(N)]))
    assert main(["session", "report", str(tmp_path / "s"), "--model-based", str(history)]) != 0
    assert "lacks 40 of the session's questions" in capsys.readouterr().err


def test_a_leaderboard_gives_every_models_estimate_at_a_joint_level(capsys, tmp_path, bank, fm):
    ids = [f"q{j}" for j in range(N)]
    board = fq.LeaderboardSession.create(tmp_path / "board", fm, ["a", "b"], 2 * BUDGET, ids, random_state=0)
    z = {name: dict(zip(ids, bank.new_outcomes[k])) for k, name in enumerate(["a", "b"])}
    with pytest.raises(ValueError, match="not finished"):
        board.model_based(bank.history, **CALIBRATION)
    for name in board.names:
        answered(board.session(name), z[name])
    with pytest.warns(UserWarning, match="at 0.025, which needs 39 calibration runs; the history gave 8"):
        table = board.model_based(bank.history, **CALIBRATION)
    assert list(table.index) == ["a", "b"]
    # 8 runs are too few at 0.025: the model-based intervals are [0, 1] and the recommended ones PAI's
    assert (table["lower"] == 0).all() and (table["upper"] == 1).all()
    assert table["recommended_lower"].equals(table["design_lower"])
    assert table["recommended_upper"].equals(table["design_upper"])
    for name in board.names:  # each row: the model's own estimate, at alpha / K
        one = board.session(name).model_based(bank.history, **CALIBRATION).result_
        assert table.loc[name, "estimate"] == one.estimate
        assert (table.loc[name, "lower"], table.loc[name, "upper"]) == one.conf_int(board.alpha / 2)
        assert table.loc[name, "design_based"] == one.design_based.estimate
    assert (table["lower"] <= table["estimate"]).all() and (table["estimate"] <= table["upper"]).all()
    # at a joint 0.7 each interval is at 0.15, which 8 runs can calibrate: narrower than [0, 1], wider than at 0.3
    loose = fq.LeaderboardSession.create(tmp_path / "loose", fm, ["a", "b"], 2 * BUDGET, ids, alpha=0.3,
                                         random_state=0)
    for name in loose.names:
        answered(loose.session(name), z[name])
    wide = loose.model_based(bank.history, **CALIBRATION)
    for name in loose.names:
        one = loose.session(name).model_based(bank.history, **CALIBRATION).result_
        assert (wide.loc[name, "lower"], wide.loc[name, "upper"]) == one.conf_int(0.15) != (0.0, 1.0)
        assert wide.loc[name, "upper"] - wide.loc[name, "lower"] >= np.subtract(*one.conf_int(0.3)[::-1])
    path = tmp_path / "history.npz"
    np.savez(path, outcomes=np.where(np.isnan(bank.history), -1, bank.history).astype(np.int8), items=np.array(ids))
    capsys.readouterr()
    assert main(["session", "report", str(tmp_path / "board"), "--model-based", str(path), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "Model-based estimates, 95% intervals for all models at once" in text
