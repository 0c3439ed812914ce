"""The command line's two harnesses (``"lm-eval"``, ``"inspect"``) behind one interface: read earlier runs as a
history, write a round's harness arguments, read a round's outcomes (:mod:`.lm_eval` or else :mod:`.inspect_ai`)."""

from inspect import signature

from . import inspect_ai, lm_eval
from ._common import check_question_id_list, split_question_id


def _defaults(reader, names):
    return {name: signature(reader).parameters[name].default for name in names}


OPTIONS = {"lm-eval": _defaults(lm_eval.read_lm_eval_samples, ("metric", "filter")),
           "inspect": _defaults(inspect_ai.read_inspect_logs, ("scorer",))}
"""The reader options each harness takes (one value, or one per task), with their defaults."""


class PerTask(dict):
    """A reader option given per task (``{task: value}``) with ``default`` for every other task."""

    def __init__(self, named, default):
        super().__init__(named)
        self.default = default

    def __contains__(self, task):
        return True

    def __missing__(self, task):
        return self.default

    def get(self, task, default=None):
        return self[task]


def read_history(harness, paths, **options):
    """``(matrix, model names, question ids)`` of earlier runs, read with ``options``."""
    read = lm_eval.read_lm_eval_samples if harness == "lm-eval" else inspect_ai.read_inspect_logs
    return read(paths, **options)


def round_arguments(harness, question_ids):
    """The harness arguments that run ``question_ids``: ``{"tasks", "samples"}`` or ``{"tasks", "sample_id"}``."""
    ids = check_question_id_list(question_ids, "the session's question ids", empty="nothing is pending")
    if harness == "lm-eval":
        samples = lm_eval.write_lm_eval_samples_arg(ids)
        return {"tasks": list(samples), "samples": samples}
    tasks = list(dict.fromkeys(split_question_id(qid)[0] for qid in ids))
    return {"tasks": tasks, "sample_id": inspect_ai.inspect_sample_id_arg(ids, task_prefix=True)}


def read_round(harness, paths, question_ids, **options):
    """``(outcomes of question_ids, ids of the other scored samples read past)`` from one model's output."""
    ids = check_question_id_list(question_ids, "the session's question ids", empty="nothing is pending")
    read = lm_eval.read_lm_eval_round if harness == "lm-eval" else inspect_ai.read_inspect_round
    return read(paths, ids, **options)
