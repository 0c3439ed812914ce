"""Estimands beyond the bank's mean: per-group accuracies, macro averages, weighted aggregates.

A bank's questions often come in groups (MMLU's subjects, a suite's tasks). From the same
draws PAI estimates, exactly unbiased, every group's accuracy and any weighted aggregate
``theta_w = sum_j w_j z_j`` (``w`` summing to one; the macro average gives each group the
same total weight): each is a linear functional of the outcomes, and the Des Raj increment
of a linear functional is a martingale difference whatever the policy (user guide,
"Groups and weighted estimands").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ._inference import pai_inference, wald_interval
from ._validation import check_alpha

__all__ = ["GroupResults", "EstimandTracker", "encode_groups", "estimand_weights"]


def encode_groups(groups, n_questions):
    """``(codes, labels)``: each question's group as an integer code into ``labels`` (sorted).

    >>> codes, labels = encode_groups(["b", "a", "b"], 3)
    >>> codes.tolist(), labels.tolist()
    ([1, 0, 1], ['a', 'b'])
    """
    g = np.asarray(groups)
    if g.ndim != 1 or g.size != n_questions:
        raise ValueError(f"groups must hold one label per question ({n_questions}), got shape {g.shape}.")
    if g.dtype.kind == "f" and np.isnan(g).any():
        raise ValueError("groups must not contain NaN: give every question a group label.")
    labels, codes = np.unique(g, return_inverse=True)
    return codes.astype(np.intp), labels


def estimand_weights(estimand, codes, n_questions):
    """The question weights ``w`` (summing to 1) of ``estimand``.

    ``"micro"``: ``1 / N`` each (the bank's accuracy); ``"macro"``: ``1 / (G N_g)`` (each of the
    ``G`` groups counts the same, as MMLU's headline does); an array: any non-negative weights,
    normalised.

    >>> estimand_weights("macro", np.array([0, 0, 0, 1]), 4).tolist()
    [0.16666666666666666, 0.16666666666666666, 0.16666666666666666, 0.5]
    """
    if isinstance(estimand, str):
        if estimand == "micro":
            return np.full(n_questions, 1.0 / n_questions)
        if estimand == "macro":
            if codes is None:
                raise ValueError("estimand='macro' averages over groups: pass groups= to fit.")
            sizes = np.bincount(codes)
            return 1.0 / (sizes.size * sizes[codes])
        raise ValueError(f"estimand must be 'micro', 'macro' or an array of question weights, got {estimand!r}.")
    w = np.asarray(estimand, dtype=float)
    if w.shape != (n_questions,):
        raise ValueError(f"estimand weights must hold one weight per question ({n_questions}), got shape {w.shape}.")
    if not np.all(np.isfinite(w)) or (w < 0).any() or w.sum() <= 0:
        raise ValueError("estimand weights must be finite, non-negative and not all zero.")
    return w / w.sum()


class EstimandTracker:
    """Increments of several linear estimands from one run's draws.

    Row 0 is the headline estimand ``sum_j w_j z_j``; rows ``1..G`` the groups' accuracies.
    Each row ``a`` has the Des Raj increment ``a . v + a_I (z_I - p_I) / q_t(I)``, where ``v``
    holds the asked questions' outcomes and the others' predictions (with replacement: all
    predictions). A step costs one pass over the bank, so runs without groups or weights
    never build one.

    Parameters
    ----------
    weights : ndarray of shape (N,)
        The headline's question weights (:func:`estimand_weights`).
    codes : ndarray of shape (N,) or None
        Group codes (:func:`encode_groups`); ``None``: the headline only.
    replace : bool
    min_group_share : float in [0, 1)
        Mix the policy with this share of a law that gives every group with askable
        questions the same mass, spread uniformly inside it (a floor on each group's draws).
    """

    def __init__(self, weights, codes, replace, min_group_share=0.0):
        self.weights = np.asarray(weights, dtype=float)
        self.codes = codes
        self.replace = bool(replace)
        self.min_group_share = float(min_group_share)
        n = self.weights.size
        self.n_groups = 0 if codes is None else int(codes.max()) + 1
        self.sizes = None if codes is None else np.bincount(codes, minlength=self.n_groups)
        self.asked = np.zeros(n, dtype=bool)
        self.values = np.zeros(n)  # the asked questions' outcomes (0 elsewhere)
        self.rows = []

    def law(self, q, available):
        """``q`` mixed with the group floor (unchanged without one)."""
        if self.min_group_share == 0.0 or self.codes is None:
            return q
        per_group = np.bincount(self.codes, weights=available, minlength=self.n_groups)
        open_groups = np.count_nonzero(per_group)
        floor = np.where(available, 1.0 / (open_groups * np.maximum(per_group[self.codes], 1.0)), 0.0)
        s = self.min_group_share
        return (1.0 - s) * q / q.sum() + s * floor

    def record(self, question, probability, outcome, predictions):
        """Append the increments of the draw ``question`` (before its answer moves the predictor)."""
        p = np.asarray(predictions, dtype=float)
        v = p if self.replace else np.where(self.asked, self.values, p)
        residual = (outcome - p[question]) / probability
        head = self.weights @ v + self.weights[question] * residual
        row = [head]
        if self.codes is not None:
            groups = np.bincount(self.codes, weights=v, minlength=self.n_groups)
            groups[self.codes[question]] += residual
            row.extend(groups / self.sizes)
        self.rows.append(row)
        if not self.replace:
            self.asked[question] = True
            self.values[question] = outcome

    def increments(self):
        """``(n, 1 + G)`` increments: the headline's, then each group's."""
        return np.array(self.rows, dtype=float).reshape(len(self.rows), 1 + self.n_groups)


@dataclass(frozen=True)
class GroupResults:
    """Every group's accuracy from one run, with (simultaneous) intervals.

    Attributes
    ----------
    labels : ndarray
        The group labels, sorted.
    estimate, std_error, df : ndarray of shape (G,)
        Exactly unbiased estimates, their standard errors and the intervals' degrees of
        freedom (``inf``: normal quantile).
    n_questions, n_asked : ndarray of shape (G,)
        Questions in each group, and how many of them were asked.

    Examples
    --------
    >>> import numpy as np
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=80, n_questions=60, n_components=2, random_state=0)
    >>> fm = fq.LogisticFactorModel(n_components=2, max_iter=100, random_state=0).fit(bank.history)
    >>> groups = np.repeat(["arc", "gsm8k", "mmlu"], 20)
    >>> est = fq.PAIEstimator(fm, budget=30, min_group_share=0.3, random_state=0)
    >>> est = est.fit(bank.new_outcomes[0], groups=groups)
    >>> est.group_results_.conf_int(simultaneous=True).columns.tolist()
    ['lower', 'upper']
    """

    labels: np.ndarray
    estimate: np.ndarray
    std_error: np.ndarray
    df: np.ndarray
    n_questions: np.ndarray
    n_asked: np.ndarray

    def conf_int(self, alpha=0.05, simultaneous=False):
        """A DataFrame indexed by group with ``lower`` and ``upper`` columns.

        Parameters
        ----------
        alpha : float in (0, 1), default=0.05
        simultaneous : bool, default=False
            ``True``: Bonferroni intervals, which hold for all groups at once with probability
            at least ``1 - alpha`` (each at level ``1 - alpha / G``).

        Returns
        -------
        pandas.DataFrame
        """
        alpha = check_alpha(alpha)
        level = alpha / self.labels.size if simultaneous else alpha
        low, high = wald_interval(self.estimate, self.std_error, alpha=level, df=self.df)
        return pd.DataFrame({"lower": low, "upper": high}, index=pd.Index(self.labels, name="group"))

    def to_frame(self, alpha=0.05, simultaneous=False):
        """One row per group: ``n_questions``, ``n_asked``, ``estimate``, ``std_error``, ``lower``, ``upper``.

        Parameters
        ----------
        alpha : float in (0, 1), default=0.05
        simultaneous : bool, default=False
            As in :meth:`conf_int`.

        Returns
        -------
        pandas.DataFrame
        """
        frame = pd.DataFrame({"n_questions": self.n_questions, "n_asked": self.n_asked,
                              "estimate": self.estimate, "std_error": self.std_error},
                             index=pd.Index(self.labels, name="group"))
        return frame.join(self.conf_int(alpha, simultaneous))


def group_results(increments, labels, sizes, asked_codes, *, interval, weights, n_questions):
    """:class:`GroupResults` from the ``(n, G)`` group increments (each column as :func:`pai_inference`)."""
    est, se, df = [], [], []
    for column in np.asarray(increments, dtype=float).T:
        e, v, d, _ = pai_inference(column, interval=interval, weights=weights, n_questions=n_questions)
        est.append(e)
        se.append(np.sqrt(v))
        df.append(np.inf if d is None else d)
    n_asked = np.bincount(asked_codes, minlength=labels.size)
    return GroupResults(labels, np.array(est), np.array(se), np.array(df), np.asarray(sizes), n_asked)
