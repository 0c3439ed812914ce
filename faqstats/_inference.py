"""Interval helpers shared by every result class (cf. statsmodels' ``_zconfint_generic``)."""

from __future__ import annotations

from scipy import stats

from ._validation import check_alpha

import numpy as np

_ALTERNATIVES = ("two-sided", "larger", "smaller")


def effective_df(increments):
    """Degrees of freedom of a variance estimated from ``increments``, allowing for heavy tails.

    For the sample variance ``s^2`` of ``n`` draws with excess kurtosis ``g``,
    ``Var(s^2) / sigma^4 ~ 2 / (n - 1) + g / n``; matching a scaled chi-square
    (Satterthwaite) gives ``df = 2 / (2 / (n - 1) + max(g, 0) / n)``, which is ``n - 1``
    for light tails and shrinks when a few inverse-probability weights dominate.
    The t quantile with this ``df`` widens the interval exactly when the variance
    estimate itself is unreliable.
    """
    x = np.asarray(increments, dtype=float)
    n = x.size
    if n < 2:
        raise ValueError("At least two increments are needed.")
    d = x - x.mean()
    m2 = np.mean(d**2)
    if m2 <= 0:
        return float(n - 1)
    excess = np.mean(d**4) / m2**2 - 3.0
    return float(min(n - 1, max(1.0, 2.0 / (2.0 / (n - 1) + max(excess, 0.0) / n))))


def wald_interval(estimate, std_error, alpha=0.05, alternative="two-sided", bounds=(0.0, 1.0), df=None):
    """Wald-type interval ``estimate -/+ c std_error``, clipped to ``bounds``.

    ``c`` is the normal quantile, or Student's t quantile with ``df`` degrees of
    freedom when ``df`` is given (the small-sample calibration for a mean of ``df + 1``
    increments).

    ``alternative="larger"`` gives ``[low, upper bound]`` (a lower confidence bound),
    ``"smaller"`` gives ``[lower bound, high]``. Clipping to the parameter space
    can only raise coverage, since the true accuracy lies in [0, 1].
    """
    alpha = check_alpha(alpha)
    if alternative not in _ALTERNATIVES:
        raise ValueError(f"alternative must be one of {_ALTERNATIVES}, got {alternative!r}.")
    lo_bound, hi_bound = bounds
    dist = stats.norm if df is None else stats.t(df)
    if alternative == "two-sided":
        z = dist.ppf(1.0 - alpha / 2.0)
        low, high = estimate - z * std_error, estimate + z * std_error
    elif alternative == "larger":
        z = dist.ppf(1.0 - alpha)
        low, high = estimate - z * std_error, hi_bound
    else:
        z = dist.ppf(1.0 - alpha)
        low, high = lo_bound, estimate + z * std_error
    return float(min(max(low, lo_bound), hi_bound)), float(max(min(high, hi_bound), lo_bound))
