"""A history file (format ``faqstats.history``, version 1; what ``faqstats history add`` grows): an ``.npz``
with ``outcomes`` (float64, models x questions, NaN: not asked), ``models`` and ``question_ids`` (unique str),
per-question arrays kept as given, and ``metadata_json`` (the header, ``created_utc``, ``updated_utc``,
``n_models``, ``n_questions``, ``sources``: where rows came from, and the SHA-256 of every other entry). A response
matrix of other tools (no metadata, ``-1``: not observed) is read as it is and written back in this format.
"""

import numpy as np

from .checks import METADATA_KEY, check_ids, checksum_error, header, read_npz_metadata, utc_now, write_npz
from .npz import npz_path, open_array_file, read_array, read_ids

__all__ = ["HISTORY_FORMAT", "HISTORY_FORMAT_VERSION", "check_history_checksums", "load_history", "save_history"]

HISTORY_FORMAT = "faqstats.history"
HISTORY_FORMAT_VERSION = 1
_CORE = ("outcomes", "models", "question_ids")


def save_history(path, outcomes, models, question_ids, *, arrays=None, sources=None, created_utc=None):
    """Write a history to one ``.npz`` file, checksummed, atomically and without pickle.

    Parameters
    ----------
    path : str or os.PathLike
        Destination; ``".npz"`` is appended when missing.
    outcomes : array-like of shape (n_models, n_questions)
        Outcomes in [0, 1], NaN where not observed.
    models : sequence of str
        A unique name per row.
    question_ids : sequence of str
        A unique id per column.
    arrays : dict of str to ndarray, optional
        Per-question arrays (first dimension ``n_questions``) stored beside them (e.g. ``groups``).
    sources : list of dict, optional
        Where rows came from (:func:`faqstats.add_sessions_to_history` writes them).
    created_utc : str, optional
        When the history was first written (default now).

    Returns
    -------
    pathlib.Path
        The file written.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "history"
    >>> save_history(path, [[1, 0, np.nan], [0.5, 1, 1]], ["m1", "m2"], ["q/1", "q/2", "q/3"]).name
    'history.npz'
    """
    outcomes = np.array(outcomes, dtype=np.float64)
    if outcomes.ndim != 2:
        raise ValueError(f"outcomes must be a models x questions matrix, got shape {outcomes.shape}.")
    observed = outcomes[~np.isnan(outcomes)]
    if not np.all((observed >= 0) & (observed <= 1)):
        raise ValueError("outcomes must lie in [0, 1] (NaN: not observed).")
    n_models, n_questions = outcomes.shape
    entries = {"outcomes": outcomes,
               "models": np.array(check_ids(models, n_models, "models"), dtype=str),
               "question_ids": np.array(check_ids(question_ids, n_questions, "question_ids"), dtype=str)}
    for name, value in (arrays or {}).items():
        value = np.asarray(value)
        if name in entries or name == METADATA_KEY or value.dtype.hasobject or value.shape[:1] != (n_questions,):
            raise ValueError(f"arrays[{name!r}] must be a per-question array (first dimension {n_questions}, not "
                             f"object dtype, not named {name!r}), got {value.dtype} {value.shape}.")
        entries[name] = value
    now = utc_now()
    return write_npz(path, entries, header(HISTORY_FORMAT, HISTORY_FORMAT_VERSION) | {
        "created_utc": created_utc or now, "updated_utc": now, "n_models": n_models, "n_questions": n_questions,
        "sources": list(sources or [])})


def check_history_checksums(data, path):
    """The metadata of an open ``faqstats.history`` archive, every entry checked against its SHA-256."""
    meta = read_npz_metadata(data, path, HISTORY_FORMAT, HISTORY_FORMAT_VERSION, "history file")
    stored = meta.get("array_sha256")
    if not isinstance(stored, dict) or not stored:
        raise ValueError(f"{path}: metadata has no 'array_sha256' (faqstats writes the SHA-256 of every entry of a "
                         "history): the file was edited; restore it.")
    error = checksum_error(data, stored, path, "history", "restore it")
    if error is not None:
        raise error
    if not isinstance(meta.get("sources"), list):
        raise ValueError(f"{path}: metadata 'sources' must be a list.")
    return meta


def load_history(path):
    """A history file: a ``faqstats.history`` file (checked by its checksums) or a response matrix.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.npz`` file (``.npz`` appended when missing).

    Returns
    -------
    outcomes : ndarray of float64, shape (n_models, n_questions)
        NaN where not observed (``-1`` in a response matrix).
    models : list of str or None
        The rows' names (None: a response matrix without a ``models`` array).
    question_ids : list of str
        The columns' ids (``question_ids``, else ``items``, else ``"0"`` .. ``"N-1"``).
    metadata : dict
        ``format`` (``"faqstats.history"``, or None for a response matrix), ``created_utc``,
        ``sources`` (empty for a response matrix) and ``arrays`` (the per-question arrays beside them).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "bank.npz"
    >>> np.savez(path, outcomes=np.array([[1, -1], [0, 1]], dtype=np.int8), models=np.array(["a", "b"]),
    ...          items=np.array(["arc/1", "arc/2"]))
    >>> outcomes, models, ids, metadata = load_history(path)
    >>> outcomes.tolist(), models, ids, metadata["format"]
    ([[1.0, nan], [0.0, 1.0]], ['a', 'b'], ['arc/1', 'arc/2'], None)
    """
    path = npz_path(path)
    data = open_array_file(path, "history file (.npz)")
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ValueError(f"{path} is a single .npy array; a history is an .npz with 'outcomes' and 'models'.")
    with data:
        meta = check_history_checksums(data, path) if METADATA_KEY in data.files else None
        if "outcomes" not in data.files:
            raise ValueError(f"{path} has no 'outcomes' array (found {sorted(data.files)}).")
        raw = read_array(data, "outcomes", path)
        if raw.ndim != 2 or not (raw.dtype.kind in "biuf"):
            raise ValueError(f"{path}: 'outcomes' must be a numeric models x questions matrix, got {raw.dtype} of "
                             f"shape {raw.shape}.")
        n_models, n_questions = raw.shape
        models = read_ids(data, "models", n_models, path, "Uiu")
        id_key = next((k for k in ("question_ids", "items") if k in data.files), None)
        ids = read_ids(data, id_key, n_questions, path, "Uiu") if id_key else [str(j) for j in range(n_questions)]
        arrays = {}
        for key in sorted(set(data.files) - {*_CORE, METADATA_KEY, id_key}):
            value = read_array(data, key, path)
            if value.shape[:1] != (n_questions,):
                raise ValueError(f"{path}: entry {key!r} of shape {value.shape} is neither per question (first "
                                 f"dimension {n_questions}) nor one of {list(_CORE)}; a history keeps per-question "
                                 "arrays only.")
            arrays[key] = value
    if meta is not None and (models is None or id_key != "question_ids" or raw.dtype != np.float64):
        raise ValueError(f"{path}: a faqstats history holds float64 'outcomes', 'models' and 'question_ids'.")
    outcomes = raw.astype(np.float64)
    outcomes[raw < 0] = np.nan
    observed = outcomes[~np.isnan(outcomes)]
    if not np.all(observed <= 1) or (meta is not None and not np.all(observed >= 0)):
        raise ValueError(f"{path}: 'outcomes' must lie in [0, 1] (NaN or -1: not observed).")
    metadata = {"format": None, "created_utc": None, "sources": []} if meta is None else {
        "format": meta["format"], "created_utc": meta.get("created_utc"), "sources": meta["sources"]}
    return outcomes, models, ids, metadata | {"arrays": arrays}
