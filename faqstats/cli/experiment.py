"""``faqstats demo``, ``experiment`` and ``draw-bank``: studies of the methods on banks of outcomes.
:mod:`faqstats.experiments` (it imports torch) is imported when a command runs or its help is shown."""

import argparse
import contextlib
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ..datasets import draw_bank_from_factors, load_response_matrix
from ..factor_model import LogisticFactorModelCV
from ..io.npz import open_array_file, read_array
from .common import given, matrix_question_ids, question_files

_SCHEDULER_TIMEOUT = 30  # seconds to reach --scheduler


def run_demo_command(args):
    from ..experiments import format_summary
    from ..experiments.demo import DEMO_METHODS, run_demo

    demo = run_demo(budgets=tuple(args.budgets), n_new=args.models, seeds=args.seeds, random_state=args.seed,
                    verbose=not args.quiet)
    history, fm = demo.bank.history, demo.factor_model
    print(f"Synthetic bank: {history.shape[0]} historical models x {history.shape[1]} questions "
          f"({100 * np.isnan(history).mean():.0f}% missing), {len(demo.bank.new_accuracy)} new models.")
    print(f"Factor model: k={fm.n_components}, regularization={fm.regularization}, final training loss "
          f"{fm.loss_curve_[-1]:.4f}.")
    print("".join(f"\n  {name}: {what}" for name, what in DEMO_METHODS.items()) + "\n")
    print(demo.examples(budget=args.budgets[len(args.budgets) // 2]), format_summary(demo.summary()), sep="\n\n")
    print(f"\nPlot written to {demo.plot(Path(args.out) / 'width_vs_budget.png')}")


def _factor_model(args):
    """The factor model of ``experiment``: options given (None: the runner's default), or the
    cross-validated one with ``--cv-components``/``--cv-regularization``."""
    if not (args.cv_components or args.cv_regularization):
        return given(args, "n_components", "regularization", "max_iter", "solver", "prior_scale") or None
    if args.n_components is not None or args.regularization is not None:
        raise ValueError("--cv-components/--cv-regularization choose k and the regularization: drop "
                         "--n-components/--regularization.")
    if args.prior_scale is not None:
        raise ValueError("--prior-scale is not passed to the cross-validated factor model; drop one of them.")
    return LogisticFactorModelCV(
        n_components_grid=tuple(args.cv_components or (16,)), cv=args.cv_folds, verbose=not args.quiet,
        regularization_grid=tuple(args.cv_regularization or (0.1,)), max_iter=args.max_iter or 2000,
        solver=args.solver or "adamw", random_state=0)


#: ``experiment``'s options the leaderboard experiment does not take (all default to None)
_NOT_LEADERBOARD = ("groups_from", "costs_from", "clusters_from", "cluster_size", "scheduler", "n_jobs", "backend",
                    "weight_runs", "max_models")
_DEFAULT_METHODS = ["faq", "uniform-fpc", "ht-uniform"]


def run_leaderboard_command(args):
    """``experiment --leaderboard K``: groups of K test models at once, against K FPC sample means with Bonferroni."""
    from ..experiments import (format_leaderboard_summary, run_leaderboard_experiment, split_matrix,
                               summarize_leaderboard, write_csv)

    start = time.perf_counter()
    ignored = [f"--{name.replace('_', '-')}" for name in _NOT_LEADERBOARD if getattr(args, name) is not None]
    if args.methods != _DEFAULT_METHODS:
        ignored.append("--methods")
    if ignored:
        raise ValueError(f"--leaderboard runs the leaderboard experiment, which does not take {', '.join(ignored)}; "
                         "drop them.")
    matrix, _ = load_response_matrix(args.data)
    history, new, new_rows = split_matrix(matrix, history_fraction=args.history_fraction, split_seed=args.split_seed,
                                          complete_rows=args.complete_rows, n_full_obs=args.n_full_obs,
                                          p_obs=args.p_obs)
    result = run_leaderboard_experiment(new, history, args.leaderboard, budgets=tuple(args.budgets or (0.05, 0.10)),
                                        n_groups=args.groups or 100, design=args.design or "independent",
                                        factor_model=_factor_model(args), configure=args.configure,
                                        random_state=args.seed,
                                        verbose=not args.quiet)
    out = Path(args.out)
    by_kind = summarize_leaderboard(result.records, by_kind=True)
    files = [write_csv(result.records, out / "leaderboard_records.csv"),
             write_csv(result.summary, out / "leaderboard_summary.csv"),
             write_csv(by_kind, out / "leaderboard_summary_by_kind.csv")]
    (out / "leaderboard_summary.json").write_text(result.summary.to_json(orient="records", indent=2))
    (out / "leaderboard_summary.md").write_text(format_leaderboard_summary(result.summary, markdown=True) + "\n")
    config = dict(result.config, data=str(args.data), history_fraction=args.history_fraction,
                  split_seed=args.split_seed, complete_rows=args.complete_rows, p_obs=args.p_obs,
                  history_shape=list(history.shape), new_rows=np.asarray(new_rows).tolist())
    if hasattr(result.factor_model, "best_params_"):
        config["factor_model_cv"] = {k: float(v) for k, v in result.factor_model.best_params_.items()}
    (out / "config.json").write_text(json.dumps(config, indent=2))
    print(f"{args.data}: history {history.shape[0]} models x {history.shape[1]} questions, {new.shape[0]} test "
          f"models; groups of {', '.join(map(str, result.config['K']))}, {result.config['n_groups']} group-runs each "
          f"(half close in accuracy, half far apart).")
    if result.fit_seconds:
        print(f"Factor model fit: {result.fit_seconds:.1f} s.")
    print("\n" + format_leaderboard_summary(result.summary))
    print(f"Wrote {', '.join(p.name for p in files)}, leaderboard_summary.json, leaderboard_summary.md, config.json "
          f"to {out} ({time.perf_counter() - start:.1f} s).")


def run_experiment_command(args):
    if args.leaderboard is not None:
        return run_leaderboard_command(args)
    if args.design is not None or args.groups is not None or args.configure:
        raise ValueError("--design, --groups and --configure belong to the leaderboard experiment: add --leaderboard K.")
    from ..experiments import (DEFAULT_BUDGETS, format_summary, per_model_coverage, run_experiment, summarize,
                               summarize_groups, write_csv)
    from ..experiments.plots import plot_all, plot_step_weights

    start = time.perf_counter()
    matrix, meta = load_response_matrix(args.data)
    if args.clusters_from is not None and args.cluster_size is not None:
        raise ValueError("give --clusters-from FILE or --cluster-size K, not both.")
    groups, costs, clusters = question_files(args, lambda: matrix_question_ids(meta) or
                                             [str(j) for j in range(matrix.shape[1])])
    if args.cluster_size is not None:  # consecutive questions, K at a time
        if args.cluster_size < 1:
            raise ValueError(f"--cluster-size must be a positive number of questions, got {args.cluster_size}.")
        clusters = np.arange(matrix.shape[1]) // args.cluster_size
    factor_model = _factor_model(args)
    if args.scheduler is not None and args.backend not in (None, "dask"):
        raise ValueError(f"--scheduler runs the sweep on a dask cluster (joblib's dask backend): drop --backend "
                         f"{args.backend}.")
    # on a cluster: every worker of it (the seeds split into as many groups), unless --n-jobs says otherwise
    n_jobs = args.n_jobs if args.n_jobs is not None else (-1 if args.scheduler is not None else 1)
    with _on_cluster(args.scheduler):
        result = run_experiment(
            matrix, history_fraction=args.history_fraction, split_seed=args.split_seed, seeds=args.seeds,
            complete_rows=args.complete_rows, n_full_obs=args.n_full_obs, p_obs=args.p_obs, max_models=args.max_models,
            budgets=tuple(args.budgets or DEFAULT_BUDGETS), methods=tuple(args.methods), factor_model=factor_model,
            random_state=args.seed, n_jobs=n_jobs, backend=None if args.scheduler is not None else args.backend,
            tuning={"seeds": args.tune_seeds}, step_weights=given(args, "weight_runs") and {"n_runs": args.weight_runs},
            groups=groups, costs=costs, clusters=clusters, verbose=not args.quiet)
    summary, models, out = summarize(result.records), per_model_coverage(result.records), Path(args.out)
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
        tables = [pd.DataFrame({"method": m, "budget": b, "step": np.arange(1, b + 1),
                                "step_variance": sw.step_variance, "smoothed_variance": sw.smoothed_variance,
                                "weight": sw.weights})
                  for (m, b), sw in result.step_weights.items()]
        files += [write_csv(pd.concat(tables, ignore_index=True), out / "step_weights.csv"),
                  plot_step_weights(result.step_weights, out / "step_weights.png")]
    group_summary = None
    if result.group_records is not None:  # every group's estimate in every run, and its coverage
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
    print(f"{args.data}: history {n_hist} models x {n_q} questions ({100 * result.history_observed:.1f}% observed), "
          f"{result.new_rows.size} new models, {len(result.config['seeds'])} seed(s).")
    if result.factor_model is not None:
        print(f"Factor model fit: {result.fit_seconds:.1f} s.")
        if hasattr(result.factor_model, "best_params_"):
            print(f"Cross-validated factor model: {result.factor_model.best_params_}.")
    print("\n" + format_summary(summary))
    if group_summary is not None:
        shown = group_summary.drop(columns=["budget_fraction"]).round(3)
        print("\nPer group (coverage of each group's interval; simultaneous: Bonferroni over the groups, joint: all "
              "groups covered at once):\n" + shown.to_string(index=False))
    print(f"Wrote {', '.join(p.name for p in files)}, summary.md, config.json to {out} "
          f"({time.perf_counter() - start:.1f} s).")


@contextlib.contextmanager
def _on_cluster(address):
    """``--scheduler ADDRESS``: joblib's dask backend on a client of that scheduler, closed after (the cluster left
    running); nothing without an address."""
    if address is None:
        yield
        return
    try:
        import joblib
        from dask import distributed
    except ImportError as exc:
        raise ImportError(f"--scheduler needs dask.distributed ({exc}); install it with pip install "
                          "\"dask[distributed]\".") from exc
    try:
        client = distributed.Client(address, timeout=_SCHEDULER_TIMEOUT, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise ValueError(f"--scheduler {address}: no dask scheduler answered there within {_SCHEDULER_TIMEOUT} s "
                         f"({type(exc).__name__}: {exc}).") from exc
    with client, joblib.parallel_config(backend="dask", client=client):
        yield


def run_draw_bank_command(args):
    data = open_array_file(args.factors, "factors file (.npz)")  # shapes checked before allocating
    if isinstance(data, np.ndarray):
        raise ValueError(f"{args.factors} is a single .npy array; --factors takes an .npz with model_factors and "
                         "question_factors.")
    with data:
        missing = [k for k in ("model_factors", "question_factors") if k not in data]
        if missing:
            raise ValueError(f"{args.factors} lacks {missing} (found {sorted(data.files)}).")
        U, V = (read_array(data, key, args.factors) for key in ("model_factors", "question_factors"))
    if not all(arr.dtype.kind in "biuf" for arr in (U, V)):
        raise ValueError(f"{args.factors}: model_factors and question_factors must be numeric, got {U.dtype} and "
                         f"{V.dtype}.")
    Z = draw_bank_from_factors(U, V, random_state=args.seed)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, outcomes=Z)
    print(f"Drew a {Z.shape[0]} x {Z.shape[1]} bank (mean accuracy {Z.mean():.3f}) from {args.factors} "
          f"with seed {args.seed}; wrote {out}.")


class _ExperimentHelp(argparse.HelpFormatter):
    """Fills ``{methods}`` in when the help is shown (the list lives with the runner, which imports torch)."""

    def _get_help_string(self, action):
        text = super()._get_help_string(action)
        if "{methods}" in text:
            from ..experiments import METHODS

            text = text.replace("{methods}", ", ".join(METHODS))
        return text


def add_demo_parser(sub):
    demo = sub.add_parser("demo", help="run FAQ vs uniform sampling on an embedded synthetic bank")
    demo.add_argument("--out", default="faqstats-demo", help="directory for the plot (default: faqstats-demo)")
    demo.add_argument("--budgets", type=int, nargs="+", default=[25, 50, 100], help="query budgets")
    demo.add_argument("--models", type=int, default=10, help="new models to evaluate")
    demo.add_argument("--seeds", type=int, default=5, help="seeds per model and budget")
    demo.add_argument("--seed", type=int, default=0, help="seed of the synthetic bank")
    demo.add_argument("--quiet", action="store_true", help="no progress bars")
    demo.set_defaults(func=run_demo_command)


def add_draw_bank_parser(sub):
    draw = sub.add_parser("draw-bank", help="draw a fixed semi-synthetic 0/1 bank from published factors (.npz)")
    draw.add_argument("--factors", required=True, help=".npz with model_factors (M, k) and question_factors (N, k)")
    draw.add_argument("--out", required=True, help="output .npz (an 'outcomes' int8 matrix, as --data expects)")
    draw.add_argument("--seed", type=int, default=0, help="seed of the Bernoulli draws (default 0)")
    draw.set_defaults(func=run_draw_bank_command)


def add_experiment_parser(sub):
    exp = sub.add_parser("experiment", formatter_class=_ExperimentHelp, help="run methods x budgets x seeds on a "
                         "response matrix (.npz); write CSV tables and PNG figures (with --leaderboard: groups of "
                         "models evaluated at once)")
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
                          "newton with regularization 3 and at most 10 sweeps unless --regularization or --max-iter "
                          "is given; newton is much faster on large banks and reads --regularization as a prior "
                          "precision)")
    exp.add_argument("--seed", type=int, default=0, help="root seed of the runs (default 0)")
    exp.add_argument("--n-jobs", type=int, default=None,
                     help="joblib workers (default 1, with --scheduler all the cluster's; -1: all cores)")
    exp.add_argument("--backend", default=None, help="joblib backend (loky, threading; for dask use --scheduler)")
    exp.add_argument("--scheduler", default=None, metavar="ADDRESS",
                     help="run the sweep on a dask cluster: the address of its scheduler (e.g. tcp://10.0.0.5:8786, "
                          "as dask.distributed prints it); the results are those of a run on one machine. Needs "
                          "dask[distributed], and faqstats installed on the workers")
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
    board = exp.add_argument_group(
        "leaderboard", "with --leaderboard, instead of the sweep: groups of K test models evaluated at once "
        "(faqstats.LeaderboardEstimator at K x the per-model budget), against K FPC sample means with Bonferroni "
        "at the same queries and against naive per-model 95% intervals; --budgets are queries per model as "
        "fractions of the bank (default 0.05 0.1), --seed seeds the groups and runs. Writes leaderboard_records.csv, "
        "leaderboard_summary.csv/.json/.md (joint coverage of the accuracies and of the differences, rank-interval "
        "coverage, the share naming the true best alone, widths) and leaderboard_summary_by_kind.csv")
    board.add_argument("--leaderboard", type=int, nargs="+", default=None, metavar="K",
                       help="models per group (one or more sizes, each at least 2 and at most the test models)")
    board.add_argument("--design", choices=["independent", "shared", "adaptive"], default=None,
                       help="the estimator's design (default independent: each model its own draws; shared: one "
                            "question asked of every model; adaptive: the queries go where the ranking is in doubt)")
    board.add_argument("--configure", action="store_true",
                       help="configure each model's run from the history as PAIEstimator.from_history does (the "
                            "predictor, policy and step weights chosen for the per-model budget) instead of fitting "
                            "one factor model")
    board.add_argument("--groups", type=int, default=None, metavar="G",
                       help="group-runs per K, budget and design: half close in accuracy (K consecutive test "
                            "models in accuracy order), half far apart (K at random) (default 100)")
    exp.add_argument("--quiet", action="store_true", help="no progress bars")
    exp.set_defaults(func=run_experiment_command)
