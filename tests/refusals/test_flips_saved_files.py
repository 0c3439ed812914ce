"""Every single-byte flip of a saved file is refused by name or changes nothing read.

The files faqstats writes (a session directory's ``session.json`` and model file, a factor model,
a Gaussian-process surrogate, a stack, a configuration, step weights) each carry checksums: the
zip's CRC-32 of every entry, the SHA-256 of every array, of the question ids, of a
configuration, of a session's parts and of its model file, of step weights. So a flipped byte
must either be refused with a ``ValueError`` naming the file, or (a byte that nothing reads: a
zip header's "version made by", a local header's copy of the CRC, the time a session was last
written) load with every array, parameter, id, draw and answer identical to the original's.
Never a silent change, never another exception type.

The default part samples flips with Hypothesis; the ``slow`` part flips every byte with the
masks 0x01 and 0x80 (JSON files also 0xFF) and prints, per file kind, how many flips were
refused and how many loaded unchanged.
"""

import dataclasses
import json
import shutil
import time

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import faqstats as fq
from faqstats.configure import Configuration
from faqstats.io import load_model_file

N_QUESTIONS = 36
KINDS = ("session.json", "session model", "factor model", "surrogate", "stack", "configuration", "step weights")
JSON_KINDS = ("session.json", "step weights")


def _fingerprint(value, depth=0):
    """A comparable picture of everything a loaded object holds: arrays by dtype, shape and bytes,
    estimators by their parameters and fitted attributes, recursively."""
    if depth > 8:
        return repr(value)
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            return ("object array", value.shape, [_fingerprint(v, depth + 1) for v in value.tolist()])
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (np.generic, float, int, str, bool, type(None))):
        return (type(value).__name__, repr(value))
    if isinstance(value, dict):
        return ("dict", [(str(k), _fingerprint(v, depth + 1)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_fingerprint(v, depth + 1) for v in value])
    if isinstance(value, pd.DataFrame):
        return ("frame", _fingerprint(list(value.columns), depth + 1),
                _fingerprint(value.to_numpy(dtype=object).tolist(), depth + 1))
    if dataclasses.is_dataclass(value):
        return (type(value).__name__, [(f.name, _fingerprint(getattr(value, f.name), depth + 1))
                                       for f in dataclasses.fields(value)])
    if hasattr(value, "get_params"):  # an estimator, a sampler: parameters and fitted attributes
        fitted = {k: v for k, v in vars(value).items() if k.endswith("_") and not k.startswith("_")}
        return (type(value).__name__, _fingerprint(value.get_params(deep=False), depth + 1),
                _fingerprint(fitted, depth + 1))
    return (type(value).__name__, repr(value))


def _session_fingerprint(session):
    try:
        result = session.result()
    except ValueError as exc:  # fewer than two recorded draws
        result = str(exc)
    return _fingerprint({
        "status": session.status() | {"directory": None},  # the copy lives elsewhere
        "queries": session.queries(), "pending": list(session.pending),
        "result": result, "question_ids": session.question_ids, "predictor": session.predictor,
        "sampler": session.sampler, "budget": session.budget, "batch_size": session.batch_size,
        "n_draws": session.n_draws, "n_answers": session.n_answers, "metadata": session.model_metadata,
    })


def _model_fingerprint(path):
    model, meta, ids = load_model_file(path)
    return _fingerprint({"model": model, "meta": meta, "ids": ids})


@pytest.fixture(scope="module")
def originals(tmp_path_factory):
    """``{kind: (file to flip, loader returning a fingerprint)}`` and the originals' fingerprints."""
    root = tmp_path_factory.mktemp("flip-originals")
    bank = fq.make_synthetic_bank(n_models=24, n_questions=N_QUESTIONS, n_components=2, random_state=0)
    ids = [f"q{j}" for j in range(N_QUESTIONS)]
    fm = fq.LogisticFactorModel(n_components=2, max_iter=20, random_state=0).fit(bank.history)
    gp = fq.GaussianProcessSurrogate(n_components=2).fit(bank.history)
    stack = fq.StackedPredictor([("gp", fq.GaussianProcessSurrogate(n_components=2)), ("mix", fq.HistoryMixture())],
                                n_paths=6).fit(bank.history)
    est = fq.PAIEstimator(gp, fq.HybridSampler(tau=0.25), budget=5, step_weights=np.linspace(1, 2, 5))
    table = pd.DataFrame({"candidate": ["gp"], "predicted_ess": [1.5]})
    session = fq.EvaluationSession.create(root / "session", fm, ids, budget=8, batch_size=2, random_state=0)
    z = bank.new_outcomes[0]
    for _ in range(2):
        got, _ = session.next_questions()
        session.record(got, [float(z[int(q[1:])]) for q in got])
    session.next_questions()  # a round pending
    sw = fq.StepWeights(np.linspace(1, 2, 5), np.linspace(3, 1, 5), np.linspace(2.5, 1, 5), 10, 100, 0.9, 1.0)

    def load_session(_):
        return _session_fingerprint(fq.EvaluationSession.load(root / "session"))

    cases = {
        "session.json": (root / "session" / "session.json", load_session),
        "session model": (root / "session" / "factor_model.npz", load_session),
        "factor model": (fq.save_factor_model(fm, root / "fm.npz", question_ids=ids), _model_fingerprint),
        "surrogate": (fq.save_factor_model(gp, root / "gp.npz", question_ids=ids), _model_fingerprint),
        "stack": (fq.save_factor_model(stack, root / "stack.npz", question_ids=ids), _model_fingerprint),
        "configuration": (fq.save_configuration(Configuration(est, "gp", table, 5, 10, 100, 1.0), root / "cfg.npz",
                                                question_ids=ids),
                          lambda path: _fingerprint(fq.load_configuration(path))),
        "step weights": (fq.save_step_weights(sw, root / "w.json"),
                         lambda path: _fingerprint(fq.load_step_weights(path))),
    }
    return {kind: (path, load, load(path)) for kind, (path, load) in cases.items()}


def _flip_and_load(path, load, original, at, mask):
    """Flip byte ``at`` of ``path`` in place with ``mask``, load, restore the byte: ``"refused"``
    or ``"same"``; anything else fails the test, naming the flip."""
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ mask]))
    try:
        try:
            got = load(path)
        except ValueError as exc:
            message = str(exc)
            assert path.name in message, f"flip {mask:#04x} at byte {at} of {path.name}: error without the name: " \
                                         f"{message}"
            assert "\n" not in message, message
            return "refused"
        except Exception as exc:  # noqa: BLE001 - any other type is the failure this test looks for
            raise AssertionError(f"flip {mask:#04x} at byte {at} of {path.name}: {type(exc).__name__}: {exc}") from exc
        assert got == original, f"flip {mask:#04x} at byte {at} of {path.name} loaded with other values"
        return "same"
    finally:
        with open(path, "r+b") as f:
            f.seek(at)
            f.write(bytes([byte]))


@pytest.fixture(scope="module")
def flip_copies(originals, tmp_path_factory):
    """One copy per kind to flip in place (the session: a copy of its directory)."""
    root = tmp_path_factory.mktemp("flip-copies")
    copies = {}
    for kind, (path, load, original) in originals.items():
        if kind.startswith("session"):
            directory = root / kind.replace(" ", "-")
            shutil.copytree(path.parent, directory)
            copy = directory / path.name
            copies[kind] = (copy, lambda _, d=directory: _session_fingerprint(fq.EvaluationSession.load(d)), original)
        else:
            copy = root / path.name
            shutil.copy(path, copy)
            copies[kind] = (copy, load, original)
    return copies


def test_the_originals_load_and_the_copies_match_them(flip_copies):
    for kind, (copy, load, original) in flip_copies.items():
        assert load(copy) == original, kind
        assert original[0] in ("dict", "StepWeights", "Configuration"), kind


def test_a_changed_value_is_seen_by_the_fingerprint(originals):
    """The comparison can fail: a loaded model with one factor changed differs from the original."""
    path, _, original = originals["factor model"]
    model, meta, ids = load_model_file(path)
    model.question_factors_ = model.question_factors_.copy()
    model.question_factors_[0, 0] = np.nextafter(model.question_factors_[0, 0], np.inf)
    assert _fingerprint({"model": model, "meta": meta, "ids": ids}) != original


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
@pytest.mark.parametrize("kind", KINDS)
def test_a_sampled_flip_is_refused_by_name_or_changes_nothing(flip_copies, kind, data):
    copy, load, original = flip_copies[kind]
    at = data.draw(st.integers(0, copy.stat().st_size - 1), label="byte")
    mask = data.draw(st.one_of(st.sampled_from([1 << bit for bit in range(8)]), st.integers(1, 255)), label="mask")
    _flip_and_load(copy, load, original, at, mask)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_every_flip_is_refused_by_name_or_changes_nothing(flip_copies, kind, capsys):
    copy, load, original = flip_copies[kind]
    masks = (0x01, 0x80, 0xFF) if kind in JSON_KINDS else (0x01, 0x80)
    counts = {"refused": 0, "same": 0}
    start = time.perf_counter()
    for at in range(copy.stat().st_size):
        for mask in masks:
            counts[_flip_and_load(copy, load, original, at, mask)] += 1
    with capsys.disabled():
        print(f"\n{kind} ({copy.stat().st_size:,} bytes, masks {', '.join(f'{m:#04x}' for m in masks)}): "
              f"{json.dumps(counts)} in {time.perf_counter() - start:.1f} s")
    assert load(copy) == original  # every byte restored
    assert counts["refused"] > 0


def test_a_step_weights_file_without_checksum_loads_only_when_allowed(originals, tmp_path, capsys):
    """Format version 1 has no checksum, so a flip in it would load unseen: it is read only on request."""
    from faqstats.cli import main

    path, _, _ = originals["step weights"]
    doc = json.loads(path.read_text())
    v1 = tmp_path / "v1.json"
    v1.write_text(json.dumps({k: v for k, v in doc.items() if k != "sha256"} | {"format_version": 1}))
    with pytest.raises(ValueError, match="v1.json.*allow_unchecked=True"):
        fq.load_step_weights(v1)
    assert fq.load_step_weights(v1, allow_unchecked=True).weights.tolist() == doc["weights"]
    model = originals["factor model"][0]
    new = ["session", "new", "--model", str(model), "--budget", "5", "--step-weights", str(v1)]
    assert main([*new[:2], str(tmp_path / "refused"), *new[2:]]) == 2
    err = capsys.readouterr().err.strip()
    assert "v1.json" in err and "--allow-unchecked" in err and "\n" not in err, err
    assert main([*new[:2], str(tmp_path / "allowed"), *new[2:], "--allow-unchecked"]) == 0
    assert fq.EvaluationSession.load(tmp_path / "allowed").budget == 5


def test_an_archive_member_that_is_no_npy_array_is_refused_by_name(originals, tmp_path):
    """numpy hands back the raw bytes of such a member (a flipped name, or one added by hand)."""
    import zipfile

    from faqstats.io.npz import open_array_file, read_array

    path = tmp_path / "extra.npz"
    shutil.copy(originals["factor model"][0], path)
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("notes.txt", b"not an array")
    with open_array_file(path) as data, pytest.raises(ValueError, match="extra.npz: entry 'notes.txt' is not a .npy"):
        read_array(data, "notes.txt", path)
    with pytest.raises(ValueError, match="extra.npz"):
        load_model_file(path)
