"""The history file: save and load round trip, a history that grows with finished sessions (their answers
as rows, the sources checksummed), replaced rows, a response matrix written by other tools grown the
same way, and fit-history reading the grown file."""

import json

import numpy as np
import pytest

import faqstats as fq
from faqstats.cli import main

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny problems (conftest.py)

IDS = [f"task/{j}" for j in range(12)]


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=8, n_questions=12, n_new=3, n_components=2, missing_rate=0.2,
                                  random_state=0)


@pytest.fixture
def history(tmp_path, bank):
    return fq.save_history(tmp_path / "history.npz", bank.history, [f"old-{i}" for i in range(8)], IDS)


def finished_session(directory, outcomes, budget=5, seed=0, done=True, fm=None):
    """A session over IDS answered from ``outcomes`` (a planted model's row): done, or one answer short."""
    sampler = fq.UniformSampler(replace=False) if fm is None else fq.HybridSampler()
    session = fq.EvaluationSession(fm, IDS, sampler=sampler, budget=budget, random_state=seed, directory=directory)
    while not session.done:
        ids, _ = session.next_questions()
        if not done and session.n_answers == budget - 1:
            break
        session.record(ids, [float(outcomes[IDS.index(q)]) for q in ids])
    return session


def asked_row(session):
    """The reference row: the session's answers by hand, from its query table."""
    row = np.full(len(IDS), np.nan)
    for q, y in zip(session.queries()["question"], session.queries()["outcome"]):
        row[IDS.index(session.question_ids[int(q)])] = y
    return row


def test_save_and_load_round_trip(tmp_path):
    outcomes = np.array([[1.0, 0.0, np.nan], [0.25, 1.0, 1.0]])
    groups = np.array(["a", "b", "b"])
    path = fq.save_history(tmp_path / "h", outcomes, ["m/1", "m/2"], ["q/1", "q/2", "q/3"], arrays={"groups": groups})
    loaded, models, ids, metadata = fq.load_history(path)
    np.testing.assert_array_equal(loaded, outcomes)
    assert (models, ids, metadata["format"], metadata["sources"]) == (["m/1", "m/2"], ["q/1", "q/2", "q/3"],
                                                                       "faqstats.history", [])
    assert metadata["arrays"]["groups"].tolist() == ["a", "b", "b"]
    # any response-matrix reader reads it: NaN kept, ids as question_ids
    matrix, meta = fq.load_response_matrix(path)
    np.testing.assert_array_equal(matrix, outcomes)
    assert meta["question_ids"].tolist() == ids and "metadata_json" not in meta


def test_sessions_grow_the_history_row_by_row(tmp_path, bank, history):
    fm = fq.LogisticFactorModel.from_factors(bank.question_factors, model_factors=bank.model_factors)
    a = finished_session(tmp_path / "new-a", bank.new_outcomes[0], fm=fm)
    b = finished_session(tmp_path / "new-b", bank.new_outcomes[1], seed=1)
    before = fq.load_history(history)
    fq.add_sessions_to_history(history, [a.directory, b.directory], names=["model-a", "model-b"])
    outcomes, models, ids, metadata = fq.load_history(history)
    assert models == [*before[1], "model-a", "model-b"] and ids == IDS
    np.testing.assert_array_equal(outcomes[:8], before[0])  # the old rows as they were
    np.testing.assert_array_equal(outcomes[8], asked_row(a))
    np.testing.assert_array_equal(outcomes[9], asked_row(b))
    assert int((~np.isnan(outcomes[8])).sum()) == 5
    sources = metadata["sources"]
    assert [s["model"] for s in sources] == ["model-a", "model-b"]
    assert sources[0]["n_answers"] == 5 and sources[0]["complete"] and sources[0]["stop_reason"] == "budget"
    assert sources[0]["path"] == str((tmp_path / "new-a").resolve()) and len(sources[0]["sha256"]) == 64
    assert metadata["created_utc"] == before[3]["created_utc"]
    # replace: the row changes in place, its source too; the other rows and sources stay
    c = finished_session(tmp_path / "again", bank.new_outcomes[2], seed=2)
    fq.add_sessions_to_history(history, [c.directory], names=["model-a"], replace=True)
    outcomes2, models2, _, metadata2 = fq.load_history(history)
    assert models2 == models
    np.testing.assert_array_equal(outcomes2[8], asked_row(c))
    np.testing.assert_array_equal(outcomes2[9], outcomes[9])
    assert [s["model"] for s in metadata2["sources"]] == ["model-b", "model-a"]


def test_a_session_not_done_is_added_only_when_asked(tmp_path, bank, history):
    s = finished_session(tmp_path / "half", bank.new_outcomes[0], done=False)
    assert not s.done and s.n_answers == 4
    with pytest.raises(ValueError, match=r"half: the session is not done \(4 of 5 draws recorded, 1 pending\)"):
        fq.add_sessions_to_history(history, [s.directory])
    out = fq.add_sessions_to_history(history, [s.directory], partial=True, out=history.with_name("grown.npz"))
    outcomes, models, _, metadata = fq.load_history(out)
    assert models[-1] == "half" and int((~np.isnan(outcomes[-1])).sum()) == 4
    assert not metadata["sources"][-1]["complete"]
    assert fq.load_history(history)[1] == [f"old-{i}" for i in range(8)]  # out= leaves the history as it was


def test_a_response_matrix_from_other_tools_grows_into_a_history(tmp_path, bank, capsys):
    """An openllm-style .npz (int8, -1 missing, items, a per-question groups array) grows; fit-history reads it."""
    raw = np.where(np.isnan(bank.history), -1, bank.history).astype(np.int8)
    path = tmp_path / "bank.npz"
    np.savez(path, outcomes=raw, models=np.array([f"old-{i}" for i in range(8)]), items=np.array(IDS),
             groups=np.array(["x", "y"] * 6))
    s = finished_session(tmp_path / "m", bank.new_outcomes[0])
    assert main(["history", "add", str(path), str(s.directory), "--name", "org/new", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["n_models"] == 9 and payload["added"][0]["model"] == "org/new"
    outcomes, models, ids, metadata = fq.load_history(path)
    np.testing.assert_array_equal(outcomes[:8], bank.history)
    np.testing.assert_array_equal(outcomes[8], asked_row(s))
    assert ids == IDS and metadata["arrays"]["groups"].tolist() == ["x", "y"] * 6
    assert main(["fit-history", "--data", str(path), "--n-components", "2", "--max-iter", "20", "--device", "cpu",
                 "--out", str(tmp_path / "refit.npz"), "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["n_models"] == 9
    assert fq.load_factor_model(tmp_path / "refit.npz").question_ids_ == IDS
