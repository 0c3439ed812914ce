"""Result objects of an evaluation or a comparison (``conf_int()``, ``summary()``), and the table renderers."""

import json
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from ._inference import all_equal_chance, all_equal_interval
from ._validation import check_scalar
from .intervals import IntervalRule, interval_rule

__all__ = ["AccuracyResult", "ComparisonResult", "markdown_table", "table_summary"]


def table_summary(title, table=None, items=None, float_format="%.4f", notes=(), index=True):
    """A statsmodels ``Summary``: ``title``, the ``items`` (a dict, two columns), ``table`` (a DataFrame), ``notes``."""
    from statsmodels.iolib.summary2 import Summary

    summary = Summary()
    summary.add_title(title)
    if items:
        summary.add_dict({k: str(v) for k, v in items.items()}, ncols=2)
    if table is not None:
        summary.add_df(table, index=index, float_format=float_format)
    for line in notes:
        summary.add_text(line)
    return summary


def markdown_table(table, float_format="{:.4f}"):
    """A pandas DataFrame as a Markdown table (floats with ``float_format``, numeric columns right-aligned)."""
    from pandas.api.types import is_numeric_dtype

    numeric = [is_numeric_dtype(table[c]) for c in table.columns]
    lines = ["| " + " | ".join(map(str, table.columns)) + " |",
             "|" + "|".join("---:" if n else "---" for n in numeric) + "|"]
    for row in table.itertuples(index=False):
        cells = [float_format.format(v) if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: the methods whose estimate is a plain mean of answers (or paired differences) drawn uniformly without replacement
SAMPLE_MEANS = ("sample_mean", "paired_sample_mean", "reference_sample_mean")


class _Result:
    """What both result classes share: the interval, JSON, ``str`` as the summary's text, the design rows."""

    _bounds = (0.0, 1.0)

    def conf_int(self, alpha=0.05, alternative="two-sided"):
        """Wald-type interval at level ``1 - alpha`` (t quantile when ``df`` is set), clipped to the bounds.

        After stopping on width (``stop_reason == "width"``) only the anytime-valid interval is returned. A sample
        mean whose answers (or paired differences) were all equal gets the exact interval of
        :func:`~faqstats._inference.all_equal_interval` (its variance estimate is zero).

        Parameters
        ----------
        alpha : float in (0, 1), default=0.05
        alternative : {"two-sided", "larger", "smaller"}, default="two-sided"
            ``"larger"``: the one-sided ``[low, upper bound]``; ``"smaller"``: ``[lower bound, high]``.

        Returns
        -------
        low : float
        high : float
        """
        if getattr(self, "stop_reason", None) == "width":  # stopped on width: only the anytime interval is valid
            if alternative != "two-sided" or abs(alpha - self.anytime_alpha) > 1e-12:
                raise ValueError("Querying stopped at a data-dependent time (stop_when_width): only the anytime-valid "
                                 f"two-sided interval at alpha={self.anytime_alpha} is valid.")
            return self.anytime_interval
        if self._all_answers_equal():  # on the bounds' scale: answers, or paired differences in [-1, 1]
            lo, hi = self._bounds
            low, high = all_equal_interval((self.estimate - lo) / (hi - lo), self.n_queries, self.n_questions,
                                           alpha, alternative)
            return lo + (hi - lo) * low, lo + (hi - lo) * high
        return self.interval_rule.interval(self.estimate, self.std_error, alpha=alpha, alternative=alternative,
                                           df=self.df, bounds=self._bounds)

    confint = conf_int

    def _all_answers_equal(self):
        """A sample mean (uniform draws without replacement, no predictor) of equal answers or equal paired
        differences, short of a census."""
        return (getattr(self, "method", None) in SAMPLE_MEANS and self.std_error == 0.0
                and self.n_queries < self.n_questions)

    def summary(self, alpha=0.05):
        """The result as a statsmodels summary table.

        Parameters
        ----------
        alpha : float in (0, 1), default=0.05

        Returns
        -------
        statsmodels.iolib.summary2.Summary
        """
        title, items, notes = self._summary_rows(alpha, *self.conf_int(alpha))
        return table_summary(title, items=items, notes=notes)

    def _design_items(self, method_label, queries_label):
        return {method_label: self.method, "Variance estimator:": self.variance_method,
                "Interval quantile:": ("exact (all answers equal)" if self._all_answers_equal()
                                       else "normal" if self.df is None else f"t, {self.df:g} df"),
                "Questions in bank:": self.n_questions,
                queries_label: f"{self.n_queries} ({100 * self.n_queries / self.n_questions:.1f}%)"}

    def __post_init__(self):  # the rule itself, whether given by name or as a rule
        object.__setattr__(self, "interval_rule", interval_rule(self.interval_rule))

    def to_dict(self):
        d = asdict(self)
        d["interval_rule"] = self.interval_rule.name  # by name, as sessions store it
        return {k: [float(x) for x in v] if isinstance(v, tuple) else v for k, v in d.items()}

    def to_json(self):
        return json.dumps(self.to_dict())

    def __str__(self):
        return str(self.summary())


@dataclass(frozen=True)
class AccuracyResult(_Result):
    """Estimated accuracy of one model on a fixed bank, with its uncertainty.

    Attributes
    ----------
    estimate : float
        Estimate of theta, the model's mean outcome over the whole bank.
    std_error : float
    n_queries, n_questions : int
        Questions asked, and in the bank.
    method : str
        ``"pai"``, ``"sample_mean"``, ``"aipw"``, ...
    variance_method : str
    df : float or None
        Degrees of freedom of the t quantile of :meth:`conf_int` (``None``: normal quantile).
    stop_reason : {"budget", "width"} or None
        Why querying stopped; ``None`` for an interim result of a running session.
    anytime_interval : tuple or None
        The confidence sequence's final interval (level ``1 - anytime_alpha``), if one was tracked.
    anytime_alpha : float or None
    design : str or None
        The predictor, policy and increment weights that produced it.
    cost_spent, cost_budget : float or None
        With costs: the summed cost of the questions asked, and the cost budget (if one fixed the draws).
    interval_rule : IntervalRule or str, default="robust-t"
        The rule of :meth:`conf_int` (a name is looked up).

    Examples
    --------
    >>> r = AccuracyResult(estimate=0.62, std_error=0.03, n_queries=70, n_questions=693,
    ...                    method="pai", variance_method="martingale")
    >>> [round(x, 3) for x in r.conf_int()]
    [0.561, 0.679]
    >>> print(r.summary())  # doctest: +NORMALIZE_WHITESPACE
                              faqstats accuracy estimate
    ...
    """

    estimate: float
    std_error: float
    n_queries: int
    n_questions: int
    method: str
    variance_method: str
    df: float | None = None
    stop_reason: str | None = "budget"
    anytime_interval: tuple | None = None
    anytime_alpha: float | None = None
    design: str | None = None
    cost_spent: float | None = None
    cost_budget: float | None = None
    interval_rule: IntervalRule | str = "robust-t"

    def _summary_rows(self, alpha, low, high):
        items = self._design_items("Method:", "Queries used:") | {
            "Stopped because of:": "(still running)" if self.stop_reason is None else self.stop_reason,
            "Estimated accuracy:": f"{self.estimate:.4f}", "Standard error:": f"{self.std_error:.4f}",
            f"{100 * (1 - alpha):g}% CI:": f"[{low:.4f}, {high:.4f}]"}
        if self.anytime_interval is not None:
            a_low, a_high = self.anytime_interval
            items[f"{100 * (1 - self.anytime_alpha):g}% anytime CS:"] = f"[{a_low:.4f}, {a_high:.4f}]"
        if self.cost_spent is not None:
            budget = "" if self.cost_budget is None else f" (budget {self.cost_budget:.6g})"
            items["Cost spent:"] = f"{self.cost_spent:.6g}{budget}"
        return "faqstats accuracy estimate", items, [] if self.design is None else [f"Design: {self.design}"]


@dataclass(frozen=True)
class ComparisonResult(_Result):
    """Estimated accuracy difference ``theta_A - theta_B`` with its uncertainty.

    Attributes
    ----------
    estimate, std_error : float
        Estimate of ``delta = theta_A - theta_B``, and its standard error.
    estimate_a, estimate_b : float
        The two accuracies (``estimate_b`` exact in the reference design).
    n_queries, n_questions : int
    method : {"coupled", "paired", "reference", "paired_sample_mean", "reference_sample_mean"}
        The design (``"paired"``: shared; ``"*_sample_mean"``: no predictor, uniform draws).
    variance_method : {"martingale", "finite-population"}
    df : float or None
    interval_rule : IntervalRule or str, default="robust-t"
        The rule of :meth:`conf_int`.

    Examples
    --------
    >>> r = ComparisonResult(estimate=0.05, std_error=0.02, estimate_a=0.7, estimate_b=0.65,
    ...                      n_queries=50, n_questions=500, method="paired",
    ...                      variance_method="martingale", df=40.0)
    >>> [round(x, 3) for x in r.conf_int()]
    [0.01, 0.09]
    >>> round(r.pvalue(), 4)
    0.0166
    """

    estimate: float
    std_error: float
    estimate_a: float
    estimate_b: float
    n_queries: int
    n_questions: int
    method: str
    variance_method: str
    df: float | None = None
    interval_rule: IntervalRule | str = "robust-t"

    _bounds = (-1.0, 1.0)

    def pvalue(self, null=0.0, alternative="two-sided"):
        """P-value of ``H0: delta = null``.

        Parameters
        ----------
        null : float in [-1, 1], default=0.0
        alternative : {"two-sided", "larger", "smaller"}, default="two-sided"
            ``delta != null``, ``delta > null`` or ``delta < null``.

        Returns
        -------
        float
        """
        check_scalar(null, "null", low=-1.0, high=1.0)
        if alternative not in ("two-sided", "larger", "smaller"):
            raise ValueError(f"alternative must be 'two-sided', 'larger' or 'smaller', got {alternative!r}.")
        if self._all_answers_equal():  # exact, as the interval: the chance of differences all this equal
            lo, hi = self._bounds
            v, h0 = (self.estimate - lo) / (hi - lo), (null - lo) / (hi - lo)
            chance = all_equal_chance(v, h0, self.n_queries, self.n_questions)
            if alternative == "two-sided":
                return min(1.0, 2.0 * chance)
            return chance if (alternative == "larger") == (h0 < v) else 1.0
        dist = stats.norm if self.df is None else stats.t(self.df)
        if self.std_error == 0:
            stat = 0.0 if self.estimate == null else np.copysign(np.inf, self.estimate - null)
        else:
            stat = (self.estimate - null) / self.std_error
        if alternative == "two-sided":
            return float(2 * dist.sf(abs(stat)))
        return float(dist.sf(stat) if alternative == "larger" else dist.cdf(stat))

    def _summary_rows(self, alpha, low, high):
        known = " (known)" if self.method.startswith("reference") else ""
        items = self._design_items("Design:", "Questions asked:") | {
            "Accuracy A:": f"{self.estimate_a:.4f}",
            f"Accuracy B{known}:": f"{self.estimate_b:.4f}",
            "Difference A - B:": f"{self.estimate:+.4f}",
            "Standard error:": f"{self.std_error:.4f}",
            f"{100 * (1 - alpha):g}% CI:": f"[{low:+.4f}, {high:+.4f}]",
            "p-value (no difference):": f"{self.pvalue():.4g}",
        }
        return "faqstats paired comparison", items, ()
