"""Helpers shared by the harness readers: assembling a history and checking ids."""

import math
import numbers
import os
import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np

__all__ = ["HarnessRecords", "check_question_id_list", "make_question_id", "split_question_id", "task_groups"]


def id_sort_key(question_id):
    """Sort by task, then sample id, numerically when it is an integer (2 before 10, ``007`` before ``7``)."""
    task, sample = split_question_id(question_id)
    return (task, 0, int(sample), sample) if sample.isdigit() else (task, 1, 0, sample)


def make_question_id(task, sample):
    """``"<task>/<sample id>"``, the sample id's ``%`` and ``/`` percent-encoded (it splits back at the last slash)."""
    return f"{task}/{str(sample).replace('%', '%25').replace('/', '%2F')}"


def split_question_id(question_id, name="question_ids"):
    """``"<task>/<sample id>"`` -> ``(task, sample id)``, the inverse of :func:`make_question_id`."""
    if not isinstance(question_id, str):
        raise TypeError(f"{name} must hold strings '<task>/<id>', got {question_id!r} ({type(question_id).__name__}).")
    task, sep, sample = question_id.rpartition("/")
    if not sep or not task or not sample:
        raise ValueError(f"{name} must look like '<task>/<id>', got {question_id!r}.")
    return task, sample.replace("%2F", "/").replace("%25", "%")


def task_groups(question_ids):
    """The task of each harness question id ``"<task>/<sample id>"``, as group labels (for ``groups=``).

    Parameters
    ----------
    question_ids : sequence of str
        Ids ``"<task>/<sample id>"``.

    Returns
    -------
    list of str

    Examples
    --------
    >>> task_groups(["arith/1", "words/w-fig", "openai/humaneval/HumanEval%2F0"])
    ['arith', 'words', 'openai/humaneval']
    """
    if isinstance(question_ids, (str, bytes)):
        raise TypeError("question_ids must be a sequence of question ids, not a single string.")
    return [split_question_id(qid)[0] for qid in question_ids]


def check_question_id_list(question_ids, name="question_ids", empty=None):
    """A list of unique ``"<task>/<id>"`` strings; when ``empty`` says why, not an empty one."""
    if isinstance(question_ids, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of question ids, not a single {type(question_ids).__name__}.")
    ids = list(question_ids)
    for qid in ids:
        split_question_id(qid, name)
    if len(set(ids)) != len(ids):
        qid = next(q for k, q in enumerate(ids) if q in ids[:k])
        raise ValueError(f"{name} must be unique; {qid!r} appears more than once.")
    if empty is not None and not ids:
        raise ValueError(f"{name} is empty; {empty}.")
    return ids


def as_score(value, where):
    """A harness score as a float in [0, 1]; bools become 0/1."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, numbers.Real):
        value = float(value)
        if math.isfinite(value) and 0.0 <= value <= 1.0:
            return value
    raise ValueError(f"{where}: score {value!r} is not a number in [0, 1]; faqstats needs 0/1 outcomes or graded "
                     "scores in [0, 1] (use value_map or pick another metric/scorer).")


def expand_paths(paths, name, expand):
    """``expand(path, name)``'s tuples for each existing path (one or a sequence), led by the model name a mapping
    ``{model: paths}`` gives."""
    if isinstance(paths, Mapping):
        return [(str(model), *rest) for model, sub in paths.items() for _, *rest in expand_paths(sub, name, expand)]
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not paths:
        raise ValueError(f"{name} is empty.")
    for p in paths:
        if not isinstance(p, (str, os.PathLike)):
            raise TypeError(f"{name} must be paths (str or os.PathLike), got {p!r} ({type(p).__name__}).")
        if not Path(p).exists():
            raise FileNotFoundError(f"{name}: {Path(p)} does not exist.")
    return [item for path in map(Path, paths) for item in expand(path, name)]


def write_arg(path, text):
    """Write ``text`` (a harness argument) and a newline to ``path``, unless it is None."""
    if path is not None:
        Path(os.fspath(path)).write_text(text + "\n", encoding="utf-8")


class HarnessRecords:
    """Scores by model and question id: a later stamp replaces an earlier one, equal stamps (epochs) average."""

    def __init__(self):
        self._scores = {}  # model -> qid -> (stamp, [values])
        self.models = []  # first-seen order
        self._merged = {}  # model -> stamps of runs that scored a question twice
        self.ignored = set()  # ids of scored samples skipped because they were not asked

    def add(self, model, question_id, value, stamp=""):
        if model not in self._scores:
            self.models.append(model)
        per_model = self._scores.setdefault(model, {})
        old = per_model.get(question_id)
        if old is not None and stamp != old[0]:
            self._merged.setdefault(model, set()).update((stamp, old[0]))
        if old is None or stamp > old[0]:
            per_model[question_id] = (stamp, [value])
        elif stamp == old[0]:
            old[1].append(value)

    def _warn_merged(self):
        for model, stamps in self._merged.items():
            warnings.warn(f"model {model!r}: {len(stamps)} runs ({', '.join(sorted(map(repr, stamps)))}) scored the "
                          "same questions; the latest run's scores are used. To keep the runs apart, read them as "
                          "separate models (a mapping {name: path}).", UserWarning, stacklevel=4)

    def value(self, model, question_id):
        entry = self._scores.get(model, {}).get(question_id)
        return np.nan if entry is None else float(np.mean(entry[1]))

    def history(self, empty_message):
        """``(matrix of shape (n_models, n_questions), model names, question ids)``; NaN where unscored."""
        if not self.models:
            raise ValueError(empty_message)
        self._warn_merged()
        ids = sorted({qid for per_model in self._scores.values() for qid in per_model}, key=id_sort_key)
        return np.array([[self.value(m, q) for q in ids] for m in self.models], dtype=float), list(self.models), ids

    def outcomes(self, question_ids, source):
        """One model's scores of ``question_ids`` (all present) and the sorted ids of scored samples not asked."""
        if len(self.models) > 1:
            found = ", ".join(map(repr, self.models))
            raise ValueError(f"{source} must hold the run of exactly one model; found models {found}.")
        model = self.models[0] if self.models else None  # none: every id is missing
        self._warn_merged()
        values = np.array([self.value(model, qid) for qid in question_ids], dtype=float)
        missing = [qid for qid, v in zip(question_ids, values) if np.isnan(v)]
        if len(missing) == len(question_ids) and model is None and not self.ignored:  # nothing at all
            tasks = sorted({split_question_id(qid)[0] for qid in question_ids})
            raise ValueError(f"{source} has no scored sample of the tasks asked ({', '.join(tasks)}).")
        if missing:
            shown = ", ".join(map(repr, missing[:5])) + (" ..." if len(missing) > 5 else "")
            raise ValueError(f"{source} has no score for {len(missing)} of the asked question ids: {shown}.")
        return values, sorted(self.ignored, key=id_sort_key)

    def mean_costs(self):
        """``{question id: cost}``: each model's latest run, averaged over the models."""
        with warnings.catch_warnings():  # several runs of a model: the latest's, as the scores
            warnings.simplefilter("ignore", UserWarning)
            matrix, _, ids = self.history("")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            costs = np.nanmean(matrix, axis=0)
        return {qid: float(c) for qid, c in zip(ids, costs)}
