"""``faqstats history from-table|add``: a history file from a long table, and one that grows with
every finished session (:func:`faqstats.add_sessions_to_history`)."""

import numpy as np

from ..history import add_rows_to_history, add_sessions_to_history
from ..integrations._harness import read_history
from ..io.history import load_history, save_history
from .common import (add_reader_options, add_table_options, all_reader_options, emit, finish, harness_of,
                     read_table_history, reader_kwargs, reading_harness)


def run_from_table(args):
    outcomes, models, ids = read_table_history(args)
    out = save_history(args.out, outcomes, models, ids)
    observed = float(np.mean(~np.isnan(outcomes)))
    payload = {"history": str(out), "n_models": len(models), "n_questions": len(ids), "observed_fraction": observed}
    emit(args, payload, f"Read {len(models)} models x {len(ids)} questions ({100 * observed:.1f}% observed) from "
         f"{args.table}; wrote {out}.\nNext: faqstats fit-history --data {out} --budget B --out MODEL.npz")


def run_add(args):
    harness, paths, options = harness_of(args)
    if bool(args.sessions) == (harness is not None):
        raise ValueError("give session directories (SESSION_DIR ...) or harness runs (--lm-eval, --inspect) to add, "
                         "one kind per command (each is checked whole before the history is written).")
    if harness is not None:  # every model's full row, read as fit-history reads them
        if args.name is not None or args.partial:
            raise ValueError("--name and --partial go with session directories; harness runs are named by their "
                             "models.")
        options = all_reader_options(harness, options)
        with reading_harness(harness, after=" Nothing was added."):
            rows, names, ids = read_history(harness, paths, **reader_kwargs(options))
        source = {"kind": harness, "path": [str(paths)] if isinstance(paths, str) else [str(p) for p in paths],
                  "reader": {"harness": harness, "options": options}}
        out = add_rows_to_history(args.history, rows, names, ids, replace=args.replace, out=args.out, source=source)
        n_added = len(names)
    else:
        if args.name is not None and len(args.name) != len(args.sessions):
            raise ValueError(f"--name gives the model of each session, in order: {len(args.sessions)} session(s), "
                             f"{len(args.name)} --name.")
        out = add_sessions_to_history(args.history, args.sessions, names=args.name, replace=args.replace,
                                      partial=args.partial, out=args.out, allow_unchecked=args.allow_unchecked)
        n_added = len(args.sessions)
    outcomes, models, ids, metadata = load_history(out)
    added = metadata["sources"][-n_added:]
    payload = {"history": str(out), "n_models": len(models), "n_questions": len(ids), "added": added}
    lines = [f"  {s['model']}: {s['n_answers']} answer(s) from "
             f"{s['path'] if isinstance(s['path'], str) else ', '.join(s['path'])}"
             + ("" if s["complete"] else " (not done: its answers so far)") for s in added]
    emit(args, payload, f"Added {len(added)} model(s) to {out}, now {len(models)} models x {len(ids)} questions:\n"
         + "\n".join(lines) + f"\nRefit: faqstats fit-history --data {out} --budget B --out MODEL.npz")


def add_history_parser(sub):
    history = sub.add_parser("history", help="a history file: from a long table (from-table); grown with finished "
                                             "sessions' answers (add)")
    hsub = history.add_subparsers(dest="history_command", required=True)

    table = hsub.add_parser("from-table", help="write a history file (.npz, checksummed) from a long table, one row "
                                               "per model x question")
    table.add_argument("table", help="the table: CSV, TSV, Parquet or JSON Lines (.csv, .tsv, .parquet, .jsonl)")
    table.add_argument("--out", required=True, help="the history file to write (.npz)")
    add_table_options(table, required=True)
    finish(table, run_from_table)

    add = hsub.add_parser("add", help="append each finished session's answers to HISTORY as a row (NaN where not "
                                      "asked) under its model's name, checksummed and written atomically")
    add.add_argument("history", help="the history file (.npz: 'faqstats history from-table', or a response matrix "
                                     "with 'models' and 'question_ids'/'items'); its question ids must be the "
                                     "sessions' bank")
    add.add_argument("sessions", nargs="*", metavar="SESSION_DIR",
                     help="session directories ('faqstats session new'): their answers, NaN where not asked")
    add.add_argument("--lm-eval", nargs="+", action="extend", metavar="DIR",
                     help="instead of sessions, other models' full rows: lm-eval --output_path directories "
                          "(--log_samples), a model per directory, question ids '<task>/<doc_id>' (a question not "
                          "run is NaN)")
    add.add_argument("--inspect", nargs="+", action="extend", metavar="LOGDIR",
                     help="instead of sessions, other models' full rows: inspect-ai log directories or files, a "
                          "model per eval.model, question ids '<task>/<sample id>'")
    add.add_argument("--name", action="append", default=None, metavar="MODEL",
                     help="the model of each session, in order (repeat for several; default: each session "
                          "directory's name)")
    add.add_argument("--replace", action="store_true",
                     help="replace the row of a model already in the history (default: refuse it)")
    add.add_argument("--partial", action="store_true",
                     help="also add a session that is not done (the answers it holds so far; default: refuse it)")
    add.add_argument("--out", default=None, help="write the grown history here instead of over HISTORY")
    add_reader_options(add)
    finish(add, run_add, allow_unchecked=True)
