"""Per-question values from small files (CSV/TSV of ``question_id,VALUE`` rows, or JSON): question ids,
group or cluster labels, costs, outcomes, as the command line reads them. A bad file is refused by
``file:line`` and question id.
"""

import csv
import io
import json
import sys
import warnings
from pathlib import Path

import numpy as np

__all__ = ["read_outcome_pairs", "read_question_costs", "read_question_ids", "read_question_labels",
           "read_question_values"]


def _shown(ids):
    return ", ".join(map(repr, ids[:5])) + (" ..." if len(ids) > 5 else "")


def read_question_ids(path):
    """Question ids from a text file (one per line) or a ``.json`` file (a list).

    Parameters
    ----------
    path : str or path-like
        A text file with one id a line, or a ``.json`` list of ids.

    Returns
    -------
    list of str

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "ids.txt"
    >>> _ = path.write_text("arc/1\\narc/2\\n\\nmmlu/7\\n")
    >>> read_question_ids(path)
    ['arc/1', 'arc/2', 'mmlu/7']
    """
    text = Path(path).read_text(encoding="utf-8")
    if Path(path).suffix == ".json":
        ids = json.loads(text)
        if not isinstance(ids, list):
            raise ValueError(f"{path} must hold a JSON list of question ids.")
        return [str(q) for q in ids]
    return [line.strip() for line in text.splitlines() if line.strip()]


def _csv_pairs(path, text, known, kind):
    """``[(where, id, value)]`` of a CSV/TSV file: ``id,value`` rows, or under a header naming the ``kind`` column."""
    dialect = "excel-tab" if Path(path).suffix.lower() == ".tsv" else "excel"
    rows = [(n, row) for n, row in enumerate(csv.reader(io.StringIO(text), dialect), start=1)
            if any(cell.strip() for cell in row)]
    if not rows:
        raise ValueError(f"{path} is empty: expected rows 'question_id,{kind}'.")
    column = 1
    first = [c.strip() for c in rows[0][1]]
    if first[0] not in known:  # a header: the column named after the kind, else the second one
        named = [k for k, c in enumerate(first) if c.lower() in (kind, kind + "s")]
        if named:
            column = named[0]
        elif len(first) != 2:
            raise ValueError(f"{path}: its header {first} has no {kind!r} column (and more than two columns).")
        rows = rows[1:]
    elif len(first) != 2:
        raise ValueError(f"{path}:{rows[0][0]}: without a header a row is 'question_id,{kind}', got {len(first)} "
                         f"cells; add a header naming the {kind!r} column.")
    pairs = []
    for n, row in rows:
        if len(row) <= column:
            raise ValueError(f"{path}:{n}: expected a {kind} in column {column + 1}, got {row}.")
        pairs.append((f"{path}:{n}", row[0].strip(), row[column].strip()))
    return pairs


def read_question_values(path, question_ids, kind):
    """A raw value for every question of a bank, each with where the file gives it (``"FILE:LINE"``).

    Parameters
    ----------
    path : str or path-like
        A ``.csv`` (``.tsv``) of ``question_id,VALUE`` rows, optionally under a header naming a
        ``kind`` column; or a ``.json`` object ``{question id: VALUE}`` or list of ``[id, VALUE]`` pairs.
    question_ids : sequence
        The bank's question ids; every one must have a value (other ids are ignored with a warning).
    kind : str
        What the values are (``"group"``, ``"cost"``, ...): the header's column, and the errors' word.

    Returns
    -------
    dict
        ``{question id: (where, value)}``.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "groups.csv"
    >>> _ = path.write_text("question_id,task,group\\nq1,arc,easy\\nq2,arc,hard\\n")
    >>> read_question_values(path, ["q1", "q2"], "group")["q2"]  # doctest: +ELLIPSIS
    ('...groups.csv:3', 'hard')
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text (expected a .csv or .json file).") from None
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}.") from None
    known = {str(q) for q in question_ids}
    if Path(path).suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise ValueError(f"{path} is not valid JSON ({exc}).") from None
        if isinstance(data, dict):
            pairs = [(f"{path}", str(q), v) for q, v in data.items()]
        elif isinstance(data, list) and all(isinstance(x, list) and len(x) == 2 for x in data):
            pairs = [(f"{path} entry {k}", str(x[0]), x[1]) for k, x in enumerate(data)]
        else:
            raise ValueError(f"{path} must hold a JSON object {{question id: {kind}}} or a list of [id, {kind}] pairs.")
    else:
        pairs = _csv_pairs(path, text, known, kind)
    values, extra = {}, []
    for where, qid, value in pairs:
        if qid in values:
            raise ValueError(f"{where}: question id {qid!r} appears more than once.")
        values[qid] = (where, value)
        if qid not in known:
            extra.append(qid)
    missing = [str(q) for q in question_ids if str(q) not in values]
    if missing:
        raise ValueError(f"{path} has no {kind} for {len(missing)} of the bank's {len(question_ids)} question ids: "
                         f"{_shown(missing)}.")
    if extra:
        warnings.warn(f"{path}: {len(extra)} id(s) that are not questions of the session's bank are ignored: "
                      f"{_shown(extra)}.", UserWarning, stacklevel=2)
    return values


def read_question_labels(path, question_ids, kind="group"):
    """A label (a group, a cluster) for every question of a bank, from a file.

    Parameters
    ----------
    path : str or path-like
        The file, as :func:`read_question_values` reads it.
    question_ids : sequence
        The bank's question ids, in the bank's order.
    kind : str, default "group"
        ``"group"`` or ``"cluster"``: the header's column, and the errors' word.

    Returns
    -------
    list of str
        The label of each of ``question_ids`` (a non-empty string or an integer in the file).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "clusters.json"
    >>> _ = path.write_text('{"q1": "passage-a", "q2": "passage-a", "q3": 7}')
    >>> read_question_labels(path, ["q1", "q2", "q3"], "cluster")
    ['passage-a', 'passage-a', '7']
    """
    values = read_question_values(path, question_ids, kind)
    labels = []
    for qid in question_ids:
        where, value = values[str(qid)]
        if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
            raise ValueError(f"{where}: the {kind} of question id {qid!r} must be a non-empty string or an "
                             f"integer, got {value!r}.")
        labels.append(str(value))
    return labels


def read_question_costs(path, question_ids):
    """A positive cost (tokens, dollars) for every question of a bank, from a file.

    Parameters
    ----------
    path : str or path-like
        The file, as :func:`read_question_values` reads it.
    question_ids : sequence
        The bank's question ids, in the bank's order.

    Returns
    -------
    list of float

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "costs.tsv"
    >>> _ = path.write_text("question_id\\tcost\\nq1\\t120\\nq2\\t35.5\\n")
    >>> read_question_costs(path, ["q1", "q2"])
    [120.0, 35.5]
    """
    values = read_question_values(path, question_ids, "cost")
    costs = []
    for qid in question_ids:
        where, value = values[str(qid)]
        try:
            if isinstance(value, bool):
                raise TypeError
            cost = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: the cost of question id {qid!r} is not a number, got {value!r}.") from None
        if not (np.isfinite(cost) and cost > 0):
            raise ValueError(f"{where}: the cost of question id {qid!r} must be finite and positive, got {value!r}.")
        costs.append(cost)
    return costs


def read_outcome_pairs(path):
    """``(question id, outcome)`` pairs from a JSON file, or from standard input.

    Parameters
    ----------
    path : str or path-like
        A ``.json`` file (``"-"``: standard input) of ``{id: outcome}``, ``[[id, outcome], ...]`` or
        ``[{"id": ..., "outcome": ...}, ...]`` (or ``"value"``).

    Returns
    -------
    list of tuple
        In the file's order, unchecked.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "answers.json"
    >>> _ = path.write_text('[{"id": "arc/1", "outcome": 1}, ["arc/2", 0.5]]')
    >>> read_outcome_pairs(path)
    [('arc/1', 1), ('arc/2', 0.5)]
    """
    data = json.loads(sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8"))
    if isinstance(data, dict):
        return list(data.items())
    if isinstance(data, list):
        pairs = []
        for item in data:
            if isinstance(item, dict) and "id" in item and ("outcome" in item or "value" in item):
                pairs.append((item["id"], item.get("outcome", item.get("value"))))
            elif isinstance(item, list) and len(item) == 2:
                pairs.append(tuple(item))
            else:
                raise ValueError(f"{path}: each entry must be [id, outcome] or "
                                 f"{{\"id\": ..., \"outcome\": ...}}, got {item!r}.")
        return pairs
    raise ValueError(f"{path} must hold a JSON object {{id: outcome}} or a list of [id, outcome] pairs.")
