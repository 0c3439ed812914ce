"""inspect-ai: eval logs as a history, ``--sample-id`` for a session's questions.

A question id is ``"<task>/<sample id>"``; its value is the scorer's, mapped by :data:`DEFAULT_VALUE_MAP`
and averaged over epochs, NaN when errored or unscored (docs/tutorials/inspect_ai.md).
"""

from collections.abc import Mapping

from ._common import (HarnessRecords, id_sort_key, as_score, check_question_id_list, expand_paths, make_question_id,
                      split_question_id, write_arg)
from .inspect_log import inspect_reader, read_log

__all__ = ["read_inspect_logs", "read_inspect_outcomes", "read_inspect_groups", "read_inspect_clusters",
           "read_inspect_costs", "inspect_sample_id_arg", "DEFAULT_VALUE_MAP"]

DEFAULT_VALUE_MAP = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
"""inspect's letter scores (CORRECT, INCORRECT, PARTIAL, NOANSWER) as numbers; a ``value_map`` merges over them.

Examples
--------
>>> [DEFAULT_VALUE_MAP[letter] for letter in "CIPN"]
[1.0, 0.0, 0.5, 0.0]
"""

# -- values and collection -------------------------------------------------------------------
def _to_float(value, value_map, where):
    if callable(value_map):
        value = value_map(value)
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool) and value in value_map:
        value = value_map[value]
    if isinstance(value, str):
        raise ValueError(
            f"{where}: score value {value!r} has no numeric meaning; map it with value_map={{{value!r}: ...}}."
        )
    if isinstance(value, (dict, list)):
        raise ValueError(
            f"{where}: score value {value!r} is a {type(value).__name__}; pass value_map as a function that "
            "picks a number from it."
        )
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
    model_names : list of str
        In the order first seen.
    question_ids : list of str
        Sorted by task then sample id.

    Examples
    --------
    >>> import json, pathlib, tempfile
    >>> from faqstats.integrations import read_inspect_logs
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
        The values, in the order of ``question_ids``.

    Examples
    --------
    >>> import json, pathlib, tempfile
    >>> from faqstats.integrations import read_inspect_outcomes
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
        Log files or directories, as in :func:`read_inspect_logs`.
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
    >>> from faqstats.integrations import read_inspect_groups
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
        Log files or directories, as in :func:`read_inspect_logs`.
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
    >>> from faqstats.integrations import read_inspect_clusters
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
        Log files or directories, as in :func:`read_inspect_logs`.
    tokens : {"total", "input", "output"}, default="total"
        ``total_tokens`` (else input + output), or the input or output tokens, over every model called.
    reader : {"auto", "inspect", "builtin"}, default="auto"
        As in :func:`read_inspect_logs`.

    Returns
    -------
    dict
        ``{"<task>/<sample id>": cost}``: one epoch's tokens, averaged over epochs and then models;
        samples without ``model_usage`` are left out.

    Examples
    --------
    >>> import json, pathlib, tempfile
    >>> from faqstats.integrations import read_inspect_costs
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


def _escape_glob(sample_id):
    # inspect matches --sample-id entries with fnmatch: make *, ? and [ literal
    return "".join(f"[{c}]" if c in "*?[" else c for c in sample_id)


def inspect_sample_id_arg(question_ids, path=None, *, task_prefix=True):
    """The ``--sample-id`` value for the questions a session asks.

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
        Comma-separated ids, glob characters ``*?[`` escaped.

    Examples
    --------
    >>> from faqstats.integrations import inspect_sample_id_arg
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
    value = ",".join(f"{task}:{_escape_glob(s)}" if prefix else _escape_glob(s) for task, s in pairs)
    write_arg(path, value)
    return value
