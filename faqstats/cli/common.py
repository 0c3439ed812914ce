"""What the subcommands share: output, notes, the per-question files, the harness readers' options and tables."""

import argparse
import contextlib
import json
import re
import sys
import warnings
from pathlib import Path

import numpy as np

from ..datasets import load_response_matrix
from ..integrations import read_question_costs, read_question_labels, task_groups
from ..integrations._harness import OPTIONS, PerTask
from ..io.tables import read_history_table


def given(args, *names):
    """The options among ``names`` given on the command line (not None), as keyword arguments."""
    return {n: getattr(args, n) for n in names if getattr(args, n) is not None}


def emit(args, payload, text):
    """``payload`` as JSON with ``--json``, else the human-readable ``text``."""
    print(json.dumps(payload) if args.json else text)


def note(message):
    """``message`` on one ``faqstats: note:`` line of stderr."""
    print(f"faqstats: note: {' '.join(message.split())}", file=sys.stderr)


def count(text):
    """An ``argparse`` type: a positive integer (a budget, a batch size, a number of runs)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if not 1 <= value <= 2**53:  # beyond it numpy's int64 (and any real budget) ends
        raise argparse.ArgumentTypeError(f"expected a positive integer (at most 2**53), got {text!r}")
    return value


def finish(parser, func, allow_unchecked=False):
    """``--allow-unchecked`` (with ``allow_unchecked``), ``--json`` (last in the help) and the command's function."""
    if allow_unchecked:
        parser.add_argument("--allow-unchecked", action="store_true",
                            help="also read a session, model or step-weights file written before faqstats stored "
                                 "checksums (format version 1 without them); a file whose checksums do not match is "
                                 "still refused")
    parser.add_argument("--json", action="store_true", help="print one JSON object (errors too) for scripting")
    parser.set_defaults(func=func)


def matrix_question_ids(meta):
    """The question ids stored in a response matrix's ``.npz`` (``question_ids`` or ``items``), or None."""
    key = next((k for k in ("question_ids", "items") if k in meta), None)
    return None if key is None else [str(q) for q in meta[key].tolist()]


def history_for(path, question_ids):
    """The history in ``path`` (a response matrix ``.npz``), its columns the session's ``question_ids`` (matched
    by the ids stored in the file, else taken in order)."""
    matrix, meta = load_response_matrix(path)
    ids = matrix_question_ids(meta)
    if ids is None:
        return matrix
    where = {q: j for j, q in enumerate(ids)}
    missing = [q for q in map(str, question_ids) if q not in where]
    if missing:
        raise ValueError(f"{path} lacks {len(missing)} of the session's questions (first {missing[0]!r}).")
    return matrix[:, [where[str(q)] for q in question_ids]]


def question_files(args, ids, clusters=True):
    """``(groups, costs, clusters)`` from ``--groups-from``, ``--costs-from`` and (with ``clusters``)
    ``--clusters-from``, None where not given, read by the bank's ids (``ids()``: a list in the bank's order);
    ids of a file that are not the bank's are ignored with a note."""
    clusters = clusters and args.clusters_from is not None
    if args.groups_from is None and args.costs_from is None and not clusters:
        return None, None, None
    ids = ids()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if args.groups_from != "tasks" or Path(args.groups_from).exists():
                groups = None if args.groups_from is None else read_question_labels(args.groups_from, ids, "group")
            else:  # the <task> of each <task>/<id>
                try:
                    groups = task_groups([str(q) for q in ids])
                except (ValueError, TypeError) as exc:
                    raise ValueError(f"--groups-from tasks needs harness question ids '<task>/<id>': {exc}") from None
            return (groups, None if args.costs_from is None else read_question_costs(args.costs_from, ids),
                    read_question_labels(args.clusters_from, ids, "cluster") if clusters else None)
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
    """``(harness, paths, options)`` of ``--lm-eval``/``--inspect`` (paths: one, or a list; ``(None, None, {})``
    without) and the reader options given (:func:`reader_options`)."""
    chosen = [(h, getattr(args, h.replace("-", "_"))) for h in ("lm-eval", "inspect")]
    chosen = [(h, paths) for h, paths in chosen if paths]
    if len(chosen) > 1:
        raise ValueError("give --lm-eval or --inspect, not both.")
    if not chosen:
        return None, None, reader_options(args, None)
    harness, paths = chosen[0]
    seen = {}
    for path in paths:  # the same output twice would count its scores twice
        key = Path(path).resolve()
        if key in seen:
            also = "" if seen[key] == path else f" (also as {seen[key]})"
            raise ValueError(f"--{harness}: {path} is given twice{also}.")
        seen[key] = path
    return harness, paths[0] if len(paths) == 1 else list(paths), reader_options(args, harness)


def reader_options(args, harness):
    """The reader options (``--metric``, ``--filter``, ``--scorer``) given, checked against ``harness``:
    ``{name: {"default": NAME or None, "tasks": {TASK: NAME}}}`` (:func:`faqstats.io.check_reader_options`);
    tasks not named read the ``NAME`` given, else the reader's default."""
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


# -- --table FILE and its columns (fit-history, history from-table) --------------------------
# the columns' defaults: the names history_from_frame uses
_COLUMNS = {"model_col": "model", "question_col": "question", "score_col": "score"}


def add_table_options(parser, required=False):
    """The ``reading a table`` group: ``--model-col``, ``--question-col``, ``--score-col``, ``--duplicates``."""
    group = parser.add_argument_group(
        "reading a table", "the columns of --table: one row per model x question" if not required else
        "the columns of the table: one row per model x question")
    group.add_argument("--model-col", default=None, metavar="NAME", help="the column naming the model (default model)")
    group.add_argument("--question-col", default=None, metavar="NAME",
                       help="the column of the question ids, kept as written ('/' and all) (default question)")
    group.add_argument("--score-col", default=None, metavar="NAME",
                       help="the column of the outcomes: numbers in [0, 1], graded in between; empty: not observed "
                            "(default score)")
    group.add_argument("--duplicates", choices=["refuse", "mean"], default=None,
                       help="a model x question pair on several rows: refuse the table (default), or take their "
                            "mean as a graded outcome")


def check_table_columns(args):
    """Refuse the table options without a table (they would be ignored)."""
    given = [f"--{name.replace('_', '-')}" for name in (*_COLUMNS, "duplicates") if getattr(args, name) is not None]
    if given:
        raise ValueError(f"{', '.join(given)} read(s) a table: it goes with --table FILE.")


def read_table_history(args):
    """``(outcomes, models, question ids)`` of ``--table``; models without any score are left out, with a note."""
    if getattr(args, "question_ids", None) is not None:
        raise ValueError("--question-ids goes with --data; a table's question ids are its --question-col.")
    columns = {name: getattr(args, name) or default for name, default in _COLUMNS.items()}
    path = args.table
    outcomes, models, ids = read_history_table(path, columns["model_col"], columns["question_col"],
                                               columns["score_col"], duplicates=args.duplicates or "refuse")
    empty = np.isnan(outcomes).all(axis=1)
    if empty.all():
        raise ValueError(f"{path}: no model has a score (column {columns['score_col']!r} is empty throughout).")
    if empty.any():  # nothing to learn from, and a fit refuses them
        dropped = [m for m, e in zip(models, empty) if e]
        note(f"{path}: {len(dropped)} model(s) without any score are left out: "
             f"{', '.join(map(repr, dropped[:5]))}{' ...' if len(dropped) > 5 else ''}.")
        outcomes, models = outcomes[~empty], [m for m, e in zip(models, empty) if not e]
    return outcomes, models, ids
