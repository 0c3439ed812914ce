"""Inference from increments, one run's (shape ``(n,)``: floats) or many runs' (``(R, n)``: arrays): every
variance estimator and degrees-of-freedom rule; why each is unbiased: ``docs/statistics.md``."""

import math

import numpy as np
from scipy import stats

from ._validation import check_alpha
from .intervals import ALTERNATIVES, effective_df, interval_rule, wald_interval

__all__ = ["all_equal_chance", "all_equal_interval", "census_mean", "check_interval", "effective_df",
           "finite_population_weights", "fpc_mean", "interval_df", "martingale_variance", "paper_variance",
           "pai_inference", "wald_interval", "weighted_martingale"]


def check_interval(interval):
    """``interval`` if it is an :class:`~faqstats.IntervalRule` or a registered rule's name, else an error."""
    interval_rule(interval)
    return interval


def _rows(x):
    x = np.asarray(x, dtype=float)
    return np.atleast_2d(x), x.ndim == 1


def _out(value, one):
    return float(value[0]) if one else value


def martingale_variance(increments):
    """``sum (phi_t - mean)^2 / (n (n - 1))``: exactly unbiased for ``Var(mean phi)``.

    Parameters
    ----------
    increments : array-like of shape (n,) or (R, n)
        One run's increments ``phi_t``, or one row per run (``n >= 2``).

    Returns
    -------
    float or ndarray of shape (R,)

    Examples
    --------
    >>> martingale_variance([[0.2, 0.4, 0.9], [0.0, 1.0, 0.0]]).round(6)
    array([0.043333, 0.111111])
    """
    phi, one = _rows(increments)
    n = phi.shape[1]
    if n < 2:
        raise ValueError("At least two increments are needed to estimate a variance.")
    resid = phi - phi.mean(axis=1, keepdims=True)
    return _out(np.sum(resid**2, axis=1) / (n * (n - 1)), one)


def weighted_martingale(increments, weights):
    """Estimate and exactly unbiased variance of ``sum_t lambda_t phi_t`` for fixed weights.

    ``lambda_t = weights_t / sum_s weights_s``, each below 1/2 (``docs/statistics.md``, "Weighted increments").

    Parameters
    ----------
    increments : array-like of shape (n,) or (R, n)
    weights : array-like of shape (>= n,)
        Positive; only the first ``n`` are used.

    Returns
    -------
    estimate, variance : float or ndarray of shape (R,)
    scaled_residuals : ndarray like ``increments``
        ``n lambda_t (phi_t - theta_hat)``, for the interval's degrees of freedom.

    Examples
    --------
    >>> est, var, _ = weighted_martingale([0.2, 0.9, 0.4, 0.7], [1, 1, 1, 1])
    >>> bool(np.isclose(var, martingale_variance([0.2, 0.9, 0.4, 0.7])))
    True
    """
    phi = np.asarray(increments, dtype=float)
    n = phi.shape[-1]
    if n < 2:
        raise ValueError("At least two increments are needed to estimate a variance.")
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or w.size < n:
        raise ValueError(f"weights must be a 1-D array with at least {n} entries (one per increment).")
    w = w[:n]
    if not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise ValueError("weights must be finite and positive.")
    lam = w / w.sum()
    if lam.max() >= 0.5:
        raise ValueError(f"one increment would carry {lam.max():.0%} of the weight; the variance estimate needs every "
                         "normalised weight below 1/2 (use more queries or flatter weights).")
    est = phi @ lam
    resid = phi - np.expand_dims(est, -1)
    K = np.sum(lam**2 / (1.0 - 2.0 * lam))
    c = lam**2 / ((1.0 - 2.0 * lam) * (1.0 + K))
    var = resid**2 @ c
    return est, var, n * lam * resid


def weights_usable(weights, n):
    """Whether ``n`` increments can be weighted (at least 3, every normalised weight below 1/2)."""
    w = None if weights is None else np.asarray(weights, dtype=float)[:n]
    return w is not None and n >= 3 and w.max() < 0.5 * w.sum()


def finite_population_weights(n_questions, n):
    """The default increment weights without replacement, ``w_t = (N / (N - t + 1))^(3/2)`` for ``t = 1..n``
    (user guide, "Finite-population weights")."""
    t = np.arange(1, int(n) + 1, dtype=float)
    return (n_questions / (n_questions - t + 1.0)) ** 1.5


def census_mean(answers, n_questions):
    """The bank's mean from a census, ``math.fsum(answers) / n_questions`` per row: correctly rounded in any order."""
    z, one = _rows(answers)
    totals = np.array([math.fsum(row) for row in z], dtype=float)
    return _out(totals / n_questions, one)


def fpc_mean(outcomes, n_questions):
    """The mean of ``n`` outcomes drawn uniformly without replacement and its variance ``(1 - n / N) s^2 / n``."""
    z, one = _rows(outcomes)
    n = z.shape[1]
    if n < 2:
        raise ValueError("At least two outcomes are needed to estimate a variance.")
    if n == n_questions:
        return _out(census_mean(z, n_questions), one), _out(np.zeros(len(z)), one)
    var = (1.0 - n / n_questions) * z.var(axis=1, ddof=1) / n
    return _out(z.mean(axis=1), one), _out(var, one)


def all_equal_interval(value, n, n_questions, alpha=0.05, alternative="two-sided"):
    """The sample mean's interval when all ``n`` answers drawn without replacement equal ``value``: exact, by
    the hypergeometric law, where the variance estimate is zero and says nothing.

    A bank of ``N`` answers in [0, 1] with mean ``theta`` holds at most ``K(theta) = N min(theta / v, (1 - theta)
    / (1 - v))`` answers equal to ``v``, so ``n`` draws all equal ``v`` with probability at most
    ``C(K, n) / C(N, n)``; the interval keeps the ``theta`` where that is at least ``alpha / 2`` (``alpha``
    one-sided): ``[K* v / N, 1 - K* (1 - v) / N]``, ``K*`` the smallest such count (docs/statistics.md, "Baselines").

    Parameters
    ----------
    value : float or ndarray of shape (R,)
        The common answer, in [0, 1].
    n, n_questions : int
        Answers drawn (``2 <= n < N``) and the bank size ``N``.
    alpha : float in (0, 1), default=0.05
    alternative : {"two-sided", "larger", "smaller"}, default="two-sided"

    Returns
    -------
    low, high : float or ndarray of shape (R,)

    Examples
    --------
    >>> [round(x, 3) for x in all_equal_interval(1.0, 10, 500)]
    [0.696, 1.0]
    """
    n, N = int(n), int(n_questions)
    if not 1 <= n < N:
        raise ValueError(f"all_equal_interval needs 1 <= n < N, got n={n}, N={N}.")
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be one of {ALTERNATIVES}, got {alternative!r}.")
    alpha = check_alpha(alpha)
    tail = alpha / 2.0 if alternative == "two-sided" else alpha
    K = np.arange(n, N + 1)
    # log_p rises with K to 0 at K = N; the tolerance keeps a count whose chance is alpha / 2 exactly
    k_star = float(K[np.argmax(_log_all_among(K, n, N) >= math.log(tail) - 1e-12)])
    v = np.clip(np.asarray(value, dtype=float), 0.0, 1.0)
    low = np.where(alternative == "smaller", 0.0, k_star * v / N)
    high = np.where(alternative == "larger", 1.0, 1.0 - k_star * (1.0 - v) / N)
    return (float(low), float(high)) if low.ndim == 0 else (low, high)


def all_equal_chance(value, theta, n, n_questions):
    """The largest chance that ``n`` answers drawn without replacement from a bank of ``N`` answers in [0, 1] with
    mean ``theta`` all equal ``value``: ``C(K, n) / C(N, n)`` with ``K = floor(N min(theta / v, (1 - theta) /
    (1 - v)))`` answers equal to ``v`` at most (1 where ``theta == v``); the exact p-value of
    :func:`all_equal_interval`.

    Parameters
    ----------
    value, theta : float in [0, 1]
    n, n_questions : int

    Returns
    -------
    float

    Examples
    --------
    >>> round(all_equal_chance(1.0, 0.696, 10, 500), 4)
    0.0256
    """
    v, theta, n, N = float(value), float(theta), int(n), int(n_questions)
    if theta == v:
        return 1.0
    share = min(theta / v if v > 0 else math.inf, (1.0 - theta) / (1.0 - v) if v < 1 else math.inf, 1.0)
    K = math.floor(N * share + 1e-9)
    return float(np.exp(_log_all_among(K, n, N)))


def _log_all_among(K, n, N):
    """``log C(K, n) / C(N, n)``: the log chance that ``n`` draws without replacement from ``N`` all fall among
    ``K`` given ones (``-inf`` where ``K < n``)."""
    return stats.hypergeom.logpmf(n, N, K, n)


def paper_variance(outcomes, predictions, probabilities, prediction_totals, n_questions):
    """The seed paper's closed-form variance of ``theta_hat`` (Appendix A.2.2; biased downward, for comparison).

    Parameters
    ----------
    outcomes, predictions, probabilities, prediction_totals : array-like of shape (n,)
        Per draw: the fields of :attr:`PAIEstimator.queries_`.
    n_questions : int
        The bank size ``N``.

    Returns
    -------
    float
        It can be negative.

    Examples
    --------
    >>> paper_variance([1, 0], [0.5, 0.5], [0.5, 0.5], [1.0, 1.0], n_questions=2)
    0.125
    """
    z, p, q, P = (np.asarray(a, dtype=float) for a in (outcomes, predictions, probabilities, prediction_totals))
    n = z.size
    S = np.mean(z / q)
    sigma2 = (np.sum((z - p) ** 2 / q**2) - np.sum((S - P) ** 2)) / (n * n_questions**2)
    return float(sigma2 / n)


def interval_df(interval, residuals, weights=None):
    """The rule's :meth:`~faqstats.IntervalRule.degrees_of_freedom` (``None``: normal; for 2-D residuals an array)."""
    x = np.asarray(residuals, dtype=float)
    df = np.broadcast_to(np.asarray(interval_rule(interval).degrees_of_freedom(x, weights), dtype=float), x.shape[:-1])
    if x.ndim > 1:
        return np.array(df)
    return None if np.isinf(df) else float(df)


def pai_inference(increments, *, interval="robust-t", weights=None, n_questions=None, census=None):
    """``(estimate, variance, df, variance method)`` from PAI increments: weighted when :func:`weights_usable`,
    else the mean and :func:`martingale_variance`. ``n_questions``: the bank size without replacement (``None``:
    with), whose default weights are :func:`finite_population_weights`; ``n == N`` is a census (exact ``census``)."""
    phi = np.asarray(increments, dtype=float)
    n = phi.shape[-1]
    if n_questions is not None and weights is None:
        weights = finite_population_weights(n_questions, n)
    if n_questions is not None and n == n_questions:
        est = phi[..., -1] if census is None else np.asarray(census, dtype=float)
        var, resid, method = np.zeros(phi.shape[:-1]), phi, "census"
    elif weights_usable(weights, n):
        (est, var, resid), method = weighted_martingale(phi, weights), "weighted martingale"
    else:
        est, var, resid, method = phi.mean(axis=-1), martingale_variance(phi), phi, "martingale"
    # the rule sees the weights of a weighted estimate (the t rules' Kish bound)
    used = np.asarray(weights, dtype=float)[:n] if method == "weighted martingale" else None
    df = interval_df(interval, resid, used)
    if phi.ndim == 1:
        est, var = float(est), float(var)
    return est, var, df, method
