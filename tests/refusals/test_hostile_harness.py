"""Damaged harness output is refused by name, never read as other values.

An inspect ``.eval`` log is a zip: its samples are held against the log's own list of them
(``summaries.json``), the zip's declared member count and every member's CRC-32, so damage that
renames or hides a member, or changes bytes that inspect-ai's reader does not check, is an error.
An lm-eval samples file is held against the ``results_<timestamp>.json`` written beside it
(documents counted, doc ids inside the task, the mean of a mean-aggregated metric). The exhaustive
single-bit sweeps are slow; a sample of flips runs by default.
"""

from __future__ import annotations

import json
import shutil
import warnings
import zipfile
from contextlib import contextmanager
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import faqstats as fq
from faqstats.integrations import inspect_ai, read_inspect_logs, read_lm_eval_samples
from tests.paths import DATA

EVAL_LOG = next((DATA / "inspect" / "new_model").glob("*_words_*.eval"))
LM_RUN = DATA / "lm_eval" / "new_model" / "mock-new"


@contextmanager
def _reader(builtin):
    """faqstats' own zip reader (``builtin``), or inspect-ai's when it is installed."""
    if builtin:
        with mock.patch.object(inspect_ai, "inspect_reader", lambda reader: None):
            yield
    else:
        pytest.importorskip("inspect_ai")
        yield


def _read_inspect(path, builtin):
    with _reader(builtin), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_inspect_logs(path)


def _read_lm(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_lm_eval_samples(path, task="faq_arith")


def _same(a, b):
    return a[1:] == b[1:] and np.array_equal(a[0], b[0], equal_nan=True)


def _flipped(raw, at, mask):
    out = bytearray(raw)
    out[at] ^= mask
    return bytes(out)


def _rewrite_eval(src, dst, rename=None, edit=None):
    """A copy of the .eval log ``src`` with members renamed (``rename``: old -> new) or their JSON edited."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if edit and info.filename in edit:
                data = json.dumps(edit[info.filename](json.loads(data))).encode()
            zout.writestr((rename or {}).get(info.filename, info.filename), data)
    return dst


# -- inspect -------------------------------------------------------------------------------------
@pytest.mark.parametrize("builtin", [True, False])
def test_a_sample_whose_member_is_renamed_is_refused_by_name(tmp_path, builtin):
    name = next(n for n in zipfile.ZipFile(EVAL_LOG).namelist() if n.startswith("samples/"))
    log = _rewrite_eval(EVAL_LOG, tmp_path / EVAL_LOG.name, rename={name: name.replace("samples/", "sample5/")})
    with pytest.raises(ValueError, match=rf"{log.name}: sample '[\w-]+' epoch 1 is listed in its summaries but has "
                                         "no sample file"):
        _read_inspect(log, builtin)


def test_a_finished_log_without_its_list_of_samples_is_refused(tmp_path):
    log = _rewrite_eval(EVAL_LOG, tmp_path / EVAL_LOG.name, rename={"summaries.json": "summariez.json"})
    with pytest.raises(ValueError, match=rf"{log.name}: a finished inspect log .* without summaries.json"):
        _read_inspect(log, True)


def test_a_sample_without_its_score_is_refused_not_read_as_missing(tmp_path):
    name = next(n for n in zipfile.ZipFile(EVAL_LOG).namelist() if n.startswith("samples/"))
    log = _rewrite_eval(EVAL_LOG, tmp_path / EVAL_LOG.name, edit={name: lambda s: {**s, "scores": {}}})
    with pytest.raises(ValueError, match=rf"{log.name}: sample '[\w-]+' epoch 1 has no score of scorer 'match' and "
                                         "no error"):
        _read_inspect(log, True)


def test_a_directory_named_like_a_log_or_a_samples_file_is_refused(tmp_path):
    (tmp_path / "logs" / "run.eval").mkdir(parents=True)
    shutil.copy(EVAL_LOG, tmp_path / "logs")
    with pytest.raises(ValueError, match=r"run\.eval is named like an inspect log but is not a regular file"):
        read_inspect_logs(tmp_path / "logs")
    run = shutil.copytree(LM_RUN, tmp_path / "out" / "mock-new")
    (run / "samples_faq_x_2026-01-01T00-00-00.000001.jsonl").mkdir()
    with pytest.raises(ValueError, match=r"samples_faq_x_\S+ is named like an lm-eval samples file but is not a "
                                         "regular file"):
        read_lm_eval_samples(tmp_path / "out")


def _inspect_flip_case(tmp_path, builtin, at, mask):
    raw = EVAL_LOG.read_bytes()
    log = tmp_path / EVAL_LOG.name
    log.write_bytes(raw)
    original = _read_inspect(log, builtin)
    log.write_bytes(_flipped(raw, at, mask))
    try:
        damaged = _read_inspect(log, builtin)
    except ValueError as exc:
        assert str(log) in str(exc), exc  # refused by name
        return "refused"
    assert _same(damaged, original), (at, mask)  # a flip that changes nothing read may load
    return "same"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(at=st.integers(0, EVAL_LOG.stat().st_size - 1), mask=st.sampled_from([1 << k for k in range(8)]),
       builtin=st.booleans())
def test_a_flipped_bit_of_an_inspect_log_is_refused_or_changes_nothing(tmp_path_factory, at, mask, builtin):
    _inspect_flip_case(tmp_path_factory.mktemp("flip"), builtin, at, mask)


@pytest.mark.slow
@pytest.mark.parametrize("builtin", [True, False])
def test_every_single_bit_flip_of_an_inspect_log(tmp_path, builtin, capsys):
    size = EVAL_LOG.stat().st_size
    counts = {"refused": 0, "same": 0}
    for at in range(size):
        for mask in (1, 128):  # the low and the high bit of every byte
            counts[_inspect_flip_case(tmp_path, builtin, at, mask)] += 1
    with capsys.disabled():
        print(f"\ninspect log, {'built-in' if builtin else 'inspect-ai'} reader: {counts}")


# -- lm-eval -------------------------------------------------------------------------------------
def _lm_copy(tmp_path):
    run = shutil.copytree(LM_RUN, tmp_path / "out" / LM_RUN.name)
    return run, next(run.glob("samples_faq_arith_*.jsonl"))


def _edit_line(samples, index, edit):
    lines = samples.read_text().splitlines()
    lines[index] = json.dumps(edit(json.loads(lines[index])))
    samples.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("edit, match", [
    (lambda rec: {k: v for k, v in rec.items() if k != "acc"}, r":\d+ has no 'acc' score, though \d+ other line"),
    (lambda rec: {**rec, "acc": 1.0 - rec["acc"]}, r"the mean 'acc' of its lines .* differs from"),
    (lambda rec: {**rec, "doc_id": 97}, r"doc_id 97 is past the 12 documents results_\S+ counts"),
])
def test_an_edited_lm_eval_line_is_refused_against_its_results_file(tmp_path, edit, match):
    run, samples = _lm_copy(tmp_path)
    _edit_line(samples, 1, edit)
    with pytest.raises(ValueError, match=match):
        _read_lm(run.parent)


def test_a_lost_lm_eval_line_is_refused_against_its_results_file(tmp_path):
    run, samples = _lm_copy(tmp_path)
    samples.write_text("\n".join(samples.read_text().splitlines()[1:]) + "\n")
    with pytest.raises(ValueError, match=rf"{samples.name} has \d+ documents with filter 'none' but results_\S+ "
                                         r"counted \d+"):
        _read_lm(run.parent)


def _lm_flip_case(tmp_path, at, mask, copy=None):
    """Read the run with one bit of its samples file flipped: refused by name, or as before.
    ``copy``: ``(run, samples, raw, original)`` of a copy made once (the exhaustive sweep)."""
    if copy is None:
        run, samples = _lm_copy(tmp_path)
        raw, original = samples.read_bytes(), _read_lm(run.parent)
    else:
        run, samples, raw, original = copy
    samples.write_bytes(_flipped(raw, at, mask))
    try:
        damaged = _read_lm(run.parent)
    except ValueError as exc:
        assert samples.name in str(exc), exc
        return "refused"
    finally:
        samples.write_bytes(raw)
    assert _same(damaged, original), (at, mask)
    return "same"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(at=st.integers(0, next(LM_RUN.glob("samples_faq_arith_*.jsonl")).stat().st_size - 1),
       mask=st.sampled_from([1 << k for k in range(8)]))
def test_a_flipped_bit_of_an_lm_eval_samples_file_is_refused_or_changes_nothing(tmp_path_factory, at, mask):
    _lm_flip_case(tmp_path_factory.mktemp("flip"), at, mask)


@pytest.mark.slow
def test_every_single_bit_flip_of_an_lm_eval_samples_file(tmp_path, capsys):
    run, samples = _lm_copy(tmp_path)
    copy = (run, samples, samples.read_bytes(), _read_lm(run.parent))
    counts = {"refused": 0, "same": 0}
    for at in range(len(copy[2])):
        for mask in (1, 128):  # the low and the high bit of every byte
            counts[_lm_flip_case(tmp_path, at, mask, copy)] += 1
    with capsys.disabled():
        print(f"\nlm-eval samples file: {counts}")


# -- arguments -----------------------------------------------------------------------------------
def test_a_bool_random_state_and_complex_outcomes_are_refused():
    z = np.ones(10)
    with pytest.raises(TypeError, match="random_state must be .* got True"):
        fq.PAIEstimator(sampler=fq.UniformSampler(), budget=3, random_state=True).fit(z)
    with pytest.raises(TypeError, match="outcomes must be numeric .* complex128"):
        fq.PAIEstimator(sampler=fq.UniformSampler(), budget=3).fit(z + 0j)
