"""``--table FILE`` and its columns: a history read from a long table (``fit-history``, ``history from-table``)."""

from __future__ import annotations

import numpy as np

from ..io.tables import read_history_table as read_table_history_file
from .common import note

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


def read_table_history(args, table=None):
    """``(outcomes, models, question ids)`` of the table (``--table`` unless ``table``); models without
    any score are left out, with a note."""
    if getattr(args, "question_ids", None) is not None:
        raise ValueError("--question-ids goes with --data; a table's question ids are its --question-col.")
    columns = {name: getattr(args, name) or default for name, default in _COLUMNS.items()}
    path = args.table if table is None else table
    outcomes, models, ids = read_table_history_file(path, columns["model_col"], columns["question_col"],
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
