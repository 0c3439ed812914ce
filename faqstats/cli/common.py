"""What the subcommands share: output, notes, the per-question files and the harness readers' options."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import warnings
from pathlib import Path

from ..integrations import read_question_costs, read_question_labels, task_groups
from ..integrations._harness import OPTIONS, PerTask


def given(args, *names):
    """The options among ``names`` given on the command line (not None), as keyword arguments."""
    return {n: getattr(args, n) for n in names if getattr(args, n) is not None}


def emit(args, payload, text):
    """``payload`` as JSON with ``--json``, else the human-readable ``text``."""
    print(json.dumps(payload) if args.json else text)


def note(message):
    """``message`` on one ``faqstats: note:`` line of stderr."""
    print(f"faqstats: note: {' '.join(message.split())}", file=sys.stderr)


# the largest count a command line takes: beyond it numpy's int64 (and any real budget) ends
MAX_COUNT = 2**53


def count(text):
    """An ``argparse`` type: a positive integer (a budget, a batch size, a number of runs)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if not 1 <= value <= MAX_COUNT:
        raise argparse.ArgumentTypeError(f"expected a positive integer (at most 2**53), got {text!r}")
    return value


def add_allow_unchecked(parser):
    """``--allow-unchecked``: also read files written before faqstats stored checksums."""
    parser.add_argument("--allow-unchecked", action="store_true",
                        help="also read a session, model or step-weights file written before faqstats stored "
                             "checksums (format version 1 without them); a file whose checksums do not match is still "
                             "refused")


def finish(parser, func):
    """``--json`` (last in the help), then the function that runs the command."""
    parser.add_argument("--json", action="store_true", help="print one JSON object (errors too) for scripting")
    parser.set_defaults(func=func)


def matrix_question_ids(meta):
    """The question ids stored in a response matrix's ``.npz`` (``question_ids`` or ``items``), or None."""
    key = next((k for k in ("question_ids", "items") if k in meta), None)
    return None if key is None else [str(q) for q in meta[key].tolist()]


# -- --groups-from, --costs-from and --clusters-from: a value per question id, from a file ------
def groups_from(source, ids):
    """Group labels of ``ids`` (a list in the bank's order): ``tasks`` (the ``<task>`` of each
    ``<task>/<id>``) or a file."""
    if source == "tasks" and not Path(source).exists():
        try:
            return task_groups([str(q) for q in ids])
        except (ValueError, TypeError) as exc:
            raise ValueError(f"--groups-from tasks needs harness question ids '<task>/<id>': {exc}") from None
    return read_question_labels(source, ids, "group")


def question_files(args, ids, clusters=True):
    """``(groups, costs, clusters)`` of the bank's ``ids`` from ``--groups-from``, ``--costs-from``
    and (with ``clusters``) ``--clusters-from``, None where not given; the ids of a file that are
    not the bank's are ignored with a note."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return (None if args.groups_from is None else groups_from(args.groups_from, ids),
                    None if args.costs_from is None else read_question_costs(args.costs_from, ids),
                    None if not clusters or args.clusters_from is None
                    else read_question_labels(args.clusters_from, ids, "cluster"))
        finally:
            for warning in caught:
                note(str(warning.message))


# -- --lm-eval/--inspect and their reader options (--metric, --filter, --scorer) --------------
# the names the readers give their path arguments, as the command line's options
_READER_PATH_NAMES = r"(?:paths_or_dirs|paths|path|log_path)"


@contextlib.contextmanager
def reading_harness(harness, after=""):
    """Harness output being read: a warning (e.g. about merged runs) as one ``faqstats: warning:``
    line each; an error (a missing path too) in the command line's words, followed by ``after``."""
    def show(message, *_):
        print(f"faqstats: warning: {' '.join(str(message).split())}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = show
        try:
            yield
        except (ValueError, OSError) as exc:
            message = re.sub(r"[Pp]ass (\w+)=\.\.\. \(or a mapping task -> \w+\)",
                             r"Pass --\1 NAME (or --\1 TASK=NAME)", str(exc))
            message = re.sub(rf"^{_READER_PATH_NAMES}:? ", f"--{harness} ", message)
            message = re.sub(rf"given in {_READER_PATH_NAMES}\b", f"given with --{harness}", message)
            raise ValueError(message + after) from exc


def harness_of(args):
    """``(harness, paths)`` of ``--lm-eval``/``--inspect`` (paths: one, or a list), or ``(None, None)``."""
    chosen = [(h, getattr(args, h.replace("-", "_"))) for h in ("lm-eval", "inspect")]
    chosen = [(h, paths) for h, paths in chosen if paths]
    if len(chosen) > 1:
        raise ValueError("give --lm-eval or --inspect, not both.")
    if not chosen:
        return None, None
    harness, paths = chosen[0]
    seen = {}
    for path in paths:  # the same output twice would count its scores twice
        key = Path(path).resolve()
        if key in seen:
            also = "" if seen[key] == path else f" (also as {seen[key]})"
            raise ValueError(f"--{harness}: {path} is given twice{also}.")
        seen[key] = path
    return harness, paths[0] if len(paths) == 1 else list(paths)


def reader_options(args, harness):
    """The reader options (``--metric``, ``--filter``, ``--scorer``) given, checked against ``harness``:
    ``{name: {"default": NAME or None, "tasks": {TASK: NAME}}}`` (:func:`faqstats.io.check_reader_options`).

    Each is ``NAME`` (every task) and/or ``TASK=NAME`` (repeatable); tasks not named read the
    ``NAME`` given, else the reader's default.
    """
    options = {}
    for name in ("metric", "filter", "scorer"):
        values = getattr(args, name, None)
        if not values:
            continue
        if harness is None or name not in OPTIONS[harness]:
            owner = next(h for h, names in OPTIONS.items() if name in names)
            raise ValueError(f"--{name} reads harness output: it goes with --{owner} only.")
        named, plain = {}, []
        for value in values:
            task, sep, choice = value.partition("=")
            if not (choice if sep else task) or (sep and not task):
                raise ValueError(f"--{name} takes NAME or TASK=NAME, got {value!r}.")
            if not sep:
                plain.append(task)
            elif task in named:
                raise ValueError(f"--{name}: task {task!r} is given twice.")
            else:
                named[task] = choice
        if len(plain) > 1:
            raise ValueError(f"--{name}: one NAME for all tasks (and TASK=NAME for others), got {plain}.")
        options[name] = {"default": plain[0] if plain else OPTIONS[harness][name], "tasks": named}
    return options


def all_reader_options(harness, chosen):
    """``chosen`` completed with the reader's defaults for every option of ``harness``."""
    return {name: chosen.get(name, {"default": default, "tasks": {}}) for name, default in OPTIONS[harness].items()}


def reader_kwargs(options):
    """Reader options as the reader's keyword arguments (a name, or a mapping task -> name)."""
    return {name: PerTask(spec["tasks"], spec["default"]) if spec["tasks"] else spec["default"]
            for name, spec in options.items()}


def option_words(name, spec):
    """A reader option as it is written on the command line (``--metric acc --metric t=exact_match``)."""
    words = ([] if spec["default"] is None else [f"--{name} {spec['default']}"]) + [
        f"--{name} {task}={value}" for task, value in spec["tasks"].items()]
    return " ".join(words) or f"no --{name}"


def check_option_tasks(options, tasks, where):
    """Refuse a ``TASK=NAME`` whose task is not among ``tasks`` (it would be ignored silently)."""
    for name, spec in options.items():
        absent = sorted(set(spec["tasks"]) - set(tasks))
        if absent:
            raise ValueError(f"--{name} {absent[0]}={spec['tasks'][absent[0]]}: no task {absent[0]!r} in {where} "
                             f"(its tasks: {', '.join(sorted(tasks))}).")


def add_reader_options(parser, recording=False):
    """The ``reading harness output`` group: ``--metric``, ``--filter``, ``--scorer``."""
    group = parser.add_argument_group(
        "reading harness output", "NAME for every task and/or TASK=NAME for one (repeat the option)" + (
            "; fit-history stores them with the model" if not recording else
            ". Default: the options 'faqstats fit-history' read the history with (stored with the model); "
            "an option given replaces the stored one of that name (a note says so when they differ)."))
    group.add_argument("--metric", action="append", metavar="[TASK=]NAME",
                       help="lm-eval: the per-document metric (default acc), e.g. exact_match")
    group.add_argument("--filter", action="append", metavar="[TASK=]NAME",
                       help="lm-eval: the filter whose lines to read (default none), e.g. flexible-extract")
    group.add_argument("--scorer", action="append", metavar="[TASK=]NAME",
                       help="inspect: the scorer to read (default: the log's only scorer)")
