"""Weights for the increments, learned from the history: later answers count more.

Every PAI increment ``phi_t`` has conditional mean theta, so any weights fixed before
the run give an exactly unbiased estimate ``sum_t lambda_t phi_t``
(:func:`faqstats.estimator.weighted_martingale`). The increments are far from equally
variable: the first ones use the prior's predictions, later ones a posterior that has
seen the model's answers, and without replacement fewer questions remain unobserved.
On openllm_v1 (default policy, 173 queries) the mean squared error of ``phi_t`` fell
from about 4.3x its final value at the first query to 1x at the last. Weights
``lambda_t`` proportional to ``1 / Var(phi_t)`` minimise the variance of the weighted
mean; equal weights waste the later, better increments.

:func:`learn_step_weights` measures ``Var(phi_t)`` by cross-fitting on the history,
as the seed paper tuned its policy: a seeded share of the history's complete rows
becomes validation models, the factor model is refitted on the rest, the policy runs on
the validation models (batched engine), and the per-step mean squared error around each
model's true accuracy is smoothed by a decreasing isotonic fit (answers never make
the increments worse in expectation; the fit also pools the noise of neighbouring
steps). If the measured variance does not fall, the fit is flat and the weights are
equal: they can only help as much as the data show.
"""

from __future__ import annotations

import math
import numbers
import time
from dataclasses import dataclass

import numpy as np
from sklearn.base import clone
from sklearn.isotonic import IsotonicRegression

from ._validation import check_history, check_scalar

__all__ = ["StepWeights", "learn_step_weights", "inverse_variance_weights", "save_step_weights", "load_step_weights"]

FORMAT = "faqstats-step-weights"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class StepWeights:
    """What :func:`learn_step_weights` returns for one budget.

    Attributes
    ----------
    weights : ndarray of shape (budget,)
        Pass as ``PAIEstimator(step_weights=...)``; scaled to mean 1.
    step_variance : ndarray of shape (budget,)
        Mean squared error of ``phi_t`` around the validation models' accuracies.
    smoothed_variance : ndarray of shape (budget,)
        Its decreasing isotonic fit; ``weights`` are proportional to its inverse.
    n_validation, n_runs : int
        Validation models and runs behind the estimate.
    variance_ratio : float
        Predicted variance of the weighted mean relative to the plain mean (from the
        smoothed variances; below 1 means the weights help).
    seconds : float
    """

    weights: np.ndarray
    step_variance: np.ndarray
    smoothed_variance: np.ndarray
    n_validation: int
    n_runs: int
    variance_ratio: float
    seconds: float

    def plot(self, ax=None):
        """Measured and smoothed per-step variance, and the weights (matplotlib axes)."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(6, 3.5))
        t = np.arange(1, self.weights.size + 1)
        ax.plot(t, self.step_variance, ".", ms=3, color="0.6", label="validation MSE of phi_t")
        ax.plot(t, self.smoothed_variance, color="C0", label="decreasing fit")
        ax.set_xlabel("query t")
        ax.set_ylabel("Var(phi_t)")
        twin = ax.twinx()
        twin.plot(t, self.weights, color="C1", label="weight")
        twin.set_ylabel("weight (mean 1)")
        ax.legend(loc="upper right", fontsize=8)
        ax.set_title(f"step weights: predicted variance x{self.variance_ratio:.2f}")
        return ax


def inverse_variance_weights(step_variance, counts=None):
    """Weights proportional to ``1 / v_t`` of a decreasing isotonic fit of ``step_variance``.

    Returns ``(weights scaled to mean 1, smoothed variance)``.

    >>> import numpy as np
    >>> w, v = inverse_variance_weights([4.0, 3.0, 3.5, 1.0])
    >>> v.tolist(), bool(np.all(np.diff(w) >= 0))
    ([4.0, 3.25, 3.25, 1.0], True)
    """
    v = np.asarray(step_variance, dtype=float)
    if v.ndim != 1 or v.size < 2 or not np.all(np.isfinite(v)) or np.any(v < 0):
        raise ValueError("step_variance must be a 1-D array of at least two finite non-negative values.")
    t = np.arange(v.size)
    smooth = IsotonicRegression(increasing=False).fit(t, v, sample_weight=counts).predict(t)
    # a step with (near) zero variance would take all the weight: floor it
    smooth = np.maximum(smooth, 1e-3 * smooth.max() if smooth.max() > 0 else 1.0)
    w = 1.0 / smooth
    return w / w.mean(), smooth


def learn_step_weights(
    history,
    factor_model,
    *,
    budget,
    sampler=None,
    validation_fraction=0.25,
    n_runs=2000,
    random_state=0,
    fitted_factor_model=None,
    device="cpu",
    dtype="float64",
):
    """Learn per-step increment weights for ``budget`` queries by cross-fitting on the history.

    Parameters
    ----------
    history : array-like of shape (n_models, N)
        Earlier models' outcomes (NaN = not observed); its complete rows supply the
        validation models.
    factor_model : unfitted estimator
        Cloned and fitted on the history without the validation models (ignored when
        ``fitted_factor_model`` is given).
    budget : int or sequence of int
        Queries of the run to weight; with several budgets a dict ``{budget: StepWeights}``.
    sampler : Sampler or None
        The policy the weights are for (``None``: ``HybridSampler()``).
    validation_fraction : float in (0, 1)
    n_runs : int, default=2000
        Validation runs per budget (spread over the validation models, at least one each).
        The per-step variances are means of heavy-tailed squares: a few hundred runs
        leave visible noise in the fitted curve; 2,000 take seconds in the batched engine.
    random_state : int
        Seeds the split (the same split as :func:`~faqstats.experiments.tuning.tune_policy`)
        and the runs.
    fitted_factor_model : fitted estimator or None
        A factor model already fitted on the training part of this split (as
        ``tune_policy`` returns), to skip the refit.
    device, dtype : str
        Of the batched engine (:func:`faqstats.batched.simulate`), which runs the
        validation runs: a built-in sampler is needed. Their cost is that of ``n_runs``
        evaluations of ``budget`` queries (seconds for openllm_v1's 693 questions; on a
        bank of 10,000 questions with 1,000 queries, minutes: lower ``n_runs`` or use a GPU).

    Returns
    -------
    StepWeights or dict

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

    start = time.perf_counter()
    budgets = [budget] if isinstance(budget, numbers.Integral) else list(budget)
    for b in budgets:
        check_scalar(b, "budget", kind=numbers.Integral, low=3)
    check_scalar(n_runs, "n_runs", kind=numbers.Integral, low=1)
    train, Z = validation_split(history, validation_fraction, random_state)
    fm = fitted_factor_model if fitted_factor_model is not None else clone(factor_model).fit(train)
    n_val = Z.shape[0]
    seeds = max(1, math.ceil(n_runs / n_val))
    rows = np.repeat(np.arange(n_val), seeds)
    truth = Z.mean(axis=1)[rows]
    out = {}
    for b in budgets:
        gens = [np.random.default_rng([random_state, 4, int(b), r]) for r in range(rows.size)]
        runs = simulate(Z, gens, factor_model=fm, sampler=sampler, budget=int(b), rows=rows, keep_increments=True,
                        device=device, dtype=dtype)
        v = np.mean((runs.increments - truth[:, None]) ** 2, axis=0)
        w, smooth = inverse_variance_weights(v)
        lam = w / w.sum()
        ratio = float(np.sum(lam**2 * smooth) / (np.sum(smooth) / b**2))
        out[int(b)] = StepWeights(w, v, smooth, n_val, rows.size, ratio, time.perf_counter() - start)
    return out[int(budgets[0])] if isinstance(budget, numbers.Integral) else out


def validation_split(history, validation_fraction=0.25, random_state=0):
    """``(training history, validation models)``: a seeded share of the complete rows held out."""
    H = check_history(history, name="history")
    check_scalar(validation_fraction, "validation_fraction", low=0.0, high=1.0, closed="neither")
    complete = np.flatnonzero(~np.isnan(H).any(axis=1))
    rng = np.random.default_rng([random_state, 2])
    n_val = int(round(validation_fraction * complete.size))
    if n_val < 1 or complete.size - n_val < 2:
        raise ValueError(
            f"the history has {complete.size} complete rows; validation_fraction={validation_fraction} leaves "
            f"{n_val} validation models. Cross-fitting needs complete history rows to validate on."
        )
    val_rows = np.sort(rng.choice(complete, n_val, replace=False))
    return np.delete(H, val_rows, axis=0), H[val_rows]


def save_step_weights(step_weights, path):
    """Write :class:`StepWeights` as JSON (atomically); :func:`load_step_weights` reads it back."""
    import json

    from ._atomic import atomic_write

    from . import __version__

    doc = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "faqstats_version": __version__,
        "budget": int(step_weights.weights.size),
        "weights": step_weights.weights.tolist(),
        "step_variance": step_weights.step_variance.tolist(),
        "smoothed_variance": step_weights.smoothed_variance.tolist(),
        "n_validation": int(step_weights.n_validation),
        "n_runs": int(step_weights.n_runs),
        "variance_ratio": float(step_weights.variance_ratio),
        "seconds": float(step_weights.seconds),
    }
    text = json.dumps(doc, indent=1)
    atomic_write(path, lambda fh: fh.write(text.encode("utf-8")))
    return path


def load_step_weights(path):
    """Read a file written by :func:`save_step_weights`."""
    import json
    from pathlib import Path

    from .io import check_format_header

    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        check_format_header(doc, path, format_name=FORMAT, max_version=FORMAT_VERSION, what="step-weights file")
        arrays = {k: np.asarray(doc[k], dtype=float) for k in ("weights", "step_variance", "smoothed_variance")}
        meta = (int(doc["budget"]), int(doc["n_validation"]), int(doc["n_runs"]), float(doc["variance_ratio"]),
                float(doc["seconds"]))
    except KeyError as exc:
        raise ValueError(f"{path}: step-weights file lacks {exc}.") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not a step-weights JSON file ({exc}).") from exc
    budget, n_val, n_runs, ratio, seconds = meta
    w = arrays["weights"]
    if w.shape != (budget,) or not np.all(np.isfinite(w)) or not np.all(w > 0):
        raise ValueError(f"{path}: weights must be {budget} finite positive numbers.")
    return StepWeights(w, arrays["step_variance"], arrays["smoothed_variance"], n_val, n_runs, ratio, seconds)
