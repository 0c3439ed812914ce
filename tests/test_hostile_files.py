"""Damaged and hand-edited files: one clear error naming the file, nothing on disk changed (issue 19).

Every file faqstats writes (a factor model ``.npz``, step weights ``.json``, a session
directory's ``session.json`` and ``factor_model.npz``) is damaged the ways disks and
people damage files: a byte flipped anywhere, the file cut short, emptied, replaced by
other JSON, a value edited by hand. Loading must raise ``ValueError`` whose one-line
message names the file, never a raw traceback from zipfile, json, zlib or numpy, and must
leave every file as it was; the command line prints that one line and exits 2. The only
damage allowed to load is damage that changes nothing loaded (a flipped byte in a zip
header's "version needed" field, say): then the loaded content must equal the
original's. Every part of a session carries a checksum, so any edit that changes it is
refused.
"""

import json
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import faqstats as fq
from faqstats.cli import main
from faqstats.io import session_checksums

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def originals(tmp_path_factory):
    """A fitted model file, a step-weights file and a session directory mid-evaluation."""
    root = tmp_path_factory.mktemp("originals")
    bank = fq.make_synthetic_bank(n_models=40, n_questions=30, n_components=2, random_state=0)
    fm = fq.LogisticFactorModel(n_components=2, max_iter=30, random_state=0).fit(bank.history)
    ids = [f"q{j}" for j in range(30)]
    model = fq.save_factor_model(fm, root / "fm.npz", question_ids=ids)
    sw = fq.StepWeights(np.linspace(1, 2, 5), np.ones(5), np.ones(5), 10, 100, 0.9, 1.0)
    weights = fq.save_step_weights(sw, root / "w.json")
    session = fq.EvaluationSession.create(root / "session", fm, ids, budget=6, batch_size=2, random_state=0)
    z = bank.new_outcomes[0]
    for _ in range(2):
        got, _ = session.next_questions()
        session.record(got, [float(z[int(q[1:])]) for q in got])
    session.next_questions()  # a round pending
    return {"model": model, "weights": weights, "session": root / "session", "status": session.status()}


def _load(kind, path):
    if kind == "model":
        return fq.load_factor_model(path)
    if kind == "weights":
        return fq.load_step_weights(path)
    return fq.EvaluationSession.load(path)


def _damaged_copy(originals, kind, tmp_path):
    """A copy of the original to damage, and the file inside it that will be damaged."""
    src = originals[kind]
    if kind == "session":
        dest = tmp_path / "session"
        shutil.copytree(src, dest)
        return dest, dest / "session.json"
    dest = tmp_path / src.name
    shutil.copy(src, dest)
    return dest, dest


def _snapshot(path):
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p): p.read_bytes() for p in files}


def _content(kind, loaded):
    """What a loaded file means (to compare a benignly damaged copy with the original)."""
    if kind == "model":
        return ([loaded.question_factors_.tobytes(), loaded.prior_mean_.tobytes(), loaded.prior_cov_.tobytes(),
                 loaded.model_factors_.tobytes(), loaded.question_ids_], loaded.get_params())
    if kind == "weights":
        return [loaded.weights.tobytes(), loaded.step_variance.tobytes(), loaded.n_runs, loaded.variance_ratio]
    return loaded.status() | {"directory": None}, loaded.queries().tobytes()


def _assert_refused(kind, target, damaged, originals=None):
    """Refused with one line naming the file; or, when ``originals`` allows it, loaded to the
    original's content. Either way nothing on disk changed."""
    before = _snapshot(target)
    try:
        loaded = _load(kind, target)
    except ValueError as exc:
        message = str(exc)
        assert str(damaged.name) in message and "\n" not in message, message
    else:
        assert originals is not None, f"{damaged} loaded although it was damaged"
        assert _content(kind, loaded) == _content(kind, _load(kind, originals[kind]))
    assert _snapshot(target) == before  # reading changed nothing


@SETTINGS
@given(kind=st.sampled_from(["model", "weights", "session"]), data=st.data())
def test_a_flipped_byte_is_refused_by_name(originals, tmp_path_factory, kind, data):
    tmp_path = tmp_path_factory.mktemp("flip")
    target, damaged = _damaged_copy(originals, kind, tmp_path)
    raw = bytearray(damaged.read_bytes())
    at = data.draw(st.integers(0, len(raw) - 1))
    raw[at] ^= data.draw(st.integers(1, 255))
    damaged.write_bytes(bytes(raw))
    _assert_refused(kind, target, damaged, originals)


@SETTINGS
@given(kind=st.sampled_from(["model", "weights", "session"]), data=st.data())
def test_a_truncated_file_is_refused_by_name(originals, tmp_path_factory, kind, data):
    tmp_path = tmp_path_factory.mktemp("cut")
    target, damaged = _damaged_copy(originals, kind, tmp_path)
    raw = damaged.read_bytes()
    damaged.write_bytes(raw[: data.draw(st.integers(0, len(raw) - 1))])
    _assert_refused(kind, target, damaged)


JSON_SHAPES = [[1, 2, 3], "text", 7, None, {}, {"format": "faqstats.session"}, {"format": "faqstats-step-weights"}]


@pytest.mark.parametrize("kind", ["weights", "session"])
@pytest.mark.parametrize("doc", JSON_SHAPES, ids=repr)
def test_other_json_is_refused_by_name(originals, tmp_path, kind, doc):
    target, damaged = _damaged_copy(originals, kind, tmp_path)
    damaged.write_text(json.dumps(doc))
    _assert_refused(kind, target, damaged)


SESSION_EDITS = {
    "an answer flipped": lambda s: s["answers"][0].__setitem__(1, 1.0 - s["answers"][0][1]),
    "an answer dropped": lambda s: s["answers"].pop(),
    "a draw's probability": lambda s: s["draws"][0].__setitem__(1, s["draws"][0][1] * 1.5),
    "the budget": lambda s: s["config"].__setitem__("budget", 5),
    "alpha": lambda s: s["config"].__setitem__("alpha", 0.1),
    "the rng state": lambda s: s["rng_state"]["state"].__setitem__("state", 12345),
    "the creation time": lambda s: s.__setitem__("created_utc", "2020-01-01T00:00:00+00:00"),
    "draws of the wrong type": lambda s: s.__setitem__("draws", 5),
    "answers of the wrong shape": lambda s: s.__setitem__("answers", [[1]]),
}


@pytest.mark.parametrize("edit", list(SESSION_EDITS))
def test_a_hand_edited_session_is_refused_with_what_changed(originals, tmp_path, edit):
    target, damaged = _damaged_copy(originals, "session", tmp_path)
    state = json.loads(damaged.read_text())
    SESSION_EDITS[edit](state)
    damaged.write_text(json.dumps(state))
    _assert_refused("session", target, damaged)


def test_edits_that_rewrite_the_checksums_are_still_refused_when_they_change_the_draws(originals, tmp_path):
    target, damaged = _damaged_copy(originals, "session", tmp_path)
    state = json.loads(damaged.read_text())
    state["draws"][0][1] *= 1.5
    state["checksums"] = session_checksums(state)
    damaged.write_text(json.dumps(state))
    _assert_refused("session", target, damaged)


def test_a_hand_edited_model_is_refused(originals, tmp_path):
    """Question factors x10 or a negated (not PSD) prior covariance: refused on load, also
    when the session that holds the model is loaded."""
    for change in (lambda a: a.__setitem__("question_factors", a["question_factors"] * 10),
                   lambda a: a.__setitem__("prior_cov", -a["prior_cov"])):
        target, damaged = _damaged_copy(originals, "session", tmp_path / str(id(change)))
        model = target / "factor_model.npz"
        with np.load(model) as data:
            arrays = {key: data[key] for key in data.files}
        change(arrays)
        np.savez(model, **arrays)
        with pytest.raises(ValueError, match="factor_model.npz"):
            fq.load_factor_model(model)
        with pytest.raises(ValueError, match="factor_model.npz"):
            fq.EvaluationSession.load(target)


def test_the_command_line_prints_one_line_and_exits_2(originals, tmp_path, capsys):
    target, damaged = _damaged_copy(originals, "session", tmp_path)
    raw = bytearray(damaged.read_bytes())
    raw[len(raw) // 2] ^= 0x5A
    damaged.write_bytes(bytes(raw))
    assert main(["session", "status", str(target)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("faqstats: error:") and "session.json" in err and "\n" not in err
    model = tmp_path / "fm.npz"
    shutil.copy(originals["model"], model)
    raw = bytearray(model.read_bytes())
    raw[len(raw) // 3] ^= 0x5A
    model.write_bytes(bytes(raw))
    assert main(["session", "new", str(tmp_path / "s2"), "--model", str(model), "--budget", "4"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("faqstats: error:") and "fm.npz" in err and "\n" not in err
    assert not (tmp_path / "s2" / "session.json").exists()


def test_the_originals_load(originals):
    """The undamaged files load (the tests above can fail for the right reason only)."""
    assert fq.load_factor_model(originals["model"]).question_factors_.shape == (30, 2)
    assert fq.load_step_weights(originals["weights"]).weights.shape == (5,)
    assert fq.EvaluationSession.load(originals["session"]).status() == originals["status"]
