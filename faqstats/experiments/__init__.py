"""Experiments built on the core library: demos, trials and sweeps (no statistics of their own)."""

from .demo import DemoResult, run_demo
from .fitting import PAPER_GRID, TuningResult, tune_policy
from .methods import METHODS
from .records import format_summary, per_model_coverage, read_csv, summarize, summarize_groups, write_csv
from .split import DEFAULT_BUDGETS, budget_sizes, split_matrix
from .sweep import ExperimentResult, MethodRuns, run_experiment, run_methods

__all__ = ["DEFAULT_BUDGETS", "DemoResult", "ExperimentResult", "METHODS", "MethodRuns", "PAPER_GRID", "TuningResult",
           "budget_sizes", "format_summary", "per_model_coverage", "read_csv", "run_demo", "run_experiment",
           "run_methods", "split_matrix", "summarize", "summarize_groups", "tune_policy", "write_csv"]
