"""inspect-ai: eval logs as a history, ``--sample-id`` for a session's questions.

A question id is ``"<task>/<sample id>"``; its value is the scorer's, mapped by :data:`DEFAULT_VALUE_MAP`
and averaged over epochs, NaN when errored or unscored (docs/tutorials/inspect_ai.md). A log is read with inspect-ai's
``read_eval_log`` when installed, else :mod:`zipfile` and :mod:`json`, and held against its own list of samples,
member count and CRC-32s: damage is an error naming the file, not a sample silently lost.
"""

import io
import json
import os
import re
import struct
import sys
import warnings
import zipfile
import zlib
from collections.abc import Mapping

from ._common import (HarnessRecords, id_sort_key, as_score, check_question_id_list, expand_paths, make_question_id,
                      split_question_id, write_arg)

__all__ = ["read_inspect_logs", "read_inspect_outcomes", "read_inspect_groups", "read_inspect_clusters",
           "read_inspect_costs", "inspect_sample_id_arg", "DEFAULT_VALUE_MAP"]

DEFAULT_VALUE_MAP = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
"""inspect's letter scores (CORRECT, INCORRECT, PARTIAL, NOANSWER) as numbers; a ``value_map`` merges over them.

Examples
--------
>>> [DEFAULT_VALUE_MAP[letter] for letter in "CIPN"]
[1.0, 0.0, 0.5, 0.0]
"""

# -- reading one log, checked: its eval header and samples as plain dicts --------------------------
_ZIP_ZSTANDARD = 93  # zip compression method id of zstandard (inspect-ai's default)
_READERS = ("auto", "inspect", "builtin")


def _read_member(zf, name, path):
    info = zf.getinfo(name)
    if info.compress_type != _ZIP_ZSTANDARD or sys.version_info >= (3, 14):
        return zf.read(info)
    # zipfile < 3.14 cannot decompress zstd: read the raw bytes after the local header
    fp = zf.fp
    fp.seek(info.header_offset)
    header = fp.read(30)
    if header[:4] != b"PK\x03\x04":
        raise ValueError(f"{path}: bad zip local header for {name!r}.")
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    if fp.read(name_len) != info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437"):
        # as zipfile itself checks: the local header and the central directory must name the same member
        raise ValueError(f"{path}: the zip's directory and local header disagree on the name of {name!r} (damaged?).")
    fp.seek(info.header_offset + 30 + name_len + extra_len)
    data = fp.read(info.compress_size)
    try:
        import zstandard
    except ImportError:
        raise ImportError(
            f"{path} is compressed with zstandard (inspect-ai's default): install inspect-ai or the 'zstandard' "
            "package to read it (or use Python >= 3.14)."
        ) from None
    # inspect may split large entries into several frames
    with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True) as reader:
        out = reader.read()
    if zlib.crc32(out) != info.CRC:  # zipfile checks the CRC of what it decompresses; so do we
        raise ValueError(f"{path}: {name!r} fails its CRC-32 check (damaged?).")
    return out


def _json(data, path, what):
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(f"{path}: {what} is not valid UTF-8 JSON ({exc}).") from None


def _read_builtin(path):
    """``(eval header dict, list of sample dicts)`` from a .eval or .json log, without inspect."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
            head_name = "header.json" if "header.json" in names else "_journal/start.json"
            if head_name not in names:
                raise ValueError(f"{path} is not an inspect .eval log (no header.json).")
            header = _json(_read_member(zf, head_name, path), path, head_name)
            if not isinstance(header, dict):
                raise ValueError(f"{path}: {head_name} is a JSON {type(header).__name__}, not an object.")
            samples = [_json(_read_member(zf, n, path), path, n)
                       for n in names if n.startswith("samples/") and n.endswith(".json")]
        return header.get("eval"), samples
    if path.suffix == ".eval":
        raise ValueError(f"{path} is not an inspect .eval log: not a zip archive (damaged or cut short?).")
    log = _json(path.read_bytes(), path, "the file")
    if not isinstance(log, dict) or not isinstance(log.get("eval"), dict):
        raise ValueError(f"{path} is not an inspect eval log (no 'eval' object).")
    return log["eval"], log.get("samples") or []


def _read_with_inspect(path, read_eval_log):
    log = read_eval_log(os.fspath(path))
    ev = {"model": log.eval.model, "task": log.eval.task, "created": log.eval.created}
    samples = [{"id": s.id, "epoch": s.epoch, "error": None if s.error is None else str(s.error.message),
                "scores": {k: {"value": v.value} for k, v in (s.scores or {}).items()},
                "metadata": s.metadata,
                "model_usage": {k: v.model_dump() for k, v in (s.model_usage or {}).items()}}
               for s in log.samples or []]
    return ev, samples


def read_log(path, read_eval_log, explicit):
    """``(eval dict, sample dicts)`` of one log, checked; None for a JSON file in a directory that is no eval log."""
    if not explicit and path.suffix == ".json":  # a log directory may hold other JSON files: skip
        doc = _json(path.read_bytes(), path, "the file")  # them (not a damaged log), saying so
        if not (isinstance(doc, dict) and isinstance(doc.get("eval"), dict)):
            if path.name != "logs.json":  # the log listing inspect writes next to the logs
                warnings.warn(f"{path} is not an inspect eval log (no 'eval' object); skipped.", UserWarning,
                              stacklevel=4)
            return None
    try:
        ev, samples = _read_builtin(path) if read_eval_log is None else _read_with_inspect(path, read_eval_log)
    except ImportError:  # zstd without its package: the message says what to install
        raise
    except Exception as exc:  # noqa: BLE001 - zipfile, zlib, json, pydantic: damage, said in one line
        first = " ".join(str(exc).split())
        first = first if len(first) <= 300 else first[:300] + " ..."
        if str(path) not in first:
            first = f"{path} is not a readable inspect eval log ({type(exc).__name__}: {first})"
        raise ValueError(first) from exc
    ev, samples = _check_log(ev, samples, path)
    if zipfile.is_zipfile(path):
        try:
            _check_manifest(path, samples, verify_members=read_eval_log is not None)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError) as exc:
            raise ValueError(f"{path} is not a readable inspect eval log ({type(exc).__name__}: {exc})") from exc
    return ev, samples


#: the members inspect-ai writes into a .eval log (anything else is named in a warning)
_MEMBER_RE = re.compile(r"header\.json|summaries\.json|reductions\.json|_journal/start\.json"
                        r"|_journal/summaries/\d+\.json|samples/.+_epoch_\d+\.json")


def _check_manifest(path, samples, verify_members=False):
    """Hold a .eval log's samples against its own list of them; ``verify_members``: every member's CRC-32 too."""
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        if verify_members:
            for name in names:
                _read_member(zf, name, path)
        declared = _declared_members(path)
        if declared is not None and declared != len(names):  # zipfile does not compare the two
            raise ValueError(f"{path}: the zip's directory declares {declared} members but lists {len(names)}: "
                             "damaged?")
        if "header.json" in names and "summaries.json" not in names:
            raise ValueError(f"{path}: a finished inspect log (it has header.json) without summaries.json, the "
                             "list of its samples: damaged?")
        parts = ["summaries.json"] if "summaries.json" in names else sorted(
            n for n in names if n.startswith("_journal/summaries/"))
        listed = []
        for name in parts:
            doc = _json(_read_member(zf, name, path), path, name)
            if not isinstance(doc, list) or not all(isinstance(x, dict) for x in doc):
                raise ValueError(f"{path}: {name} is not a list of sample summaries.")
            listed.extend(doc)
    unknown = [n for n in names if not _MEMBER_RE.fullmatch(n)]
    if unknown:
        warnings.warn(f"{path} has member(s) {unknown[:3]} that inspect-ai does not write (damaged, or a newer "
                      "inspect-ai?); read the samples listed in its summaries.", UserWarning, stacklevel=4)
    if not parts:  # a log without summaries (very old, or cut before its first): nothing to hold against
        return

    def key(sample):
        return str(sample.get("id")), json.dumps(sample.get("epoch"))

    read, expected = {key(s) for s in samples}, {key(s) for s in listed}
    for what, keys in (("listed in its summaries but has no sample file", expected - read),
                       ("read from its samples but not listed in its summaries", read - expected)):
        if keys:
            sid, epoch = sorted(keys)[0]
            raise ValueError(f"{path}: sample {sid!r} epoch {epoch} is {what} ({len(keys)} such): the log is "
                             "damaged.")


def _declared_members(path):
    """The member count the zip's end-of-central-directory record declares (None for a zip64 count)."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - 22 - 65535))  # the record (22 bytes) and at most a 64 KiB comment
        tail = fh.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) < at + 22:
        return None
    (count,) = struct.unpack("<H", tail[at + 10 : at + 12])
    return None if count == 0xFFFF else count


def _check_log(ev, samples, path):
    """The parts of a log the readers use, checked for their types (hand edits, other JSON)."""
    if not isinstance(ev, dict):
        raise ValueError(f"{path}: the log's 'eval' must be an object, got {type(ev).__name__}.")
    for field in ("model", "task", "created"):
        if ev.get(field) is not None and not isinstance(ev[field], str):
            raise ValueError(f"{path}: eval.{field} must be a string, got {ev[field]!r}.")
    if not isinstance(samples, list):
        raise ValueError(f"{path}: the log's samples must be a list, got {type(samples).__name__}.")
    seen = set()
    for k, s in enumerate(samples):
        if not isinstance(s, dict):
            raise ValueError(f"{path}: sample {k} is a JSON {type(s).__name__}, not an object.")
        sid = s.get("id")
        if isinstance(sid, bool) or not isinstance(sid, (str, int)) or sid == "":
            raise ValueError(f"{path}: sample {k} has no valid 'id' (a string or an integer), got {sid!r}.")
        scores = s.get("scores")
        if scores is not None and not isinstance(scores, dict):
            raise ValueError(f"{path}: sample {sid!r} 'scores' must be an object, got {type(scores).__name__}.")
        key = (str(sid), json.dumps(s.get("epoch")))
        if key in seen:  # epochs repeat an id, one sample per (id, epoch)
            raise ValueError(f"{path}: sample {sid!r} epoch {s.get('epoch')!r} appears twice.")
        seen.add(key)
    return ev, samples


def inspect_reader(reader):
    """inspect-ai's ``read_eval_log``, or None for the built-in reader."""
    if reader not in _READERS:
        raise ValueError(f"reader must be one of {_READERS}, got {reader!r}.")
    if reader == "builtin":
        return None
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        if reader == "inspect":
            raise ImportError("reader='inspect' needs inspect-ai: pip install inspect-ai.") from None
        return None
    return read_eval_log


# -- values and collection -------------------------------------------------------------------
def _to_float(value, value_map, where):
    if callable(value_map):
        value = value_map(value)
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool) and value in value_map:
        value = value_map[value]
    if isinstance(value, str):
        raise ValueError(f"{where}: score value {value!r} has no numeric meaning; map it with "
                         f"value_map={{{value!r}: ...}}.")
    if isinstance(value, (dict, list)):
        raise ValueError(f"{where}: score value {value!r} is a {type(value).__name__}; pass value_map as a function "
                         "that picks a number from it.")
    return as_score(value, where)


def _log_paths(path, name):
    """``(None, log file, given explicitly)`` for every log at ``path``."""
    if not path.is_dir():
        return [(None, path, True)]
    found = sorted(p for p in path.rglob("*") if p.suffix in (".eval", ".json"))
    odd = [p for p in found if not p.is_file()]
    if odd:  # a directory (or a device) named like a log: say so rather than read past it
        raise ValueError(f"{name}: {odd[0]} is named like an inspect log but is not a regular file.")
    if not found:
        raise ValueError(f"{name}: no inspect logs (*.eval, *.json) under {path}.")
    return [(None, p, False) for p in found]


def _collect(paths, scorer, value_map, reader, name, wanted=None):
    if value_map is None or isinstance(value_map, Mapping):
        value_map = {**DEFAULT_VALUE_MAP, **(value_map or {})}
    elif not callable(value_map):
        raise TypeError(f"value_map must be a mapping or a function, got {type(value_map).__name__}.")
    records = HarnessRecords()
    for model, task, stamp, path, samples in _each_log(paths, reader, name):
        if wanted is not None and not any(qid.startswith(f"{task}/") for qid in wanted):
            continue  # a log of a task not asked about: its scorers do not matter
        task_scorer = scorer.get(task) if isinstance(scorer, Mapping) else scorer
        names = sorted({k for s in samples for k in (s.get("scores") or {})})
        if task_scorer is None:
            if len(names) > 1:
                raise ValueError(f"{path} has several scorers {names}: pass scorer=... (or a mapping task -> scorer).")
            if not names:
                continue
            task_scorer = names[0]
        elif names and task_scorer not in names:
            raise ValueError(f"scorer {task_scorer!r} is absent from {path} (task {task!r}); it has scorers {names}.")
        for s in samples:
            if s.get("error"):
                continue  # not observed
            score = (s.get("scores") or {}).get(task_scorer)
            if score is None:  # the log's other samples have this scorer: a loss, not "not observed"
                raise ValueError(f"{path}: sample {s['id']!r} epoch {s.get('epoch')} has no score of scorer "
                                 f"{task_scorer!r} and no error (damaged or edited log?).")
            qid = make_question_id(task, s["id"])
            if wanted is not None and qid not in wanted:
                records.ignored.add(qid)
                continue
            where = f"{path} sample {s['id']!r} epoch {s.get('epoch')} scorer {task_scorer!r}"
            value = score.get("value") if isinstance(score, Mapping) else score
            records.add(model, qid, _to_float(value, value_map, where), stamp)
    return records


def read_inspect_logs(paths, *, scorer=None, value_map=None, reader="auto"):
    """Read inspect-ai eval logs into a models x questions history.

    Parameters
    ----------
    paths : path, sequence of paths, or mapping
        Log files or directories (searched recursively), or a mapping ``{model name: path(s)}``.
    scorer : str, mapping task -> str, or None, default=None
        The scorer whose value to read; ``None`` works for logs with a single scorer.
    value_map : mapping or callable, optional
        Merged over :data:`DEFAULT_VALUE_MAP`, or a function from the raw value to [0, 1].
    reader : {"auto", "inspect", "builtin"}, default="auto"
        ``"auto"`` uses inspect-ai's ``read_eval_log`` when it is installed.

    Returns
    -------
    matrix : ndarray of shape (n_models, n_questions)
        Values in [0, 1] averaged over epochs (the latest log wins); NaN where unscored.
    model_names, question_ids : list of str
        Models in the order first seen; ids sorted by task then sample id.

    Examples
    --------
    >>> import json, pathlib, tempfile
    >>> samples = [{"id": i, "epoch": 1, "scores": {"match": {"value": v}}} for i, v in enumerate("CIP", 1)]
    >>> path = pathlib.Path(tempfile.mkdtemp(), "log.json")
    >>> _ = path.write_text(json.dumps({"eval": {"model": "mockllm/a", "task": "quiz"}, "samples": samples}))
    >>> read_inspect_logs(path, reader="builtin")
    (array([[1. , 0. , 0.5]]), ['mockllm/a'], ['quiz/1', 'quiz/2', 'quiz/3'])
    """
    records = _collect(paths, scorer, value_map, reader, "paths")
    return records.history("No scored samples in the inspect logs given in paths.")


def read_inspect_outcomes(log_path, question_ids, *, scorer=None, value_map=None, reader="auto"):
    """The values of ``question_ids`` from one model's inspect logs (e.g. a ``--sample-id`` run).

    Parameters
    ----------
    log_path : path, sequence of paths, or mapping
        The run's log directory or log files (one model).
    question_ids : sequence of str
        The ids asked; each must have a scored sample.
    scorer, value_map, reader
        As in :func:`read_inspect_logs`.

    Returns
    -------
    ndarray of shape (len(question_ids),)

    Examples
    --------
    >>> import json, pathlib, tempfile
    >>> samples = [{"id": i, "epoch": 1, "scores": {"match": {"value": v}}} for i, v in [(4, "I"), (9, "C")]]
    >>> path = pathlib.Path(tempfile.mkdtemp(), "run.json")
    >>> _ = path.write_text(json.dumps({"eval": {"model": "mockllm/new", "task": "quiz"}, "samples": samples}))
    >>> read_inspect_outcomes(path, ["quiz/9", "quiz/4"], reader="builtin")
    array([1., 0.])
    """
    return read_inspect_round(log_path, question_ids, scorer=scorer, value_map=value_map, reader=reader)[0]


def read_inspect_round(log_path, question_ids, *, scorer=None, value_map=None, reader="auto"):
    """:func:`read_inspect_outcomes`'s values and the ids of the scored samples not asked (read past)."""
    ids = check_question_id_list(question_ids)
    records = _collect(log_path, scorer, value_map, reader, "log_path", wanted=set(ids))
    return records.outcomes(ids, f"log_path {log_path}")


# -- groups and costs per question ------------------------------------------------------------
def _each_log(paths, reader, name):
    """``(model, task, created, log path, samples)`` for every log at ``paths``."""
    read_eval_log = inspect_reader(reader)
    for model, path, explicit in expand_paths(paths, name, _log_paths):
        log = read_log(path, read_eval_log, explicit)
        if log is None:
            continue  # some other JSON file in a log directory (e.g. the viewer's logs.json)
        ev, samples = log
        yield model or ev.get("model") or path.stem, ev.get("task") or "task", str(ev.get("created") or ""), path, \
            samples


def _each_sample(paths, reader, name):
    for model, task, stamp, path, samples in _each_log(paths, reader, name):
        for sample in samples:
            yield model, task, stamp, path, sample


def read_inspect_groups(paths, field=None, *, reader="auto"):
    """A group label per question of inspect-ai logs: the task, or a field of the samples' metadata.

    Parameters
    ----------
    paths : path, sequence of paths, or mapping
        As in :func:`read_inspect_logs`.
    field : str or None, default=None
        The ``metadata`` key whose value (a string or an integer) is the group; ``None``: the task.
    reader : {"auto", "inspect", "builtin"}, default="auto"
        As in :func:`read_inspect_logs`.

    Returns
    -------
    dict
        ``{"<task>/<sample id>": label}`` (labels as strings), for every sample in the logs.

    Examples
    --------
    >>> import json, pathlib, tempfile
    >>> samples = [{"id": i, "epoch": 1, "metadata": {"level": lvl}} for i, lvl in [(1, "easy"), (2, "hard")]]
    >>> path = pathlib.Path(tempfile.mkdtemp(), "log.json")
    >>> _ = path.write_text(json.dumps({"eval": {"model": "mockllm/a", "task": "quiz"}, "samples": samples}))
    >>> read_inspect_groups(path, "level", reader="builtin")
    {'quiz/1': 'easy', 'quiz/2': 'hard'}
    """
    if field is not None and not (isinstance(field, str) and field):
        raise TypeError(f"field must be a metadata key (a non-empty string) or None, got {field!r}.")
    return _metadata_labels(paths, field, reader, "group")


def read_inspect_clusters(paths, field, *, reader="auto"):
    """A cluster id per question of inspect-ai logs (e.g. a ``passage_id``), from a field of the samples' metadata.

    Parameters
    ----------
    paths : path, sequence of paths, or mapping
        As in :func:`read_inspect_logs`.
    field : str
        The ``metadata`` key whose value (a string or an integer) is the cluster id.
    reader : {"auto", "inspect", "builtin"}, default="auto"
        As in :func:`read_inspect_logs`.

    Returns
    -------
    dict
        ``{"<task>/<sample id>": "<task>/<cluster id>"}``: clusters are made within a task.

    Examples
    --------
    >>> import json, pathlib, tempfile
    >>> samples = [{"id": i, "epoch": 1, "metadata": {"passage": p}} for i, p in [(1, 7), (2, 7), (3, 8)]]
    >>> path = pathlib.Path(tempfile.mkdtemp(), "log.json")
    >>> _ = path.write_text(json.dumps({"eval": {"model": "mockllm/a", "task": "quiz"}, "samples": samples}))
    >>> read_inspect_clusters(path, "passage", reader="builtin")
    {'quiz/1': 'quiz/7', 'quiz/2': 'quiz/7', 'quiz/3': 'quiz/8'}
    """
    if not (isinstance(field, str) and field):
        raise TypeError(f"field must be a metadata key (a non-empty string), got {field!r}.")
    labels = _metadata_labels(paths, field, reader, "cluster")
    return {qid: f"{split_question_id(qid)[0]}/{label}" for qid, label in labels.items()}


def _metadata_labels(paths, field, reader, kind):
    """``{question id: label}``: the metadata ``field`` of every sample (the task when None)."""
    labels, where = {}, {}
    for _, task, _, path, sample in _each_sample(paths, reader, "paths"):
        qid = make_question_id(task, sample["id"])
        if field is None:
            label = task
        else:
            metadata = sample.get("metadata")
            if not isinstance(metadata, Mapping) or field not in metadata:
                keys = sorted(metadata) if isinstance(metadata, Mapping) else []
                raise ValueError(f"{path} sample {sample['id']!r}: its metadata has no field {field!r} (it has "
                                 f"{keys}).")
            label = metadata[field]
            if isinstance(label, bool) or not isinstance(label, (str, int)) or label == "":
                raise ValueError(f"{path} sample {sample['id']!r}: metadata field {field!r} is {label!r}, not a "
                                 f"{kind} label (a non-empty string or an integer).")
            label = str(label)
        if qid in labels and labels[qid] != label:
            raise ValueError(f"{path} sample {sample['id']!r}: metadata field {field!r} is {label!r} here and "
                             f"{labels[qid]!r} in {where[qid]}; a question has one {kind}.")
        labels.setdefault(qid, label)
        where.setdefault(qid, path)
    if not labels:
        raise ValueError("No samples in the inspect logs given in paths.")
    return {qid: labels[qid] for qid in sorted(labels, key=id_sort_key)}


_TOKENS = ("total", "input", "output")


def _sample_tokens(sample, tokens, where):
    """Tokens of one sample (one epoch), summed over the models it called; None without usage."""
    usage = sample.get("model_usage")
    if not usage:
        return None
    if not isinstance(usage, Mapping):
        raise ValueError(f"{where}: 'model_usage' must be an object, got {type(usage).__name__}.")
    total = 0.0
    for model, u in usage.items():
        if not isinstance(u, Mapping):
            raise ValueError(f"{where}: model_usage[{model!r}] must be an object, got {type(u).__name__}.")
        if tokens == "total" and u.get("total_tokens") is not None:
            keys = ("total_tokens",)
        else:
            keys = ("input_tokens", "output_tokens") if tokens == "total" else (f"{tokens}_tokens",)
        for key in keys:
            value = u.get(key) or 0
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"{where}: model_usage[{model!r}].{key} must be a non-negative number, got {value!r}.")
            total += float(value)
    return total


def read_inspect_costs(paths, *, tokens="total", reader="auto"):
    """A cost per question of inspect-ai logs: the tokens a sample used, from its ``model_usage``.

    Parameters
    ----------
    paths : path, sequence of paths, or mapping
        As in :func:`read_inspect_logs`.
    tokens : {"total", "input", "output"}, default="total"
        ``total_tokens`` (else input + output), or the input or output tokens, over every model called.
    reader : {"auto", "inspect", "builtin"}, default="auto"
        As in :func:`read_inspect_logs`.

    Returns
    -------
    dict
        ``{"<task>/<sample id>": cost}``: one epoch's tokens, averaged over epochs, then models (none without usage).

    Examples
    --------
    >>> import json, pathlib, tempfile
    >>> usage = [{"mockllm/a": {"input_tokens": 90, "output_tokens": n}} for n in (10, 30)]
    >>> samples = [{"id": 1, "epoch": e, "model_usage": u} for e, u in enumerate(usage, 1)]
    >>> path = pathlib.Path(tempfile.mkdtemp(), "log.json")
    >>> _ = path.write_text(json.dumps({"eval": {"model": "mockllm/a", "task": "quiz"}, "samples": samples}))
    >>> read_inspect_costs(path, reader="builtin"), read_inspect_costs(path, tokens="output", reader="builtin")
    ({'quiz/1': 110.0}, {'quiz/1': 20.0})
    """
    if tokens not in _TOKENS:
        raise ValueError(f"tokens must be one of {_TOKENS}, got {tokens!r}.")
    records = HarnessRecords()
    for model, task, stamp, path, sample in _each_sample(paths, reader, "paths"):
        where = f"{path} sample {sample['id']!r} epoch {sample.get('epoch')}"
        n = _sample_tokens(sample, tokens, where)
        if n is not None:
            records.add(model, make_question_id(task, sample["id"]), n, stamp)
    if not records.models:
        raise ValueError("No sample with model_usage (token counts) in the inspect logs given in paths.")
    return records.mean_costs()


def inspect_sample_id_arg(question_ids, path=None, *, task_prefix=True):
    """The ``--sample-id`` value for the questions a session asks: comma-separated, glob characters ``*?[`` escaped.

    Parameters
    ----------
    question_ids : sequence of str
        Ids ``"<task>/<sample id>"``.
    path : path or None, default=None
        When given, the value is also written there (``--sample-id "$(cat PATH)"``).
    task_prefix : {True, "auto", False}, default=True
        Write ``<task>:<id>`` selectors (inspect-ai 0.3.2xx on); ``"auto"``: when the ids span several tasks.

    Returns
    -------
    str

    Examples
    --------
    >>> inspect_sample_id_arg(["arith/3", "words/w-kiwi"]), inspect_sample_id_arg(["gpqa/rec7*"], task_prefix=False)
    ('arith:3,words:w-kiwi', 'rec7[*]')
    """
    ids = check_question_id_list(question_ids, empty="inspect would run every sample")
    if task_prefix not in ("auto", True, False):
        raise ValueError(f"task_prefix must be 'auto', True or False, got {task_prefix!r}.")
    pairs = [split_question_id(qid) for qid in ids]
    for qid, (_, sample) in zip(ids, pairs):
        if "," in sample:
            raise ValueError(f"question id {qid!r}: a sample id with a comma cannot be passed to --sample-id.")
    prefix = len({task for task, _ in pairs}) > 1 if task_prefix == "auto" else task_prefix
    # inspect matches --sample-id entries with fnmatch: make *, ? and [ literal
    escaped = ["".join(f"[{c}]" if c in "*?[" else c for c in s) for _, s in pairs]
    value = ",".join(f"{task}:{s}" if prefix else s for (task, _), s in zip(pairs, escaped))
    write_arg(path, value)
    return value
