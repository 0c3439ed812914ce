"""A history that grows: a finished session's answers, or other models' full runs, become rows of the history
the next predictor learns from (``faqstats history add``)."""

import os
from pathlib import Path

import numpy as np

from .io.checks import array_sha256, utc_now
from .io.history import load_history, save_history
from .io.npz import npz_path
from .session import EvaluationSession, SessionStore
from .session._store import file_sha256
from .session.config import shown

__all__ = ["add_rows_to_history", "add_sessions_to_history"]


def _session_row(session_dir, question_ids, partial, allow_unchecked):
    """A session's answers as a row over ``question_ids`` (NaN where not asked), and its ``sources`` entry."""
    where = Path(os.fspath(session_dir))
    session = EvaluationSession.load(where, allow_unchecked=allow_unchecked)
    if not (session.done or partial):
        raise ValueError(f"{where}: the session is not done ({session.n_draws} of {session.budget} draws recorded, "
                         f"{len(session.pending.ids)} pending); finish it, or add its answers so far with "
                         "partial=True (--partial).")
    # the answers as stored (every question's, those of draws still pending included), checked by load above
    store, state, _ = SessionStore.open(where, allow_unchecked=allow_unchecked)
    bank = [str(q) for q in session.question_ids]
    column = {q: j for j, q in enumerate(str(q) for q in question_ids)}
    missing = [q for q in bank if q not in column]
    extra = sorted(set(column) - set(bank))
    if missing or extra:
        parts = ([f"{len(missing)} id(s) not in the history ({shown(missing)})"] if missing else []) + (
            [f"{len(extra)} history id(s) not in the session's bank ({shown(extra)})"] if extra else [])
        raise ValueError(f"{where}: the session's bank of {len(bank)} questions is not the history's "
                         f"{len(column)}: {'; '.join(parts)}.")
    row = np.full(len(column), np.nan)
    for index, outcome in state["answers"]:
        row[column[bank[index]]] = outcome
    n_answers = int((~np.isnan(row)).sum())
    if n_answers == 0:
        raise ValueError(f"{where}: the session holds no answer yet; nothing to add.")
    return row, {"kind": "session", "path": str(where.resolve()), "sha256": file_sha256(store.state_path),
                 "n_answers": n_answers, "complete": bool(session.done), "stop_reason": session.stop_reason}


def add_sessions_to_history(history, session_dirs, *, names=None, replace=False, partial=False, out=None,
                            allow_unchecked=False):
    """Append each session's answers to a history file, as a row under its model's name (with a ``sources`` entry);
    every input is checked before the file is replaced atomically.

    Parameters
    ----------
    history : str or os.PathLike
        A history file (:func:`~faqstats.save_history`) or an ``.npz`` with ``models`` and ``question_ids``.
    session_dirs : sequence of str or os.PathLike
        Session directories whose bank is the history's questions.
    names : sequence of str, optional
        The model of each session, in order; default: each session directory's name.
    replace, partial : bool, default=False
        Replace the row of a model already in the history; add a session that is not done (its answers so far).
    out : str or os.PathLike, optional
        Write the grown history there instead of over ``history``.
    allow_unchecked : bool, default=False
        Read sessions written before faqstats stored checksums.

    Returns
    -------
    pathlib.Path

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import faqstats as fq
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> path = fq.save_history(tmp / "h.npz", [[1, 0, 1, 0], [1, 1, 0, 0]], ["m1", "m2"], ["a", "b", "c", "d"])
    >>> session = fq.EvaluationSession(None, ["a", "b", "c", "d"], sampler=fq.UniformSampler(replace=False),
    ...                                budget=2, random_state=0, directory=tmp / "m3")
    >>> session.record(session.next_questions(2).ids, [1, 1])
    >>> fq.load_history(add_sessions_to_history(path, [tmp / "m3"]))[1]
    ['m1', 'm2', 'm3']
    """
    path, (outcomes, models, ids, metadata) = _open_growing(history)
    dirs = [Path(os.fspath(d)) for d in ([session_dirs] if isinstance(session_dirs, (str, os.PathLike))
                                         else session_dirs)]
    if not dirs:
        raise ValueError("no session directory given.")
    if names is None:
        names = [d.resolve().name for d in dirs]
    elif isinstance(names, str) or len(names) != len(dirs):
        raise ValueError(f"names must give one model name per session ({len(dirs)}), got {names!r}.")
    names = [str(n) for n in names]
    seen_dirs = {}
    for d in dirs:
        first = seen_dirs.setdefault(d.resolve(), d)
        if first is not d:
            raise ValueError(f"session {d} is given twice{'' if str(first) == str(d) else f' (also as {first})'}.")
    _check_names(path, names, models, replace, [f"session {d}" for d in dirs])
    rows, sources = zip(*(_session_row(d, ids, partial, allow_unchecked) for d in dirs))
    sources = [{"model": name, **source, "added_utc": utc_now()} for name, source in zip(names, sources)]
    return _grow(path, out, outcomes, models, ids, metadata, names, rows, sources)


def add_rows_to_history(history, outcomes, models, question_ids, *, replace=False, out=None, source=None):
    """Append full rows (other models' runs: harness output, a table) to a history file, questions matched by id
    (NaN where a row lacks one).

    Parameters
    ----------
    history : str or os.PathLike
        As in :func:`add_sessions_to_history`.
    outcomes : array-like of shape (n_models, n_questions)
        The rows to add, in [0, 1], NaN where not observed.
    models : sequence of str
        A unique name per row.
    question_ids : sequence of str
    replace, out
        As in :func:`add_sessions_to_history`.
    source : dict, optional
        Where the rows come from (e.g. ``{"kind": "lm-eval"}``), stored with each row's ``sources`` entry.

    Returns
    -------
    pathlib.Path

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import faqstats as fq
    >>> path = fq.save_history(pathlib.Path(tempfile.mkdtemp()) / "h.npz", [[1, 0, 1]], ["m1"], ["t/0", "t/1", "u/0"])
    >>> _ = add_rows_to_history(path, [[0, 1]], ["m2"], ["t/1", "t/0"], source={"kind": "lm-eval"})
    >>> fq.load_history(path)[0][1].tolist()
    [1.0, 0.0, nan]
    """
    path, (current, names, ids, metadata) = _open_growing(history)
    given = np.array(outcomes, dtype=np.float64)
    new_models = [str(m) for m in models]
    new_ids = [str(q) for q in question_ids]
    if given.ndim != 2 or given.shape != (len(new_models), len(new_ids)):
        raise ValueError(f"outcomes must be a models x questions matrix of shape ({len(new_models)}, "
                         f"{len(new_ids)}), got {given.shape}.")
    observed = given[~np.isnan(given)]
    if not np.all((observed >= 0) & (observed <= 1)):
        raise ValueError("outcomes must lie in [0, 1] (NaN: not observed).")
    column = {q: j for j, q in enumerate(ids)}
    unknown = [q for q in new_ids if q not in column]
    if unknown:
        raise ValueError(f"{len(unknown)} question id(s) of the rows are not questions of {path}: {shown(unknown)}.")
    if len(set(new_ids)) != len(new_ids):
        raise ValueError("the rows' question ids must be unique.")
    _check_names(path, new_models, names, replace, [f"row {i}" for i in range(len(new_models))])
    rows, sources = [], []
    for name, values in zip(new_models, given):
        row = np.full(len(ids), np.nan)
        row[[column[q] for q in new_ids]] = values
        n_answers = int((~np.isnan(row)).sum())
        if n_answers == 0:
            raise ValueError(f"the row of model {name!r} has no outcome; nothing to add.")
        rows.append(row)
        sources.append({"model": name, **(source or {"kind": "rows"}), "sha256": array_sha256(row),
                        "n_answers": n_answers, "complete": True, "added_utc": utc_now()})
    return _grow(path, out, current, names, ids, metadata, new_models, rows, sources)


def _open_growing(history):
    """``(path, load_history(path))`` of a history that can grow: there, with its models' names."""
    path = npz_path(history)
    if not path.exists():
        raise FileNotFoundError(f"No history file at {path} (write one with save_history or 'faqstats history "
                                "from-table').")
    loaded = load_history(path)
    if loaded[1] is None:
        raise ValueError(f"{path} has no 'models' array naming its rows: a history that grows needs the models' "
                         "names (to refuse one added twice); save it with save_history(..., models=...).")
    return path, loaded


def _check_names(path, names, models, replace, where):
    """Refuse an empty name, a name given twice, or one already in the history (without ``replace``)."""
    seen = {}
    for name, at in zip(names, where):
        if not name.strip():
            raise ValueError(f"{at}: the model name must not be empty.")
        if name in seen:
            raise ValueError(f"model {name!r} is given twice ({seen[name]} and {at}); add one row per model.")
        seen[name] = at
    present = [n for n in names if n in models]
    if present and not replace:
        raise ValueError(f"{path} already has a row for model {present[0]!r}; pass replace=True (--replace) to "
                         "replace it.")


def _grow(path, out, outcomes, models, ids, metadata, names, rows, sources):
    """The history with ``rows`` under ``names`` (replacing rows of those names), written atomically."""
    models, outcomes = list(models), outcomes.copy()
    kept = [s for s in metadata["sources"] if not (isinstance(s, dict) and s.get("model") in names)]
    for name, row in zip(names, rows):
        if name in models:
            outcomes[models.index(name)] = row
        else:
            models.append(name)
            outcomes = np.vstack([outcomes, row[None]])
    return save_history(path if out is None else out, outcomes, models, ids, arrays=metadata["arrays"],
                        sources=kept + sources, created_utc=metadata["created_utc"])
