"""Reading one inspect-ai eval log, checked: its eval header and samples as plain dicts.

With inspect-ai's ``read_eval_log`` when installed, else :mod:`zipfile` and :mod:`json` (zstd entries
need Python >= 3.14 or ``zstandard``). The samples are held against the log's own list of them, the
zip's member count and CRC-32s, so damage is an error naming the file, not a sample silently lost.
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

__all__ = ["inspect_reader", "read_log"]

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


class _NotALog(ValueError):
    """A JSON file in a log directory that is no eval log (e.g. the viewer's ``logs.json``)."""


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
        raise _NotALog(f"{path} is not an inspect eval log (no 'eval' object).")
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
    """``(eval dict, sample dicts)`` of one log, checked (a ``ValueError`` naming the file); None for a JSON
    file in a directory that is no eval log."""
    if not explicit and path.suffix == ".json":  # a log directory may hold other JSON files: skip
        doc = _json(path.read_bytes(), path, "the file")  # them (not a damaged log), saying so
        if not (isinstance(doc, dict) and isinstance(doc.get("eval"), dict)):
            if path.name != "logs.json":  # the log listing inspect writes next to the logs
                warnings.warn(f"{path} is not an inspect eval log (no 'eval' object); skipped.", UserWarning,
                              stacklevel=4)
            return None
    try:
        ev, samples = _read_builtin(path) if read_eval_log is None else _read_with_inspect(path, read_eval_log)
    except _NotALog:
        if explicit or path.suffix == ".eval":
            raise
        return None
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
    """Hold a .eval log's samples against its own list of them (``summaries.json`` or the journal's);
    ``verify_members``: also check every member's CRC-32 (inspect-ai's reader does not)."""
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
