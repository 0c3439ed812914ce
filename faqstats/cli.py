"""Command-line interface: argument parsing only; the work lives in the library."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import re
import shlex
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd


def _demo(args):
    from .experiments.demo import DEMO_METHODS, run_demo
    from .experiments.runner import format_summary

    demo = run_demo(budgets=tuple(args.budgets), n_new=args.models, seeds=args.seeds, random_state=args.seed,
                    verbose=not args.quiet)
    history, fm = demo.bank.history, demo.factor_model
    print(f"Synthetic bank: {history.shape[0]} historical models x {history.shape[1]} questions "
          f"({100 * np.isnan(history).mean():.0f}% missing), {len(demo.bank.new_accuracy)} new models.")
    print(f"Factor model: k={fm.n_components}, regularization={fm.regularization}, final training loss "
          f"{fm.loss_curve_[-1]:.4f}.")
    print("".join(f"\n  {name}: {what}" for name, what in DEMO_METHODS.items()) + "\n")
    examples = demo.examples(budget=args.budgets[len(args.budgets) // 2])
    print(examples, format_summary(demo.summary()), sep="\n\n")
    print(f"\nPlot written to {demo.plot(Path(args.out) / 'width_vs_budget.png')}")


def _given(args, *names):
    """The options among ``names`` given on the command line (not None), as keyword arguments."""
    return {n: getattr(args, n) for n in names if getattr(args, n) is not None}


def _experiment(args):
    import time

    from .datasets import load_response_matrix
    from .experiments.plots import plot_all
    from .experiments.runner import (DEFAULT_BUDGETS, format_summary, per_model_coverage, run_experiment, summarize,
                                     write_csv)

    start = time.perf_counter()
    matrix, meta = load_response_matrix(args.data)
    groups = costs = clusters = None
    if args.clusters_from is not None and args.cluster_size is not None:
        raise ValueError("give --clusters-from FILE or --cluster-size K, not both.")
    if args.groups_from is not None or args.costs_from is not None or args.clusters_from is not None:
        key = next((k for k in ("question_ids", "items") if k in meta), None)  # read by the matrix's question ids
        ids = [str(q) for q in meta[key].tolist()] if key is not None else [str(j) for j in range(matrix.shape[1])]
        groups = None if args.groups_from is None else _groups_from(args.groups_from, ids)
        costs = None if args.costs_from is None else _costs_from(args.costs_from, ids)
        clusters = None if args.clusters_from is None else _labels_from(args.clusters_from, ids, "cluster")
    if args.cluster_size is not None:  # consecutive questions, K at a time
        if args.cluster_size < 1:
            raise ValueError(f"--cluster-size must be a positive number of questions, got {args.cluster_size}.")
        clusters = np.arange(matrix.shape[1]) // args.cluster_size
    factor_model = _given(args, "n_components", "regularization", "max_iter", "solver", "prior_scale") or None
    if args.cv_components or args.cv_regularization:  # by cell cross-validation on the history
        from .factor_model import LogisticFactorModelCV

        if args.n_components is not None or args.regularization is not None:
            raise ValueError("--cv-components/--cv-regularization choose k and the regularization: drop "
                             "--n-components/--regularization.")
        if args.prior_scale is not None:
            raise ValueError("--prior-scale is not passed to the cross-validated factor model; drop one of them.")
        factor_model = LogisticFactorModelCV(
            n_components_grid=tuple(args.cv_components or (16,)),
            regularization_grid=tuple(args.cv_regularization or (0.1,)),
            cv=args.cv_folds, max_iter=args.max_iter or 2000, solver=args.solver or "adamw", random_state=0,
            verbose=not args.quiet,
        )
    result = run_experiment(
        matrix, history_fraction=args.history_fraction, split_seed=args.split_seed, complete_rows=args.complete_rows,
        n_full_obs=args.n_full_obs, p_obs=args.p_obs, max_models=args.max_models,
        budgets=tuple(args.budgets or DEFAULT_BUDGETS),
        seeds=args.seeds, methods=tuple(args.methods), factor_model=factor_model, random_state=args.seed,
        n_jobs=args.n_jobs, backend=args.backend, tuning={"seeds": args.tune_seeds},
        step_weights=_given(args, "weight_runs") and {"n_runs": args.weight_runs}, groups=groups, costs=costs,
        clusters=clusters, verbose=not args.quiet,
    )
    summary = summarize(result.records)
    models = per_model_coverage(result.records)
    out = Path(args.out)
    files = [write_csv(result.records, out / "records.csv"), write_csv(summary, out / "summary.csv"),
             write_csv(models, out / "model_coverage.csv"), *plot_all(summary, models, out)]
    if result.tuning:  # one table per budget, stacked, with the budget as first column
        tables = [res.table.assign(budget=b)[["budget", *res.table.columns]] for b, res in result.tuning.items()]
        files.append(write_csv(pd.concat(tables, ignore_index=True), out / "tuning.csv"))
    if result.configurations:  # method "auto": each budget's candidates, the chosen one marked
        tables = [cfg.table.assign(budget=b, chosen=cfg.table["candidate"] == cfg.choice)
                  for b, cfg in result.configurations.items()]
        files.append(write_csv(pd.concat(tables, ignore_index=True), out / "configurations.csv"))
    if result.step_weights:  # the learned increment weights, one row per (method, budget, step)
        files += _write_step_weights(result.step_weights, out)
    group_summary = None
    if result.group_records is not None:  # every group's estimate in every run, and its coverage
        from .experiments.runner import summarize_groups

        group_summary = summarize_groups(result.group_records)
        files += [write_csv(result.group_records, out / "group_records.csv"),
                  write_csv(group_summary, out / "group_summary.csv")]
    (out / "summary.md").write_text(format_summary(summary, markdown=True) + "\n")
    config = dict(result.config, data=str(args.data), history_shape=list(result.history_shape),
                  budgets=result.budgets.tolist(), n_new=int(result.new_rows.size))
    if clusters is not None:  # the cluster design: budgets count cluster draws
        config["clusters"] = {"from": args.clusters_from, "cluster_size": args.cluster_size,
                              "n_clusters": int(np.unique(np.asarray(clusters)).size)}
    if hasattr(result.factor_model, "best_params_"):
        config["factor_model_cv"] = {k: float(v) for k, v in result.factor_model.best_params_.items()}
    (out / "config.json").write_text(json.dumps(config, indent=2))
    n_hist, n_q = result.history_shape
    print(
        f"{args.data}: history {n_hist} models x {n_q} questions ({100 * result.history_observed:.1f}% observed), "
        f"{result.new_rows.size} new models, {len(result.config['seeds'])} seed(s)."
    )
    if result.factor_model is not None:
        print(f"Factor model fit: {result.fit_seconds:.1f} s.")
        if hasattr(result.factor_model, "best_params_"):
            print(f"Cross-validated factor model: {result.factor_model.best_params_}.")
    print("\n" + format_summary(summary))
    if group_summary is not None:
        shown = group_summary.drop(columns=["budget_fraction"]).round(3)
        print("\nPer group (coverage of each group's interval; simultaneous: Bonferroni over the groups, joint: all "
              "groups covered at once):\n" + shown.to_string(index=False))
    names = ", ".join(p.name for p in files)
    print(f"Wrote {names}, summary.md, config.json to {out} ({time.perf_counter() - start:.1f} s).")


def _write_step_weights(weights, out):
    from .experiments.plots import plot_step_weights
    from .experiments.runner import write_csv

    table = pd.concat([pd.DataFrame({"method": m, "budget": b, "step": np.arange(1, b + 1),
                                     "step_variance": sw.step_variance, "smoothed_variance": sw.smoothed_variance,
                                     "weight": sw.weights}) for (m, b), sw in weights.items()], ignore_index=True)
    return [write_csv(table, out / "step_weights.csv"), plot_step_weights(weights, out / "step_weights.png")]


def _draw_bank(args):
    from .datasets import draw_bank_from_factors

    with np.load(args.factors, allow_pickle=False) as data:
        missing = [k for k in ("model_factors", "question_factors") if k not in data]
        if missing:
            raise ValueError(f"{args.factors} lacks {missing} (found {sorted(data.files)}).")
        U, V = data["model_factors"], data["question_factors"]
    Z = draw_bank_from_factors(U, V, random_state=args.seed)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, outcomes=Z)
    print(f"Drew a {Z.shape[0]} x {Z.shape[1]} bank (mean accuracy {Z.mean():.3f}) from {args.factors} "
          f"with seed {args.seed}; wrote {out}.")


class _ExperimentHelp(argparse.HelpFormatter):
    """Fills ``{methods}`` in when the help is shown: the runner imports torch, which every other
    command would otherwise wait for just to build the parser."""

    def _get_help_string(self, action):
        text = super()._get_help_string(action)
        if "{methods}" in text:
            from .experiments.runner import METHODS

            text = text.replace("{methods}", ", ".join(METHODS))
        return text


def _add_experiment_parser(sub):
    exp = sub.add_parser(
        "experiment", formatter_class=_ExperimentHelp,
        help="run methods x budgets x seeds on a response matrix (.npz); write CSV tables and PNG figures",
    )
    exp.add_argument("--data", required=True, help=".npz file with an 'outcomes' models x items matrix (-1 missing)")
    exp.add_argument("--out", required=True, help="directory for CSV tables and figures")
    exp.add_argument("--budgets", type=float, nargs="+", default=None,
                     help="budgets as fractions of the bank, in (0, 1] (default 0.025 ... 0.25)")
    exp.add_argument("--seeds", type=int, default=3, help="seeds per method, budget and model (default 3)")
    exp.add_argument("--methods", nargs="+", default=["faq", "uniform-fpc", "ht-uniform"],
                     help="methods among {methods}, optionally with sampler parameters, e.g. "
                          "aipw-min:tau=0.05 (default: faq uniform-fpc ht-uniform)")
    exp.add_argument("--max-models", type=int, default=None, help="evaluate at most this many new models")
    exp.add_argument("--complete-rows", action="store_true",
                     help="keep only rows without missing entries (history too)")
    exp.add_argument("--history-fraction", type=float, default=0.75, help="fraction of complete rows as history")
    exp.add_argument("--split-seed", type=int, default=0, help="seed of the history/new-model permutation")
    exp.add_argument("--p-obs", type=float, default=None, help="MCAR observation rate of the history (default: "
                     "keep the data's own missingness)")
    exp.add_argument("--n-full-obs", type=int, default=None, help="history rows kept fully observed with --p-obs")
    exp.add_argument("--n-components", type=int, default=None, help="factor model rank (default 16)")
    exp.add_argument("--regularization", type=float, default=None,
                     help="factor model regularization: AdamW's weight decay, Newton's prior precision (default 0.1)")
    exp.add_argument("--max-iter", type=int, default=None, help="factor model optimiser steps (default 2000)")
    exp.add_argument("--solver", choices=["adamw", "newton"], default=None,
                     help="factor model solver (default adamw, the paper's, and on banks of 20,000 questions or more "
                          "newton with regularization 3 and at most 10 sweeps unless --regularization or --max-iter is given; "
                          "newton "
                          "is much faster on large banks and reads --regularization as a prior precision)")
    exp.add_argument("--seed", type=int, default=0, help="root seed of the runs (default 0)")
    exp.add_argument("--n-jobs", type=int, default=1, help="joblib workers (default 1; -1: all cores)")
    exp.add_argument("--backend", default=None, help="joblib backend (loky, threading, dask once registered...)")
    exp.add_argument("--cv-components", type=int, nargs="+", default=None,
                     help="choose the factor rank by cell cross-validation among these values")
    exp.add_argument("--cv-regularization", type=float, nargs="+", default=None,
                     help="choose the factor model's regularization by cell cross-validation among these values")
    exp.add_argument("--cv-folds", type=int, default=5, help="cross-validation folds (default 5)")
    exp.add_argument("--prior-scale", type=float, default=None,
                     help="scale of the new model's prior covariance (LogisticFactorModel prior_scale, default 1)")
    exp.add_argument("--weight-runs", type=int, default=None,
                     help="validation runs per budget when learning the increment weights of faq (default: 2000 "
                          "on small banks, down to 200 on large ones)")
    exp.add_argument("--tune-seeds", type=int, default=3,
                     help="runs per validation model and grid point when tuning faq-tuned (default 3)")
    exp.add_argument("--groups-from", default=None, metavar="FILE|tasks",
                     help="a group label per question (a .csv 'question_id,group' or .json {id: group}, by the "
                          ".npz's question_ids/items, else 0..N-1; or 'tasks' for ids '<task>/<id>'): every run "
                          "also estimates every group; writes group_records.csv and group_summary.csv (per-group "
                          "and simultaneous coverage). Sequential policies only (not ht-uniform, aipw-*, the field)")
    exp.add_argument("--costs-from", default=None, metavar="FILE",
                     help="a positive cost per question (as --groups-from): the policies weigh their scores by "
                          "1/sqrt(cost); records and summary gain the cost spent")
    clustered = exp.add_mutually_exclusive_group()
    clustered.add_argument("--clusters-from", default=None, metavar="FILE",
                           help="a cluster id per question (as --groups-from): every run is the cluster design (a "
                                "draw asks a whole cluster), budgets are fractions of the clusters and uniform-fpc "
                                "is the cluster sample mean. Sequential policies only; with --groups-from every "
                                "cluster must lie in one group")
    clustered.add_argument("--cluster-size", type=int, default=None, metavar="K",
                           help="clusters of K consecutive questions (as --clusters-from; for quick studies)")
    exp.add_argument("--quiet", action="store_true", help="no progress bars")
    exp.set_defaults(func=_experiment)


# -- fit-history and session: a resumable evaluation driven from the shell -------------
def _emit(args, payload, text):
    """``payload`` as JSON with ``--json``, else the human-readable ``text``."""
    print(json.dumps(payload) if args.json else text)


def _load(args):
    from .session import EvaluationSession

    return EvaluationSession.load(args.directory)


def _read_question_ids(path):
    """Ids from a text file (one per line) or a JSON list."""
    text = Path(path).read_text(encoding="utf-8")
    if Path(path).suffix == ".json":
        ids = json.loads(text)
        if not isinstance(ids, list):
            raise ValueError(f"{path} must hold a JSON list of question ids.")
        return [str(q) for q in ids]
    return [line.strip() for line in text.splitlines() if line.strip()]


# the names the readers give their path arguments, as the command line's options
_READER_PATH_NAMES = r"(?:paths_or_dirs|paths|path|log_path)"


@contextlib.contextmanager
def _reading_harness(harness, after=""):
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


def _harness_of(args):
    """``(harness, paths)`` of ``--lm-eval``/``--inspect`` (paths: one, or a list), or ``(None, None)``."""
    given = [(h, getattr(args, h.replace("-", "_"))) for h in ("lm-eval", "inspect")]
    given = [(h, paths) for h, paths in given if paths]
    if len(given) > 1:
        raise ValueError("give --lm-eval or --inspect, not both.")
    if not given:
        return None, None
    harness, paths = given[0]
    seen = {}
    for path in paths:  # the same output twice would count its scores twice
        key = Path(path).resolve()
        if key in seen:
            also = "" if seen[key] == path else f" (also as {seen[key]})"
            raise ValueError(f"--{harness}: {path} is given twice{also}.")
        seen[key] = path
    return harness, paths[0] if len(paths) == 1 else list(paths)


def _reader_options(args, harness):
    """The reader options (``--metric``, ``--filter``, ``--scorer``) given, checked against ``harness``:
    ``{name: {"default": NAME or None, "tasks": {TASK: NAME}}}`` (:func:`faqstats.io.check_reader_options`).

    Each is ``NAME`` (every task) and/or ``TASK=NAME`` (repeatable); tasks not named read the
    ``NAME`` given, else the reader's default.
    """
    from .integrations._harness import OPTIONS

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


def _all_reader_options(harness, given):
    """``given`` completed with the reader's defaults for every option of ``harness``."""
    from .integrations._harness import OPTIONS

    return {name: given.get(name, {"default": default, "tasks": {}}) for name, default in OPTIONS[harness].items()}


def _reader_kwargs(options):
    """Reader options as the reader's keyword arguments (a name, or a mapping task -> name)."""
    from .integrations._harness import PerTask

    return {name: PerTask(spec["tasks"], spec["default"]) if spec["tasks"] else spec["default"]
            for name, spec in options.items()}


def _option_words(name, spec):
    """A reader option as it is written on the command line (``--metric acc --metric t=exact_match``)."""
    words = ([] if spec["default"] is None else [f"--{name} {spec['default']}"]) + [
        f"--{name} {task}={value}" for task, value in spec["tasks"].items()]
    return " ".join(words) or f"no --{name}"


def _check_option_tasks(options, tasks, where):
    """Refuse a ``TASK=NAME`` whose task is not among ``tasks`` (it would be ignored silently)."""
    for name, spec in options.items():
        absent = sorted(set(spec["tasks"]) - set(tasks))
        if absent:
            raise ValueError(f"--{name} {absent[0]}={spec['tasks'][absent[0]]}: no task {absent[0]!r} in {where} "
                             f"(its tasks: {', '.join(sorted(tasks))}).")


def _note(message):
    print(f"faqstats: note: {' '.join(message.split())}", file=sys.stderr)


def _fit_history(args):
    from .datasets import load_response_matrix
    from .factor_model import LogisticFactorModel
    from .integrations._common import split_question_id
    from .io import save_factor_model

    harness, paths = _harness_of(args)
    options = _reader_options(args, harness)
    models = reader = None
    if harness is not None:  # earlier runs read straight from the harness output, ids "<task>/<sample id>"
        from .integrations._harness import read_history

        if args.question_ids is not None:
            raise ValueError(f"--question-ids goes with --data; with --{harness} the ids are the harness's.")
        # stored with the model: 'session record' reads the new model's runs the same way
        reader = {"harness": harness, "options": _all_reader_options(harness, options)}
        with _reading_harness(harness):
            matrix, models, ids = read_history(harness, paths, **_reader_kwargs(reader["options"]))
        _check_option_tasks(options, {split_question_id(q)[0] for q in ids}, f"the {harness} output read")
    else:
        matrix, meta = load_response_matrix(args.data)
        if args.question_ids is not None:
            ids = _read_question_ids(args.question_ids)
        else:
            key = next((k for k in ("question_ids", "items") if k in meta), None)
            ids = None if key is None else [str(q) for q in meta[key].tolist()]
    if args.budget is not None:  # the configured path: PAIEstimator.from_history's choice, saved whole
        return _fit_history_configured(args, matrix, ids, reader, harness, models)
    params = _given(args, "n_components", "regularization", "max_iter", "learning_rate", "prior_scale")
    verbose = not (args.quiet or args.json)
    fm = LogisticFactorModel(**params, device=args.device, random_state=args.seed, verbose=verbose)
    try:
        fm.fit(matrix)
    except FloatingPointError as exc:  # in the command line's words
        raise ValueError(str(exc).replace("learning_rate", "--learning-rate")
                         .replace("raise regularization", "raise --regularization")) from exc
    out = save_factor_model(fm, args.out, question_ids=ids, reader=reader)
    weights_file = None
    if args.step_weights_budget is not None:  # cross-fitted on the history: a second fit on 75% of it
        from .io import save_step_weights
        from .step_weights import learn_step_weights

        sw = learn_step_weights(matrix, fm, budget=args.step_weights_budget, random_state=args.seed)
        weights_file = save_step_weights(sw, Path(str(out)).with_suffix(".step_weights.json"))
    payload = {
        "model": str(out), "n_models": int(matrix.shape[0]), "n_questions": int(matrix.shape[1]),
        "observed_fraction": float(np.mean(~np.isnan(matrix))), "n_components": fm.n_components,
        "regularization": fm.regularization, "max_iter": fm.max_iter, "final_loss": float(fm.loss_curve_[-1]),
        "question_ids": ids is not None, "step_weights": None if weights_file is None else str(weights_file),
        "harness": harness, "models": models, "reader": reader,
    }
    read = "" if harness is None else (
        f"Read {len(models)} model(s) from the {harness} output ({', '.join(models[:5])}"
        f"{', ...' if len(models) > 5 else ''}) with "
        + ", ".join(_option_words(name, spec) for name, spec in reader["options"].items())
        + " (stored with the model for 'faqstats session record').\n")
    _emit(args, payload, read + (
        f"Fitted a rank-{fm.n_components} factor model on {matrix.shape[0]} models x {matrix.shape[1]} questions "
        f"({100 * payload['observed_fraction']:.1f}% observed), final loss {payload['final_loss']:.4f}.\n"
        f"Wrote {out}{'' if ids is not None else ' (no question ids: a session will number the questions 0..N-1)'}."
        + ("" if weights_file is None else f"\nWrote increment weights for up to {args.step_weights_budget} queries "
           f"to {weights_file} (pass it to 'faqstats session new --step-weights').")
    ))


def _budget_value(text):
    """``--budget``: a number of queries (an integer >= 1) or a fraction of the bank in (0, 1)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of queries or a fraction in (0, 1), got {text!r}") \
            from None
    if not (0 < value < 1 or (value >= 1 and value == int(value))):
        raise argparse.ArgumentTypeError(f"expected a number of queries (an integer) or a fraction in (0, 1), "
                                         f"got {text!r}")
    return value


def _fit_history_configured(args, matrix, ids, reader, harness, models):
    """``fit-history --budget B``: :func:`~faqstats.configure_from_history` on the history, every
    choice saved in ``--out`` (:func:`~faqstats.save_configuration`), the validation table beside it."""
    from .configure import configure_from_history
    from .io import save_configuration

    fit_options = [f"--{name.replace('_', '-')}" for name in
                   ("n_components", "regularization", "max_iter", "learning_rate", "prior_scale", "step_weights_budget")
                   if getattr(args, name) is not None]
    if fit_options:
        raise ValueError(f"{', '.join(fit_options)} set(s) up a factor model fit; --budget configures the predictor, "
                         "the policy and the increment weights itself (drop one of them).")
    N = matrix.shape[1]
    budget = int(round(args.budget * N)) if args.budget < 1 else int(args.budget)
    if not 3 <= budget <= N:
        raise ValueError(f"--budget {args.budget:g} is {budget} queries; the bank of {N} questions takes 3 to {N}.")
    cfg = configure_from_history(matrix, budget, n_runs=args.runs, random_state=args.seed,
                                 verbose=not (args.quiet or args.json))
    out = save_configuration(cfg, args.out, question_ids=ids, reader=reader)
    table_file = out.with_name(out.name.removesuffix(".npz") + ".validation.csv")
    cfg.table.to_csv(table_file, index=False)
    est = cfg.estimator
    predictor = "none (the FPC sample mean)" if est.factor_model is None else type(est.factor_model).__name__
    payload = {
        "model": str(out), "validation_table": str(table_file), "n_models": int(matrix.shape[0]),
        "n_questions": int(N), "budget": budget, "choice": cfg.choice, "predictor": predictor,
        "policy": repr(est.sampler), "predicted_ess": cfg.predicted_ess, "predict_every": cfg.predict_every,
        "step_weights": est.step_weights is not None, "question_ids": ids is not None, "harness": harness,
        "models": models, "reader": reader,
    }
    _emit(args, payload, f"{cfg.summary()}\n"
          f"Chose {cfg.choice}: predictor {predictor}, policy {est.sampler!r}, for {budget} queries.\n"
          f"Wrote {out}{'' if ids is not None else ' (no question ids: a session will number the questions 0..N-1)'}"
          f" and {table_file}.\nNext: faqstats session new DIR --model {out}")


def _session_new_configured(args):
    """``session new --model`` of a ``fit-history --budget`` file: exactly the configured estimator."""
    from .session import EvaluationSession
    from .io import load_model_file

    given = [option for option, value in (("--tau", args.tau), ("--step-weights", args.step_weights),
                                          ("--replace", args.replace or None), ("--budget-cost", args.budget_cost))
             if value is not None]
    if given:
        raise ValueError(f"{args.model} holds a configuration (fit-history --budget): its policy and weights are "
                         f"used; drop {', '.join(given)}.")
    if args.groups_from is None and (args.estimand != "micro" or args.min_group_share or args.stratify):
        raise ValueError("--estimand macro, --min-group-share and --stratify need --groups-from (tasks or a FILE).")
    ids = _read_question_ids(args.question_ids) if args.question_ids is not None else None
    _, _, stored_ids = load_model_file(args.model)
    bank_ids = ids or stored_ids
    groups = costs = None
    if args.groups_from is not None or args.costs_from is not None:
        if bank_ids is None:
            raise ValueError("--groups-from and --costs-from read the bank's question ids: give --question-ids.")
        groups = None if args.groups_from is None else _groups_from(args.groups_from, bank_ids)
        costs = None if args.costs_from is None else _costs_from(args.costs_from, bank_ids)
    session = EvaluationSession.from_configuration(
        args.model, ids, budget=args.budget, directory=args.directory, batch_size=args.batch_size,
        stop_when_width=args.stop_when_width, alpha=args.alpha, random_state=args.seed, groups=groups,
        estimand=args.estimand, min_group_share=args.min_group_share, stratify=args.stratify, costs=costs,
    )
    st = session.status()
    sampler = st["sampler"]
    policy = f"{sampler['class']}({', '.join(f'{k}={v!r}' for k, v in sampler['params'].items())})"
    _emit(args, st, f"Created a session in {session.directory} ({st['n_questions']} questions, budget {st['budget']}, "
          f"batch size {st['batch_size']}, seed {st['random_state']}) from the configuration in {args.model}: "
          f"predictor {type(session.factor_model).__name__ if session.factor_model is not None else 'none'}, "
          f"policy {policy}.\nNext: faqstats session next {session.directory}")


def _status_text(st):
    lines = [f"Session {st['directory']}: {st['n_answers']} of {st['n_questions']} questions answered, "
             f"{st['n_draws']} of {st['budget']} draws in the estimate, "
             + (f"done ({st['stop_reason']})." if st["done"] else f"{len(st['pending'])} pending.")]
    if st.get("estimand", "micro") != "micro":
        what = "the mean of the groups' accuracies" if st["estimand"] == "macro" else "a weighted accuracy"
        lines.append(f"Estimand: {st['estimand']} ({what}).")
    if st["estimate"] is not None:
        low, high = st["conf_int"]
        lines.append(f"Estimate {st['estimate']:.4f}, {100 * (1 - st['alpha']):g}% CI [{low:.4f}, {high:.4f}].")
    if st.get("costs"):
        budget = "" if st["budget_cost"] is None else (
            f" of a cost budget of {st['budget_cost']:.6g} ({st['budget']} draws at an expected "
            f"{st['cost_per_draw']:.4g} per draw)")
        lines.append(f"Cost spent {st['cost_spent']:.6g}{budget}.")
    if st.get("groups"):
        lines += _group_lines(st["groups"], st["alpha"])
    if st.get("n_clusters"):
        lines.append(f"Clusters: {st['n_clusters_asked']} of {st['n_clusters']} asked ({st['n_queries']} questions); "
                     "a draw asks a whole cluster and counts once all its answers are in.")
    if st["pending"]:
        lines.append("Pending: " + " ".join(map(str, st["pending"])))
    return "\n".join(lines)


def _group_lines(rows, alpha):
    """The per-group table of ``session status``/``report``: one line per group, aligned."""
    level = f"{100 * (1 - alpha):g}%"
    simultaneous = "simultaneous_lower" in rows[0]
    head = ["group", "questions", "asked", "estimate", "std_err", "lower", "upper"]
    if simultaneous:
        head += ["simult_lower", "simult_upper"]
    body = []
    for r in rows:
        cells = [str(r["group"]), str(r["n_questions"]), str(r["n_asked"])] + [
            f"{r[k]:.4f}" for k in ("estimate", "std_error", "lower", "upper")]
        if simultaneous:
            cells += [f"{r['simultaneous_lower']:.4f}", f"{r['simultaneous_upper']:.4f}"]
        body.append(cells)
    widths = [max(len(row[k]) for row in [head, *body]) for k in range(len(head))]
    fmt = lambda row: "  ".join(c.ljust(w) if k == 0 else c.rjust(w) for k, (c, w) in enumerate(zip(row, widths)))
    note = f"Groups ({len(rows)}), {level} intervals" + (
        " (simult: for all groups at once):" if simultaneous else ":")
    return [note, fmt(head), *map(fmt, body)]


# -- --groups-from and --costs-from: a value per question id, from a file -----------------------
def _read_table_file(path):
    """The text of ``path``, in the command line's words when it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text (expected a .csv or .json file).") from None
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}.") from None


def _question_values(path, ids, kind):
    """``{question id: raw value}`` from a CSV (``id,value`` rows, an optional header naming a
    ``kind`` column) or JSON file (``{id: value}`` or ``[[id, value], ...]``) covering the bank."""
    text = _read_table_file(path)
    known = {str(q) for q in ids}
    pairs = []  # (where, id, value)
    if Path(path).suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise ValueError(f"{path} is not valid JSON ({exc}).") from None
        if isinstance(data, dict):
            pairs = [(f"{path}", str(q), v) for q, v in data.items()]
        elif isinstance(data, list) and all(isinstance(x, list) and len(x) == 2 for x in data):
            pairs = [(f"{path} entry {k}", str(x[0]), x[1]) for k, x in enumerate(data)]
        else:
            raise ValueError(f"{path} must hold a JSON object {{question id: {kind}}} or a list of [id, {kind}] pairs.")
    else:
        import csv
        import io

        dialect = "excel-tab" if Path(path).suffix.lower() == ".tsv" else "excel"
        rows = [(n, row) for n, row in enumerate(csv.reader(io.StringIO(text), dialect), start=1)
                if any(cell.strip() for cell in row)]
        if not rows:
            raise ValueError(f"{path} is empty: expected rows 'question_id,{kind}'.")
        column = 1
        first = [c.strip() for c in rows[0][1]]
        if first[0] not in known:  # a header: the column named after the kind, else the second one
            names = [c.lower() for c in first]
            named = [k for k, c in enumerate(names) if c in (kind, kind + "s")]
            if named:
                column = named[0]
            elif len(first) != 2:
                raise ValueError(f"{path}: its header {first} has no {kind!r} column (and more than two columns).")
            rows = rows[1:]
        elif len(first) != 2:
            raise ValueError(f"{path}:{rows[0][0]}: without a header a row is 'question_id,{kind}', got {len(first)} "
                             f"cells; add a header naming the {kind!r} column.")
        for n, row in rows:
            if len(row) <= column:
                raise ValueError(f"{path}:{n}: expected a {kind} in column {column + 1}, got {row}.")
            pairs.append((f"{path}:{n}", row[0].strip(), row[column].strip()))
    values, extra = {}, []
    for where, qid, value in pairs:
        if qid in values:
            raise ValueError(f"{where}: question id {qid!r} appears more than once.")
        values[qid] = (where, value)
        if qid not in known:
            extra.append(qid)
    missing = [str(q) for q in ids if str(q) not in values]
    if missing:
        shown = ", ".join(map(repr, missing[:5])) + (" ..." if len(missing) > 5 else "")
        raise ValueError(f"{path} has no {kind} for {len(missing)} of the bank's {len(ids)} question ids: {shown}.")
    if extra:
        shown = ", ".join(map(repr, extra[:5])) + (" ..." if len(extra) > 5 else "")
        _note(f"{path}: {len(extra)} id(s) that are not questions of the session's bank are ignored: {shown}.")
    return values


def _groups_from(source, ids):
    """Group labels of ``ids`` (a list in the bank's order): ``tasks`` (the ``<task>`` of each
    ``<task>/<id>``) or a file."""
    if source == "tasks" and not Path(source).exists():
        from .integrations import task_groups

        try:
            return task_groups([str(q) for q in ids])
        except (ValueError, TypeError) as exc:
            raise ValueError(f"--groups-from tasks needs harness question ids '<task>/<id>': {exc}") from None
    return _labels_from(source, ids, "group")


def _labels_from(path, ids, column):
    """A label (``column``: a group or a cluster) for each of ``ids`` (the bank's order), from a
    file; labels are non-empty strings or integers, returned as strings."""
    values = _question_values(path, ids, column)
    labels = []
    for qid in ids:
        where, value = values[str(qid)]
        if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
            raise ValueError(f"{where}: the {column} of question id {qid!r} must be a non-empty string or an "
                             f"integer, got {value!r}.")
        labels.append(str(value))
    return labels


def _costs_from(path, ids):
    """A positive cost for each of ``ids`` (the bank's order), from a file."""
    values = _question_values(path, ids, "cost")
    costs = []
    for qid in ids:
        where, value = values[str(qid)]
        try:
            if isinstance(value, bool):
                raise TypeError
            cost = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: the cost of question id {qid!r} is not a number, got {value!r}.") from None
        if not (np.isfinite(cost) and cost > 0):
            raise ValueError(f"{where}: the cost of question id {qid!r} must be finite and positive, got {value!r}.")
        costs.append(cost)
    return costs




def _session_new(args):
    from .sampling import HybridSampler
    from .session import EvaluationSession
    from .io import load_step_weights

    from .io import load_factor_model, load_model_file

    if load_model_file(args.model)[1].get("configuration") is not None:  # from 'fit-history --budget'
        return _session_new_configured(args)
    if (args.budget is None) == (args.budget_cost is None):
        raise ValueError("give --budget (questions) or --budget-cost (cost units, with --costs-from), one of them.")
    if args.budget_cost is not None and args.costs_from is None:
        raise ValueError("--budget-cost needs --costs-from FILE (a positive cost per question id).")
    if args.groups_from is None and (args.estimand != "micro" or args.min_group_share or args.stratify):
        raise ValueError("--estimand macro, --min-group-share and --stratify need --groups-from (tasks or a FILE).")
    ids = _read_question_ids(args.question_ids) if args.question_ids is not None else None
    groups = costs = clusters = None
    if args.groups_from is not None or args.costs_from is not None or args.clusters_from is not None:
        fm = load_factor_model(args.model)  # the bank's ids, to read the files by
        bank_ids = ids if ids is not None else (fm.question_ids_ or [str(j) for j in range(fm.n_features_in_)])
        groups = None if args.groups_from is None else _groups_from(args.groups_from, bank_ids)
        costs = None if args.costs_from is None else _costs_from(args.costs_from, bank_ids)
        clusters = None if args.clusters_from is None else _labels_from(args.clusters_from, bank_ids, "cluster")
    session = EvaluationSession.create(
        args.directory, args.model, ids, sampler=HybridSampler(tau=0.5 if args.tau is None else args.tau,
                                                               replace=args.replace),
        budget=100 if args.budget is None else args.budget, batch_size=args.batch_size,
        stop_when_width=args.stop_when_width, alpha=args.alpha,
        step_weights=None if args.step_weights is None else load_step_weights(args.step_weights).weights,
        random_state=args.seed, groups=groups, estimand=args.estimand, min_group_share=args.min_group_share,
        stratify=args.stratify, costs=costs, budget_cost=args.budget_cost, clusters=clusters,
    )
    st = session.status()
    extra = "" if groups is None else f", {len(set(groups))} groups, estimand {args.estimand}"
    if clusters is not None:
        extra += f", {st['n_clusters']} clusters (a draw asks a whole cluster)"
    if costs is not None:
        extra += ", costs per question" + ("" if args.budget_cost is None else
                                           f", cost budget {args.budget_cost:g} = {st['budget']} draws")
    _emit(args, st, f"Created a session in {session.directory} ({st['n_questions']} questions, budget {st['budget']}, "
          f"batch size {st['batch_size']}, seed {st['random_state']}{extra}).\n"
          f"Next: faqstats session next {session.directory}")


def _session_next(args):
    if args.print is not None and (args.format == "ids" or args.json):
        raise ValueError("--print prints one bare value of --format lm-eval or --format inspect (and not --json).")
    session = _load(args)
    ids, probabilities = session.next_questions(args.n)
    payload = {"ids": ids, "probabilities": probabilities, "done": session.done, "stop_reason": session.stop_reason}
    done = f"Done ({session.stop_reason}): nothing left to ask. See: faqstats session report {session.directory}"
    if args.format == "ids":
        _emit(args, payload, "\n".join(f"{q}\t{p:.6g}" for q, p in zip(ids, probabilities)) if ids else done)
        return
    from .integrations._harness import round_arguments

    key = "samples" if args.format == "lm-eval" else "sample_id"
    harness = round_arguments(args.format, ids) if ids else {"tasks": [], key: None}
    payload.update(harness)
    if not ids:  # with --print: nothing on stdout, so that a shell loop ends on an empty value
        if args.print is None:
            _emit(args, payload, done)
        else:
            print(f"faqstats: {done}", file=sys.stderr)
        return
    # the values as the harness takes them: lm-eval --tasks a,b --samples JSON; inspect --sample-id, tasks one a line
    value = json.dumps(harness["samples"]) if args.format == "lm-eval" else harness["sample_id"]
    tasks = ",".join(harness["tasks"]) if args.format == "lm-eval" else "\n".join(harness["tasks"])
    if args.print is not None:
        print(tasks if args.print == "tasks" else value)
        return
    line = ["--tasks", tasks, "--samples", value] if args.format == "lm-eval" else ["--sample-id", value]
    _emit(args, payload, shlex.join(line))


def _pairs_from_json(path):
    data = json.loads(sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8"))
    if isinstance(data, dict):
        return list(data.items())
    if isinstance(data, list):
        pairs = []
        for item in data:
            if isinstance(item, dict) and "id" in item and ("outcome" in item or "value" in item):
                pairs.append((item["id"], item.get("outcome", item.get("value"))))
            elif isinstance(item, list) and len(item) == 2:
                pairs.append(tuple(item))
            else:
                raise ValueError(
                    f"{path}: each entry must be [id, outcome] or {{\"id\": ..., \"outcome\": ...}}, got {item!r}."
                )
        return pairs
    raise ValueError(f"{path} must hold a JSON object {{id: outcome}} or a list of [id, outcome] pairs.")


def _outcome(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        raise ValueError(f"outcome {text!r} is not a number in [0, 1].") from None


def _session_record(args):
    harness, paths = _harness_of(args)
    if sum((bool(args.pairs), args.from_json is not None, harness is not None)) > 1:
        raise ValueError("give answers one way: ID VALUE pairs, --from-json, --lm-eval or --inspect.")
    options = _reader_options(args, harness)
    if harness is not None:
        return _record_harness(args, harness, paths, options)
    if args.from_json is not None:
        pairs = _pairs_from_json(args.from_json)
    else:
        if not args.pairs or len(args.pairs) % 2:
            raise ValueError(f"expected ID VALUE pairs (or --from-json, --lm-eval, --inspect), "
                             f"got {len(args.pairs)} argument(s).")
        pairs = [(q, _outcome(v)) for q, v in zip(args.pairs[::2], args.pairs[1::2])]
    session = _load(args)
    session.record([str(q) for q, _ in pairs], [v if isinstance(v, (int, float)) else _outcome(v) for _, v in pairs])
    st = session.status()
    _emit(args, st, f"Recorded {len(pairs)} answer(s).\n" + _status_text(st))


def _record_harness(args, harness, paths, given):
    """Record the pending questions' outcomes, read from a harness run's output (all or nothing)."""
    from .integrations._common import split_question_id
    from .integrations._harness import read_round

    session = _load(args)
    if session.done:
        raise ValueError(f"The session is done ({session.stop_reason}); no question is pending.")
    pending = session.pending.ids
    if not pending:
        raise ValueError(f"no question is pending: run 'faqstats session next {args.directory} --format {harness}', "
                         "then the harness on what it prints.")
    try:
        tasks = {split_question_id(str(q))[0] for q in session.question_ids}
    except (ValueError, TypeError):  # ids that are no harness ids are refused below, by name
        tasks = None
    else:
        _check_option_tasks(given, tasks, "the session's bank")
    options = _recording_options(session, harness, given, tasks)
    with _reading_harness(harness, after=" Nothing was recorded."):
        values, ignored = read_round(harness, paths, pending, **_reader_kwargs(options))
    session.record(pending, values.tolist())
    st = session.status()
    where = paths if isinstance(paths, str) else ", ".join(paths)
    note = "" if not ignored else (
        f" ({len(ignored)} other scored sample(s) there were not pending and are ignored: "
        + ", ".join(map(repr, ignored[:5])) + (" ..." if len(ignored) > 5 else "") + ")")
    _emit(args, {**st, "recorded": pending, "ignored": ignored, "reader": {"harness": harness, "options": options}},
          f"Recorded {len(pending)} answer(s) from {where}{note}.\n" + _status_text(st))


def _recording_options(session, harness, given, tasks):
    """The reader options of ``session record``: those stored with the session's factor model by
    ``fit-history`` (when it read the same harness), each replaced by the one given on the command
    line, with a note when that reads a task of the bank (``tasks``) otherwise; the reader's
    defaults for the rest."""
    stored = (getattr(session.factor_model, "metadata_", None) or getattr(session._store, "model_metadata", None)
              or {}).get("reader")
    if stored is not None and stored["harness"] != harness:
        _note(f"the factor model was fitted on {stored['harness']} output; its reader options do not apply to "
              f"--{harness}.")
        stored = None
    base = {} if stored is None else stored["options"]
    for name, spec in given.items():
        if name not in base:
            continue
        old = base[name]
        def reads(opt, task):
            return opt["tasks"].get(task, opt["default"])

        differ = old != spec if tasks is None else sorted(t for t in tasks if reads(old, t) != reads(spec, t))
        if differ:
            which = "" if differ is True else f" for task(s) {', '.join(differ)}"
            _note(f"reading with {_option_words(name, spec)}, not the {_option_words(name, old)} that 'faqstats "
                  f"fit-history' stored with the factor model{which}; read every round of a session the same way.")
    return _all_reader_options(harness, {**base, **given})


def _session_status(args):
    st = _load(args).status(simultaneous=args.simultaneous)
    _emit(args, st, _status_text(st))


def _session_report(args):
    session = _load(args)
    payload = session.status(simultaneous=args.simultaneous)
    text = [_status_text(payload)]
    if session.n_draws >= 2:
        result = session.result()
        if result.stop_reason is None:  # the table needs a string
            result = dataclasses.replace(result, stop_reason="(still running)")
        text.append(str(result.summary(alpha=session.alpha)))
    payload["trajectory"] = session.trajectory().tolist()
    cs = session.confidence_sequence()
    payload["confidence_sequence"] = None if cs is None else cs.tolist()
    if args.png is not None:
        session.plot(args.png)
        payload["png"] = str(args.png)
        text.append(f"Plot written to {payload['png']}")
    _emit(args, payload, "\n".join(text))


def _question_table(args):
    """Write a CSV ``question_id,task,group,cost`` from harness output, for ``session new
    --groups-from``/``--costs-from``."""
    import csv

    from .integrations import (read_inspect_clusters, read_inspect_costs, read_inspect_groups, read_lm_eval_costs,
                               read_lm_eval_groups, task_groups)

    harness, paths = _harness_of(args)
    group = args.group
    clusters = None
    if harness == "lm-eval":
        if args.cluster_field is not None:
            raise ValueError("--cluster-field reads inspect sample metadata: it goes with --inspect (lm-eval logs "
                             "no cluster of a document; write a question_id,cluster file for --clusters-from).")
        if group.startswith("metadata."):
            raise ValueError("--group metadata.FIELD reads inspect sample metadata: it goes with --inspect.")
        if args.tokens != "total":
            raise ValueError("--tokens goes with --inspect: lm-eval logs no token counts (the cost is the prompt's "
                             "length in characters).")
        with _reading_harness(harness):
            groups = read_lm_eval_groups(paths, level=group)
            costs = read_lm_eval_costs(paths)
        unit = "characters of the requests"
    else:
        if group in ("parent", "group"):
            raise ValueError(f"--group {group} reads lm-eval's task groups: with --inspect use task or metadata.FIELD.")
        field = group.removeprefix("metadata.") if group.startswith("metadata.") else None
        if field == "":
            raise ValueError("--group metadata.FIELD needs a FIELD (a key of the samples' metadata).")
        if args.cluster_field == "":
            raise ValueError("--cluster-field needs a FIELD (a key of the samples' metadata).")
        with _reading_harness(harness):
            groups = read_inspect_groups(paths, field)
            if args.cluster_field is not None:
                clusters = read_inspect_clusters(paths, args.cluster_field)
            try:
                costs = read_inspect_costs(paths, tokens=args.tokens)
            except ValueError as exc:
                if "No sample with model_usage" not in str(exc):
                    raise
                costs = {}
        unit = f"{args.tokens} tokens per epoch"
    ids = list(groups) + [q for q in costs if q not in groups]
    tasks = task_groups(ids)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["question_id", "task", "group", "cost"] + ([] if clusters is None else ["cluster"]))
        for qid, task in zip(ids, tasks):
            cost = costs.get(qid)
            row = [qid, task, groups.get(qid, ""), "" if cost is None else f"{cost:.10g}"]
            writer.writerow(row + ([] if clusters is None else [clusters.get(qid, "")]))
    no_cost = [q for q in ids if q not in costs]
    if no_cost:
        _note(f"{len(no_cost)} question(s) have no token counts in the logs (no model_usage), their cost is left "
              f"empty: {', '.join(map(repr, no_cost[:5]))}{' ...' if len(no_cost) > 5 else ''}.")
    payload = {"out": str(out), "n_questions": len(ids), "n_groups": len(set(groups.values())),
               "group": group, "cost": unit, "missing_costs": no_cost}
    also = ""
    if clusters is not None:
        payload["n_clusters"], payload["cluster_field"] = len(set(clusters.values())), args.cluster_field
        also = f", {payload['n_clusters']} clusters (metadata.{args.cluster_field})"
    _emit(args, payload, f"Wrote {out}: {len(ids)} questions, {payload['n_groups']} groups ({group}){also}, "
          f"cost = {unit}.\nUse it with: faqstats session new DIR --model MODEL --groups-from {out} --costs-from {out} "
          + ("..." if clusters is None else f"(or --clusters-from {out} --costs-from {out}) ..."))


def _finish(parser, func):
    """``--json`` (last in the help), then the function that runs the command."""
    parser.add_argument("--json", action="store_true", help="print one JSON object (errors too) for scripting")
    parser.set_defaults(func=func)


def _add_fit_history_parser(sub):
    fit = sub.add_parser("fit-history", help="fit a factor model on earlier models' outcomes (.npz, lm-eval or "
                                             "inspect output) and save it; with --budget, configure the whole "
                                             "estimator from them (PAIEstimator.from_history) and save that")
    source = fit.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", help=".npz file with an 'outcomes' models x questions matrix (-1 missing)")
    source.add_argument("--lm-eval", nargs="+", action="extend", metavar="DIR",
                        help="lm-eval --output_path directories (runs with --log_samples; or samples files): "
                             "question ids '<task>/<doc_id>', a model per directory")
    source.add_argument("--inspect", nargs="+", action="extend", metavar="LOGDIR",
                        help="inspect-ai log directories or log files: question ids '<task>/<sample id>', "
                             "a model per eval.model")
    fit.add_argument("--out", required=True, help="where to write the fitted model (.npz)")
    fit.add_argument("--budget", type=_budget_value, default=None, metavar="B",
                     help="configure for sessions of B queries (or a fraction of the bank in (0, 1), e.g. 0.1) as "
                          "PAIEstimator.from_history does: cross-fitted validation on the history chooses the "
                          "predictor (factor model, surrogates, stack) or the sample mean, the policy and the "
                          "increment weights; all saved in --out, the validation table beside it (.validation.csv)")
    fit.add_argument("--runs", type=int, default=None, metavar="R",
                     help="with --budget: validation runs per candidate (default: 2000 on small banks, fewer on "
                          "large ones)")
    fit.add_argument("--n-components", type=int, default=None, help="rank k (default 16)")
    fit.add_argument("--regularization", type=float, default=None,
                     help="regularization: AdamW's weight decay (default 0.1)")
    fit.add_argument("--max-iter", type=int, default=None, help="optimiser steps (default 2000)")
    fit.add_argument("--learning-rate", type=float, default=None, help="AdamW learning rate (default 0.01)")
    fit.add_argument("--question-ids", default=None,
                     help="file of question ids (one per line, or a .json list); default: the .npz's "
                          "'question_ids' or 'items' array when present")
    fit.add_argument("--step-weights-budget", type=int, default=None, metavar="B",
                     help="also learn increment weights for sessions of up to B queries by cross-fitting on the "
                          "history (written next to --out as .step_weights.json)")
    fit.add_argument("--prior-scale", type=float, default=None,
                     help="new model's prior covariance = this x the historical factors' covariance (default 1)")
    fit.add_argument("--device", default="auto", help="torch device (default auto)")
    fit.add_argument("--seed", type=int, default=0, help="seed of the initialisation (default 0)")
    fit.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_reader_options(fit)
    _finish(fit, _fit_history)


def _add_reader_options(parser, recording=False):
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


def _add_question_table_parser(sub):
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
    _finish(table, _question_table)


def _add_session_parser(sub):
    session = sub.add_parser("session", help="a resumable evaluation: new, next, record, status, report")
    ssub = session.add_subparsers(dest="session_command", required=True)

    new = ssub.add_parser("new", help="start a session in DIR from a saved factor model")
    new.add_argument("directory", help="session directory (created)")
    new.add_argument("--model", required=True, help="factor model saved by 'faqstats fit-history' (.npz); one "
                     "saved with --budget brings its predictor, policy, weights and budget")
    new.add_argument("--budget", type=int, default=None, help="maximum number of queries (or --budget-cost; default "
                     "a configured model's)")
    new.add_argument("--batch-size", type=int, default=1, help="questions handed out per round (default 1)")
    new.add_argument("--stop-when-width", type=float, default=None,
                     help="stop once the anytime-valid interval is at most this wide")
    new.add_argument("--alpha", type=float, default=0.05, help="significance level of the intervals (default 0.05)")
    new.add_argument("--seed", type=int, default=0, help="seed of the draws (default 0)")
    new.add_argument("--tau", type=float, default=None, help="uniform floor of the hybrid policy (default 0.5; "
                     "a configured model's own)")
    new.add_argument("--step-weights", default=None, metavar="FILE",
                     help="increment weights from 'faqstats fit-history --step-weights-budget' (.json)")
    new.add_argument("--replace", action="store_true", help="sample with replacement (default: without)")
    new.add_argument("--question-ids", default=None,
                     help="file of the bank's question ids (default: those stored with the model)")
    grouped = new.add_argument_group(
        "groups, costs and clusters", "FILE: a .csv (.tsv) of 'question_id,VALUE' rows (a header may name a 'group', "
        "'cost' or 'cluster' column) "
        "or a .json object {question id: VALUE}, covering every question of the bank (other ids are ignored, "
        "with a note)")
    grouped.add_argument("--groups-from", default=None, metavar="FILE|tasks",
                         help="a group label per question: from FILE, or 'tasks' for the task of each harness id "
                              "'<task>/<id>' (a file named tasks: ./tasks); status and report then show every "
                              "group's estimate")
    grouped.add_argument("--estimand", choices=["micro", "macro"], default="micro",
                         help="micro: the bank's accuracy (default); macro: the mean of the groups' accuracies")
    grouped.add_argument("--min-group-share", type=float, default=0.0, metavar="F",
                         help="mix this share of a law giving every group the same mass into the policy (default 0)")
    grouped.add_argument("--stratify", action="store_true",
                         help="a fixed number of draws per group (not with --costs-from)")
    grouped.add_argument("--costs-from", default=None, metavar="FILE",
                         help="a positive cost per question (tokens, dollars): the policy weighs its scores by "
                              "1/sqrt(cost) and status reports the cost spent")
    grouped.add_argument("--budget-cost", type=float, default=None, metavar="C",
                         help="a budget in cost units instead of --budget: the draws it buys in expectation, fixed "
                              "at the start")
    grouped.add_argument("--clusters-from", default=None, metavar="FILE",
                         help="a cluster id per question (questions on one passage, image, prompt): every draw asks "
                              "a whole cluster, --budget counts cluster draws (with --groups-from: every cluster in "
                              "one group, --estimand micro)")
    _finish(new, _session_new)

    nxt = ssub.add_parser("next", help="print the questions to ask now (the pending ones again until answered)")
    nxt.add_argument("directory")
    nxt.add_argument("--n", type=int, default=None, help="size of a new round (default: the batch size)")
    nxt.add_argument("--format", choices=["ids", "lm-eval", "inspect"], default="ids",
                     help="ids: one 'ID<TAB>probability' a line (default); lm-eval: the --tasks and --samples "
                          "options to run them; inspect: the --sample-id option")
    nxt.add_argument("--print", choices=["tasks", "samples"], default=None,
                     help="print only this value (for \"$(...)\"; nothing once done): the --tasks value "
                          "(lm-eval; inspect: one task a line), or the --samples JSON (lm-eval) / --sample-id "
                          "value (inspect)")
    _finish(nxt, _session_next)

    rec = ssub.add_parser("record", help="record answers: ID VALUE [ID VALUE ...] (VALUE in [0, 1]), or those "
                                         "of the pending questions from a harness run")
    rec.add_argument("directory")
    rec.add_argument("pairs", nargs="*", metavar="ID VALUE", help="question id and its outcome")
    rec.add_argument("--from-json", default=None, metavar="FILE",
                     help="JSON {id: outcome} or [[id, outcome], ...] ('-' reads stdin)")
    rec.add_argument("--lm-eval", action="append", metavar="OUTDIR",
                     help="the --output_path of an lm-eval run (--log_samples) on the pending questions: every "
                          "one must be there; other samples are ignored (repeat for several)")
    rec.add_argument("--inspect", action="append", metavar="LOGDIR",
                     help="the --log-dir (or a log file) of an inspect eval run on the pending questions: every "
                          "one must be there; other samples are ignored (repeat for several)")
    _add_reader_options(rec, recording=True)
    _finish(rec, _session_record)

    simultaneous = "with --groups-from: also the intervals that hold for all groups at once"
    stat = ssub.add_parser("status", help="progress, pending questions and the estimate so far (and every group's)")
    stat.add_argument("directory")
    stat.add_argument("--simultaneous", action="store_true", help=simultaneous)
    _finish(stat, _session_status)

    rep = ssub.add_parser("report", help="the estimate with its interval; --png plots it as queries accumulate")
    rep.add_argument("directory")
    rep.add_argument("--png", default=None, metavar="FILE", help="write a plot of the running estimate and interval")
    rep.add_argument("--simultaneous", action="store_true", help=simultaneous)
    _finish(rep, _session_report)


def build_parser():
    parser = argparse.ArgumentParser(prog="faqstats", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run FAQ vs uniform sampling on an embedded synthetic bank")
    demo.add_argument("--out", default="faqstats-demo", help="directory for the plot (default: faqstats-demo)")
    demo.add_argument("--budgets", type=int, nargs="+", default=[25, 50, 100], help="query budgets")
    demo.add_argument("--models", type=int, default=10, help="new models to evaluate")
    demo.add_argument("--seeds", type=int, default=5, help="seeds per model and budget")
    demo.add_argument("--seed", type=int, default=0, help="seed of the synthetic bank")
    demo.add_argument("--quiet", action="store_true", help="no progress bars")
    demo.set_defaults(func=_demo)
    _add_experiment_parser(sub)
    draw = sub.add_parser("draw-bank", help="draw a fixed semi-synthetic 0/1 bank from published factors (.npz)")
    draw.add_argument("--factors", required=True, help=".npz with model_factors (M, k) and question_factors (N, k)")
    draw.add_argument("--out", required=True, help="output .npz (an 'outcomes' int8 matrix, as --data expects)")
    draw.add_argument("--seed", type=int, default=0, help="seed of the Bernoulli draws (default 0)")
    draw.set_defaults(func=_draw_bank)
    _add_fit_history_parser(sub)
    _add_session_parser(sub)
    _add_question_table_parser(sub)
    return parser


def main(argv=None):
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # ``session record DIR --json ID VALUE``: argparse gives the pairs after an option back as extras
    if getattr(args, "func", None) is _session_record and extra and not any(x.startswith("-") for x in extra):
        args.pairs, extra = list(args.pairs) + extra, []
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.func(args) or 0
    except (ValueError, TypeError, KeyError, OSError, RuntimeError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        message = " ".join(str(message).split())  # one line
        if getattr(args, "json", False):
            print(json.dumps({"error": message}))
        print(f"faqstats: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
