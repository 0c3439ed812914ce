"""Increment weights ``lambda_t ~ 1 / Var(phi_t)`` learned by cross-fitting on the history: fixed before the run,
so still exactly unbiased (docs/statistics.md, "Weighted increments")."""

import math
import numbers
import time
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import clone
from sklearn.isotonic import IsotonicRegression

from ._validation import check_history, check_scalar, check_seed
from .predictor import resolve_predictor_keyword

__all__ = ["StepWeights", "default_runs", "learn_step_weights", "inverse_variance_weights", "validation_split"]


@dataclass(frozen=True)
class StepWeights:
    """What :func:`learn_step_weights` returns for one budget.

    Attributes
    ----------
    weights : ndarray of shape (budget,)
        Pass as ``PAIEstimator(step_weights=...)``; mean 1.
    step_variance, smoothed_variance : ndarray of shape (budget,)
        Mean squared error of ``phi_t`` on the validation models, and its decreasing fit (1 / weights).
    n_validation, n_runs : int
    variance_ratio : float
        Predicted variance of the weighted mean relative to the plain mean.
    seconds : float
    factor_model : fitted estimator or None
        The predictor fitted on the training part of the split (also read as ``predictor``).
    model_errors : ndarray of shape (n_validation, budget) or None
        Each validation model's ``step_variance``.

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=60, n_new=1, n_components=2, random_state=0)
    >>> fm = fq.LogisticFactorModel(n_components=2, solver="newton", regularization=3.0, random_state=0)
    >>> sw = fq.learn_step_weights(bank.history, fm, budget=12, n_runs=30, random_state=0)
    >>> est = fq.PAIEstimator(sw.factor_model, budget=12, step_weights=sw.weights, random_state=0)
    >>> est.fit(bank.new_outcomes[0]).result_.variance_method
    'weighted martingale'
    """

    weights: np.ndarray
    step_variance: np.ndarray
    smoothed_variance: np.ndarray
    n_validation: int
    n_runs: int
    variance_ratio: float
    seconds: float
    factor_model: object = field(default=None, repr=False, compare=False)
    model_errors: np.ndarray = field(default=None, repr=False, compare=False)

    @property
    def predictor(self):
        """``factor_model``."""
        return self.factor_model

    def plot(self, ax=None):
        """Measured and smoothed per-step variance, and the weights.

        Parameters
        ----------
        ax : matplotlib.axes.Axes or None, default=None
            Where to draw (``None``: a new :class:`~matplotlib.figure.Figure`).

        Returns
        -------
        matplotlib.axes.Axes
        """
        if ax is None:
            from matplotlib.figure import Figure

            ax = Figure(figsize=(6, 3.5), layout="constrained").add_subplot()
        t = np.arange(1, self.weights.size + 1)
        ax.plot(t, self.step_variance, ".", ms=3, color="0.6", label="validation MSE of phi_t")
        ax.plot(t, self.smoothed_variance, color="C0", label="decreasing fit")
        ax.set(xlabel="query t", ylabel="Var(phi_t)",
               title=f"step weights: predicted variance x{self.variance_ratio:.2f}")
        twin = ax.twinx()
        twin.plot(t, self.weights, color="C1", label="weight")
        twin.set_ylabel("weight (mean 1)")
        ax.legend(loc="upper right", fontsize=8)
        return ax


def inverse_variance_weights(step_variance, counts=None):
    """``(weights of mean 1, smoothed variance)``: ``1 / v_t`` of a decreasing isotonic fit of ``step_variance``."""
    v = np.asarray(step_variance, dtype=float)
    if v.ndim != 1 or v.size < 2 or not np.all(np.isfinite(v)) or np.any(v < 0):
        raise ValueError("step_variance must be a 1-D array of at least two finite non-negative values.")
    t = np.arange(v.size)
    smooth = IsotonicRegression(increasing=False).fit(t, v, sample_weight=counts).predict(t)
    # a step with (near) zero variance would take all the weight: floor it
    smooth = np.maximum(smooth, 1e-3 * smooth.max() if smooth.max() > 0 else 1.0)
    w = 1.0 / smooth
    return w / w.mean(), smooth


#: validation runs per budget: MAX_RUNS on small banks, fewer (down to MIN_RUNS) as ``budget x N`` grows
MAX_RUNS = 2000
MIN_RUNS = 200
_RUN_WORK = 2.4e8  # budget x N x runs of MAX_RUNS at openllm_v1's 25% (173 x 693)


def default_runs(n_questions, budget):
    """Validation runs per budget when ``n_runs=None`` (docs/performance.md, "Scale targets")."""
    return int(np.clip(round(_RUN_WORK / (int(budget) * int(n_questions))), MIN_RUNS, MAX_RUNS))


def learn_step_weights(history, predictor=None, *, budget, sampler=None, validation_fraction=0.25, n_runs=None,
                       random_state=None, fitted_factor_model=None, device="cpu", dtype="float64", predict_every=1,
                       cache=None, max_validation=None, **deprecated):
    """Learn per-step increment weights for ``budget`` queries by cross-fitting on the history.

    Parameters
    ----------
    history : array-like of shape (n_models, N)
        Earlier models' outcomes (NaN = not observed).
    predictor : unfitted predictor or None
        Fitted on the training part of the split (``None`` with ``fitted_factor_model``).
    budget : int
        Queries of the run to weight.
    sampler : Sampler or None
        The policy the weights are for (``None``: ``HybridSampler()``).
    validation_fraction : float in (0, 1)
    n_runs : int or None, default=None
        Validation runs (at least one per validation model); ``None``: :func:`default_runs`.
    random_state : int or None, default=None
        Seeds the split and the runs.
    fitted_factor_model : fitted estimator or None
        A predictor already fitted on the training part of this split (an earlier call's ``predictor``).
    device, dtype : str
        Of the batched engine that runs the validation runs.
    predict_every : int, default=1
        As in :class:`~faqstats.PAIEstimator`.
    cache : dict or None
        Validation runs kept for later calls (a larger budget's serve smaller ones: learn it first).
    max_validation : int or None, default=None
        At most this many validation models.
    **deprecated
        ``factor_model``: the old name of ``predictor`` (accepted with a ``FutureWarning``).

    Returns
    -------
    StepWeights

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=120, n_questions=80, n_components=2, random_state=0)
    >>> fm = fq.LogisticFactorModel(n_components=2, max_iter=100, random_state=0)
    >>> sw = learn_step_weights(bank.history, fm, budget=20, n_runs=60)
    >>> sw.weights.shape, bool(sw.weights[-1] >= sw.weights[0])
    ((20,), True)
    """
    from .batched import simulate
    from .sampling import HybridSampler

    predictor = resolve_predictor_keyword(predictor, deprecated, "learn_step_weights")
    if predictor is None and fitted_factor_model is None:
        raise ValueError("learn_step_weights needs a predictor (unfitted) or fitted_factor_model.")
    start = time.perf_counter()
    random_state = check_seed(random_state)
    budget = int(check_scalar(budget, "budget", kind=numbers.Integral, low=3))
    train, Z = validation_split(history, validation_fraction, random_state, max_validation=max_validation)
    n_runs = default_runs(Z.shape[1], budget) if n_runs is None else n_runs
    check_scalar(n_runs, "n_runs", kind=numbers.Integral, low=1)
    fm = fitted_factor_model if fitted_factor_model is not None else clone(predictor).fit(train)
    sampler = HybridSampler() if sampler is None else sampler
    n_val = Z.shape[0]
    rows = np.repeat(np.arange(n_val), max(1, math.ceil(n_runs / n_val)))
    truth = Z.mean(axis=1)[rows]
    key = ("step weights", id(fm), type(sampler).__name__, tuple(sorted(sampler.get_params().items())),
           validation_fraction, random_state, int(n_runs), device, dtype, int(predict_every), max_validation)
    kept = None if cache is None else cache.get(key)
    if kept is not None and kept[0] is fm and kept[1] >= budget and sampler.scores_follow_predictions:
        increments = kept[2][:, :budget]  # the first `budget` increments of longer runs
    else:
        gens = [np.random.default_rng([random_state, 4, budget, r]) for r in range(rows.size)]
        increments = simulate(Z, gens, predictor=fm, sampler=sampler, budget=budget, rows=rows, keep_increments=True,
                              keep_ranges=False, device=device, dtype=dtype, predict_every=predict_every).increments
        if cache is not None and (kept is None or kept[0] is not fm or kept[1] < budget):
            cache[key] = (fm, budget, increments)
    squared = (increments - truth[:, None]) ** 2
    v = np.mean(squared, axis=0)
    per_model = np.mean(squared.reshape(n_val, -1, budget), axis=1)  # rows: each model's runs, consecutive
    w, smooth = inverse_variance_weights(v)
    ratio = float(np.sum((w / w.sum()) ** 2 * smooth) / (np.sum(smooth) / budget**2))
    return StepWeights(w, v, smooth, n_val, rows.size, ratio, time.perf_counter() - start, fm, per_model)


def validation_split(history, validation_fraction=0.25, random_state=None, max_validation=None):
    """``(training history, validation models)``: a seeded share of the complete rows (at most ``max_validation``)."""
    random_state = check_seed(random_state)
    H = check_history(history, name="history")
    check_scalar(validation_fraction, "validation_fraction", low=0.0, high=1.0, closed="neither")
    complete = np.flatnonzero(~np.isnan(H).any(axis=1))
    rng = np.random.default_rng([random_state, 2])
    n_val = int(round(validation_fraction * complete.size))
    if max_validation is not None:
        n_val = min(n_val, int(check_scalar(max_validation, "max_validation", kind=numbers.Integral, low=1)))
    if n_val < 1 or complete.size - n_val < 2:
        raise ValueError(f"the history has {complete.size} complete rows; validation_fraction={validation_fraction} "
                         f"leaves {n_val} validation models. Cross-fitting needs complete history rows to validate on.")
    val_rows = np.sort(rng.choice(complete, n_val, replace=False))
    return np.delete(H, val_rows, axis=0), H[val_rows]
