"""The experiments' tidy records: their columns, the key a method's name gives every run's seed,
and CSV files that round-trip them exactly. Shared by the sweep, the field's methods and the summaries.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import pandas as pd

__all__ = ["RECORD_COLUMNS", "GROUP_RECORD_COLUMNS", "GROUP_SUMMARY_COLUMNS", "SUMMARY_COLUMNS",
           "MODEL_COVERAGE_COLUMNS", "method_key", "write_csv", "read_csv"]

#: The columns of the records, one row per (method, budget, model, seed).
RECORD_COLUMNS = ("method", "budget_fraction", "budget", "model", "row", "seed", "truth", "estimate", "std_error",
                  "low", "high", "covered", "n_queries")
#: The columns of :attr:`MethodRuns.group_records` (``groups=``): every group's estimate in every run,
#: its truth, its interval and the simultaneous one (Bonferroni over the groups).
GROUP_RECORD_COLUMNS = ("method", "budget_fraction", "budget", "model", "row", "seed", "group", "n_questions",
                        "n_asked", "truth", "estimate", "std_error", "low", "high", "covered", "simultaneous_low",
                        "simultaneous_high", "simultaneous_covered")
#: The columns of :func:`summarize_groups`' table.
GROUP_SUMMARY_COLUMNS = ("method", "budget_fraction", "budget", "group", "n_questions", "n_runs", "mean_asked",
                         "coverage", "simultaneous_coverage", "joint_simultaneous_coverage", "mean_width", "rmse")
#: The columns of :func:`summarize`'s table and of :func:`per_model_coverage`'s.
SUMMARY_COLUMNS = ("method", "budget_fraction", "budget", "n_runs", "coverage", "coverage_se", "mean_width", "rmse",
                   "mean_variance", "mean_queries", "ess_fpc", "ess_ht", "ceiling_share")
MODEL_COVERAGE_COLUMNS = ("method", "budget_fraction", "budget", "model", "row", "truth", "n_runs", "coverage",
                          "mean_width")


def method_key(name):
    """A stable 32-bit integer for a method name (CRC-32), used in every run's seed.

    >>> method_key("faq") == method_key("faq") != method_key("uniform-fpc")
    True
    """
    return zlib.crc32(str(name).encode("utf-8"))


def write_csv(table, path):
    """Write a table (records, summary, per-model table) as CSV; floats round-trip exactly.

    Parameters
    ----------
    table : pandas.DataFrame
        The table (its index is not written).
    path : str or os.PathLike
        The file; missing parent directories are made.

    Returns
    -------
    pathlib.Path
        The file written.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import faqstats as fq
    >>> from faqstats.experiments import run_methods
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_new=3, n_components=2, random_state=0)
    >>> runs = run_methods(bank.history, bank.new_outcomes, [8], seeds=2, methods=["uniform-fpc"], verbose=False)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = write_csv(runs.records, pathlib.Path(tmp) / "runs" / "records.csv")
    ...     back = read_csv(path)
    >>> path.name, back.equals(runs.records)
    ('records.csv', True)
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(table).to_csv(path, index=False, float_format="%.17g")
    return path


def read_csv(path, columns=RECORD_COLUMNS):
    """Read a table written by :func:`write_csv`, checking it has ``columns`` (in order).

    Parameters
    ----------
    path : str or os.PathLike
        The CSV file.
    columns : sequence of str, default=RECORD_COLUMNS
        The columns the table must have, in order (e.g. :data:`SUMMARY_COLUMNS` for a summary).

    Returns
    -------
    pandas.DataFrame
        The table, floats exactly as written.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import faqstats as fq
    >>> from faqstats.experiments import run_methods
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_new=3, n_components=2, random_state=0)
    >>> runs = run_methods(bank.history, bank.new_outcomes, [8], seeds=2, methods=["uniform-fpc"], verbose=False)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = write_csv(runs.summary(), pathlib.Path(tmp) / "summary.csv")
    ...     summary = read_csv(path, columns=SUMMARY_COLUMNS)
    >>> summary[["method", "budget", "n_runs"]].values.tolist()
    [['uniform-fpc', 8, 6]]
    """
    # exact float parsing: pandas 3's default; pandas 2 needs it asked for
    exact = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}
    table = pd.read_csv(path, **exact)
    if tuple(table.columns) != tuple(columns):
        raise ValueError(f"{path} has columns {list(table.columns)}, expected {list(columns)}.")
    return table
