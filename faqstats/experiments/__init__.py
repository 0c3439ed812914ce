"""Experiments built on the core library: demos, trials and sweeps (no statistics of their own)."""

from .demo import DemoResult, run_demo
from .leaderboard import (LeaderboardExperiment, format_leaderboard_summary, run_leaderboard_experiment,
                          summarize_leaderboard)
from .methods import METHODS, PAPER_GRID, TuningResult, tune_policy
from .records import format_summary, per_model_coverage, read_csv, summarize, summarize_groups, write_csv
from .sweep import (DEFAULT_BUDGETS, ExperimentResult, MethodRuns, budget_sizes, run_experiment, run_methods,
                    split_matrix)

__all__ = ["DEFAULT_BUDGETS", "DemoResult", "ExperimentResult", "LeaderboardExperiment", "METHODS", "MethodRuns",
           "PAPER_GRID", "TuningResult", "budget_sizes", "format_leaderboard_summary", "format_summary",
           "per_model_coverage", "read_csv", "run_demo", "run_experiment", "run_leaderboard_experiment", "run_methods",
           "split_matrix", "summarize", "summarize_groups", "summarize_leaderboard", "tune_policy", "write_csv"]
