"""The embedded demo (``faqstats demo``): the :data:`DEMO_METHODS` on a synthetic bank."""

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..datasets import make_synthetic_bank
from ..factor_model import LogisticFactorModel
from ..results import table_summary
from .plots import plot_width
from .records import summarize
from .sweep import run_methods

__all__ = ["DEMO_METHODS", "DemoResult", "run_demo"]

#: The demo's methods (names of :data:`~faqstats.experiments.METHODS`) and what they are.
DEMO_METHODS = {
    "faq-equal": "FAQ: hybrid policy without replacement, PAI estimator",
    "uniform-fpc": "uniform sample mean with finite-population correction",
}


@dataclass(frozen=True)
class DemoResult:
    """What :func:`run_demo` returns.

    Attributes
    ----------
    records : pandas.DataFrame
        One row per (method, budget, new model, seed).
    factor_model, bank : fitted LogisticFactorModel, SyntheticBank
        The demo's factor model and synthetic bank.

    Examples
    --------
    >>> demo = run_demo(budgets=(10,), n_models=40, n_questions=60, n_new=2, seeds=1, verbose=False)
    >>> print(demo.examples(10))  # doctest: +ELLIPSIS
    Budget 10 queries, seed 0, all 2 new models: estimate [95% CI]
    ...
    * = the interval missed the true accuracy
    """

    records: pd.DataFrame
    factor_model: object
    bank: object

    def summary(self):
        """:func:`~faqstats.experiments.summarize` of the records.

        Returns
        -------
        pandas.DataFrame
        """
        return summarize(self.records)

    def examples(self, budget, seed=0, max_models=5):
        """Estimate, 95% CI and truth of the first ``max_models`` new models at one budget, as text.

        Parameters
        ----------
        budget : int
            One of the demo's budgets.
        seed, max_models : int, default=0, 5
            Which seed's runs, and at most how many new models.

        Returns
        -------
        str
            The table; ``*`` marks an interval that missed the true accuracy.
        """
        r = self.records[(self.records["budget"] == budget) & (self.records["seed"] == seed)]
        n_models = r["model"].nunique()
        r = r[r["model"] < max_models]
        cells = r.assign(cell=[f"{e:.3f} [{lo:.3f}, {hi:.3f}]{' ' if c else '*'}"
                               for e, lo, hi, c in zip(r["estimate"], r["low"], r["high"], r["covered"])])
        table = cells.pivot(index="model", columns="method", values="cell")[list(pd.unique(r["method"]))]
        table.insert(0, "truth", cells.groupby("model")["truth"].first().map("{:.3f}".format))
        table.insert(0, "model", table.index.astype(str))
        shown = f"first {min(max_models, n_models)} of {n_models}" if n_models > max_models else f"all {n_models}"
        return str(table_summary(f"Budget {budget} queries, seed {seed}, {shown} new models: estimate [95% CI]",
                                 table=table, index=False, notes=["* = the interval missed the true accuracy"]))

    def plot(self, path):
        """Save a PNG of the mean 95% CI width against the budget.

        Parameters
        ----------
        path : str or os.PathLike
            The PNG file to write.

        Returns
        -------
        pathlib.Path
        """
        return plot_width(self.summary(), Path(path), title="CI width vs budget (synthetic bank)", x="budget")


def run_demo(budgets=(25, 50, 100), n_models=200, n_questions=500, n_new=10, seeds=5, random_state=0,
             verbose=True):
    """Run the demo: every new model at every budget and seed with both :data:`DEMO_METHODS`.

    Parameters
    ----------
    budgets : sequence of int, default=(25, 50, 100)
        Budgets in queries.
    n_models, n_questions, n_new : int, default=200, 500, 10
        The synthetic bank's history models (30% of cells missing), questions and new models.
    seeds : int, default=5
        Runs per (method, budget, new model).
    random_state : int, default=0
        Seeds the bank, the factor fit and the runs.
    verbose : bool, default=True
        Progress bars.

    Returns
    -------
    DemoResult

    Examples
    --------
    >>> demo = run_demo(budgets=(10, 20), n_models=60, n_questions=80, n_new=3, seeds=2, verbose=False)
    >>> demo.summary()[["method", "budget", "n_runs"]].values.tolist()
    [['faq-equal', 10, 6], ['faq-equal', 20, 6], ['uniform-fpc', 10, 6], ['uniform-fpc', 20, 6]]
    """
    bank = make_synthetic_bank(n_models=n_models, n_questions=n_questions, n_new=n_new, n_components=4,
                               missing_rate=0.3, random_state=random_state)
    fm = LogisticFactorModel(n_components=4, regularization=0.01, max_iter=1000, random_state=random_state,
                             verbose=verbose)
    runs = run_methods(bank.history, bank.new_outcomes, list(budgets), seeds=seeds, methods=list(DEMO_METHODS),
                       factor_model=fm, random_state=random_state, verbose=verbose)
    return DemoResult(runs.records, runs.factor_model, bank)
