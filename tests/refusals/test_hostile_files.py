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

import contextlib
import json
import re
import shutil
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import faqstats as fq
from faqstats.cli import main
from faqstats.io import session_checksums
from tests.paths import DATA

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
    # a configuration with a stack of a surrogate and a history mixture (format version 2, issues 16 and 18)
    import pandas as pd
    from faqstats.configure import Configuration

    stack = fq.StackedPredictor([("gp", fq.GaussianProcessSurrogate(n_components=2)), ("mix", fq.HistoryMixture())],
                                n_paths=10).fit(bank.history)
    est = fq.PAIEstimator(stack, fq.HybridSampler(tau=0.25), budget=5, step_weights=np.linspace(1, 2, 5))
    table = pd.DataFrame({"candidate": ["stack"], "predicted_ess": [1.5]})
    configured = fq.save_configuration(Configuration(est, "stack", table, 5, 10, 100, 1.0), root / "cfg.npz",
                                       question_ids=ids)
    return {"model": model, "weights": weights, "session": root / "session", "status": session.status(),
            "configured": configured}


def _load(kind, path):
    if kind == "model":
        return fq.load_factor_model(path)
    if kind == "weights":
        return fq.load_step_weights(path)
    if kind == "configured":
        return fq.load_configuration(path)
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
    if kind == "configured":
        est, parts = loaded.estimator, loaded.estimator.factor_model.estimators_
        return [est.factor_model.weights_.tobytes(), parts[0].question_factors_.tobytes(), parts[1].profiles_.tobytes(),
                repr(est.sampler), est.step_weights.tobytes(), loaded.choice, est.factor_model.question_ids_]
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
@given(kind=st.sampled_from(["model", "weights", "session", "configured"]), data=st.data())
def test_a_flipped_byte_is_refused_by_name(originals, tmp_path_factory, kind, data):
    tmp_path = tmp_path_factory.mktemp("flip")
    target, damaged = _damaged_copy(originals, kind, tmp_path)
    raw = bytearray(damaged.read_bytes())
    at = data.draw(st.integers(0, len(raw) - 1))
    raw[at] ^= data.draw(st.integers(1, 255))
    damaged.write_bytes(bytes(raw))
    _assert_refused(kind, target, damaged, originals)


@SETTINGS
@given(kind=st.sampled_from(["model", "weights", "session", "configured"]), data=st.data())
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


# -- harness output read by the command line: fit-history and session record --lm-eval/--inspect --
# Damaged the same ways (and given with wrong options), each run must end in one line
# "faqstats: error: ..." naming the file, directory or option at fault, exit code 2, no model
# written and the session directory byte-identical. A flipped byte or a cut at a line end can
# leave valid output that reads differently (harness files carry no checksum): such a run may
# succeed, but then reads scores in [0, 1] only.
LM_HISTORY, LM_NEW = DATA / "lm_eval" / "history", DATA / "lm_eval" / "new_model"
INSPECT_HISTORY, INSPECT_NEW = DATA / "inspect" / "history", DATA / "inspect" / "new_model"
LM_OPTIONS = ["--metric", "faq_count=exact_match", "--filter", "faq_count=flexible-extract"]
TINY_FIT = ["--n-components", "1", "--max-iter", "2", "--device", "cpu", "--quiet"]
HARNESS = {  # option, history, new model's full run, the options fit-history needs, a file to damage
    "lm-eval": ("--lm-eval", LM_HISTORY, LM_NEW, LM_OPTIONS, "samples_faq_arith_*.jsonl"),
    "inspect": ("--inspect", INSPECT_HISTORY, INSPECT_NEW, ["--scorer", "match"], "*_arith_*.eval"),
}


@pytest.fixture(scope="module")
def harness_sessions(tmp_path_factory):
    """Per harness: a model fitted by fit-history on its history, and a session on it with a round pending."""
    root = tmp_path_factory.mktemp("harness")
    out = {}
    for harness, (option, history, _, options, _) in HARNESS.items():
        model = root / f"{harness}.npz"
        assert main(["fit-history", option, str(history), *options, *TINY_FIT, "--out", str(model)]) == 0
        session = root / f"session-{harness}"
        assert main(["session", "new", str(session), "--model", str(model), "--budget", "8", "--batch-size", "4"]) == 0
        assert main(["session", "next", str(session)]) == 0
        out[harness] = session
    return out


def _error_line(code, err):
    """The one error line of a refused run (exit code 2, nothing else on stderr)."""
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("faqstats: error: "), err
    return lines[0]


def _fit(capsys, tmp_path, harness, source, *extra):
    option, _, _, options, _ = HARNESS[harness]
    # the options the history needs, but those of a name given in ``extra``
    options = [word for name, value in zip(options[::2], options[1::2]) if name not in extra for word in (name, value)]
    out = tmp_path / "m.npz"
    code = main(["fit-history", option, *map(str, source if isinstance(source, list) else [source]), *options,
                 *TINY_FIT, *map(str, extra), "--out", str(out)])
    _, err = capsys.readouterr()
    return code, err, out


def _record(capsys, tmp_path, harness_sessions, harness, source, *extra):
    """``session record`` on a copy of the harness's session: (code, stderr, session before, after)."""
    session = shutil.copytree(harness_sessions[harness], tmp_path / "session")
    before = _snapshot(session)
    sources = [str(path) for path in (source if isinstance(source, list) else [source])]
    code = main(["session", "record", str(session), *[w for path in sources for w in (HARNESS[harness][0], path)],
                 *map(str, extra)])
    _, err = capsys.readouterr()
    return code, err, before, _snapshot(session)


DAMAGE = {
    "emptied": lambda raw, draw: b"",
    "cut short": lambda raw, draw: raw[: draw(st.integers(0, len(raw) - 1))],
    "a byte flipped": lambda raw, draw: _flip(raw, draw(st.integers(0, len(raw) - 1)), draw(st.integers(1, 255))),
    "binary": lambda raw, draw: bytes(draw(st.binary(min_size=1, max_size=64))),
    "other JSON": lambda raw, draw: json.dumps(draw(st.sampled_from(JSON_SHAPES + [{"eval": 1}, {"doc_id": "x"}])))
    .encode(),
    "JSON lines of another shape": lambda raw, draw: "\n".join(
        json.dumps(draw(st.sampled_from(JSON_SHAPES + [{"doc_id": -1, "acc": 1}, {"doc_id": 0, "acc": 2},
                                                       {"doc_id": [0], "acc": 1}, {"doc_id": 0, "filter": 3}])))
        for _ in range(draw(st.integers(1, 3)))).encode(),
}


def _flip(raw, at, mask):
    raw = bytearray(raw)
    raw[at] ^= mask
    return bytes(raw)


def _damaged_output(tmp_path, harness, source, damage, draw):
    """A copy of ``source`` with one file damaged: (the copy, the damaged file)."""
    copy = shutil.copytree(source, tmp_path / "output")
    pattern = HARNESS[harness][4] if harness == "lm-eval" else draw(st.sampled_from(["*.eval", "*.json"]))
    target = draw(st.sampled_from(sorted(copy.rglob(pattern)) or sorted(copy.rglob(HARNESS[harness][4]))))
    target.write_bytes(DAMAGE[damage](target.read_bytes(), draw))
    return copy, target


@contextlib.contextmanager
def _inspect_reader(builtin):
    """inspect-ai's own log reader, or (``builtin``) faqstats' (the one used without inspect-ai)."""
    if not builtin:
        yield
        return
    with mock.patch("faqstats.integrations.inspect_ai.inspect_reader", lambda reader: None):
        yield


def _named(line, *names):
    assert any(str(n) in line for n in names), line


@SETTINGS
@given(harness=st.sampled_from(list(HARNESS)), damage=st.sampled_from(list(DAMAGE)), data=st.data())
def test_fit_history_on_damaged_harness_output(capsys, tmp_path_factory, harness, damage, data):
    tmp_path = tmp_path_factory.mktemp("fit")
    copy, target = _damaged_output(tmp_path, harness, HARNESS[harness][1], damage, data.draw)
    with _inspect_reader(data.draw(st.booleans())):
        code, err, out = _fit(capsys, tmp_path, harness, copy)
    if code == 0:  # the damage left valid output (a changed score, a cut at a line end), or a JSON
        skipped = f"faqstats: warning: {target} is not an inspect eval log"  # file that is no log, skipped
        assert (damage in ("a byte flipped", "cut short") or err.startswith(skipped)) and out.exists(), err
        return
    _named(_error_line(code, err), target.name, copy)
    assert not out.exists()


@settings(SETTINGS, max_examples=40)
@given(harness=st.sampled_from(list(HARNESS)), damage=st.sampled_from(list(DAMAGE)), data=st.data())
def test_session_record_on_damaged_harness_output(capsys, tmp_path_factory, harness_sessions, harness, damage, data):
    tmp_path = tmp_path_factory.mktemp("record")
    copy, target = _damaged_output(tmp_path, harness, HARNESS[harness][2], damage, data.draw)
    with _inspect_reader(data.draw(st.booleans())):
        code, err, before, after = _record(capsys, tmp_path, harness_sessions, harness, copy)
    if code == 0:
        assert damage in ("a byte flipped", "cut short"), err
        recorded = fq.EvaluationSession.load(tmp_path / "session").queries()["outcome"]
        assert len(recorded) == 4 and ((recorded >= 0) & (recorded <= 1)).all()
        return
    _named(_error_line(code, err), target.name, copy)
    assert after == before


HARNESS_CASES = [  # harness, what is given (see _case_source), options (replacing those of the same name), error
    ("lm-eval", "missing", [], r"--lm-eval \S*missing does not exist"),
    ("inspect", "missing", [], r"--inspect \S*missing does not exist"),
    ("lm-eval", "DIR", [], r"no lm-eval samples files .* under \S*DIR"),
    ("inspect", "DIR", [], r"no inspect logs .* under \S*DIR"),
    ("lm-eval", "RESULTS", [], r"no lm-eval samples files .* under \S*RESULTS"),
    ("inspect", "VIEWER", [], r"No scored samples in the inspect logs given with --inspect|--inspect \S*VIEWER "
                              r"has no scored sample of the tasks asked"),
    ("lm-eval", "RUN", ["--metric", "acc_nope"],
     r"metric 'acc_nope' is absent from \S+samples_faq_\w+_.*Pass --metric"),
    ("lm-eval", "RUN", ["--filter", "nope"], r"filter 'nope' is absent from \S+samples_faq_\w+_.*Pass --filter"),
    ("lm-eval", "RUN", ["--metric", "faq_count=exact_match", "--metric", "faq_nope=acc"],
     r"--metric faq_nope=acc: no task 'faq_nope' in"),
    ("lm-eval", "RUN", ["--filter", "faq_count=flexible-extract", "--filter", "faq_nope=none"],
     r"--filter faq_nope=none: no task 'faq_nope' in"),
    ("inspect", "RUN", ["--scorer", "nope"], r"scorer 'nope' is absent from \S+\.eval \(task '\w+'\)"),
    ("inspect", "RUN", ["--scorer", "match", "--scorer", "nope=match"], r"--scorer nope=match: no task 'nope' in"),
    ("lm-eval", "RUN", ["--metric", "acc", "--metric", "acc_norm"], r"--metric: one NAME for all tasks"),
    ("lm-eval", "RUN", ["--filter", "faq_count=a", "--filter", "faq_count=b"],
     r"--filter: task 'faq_count' is given twice"),
    ("inspect", "RUN", ["--scorer", "="], r"--scorer takes NAME or TASK=NAME, got '='"),
    ("lm-eval", "TWICE", [], r"--lm-eval: \S+ is given twice"),
    ("inspect", "TWICE", [], r"--inspect: \S+ is given twice"),
    ("lm-eval", "RUN", ["--scorer", "match"], r"--scorer reads harness output: it goes with --inspect only"),
]


def _case_source(tmp_path, harness, what, run):
    if what == "missing":
        return tmp_path / "missing"
    if what in ("DIR", "RESULTS", "VIEWER"):
        d = tmp_path / what
        d.mkdir()
        if what == "RESULTS":  # an lm-eval run without --log_samples: results only
            for f in run.rglob("results_*.json"):
                shutil.copy(f, d / f.name)
        if what == "VIEWER":  # JSON that is no eval log, as inspect's viewer leaves
            (d / "logs.json").write_text(json.dumps({"log.eval": {"eval_id": "x"}}))
        return d
    if what == "TWICE":
        return [run, str(run) + "/"]
    return run


@pytest.mark.parametrize("harness, what, extra, match", HARNESS_CASES)
def test_fit_history_harness_paths_and_options(capsys, tmp_path, harness, what, extra, match):
    source = _case_source(tmp_path, harness, what, HARNESS[harness][1])
    code, err, out = _fit(capsys, tmp_path, harness, source, *extra)
    line = _error_line(code, err)
    assert re.search(match, line), line
    assert not out.exists()


@pytest.mark.parametrize("harness, what, extra, match", HARNESS_CASES)
def test_session_record_harness_paths_and_options(capsys, tmp_path, harness_sessions, harness, what, extra, match):
    source = _case_source(tmp_path, harness, what, HARNESS[harness][2])
    code, err, before, after = _record(capsys, tmp_path, harness_sessions, harness, source, *extra)
    # an option given that differs from the one stored with the model is honoured, with a note first
    err = "".join(line for line in err.splitlines(keepends=True) if not line.startswith("faqstats: note: "))
    line = _error_line(code, err)
    match = match.replace(r"no task '(\w+)' in", r"no task '\1' in the session's bank")
    assert re.search(match, line), line
    assert after == before
