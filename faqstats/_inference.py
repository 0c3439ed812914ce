"""Interval helpers shared by every result class (cf. statsmodels' ``_zconfint_generic``)."""

from __future__ import annotations

from scipy import stats

from ._validation import check_alpha

_ALTERNATIVES = ("two-sided", "larger", "smaller")


def wald_interval(estimate, std_error, alpha=0.05, alternative="two-sided", bounds=(0.0, 1.0)):
    """Normal (Wald) interval ``estimate -/+ z std_error``, clipped to ``bounds``.

    ``alternative="larger"`` gives ``[low, upper bound]`` (a lower confidence bound),
    ``"smaller"`` gives ``[lower bound, high]``. Clipping to the parameter space
    can only raise coverage, since the true accuracy lies in [0, 1].
    """
    alpha = check_alpha(alpha)
    if alternative not in _ALTERNATIVES:
        raise ValueError(f"alternative must be one of {_ALTERNATIVES}, got {alternative!r}.")
    lo_bound, hi_bound = bounds
    if alternative == "two-sided":
        z = stats.norm.ppf(1.0 - alpha / 2.0)
        low, high = estimate - z * std_error, estimate + z * std_error
    elif alternative == "larger":
        z = stats.norm.ppf(1.0 - alpha)
        low, high = estimate - z * std_error, hi_bound
    else:
        z = stats.norm.ppf(1.0 - alpha)
        low, high = lo_bound, estimate + z * std_error
    return float(min(max(low, lo_bound), hi_bound)), float(max(min(high, hi_bound), lo_bound))
