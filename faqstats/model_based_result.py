"""The model-based result and its checks: the conformal quantile, the statistics a run is checked with (PAI's
disagreement, the prequential residual, the spread of an averaged predictor's components, the estimate's rank among
the calibration models'), each at its share of ``check_level`` (Bonferroni), and the result that reports which fired.
"""

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ._validation import check_scalar
from .results import AccuracyResult, table_summary

__all__ = ["CHECKS", "ModelBasedResult", "component_spread", "conformal_quantile", "min_calibration_runs",
           "prequential_residual"]

#: the checks a model-based run may be flagged by, and what each compares with the calibration runs'
CHECKS = {
    "disagreement": "|model-based - PAI| / PAI's standard error",
    "residual": "|prequential residual| (the answers against the predictions before them)",
    "components": "the spread of an averaged predictor's component estimates, over the scale",
    "above": "the model-based estimate, above all but a fraction of the calibration models'",
    "below": "the model-based estimate, below all but a fraction of the calibration models'",
}


def conformal_quantile(scores, alpha):
    """The split-conformal quantile: the ``ceil((n + 1)(1 - alpha))``-th smallest of ``n`` scores (``inf`` if none).

    Parameters
    ----------
    scores : array-like of shape (n,)
        The calibration runs' scores.
    alpha : float in (0, 1)
        A new exchangeable score exceeds the quantile with probability at most ``alpha``.

    Returns
    -------
    float

    Examples
    --------
    >>> conformal_quantile(np.arange(1.0, 20.0), 0.05)
    19.0
    """
    s = np.sort(np.asarray(scores, dtype=float))
    alpha = check_scalar(alpha, "alpha", low=0.0, high=1.0, closed="neither")
    k = math.ceil((s.size + 1) * (1.0 - alpha))
    return float(s[k - 1]) if k <= s.size else math.inf


def min_calibration_runs(alpha):
    """The fewest calibration runs whose :func:`conformal_quantile` at ``alpha`` is finite: ``ceil(1 / alpha) - 1``.

    With fewer, no finite interval is guaranteed ``1 - alpha`` coverage, and no check at level ``alpha`` can fire.

    Parameters
    ----------
    alpha : float in (0, 1)

    Returns
    -------
    int

    Examples
    --------
    >>> min_calibration_runs(0.05), min_calibration_runs(0.1), min_calibration_runs(0.025)
    (19, 9, 39)
    """
    alpha = check_scalar(alpha, "alpha", low=0.0, high=1.0, closed="neither")
    n = max(1, math.ceil((1.0 - alpha) / alpha) - 1)
    while math.ceil((n + 1) * (1.0 - alpha)) > n:  # ceil((n + 1)(1 - alpha)) <= n, exactly, whatever the rounding
        n += 1
    return n


def prequential_residual(queries):
    """``sum_t (z_t - p_t) / sqrt(sum_t p_t (1 - p_t))`` over a run's ``queries_``: of one sign for a model
    systematically better or worse than the history predicts.

    Parameters
    ----------
    queries : pandas.DataFrame or dict
        Columns ``outcome`` and ``prediction`` (the prediction before each answer).

    Returns
    -------
    float

    Examples
    --------
    >>> round(prequential_residual({"outcome": [1.0, 1.0], "prediction": [0.5, 0.5]}), 6)
    1.414214
    """
    z, p = np.asarray(queries["outcome"], dtype=float), np.asarray(queries["prediction"], dtype=float)
    return float(np.sum(z - p) / math.sqrt(max(float(np.sum(p * (1.0 - p))), 1e-12)))


def component_spread(estimates, scale):
    """``(max - min) / scale`` of an averaged predictor's component estimates (NaN without two components).

    Parameters
    ----------
    estimates : array-like of shape (k,)
        The components' model-based estimates on the same draws.
    scale : float
        The averaged estimate's standard deviation.

    Returns
    -------
    float

    Examples
    --------
    >>> component_spread([0.25, 0.75], 0.25)
    2.0
    """
    e = np.asarray(estimates, dtype=float)
    if e.size < 2:
        return math.nan
    gap = float(e.max() - e.min())
    if scale > 0:
        return gap / scale
    return 0.0 if gap == 0 else math.inf


def _check_row(name, result, level):
    """``(statistic, threshold)`` of one check: it fires when the statistic exceeds the threshold."""
    if name == "disagreement":
        return result.disagreement, conformal_quantile(result.disagreement_scores, level)
    if name == "residual":
        return abs(result.residual), conformal_quantile(np.abs(result.residual_scores), level)
    if name == "components":
        return result.spread, conformal_quantile(result.spread_scores, level)
    sign = 1.0 if name == "above" else -1.0
    return sign * result.estimate, conformal_quantile(sign * np.asarray(result.calibration_estimates), level)


@dataclass(frozen=True)
class ModelBasedResult:
    """A model-based estimate, its history-calibrated interval, and the checks of its assumption.

    Every check compares a statistic of this run with the same statistic on the calibration runs and fires when
    it exceeds their conformal quantile at ``check_level / len(checks)``: a model exchangeable with the
    calibration models is flagged by any of them with probability at most ``check_level`` (Bonferroni).

    Attributes
    ----------
    estimate : float
        ``(asked outcomes + unasked predictions) / N``.
    scale : float
        The predictor's standard deviation of the estimate (the unasked total's, over ``N``).
    calibration_scores : ndarray
        The held-out history models' standardised errors ``|estimate - theta| / scale``.
    design_based : AccuracyResult
        PAI's estimate and interval from the same draws (valid for every model).
    disagreement : float
        ``|estimate - design_based.estimate| / design_based.std_error``.
    disagreement_scores : ndarray
        The same statistic on the calibration runs.
    residual : float
        The run's :func:`~faqstats.model_based.prequential_residual`.
    residual_scores : ndarray
        The same statistic on the calibration runs.
    check_level : float
        A model like the history's is flagged with probability at most this (:attr:`flagged`).
    spread : float
        :func:`component_spread` of an averaged predictor's component estimates (NaN for one predictor).
    spread_scores : ndarray or None
        The same statistic on the calibration runs.
    calibration_estimates : ndarray or None
        The calibration runs' model-based estimates (the ``"above"`` and ``"below"`` checks).
    checks : tuple of str
        The checks that share ``check_level`` (names of :data:`CHECKS`).

    Examples
    --------
    >>> pai = AccuracyResult(estimate=0.5, std_error=0.1, n_queries=10, n_questions=100, method="pai",
    ...                      variance_method="martingale")
    >>> r = ModelBasedResult(0.52, 0.02, np.linspace(0.1, 3.0, 40), pai, 0.2, np.linspace(0, 2, 40), -0.5,
    ...                      np.linspace(-2, 2, 40), 0.1)
    >>> [round(x, 3) for x in r.conf_int(0.05)], r.flagged
    ([0.461, 0.579], False)

    An estimate above every calibration model's fires the ``"above"`` check:

    >>> r = ModelBasedResult(0.9, 0.02, np.linspace(0.1, 3.0, 40), pai, 0.2, np.linspace(0, 2, 40), -0.5,
    ...                      np.linspace(-2, 2, 40), 0.1, calibration_estimates=np.linspace(0.3, 0.7, 40),
    ...                      checks=("disagreement", "residual", "above"))
    >>> r.flagged, r.fired_checks
    (True, ('above',))
    """

    estimate: float
    scale: float
    calibration_scores: np.ndarray = field(repr=False)
    design_based: AccuracyResult
    disagreement: float
    disagreement_scores: np.ndarray = field(repr=False)
    residual: float
    residual_scores: np.ndarray = field(repr=False)
    check_level: float = 0.1
    spread: float = math.nan
    spread_scores: np.ndarray = field(default=None, repr=False)
    calibration_estimates: np.ndarray = field(default=None, repr=False)
    checks: tuple = ("disagreement", "residual")

    def check_table(self):
        """Every check's statistic, its threshold (the calibration runs' conformal quantile) and level, and
        whether it fired.

        Returns
        -------
        pandas.DataFrame
            Indexed by check, columns ``statistic``, ``threshold``, ``level`` and ``fired``.

        Examples
        --------
        >>> pai = AccuracyResult(estimate=0.5, std_error=0.1, n_queries=10, n_questions=100, method="pai",
        ...                      variance_method="martingale")
        >>> r = ModelBasedResult(0.52, 0.02, np.linspace(0.1, 3.0, 40), pai, 0.2, np.linspace(0, 2, 40), -0.5,
        ...                      np.linspace(-2, 2, 40), 0.1)
        >>> r.check_table()["fired"].tolist()
        [False, False]
        """
        level = self.check_level / len(self.checks)
        rows = [_check_row(name, self, level) for name in self.checks]
        stat = [float(s) for s, _ in rows]
        threshold = [float(t) for _, t in rows]
        return pd.DataFrame({"statistic": stat, "threshold": threshold, "level": level,
                             "fired": [s > t for s, t in zip(stat, threshold)]},
                            index=pd.Index(list(self.checks), name="check"))

    @property
    def fired_checks(self):
        """The checks that fired, in the order of :attr:`checks` (empty when none did)."""
        table = self.check_table()
        return tuple(table.index[table["fired"]])

    @property
    def flagged(self):
        """Whether any check flags the model-based interval (a model unlike the history's)."""
        return bool(self.fired_checks)

    def conf_int(self, alpha=0.05):
        """The calibrated interval ``estimate +- q scale`` (``q`` the conformal quantile), clipped to [0, 1].

        Parameters
        ----------
        alpha : float in (0, 1), default=0.05

        Returns
        -------
        low : float
        high : float
        """
        half = conformal_quantile(self.calibration_scores, alpha) * self.scale
        return max(0.0, self.estimate - half), min(1.0, self.estimate + half)

    confint = conf_int

    def calibrated(self, alpha=0.05):
        """Whether the calibration runs are enough for a finite interval at ``alpha``
        (:func:`min_calibration_runs`); without them :meth:`conf_int` is [0, 1].

        Parameters
        ----------
        alpha : float in (0, 1), default=0.05

        Returns
        -------
        bool
        """
        return self.calibration_scores.size >= min_calibration_runs(alpha)

    def recommended_interval(self, alpha=0.05):
        """The model-based interval, or the design-based one when a check flags it or the calibration runs are
        too few for a calibrated interval at ``alpha`` (:meth:`calibrated`).

        Parameters
        ----------
        alpha : float in (0, 1), default=0.05

        Returns
        -------
        low : float
        high : float
        """
        if self.flagged or not self.calibrated(alpha):
            return self.design_based.conf_int(alpha)
        return self.conf_int(alpha)

    def summary(self, alpha=0.05):
        """Both estimates, their intervals, the guarantee each carries and the checks that fired.

        Parameters
        ----------
        alpha : float in (0, 1), default=0.05

        Returns
        -------
        statsmodels.iolib.summary2.Summary
        """
        low, high = self.conf_int(alpha)
        d_low, d_high = self.design_based.conf_int(alpha)
        level = f"{100 * (1 - alpha):g}%"
        items = {
            "Model-based estimate:": f"{self.estimate:.4f}",
            f"{level} CI (calibrated):": f"[{low:.4f}, {high:.4f}]",
            "Design-based (PAI):": f"{self.design_based.estimate:.4f}",
            f"{level} CI (PAI):": f"[{d_low:.4f}, {d_high:.4f}]",
            "Queries used:": f"{self.design_based.n_queries} of {self.design_based.n_questions}",
            "Calibration runs:": f"{self.calibration_scores.size}",
            "Checks:": f"{', '.join(self.checks)} (each at {self.check_level / len(self.checks):.3g})",
        }
        notes = ["Model-based interval: valid if this model is like the history's models (calibrated on "
                 "held-out history models; marginal coverage under exchangeability).",
                 "Design-based interval: valid for every model (the draws' known probabilities)."]
        n, needed = self.calibration_scores.size, min_calibration_runs(alpha)
        if n < needed:
            notes.append(f"TOO FEW CALIBRATION RUNS: {n}, and a {level} calibrated interval needs at least "
                         f"{needed}, so it is [0, 1]: use the design-based interval (or a history with more complete "
                         "rows).")
        table = self.check_table()
        share = float(table["level"].iloc[0])
        if n < min_calibration_runs(share):
            notes.append(f"The checks cannot fire: {n} calibration runs are too few at their level {share:.3g} (it "
                         f"needs {min_calibration_runs(share)}).")
        fired = table[table["fired"]]
        if len(fired):
            said = ", ".join(f"{name} {row.statistic:.2f} > {row.threshold:.2f}" for name, row in fired.iterrows())
            notes.append(f"CHECK: this model looks unlike the history's ({said}, beyond what the calibration runs "
                         "allow): use the design-based interval.")
        return table_summary("faqstats model-based estimate", items=items, notes=notes)

    def __str__(self):
        return str(self.summary())
