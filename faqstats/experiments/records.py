"""The experiments' tidy records: their columns, the key a method's name gives every run's seed, CSV files that
round-trip them exactly, and their summaries per (method, budget), group and model, as tables or text."""

import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from ..results import markdown_table, table_summary

__all__ = ["RECORD_COLUMNS", "GROUP_RECORD_COLUMNS", "GROUP_SUMMARY_COLUMNS", "SUMMARY_COLUMNS",
           "MODEL_COVERAGE_COLUMNS", "method_key", "write_csv", "read_csv", "summarize", "summarize_groups",
           "per_model_coverage", "format_summary", "clustered_se"]

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


_NEEDED = ("method", "budget", "model", "seed", "truth", "estimate", "std_error", "low", "high", "covered")


def _as_records(records):
    if not isinstance(records, pd.DataFrame):  # the runs (MethodRuns, ExperimentResult): their records
        records = getattr(records, "records", records)
    records = pd.DataFrame(records)
    missing = [c for c in _NEEDED if c not in records.columns]
    if missing:
        raise ValueError(f"records lack the column(s) {missing}; pass the records of run_experiment or read_csv.")
    optional = {"budget_fraction": np.nan, "n_queries": np.nan, "row": -1}
    records = records.assign(**{c: d for c, d in optional.items() if c not in records.columns})
    return records.assign(variance=records["std_error"] ** 2, width=records["high"] - records["low"],
                          sq_error=(records["estimate"] - records["truth"]) ** 2,
                          covered=records["covered"].astype(float))


def _in_order(table, records, *then):
    """Methods in their first appearance in ``records``, budgets increasing, then the columns ``then``."""
    rank = {m: i for i, m in enumerate(records["method"].unique())}
    return table.sort_values(["method", "budget", *then], key=lambda c: c.map(rank) if c.name == "method" else c,
                             kind="stable").reset_index(drop=True)


def _ess(records, baseline):
    """Mean baseline variance / mean method variance over the runs both have, per (method, budget)."""
    keys = ["budget", "model", "seed"]
    base = records.loc[records["method"] == baseline, keys + ["variance"]]
    pairs = records[["method", *keys, "variance"]].merge(base, on=keys, suffixes=("", "_base"))
    means = pairs.groupby(["method", "budget"])[["variance", "variance_base"]].mean()
    with np.errstate(divide="ignore", invalid="ignore"):
        return means["variance_base"] / means["variance"]


def clustered_se(values, clusters):
    """The standard error of the mean of ``values``, clustered by ``clusters`` (CR1: ``G / (G - 1)`` times the
    summed squares of each cluster's total residual, over ``n^2``); with a single cluster, the i.i.d. one.

    Runs of one new model share its accuracy (and a model-based method's bias), so their coverages are
    correlated; the i.i.d. standard error would understate the uncertainty of a coverage.

    Parameters
    ----------
    values : array-like of shape (n,)
    clusters : array-like of shape (n,)

    Returns
    -------
    float

    Examples
    --------
    >>> round(clustered_se([1, 1, 0, 0], [0, 0, 1, 1]), 4)  # two models, one always covered, one never
    0.5
    >>> round(clustered_se([1, 0, 1, 0], [0, 0, 1, 1]), 4)  # each model covered half the time
    0.0
    """
    x = np.asarray(values, dtype=float)
    labels = pd.factorize(np.asarray(clusters))[0]
    n, G = x.size, labels.max(initial=-1) + 1
    if n < 2:
        return float("nan")
    if G < 2:
        return float(x.std(ddof=1) / np.sqrt(n))
    totals = np.bincount(labels, weights=x - x.mean(), minlength=G)
    return float(np.sqrt(G / (G - 1) * np.sum(totals**2)) / n)


def summarize(records, *, fpc_method="uniform-fpc", ht_method="ht-uniform", ceiling_method="ceiling"):
    """One row per (method, budget): coverage, width, RMSE, variance, ESS and share of the ceiling.

    ``coverage_se`` is clustered by new model (:func:`clustered_se`). The ESS are the baseline's mean variance over
    the method's on the runs both have, ``ceiling_share`` ``ess_fpc``
    over the ceiling's; NaN where the baseline or the ceiling did not run (docs/results.md).

    Parameters
    ----------
    records : DataFrame, ExperimentResult or MethodRuns
        The runs' records.
    fpc_method, ht_method : str
        Names of the two baselines in ``records``.
    ceiling_method : str, default="ceiling"
        Name of the oracle diagnostic in ``records``.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`SUMMARY_COLUMNS`, methods in their order of appearance, budgets increasing.

    Examples
    --------
    >>> import faqstats as fq
    >>> from faqstats.experiments import run_methods
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_new=3, n_components=2, random_state=0)
    >>> runs = run_methods(bank.history, bank.new_outcomes, [8], seeds=2, methods=["uniform-fpc"], verbose=False)
    >>> summarize(runs.records)[["method", "budget", "n_runs", "ess_fpc"]].values.tolist()
    [['uniform-fpc', 8, 6, 1.0]]
    """
    records = _as_records(records)
    groups = records.groupby(["method", "budget"])
    table = groups.agg(
        budget_fraction=("budget_fraction", "first"), n_runs=("covered", "size"),
        coverage=("covered", "mean"), mean_width=("width", "mean"),
        rmse=("sq_error", "mean"), mean_variance=("variance", "mean"), mean_queries=("n_queries", "mean"))
    table["coverage_se"] = groups[["covered", "model"]].apply(lambda g: clustered_se(g["covered"], g["model"]))
    table["rmse"] = np.sqrt(table["rmse"])
    table["ess_fpc"] = _ess(records, fpc_method)
    table["ess_ht"] = _ess(records, ht_method)
    # each row's ess_fpc over the ceiling's at its budget (NaN where the ceiling did not run)
    ess, methods = table["ess_fpc"], table.index.get_level_values("method")
    ceiling = ess[methods == ceiling_method].droplevel("method").reindex(table.index.get_level_values("budget"))
    with np.errstate(divide="ignore", invalid="ignore"):
        table["ceiling_share"] = ess.to_numpy() / ceiling.to_numpy()
    columns = list(SUMMARY_COLUMNS)
    if "cost_spent" in records.columns:  # runs with costs per question
        table["mean_cost"] = records.groupby(["method", "budget"])["cost_spent"].mean()
        columns.append("mean_cost")
    return _in_order(table.reset_index()[columns], records)


def summarize_groups(group_records):
    """One row per (method, budget, group): coverage of each group's interval and of the simultaneous ones.

    Parameters
    ----------
    group_records : DataFrame or MethodRuns
        :attr:`MethodRuns.group_records` (``run_methods(..., groups=)``) or the runs.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`GROUP_SUMMARY_COLUMNS`; ``joint_simultaneous_coverage`` is the share of runs in
        which every group's simultaneous interval covered.

    Examples
    --------
    >>> import faqstats as fq
    >>> from faqstats.experiments import run_methods
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_new=3, n_components=2, random_state=0)
    >>> runs = run_methods(bank.history, bank.new_outcomes, [12], seeds=2, methods=["uniform-fpc"],
    ...                    groups=np.repeat(["a", "b"], 20), verbose=False)
    >>> summarize_groups(runs)[["group", "n_runs"]].values.tolist()
    [['a', 6], ['b', 6]]
    """
    if not isinstance(group_records, pd.DataFrame) and hasattr(group_records, "group_records"):  # MethodRuns
        if group_records.group_records is None:
            raise ValueError("these runs have no group records: run them with groups=.")
        group_records = group_records.group_records
    g = pd.DataFrame(group_records)
    missing = [c for c in GROUP_RECORD_COLUMNS if c not in g.columns]
    if missing:
        raise ValueError(f"group records lack the column(s) {missing}.")
    g = g.assign(width=g["high"] - g["low"], sq_error=(g["estimate"] - g["truth"]) ** 2,
                 covered=g["covered"].astype(float), simultaneous_covered=g["simultaneous_covered"].astype(float))
    table = g.groupby(["method", "budget", "group"]).agg(
        budget_fraction=("budget_fraction", "first"), n_questions=("n_questions", "first"),
        n_runs=("covered", "size"), mean_asked=("n_asked", "mean"), coverage=("covered", "mean"),
        simultaneous_coverage=("simultaneous_covered", "mean"), mean_width=("width", "mean"),
        rmse=("sq_error", "mean")).reset_index()
    joint = g.groupby(["method", "budget", "model", "seed"])["simultaneous_covered"].min()
    joint = joint.groupby(["method", "budget"]).mean().rename("joint_simultaneous_coverage").reset_index()
    table = table.merge(joint, on=["method", "budget"])
    table["rmse"] = np.sqrt(table["rmse"])
    return _in_order(table, g, "group")[list(GROUP_SUMMARY_COLUMNS)]


def per_model_coverage(records):
    """One row per (method, budget, model): its truth, coverage over seeds and mean width.

    Parameters
    ----------
    records : DataFrame, ExperimentResult or MethodRuns
        The runs' records.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`MODEL_COVERAGE_COLUMNS`.

    Examples
    --------
    >>> import faqstats as fq
    >>> from faqstats.experiments import run_methods
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_new=3, n_components=2, random_state=0)
    >>> runs = run_methods(bank.history, bank.new_outcomes, [8], seeds=4, methods=["uniform-fpc"], verbose=False)
    >>> per_model_coverage(runs)[["model", "n_runs"]].values.tolist()
    [[0, 4], [1, 4], [2, 4]]
    """
    records = _as_records(records)
    table = records.groupby(["method", "budget", "model"]).agg(
        budget_fraction=("budget_fraction", "first"), row=("row", "first"), truth=("truth", "first"),
        n_runs=("covered", "size"), coverage=("covered", "mean"), mean_width=("width", "mean"))
    return _in_order(table.reset_index()[list(MODEL_COVERAGE_COLUMNS)], records)


def format_summary(summary, markdown=False):
    """The summary table as text (a statsmodels summary's) or as a Markdown table.

    Parameters
    ----------
    summary : pandas.DataFrame
        What :func:`summarize` returns.
    markdown : bool, default=False
        A Markdown table instead of text.

    Returns
    -------
    str
        The table; the ESS columns of a baseline that did not run are left out.

    Examples
    --------
    >>> import faqstats as fq
    >>> from faqstats.experiments import run_methods
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_new=3, n_components=2, random_state=0)
    >>> runs = run_methods(bank.history, bank.new_outcomes, [8], seeds=2, methods=["uniform-fpc"], verbose=False)
    >>> print(format_summary(summarize(runs.records), markdown=True))
    | method | budget | queries | runs | coverage | +/- se | mean width | RMSE | ESS vs FPC |
    |---|---|---|---|---|---|---|---|---|
    | uniform-fpc | 20.0% | 8.0 | 6 | ... | 1.00 |
    """
    s = pd.DataFrame(summary)
    shown = pd.DataFrame({
        "method": s["method"], "budget": [f"{100 * f:.1f}%" for f in s["budget_fraction"]],
        "queries": [f"{q:.1f}" for q in s["mean_queries"]], "runs": s["n_runs"].astype(str),
        "coverage": [f"{c:.3f}" for c in s["coverage"]], "+/- se": [f"{c:.3f}" for c in s["coverage_se"]],
        "mean width": [f"{w:.4f}" for w in s["mean_width"]], "RMSE": [f"{r:.4f}" for r in s["rmse"]],
        "ESS vs FPC": [f"{e:.2f}" for e in s["ess_fpc"]], "ESS vs HT": [f"{e:.2f}" for e in s["ess_ht"]],
        "share of ceiling": [f"{e:.2f}" for e in s.get("ceiling_share", pd.Series(np.nan, index=s.index))],
    })
    shown = shown.drop(columns=[c for c, col in (("ESS vs FPC", "ess_fpc"), ("ESS vs HT", "ess_ht"),
                                                 ("share of ceiling", "ceiling_share"))
                                if col not in s or s[col].isna().all()])  # a baseline that did not run
    if markdown:
        return markdown_table(shown)
    return str(table_summary("Experiment summary", table=shown, index=False,
                             notes=["ESS: mean variance of the baseline / mean variance of the method, same runs."]))
