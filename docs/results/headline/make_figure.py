"""The headline figure of docs/results.md, from the summaries kept in docs/results/.

Usage (from the repository root; matplotlib and pandas)::

    python docs/results/headline/make_figure.py

Writes ``headline.png`` and ``headline.csv`` (the plotted numbers) beside this script.

Four banks, each with the default estimator (``PAIEstimator.from_history``, method ``auto`` of
``faqstats experiment``), ProEval's Bayesian quadrature and the ceiling (PAI with each test
model's predictions fixed at its own fit to all its answers):

- openllm_v1 (real leaderboard data, complete rows; 615 test models): ``auto`` over 100 seeds
  (``stack100/``), ProEval over 10 seeds (``field/proeval615/``), the ceiling over 20 seeds
  (``openllm_ceiling.csv`` beside this script: the table of results.md's run log);
- three synthetic banks drawn by ``synthetic/make_banks.py`` (thin history, sparse history,
  large bank): ``auto`` from ``synthetic/more_runs/``, the ceiling from ``synthetic/{bank}/``,
  ProEval from ``synthetic/proeval/``.

Left: ESS against the FPC sample mean. For PAI (``auto``, the ceiling) it is the summaries'
``ess_fpc`` (mean FPC variance / mean variance estimate; the variance estimate is unbiased).
ProEval's reported variance is not its error (it over- or under-covers), so its point is the
MSE ratio (RMSE of the FPC sample mean / ProEval's RMSE)^2, which credits its accuracy.
Right: coverage of the 95% intervals, +/- 2 Monte Carlo standard errors.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent

#: bank -> (title, auto summary, ceiling summary, ProEval summary)
BANKS = {
    "openllm_v1": (
        "openllm_v1 (real data)\n693 questions",
        RESULTS / "stack100" / "summary.csv",
        HERE / "openllm_ceiling.csv",
        RESULTS / "field" / "proeval615" / "summary.csv",
    ),
    "thin": (
        "thin history\n16 models, 3,000 questions",
        RESULTS / "synthetic" / "more_runs" / "thin40" / "summary.csv",
        RESULTS / "synthetic" / "thin" / "summary.csv",
        RESULTS / "synthetic" / "proeval" / "thin" / "summary.csv",
    ),
    "sparse": (
        "sparse history\n85% of cells missing",
        RESULTS / "synthetic" / "more_runs" / "sparse10" / "summary.csv",
        RESULTS / "synthetic" / "sparse" / "summary.csv",
        RESULTS / "synthetic" / "proeval" / "sparse" / "summary.csv",
    ),
    "large": (
        "large bank\n8,000 questions",
        RESULTS / "synthetic" / "more_runs" / "large10" / "summary.csv",
        RESULTS / "synthetic" / "large" / "summary.csv",
        RESULTS / "synthetic" / "proeval" / "large" / "summary.csv",
    ),
}


def _rows(path, method):
    table = pd.read_csv(path)
    rows = table[table["method"] == method].copy()
    rows["budget_fraction"] = rows["budget_fraction"].round(4)
    return rows.set_index("budget_fraction").sort_index()


def headline_table():
    """One row per (bank, method, budget): ESS vs FPC, coverage and its se, RMSE, runs."""
    records = []
    for bank, (_, auto_path, ceiling_path, proeval_path) in BANKS.items():
        auto = _rows(auto_path, "auto")
        fpc = _rows(auto_path, "uniform-fpc")
        ceiling = _rows(ceiling_path, "ceiling")
        proeval = _rows(proeval_path, "proeval")
        for fraction in auto.index:
            for method, rows in (("auto", auto), ("ceiling", ceiling), ("proeval", proeval), ("uniform-fpc", fpc)):
                row = rows.loc[fraction]
                if method == "proeval":
                    ess, ess_kind = (fpc.loc[fraction, "rmse"] / row["rmse"]) ** 2, "mse"
                else:
                    ess, ess_kind = row["ess_fpc"], "variance"
                records.append(
                    {
                        "bank": bank,
                        "method": method,
                        "budget_fraction": fraction,
                        "queries": int(row["budget"]),
                        "runs": int(row["n_runs"]),
                        "ess_fpc": round(float(ess), 3),
                        "ess_kind": ess_kind,
                        "coverage": round(float(row["coverage"]), 4),
                        "coverage_se": round(float(row["coverage_se"]), 4),
                        "rmse": round(float(row["rmse"]), 4),
                    }
                )
    return pd.DataFrame.from_records(records)


STYLE = {
    "auto": dict(color="C0", marker="o", label="faqstats default (from_history)"),
    "ceiling": dict(color="C2", marker="^", linestyle="--", label="ceiling (predictions from all answers)"),
    "proeval": dict(color="C3", marker="s", label="ProEval (ESS: MSE ratio)"),
    "uniform-fpc": dict(color="0.4", marker="x", linestyle=":", label="FPC sample mean"),
}


def draw(table):
    """The figure: one row per bank, ESS (left) and coverage (right) against the budget."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(BANKS), 2, figsize=(8.5, 11), squeeze=False)
    for i, (bank, (title, *_)) in enumerate(BANKS.items()):
        ax_ess, ax_cov = axes[i, 0], axes[i, 1]
        part = table[table["bank"] == bank]
        for method, style in STYLE.items():
            rows = part[part["method"] == method].sort_values("budget_fraction")
            x = 100 * rows["budget_fraction"]
            ax_ess.plot(x, rows["ess_fpc"], **style)
            if method != "ceiling":
                ax_cov.errorbar(x, rows["coverage"], yerr=2 * rows["coverage_se"], capsize=2, **style)
        ax_ess.set_ylabel(title, fontsize=9)
        ax_ess.set_ylim(bottom=0)
        ax_cov.axhline(0.95, color="k", linewidth=0.8)
        ax_cov.axhspan(0.94, 0.96, color="0.9", zorder=0)
        ax_cov.set_ylim(0.55, 1.01)
        for ax in (ax_ess, ax_cov):
            ticks = 100 * rows["budget_fraction"]
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
            ax.grid(alpha=0.3)
    axes[0, 0].set_title("ESS vs the FPC sample mean", fontsize=11)
    axes[0, 1].set_title("coverage of the 95% intervals", fontsize=11)
    for ax in axes[-1]:
        ax.set_xlabel("budget (% of the bank)")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def main():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = headline_table()
    table.to_csv(HERE / "headline.csv", index=False)
    fig = draw(table)
    fig.savefig(HERE / "headline.png", dpi=110)
    plt.close(fig)
    print(table.to_string(index=False))


if __name__ == "__main__":
    main()
