"""Figures of an experiment from the tables of :func:`faqstats.experiments.summarize` and
:func:`faqstats.experiments.per_model_coverage`, on :class:`matplotlib.figure.Figure` (no pyplot).
"""

from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["plot_ess", "plot_coverage", "plot_width", "plot_model_coverage", "plot_all"]

_MARKERS = "osD^vP*Xh<>"


def _figure(ncols=1, figsize=(6, 4), **kwargs):
    """A standalone Figure and its axes (no pyplot state, no backend switch)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(1, ncols, squeeze=False, **kwargs)[0]


def _by_method(table):
    """``(i, method, its rows)`` for the methods in order of first appearance."""
    for i, m in enumerate(pd.unique(table["method"])):
        yield i, m, table[table["method"] == m]


def _style(i):
    return dict(marker=_MARKERS[i % len(_MARKERS)], color=f"C{i % 10}")


def _save(fig, path):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    return path


def _log_y(ax):
    """Log y axis labelled at 1, 1.5, 2, 3, 5, 7 x 10^k in plain numbers (ESS spans a narrow range)."""
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0)))
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _legend(ax):
    if ax.get_legend_handles_labels()[0]:  # e.g. an ESS plot with only the baseline has nothing to list
        ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))


def _budget_axis(ax, label="budget (% of the bank)"):
    ax.set_xlabel(label)
    ax.grid(alpha=0.3)


def _finish(fig, ax, path, ylabel, title, xlabel="budget (% of the bank)", nominal=None):
    """Label, grid, legend and save a one-panel figure, with a dashed line at the ``nominal`` coverage."""
    if nominal is not None:
        ax.axhline(nominal, color="k", ls="--", lw=1, label=f"nominal {nominal:g}")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    _budget_axis(ax, xlabel)
    _legend(ax)
    return _save(fig, path)


def plot_ess(summary, path, title=None):
    """ESS vs budget against the FPC sample mean (left) and the paper's HT uniform (right); returns the path."""
    summary = pd.DataFrame(summary)
    panels = [(col, ref) for col, ref in (("ess_fpc", "uniform sample mean (FPC)"), ("ess_ht", "HT uniform (paper)"))
              if not np.all(np.isnan(summary[col]))]  # a baseline that did not run gets no empty panel
    panels = panels or [("ess_fpc", "uniform sample mean (FPC)")]
    fig, axes = _figure(len(panels), figsize=(5 * len(panels) + 1.5 * (len(panels) == 1), 4), sharex=True)
    for ax, (col, ref) in zip(axes, panels):
        for i, m, s in _by_method(summary):
            if np.all(np.isnan(s[col])):
                continue
            ax.plot(100 * s["budget_fraction"], s[col], label=m, **_style(i))
        ax.axhline(1.0, color="0.4", ls="--", lw=1)
        _log_y(ax)
        ax.set_ylabel(f"ESS vs {ref}")
        ax.set_title(f"effective sample size factor vs {ref}", fontsize=10)
        _budget_axis(ax)
    _legend(axes[-1])
    fig.tight_layout()
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def plot_coverage(summary, path, nominal=0.95, title=None):
    """Coverage vs budget with +/- 2 standard errors and the nominal level."""
    summary = pd.DataFrame(summary)
    fig, (ax,) = _figure()
    n_methods = summary["method"].nunique()
    budgets = np.unique(100 * summary["budget_fraction"])
    spread = 0.3 * (np.diff(budgets).min() if budgets.size > 1 else 1.0)  # dodge methods apart
    offsets = np.linspace(-spread, spread, n_methods) if n_methods > 1 else [0.0]
    for i, m, s in _by_method(summary):
        se2 = 2 * np.nan_to_num(s["coverage_se"])
        cov = s["coverage"]
        yerr = np.vstack([np.minimum(se2, cov), np.minimum(se2, 1.0 - cov)])  # coverage lies in [0, 1]
        ax.errorbar(100 * s["budget_fraction"] + offsets[i], cov, yerr=yerr, capsize=3, label=m, **_style(i))
    return _finish(fig, ax, path, "coverage (mean +/- 2 se)", title or "coverage of the intervals", nominal=nominal)


def plot_width(summary, path, title=None, x="budget_fraction"):
    """Mean interval width vs budget: as a % of the bank (``x="budget_fraction"``) or in queries (``x="budget"``)."""
    summary = pd.DataFrame(summary)
    fig, (ax,) = _figure()
    scale = 100 if x == "budget_fraction" else 1
    for i, m, s in _by_method(summary):
        ax.plot(scale * s[x], s["mean_width"], label=m, **_style(i))
    _log_y(ax)
    return _finish(fig, ax, path, "mean interval width", title or "interval width",
                   "budget (queries)" if x == "budget" else "budget (% of the bank)")


def plot_model_coverage(model_table, path, nominal=0.95, n_bins=8, title=None):
    """Per-model coverage (dots) vs the model's true accuracy, and its mean in equal-count bins (lines)."""
    model_table = pd.DataFrame(model_table)
    fig, (ax,) = _figure()
    rng = np.random.default_rng(0)  # jitter only
    for i, m, t in _by_method(model_table):
        pooled = t.assign(hits=t["coverage"] * t["n_runs"]).groupby("model").agg(
            truth=("truth", "first"), runs=("n_runs", "sum"), hits=("hits", "sum"))
        truth, runs, hits = (pooled[c].to_numpy() for c in ("truth", "runs", "hits"))
        cov = hits / runs
        style = _style(i)
        ax.scatter(truth, cov + rng.uniform(-0.01, 0.01, cov.size), s=8, alpha=0.3, color=style["color"])
        n_b = max(1, min(n_bins, len(pooled) // 5))
        edges = np.quantile(truth, np.linspace(0, 1, n_b + 1))
        which = np.clip(np.searchsorted(edges, truth, side="right") - 1, 0, n_b - 1)
        centers = [truth[which == b].mean() for b in range(n_b) if np.any(which == b)]
        means = [hits[which == b].sum() / runs[which == b].sum() for b in range(n_b) if np.any(which == b)]
        ax.plot(centers, means, label=m, **style)
    return _finish(fig, ax, path, "coverage (pooled over budgets, seeds)",
                   title or "per-model coverage (dots) and binned mean (lines)", "true accuracy of the new model",
                   nominal)


def plot_step_weights(weights, path):
    """One panel per ``(method, budget)``: validation variance of each increment and the weights learned."""
    fig, axes = _figure(len(weights), figsize=(4.2 * len(weights), 3.4))
    for ax, ((m, b), sw) in zip(axes, weights.items()):
        sw.plot(ax)
        ax.set_title(f"{m}, {b} queries: variance x{sw.variance_ratio:.2f}", fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


def plot_all(summary, model_table, out_dir, nominal=0.95):
    """The four figures into ``out_dir``; returns their paths."""
    out = Path(out_dir)
    return [
        plot_ess(summary, out / "ess_vs_budget.png"),
        plot_coverage(summary, out / "coverage_vs_budget.png", nominal=nominal),
        plot_width(summary, out / "width_vs_budget.png"),
        plot_model_coverage(model_table, out / "model_coverage_vs_accuracy.png", nominal=nominal),
    ]
