"""Tune a policy's parameters on validation models taken from the history only (docs/results.md)."""

import itertools
import numbers
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.base import clone

from .._progress import progress_bar
from .._validation import check_alpha, check_history, check_scalar, check_seed
from ..batched import simulate
from ..sampling import HybridSampler
from ..step_weights import validation_split

__all__ = ["PAPER_GRID", "TuningResult", "tune_policy"]

PAPER_GRID = {"beta0": (0.5, 1.0), "rho": (0.0, 0.5), "gamma": (0.0, 0.5), "tau": (0.05, 0.25, 0.5)}
"""The seed paper's grid over the hybrid policy's parameters, plus tau 0.5: :func:`tune_policy`'s default.

Examples
--------
>>> PAPER_GRID["tau"]
(0.05, 0.25, 0.5)
"""


@dataclass(frozen=True)
class TuningResult:
    """What :func:`tune_policy` returns.

    Attributes
    ----------
    best_params : dict
        The winner's values of the grid's parameters.
    table : pandas.DataFrame
        One row per grid point: its parameters, n_runs, coverage, mean width, RMSE, ``qualifies``.
    factor_model : fitted estimator
        The factor model fitted on the training part of the history.
    n_validation, seconds : int, float
        The number of validation models and the tuning's duration.
    template : Sampler
        The sampler whose parameters were tuned (unchanged).

    Examples
    --------
    >>> TuningResult({"tau": 0.25}, pd.DataFrame(), None, 15, 0.0).sampler()
    HybridSampler(tau=0.25)
    """

    best_params: dict
    table: pd.DataFrame
    factor_model: object
    n_validation: int
    seconds: float
    template: object = None

    def sampler(self):
        """The tuned sampler: an unfitted clone of the template with :attr:`best_params`.

        Returns
        -------
        Sampler
        """
        return clone(self.template if self.template is not None else HybridSampler()).set_params(**self.best_params)


def tune_policy(history, factor_model, *, budget, sampler=None, grid=None, validation_fraction=0.25, seeds=3,
                alpha=0.05, guard=0.01, random_state=None, fitted_factor_model=None, verbose=False):
    """Choose a sampler's parameters on validation models from the history: the narrowest mean interval among
    the grid points with validation coverage at least ``1 - alpha - guard`` wins, else the best-covering point.

    Parameters
    ----------
    history : array-like of shape (n_models, N)
        The history (NaN = not observed); its complete rows supply the validation models.
    factor_model : unfitted estimator
        Cloned and fitted on the training part.
    budget : int
        Queries per validation run.
    sampler : Sampler or None, default=None
        The policy to tune; ``None`` is ``HybridSampler()``.
    grid : dict of sequences or None
        Values of the sampler's parameters to cross; ``None`` is :data:`PAPER_GRID`.
    validation_fraction : float in (0, 1)
        Fraction of the complete history rows held out as validation models.
    seeds : int
        Runs per validation model and grid point.
    alpha, guard : float
        Intervals at level ``1 - alpha``; the coverage guard is ``1 - alpha - guard``.
    random_state : int or None, default=None
        Seeds the split (as :func:`~faqstats.learn_step_weights`') and the runs.
    fitted_factor_model : fitted estimator or None
        Already fitted on this split's training part: no refit.
    verbose : bool, default=False
        A progress bar.

    Returns
    -------
    TuningResult

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=120, n_questions=80, n_components=2, random_state=0)
    >>> fm = fq.LogisticFactorModel(n_components=2, max_iter=100, random_state=0)
    >>> res = tune_policy(bank.history, fm, budget=10, grid={"tau": (0.25, 0.5)}, seeds=2)
    >>> sorted(res.best_params), type(res.sampler()).__name__
    (['tau'], 'HybridSampler')
    """
    start = time.perf_counter()
    random_state = check_seed(random_state)
    H = check_history(history, name="history")
    check_scalar(validation_fraction, "validation_fraction", low=0.0, high=1.0, closed="neither")
    check_scalar(seeds, "seeds", kind=numbers.Integral, low=1)
    check_scalar(budget, "budget", kind=numbers.Integral, low=2)
    alpha = check_alpha(alpha)
    check_scalar(guard, "guard", low=0.0, high=1.0)
    template = HybridSampler() if sampler is None else sampler
    grid = dict(PAPER_GRID if grid is None else grid)
    unknown = set(grid) - set(template.get_params())
    if unknown:
        raise ValueError(f"grid keys must be parameters of {type(template).__name__} "
                         f"({sorted(template.get_params())}); got {sorted(unknown)}.")
    points = [dict(zip(grid, values)) for values in itertools.product(*grid.values())]
    for params in points:  # every point checked before any run
        clone(template).set_params(**params).check_params()
    train, Z = validation_split(H, validation_fraction, random_state)
    fm = fitted_factor_model if fitted_factor_model is not None else clone(factor_model).fit(train)
    truth = np.repeat(Z.mean(axis=1), seeds)
    model_rows = np.repeat(np.arange(Z.shape[0]), seeds)
    rows = []
    bar = progress_bar(len(points), "tuning", verbose, unit="point")
    for params in points:
        gens = [np.random.default_rng([random_state, 3, int(budget), r]) for r in range(model_rows.size)]
        runs = simulate(Z, gens, predictor=fm, sampler=clone(template).set_params(**params), budget=int(budget),
                        rows=model_rows, alpha=alpha)
        covered = (runs.low <= truth) & (truth <= runs.high)
        rows.append(params | {"n_runs": covered.size, "coverage": covered.mean(),
                              "mean_width": np.mean(runs.high - runs.low),
                              "rmse": np.sqrt(np.mean((runs.estimate - truth) ** 2))})
        bar.update(1)
    bar.close()
    table = pd.DataFrame(rows)
    table["qualifies"] = table["coverage"] >= 1 - alpha - guard
    ok = table[table["qualifies"]]
    best = ok["mean_width"].idxmin() if len(ok) else table["coverage"].idxmax()
    return TuningResult(points[best], table, fm, Z.shape[0], time.perf_counter() - start, template)

