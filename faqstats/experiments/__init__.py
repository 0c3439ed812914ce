"""Experiments built on the core library: demos, trials and sweeps (no statistics of their own)."""

from .demo import DemoResult, run_demo
from .runner import (
    DEFAULT_BUDGETS,
    METHODS,
    ExperimentResult,
    MethodRuns,
    budget_sizes,
    format_summary,
    per_model_coverage,
    read_csv,
    run_experiment,
    run_methods,
    split_matrix,
    summarize,
    summarize_groups,
    write_csv,
)
from .tuning import PAPER_GRID, TuningResult, tune_policy

__all__ = [
    "DEFAULT_BUDGETS",
    "DemoResult",
    "ExperimentResult",
    "METHODS",
    "MethodRuns",
    "PAPER_GRID",
    "TuningResult",
    "budget_sizes",
    "format_summary",
    "per_model_coverage",
    "read_csv",
    "run_demo",
    "run_experiment",
    "run_methods",
    "split_matrix",
    "summarize",
    "summarize_groups",
    "tune_policy",
    "write_csv",
]
