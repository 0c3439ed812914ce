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
