"""Histories from long tables, one row per model x question (eval-arena's JSONL, HELM-style per-instance exports,
pandas' CSV or Parquet), pivoted into a models x questions matrix: :func:`history_from_frame` pivots a DataFrame,
:func:`read_table` reads a file (ids as the strings written), :func:`read_history_table` does both."""

from pathlib import Path

import numpy as np
import pandas as pd

from .npz import check_regular_file

__all__ = ["TABLE_SUFFIXES", "history_from_frame", "read_history_table", "read_table"]

#: The table files read, by suffix (a ``.gz``, ``.bz2``, ``.xz``, ``.zst`` or ``.zip`` after it is decompressed).
TABLE_SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".parquet": "parquet", ".pq": "parquet",
                  ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json"}
_COMPRESSIONS = (".gz", ".bz2", ".xz", ".zst", ".zip")
_DUPLICATES = ("refuse", "mean")
# a score written as one of these (any case) is missing: the cell is not observed
_NA_TEXT = {"", "na", "n/a", "nan", "null", "none", "<na>"}


def history_from_frame(frame, model="model", question="question", score="score", *, duplicates="refuse"):
    """The models x questions matrix of a long table: one row per (model, question) outcome.

    Every error names the row (its index in ``frame``), the model and the question at fault.

    Parameters
    ----------
    frame : pandas.DataFrame
        The table (other columns are ignored).
    model, question, score : str, default="model", "question", "score"
        The columns of the model's name, the question's id and the outcome in [0, 1] (booleans: 1 and 0;
        missing: NaN, None, ``""``, ``"NA"``, ``"NaN"``, ``"null"`` leave the cell unobserved).
    duplicates : {"refuse", "mean"}, default="refuse"
        A (model, question) pair on several rows: refused, or their mean taken as a graded outcome.

    Returns
    -------
    outcomes : ndarray of float64, shape (n_models, n_questions)
        NaN where a model has no outcome for a question.
    models : list of str
        The models' names, in the order of their first row.
    question_ids : list of str
        The questions' ids as given (``/`` and all), in the order of their first row.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"model": ["a", "a", "b", "b", "b"], "example_id": ["Mbpp/2", "Mbpp/3", "Mbpp/2",
    ...                    "Mbpp/3", "Mbpp/3"], "pass1": [1, 0, 1, 1, 0]})
    >>> outcomes, models, ids = history_from_frame(df, "model", "example_id", "pass1", duplicates="mean")
    >>> outcomes.tolist(), models, ids
    ([[1.0, 0.0], [1.0, 0.5]], ['a', 'b'], ['Mbpp/2', 'Mbpp/3'])
    """
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame, got {type(frame).__name__}.")
    if duplicates not in _DUPLICATES:
        raise ValueError(f"duplicates must be one of {_DUPLICATES}, got {duplicates!r}.")
    columns = {"model": model, "question": question, "score": score}
    absent = [f"{name}={col!r}" for name, col in columns.items() if col not in frame.columns]
    if absent:
        raise ValueError(f"the table has no column {', '.join(absent)} (its columns: "
                         f"{', '.join(map(repr, map(str, frame.columns)))}).")
    if len(set(columns.values())) < 3:
        raise ValueError(f"model, question and score must be three different columns, got {columns}.")
    if frame.empty:
        raise ValueError("the table has no rows.")
    names = _labels(frame[model], "model")
    ids = _labels(frame[question], "question", names)
    scores = _scores(frame[score], names, ids)
    model_codes, models = pd.factorize(pd.Series(names), sort=False)
    question_codes, question_ids = pd.factorize(pd.Series(ids), sort=False)
    cells = model_codes.astype(np.int64) * len(question_ids) + question_codes
    seen = ~np.isnan(scores)
    if duplicates == "refuse":
        counts = np.bincount(cells, minlength=len(models) * len(question_ids))
        if counts.max() > 1:
            cell = int(np.argmax(counts > 1))
            rows = [frame.index[i] for i in np.flatnonzero(cells == cell)]
            raise ValueError(f"model {models[cell // len(question_ids)]!r}, question "
                             f"{question_ids[cell % len(question_ids)]!r} has {len(rows)} rows "
                             f"({', '.join(map(str, rows[:5]))}{', ...' if len(rows) > 5 else ''}); pass "
                             "duplicates='mean' to average repeated rows as a graded outcome.")
    size = len(models) * len(question_ids)
    total = np.bincount(cells[seen], weights=scores[seen], minlength=size)
    n = np.bincount(cells[seen], minlength=size)
    # a mean of values in [0, 1]: clipped for rounding only
    outcomes = np.clip(np.where(n > 0, total / np.maximum(n, 1), np.nan), 0.0, 1.0)
    return outcomes.reshape(len(models), len(question_ids)), list(models), list(question_ids)


def _labels(column, what, models=None):
    """A model or question column as strings (ids as given); a missing one refused by its row."""
    missing = column.isna().to_numpy()
    if missing.any():
        i = int(np.argmax(missing))
        of = "" if models is None else f" (model {models[i]!r})"
        raise ValueError(f"row {column.index[i]}{of} has no {what} (column {column.name!r} is empty there).")
    values = [str(v) for v in column.tolist()]
    empty = [i for i, v in enumerate(values) if not v.strip()]
    if empty:
        raise ValueError(f"row {column.index[empty[0]]}: the {what} (column {column.name!r}) is an empty string.")
    return values


def _scores(column, models, ids):
    """The score column as float64 (NaN: not observed); a value outside [0, 1] or not a number refused by row."""
    if column.dtype == bool or column.dtype.kind in "iuf":
        values = column.to_numpy(dtype=np.float64, na_value=np.nan)
    else:
        missing = column.isna().to_numpy() | column.map(
            lambda v: isinstance(v, str) and v.strip().lower() in _NA_TEXT).to_numpy(dtype=bool)
        values = pd.to_numeric(column.map(lambda v: float(v) if isinstance(v, bool) else v).where(~missing),
                               errors="coerce")
        values = values.to_numpy(dtype=np.float64, na_value=np.nan)
        bad = np.isnan(values) & ~missing
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"row {column.index[i]} (model {models[i]!r}, question {ids[i]!r}): the score "
                             f"{column.iloc[i]!r} (column {column.name!r}) is not a number in [0, 1].")
    bad = ~np.isnan(values) & ~((values >= 0) & (values <= 1))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"row {column.index[i]} (model {models[i]!r}, question {ids[i]!r}): the score "
                         f"{float(values[i])!r} (column {column.name!r}) is not a number in [0, 1].")
    return values


def read_table(path, columns=None):
    """A ``.csv``/``.tsv``/``.parquet``/``.jsonl``/``.json`` file (maybe compressed) as a DataFrame, told by its
    suffix; the ``columns`` of a CSV or TSV are read as strings, exactly as written."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"No table at {path}.")
    check_regular_file(path, "table file")
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in _COMPRESSIONS:
        suffixes = suffixes[:-1]
    kind = TABLE_SUFFIXES.get(suffixes[-1] if suffixes else "")
    if kind is None:
        raise ValueError(f"{path}: cannot tell the table's format from its name; expected one of "
                         f"{', '.join(TABLE_SUFFIXES)} (optionally compressed: {', '.join(_COMPRESSIONS)}).")
    as_text = {c: str for c in columns or ()}
    try:
        if kind in ("csv", "tsv"):
            # no cell read as missing here: an id "NA" stays an id; a score's "NA" or "" is missing (_scores)
            return pd.read_csv(path, sep="\t" if kind == "tsv" else ",", dtype=as_text, keep_default_na=False)
        if kind == "parquet":
            try:
                return pd.read_parquet(path)
            except ImportError as exc:
                raise ImportError(f"{path}: reading Parquet needs pyarrow, which is not installed; install it with "
                                  "pip install \"faqstats[parquet]\" (or pip install pyarrow).") from exc
        # dtype=False: the values as JSON gives them (no dates guessed, ids not turned into numbers)
        return pd.read_json(path, lines=kind == "jsonl", orient="records", dtype=False)
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError, OSError) as exc:
        if isinstance(exc, (FileNotFoundError, PermissionError)):
            raise
        raise ValueError(f"{path}: not a readable {kind} table ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split())}).") from exc


def read_history_table(path, model="model", question="question", score="score", *, duplicates="refuse"):
    """A history from a table file: :func:`read_table`, then :func:`history_from_frame`.

    Parameters
    ----------
    path : str or os.PathLike
        The table (CSV, TSV, Parquet, JSON Lines; see :func:`read_table`).
    model, question, score, duplicates
        As in :func:`history_from_frame`.

    Returns
    -------
    outcomes, models, question_ids
        As :func:`history_from_frame` returns them; errors name ``path`` and the row (counted from 1).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "results.jsonl"
    >>> _ = path.write_text('{"model": "m1", "example_id": "Mbpp/2", "pass1": 1}\\n'
    ...                     '{"model": "m2", "example_id": "Mbpp/2", "pass1": 0}\\n')
    >>> outcomes, models, ids = read_history_table(path, "model", "example_id", "pass1")
    >>> outcomes.tolist(), models, ids
    ([[1.0], [0.0]], ['m1', 'm2'], ['Mbpp/2'])
    """
    frame = read_table(path, columns=[model, question])
    if isinstance(frame.index, pd.RangeIndex):  # rows as a reader counts lines: the first data row is 1
        frame.index = frame.index + 1
    try:
        return history_from_frame(frame, model, question, score, duplicates=duplicates)
    except (ValueError, TypeError) as exc:
        raise type(exc)(f"{path}: {exc}") from exc
