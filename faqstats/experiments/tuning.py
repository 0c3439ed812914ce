"""Tune FAQ's policy on validation models taken from the history only.

The seed paper chose ``(beta0, rho, gamma, tau)`` on held-out *validation* models. Here
the complete rows of the history are split (seeded) into a training part and
validation models; the factor model is fitted on the training part only (plus the
incomplete rows), every grid point runs on the validation models through the batched
engine, and the winner is the narrowest mean interval among the points whose
validation coverage passes a guard. The test models of an experiment are never seen.

Coverage guard: a point qualifies when its validation coverage is at least
``1 - alpha - guard`` (default ``guard=0.01``: 0.94 for 95% intervals). Narrow
intervals that under-cover are what tuning on width alone would pick, so the guard
is what keeps tuning honest; if no point qualifies, the best-covering point wins.
"""

from __future__ import annotations

import itertools
import numbers
import time
from dataclasses import dataclass

import numpy as np
from sklearn.base import clone

from .._progress import progress_bar
from .._validation import check_alpha, check_history, check_scalar, check_seed
from ..batched import simulate
from ..sampling import HybridSampler
from ..step_weights import validation_split

__all__ = ["PAPER_GRID", "TuningResult", "tune_policy"]

#: The seed paper's grid over the hybrid policy's parameters (with tau 0.5 added,
#: the package default).
PAPER_GRID = {
    "beta0": (0.5, 1.0),
    "rho": (0.0, 0.5),
    "gamma": (0.0, 0.5),
    "tau": (0.05, 0.25, 0.5),
}

TUNING_DTYPE = np.dtype(
    [
        ("tau", np.float64),
        ("beta0", np.float64),
        ("rho", np.float64),
        ("gamma", np.float64),
        ("replace", np.bool_),
        ("n_runs", np.int64),
        ("coverage", np.float64),
        ("mean_width", np.float64),
        ("rmse", np.float64),
        ("qualifies", np.bool_),
    ]
)


@dataclass(frozen=True)
class TuningResult:
    """What :func:`tune_policy` returns.

    Attributes
    ----------
    best_params : dict
        ``HybridSampler`` parameters of the winner.
    table : structured ndarray
        One row per grid point: parameters, validation coverage, mean width, RMSE and
        whether it passed the coverage guard.
    factor_model : fitted estimator
        The factor model fitted on the training part of the history.
    n_validation : int
        Validation models.
    seconds : float
    """

    best_params: dict
    table: np.ndarray
    factor_model: object
    n_validation: int
    seconds: float

    def sampler(self):
        """The tuned :class:`~faqstats.HybridSampler`."""
        return HybridSampler(**self.best_params)


def tune_policy(
    history,
    factor_model,
    *,
    budget,
    grid=None,
    replace=False,
    validation_fraction=0.25,
    seeds=3,
    alpha=0.05,
    guard=0.01,
    random_state=None,
    fitted_factor_model=None,
    verbose=False,
):
    """Choose ``HybridSampler`` parameters on validation models from the history.

    Parameters
    ----------
    history : array-like of shape (n_models, N)
        The history of an experiment (NaN = not observed). Its complete rows supply the
        validation models.
    factor_model : unfitted estimator
        Cloned and fitted on the training part.
    budget : int
        Queries per validation run (the budget being tuned for).
    grid : dict of sequences or None
        Values of ``tau``, ``beta0``, ``rho``, ``gamma`` to cross; missing keys keep the
        ``HybridSampler`` default. ``None`` is :data:`PAPER_GRID`.
    replace : bool, default=False
    validation_fraction : float in (0, 1)
        Fraction of the complete history rows held out as validation models.
    seeds : int
        Runs per validation model and grid point.
    alpha, guard : float
        Intervals at level ``1 - alpha``; the coverage guard is ``1 - alpha - guard``.
    random_state : int or None, default=None
        Seeds the split (the same as :func:`~faqstats.learn_step_weights`' for the same
        int) and the runs; ``None`` draws a fresh seed.
    fitted_factor_model : fitted estimator or None
        A factor model already fitted on the training part of this split (an earlier
        call's ``factor_model``), to skip the refit when tuning several budgets.

    Returns
    -------
    TuningResult

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=120, n_questions=80, n_components=2, random_state=0)
    >>> fm = fq.LogisticFactorModel(n_components=2, max_iter=100, random_state=0)
    >>> res = tune_policy(bank.history, fm, budget=10, grid={"tau": (0.25, 0.5)}, seeds=2)
    >>> sorted(res.best_params), len(res.table)
    (['beta0', 'gamma', 'replace', 'rho', 'tau'], 2)
    """
    start = time.perf_counter()
    random_state = check_seed(random_state)
    H = check_history(history, name="history")
    check_scalar(validation_fraction, "validation_fraction", low=0.0, high=1.0, closed="neither")
    check_scalar(seeds, "seeds", kind=numbers.Integral, low=1)
    check_scalar(budget, "budget", kind=numbers.Integral, low=2)
    alpha = check_alpha(alpha)
    check_scalar(guard, "guard", low=0.0, high=1.0)
    grid = dict(PAPER_GRID if grid is None else grid)
    unknown = set(grid) - {"tau", "beta0", "rho", "gamma"}
    if unknown:
        raise ValueError(f"grid keys must be among tau, beta0, rho, gamma; got {sorted(unknown)}.")
    train, Z = validation_split(H, validation_fraction, random_state)
    fm = fitted_factor_model if fitted_factor_model is not None else clone(factor_model).fit(train)
    table, best_params = _sweep(Z, fm, int(budget), grid, replace, seeds, alpha, guard, random_state, verbose)
    return TuningResult(best_params, table, fm, Z.shape[0], time.perf_counter() - start)


def _sweep(Z, fm, budget, grid, replace, seeds, alpha, guard, random_state, verbose):
    """Every grid point on the validation models at one budget: (table, best parameters)."""
    n_val = Z.shape[0]
    names = ("tau", "beta0", "rho", "gamma")
    defaults = HybridSampler().get_params()
    axes = [tuple(grid.get(k, (defaults[k],))) for k in names]
    rows = []
    truth = np.repeat(Z.mean(axis=1), seeds)
    model_rows = np.repeat(np.arange(n_val), seeds)
    points = list(itertools.product(*axes))
    bar = progress_bar(len(points), "tuning", verbose, unit="point")
    for values in points:
        params = dict(zip(names, (float(v) for v in values)), replace=bool(replace))
        sampler = HybridSampler(**params)
        gens = [np.random.default_rng([random_state, 3, budget, r]) for r in range(model_rows.size)]
        runs = simulate(Z, gens, factor_model=fm, sampler=sampler, budget=int(budget), rows=model_rows, alpha=alpha)
        covered = (runs.low <= truth) & (truth <= runs.high)
        rows.append((*params.values(), covered.size, covered.mean(), np.mean(runs.high - runs.low),
                     np.sqrt(np.mean((runs.estimate - truth) ** 2)), covered.mean() >= 1 - alpha - guard))
        bar.update(1)
    bar.close()
    table = np.array(rows, dtype=TUNING_DTYPE)
    ok = np.flatnonzero(table["qualifies"])
    best = ok[np.argmin(table["mean_width"][ok])] if ok.size else int(np.argmax(table["coverage"]))
    best_params = {k: float(table[k][best]) for k in names} | {"replace": bool(replace)}
    return table, best_params

