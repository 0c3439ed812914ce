"""Command-line interface: argument parsing only; the work lives in the library."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _demo(args):
    from .experiments.demo import format_examples, format_summary, plot_width_vs_budget, run_demo

    rows, fm, bank = run_demo(
        budgets=tuple(args.budgets), n_new=args.models, seeds=args.seeds, random_state=args.seed,
        verbose=not args.quiet,
    )
    print(
        f"Synthetic bank: {bank.history.shape[0]} historical models x {bank.history.shape[1]} questions "
        f"({100 * (1 - (bank.history == bank.history).mean()):.0f}% missing), {len(bank.new_accuracy)} new models."
    )
    print(f"Factor model: k={fm.n_components}, alpha={fm.alpha}, final training loss {fm.loss_curve_[-1]:.4f}.\n")
    print(format_examples(rows, budget=args.budgets[len(args.budgets) // 2]))
    print()
    print(format_summary(rows))
    out = plot_width_vs_budget(rows, Path(args.out) / "width_vs_budget.png")
    print(f"\nPlot written to {out}")
    return 0


def _experiment(args):
    import json
    import time

    from .datasets import load_response_matrix
    from .experiments.plots import plot_all
    from .experiments.runner import format_summary, per_model_coverage, run_experiment, summarize, write_csv

    start = time.perf_counter()
    matrix, _ = load_response_matrix(args.data)
    fm_params = {k: v for k, v in (("n_components", args.n_components), ("alpha", args.alpha),
                                   ("max_iter", args.max_iter)) if v is not None}
    result = run_experiment(
        matrix,
        history_fraction=args.history_fraction,
        split_seed=args.split_seed,
        complete_rows=args.complete_rows,
        n_full_obs=args.n_full_obs,
        p_obs=args.p_obs,
        max_models=args.max_models,
        budgets=tuple(args.budgets),
        seeds=args.seeds,
        methods=tuple(args.methods),
        factor_model=fm_params or None,
        random_state=args.seed,
        n_jobs=args.n_jobs,
        backend=args.backend,
        verbose=not args.quiet,
    )
    summary = summarize(result.records)
    models = per_model_coverage(result.records)
    out = Path(args.out)
    files = [
        write_csv(result.records, out / "records.csv"),
        write_csv(summary, out / "summary.csv"),
        write_csv(models, out / "model_coverage.csv"),
    ]
    files += plot_all(summary, models, out)
    config = dict(result.config, data=str(args.data), history_shape=list(result.history_shape),
                  budgets=result.budgets.tolist(), n_new=int(result.new_rows.size))
    (out / "config.json").write_text(json.dumps(config, indent=2))
    n_hist, n_q = result.history_shape
    print(
        f"{args.data}: history {n_hist} models x {n_q} questions ({100 * result.history_observed:.1f}% observed), "
        f"{result.new_rows.size} new models, {len(result.config['seeds'])} seed(s)."
    )
    if result.factor_model is not None:
        print(f"Factor model fit: {result.fit_seconds:.1f} s.")
    print()
    print(format_summary(summary))
    print("\nESS = mean variance of the baseline / mean variance of the method over the same models and seeds.")
    print(f"Wrote {', '.join(p.name for p in files)}, config.json to {out} ({time.perf_counter() - start:.1f} s).")
    return 0


def _add_experiment_parser(sub):
    from .experiments.runner import DEFAULT_BUDGETS, METHODS

    exp = sub.add_parser(
        "experiment",
        help="run methods x budgets x seeds on a response matrix (.npz); write CSV tables and PNG figures",
    )
    exp.add_argument("--data", required=True, help=".npz file with an 'outcomes' models x items matrix (-1 missing)")
    exp.add_argument("--out", required=True, help="directory for CSV tables and figures")
    exp.add_argument("--budgets", type=float, nargs="+", default=list(DEFAULT_BUDGETS),
                     help="budgets as fractions of the bank, in (0, 1] (default 0.025 ... 0.25)")
    exp.add_argument("--seeds", type=int, default=3, help="seeds per method, budget and model (default 3)")
    exp.add_argument("--methods", nargs="+", default=["faq", "uniform-fpc", "ht-uniform"],
                     help=f"methods among {', '.join(METHODS)} (default: faq uniform-fpc ht-uniform)")
    exp.add_argument("--max-models", type=int, default=None, help="evaluate at most this many new models")
    exp.add_argument("--complete-rows", action="store_true",
                     help="keep only rows without missing entries (history too)")
    exp.add_argument("--history-fraction", type=float, default=0.75, help="fraction of complete rows as history")
    exp.add_argument("--split-seed", type=int, default=0, help="seed of the history/new-model permutation")
    exp.add_argument("--p-obs", type=float, default=None, help="MCAR observation rate of the history (default: "
                     "keep the data's own missingness)")
    exp.add_argument("--n-full-obs", type=int, default=None, help="history rows kept fully observed with --p-obs")
    exp.add_argument("--n-components", type=int, default=None, help="factor model rank (default 16)")
    exp.add_argument("--alpha", type=float, default=None, help="factor model weight decay (default 0.1)")
    exp.add_argument("--max-iter", type=int, default=None, help="factor model optimiser steps (default 2000)")
    exp.add_argument("--seed", type=int, default=0, help="root seed of the runs (default 0)")
    exp.add_argument("--n-jobs", type=int, default=1, help="joblib workers (default 1; -1: all cores)")
    exp.add_argument("--backend", default=None, help="joblib backend (loky, threading, dask once registered...)")
    exp.add_argument("--quiet", action="store_true", help="no progress bars")
    exp.set_defaults(func=_experiment)
    return exp


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
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        print(f"faqstats: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
