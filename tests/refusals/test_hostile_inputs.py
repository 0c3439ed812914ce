"""Hostile inputs: every one a clear error naming the problem, nothing lost or changed on disk.

Where ``test_hostile_files`` damages files the way disks damage them, this module feeds
faqstats what a hostile or careless user would: ``.npy`` headers declaring terabytes, factor
values that are finite but absurd (with every checksum recomputed, so only the value check
can refuse them), command-line arguments out of range, answer files that are not answers,
session states edited with their checksums recomputed, special files (FIFOs, directories,
links to devices) where a session's files should be, a full disk and an exhausted memory.
The API refuses with ``ValueError``/``TypeError`` naming the argument or file; the command
line prints one ``faqstats: error:`` line and exits 2; no Python traceback, and every file
on disk is as it was.

The number of cases of each category run is printed at the end of the module.
"""

import collections
import errno
import io
import json
import os
import shutil
import zipfile
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.refusals.test_hostile_files import SETTINGS, _error_line, _snapshot, originals  # noqa: F401  (originals: a fixture)

import faqstats as fq
from faqstats.cli import main
from faqstats.io import array_sha256, question_ids_sha256, session_checksums

CASES = collections.Counter()
FAST = settings(SETTINGS, max_examples=25)


@pytest.fixture(scope="module", autouse=True)
def case_counts(request):
    """Print how many cases of each category ran, once the module is done (past pytest's capture)."""
    yield
    capture = request.config.pluginmanager.getplugin("capturemanager")
    lines = [f"  {category}: {n}" for category, n in sorted(CASES.items())]
    with capture.global_and_fixture_disabled():
        print(f"\nhostile inputs, cases per category ({sum(CASES.values())} in all):\n" + "\n".join(lines))


def _cli(capsys, *argv):
    """``faqstats argv``: (exit status, stdout, stderr); a usage error's SystemExit is its status."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def _refused(capsys, *argv, names=()):
    """Run the command; assert one error line, exit 2, naming each of ``names``; the line."""
    code, _, err = _cli(capsys, *argv)
    line = _error_line(code, err)
    for name in names:
        assert str(name) in line, line
    return line


# -- .npy headers: declared shapes checked against the bytes before numpy allocates -----------
def _npy(shape, dtype="<f8", payload=b"\0" * 64):
    """An ``.npy`` stream declaring ``shape`` and ``dtype``, followed by ``payload``."""
    out = io.BytesIO()
    header = {"descr": dtype, "fortran_order": False, "shape": tuple(shape)}
    np.lib.format.write_array_header_2_0(out, header)
    out.write(payload)
    return out.getvalue()


def _zip(path, members):
    """An ``.npz`` at ``path`` of ``{name: bytes}`` (names without ``.npy``), deflated."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, raw in members.items():
            zf.writestr(name + ".npy", raw)
    return path


def _members(path):
    with zipfile.ZipFile(path) as zf:
        return {name.removesuffix(".npy"): zf.read(name) for name in zf.namelist()}


HUGE = (10**7, 10**7)
shapes = st.lists(st.integers(0, 10**12), min_size=0, max_size=4).map(tuple)
dtypes = st.sampled_from(["<f8", "<i8", "|u1", "<f4", "|b1", "<c16"])


@FAST
@given(shape=shapes, dtype=dtypes, payload=st.binary(max_size=200))
def test_a_declared_shape_must_fit_the_bytes_of_a_data_file(tmp_path_factory, shape, dtype, payload):
    """``load_response_matrix`` (``fit-history --data``): a header whose array does not fit its bytes
    is refused by name before anything is allocated; one that fits loads as declared."""
    CASES["npy header, --data"] += 1
    path = _zip(tmp_path_factory.mktemp("data") / "history.npz", {"outcomes": _npy(shape, dtype, payload)})
    declared = int(np.prod(shape, dtype=object)) * np.dtype(dtype).itemsize
    try:
        matrix, _ = fq.load_response_matrix(path)
    except ValueError as exc:
        assert "history.npz" in str(exc) and "\n" not in str(exc)
        if declared != len(payload):
            assert "'outcomes'" in str(exc) and "declares" in str(exc)
    else:
        assert declared == len(payload) and matrix.shape == shape


@pytest.mark.parametrize("kind", ["npz", "npy"])
def test_a_terabyte_header_is_refused_by_the_command_line(capsys, tmp_path, kind):
    CASES["npy header, --data"] += 1
    if kind == "npz":
        path = _zip(tmp_path / "history.npz", {"outcomes": _npy(HUGE)})
    else:
        path = tmp_path / "history.npy"
        path.write_bytes(_npy(HUGE))
    line = _refused(capsys, "fit-history", "--data", path, "--out", tmp_path / "m.npz", names=[path.name])
    assert "declares an array of shape (10000000, 10000000)" in line and "refusing to allocate" in line
    assert not (tmp_path / "m.npz").exists()


def test_a_terabyte_header_in_factors_is_refused(capsys, tmp_path):
    CASES["npy header, --factors"] += 1
    U = np.zeros((3, 2))
    path = _zip(tmp_path / "factors.npz", {"model_factors": _npy(U.shape, payload=U.tobytes()),
                                          "question_factors": _npy(HUGE)})
    line = _refused(capsys, "draw-bank", "--factors", path, "--out", tmp_path / "bank.npz",
                    names=["factors.npz", "'question_factors'"])
    assert "refusing to allocate" in line and not (tmp_path / "bank.npz").exists()


@FAST
@given(entry=st.sampled_from(["question_factors", "prior_cov", "model_factors", "metadata_json"]), shape=shapes,
       dtype=dtypes)
def test_a_declared_shape_must_fit_the_bytes_of_a_model_file(originals, tmp_path_factory, entry, shape,  # noqa: F811
                                                              dtype):
    CASES["npy header, model file"] += 1
    members = _members(originals["model"])
    members[entry] = _npy(shape, dtype)
    path = _zip(tmp_path_factory.mktemp("model") / "fm.npz", members)
    with pytest.raises(ValueError, match="fm.npz") as exc:
        fq.load_factor_model(path)
    assert "\n" not in str(exc.value)


def test_a_member_declaring_more_than_deflate_can_hold_is_refused(tmp_path):
    """The zip's own size fields are checked too: an entry claiming petabytes in a small file."""
    CASES["npy header, model file"] += 1
    path = _zip(tmp_path / "history.npz", {"outcomes": _npy((2, 2), payload=np.zeros(4).tobytes())})
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.infolist()[0]
    central = raw.rindex(b"PK\x01\x02")  # the central directory's record of the entry: its uncompressed size
    raw[central + 24: central + 28] = (2**32 - 2).to_bytes(4, "little")
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"history\.npz: entry 'outcomes' declares 4,294,967,294 bytes"):
        fq.load_response_matrix(path)
    assert info.file_size < 1000


@FAST
@given(data=st.data())
def test_a_damaged_data_file_is_refused_by_name(tmp_path_factory, data):
    """``--data``: a flipped byte (a CRC error, a broken header) is a ValueError naming the file."""
    CASES["damaged --data"] += 1
    path = tmp_path_factory.mktemp("flip") / "history.npz"
    np.savez_compressed(path, outcomes=np.eye(6), question_ids=np.array([f"q{j}" for j in range(6)]))
    original = fq.load_response_matrix(path)
    raw = bytearray(path.read_bytes())
    raw[data.draw(st.integers(0, len(raw) - 1))] ^= data.draw(st.integers(1, 255))
    path.write_bytes(bytes(raw))
    try:
        matrix, meta = fq.load_response_matrix(path)
    except ValueError as exc:
        assert "history.npz" in str(exc) and "\n" not in str(exc)
    else:  # damage to a field nothing reads
        assert matrix.tobytes() == original[0].tobytes() or matrix.shape == original[0].shape


def test_a_crc_error_in_data_is_one_line(capsys, tmp_path):
    CASES["damaged --data"] += 1
    path = tmp_path / "history.npz"
    np.savez(path, outcomes=np.eye(6))
    raw = bytearray(path.read_bytes())
    raw[raw.index(b"NUMPY") + 200] ^= 0x01  # inside the stored (uncompressed) array data
    path.write_bytes(bytes(raw))
    line = _refused(capsys, "fit-history", "--data", path, "--out", tmp_path / "m.npz", names=["history.npz"])
    assert "CRC" in line


# -- finite but absurd values, every checksum recomputed ---------------------------------------
def _rewrite_model(src, dest, change):
    """A copy of model file ``src`` with ``change(arrays, metadata)`` applied and every hash recomputed."""
    with np.load(src) as data:
        arrays = {key: data[key] for key in data.files}
    meta = json.loads(arrays.pop("metadata_json").tobytes())
    change(arrays, meta)
    meta["array_sha256"] = {key: array_sha256(value) for key, value in arrays.items()}
    if "question_ids" in arrays:
        meta["question_ids_sha256"] = question_ids_sha256(arrays["question_ids"].tolist())
    arrays["metadata_json"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(dest, **arrays)
    return dest


@FAST
@given(entry=st.sampled_from(["question_factors", "prior_mean", "model_factors"]),
       value=st.floats(1.0000001e6, 1e308) | st.floats(-1e308, -1.0000001e6), data=st.data())
def test_absurd_factor_values_are_refused_with_the_bound(originals, tmp_path_factory, entry, value, data):  # noqa: F811
    CASES["absurd values"] += 1

    def change(arrays, meta):
        flat = arrays[entry].reshape(-1)
        flat[data.draw(st.integers(0, flat.size - 1))] = value

    path = _rewrite_model(originals["model"], tmp_path_factory.mktemp("absurd") / "fm.npz", change)
    with pytest.raises(ValueError, match=rf"fm\.npz: '{entry}' has 1 value\(s\) beyond \+-1e\+06") as exc:
        fq.load_factor_model(path)
    assert "overflow" in str(exc.value)


def test_factor_values_at_the_bound_load_and_sessions_run(originals, tmp_path, capsys):  # noqa: F811
    """The bound refuses nothing a session can work with: values at it give finite scores."""
    CASES["absurd values"] += 1

    def change(arrays, meta):
        arrays["question_factors"][:3] = [1e6, -1e6]
        arrays["prior_mean"][:] = [1e6, -1e6]
        arrays["prior_cov"] = np.diag([1e12, 1e12])
        arrays["model_factors"][0] = [-1e6, 1e6]

    path = _rewrite_model(originals["model"], tmp_path / "edge.npz", change)
    assert _cli(capsys, "session", "new", tmp_path / "s", "--model", path, "--budget", 6)[0] == 0
    for _ in range(3):
        code, out, err = _cli(capsys, "session", "next", tmp_path / "s", "--json")
        assert code == 0, err
        ids = json.loads(out)["ids"]
        assert _cli(capsys, "session", "record", tmp_path / "s", *[w for q in ids for w in (q, 1)])[0] == 0


def test_a_session_with_absurd_factors_is_refused_on_new(originals, tmp_path, capsys):  # noqa: F811
    CASES["absurd values"] += 1
    path = _rewrite_model(originals["model"], tmp_path / "fm.npz",
                          lambda arrays, meta: arrays["question_factors"].__setitem__((0, 0), 1e300))
    line = _refused(capsys, "session", "new", tmp_path / "s", "--model", path, "--budget", 6, names=["fm.npz"])
    assert "1e+06" in line and not (tmp_path / "s" / "session.json").exists()


def test_duplicate_question_ids_in_a_model_are_refused(originals, tmp_path):  # noqa: F811
    CASES["model file edits"] += 1

    def change(arrays, meta):
        arrays["question_ids"] = np.array(["q0"] + arrays["question_ids"].tolist()[:-1])

    path = _rewrite_model(originals["model"], tmp_path / "fm.npz", change)
    with pytest.raises(ValueError, match=r"fm\.npz: 'question_ids' must be unique; 'q0' appears more than once"):
        fq.load_factor_model(path)


# -- the last resort: memory and disk ---------------------------------------------------------
def _copy_session(originals, tmp_path):  # noqa: F811
    return Path(shutil.copytree(originals["session"], tmp_path / "session"))


@pytest.mark.parametrize("command", ["status", "report", "next"])
def test_memory_error_is_one_line(originals, tmp_path, capsys, command):  # noqa: F811
    CASES["memory and disk"] += 1
    session = _copy_session(originals, tmp_path)
    before = _snapshot(session)
    with mock.patch.object(fq.EvaluationSession, "status", side_effect=MemoryError()), \
            mock.patch.object(fq.EvaluationSession, "next_questions", side_effect=MemoryError()):
        line = _refused(capsys, "session", command, session)
    assert "out of memory" in line and _snapshot(session) == before


def test_a_full_disk_names_the_file_and_changes_nothing(originals, tmp_path, capsys):  # noqa: F811
    CASES["memory and disk"] += 1
    session = _copy_session(originals, tmp_path)
    pending = fq.EvaluationSession.load(session).pending.ids
    before = _snapshot(session)
    real_fsync = os.fsync

    def full(fd):
        if os.path.isfile(f"/proc/self/fd/{fd}") or not os.path.isdir(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)

    with mock.patch("os.fsync", side_effect=full):
        line = _refused(capsys, "session", "record", session, *[w for q in pending for w in (q, 1)],
                        names=[session / "session.json", "No space left on device"])
    assert "as it was" in line and _snapshot(session) == before


# -- command-line arguments --------------------------------------------------------------------
hostile_numbers = st.one_of(st.integers(-10**30, 10**30).map(str), st.sampled_from(
    ["0", "-1", "99999999999999999999", "1e3", "nan", "inf", "", " ", "0x10", "1.5", "３"]),
    st.text(max_size=8))


def _is_count(text):
    try:
        return 1 <= int(text) <= 2**53
    except ValueError:
        return False


@FAST
@given(option=st.sampled_from(["--budget", "--batch-size"]), value=hostile_numbers)
def test_hostile_counts_for_session_new(originals, tmp_path_factory, capsys, option, value):  # noqa: F811
    CASES["CLI arguments"] += 1
    root = tmp_path_factory.mktemp("new")
    argv = ["session", "new", root / "s", "--model", originals["model"], "--budget", "5", option, value]
    code, _, err = _cli(capsys, *argv)
    if code != 0:
        _error_line(code, err)
        assert not (root / "s" / "session.json").exists()
    else:
        assert _is_count(value)


@FAST
@given(option=st.sampled_from(["--runs", "--n-components", "--max-iter", "--step-weights-budget"]),
       value=hostile_numbers.filter(lambda v: not _is_count(v)))
def test_hostile_counts_for_fit_history(tmp_path_factory, capsys, option, value):
    CASES["CLI arguments"] += 1
    root = tmp_path_factory.mktemp("fit")
    line = _refused(capsys, "fit-history", "--data", root / "absent.npz", "--out", root / "m.npz", f"{option}={value}")
    assert option in line and "positive integer" in line


def test_n_components_above_the_bank_is_refused(capsys, tmp_path):
    CASES["CLI arguments"] += 1
    np.savez(tmp_path / "history.npz", outcomes=np.eye(30, dtype=np.int8)[:10])
    line = _refused(capsys, "fit-history", "--data", tmp_path / "history.npz", "--out", tmp_path / "m.npz",
                    "--n-components", 1000, names=["--n-components 1000", "30"])
    assert not (tmp_path / "m.npz").exists(), line


@pytest.mark.parametrize("directory", ["", " "])
def test_session_new_refuses_an_empty_directory_name(originals, tmp_path, capsys, monkeypatch, directory):  # noqa: F811
    CASES["CLI arguments"] += 1
    monkeypatch.chdir(tmp_path)
    _refused(capsys, "session", "new", directory, "--model", originals["model"], "--budget", 4,
             names=["directory"])
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="directory"):
        fq.EvaluationSession.create("", fq.load_factor_model(originals["model"]), budget=4)
    assert list(tmp_path.iterdir()) == []


def test_report_png_names_the_file_it_writes(originals, tmp_path, capsys):  # noqa: F811
    CASES["CLI arguments"] += 1
    session = _copy_session(originals, tmp_path)
    (tmp_path / "plots").mkdir()
    _refused(capsys, "session", "report", session, "--png", tmp_path / "plots", names=["--png", "directory"])
    assert list((tmp_path / "plots").iterdir()) == [] and not (tmp_path / "plots.png").exists()
    code, out, _ = _cli(capsys, "session", "report", session, "--png", tmp_path / "plot", "--json")
    assert code == 0 and json.loads(out)["png"] == str(tmp_path / "plot.png") and (tmp_path / "plot.png").is_file()


def test_usage_errors_are_one_line(capsys):
    CASES["CLI arguments"] += 1
    for argv in (["bogus"], ["session"], ["session", "new"], ["fit-history", "--data", "x", "--inspect", "y"]):
        _refused(capsys, *argv)


# -- answers: --from-json and record() ---------------------------------------------------------
def _pending(session):
    return fq.EvaluationSession.load(session).pending.ids


ANSWER_FILES = {
    "JSON syntax": lambda ids: '{"a": ',
    "not UTF-8": lambda ids: b"\xff\xfe{}",
    "deep nesting": lambda ids: "[" * 100_000 + "]" * 100_000,
    "a word for an outcome": lambda ids: json.dumps({ids[0]: "yes"}),
    "an outcome out of range": lambda ids: json.dumps({ids[0]: 2}),
    "an object for an outcome": lambda ids: json.dumps({ids[0]: {"v": 1}}),
    "an id not pending": lambda ids: json.dumps({"item0": 1}),
    "a word for an id not pending": lambda ids: json.dumps({"item0": "yes"}),
    "a number": lambda ids: "7",
}


@pytest.mark.parametrize("case", list(ANSWER_FILES))
def test_from_json_names_the_file(originals, tmp_path, capsys, case):  # noqa: F811
    CASES["answers"] += 1
    session = _copy_session(originals, tmp_path)
    ids = _pending(session)
    content = ANSWER_FILES[case](ids)
    answers = tmp_path / "bad.json"
    answers.write_bytes(content if isinstance(content, bytes) else content.encode())
    before = _snapshot(session)
    line = _refused(capsys, "session", "record", session, "--from-json", answers)
    assert "bad.json" in line
    if "id not pending" in case:
        assert "'item0'" in line
    if case in ("a word for an outcome", "an object for an outcome"):
        assert repr(ids[0]) in line
    assert _snapshot(session) == before


@FAST
@given(doc=st.recursive(st.none() | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=5),
                        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                    max_size=3), max_leaves=8))
def test_any_json_is_recorded_or_refused_in_one_line(originals, tmp_path_factory, capsys, doc):  # noqa: F811
    CASES["answers"] += 1
    root = tmp_path_factory.mktemp("json")
    session = _copy_session(originals, root)
    (root / "a.json").write_text(json.dumps(doc))
    before = _snapshot(session)
    code, _, err = _cli(capsys, "session", "record", session, "--from-json", root / "a.json")
    if code != 0:
        _error_line(code, err)
        assert _snapshot(session) == before


@pytest.mark.parametrize("outcome", ["1", b"1", "yes", [1, 2], {"v": 1}, None, 1j, float("nan"), 2.0, -0.5])
def test_record_refuses_outcomes_that_are_not_numbers_in_range(originals, tmp_path, outcome):  # noqa: F811
    CASES["answers"] += 1
    session = _copy_session(originals, tmp_path)
    before = _snapshot(session)
    loaded = fq.EvaluationSession.load(session)
    qid = loaded.pending.ids[0]
    with pytest.raises((ValueError, TypeError), match=repr(qid)):
        loaded.record(qid, outcome)
    assert _snapshot(session) == before and loaded.n_answers == fq.EvaluationSession.load(session).n_answers


# -- session.json edited with its checksums recomputed -----------------------------------------
def _edit_state(session, change):
    path = session / "session.json"
    state = json.loads(path.read_text())
    change(state)
    state["checksums"] = session_checksums(state)
    path.write_text(json.dumps(state))
    return path


def test_an_out_of_range_answer_names_the_id_and_the_file(originals, tmp_path):  # noqa: F811
    CASES["session edits"] += 1
    session = _copy_session(originals, tmp_path)
    state = json.loads((session / "session.json").read_text())
    question = state["answers"][0][0]
    _edit_state(session, lambda s: s["answers"][0].__setitem__(1, 3.0))
    with pytest.raises(ValueError, match=rf"session\.json: outcome for question id 'q{question}'"):
        fq.EvaluationSession.load(session)


@pytest.mark.parametrize("revision", [-1, -(10**20), True])
def test_a_negative_revision_is_refused(originals, tmp_path, revision):  # noqa: F811
    CASES["session edits"] += 1
    session = _copy_session(originals, tmp_path)
    _edit_state(session, lambda s: s.__setitem__("revision", revision))
    with pytest.raises(ValueError, match=r"session\.json: .*revision"):
        fq.EvaluationSession.load(session)


json_values = st.recursive(st.none() | st.booleans() | st.integers(-(10**20), 10**20) | st.floats(allow_nan=False,
                           allow_infinity=False) | st.text(max_size=4),
                           lambda inner: st.lists(inner, max_size=3), max_leaves=6)


@FAST
@given(field=st.sampled_from(["revision", "n_questions", "question_id_type", "factor_model_file", "draws", "answers",
                              "config", "rng_state", "question_ids_sha256"]), value=json_values, data=st.data())
def test_an_edited_state_with_recomputed_checksums_loads_or_is_refused_by_name(originals, tmp_path_factory,
                                                                               field, value, data):  # noqa: F811
    """Any field replaced (or, for lists, one element replaced) and the checksums recomputed: the
    session loads, or is refused with a ValueError naming session.json; nothing else."""
    CASES["session edits"] += 1
    session = _copy_session(originals, tmp_path_factory.mktemp("edit"))

    def change(state):
        if isinstance(state[field], list) and state[field] and data.draw(st.booleans()):
            state[field][data.draw(st.integers(0, len(state[field]) - 1))] = value
        else:
            state[field] = value

    _edit_state(session, change)
    before = _snapshot(session)
    try:
        fq.EvaluationSession.load(session)
    except (ValueError, FileNotFoundError) as exc:  # the latter: factor_model_file names another file
        assert "session.json" in str(exc) and "\n" not in str(exc), str(exc)
    assert _snapshot(session) == before


# -- special files and links -------------------------------------------------------------------
SPECIAL = {
    "a FIFO": (lambda p: os.mkfifo(p), "FIFO"),
    "a directory": (lambda p: p.mkdir(), "directory"),
    "a link to /dev/null": (lambda p: p.symlink_to("/dev/null"), "device"),
}


@pytest.mark.parametrize("kind", list(SPECIAL))
@pytest.mark.parametrize("name", ["session.json", "factor_model.npz"])
def test_special_files_are_named_not_missing(originals, tmp_path, capsys, kind, name):  # noqa: F811
    CASES["special files"] += 1
    session = _copy_session(originals, tmp_path)
    (session / name).unlink()
    make, word = SPECIAL[kind]
    make(session / name)
    with pytest.raises(ValueError, match=word) as exc:
        fq.EvaluationSession.load(session)
    assert name in str(exc.value) and "missing" not in str(exc.value)
    line = _refused(capsys, "session", "status", session, names=[name, word])
    assert "missing" not in line


def test_recording_through_a_linked_state_writes_the_target(originals, tmp_path, capsys):  # noqa: F811
    CASES["special files"] += 1
    session = _copy_session(originals, tmp_path)
    target = tmp_path / "elsewhere.json"
    shutil.move(session / "session.json", target)
    (session / "session.json").symlink_to(target)
    stale = tmp_path / ".elsewhere.json.0123456789ab.tmp"  # a killed writer's, beside the target
    stale.write_bytes(b"")
    pending = _pending(session)
    assert _cli(capsys, "session", "record", session, *[w for q in pending for w in (q, 1)])[0] == 0
    assert (session / "session.json").is_symlink()  # the link is kept, its target written
    assert not stale.exists() and not list(session.glob(".*.tmp"))
    assert len(json.loads(target.read_text())["answers"]) == 4 + len(pending)
    assert fq.EvaluationSession.load(session).n_answers == 4 + len(pending)


def test_a_stale_temporary_of_a_killed_create_is_removed(originals, tmp_path):  # noqa: F811
    CASES["special files"] += 1
    directory = tmp_path / "s"
    directory.mkdir()
    stale = directory / ".factor_model.npz.0123456789ab.tmp"
    stale.write_bytes(b"")  # what a kill between open and write leaves
    fq.EvaluationSession.create(directory, fq.load_factor_model(originals["model"]), budget=4)
    assert not stale.exists() and (directory / "session.json").is_file()


@pytest.mark.parametrize("flag", [False, True])
def test_allow_unchecked_reads_a_session_without_checksums(originals, tmp_path, capsys, flag):  # noqa: F811
    CASES["allow unchecked"] += 1
    session = _copy_session(originals, tmp_path)
    path = session / "session.json"
    state = json.loads(path.read_text())
    del state["checksums"]
    path.write_text(json.dumps(state))
    argv = ["session", "status", session] + (["--allow-unchecked"] if flag else [])
    if flag:
        assert _cli(capsys, *argv)[0] == 0
    else:
        assert "allow_unchecked" in _refused(capsys, *argv, names=["session.json", "checksums"])


# -- exhaustive runs of the properties above (slow) ----------------------------------------------
@pytest.mark.slow
@settings(SETTINGS, max_examples=400)
@given(shape=shapes, dtype=dtypes, payload=st.binary(max_size=200))
def test_declared_shapes_exhaustively(tmp_path_factory, shape, dtype, payload):
    test_a_declared_shape_must_fit_the_bytes_of_a_data_file.hypothesis.inner_test(tmp_path_factory, shape, dtype,
                                                                                   payload)


@pytest.mark.slow
@settings(SETTINGS, max_examples=400)
@given(field=st.sampled_from(["revision", "n_questions", "question_id_type", "factor_model_file", "draws", "answers",
                              "config", "rng_state", "question_ids_sha256"]), value=json_values, data=st.data())
def test_edited_states_exhaustively(originals, tmp_path_factory, field, value, data):  # noqa: F811
    test_an_edited_state_with_recomputed_checksums_loads_or_is_refused_by_name.hypothesis.inner_test(
        originals, tmp_path_factory, field, value, data)


@pytest.mark.parametrize("value", ["inf", "1e400", "nan", "-inf", "0", "1e20"])
def test_fit_history_budget_out_of_range(capsys, tmp_path, value):
    CASES["CLI arguments"] += 1
    np.savez(tmp_path / "history.npz", outcomes=np.eye(30, dtype=np.int8)[:10])
    _refused(capsys, "fit-history", "--data", tmp_path / "history.npz", "--out", tmp_path / "m.npz", "--budget", value,
             names=["--budget"])
    assert not (tmp_path / "m.npz").exists()


def test_a_model_beyond_the_bound_is_not_saved(originals, tmp_path):  # noqa: F811
    """What the reader refuses, the writer refuses too (a huge --prior-scale, say)."""
    CASES["absurd values"] += 1
    fm = fq.load_factor_model(originals["model"])
    fm.prior_cov_ = fm.prior_cov_ * 1e20
    with pytest.raises(ValueError, match=r"Refusing to save: prior_cov_ has values beyond \+-1e\+12"):
        fq.save_factor_model(fm, tmp_path / "fm.npz")
    assert not (tmp_path / "fm.npz").exists()


def test_allow_unchecked_starts_a_session_from_an_old_model(originals, tmp_path, capsys):  # noqa: F811
    """A format version 1 model file written before faqstats stored array hashes."""
    CASES["allow unchecked"] += 1
    old = _rewrite_model(originals["model"], tmp_path / "old.npz", lambda arrays, meta: None)
    with np.load(old) as data:
        arrays = {key: data[key] for key in data.files}
    meta = json.loads(arrays["metadata_json"].tobytes())
    del meta["array_sha256"]
    arrays["metadata_json"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(old, **arrays)
    argv = ["session", "new", tmp_path / "s", "--model", old, "--budget", 4]
    _refused(capsys, *argv, names=["old.npz", "allow_unchecked"])
    assert not (tmp_path / "s" / "session.json").exists()
    assert _cli(capsys, *argv, "--allow-unchecked")[0] == 0
    assert _cli(capsys, "session", "next", tmp_path / "s")[0] == 0  # the session's copy has its hashes
