"""Interval rules: how a Wald-type interval ``estimate -/+ c std_error`` chooses its quantile ``c``, registered
by name (``"robust-t"``, ``"t"``, ``"normal"`` and yours), which is how sessions store them (user guide, "Intervals").
"""

import numpy as np
from scipy import stats

from ._validation import check_alpha

__all__ = ["KURTOSIS_INFLATION", "IntervalRule", "NormalRule", "RobustTRule", "StudentTRule", "effective_df",
           "interval_rule", "interval_rule_name", "register_interval_rule", "registered_interval_rules",
           "wald_interval"]

ALTERNATIVES = ("two-sided", "larger", "smaller")

#: Inflation of the excess kurtosis in the degrees of freedom (sample kurtosis is biased low at small n).
KURTOSIS_INFLATION = 1.5


def effective_df(increments):
    """Degrees of freedom of a variance from ``increments`` (``(n,)`` or ``(R, n)``), allowing for heavy tails:
    Satterthwaite's ``2 / (2 / (n - 1) + kappa / n)``, ``kappa`` the kurtosis ``G2`` (>= 0) times
    :data:`KURTOSIS_INFLATION` (user guide, "Intervals")."""
    x = np.asarray(increments, dtype=float)
    one, x = x.ndim == 1, np.atleast_2d(x)
    n = x.shape[1]
    if n < 2:
        raise ValueError("At least two increments are needed.")
    d = x - x.mean(axis=1, keepdims=True)
    # kurtosis is scale-free: rescale so m2**2 cannot underflow for tiny spreads
    scale = np.max(np.abs(d), axis=1, keepdims=True)
    d = d / np.where(scale > 0, scale, 1.0)
    m2 = np.mean(d**2, axis=1)
    spread = m2 > 0
    g2 = np.mean(d**4, axis=1) / np.where(spread, m2, 1.0) ** 2 - 3.0
    if n > 3:  # G2, the kurtosis estimator that is unbiased under normality
        g2 = ((n + 1) * g2 + 6.0) * (n - 1) / ((n - 2) * (n - 3))
    kappa = KURTOSIS_INFLATION * np.maximum(g2, 0.0)
    df = np.where(spread, np.minimum(n - 1, np.maximum(1.0, 2.0 / (2.0 / (n - 1) + kappa / n))), float(n - 1))
    return float(df[0]) if one else df


def _kish_bound(df, weights):
    """``df`` at most Kish's effective number of increments less one, ``1 / sum lambda^2 - 1`` (``inf`` stays)."""
    if weights is None:
        return df
    lam = np.asarray(weights, dtype=float) / np.sum(weights)
    df = np.asarray(df, dtype=float)
    return np.where(np.isinf(df), df, np.minimum(df, 1.0 / np.sum(lam**2) - 1.0))


class IntervalRule:
    """Base of the interval rules: degrees of freedom from the increments, the quantile, the interval.

    Subclasses override :meth:`degrees_of_freedom` (``inf``: the normal quantile) and/or
    :meth:`critical_value`; ``name`` is what the rule is registered and stored under. Two rules are
    equal when they are of the same class with the same attributes.

    Examples
    --------
    >>> import faqstats as fq
    >>> class InflatedWald(fq.IntervalRule):
    ...     name = "inflated-wald"
    ...     def __init__(self, inflation=1.2):
    ...         self.inflation = inflation
    ...     def critical_value(self, alpha, alternative="two-sided", df=float("inf")):
    ...         return self.inflation * super().critical_value(alpha, alternative, float("inf"))
    >>> [round(x, 4) for x in InflatedWald().interval(0.5, 0.1)]
    [0.2648, 0.7352]
    """

    name = None

    def degrees_of_freedom(self, residuals, weights=None):
        """Degrees of freedom of the quantile from a run's residuals (``inf``: the normal quantile).

        Parameters
        ----------
        residuals : ndarray of shape (n,) or (R, n)
            One run's increments (scaled residuals when weighted), or one row per run.
        weights : ndarray of shape (n,) or None

        Returns
        -------
        float or ndarray of shape (R,)
        """
        return np.inf

    def critical_value(self, alpha, alternative="two-sided", df=np.inf):
        """The quantile ``c``: Student's t with ``df`` degrees of freedom (normal where ``inf``).

        Parameters
        ----------
        alpha : float in (0, 1)
        alternative : {"two-sided", "larger", "smaller"}, default="two-sided"
        df : float or ndarray, default=inf

        Returns
        -------
        float or ndarray
        """
        tail = alpha / 2.0 if alternative == "two-sided" else alpha
        df = np.asarray(df, dtype=float)
        normal = np.isinf(df)
        crit = np.where(normal, stats.norm.ppf(1.0 - tail), stats.t.ppf(1.0 - tail, np.where(normal, 1.0, df)))
        return float(crit) if crit.ndim == 0 else crit

    def interval(self, estimate, std_error, alpha=0.05, alternative="two-sided", df=None, bounds=(0.0, 1.0)):
        """``estimate -/+ c std_error``, clipped to ``bounds``.

        Parameters
        ----------
        estimate, std_error : float or ndarray of shape (R,)
        alpha : float in (0, 1), default=0.05
        alternative : {"two-sided", "larger", "smaller"}, default="two-sided"
            ``"larger"``: ``[low, upper bound]``; ``"smaller"``: ``[lower bound, high]``.
        df : float, ndarray or None, default=None
            ``None`` or ``inf``: normal.
        bounds : tuple of float, default=(0.0, 1.0)

        Returns
        -------
        low : float or ndarray of shape (R,)
        high : float or ndarray of shape (R,)
        """
        alpha = check_alpha(alpha)
        if alternative not in ALTERNATIVES:
            raise ValueError(f"alternative must be one of {ALTERNATIVES}, got {alternative!r}.")
        crit = self.critical_value(alpha, alternative, np.inf if df is None else df)
        lo_bound, hi_bound = bounds
        est, se = np.asarray(estimate, dtype=float), np.asarray(std_error, dtype=float)
        low = est - crit * se if alternative != "smaller" else np.full_like(est, lo_bound)
        high = est + crit * se if alternative != "larger" else np.full_like(est, hi_bound)
        low, high = np.clip(low, lo_bound, hi_bound), np.clip(high, lo_bound, hi_bound)
        return (float(low), float(high)) if low.ndim == 0 else (low, high)

    def __eq__(self, other):
        return type(self) is type(other) and _state(self) == _state(other)

    def __hash__(self):
        return hash((type(self).__qualname__, self.name))

    def __repr__(self):
        params = ", ".join(f"{k}={v!r}" for k, v in sorted(vars(self).items()))
        return f"{type(self).__name__}({params})"


def _state(rule):
    """A rule's attributes, comparable (arrays as lists)."""
    return {k: np.asarray(v).tolist() if isinstance(v, np.ndarray) else v for k, v in vars(rule).items()}


class NormalRule(IntervalRule):
    """The normal quantile (``interval="normal"``)."""

    name = "normal"


class StudentTRule(IntervalRule):
    """Student's t with ``n - 1`` degrees of freedom (``interval="t"``; weighted: Kish's bound)."""

    name = "t"

    def degrees_of_freedom(self, residuals, weights=None):
        x = np.asarray(residuals, dtype=float)
        df = _kish_bound(float(x.shape[-1] - 1), weights)
        return float(df) if x.ndim == 1 else np.full(x.shape[0], float(df))


class RobustTRule(IntervalRule):
    """Student's t with :func:`effective_df` degrees of freedom (``interval="robust-t"``; weighted: Kish's bound)."""

    name = "robust-t"

    def degrees_of_freedom(self, residuals, weights=None):
        df = _kish_bound(effective_df(residuals), weights)
        return float(df) if np.ndim(df) == 0 else df


_RULES = {rule.name: rule for rule in (RobustTRule(), StudentTRule(), NormalRule())}


def register_interval_rule(rule, *, replace=False):
    """Register ``rule`` under its ``name``: ``interval=name`` then means it, and sessions store it.

    Parameters
    ----------
    rule : IntervalRule
        An instance with a non-empty ``name``.
    replace : bool, default=False
        Replace a different rule registered under the same name (the built-ins excepted).

    Returns
    -------
    IntervalRule

    Examples
    --------
    >>> class WideNormal(NormalRule):
    ...     name = "wide-normal"
    ...     def critical_value(self, alpha, alternative="two-sided", df=float("inf")):
    ...         return 1.5 * super().critical_value(alpha, alternative, df)
    >>> register_interval_rule(WideNormal()) == interval_rule("wide-normal")
    True
    """
    if not isinstance(rule, IntervalRule):
        raise TypeError(f"rule must be an IntervalRule instance, got {type(rule).__name__}.")
    name = rule.name
    if not isinstance(name, str) or not name:
        raise ValueError(f"{type(rule).__name__}.name must be a non-empty string to register it, got {name!r}.")
    known = _RULES.get(name)
    if known is not None and known != rule:
        if name in ("robust-t", "t", "normal") or not replace:
            raise ValueError(f"another interval rule is registered as {name!r} ({known!r}); give yours another "
                             "name" + ("" if name in ("robust-t", "t", "normal") else " or pass replace=True") + ".")
    _RULES[name] = rule
    return rule


def registered_interval_rules():
    """The registered interval rules by name (a copy)."""
    return dict(_RULES)


def interval_rule(interval):
    """The :class:`IntervalRule` that ``interval`` is or names (a registered name)."""
    if isinstance(interval, IntervalRule):
        return interval
    if isinstance(interval, str):
        rule = _RULES.get(interval)
        if rule is not None:
            return rule
    if isinstance(interval, type) and issubclass(interval, IntervalRule):
        raise TypeError(f"interval must be an IntervalRule instance, got the class {interval.__name__}: "
                        f"pass {interval.__name__}().")
    names = ", ".join(repr(n) for n in _RULES)
    raise ValueError(f"interval must be one of {names} (registered names) or an IntervalRule, got {interval!r}; "
                     "a rule of your own is registered with faqstats.register_interval_rule(rule).")


def interval_rule_name(interval):
    """The name a session stores for ``interval``: its registered name (an error if it is not registered)."""
    rule = interval_rule(interval)
    if rule.name is None or _RULES.get(rule.name) != rule:
        raise ValueError(
            f"interval={rule!r} is not registered: a session stores its interval rule by name, to run it again "
            "when it is loaded or resumed; call faqstats.register_interval_rule(rule) first (with a unique "
            "name), and again before loading the session in a new process.")
    return rule.name


def wald_interval(estimate, std_error, alpha=0.05, alternative="two-sided", bounds=(0.0, 1.0), df=None):
    """``estimate -/+ c std_error`` clipped to ``bounds``, ``c`` normal or Student's t with ``df`` (the base rule)."""
    return _BASE.interval(estimate, std_error, alpha=alpha, alternative=alternative, df=df, bounds=bounds)


_BASE = IntervalRule()
