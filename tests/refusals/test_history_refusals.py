"""Bad tables and bad histories are refused by name: a table's missing column, model or id, a score
outside [0, 1], a repeated pair, an unknown format, Parquet without pyarrow; ``history add`` with a
damaged or edited history or session, a model already there or given twice, a session not done, a
bank that is not the history's. A refusal leaves the history file as it was."""

import json

import numpy as np
import pandas as pd
import pytest

import faqstats as fq
from faqstats.cli import main

IDS = ["q/a", "q/b", "q/c", "q/d", "q/e", "q/f"]


# -- tables -----------------------------------------------------------------------------------
@pytest.mark.parametrize("rows, message", [
    ([("m", "q", 1.5)], r"row 0 \(model 'm', question 'q'\): the score 1.5 \(column 's'\) is not a number in \[0, 1\]"),
    ([("m", "q", 1), ("m", "r", "yes")], r"row 1 \(model 'm', question 'r'\): the score 'yes' \(column 's'\) is not"),
    ([("m", "q", 1), (None, "r", 0)], r"row 1 has no model \(column 'm' is empty there\)"),
    ([("m", "q", 1), ("m", None, 0)], r"row 1 \(model 'm'\) has no question"),
    ([("m", " ", 1)], r"row 0: the question \(column 'q'\) is an empty string"),
    ([], "the table has no rows"),
])
def test_bad_rows_are_refused_by_row(rows, message):
    frame = pd.DataFrame(rows, columns=["m", "q", "s"])
    with pytest.raises(ValueError, match=message):
        fq.history_from_frame(frame, "m", "q", "s")


def test_bad_arguments_and_files_are_refused(tmp_path, monkeypatch):
    frame = pd.DataFrame({"m": ["a"], "q": ["x"], "s": [1]})
    with pytest.raises(ValueError, match=r"no column score='score' \(its columns: 'm', 'q', 's'\)"):
        fq.history_from_frame(frame, "m", "q")
    with pytest.raises(ValueError, match="three different columns"):
        fq.history_from_frame(frame, "m", "m", "s")
    with pytest.raises(ValueError, match="duplicates must be one of"):
        fq.history_from_frame(frame, "m", "q", "s", duplicates="first")
    with pytest.raises(TypeError, match="must be a pandas DataFrame"):
        fq.history_from_frame({"m": ["a"]}, "m", "q", "s")
    csv = tmp_path / "t.csv"
    csv.write_text("m,q,s\na,x,1\na,x,0\n")
    with pytest.raises(ValueError, match=r"t\.csv: model 'a', question 'x' has 2 rows \(1, 2\)"):  # CSV lines
        fq.read_history_table(csv, "m", "q", "s")
    odd = tmp_path / "t.xlsx"
    odd.write_text("")
    with pytest.raises(ValueError, match=r"t\.xlsx: cannot tell the table's format from its name"):
        fq.read_history_table(odd)
    with pytest.raises(FileNotFoundError, match="No table at"):
        fq.read_history_table(tmp_path / "none.csv")
    broken = tmp_path / "t.jsonl"
    broken.write_text('{"m": "a", "q": "x", "s": 1}\n{"m": "a", \n')
    with pytest.raises(ValueError, match=r"t\.jsonl: not a readable jsonl table"):
        fq.read_history_table(broken, "m", "q", "s")
    # Parquet without pyarrow: the error names the extra to install
    parquet = tmp_path / "t.parquet"
    parquet.write_bytes(b"PAR1")

    def no_engine(*args, **kwargs):
        raise ImportError("Unable to find a usable engine; tried using: 'pyarrow', 'fastparquet'.")

    monkeypatch.setattr(pd, "read_parquet", no_engine)
    with pytest.raises(ImportError, match=r"t\.parquet: reading Parquet needs pyarrow.*faqstats\[parquet\]"):
        fq.read_history_table(parquet)


# -- history add ------------------------------------------------------------------------------
@pytest.fixture
def history(tmp_path):
    rng = np.random.default_rng(0)
    return fq.save_history(tmp_path / "history.npz", (rng.random((4, 6)) < 0.5).astype(float),
                           ["m1", "m2", "m3", "m4"], IDS)


def make_session(directory, ids=IDS, budget=3, answer=True):
    session = fq.EvaluationSession(None, ids, sampler=fq.UniformSampler(replace=False), budget=budget,
                                   random_state=0, directory=directory)
    while answer and not session.done:
        q, _ = session.next_questions()
        session.record(q, [1.0] * len(q))
    return session


def refused(capsys, history, *argv):
    """``faqstats history add`` refused in one line naming what is wrong; the history file unchanged."""
    before = history.read_bytes()
    assert main(["history", "add", str(history), *map(str, argv)]) == 2
    err = capsys.readouterr().err
    assert history.read_bytes() == before and len(err.strip().splitlines()) == 1, err
    return err


def test_history_add_refuses_duplicates_and_unfinished_sessions_by_name(tmp_path, history, capsys):
    make_session(tmp_path / "m2")
    assert "history.npz already has a row for model 'm2'; pass replace=True (--replace)" in refused(
        capsys, history, tmp_path / "m2")
    make_session(tmp_path / "x")
    assert "model 'm9' is given twice" in refused(capsys, history, tmp_path / "m2", tmp_path / "x", "--name", "m9",
                                                  "--name", "m9")
    assert "is given twice" in refused(capsys, history, tmp_path / "x", tmp_path / "x" / ".." / "x")
    assert "--name gives the model of each session, in order" in refused(capsys, history, tmp_path / "x",
                                                                        "--name", "a", "--name", "b")
    s = make_session(tmp_path / "running", answer=False)
    s.next_questions()
    assert "running: the session is not done (0 of 3 draws recorded, 1 pending); finish it, or add its answers so " \
           "far with partial=True (--partial)" in refused(capsys, history, tmp_path / "running")
    assert "running: the session holds no answer yet" in refused(capsys, history, tmp_path / "running", "--partial")
    make_session(tmp_path / "other", ids=[*IDS[:5], "q/z"])
    err = refused(capsys, history, tmp_path / "other")
    assert "other: the session's bank of 6 questions is not the history's 6: 1 id(s) not in the history ('q/z'); " \
           "1 history id(s) not in the session's bank ('q/f')" in err
    assert "No faqstats session in" in refused(capsys, history, tmp_path / "nowhere")
    # a valid one with --replace goes in
    assert main(["history", "add", str(history), str(tmp_path / "m2"), "--replace"]) == 0


def test_history_add_refuses_a_damaged_history_or_session(tmp_path, history, capsys):
    make_session(tmp_path / "new")
    # an entry edited (its checksum kept): refused naming the entry, as fit-history --data refuses it
    with np.load(history) as data:
        entries = {k: data[k] for k in data.files}
    entries["outcomes"] = entries["outcomes"].copy()
    entries["outcomes"][0, 0] = 1 - entries["outcomes"][0, 0]
    np.savez(history, **entries)
    message = "history.npz: entry 'outcomes' differs from the SHA-256 written with the history"
    assert message in refused(capsys, history, tmp_path / "new")
    assert main(["fit-history", "--data", str(history), "--out", str(tmp_path / "m.npz")]) == 2
    assert message in capsys.readouterr().err
    # checksums deleted
    meta = json.loads(entries["metadata_json"].tobytes())
    del meta["array_sha256"]
    entries["metadata_json"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(history, **entries)
    assert "metadata has no 'array_sha256'" in refused(capsys, history, tmp_path / "new")
    # a truncated file
    history.write_bytes(history.read_bytes()[:200])
    assert "history.npz" in refused(capsys, history, tmp_path / "new")


def test_history_add_refuses_a_damaged_session_or_a_history_without_names(tmp_path, capsys):
    good = fq.save_history(tmp_path / "h.npz", np.ones((2, 6)), ["a", "b"], IDS)
    make_session(tmp_path / "s")
    state = tmp_path / "s" / "session.json"
    doc = json.loads(state.read_text())
    doc["answers"][0][1] = 0.0  # an answer changed by hand
    state.write_text(json.dumps(doc))
    err = refused(capsys, good, tmp_path / "s")
    assert "session.json: the session's answers differ from the checksums" in err
    plain = tmp_path / "plain.npz"
    np.savez(plain, outcomes=np.ones((2, 6), dtype=np.int8), items=np.array(IDS))
    make_session(tmp_path / "t")
    assert "plain.npz has no 'models' array naming its rows" in refused(capsys, plain, tmp_path / "t")
    np.savez(plain, outcomes=np.ones((2, 6), dtype=np.int8), models=np.array(["a", "a"]), items=np.array(IDS))
    assert "'models' must be unique; 'a' appears more than once" in refused(capsys, plain, tmp_path / "t")
    np.savez(plain, outcomes=np.ones((2, 6), dtype=np.int8), models=np.array(["a", "b"]), items=np.array(IDS),
             dates=np.array(["2024", "2025"]))
    assert "entry 'dates' of shape (2,) is neither per question" in refused(capsys, plain, tmp_path / "t")
    with pytest.raises(FileNotFoundError, match="No history file at"):
        fq.add_sessions_to_history(tmp_path / "none.npz", [tmp_path / "t"])
