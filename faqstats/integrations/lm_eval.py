"""EleutherAI lm-evaluation-harness: its logged samples as a history, ``--samples`` for a session.

``lm_eval ... --output_path OUT --log_samples`` writes ``OUT/<model>/samples_<task>_<timestamp>.jsonl``,
read with :mod:`json` only; a question id is ``"<task>/<doc_id>"`` (docs/tutorials/lm_eval.md).
"""

import json
import math
import re
from collections.abc import Mapping

import numpy as np

from ._common import (HarnessRecords, id_sort_key, as_score, check_question_id_list, expand_paths, make_question_id,
                      split_question_id, write_arg)

__all__ = ["read_lm_eval_costs", "read_lm_eval_groups", "read_lm_eval_samples", "read_lm_eval_outcomes",
           "write_lm_eval_samples_arg"]

# samples_<task>_<date_id>.jsonl with date_id = datetime.now().isoformat().replace(":", "-")
_SAMPLES_RE = re.compile(r"^samples_(?P<task>.+?)(?:_(?P<stamp>\d{4}-\d{2}-\d{2}T[\d\-.]+))?\.jsonl$")
_KEYS = ("doc_id", "doc_hash")
_FIELDS = {"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics"}


def _samples_files(path, name):
    """(model name, task, timestamp, file) for every samples file at ``path``."""
    files = sorted(path.rglob("samples_*.jsonl")) if path.is_dir() else [path]
    odd = [f for f in files if not f.is_file()]
    if odd:  # a directory (or a device) named like a samples file: say so rather than read past it
        raise ValueError(f"{name}: {odd[0]} is named like an lm-eval samples file but is not a regular file.")
    if path.is_dir() and not files:
        raise ValueError(f"{name}: no lm-eval samples files (samples_<task>_<timestamp>.jsonl) under {path}.")
    found = []
    for f in files:
        match = _SAMPLES_RE.match(f.name)
        if match is None:
            raise ValueError(f"{name}: {f} is not named like an lm-eval samples file "
                             "(samples_<task>_<timestamp>.jsonl).")
        # the model is the directory lm-eval made for it under --output_path
        found.append((f.parent.name, match["task"], match["stamp"] or "", f))
    return found


def _per_task(value, task, name):
    if isinstance(value, Mapping):
        if task not in value:
            raise ValueError(f"{name} has no entry for task {task!r} (it has {sorted(value)}).")
        return value[task]
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string or a mapping task -> string, got {type(value).__name__}.")
    return value


def _check_key(key):
    if key not in _KEYS:
        raise ValueError(f"key must be 'doc_id' or 'doc_hash', got {key!r}.")


def _task_set(task):
    return None if task is None else {task} if isinstance(task, str) else set(task)


def _task_files(paths_or_dirs, task):
    """:func:`_samples_files` of the tasks ``task`` names (all when None)."""
    tasks = _task_set(task)
    return [(model, name, stamp, path) for model, name, stamp, path in
            expand_paths(paths_or_dirs, "paths_or_dirs", _samples_files) if tasks is None or name in tasks]


def _records(path):
    """``(where, line number, parsed JSON)`` of a samples file's non-blank lines (the file must be UTF-8)."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_no = raw[: exc.start].count(b"\n") + 1
        raise ValueError(f"{path}:{line_no} is not UTF-8 text (byte {exc.start}); an lm-eval samples file is "
                         "JSON lines.") from None
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise ValueError(f"{path} is empty: an lm-eval samples file has one JSON line per document.")
    for line_no, line in lines:
        try:
            yield f"{path}:{line_no}", line_no, json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise ValueError(f"{path}:{line_no} is not valid JSON ({exc}).") from None


def _read_file(records, model, task, stamp, path, metric, filter, key, wanted, results):
    filters, metrics, n_used, seen = set(), set(), 0, {}
    lacking, scores = [], []  # lines of the filter without the metric; every score of the filter
    for where, line_no, rec in _records(path):
        if not isinstance(rec, dict):
            raise ValueError(f"{where} is a JSON {type(rec).__name__}, not an object (a line of an lm-eval samples "
                             "file).")
        rec_filter = rec.get("filter", "none")
        if not isinstance(rec_filter, str):
            raise ValueError(f"{where}: 'filter' must be a string, got {rec_filter!r}.")
        filters.add(rec_filter)
        if rec_filter != filter:
            continue
        # older lm-eval lines have no "metrics" list: offer the other numeric fields
        names = rec.get("metrics")
        if names is not None and not (isinstance(names, list) and all(isinstance(m, str) for m in names)):
            raise ValueError(f"{where}: 'metrics' must be a list of names, got {names!r}.")
        metrics.update(names or (k for k, v in rec.items() if k not in _FIELDS and isinstance(v, (int, float))))
        if metric not in rec:
            lacking.append(line_no)
            continue
        if key not in rec:
            raise ValueError(f"{where} has no {key!r} field; use key='doc_id' or key='doc_hash'.")
        doc = rec[key]
        if not (isinstance(doc, str) and doc if key == "doc_hash" else
                isinstance(doc, int) and not isinstance(doc, bool) and doc >= 0):
            kind = "a non-empty string" if key == "doc_hash" else "a non-negative integer"
            raise ValueError(f"{where}: {key!r} must be {kind}, got {doc!r}.")
        if doc in seen:  # one line per document and filter: a second one is damage, not a re-run
            raise ValueError(f"{where}: {key} {doc!r} appears again (line {seen[doc]}) with filter {filter!r}.")
        seen[doc] = line_no
        score = as_score(rec[metric], f"{where} metric {metric!r}")
        scores.append(score)
        qid = make_question_id(task, doc)
        if wanted is not None and qid not in wanted:
            records.ignored.add(qid)
            continue
        records.add(model, qid, score, stamp)
        n_used += 1
    if lacking and scores:  # some lines have the metric: one without it is damage, not "not observed"
        raise ValueError(f"{path}:{lacking[0]} has no {metric!r} score, though {len(scores)} other line(s) with "
                         f"filter {filter!r} have one ({len(lacking)} such line(s); damaged or edited file?).")
    if scores:
        _check_against_results(path, task, stamp, metric, filter, scores, seen if key == "doc_id" else None,
                               results)
    if filter not in filters:
        raise ValueError(f"filter {filter!r} is absent from {path} (task {task!r}); it has filters {sorted(filters)}. "
                         "Pass filter=... (or a mapping task -> filter).")
    if n_used == 0 and (wanted is None or metric not in metrics):
        raise ValueError(f"metric {metric!r} is absent from {path} (task {task!r}, filter {filter!r}); it has "
                         f"metrics {sorted(metrics)}. Pass metric=... (or a mapping task -> metric).")


def _check_against_results(path, task, stamp, metric, filter, scores, doc_ids, results):
    """Hold a samples file against lm-eval's ``results_<stamp>.json`` beside it, if any: its document count,
    doc ids and (a mean-aggregated metric) mean, so that damage fails loudly. ``results``: parsed files by path."""
    results_path = path.with_name(f"results_{stamp}.json")
    if not stamp or not results_path.is_file():
        return
    try:
        if results_path not in results:
            results[results_path] = json.loads(results_path.read_bytes())
        doc = results[results_path]
        counted = doc["n-samples"][task]["effective"]
        n_docs = doc["n-samples"][task]["original"]
        metric_list = doc["configs"][task].get("metric_list") or []
        reported = doc["results"][task].get(f"{metric},{filter}")
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        raise ValueError(f"{results_path} is not the lm-eval results file of task {task!r} (damaged?); move it "
                         f"away to read {path.name} on its own.") from None
    if counted != len(scores):
        raise ValueError(f"{path} has {len(scores)} documents with filter {filter!r} but {results_path.name} counted "
                         f"{counted!r}: a damaged file?")
    outside = [d for d in (doc_ids or ()) if isinstance(n_docs, int) and d >= n_docs]
    if outside:
        raise ValueError(f"{path}:{doc_ids[outside[0]]}: doc_id {outside[0]} is past the {n_docs} documents "
                         f"{results_path.name} counts for task {task!r}: a damaged file?")
    by_mean = any(isinstance(m, dict) and m.get("metric") == metric and m.get("aggregation") == "mean"
                  for m in metric_list)
    mean = math.fsum(scores) / len(scores)
    if by_mean and isinstance(reported, (int, float)) and not math.isclose(mean, reported, rel_tol=1e-9,
                                                                            abs_tol=1e-12):
        raise ValueError(f"{path}: the mean {metric!r} of its lines ({mean!r}) differs from the {reported!r} in "
                         f"{results_path.name}: a damaged file?")


def _collect(paths, task, metric, filter, key, name, wanted_tasks=None, wanted=None):
    _check_key(key)
    tasks = _task_set(task)
    if wanted_tasks is not None:
        tasks = wanted_tasks if tasks is None else tasks & wanted_tasks
    records = HarnessRecords()
    seen_tasks, results = set(), {}  # results: the runs' results files, parsed once each
    for model, task_name, stamp, path in expand_paths(paths, name, _samples_files):
        seen_tasks.add(task_name)
        if tasks is not None and task_name not in tasks:
            continue
        _read_file(records, model, task_name, stamp, path, _per_task(metric, task_name, "metric"),
                   _per_task(filter, task_name, "filter"), key, wanted, results)
    if tasks is not None and not tasks <= seen_tasks:
        raise ValueError(f"task(s) {sorted(tasks - seen_tasks)} not found in {name}; it has {sorted(seen_tasks)}.")
    return records


def read_lm_eval_samples(paths_or_dirs, *, task=None, metric="acc", filter="none", key="doc_id"):
    """Read lm-eval ``--log_samples`` output into a models x questions history.

    Parameters
    ----------
    paths_or_dirs : path, sequence of paths, or mapping
        ``--output_path`` or model directories, or samples files (the model is the directory's name),
        or a mapping ``{model name: path(s)}``.
    task : str, sequence of str or None, default=None
        Tasks to read; ``None`` reads every task found.
    metric : str or mapping task -> str, default="acc"
        The per-document score to read (``"acc_norm"``, ``"exact_match"``, ...), in [0, 1].
    filter : str or mapping task -> str, default="none"
        The filter whose lines to read (e.g. ``"strict-match"`` of a generation task).
    key : {"doc_id", "doc_hash"}, default="doc_id"
        What identifies a document in the question id ``"<task>/<key>"``.

    Returns
    -------
    matrix : ndarray of shape (n_models, n_questions)
        Scores (of several runs of a task, the latest wins), NaN where a model has no line.
    model_names, question_ids : list of str
        Models in the order first seen; ids sorted by task, then by doc id (numerically).

    Examples
    --------
    >>> import json, pathlib, tempfile
    >>> out = pathlib.Path(tempfile.mkdtemp())
    >>> for model, accs in {"org__small": [1, 0], "org__big": [1, 1, 1]}.items():
    ...     (out / model).mkdir()
    ...     lines = [json.dumps({"doc_id": i, "acc": a}) for i, a in enumerate(accs)]
    ...     _ = (out / model / "samples_arc_2025-01-01T00-00-00.jsonl").write_text("\\n".join(lines))
    >>> read_lm_eval_samples(out)
    (array([[ 1.,  1.,  1.],
           [ 1.,  0., nan]]), ['org__big', 'org__small'], ['arc/0', 'arc/1', 'arc/2'])
    """
    records = _collect(paths_or_dirs, task, metric, filter, key, "paths_or_dirs")
    return records.history(f"No lines with metric {metric!r} and filter {filter!r} in paths_or_dirs.")


def write_lm_eval_samples_arg(question_ids, path=None):
    """The ``--samples`` JSON for the questions a session asks: ``{task: [doc_id, ...]}``.

    Parameters
    ----------
    question_ids : sequence of str
        Ids ``"<task>/<doc_id>"`` with integer doc ids (as read with ``key="doc_id"``).
    path : path or None, default=None
        When given, the JSON is written there, for ``lm_eval ... --samples PATH``.

    Returns
    -------
    dict
        ``{task: sorted doc ids}``.

    Examples
    --------
    >>> write_lm_eval_samples_arg(["arc/10", "arc/2", "gsm8k/7"])
    {'arc': [2, 10], 'gsm8k': [7]}
    """
    ids = check_question_id_list(question_ids, empty="lm-eval would run no document")
    samples = {}
    for qid in ids:
        task, doc = split_question_id(qid)
        if not doc.isdigit():
            raise ValueError(f"question_ids must end in an integer doc_id for --samples, got {qid!r} "
                             "(ids read with key='doc_hash' cannot be sent to lm-eval).")
        samples.setdefault(task, []).append(int(doc))
    samples = {task: sorted(docs) for task, docs in samples.items()}
    write_arg(path, json.dumps(samples))
    return samples


def read_lm_eval_outcomes(path, question_ids, *, metric="acc", filter="none", key="doc_id"):
    """The scores of ``question_ids`` from one model's lm-eval run (e.g. with ``--samples``).

    Parameters
    ----------
    path : path, sequence of paths, or mapping
        The run's ``--output_path`` (one model), the model directory, or its samples files.
    question_ids : sequence of str
        The ids asked; every one must have a score.
    metric, filter, key
        As in :func:`read_lm_eval_samples`.

    Returns
    -------
    ndarray of shape (len(question_ids),)

    Examples
    --------
    >>> import json, pathlib, tempfile
    >>> out = pathlib.Path(tempfile.mkdtemp(), "org__new")
    >>> out.mkdir()
    >>> lines = [json.dumps({"doc_id": i, "acc": a}) for i, a in [(2, 1.0), (10, 0.0)]]
    >>> _ = (out / "samples_arc_2025-01-01T00-00-00.jsonl").write_text("\\n".join(lines))
    >>> read_lm_eval_outcomes(out, ["arc/10", "arc/2"])
    array([0., 1.])
    """
    return read_lm_eval_round(path, question_ids, metric=metric, filter=filter, key=key)[0]


def read_lm_eval_round(path, question_ids, *, metric="acc", filter="none", key="doc_id"):
    """:func:`read_lm_eval_outcomes`'s scores and the ids of the scored lines not asked (read past)."""
    ids = check_question_id_list(question_ids)
    tasks = {split_question_id(qid)[0] for qid in ids}
    records = _collect(path, None, metric, filter, key, "path", wanted_tasks=tasks, wanted=set(ids))
    return records.outcomes(ids, f"path {path}")


# -- groups and costs per question ------------------------------------------------------------
def _strings(arguments):
    """The string arguments of a line's requests (prompt, continuation), not generation settings (a dict)."""
    requests = arguments.values() if isinstance(arguments, Mapping) else arguments
    if not isinstance(requests, (list, type({}.values()))):
        raise TypeError
    for request in requests:
        args = request.values() if isinstance(request, Mapping) else request
        if isinstance(args, str):
            yield args
        elif isinstance(args, (list, type({}.values()))):
            yield from (a for a in args if isinstance(a, str))
        else:
            raise TypeError


def read_lm_eval_costs(paths_or_dirs, *, task=None, key="doc_id", tokenizer=None):
    """A cost per question of lm-eval ``--log_samples`` output: the length of its requests' strings.

    lm-eval logs no token counts: a document costs the length of its ``arguments``, in characters or ``tokenizer``'s.

    Parameters
    ----------
    paths_or_dirs : path, sequence of paths, or mapping
        As in :func:`read_lm_eval_samples` (e.g. the history's runs).
    task, key
        As in :func:`read_lm_eval_samples`.
    tokenizer : callable or None, default=None
        A function from a string to its number of tokens; ``None`` counts characters.

    Returns
    -------
    dict
        ``{"<task>/<doc id>": cost}``, averaged over the models that ran the document.

    Examples
    --------
    >>> import json, pathlib, tempfile
    >>> out = pathlib.Path(tempfile.mkdtemp(), "org__model")
    >>> out.mkdir()
    >>> lines = [json.dumps({"doc_id": i, "arguments": {"gen_args_0": {"arg_0": prompt, "arg_1": " yes"}}})
    ...          for i, prompt in enumerate(["Is 2 even?", "Is the square root of 2 rational?"])]
    >>> _ = (out / "samples_quiz_2025-01-01T00-00-00.jsonl").write_text("\\n".join(lines))
    >>> read_lm_eval_costs(out)
    {'quiz/0': 14.0, 'quiz/1': 37.0}
    """
    _check_key(key)
    count = len if tokenizer is None else tokenizer
    if not callable(count):
        raise TypeError(f"tokenizer must be a function from a string to its number of tokens, got {tokenizer!r}.")
    records = HarnessRecords()
    for model, task_name, stamp, path in _task_files(paths_or_dirs, task):
        seen = set()
        for where, _, rec in _records(path):
            if not isinstance(rec, dict) or key not in rec or "arguments" not in rec:
                raise ValueError(f"{where}: a samples line needs {key!r} and 'arguments' (run lm-eval with "
                                 "--log_samples).")
            doc = rec[key]
            if doc in seen:  # the same document under another filter: the same requests
                continue
            seen.add(doc)
            try:
                texts = list(_strings(rec["arguments"]))
            except TypeError:
                raise ValueError(f"{where}: 'arguments' must map each request to its arguments, got "
                                 f"{str(rec['arguments'])[:200]}.") from None
            n = sum(count(text) for text in texts)
            if isinstance(n, bool) or not isinstance(n, (int, float, np.integer, np.floating)) or not n >= 0:
                raise ValueError(f"{where}: the tokenizer gave {n!r}, not a non-negative number.")
            records.add(model, make_question_id(task_name, doc), float(n), stamp)
    if not records.models:
        raise ValueError("No lm-eval samples lines in paths_or_dirs.")
    return records.mean_costs()


_LEVELS = ("task", "parent", "group")


def _group_subtasks(paths_or_dirs):
    """``{subtask: parent group}`` from the ``group_subtasks`` of the runs' results files."""
    parents = {}
    for _, _, _, samples_path in expand_paths(paths_or_dirs, "paths_or_dirs", _samples_files):
        for results in samples_path.parent.glob("results_*.json"):
            try:
                doc = json.loads(results.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
                raise ValueError(f"{results} is not a readable lm-eval results file ({exc}).") from None
            tree = doc.get("group_subtasks") if isinstance(doc, dict) else None
            if tree is None:
                continue
            if not isinstance(tree, dict) or not all(isinstance(v, list) for v in tree.values()):
                raise ValueError(f"{results}: 'group_subtasks' must map a group to a list of its tasks.")
            for group, subtasks in tree.items():
                for sub in subtasks:
                    if parents.setdefault(sub, group) != group:
                        raise ValueError(f"{results}: task {sub!r} is in groups {parents[sub]!r} and {group!r}.")
    return parents


def read_lm_eval_groups(paths_or_dirs, *, level="task", task=None, key="doc_id"):
    """A group label per question of lm-eval ``--log_samples`` output: its (sub)task or its group.

    The groups are the results files' ``group_subtasks`` (``mmlu`` -> ``mmlu_stem`` -> ``mmlu_anatomy``).

    Parameters
    ----------
    paths_or_dirs : path, sequence of paths, or mapping
        As in :func:`read_lm_eval_samples`, with the runs' ``results_*.json`` next to the samples.
    level : {"task", "parent", "group"}, default="task"
        The subtask of the samples file, the group that lists it, or the outermost group above it
        (a task in no group is its own group).
    task, key
        As in :func:`read_lm_eval_samples`.

    Returns
    -------
    dict
        ``{"<task>/<doc id>": label}``, for ``groups=`` of :class:`~faqstats.EvaluationSession`.

    Examples
    --------
    >>> import json, pathlib, tempfile
    >>> out = pathlib.Path(tempfile.mkdtemp(), "org__model")
    >>> out.mkdir()
    >>> for task in ("mmlu_anatomy", "arc_easy"):
    ...     _ = (out / f"samples_{task}_2025-01-01T00-00-00.jsonl").write_text('{"doc_id": 0}')
    >>> tree = {"mmlu": ["mmlu_stem"], "mmlu_stem": ["mmlu_anatomy"]}
    >>> _ = (out / "results_2025-01-01T00-00-00.json").write_text(json.dumps({"group_subtasks": tree}))
    >>> read_lm_eval_groups(out, level="parent"), read_lm_eval_groups(out, level="group")
    ({'arc_easy/0': 'arc_easy', 'mmlu_anatomy/0': 'mmlu_stem'}, {'arc_easy/0': 'arc_easy', 'mmlu_anatomy/0': 'mmlu'})
    """
    if level not in _LEVELS:
        raise ValueError(f"level must be one of {_LEVELS}, got {level!r}.")
    _check_key(key)
    parents = {} if level == "task" else _group_subtasks(paths_or_dirs)

    def label(name):
        if level == "parent":
            return parents.get(name, name)
        seen = {name}
        while name in parents:  # up to the outermost group
            name = parents[name]
            if name in seen:
                raise ValueError(f"lm-eval 'group_subtasks' has a cycle through {name!r}.")
            seen.add(name)
        return name

    labels = {}
    for _, task_name, _, path in _task_files(paths_or_dirs, task):
        group = label(task_name)
        for where, _, rec in _records(path):
            if not isinstance(rec, dict) or key not in rec:
                raise ValueError(f"{where} has no {key!r} field.")
            labels[make_question_id(task_name, rec[key])] = group
    if not labels:
        raise ValueError("No lm-eval samples lines in paths_or_dirs.")
    return {qid: labels[qid] for qid in sorted(labels, key=id_sort_key)}
