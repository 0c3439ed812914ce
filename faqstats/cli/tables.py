"""``--table FILE`` and its columns: a history read from a long table (``fit-history``, ``history from-table``)."""

from __future__ import annotations

from ..io.tables import read_history_table

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
    """``(outcomes, models, question ids)`` of the table (``--table`` unless ``table``)."""
    if getattr(args, "question_ids", None) is not None:
        raise ValueError("--question-ids goes with --data; a table's question ids are its --question-col.")
    columns = {name: getattr(args, name) or default for name, default in _COLUMNS.items()}
    return read_history_table(args.table if table is None else table, columns["model_col"],
                              columns["question_col"], columns["score_col"], duplicates=args.duplicates or "refuse")
