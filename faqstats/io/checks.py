"""What every disk format shares: the header, hashes, JSON safety, question ids, JSON documents and checksummed
``.npz`` archives."""

import datetime
import hashlib
import json
import numbers
from pathlib import Path

import numpy as np

from .._atomic import atomic_write
from .._version import __version__
from .npz import check_regular_file, npz_path, read_array

__all__ = ["array_sha256", "check_format_header", "check_question_ids", "check_reader_options", "json_safe",
           "question_ids_sha256", "utc_now"]

METADATA_KEY = "metadata_json"


def utc_now():
    """The current UTC time, ISO 8601 to the second."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def header(format_name, format_version):
    """The fields every file starts with: its format, format version and the faqstats that wrote it."""
    return {"format": format_name, "format_version": format_version, "faqstats_version": __version__}


def check_format_header(doc, path, *, format_name, max_version, what, version_label="format version"):
    """Refuse a JSON document that is not ``format_name`` or was written by a newer format version."""
    if not isinstance(doc, dict) or doc.get("format") != format_name:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(f"{path} is not a faqstats {what}: format is {found!r}, expected {format_name!r}.")
    version = doc.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"{path}: format_version must be a positive integer, got {version!r}.")
    if version > max_version:
        raise ValueError(f"{path} was written by a newer faqstats ({version_label} {version} > {max_version}); upgrade "
                         f"faqstats to load it (it was written by faqstats {doc.get('faqstats_version')!s}).")
    return version


def question_ids_sha256(question_ids):
    """SHA-256 (hex) of the UTF-8 compact JSON list of the ids (order matters), as stored in the metadata."""
    text = json.dumps([str(q) for q in question_ids], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def array_sha256(arr):
    """SHA-256 (hex) of an array's dtype, shape and C-order bytes."""
    arr = np.ascontiguousarray(arr)
    h = hashlib.sha256(f"{arr.dtype.str}{arr.shape}".encode())
    h.update(arr.tobytes())
    return h.hexdigest()


def json_sha256(value):
    """SHA-256 of a JSON value in canonical form (sorted keys, no spaces)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_npz(path, entries, metadata):
    """Write ``entries`` and ``metadata`` (with every entry's SHA-256) as the entry ``metadata_json``
    to one ``.npz``, atomically; an object array (it would need pickle) is refused."""
    for key, arr in entries.items():
        if arr.dtype.hasobject:
            raise TypeError(f"Refusing to save: entry {key!r} has dtype object (it would need pickle).")
    metadata["array_sha256"] = {key: array_sha256(arr) for key, arr in entries.items()}
    text = json.dumps(metadata, ensure_ascii=False, allow_nan=False, sort_keys=True)
    entries[METADATA_KEY] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    return atomic_write(npz_path(path), lambda f: np.savez(f, **entries))


def read_npz_metadata(data, path, format_name, max_version, what):
    """The ``metadata_json`` of an open archive, its header checked (:func:`check_format_header`)."""
    raw = read_array(data, METADATA_KEY, path)
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise ValueError(f"{path}: {METADATA_KEY!r} must be a 1-D uint8 array, got {raw.dtype} {raw.shape}.")
    try:
        meta = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"{path}: {METADATA_KEY!r} is not valid UTF-8 JSON ({exc}).") from exc
    check_format_header(meta, path, format_name=format_name, max_version=max_version, what=what)
    return meta


def checksum_error(data, stored, path, written, advice):
    """The error naming the entries of an open archive whose bytes differ from their SHA-256 in
    ``stored`` (those missing from either side included), or None."""
    changed = sorted(key for key in set(stored) | (set(data.files) - {METADATA_KEY})
                     if key not in data.files or stored.get(key) != array_sha256(read_array(data, key, path)))
    if not changed:
        return None
    what = f"entry {changed[0]!r} differs" if len(changed) == 1 else f"entries {changed} differ"
    return ValueError(f"{path}: {what} from the SHA-256 written with the {written}: the file was edited or damaged; "
                      f"{advice}.")


def json_safe(value, name, notes):
    """``value`` as plain JSON types; what cannot be stored becomes None with a note."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        value = float(value)
        if np.isfinite(value):
            return value
        notes.append(f"{name}={value!r} is not finite and is stored as null.")
        return None
    if isinstance(value, (list, tuple, np.ndarray)):
        return [json_safe(v, f"{name}[{i}]", notes) for i, v in enumerate(list(value))]
    if isinstance(value, dict):
        return {str(k): json_safe(v, f"{name}[{k!r}]", notes) for k, v in value.items()}
    notes.append(f"{name} was a {type(value).__module__}.{type(value).__name__} (not storable as JSON) and is stored "
                 "as null; a refit of the loaded model is not seeded the same way.")
    return None


def read_json(path, what, format_name, max_version, version_label="format version"):
    """The JSON document in ``path``, its header checked (:func:`check_format_header`)."""
    check_regular_file(path, f"{what} file")  # a FIFO would block the read
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a {what} JSON file, or not valid UTF-8 JSON ({exc}).") from exc
    except RecursionError as exc:  # nesting thousands of levels deep
        raise ValueError(f"{path}: not a {what} JSON file (nested too deeply to read).") from exc
    check_format_header(doc, path, format_name=format_name, max_version=max_version, what=f"{what} file",
                        version_label=version_label)
    return doc


def write_json(path, doc, indent=None):
    """Write ``doc`` as UTF-8 JSON (no NaN), atomically; compact unless ``indent``."""
    text = json.dumps(doc, ensure_ascii=False, allow_nan=False, indent=indent,
                      separators=None if indent else (",", ":"))
    return atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def check_ids(ids, n_questions, name):
    """``ids`` as a list of ``n_questions`` unique strings that survive a numpy str array."""
    if isinstance(ids, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of strings, not a single {type(ids).__name__}.")
    ids = list(ids)
    bad = [q for q in ids if not isinstance(q, str)]
    if bad:
        raise TypeError(f"{name} must be strings; got {bad[0]!r} ({type(bad[0]).__name__}).")
    if len(ids) != n_questions:
        raise ValueError(f"{name} has {len(ids)} entries, the model has {n_questions} questions.")
    if len(set(ids)) != len(ids):
        dup = next(q for q in ids if ids.count(q) > 1)
        raise ValueError(f"{name} must be unique; {dup!r} appears more than once.")
    # numpy's fixed-width str arrays drop trailing NUL characters: refuse what would not round-trip
    if np.array(ids, dtype=str).tolist() != ids:
        raise ValueError(f"{name} must not end in NUL characters (they do not survive a numpy str array).")
    return ids


def check_question_ids(model, question_ids):
    """Raise unless ``question_ids`` are the model's (``question_ids_`` or ``feature_names_in_``), in the same order."""
    expected = getattr(model, "question_ids_", None)
    if expected is None and getattr(model, "feature_names_in_", None) is not None:
        expected = list(model.feature_names_in_)
    if expected is None:
        raise ValueError("The model carries no question ids (saved without question_ids=): nothing to check against.")
    given = [str(q) for q in question_ids]
    expected = [str(q) for q in expected]
    if len(given) != len(expected):
        raise ValueError(f"{len(given)} question ids given, the model has {len(expected)}.")
    if given != expected:
        first = next(i for i, (a, b) in enumerate(zip(given, expected)) if a != b)
        how = "the model's in a different order" if sorted(given) == sorted(expected) else "not the model's"
        raise ValueError(f"question ids are {how} (first difference at index {first}: {given[first]!r} != "
                         f"{expected[first]!r}).")


def check_reader_options(reader, where="reader"):
    """``reader`` (``{"harness", "options": {metric|filter|scorer: {"default", "tasks"}}}``: how a history was read
    from harness output) checked and copied as plain JSON; None stays None.
    """
    if reader is None:
        return None

    def bad(what):
        return ValueError(f"{where} {what}; expected {{'harness': 'lm-eval' or 'inspect', 'options': {{name: "
                          "{'default': str or None, 'tasks': {task: str}}}}.")

    if not isinstance(reader, dict) or set(reader) != {"harness", "options"}:
        raise bad(f"must be a mapping with the keys 'harness' and 'options', got {reader!r}")
    if reader["harness"] not in ("lm-eval", "inspect"):
        raise bad(f"names an unknown harness {reader['harness']!r}")
    options = reader["options"]
    if not isinstance(options, dict):
        raise bad(f"'options' must be a mapping, got {options!r}")
    out = {}
    for name, spec in options.items():
        if name not in ("metric", "filter", "scorer"):
            raise bad(f"has an unknown option {name!r}")
        if not isinstance(spec, dict) or set(spec) != {"default", "tasks"}:
            raise bad(f"option {name!r} must be a mapping with 'default' and 'tasks', got {spec!r}")
        default, tasks = spec["default"], spec["tasks"]
        if not (default is None or (isinstance(default, str) and default)):
            raise bad(f"option {name!r}: 'default' must be a non-empty string or None, got {default!r}")
        if not isinstance(tasks, dict) or not all(isinstance(t, str) and t and isinstance(v, str) and v
                                                  for t, v in tasks.items()):
            raise bad(f"option {name!r}: 'tasks' must map task names to non-empty strings, got {tasks!r}")
        out[name] = {"default": default, "tasks": dict(tasks)}
    return {"harness": reader["harness"], "options": out}
