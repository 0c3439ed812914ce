"""The experiments' tidy records: their columns, the key a method's name gives every run's seed,
and CSV files that round-trip them exactly."""

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
    """A stable 32-bit integer for a method name (CRC-32), used in every run's seed."""
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

    Examples
    --------
    >>> import pathlib, tempfile
    >>> table = pd.DataFrame({"method": ["faq"], "rmse": [0.1 + 0.2]})
    >>> path = write_csv(table, pathlib.Path(tempfile.mkdtemp()) / "runs" / "summary.csv")
    >>> read_csv(path, columns=["method", "rmse"]).equals(table)
    True
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

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "t.csv"
    >>> _ = path.write_text("method,rmse\\nfaq,0.30000000000000004\\n")
    >>> read_csv(path, columns=["method", "rmse"])["rmse"].tolist()
    [0.30000000000000004]
    """
    # exact float parsing: pandas 3's default; pandas 2 needs it asked for
    exact = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}
    table = pd.read_csv(path, **exact)
    if tuple(table.columns) != tuple(columns):
        raise ValueError(f"{path} has columns {list(table.columns)}, expected {list(columns)}.")
    return table
