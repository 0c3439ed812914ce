"""Experiments built on the core library: demos, trials and sweeps (no statistics of their own)."""

from .demo import DemoRow, run_demo
from .runner import (
    DEFAULT_BUDGETS,
    METHODS,
    ExperimentResult,
    budget_sizes,
    format_summary,
    per_model_coverage,
    read_csv,
    run_experiment,
    split_matrix,
    summarize,
    write_csv,
)
from .tuning import PAPER_GRID, TuningResult, tune_policy

__all__ = [
    "DEFAULT_BUDGETS",
    "DemoRow",
    "ExperimentResult",
    "METHODS",
    "PAPER_GRID",
    "TuningResult",
    "budget_sizes",
    "format_summary",
    "per_model_coverage",
    "read_csv",
    "run_demo",
    "run_experiment",
    "split_matrix",
    "summarize",
    "tune_policy",
    "write_csv",
]
