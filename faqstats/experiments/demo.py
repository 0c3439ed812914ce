"""The embedded demo: FAQ versus the uniform sample mean on a synthetic bank.

Builds a synthetic history and new models with realistic factor structure
(:func:`faqstats.make_synthetic_bank`), fits the factor model, evaluates every new
model with FAQ and with the uniform sample mean at a few budgets, and reports the
estimate, the 95% CI and the true accuracy side by side, plus a plot of the mean
CI width against the budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..datasets import make_synthetic_bank
from ..estimator import PAIEstimator
from ..factor_model import LogisticFactorModel
from ..sampling import HybridSampler, UniformSampler

__all__ = ["DemoRow", "run_demo", "plot_width_vs_budget"]


@dataclass(frozen=True)
class DemoRow:
    method: str
    budget: int
    model: int
    seed: int
    truth: float
    estimate: float
    low: float
    high: float

    @property
    def covered(self):
        return self.low <= self.truth <= self.high

    @property
    def width(self):
        return self.high - self.low


def _methods(fm):
    return {
        "FAQ (hybrid, w/o replacement)": (fm, HybridSampler()),
        "Uniform sample mean (FPC)": (None, UniformSampler(replace=False)),
    }


def run_demo(
    budgets=(25, 50, 100),
    n_models=200,
    n_questions=500,
    n_new=10,
    seeds=5,
    random_state=0,
    verbose=True,
):
    """Run the demo and return ``(rows, factor_model, bank)``.

    ``rows`` holds one :class:`DemoRow` per method, budget, new model and seed.
    """
    bank = make_synthetic_bank(
        n_models=n_models, n_questions=n_questions, n_new=n_new, n_components=4, missing_rate=0.3,
        random_state=random_state,
    )
    fm = LogisticFactorModel(n_components=4, regularization=0.01, max_iter=1000, random_state=random_state,
                             verbose=verbose)
    fm.fit(bank.history)
    rows = []
    jobs = [(name, b, i, s) for name in _methods(fm) for b in budgets for i in range(n_new) for s in range(seeds)]
    bar = None
    if verbose:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(jobs), desc="evaluating new models", leave=False)
    methods = _methods(fm)
    for name, budget, i, seed in jobs:
        factor_model, sampler = methods[name]
        est = PAIEstimator(factor_model, sampler, budget=budget, random_state=1000 * i + seed)
        est.fit(bank.new_outcomes[i])
        low, high = est.confint(alpha=0.05)
        rows.append(DemoRow(name, budget, i, seed, float(bank.new_accuracy[i]), est.estimate_, low, high))
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return rows, fm, bank


def format_examples(rows, budget, seed=0, max_models=5):
    """Text table: estimate, 95% CI and truth per new model for each method at one budget."""
    methods = list(dict.fromkeys(r.method for r in rows))
    models = sorted({r.model for r in rows})[:max_models]
    lines = [f"Budget {budget} queries, seed {seed}: estimate [95% CI] vs true accuracy"]
    header = f"{'model':>5}  {'truth':>6}  " + "  ".join(f"{m:>34}" for m in methods)
    lines.append(header)
    for i in models:
        cells = []
        truth = None
        for m in methods:
            (r,) = [r for r in rows if r.method == m and r.budget == budget and r.model == i and r.seed == seed]
            truth = r.truth
            mark = " " if r.covered else "*"
            cells.append(f"{r.estimate:.3f} [{r.low:.3f}, {r.high:.3f}]{mark}".rjust(34))
        lines.append(f"{i:>5}  {truth:>6.3f}  " + "  ".join(cells))
    lines.append("(* = interval missed the truth)")
    return "\n".join(lines)


def format_summary(rows):
    """Text table: mean width, coverage and width ratio per method and budget."""
    methods = list(dict.fromkeys(r.method for r in rows))
    budgets = sorted({r.budget for r in rows})
    lines = [f"{'method':<34} {'budget':>6} {'mean width':>10} {'coverage':>9} {'runs':>5}"]
    for m in methods:
        for b in budgets:
            sel = [r for r in rows if r.method == m and r.budget == b]
            lines.append(
                f"{m:<34} {b:>6} {np.mean([r.width for r in sel]):>10.4f} "
                f"{np.mean([r.covered for r in sel]):>9.3f} {len(sel):>5}"
            )
    return "\n".join(lines)


def plot_width_vs_budget(rows, path):
    """Save a PNG of mean 95% CI width against budget, one line per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = list(dict.fromkeys(r.method for r in rows))
    budgets = sorted({r.budget for r in rows})
    fig, ax = plt.subplots(figsize=(6, 4))
    for m in methods:
        widths = [[r.width for r in rows if r.method == m and r.budget == b] for b in budgets]
        mean = np.array([np.mean(w) for w in widths])
        se = np.array([np.std(w, ddof=1) / np.sqrt(len(w)) for w in widths])
        ax.errorbar(budgets, mean, yerr=se, marker="o", capsize=3, label=m)
    ax.set_xlabel("queries (budget)")
    ax.set_ylabel("mean 95% CI width")
    ax.set_title("CI width vs budget (synthetic bank)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
