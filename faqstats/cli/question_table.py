"""``faqstats question-table``: a ``question_id,task,group,cost`` CSV from harness output, for
``session new --groups-from``/``--costs-from`` (and ``--clusters-from``); without a cost for every
question (logs without token counts) the file has no ``cost`` column."""

import csv
from pathlib import Path

from ..integrations import (read_inspect_clusters, read_inspect_costs, read_inspect_groups, read_lm_eval_costs,
                            read_lm_eval_groups, task_groups)
from .common import emit, finish, harness_of, note, reading_harness


def _read_lm_eval(args, paths):
    """``(groups, costs, clusters, unit)`` of lm-eval output (it logs no clusters)."""
    if args.cluster_field is not None:
        raise ValueError("--cluster-field reads inspect sample metadata: it goes with --inspect (lm-eval logs "
                         "no cluster of a document; write a question_id,cluster file for --clusters-from).")
    if args.group.startswith("metadata."):
        raise ValueError("--group metadata.FIELD reads inspect sample metadata: it goes with --inspect.")
    if args.tokens != "total":
        raise ValueError("--tokens goes with --inspect: lm-eval logs no token counts (the cost is the prompt's "
                         "length in characters).")
    with reading_harness("lm-eval"):
        return (read_lm_eval_groups(paths, level=args.group), read_lm_eval_costs(paths), None,
                "characters of the requests")


def _read_inspect(args, paths):
    """``(groups, costs, clusters, unit)`` of inspect logs (clusters: None without ``--cluster-field``)."""
    group = args.group
    if group in ("parent", "group"):
        raise ValueError(f"--group {group} reads lm-eval's task groups: with --inspect use task or metadata.FIELD.")
    field = group.removeprefix("metadata.") if group.startswith("metadata.") else None
    if field == "":
        raise ValueError("--group metadata.FIELD needs a FIELD (a key of the samples' metadata).")
    if args.cluster_field == "":
        raise ValueError("--cluster-field needs a FIELD (a key of the samples' metadata).")
    with reading_harness("inspect"):
        groups = read_inspect_groups(paths, field)
        clusters = None if args.cluster_field is None else read_inspect_clusters(paths, args.cluster_field)
        try:
            costs = read_inspect_costs(paths, tokens=args.tokens)
        except ValueError as exc:
            if "No sample with model_usage" not in str(exc):
                raise
            costs = {}
    return groups, costs, clusters, f"{args.tokens} tokens per epoch"


def run_question_table(args):
    harness, paths, _ = harness_of(args)
    groups, costs, clusters, unit = (_read_lm_eval if harness == "lm-eval" else _read_inspect)(args, paths)
    ids = list(groups) + [q for q in costs if q not in groups]
    no_cost = [q for q in ids if q not in costs]
    # --costs-from needs a positive cost for every question: a column with gaps would be refused there
    with_costs = not no_cost
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["question_id", "task", "group"] + (["cost"] if with_costs else [])
                        + ([] if clusters is None else ["cluster"]))
        for qid, task in zip(ids, task_groups(ids)):
            row = [qid, task, groups.get(qid, "")] + ([f"{costs[qid]:.10g}"] if with_costs else [])
            writer.writerow(row + ([] if clusters is None else [clusters.get(qid, "")]))
    if no_cost:
        note(f"{len(no_cost)} question(s) have no token counts in the logs (no model_usage): {out} has no cost "
             f"column (--costs-from needs a cost for every question): "
             f"{', '.join(map(repr, no_cost[:5]))}{' ...' if len(no_cost) > 5 else ''}.")
    payload = {"out": str(out), "n_questions": len(ids), "n_groups": len(set(groups.values())),
               "group": args.group, "cost": unit if with_costs else None, "missing_costs": no_cost}
    also = ""
    if clusters is not None:
        payload["n_clusters"], payload["cluster_field"] = len(set(clusters.values())), args.cluster_field
        also = f", {payload['n_clusters']} clusters (metadata.{args.cluster_field})"
    costs_from = f" --costs-from {out}" if with_costs else ""
    emit(args, payload, f"Wrote {out}: {len(ids)} questions, {payload['n_groups']} groups ({args.group}){also}, "
         + (f"cost = {unit}." if with_costs else "no costs.")
         + f"\nUse it with: faqstats session new DIR --model MODEL --groups-from {out}{costs_from} "
         + ("..." if clusters is None else f"(or --clusters-from {out}{costs_from}) ..."))


def add_question_table_parser(sub):
    table = sub.add_parser(
        "question-table", help="write a question_id,task,group,cost CSV from lm-eval or inspect output, for "
                               "'session new --groups-from/--costs-from'")
    source = table.add_mutually_exclusive_group(required=True)
    source.add_argument("--lm-eval", nargs="+", action="extend", metavar="DIR",
                        help="lm-eval --output_path directories (--log_samples): cost = the length of each "
                             "document's requests in characters (lm-eval logs no token counts)")
    source.add_argument("--inspect", nargs="+", action="extend", metavar="LOGDIR",
                        help="inspect-ai log directories or files: cost = the tokens of one epoch of the sample "
                             "(model_usage), averaged over epochs and models")
    table.add_argument("--out", required=True, help="the CSV to write")
    table.add_argument("--group", default="task", metavar="task|parent|group|metadata.FIELD",
                       help="the group of a question: its task (default); lm-eval: the group listing the task "
                            "(parent) or the outermost group (group), from the results files' group_subtasks; "
                            "inspect: metadata.FIELD, a field of the samples' metadata")
    table.add_argument("--tokens", choices=["total", "input", "output"], default="total",
                       help="inspect: which token counts make the cost (default total)")
    table.add_argument("--cluster-field", default=None, metavar="FIELD",
                       help="inspect: also a 'cluster' column, the samples' metadata FIELD within their task (a "
                            "passage or document id), for 'session new --clusters-from'")
    finish(table, run_question_table)
