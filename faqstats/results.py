"""Result object of an evaluation: estimate, standard error, intervals, summary."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from ._inference import wald_interval

__all__ = ["AccuracyResult"]


@dataclass(frozen=True)
class AccuracyResult:
    """Estimated accuracy of one model on a fixed bank, with its uncertainty.

    Attributes
    ----------
    estimate : float
        Point estimate of theta, the model's mean outcome over the whole bank.
    std_error : float
        Estimated standard error of ``estimate``.
    n_queries : int
        Questions asked (answers observed).
    n_questions : int
        Size of the bank, N.
    method : str
        ``"pai"`` (Pro-Active Inference), ``"sample_mean"`` (uniform without replacement
        with finite-population correction) or ``"aipw"`` (nature's-order Bernoulli).
    variance_method : str
        How ``std_error`` was estimated.
    df : float or None
        Degrees of freedom of the Student t quantile used by :meth:`conf_int`
        (``n - 1`` for a mean of ``n`` increments); ``None`` for the normal quantile.
    stop_reason : {"budget", "width"} or None
        Why querying stopped; ``None`` for an interim result of a running session.
    anytime_interval : tuple or None
        The confidence sequence's interval at the end (anytime-valid at level
        ``1 - anytime_alpha``), when one was tracked.
    anytime_alpha : float or None

    Examples
    --------
    >>> r = AccuracyResult(estimate=0.62, std_error=0.03, n_queries=70, n_questions=693,
    ...                    method="pai", variance_method="martingale")
    >>> [round(x, 3) for x in r.conf_int()]
    [0.561, 0.679]
    """

    estimate: float
    std_error: float
    n_queries: int
    n_questions: int
    method: str
    variance_method: str
    df: float | None = None
    stop_reason: str = "budget"
    anytime_interval: tuple | None = None
    anytime_alpha: float | None = None

    def conf_int(self, alpha=0.05, alternative="two-sided"):
        """Wald-type interval at level ``1 - alpha`` (t quantile when ``df`` is set), clipped to [0, 1].

        Returns ``(low, high)``. The estimate itself is never clipped (that would bias
        it); in the rare case it falls outside [0, 1] the clipped interval sits at the edge.

        After stopping early on width (``stop_reason == "width"``) the sample size was
        chosen by the data, and only the anytime-valid interval keeps its guarantee: it
        is returned, and other levels or one-sided intervals are refused.
        """
        if self.stop_reason == "width":
            if alternative != "two-sided" or abs(alpha - self.anytime_alpha) > 1e-12:
                raise ValueError(
                    "Querying stopped at a data-dependent time (stop_when_width): only the anytime-valid "
                    f"two-sided interval at alpha={self.anytime_alpha} is valid."
                )
            return self.anytime_interval
        return wald_interval(self.estimate, self.std_error, alpha=alpha, alternative=alternative, df=self.df)

    confint = conf_int

    def summary(self, alpha=0.05):
        """A plain-text table of the result."""
        low, high = self.conf_int(alpha)
        level = f"{100 * (1 - alpha):g}%"
        rows = [
            ("Method", self.method),
            ("Variance estimator", self.variance_method),
            ("Interval quantile", "normal" if self.df is None else f"t, {self.df:g} df"),
            ("Questions in bank", f"{self.n_questions}"),
            ("Queries used", f"{self.n_queries} ({100 * self.n_queries / self.n_questions:.1f}%)"),
            ("Estimated accuracy", f"{self.estimate:.4f}"),
            ("Standard error", f"{self.std_error:.4f}"),
            (f"{level} CI", f"[{low:.4f}, {high:.4f}]"),
            ("Stopped because of", "(still running)" if self.stop_reason is None else self.stop_reason),
        ]
        if self.anytime_interval is not None:
            a_low, a_high = self.anytime_interval
            rows.append((f"{100 * (1 - self.anytime_alpha):g}% anytime CS", f"[{a_low:.4f}, {a_high:.4f}]"))
        width = max(len(k) for k, _ in rows)
        line = "=" * (width + 24)
        body = "\n".join(f"{k:<{width}}  {v:>20}" for k, v in rows)
        return f"{line}\nfaqstats accuracy estimate\n{line}\n{body}\n{line}"

    def to_dict(self):
        d = asdict(self)
        if d["anytime_interval"] is not None:
            d["anytime_interval"] = [float(x) for x in d["anytime_interval"]]
        return d

    def to_json(self):
        return json.dumps(self.to_dict())

    def __str__(self):
        return self.summary()
