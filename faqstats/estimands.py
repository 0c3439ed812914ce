"""Estimands beyond the bank's mean: per-group accuracies, macro averages, weighted aggregates.

Each is a linear functional ``theta_w = sum_j w_j z_j`` of the outcomes, so its Des Raj increments
are martingale differences whatever the policy (user guide, "Groups and weighted estimands").
"""

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ._inference import pai_inference
from ._validation import check_alpha
from .intervals import IntervalRule, interval_rule, wald_interval

__all__ = ["BankMean", "Estimand", "EstimandTracker", "GroupResults", "MacroAverage", "WeightedAverage", "as_estimand",
           "encode_groups", "estimand_weights", "group_census_means", "stratified_allocation"]

PSEUDO_RESIDUAL_INVERSE = 6.0  # 1 / the simultaneous intervals' pseudo-residual variance, E[p(1-p)] for p ~ U(0, 1)


def encode_groups(groups, n_questions):
    """``(codes, labels)``: each question's group as an integer code into ``labels`` (sorted)."""
    g = np.asarray(groups)
    if g.ndim != 1 or g.size != n_questions:
        raise ValueError(f"groups must hold one label per question ({n_questions}), got shape {g.shape}.")
    if g.dtype.kind == "f" and np.isnan(g).any():
        raise ValueError("groups must not contain NaN: give every question a group label.")
    labels, codes = np.unique(g, return_inverse=True)
    return codes.astype(np.intp), labels


class Estimand:
    """What a run estimates: a linear functional ``theta_w = sum_j w_j z_j`` of the outcomes (``w`` sums to 1);
    ``estimand=`` takes one, ``"micro"`` (:class:`BankMean`), ``"macro"`` or question weights."""

    name = None
    #: ``AccuracyResult.method`` of its estimate, and of a stratified design's (None: not stratifiable).
    method = "pai-weighted"
    stratified_method = None
    #: Whether it is the bank's mean (its increments are the run's own).
    is_bank_mean = False

    def question_weights(self, codes, n_questions):
        """The weights ``w`` (summing to 1); ``codes``: each question's group (None without groups)."""
        raise NotImplementedError

    def strata_shares(self, group_sizes, n_questions):
        """Each group's share ``a_g`` in ``theta = sum_g a_g theta_g`` (a stratified design)."""
        raise ValueError("stratify is for estimand='micro' or 'macro'.")

    def census(self, answers, codes):
        """The estimand from every answer (a census reports it)."""
        return math.fsum(self.question_weights(codes, answers.size) * answers)

    def inference(self, increments, *, interval, weights, n_questions, answers=None, codes=None):
        """``(estimate, variance, df, variance method)`` (``pai_inference``; ``answers``: at a census)."""
        census = None if answers is None else self.census(answers, codes)
        return pai_inference(increments, interval=interval, weights=weights, n_questions=n_questions, census=census)

    def stored(self):
        """The JSON value a session stores: ``"micro"``, ``"macro"`` or the weights."""
        if self.name in ("micro", "macro"):
            return self.name
        raise ValueError(f"a session stores its estimand as 'micro', 'macro' or question weights, not {self!r}: "
                         "give it WeightedAverage(weights) (or the weights).")

    def __eq__(self, other):  # the same class with the same attributes
        if type(self) is not type(other) or vars(self).keys() != vars(other).keys():
            return False
        return all(np.array_equal(v, vars(other)[k]) for k, v in vars(self).items())

    def __hash__(self):
        return hash(type(self).__qualname__)

    def __repr__(self):
        return f"{type(self).__name__}()"


class BankMean(Estimand):
    """The bank's accuracy, ``w_j = 1 / N`` (``estimand="micro"``)."""

    name, method, stratified_method, is_bank_mean = "micro", "pai", "pai-stratified", True

    def question_weights(self, codes, n_questions):
        return np.full(n_questions, 1.0 / n_questions)

    def strata_shares(self, group_sizes, n_questions):
        return np.asarray(group_sizes) / n_questions

    def census(self, answers, codes):
        return math.fsum(answers) / answers.size


class MacroAverage(Estimand):
    """The mean of the groups' accuracies, ``w_j = 1 / (G N_g)`` (``estimand="macro"``)."""

    name, method, stratified_method = "macro", "pai-macro", "pai-stratified-macro"

    def question_weights(self, codes, n_questions):
        if codes is None:
            raise ValueError("estimand='macro' averages over groups: pass groups= to fit.")
        sizes = np.bincount(codes)
        return 1.0 / (sizes.size * sizes[codes])

    def strata_shares(self, group_sizes, n_questions):
        return np.full(len(group_sizes), 1.0 / len(group_sizes))

    def census(self, answers, codes):
        means = group_census_means(answers, codes, int(codes.max()) + 1)
        return math.fsum(means) / means.size


class WeightedAverage(Estimand):
    """Any non-negative question ``weights`` of shape (N,), normalised (``estimand=`` an array)."""

    name = "weighted"

    def __init__(self, weights):
        self.weights = np.asarray(weights, dtype=float)

    def question_weights(self, codes, n_questions):
        w = self.weights
        if w.shape != (n_questions,):
            raise ValueError(f"estimand weights must hold one weight per question ({n_questions}), got shape {w.shape}.")
        if not np.all(np.isfinite(w)) or (w < 0).any() or w.sum() <= 0:
            raise ValueError("estimand weights must be finite, non-negative and not all zero.")
        return w / w.sum()

    def stored(self):
        return self.weights.tolist()

    def __eq__(self, other):  # the same estimand: the same normalised weights
        if type(self) is not type(other) or self.weights.shape != other.weights.shape:
            return False
        a, b = self.weights.sum(), other.weights.sum()
        return bool(np.array_equal(self.weights * b, other.weights * a))

    __hash__ = Estimand.__hash__

    def __repr__(self):
        return f"WeightedAverage({self.weights.tolist()!r})"


def as_estimand(estimand):
    """The :class:`Estimand` that ``estimand`` is or names: ``"micro"``, ``"macro"``, question weights or one."""
    if isinstance(estimand, Estimand):
        return estimand
    if isinstance(estimand, str):
        if estimand == "micro":
            return BankMean()
        if estimand == "macro":
            return MacroAverage()
        raise ValueError(f"estimand must be 'micro', 'macro' or an array of question weights, got {estimand!r}.")
    return WeightedAverage(estimand)


def estimand_weights(estimand, codes, n_questions):
    """The question weights ``w`` (summing to 1) of ``estimand`` (:meth:`Estimand.question_weights`)."""
    return as_estimand(estimand).question_weights(codes, n_questions)


def group_census_means(answers, codes, n_groups):
    """Every group's census mean, ``math.fsum(z_g) / N_g`` (NaN for a group without questions)."""
    answers = np.asarray(answers, dtype=float)
    out = np.full(int(n_groups), np.nan)
    for g in range(int(n_groups)):
        member = answers[codes == g]
        if member.size:
            out[g] = math.fsum(member) / member.size
    return out


def stratified_allocation(sizes, budget, min_group_share=0.0, replace=False):
    """Draws per group for a stratified design, summing to ``budget``: proportional to size, ``min_group_share``
    of the budget spread evenly, at least 2 per group (or the whole group, if smaller)."""
    sizes = np.asarray(sizes, dtype=int)
    cap = np.full(sizes.size, budget) if replace else sizes
    low = np.minimum(2, cap)
    if low.sum() > budget:
        raise ValueError(f"a stratified design needs at least {low.sum()} queries for {sizes.size} groups "
                         f"(2 per group), got budget={budget}.")
    if cap.sum() < budget:
        raise ValueError(f"budget={budget} exceeds the {cap.sum()} questions of the groups.")
    s = float(min_group_share)
    target = budget * ((1.0 - s) * sizes / sizes.sum() + s / sizes.size)
    n = np.clip(np.floor(target).astype(int), low, cap)
    while n.sum() != budget:  # largest remainders first, within [low, cap]
        gap = target - n
        if n.sum() < budget:
            gap[n >= cap] = -np.inf
            n[int(np.argmax(gap))] += 1
        else:
            gap[n <= low] = np.inf
            n[int(np.argmin(gap))] -= 1
    return n


def _schedule(allocation):
    """The group of every draw: each group's draws spread evenly over the run (deterministic)."""
    total, drawn, out = allocation.sum(), np.zeros_like(allocation), []
    for t in range(total):
        lag = allocation * (t + 1) / total - drawn
        lag[drawn >= allocation] = -np.inf
        g = int(np.argmax(lag))
        drawn[g] += 1
        out.append(g)
    return np.array(out, dtype=np.intp)


class EstimandTracker:
    """Des Raj increments ``a . v + a_I (z_I - p_I) / q_t(I)`` of the headline estimand (question ``weights``)
    and of each group's accuracy (``codes``, or None) from one run's draws (``v``: the asked questions' outcomes,
    the others' predictions). ``min_group_share``: the policy's share given evenly to the open groups;
    ``allocation``: a stratified design's draws per group (only the drawn group's increment is recorded)."""

    def __init__(self, weights, codes, replace, min_group_share=0.0, allocation=None):
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
        self.allocation = allocation
        self.schedule = None if allocation is None else _schedule(np.asarray(allocation))
        self.strata = []  # stratified: (group, increment) of every draw, in order

    @property
    def stratified(self):
        return self.schedule is not None

    def restrict(self, q, available, index):
        """A stratified design's law for draw ``index``: ``q`` on its group's askable questions."""
        if self.schedule is None:
            return q
        member = (self.codes == self.schedule[index]) & available
        r = np.where(member, q, 0.0)
        total = r.sum()
        return r / total if total > 0 else member / np.count_nonzero(member)

    def law(self, q, available):
        """``q`` mixed with the group floor (unchanged without one, or in a stratified design)."""
        if self.min_group_share == 0.0 or self.codes is None or self.stratified:
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
        if self.stratified:  # the drawn group's Des Raj increment over its own questions
            g = self.codes[question]
            self.strata.append((g, (v[self.codes == g].sum() + residual) / self.sizes[g]))
        else:
            row = [self.weights @ v + self.weights[question] * residual]
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
        Estimates, standard errors and degrees of freedom (``inf``: normal quantile).
    n_questions, n_asked : ndarray of shape (G,)
        Questions in each group, and the draws that fell in it.
    replace : bool
        Whether the draws were with replacement.
    n_units : ndarray of shape (G,) or None
        With clusters: the clusters in each group.
    interval_rule : IntervalRule or str, default="robust-t"
        The rule of the groups' own intervals.

    Examples
    --------
    >>> gr = GroupResults(np.array(["arc", "mmlu"]), np.array([.6, .8]), np.array([.05, .04]), np.array([20., 20.]),
    ...                   np.array([50, 50]), np.array([21, 21]))
    >>> gr.conf_int(simultaneous=True).round(3).to_numpy().tolist()
    [[0.474, 0.726], [0.697, 0.903]]
    """

    labels: np.ndarray
    estimate: np.ndarray
    std_error: np.ndarray
    df: np.ndarray
    n_questions: np.ndarray
    n_asked: np.ndarray
    replace: bool = False
    n_units: np.ndarray | None = None
    interval_rule: IntervalRule | str = "robust-t"

    def __post_init__(self):  # the rule itself, whether given by name or as a rule
        object.__setattr__(self, "interval_rule", interval_rule(self.interval_rule))

    def simultaneous_std_error(self):
        """The simultaneous intervals' standard errors, ``sqrt(V_g + (1 - f_g) / (6 n_g^2))`` (``inf`` without draws).

        Returns
        -------
        ndarray of shape (G,)
        """
        n = self.n_asked.astype(float)
        units = self.n_questions if self.n_units is None else self.n_units
        fpc = np.ones_like(n) if self.replace else np.clip(1.0 - n / units, 0.0, 1.0)
        with np.errstate(divide="ignore"):
            floor = np.where(n > 0, fpc / (PSEUDO_RESIDUAL_INVERSE * np.maximum(n, 1.0) ** 2), np.inf)
        return np.sqrt(self.std_error**2 + floor)

    def conf_int(self, alpha=0.05, simultaneous=False):
        """A DataFrame indexed by group with ``lower`` and ``upper`` columns.

        Parameters
        ----------
        alpha : float in (0, 1), default=0.05
        simultaneous : bool, default=False
            ``True``: Bonferroni intervals of all groups (:meth:`simultaneous_std_error`, t with ``n_g - 1`` df).

        Returns
        -------
        pandas.DataFrame
        """
        alpha = check_alpha(alpha)
        if simultaneous:
            low, high = wald_interval(self.estimate, self.simultaneous_std_error(), alpha=alpha / self.labels.size,
                                      df=np.maximum(self.n_asked - 1.0, 1.0))
            low, high = np.where(self.n_asked > 0, low, 0.0), np.where(self.n_asked > 0, high, 1.0)
        else:
            low, high = self.interval_rule.interval(self.estimate, self.std_error, alpha=alpha, df=self.df)
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


def group_results(increments, labels, sizes, asked_codes, *, interval, weights, n_questions, n_units=None,
                  census=None):
    """:class:`GroupResults` from the ``(n, G)`` group increments (each column as :func:`pai_inference`)."""
    fits = [pai_inference(column, interval=interval, weights=weights, n_questions=n_questions,
                          census=None if census is None else census[g])
            for g, column in enumerate(np.asarray(increments, dtype=float).T)]
    n_asked = np.bincount(asked_codes, minlength=labels.size)
    return _group_results(labels, fits, sizes, n_asked, n_questions is None, n_units, interval)


def _group_results(labels, fits, sizes, n_asked, replace, n_units, interval):
    """:class:`GroupResults` from each group's ``(estimate, variance, df, ...)``."""
    est, var, df = (np.array([f[i] for f in fits], dtype=float) for i in range(3))
    return GroupResults(labels, est, np.sqrt(var), np.where(np.isnan(df), np.inf, df), np.asarray(sizes), n_asked,
                        bool(replace), n_units, interval)


def stratified_results(strata, labels, sizes, *, interval, replace, census=None):
    """:class:`GroupResults` of a stratified design from its ``(group, increment)`` records."""
    by_group = [[] for _ in labels]
    for g, phi in strata:
        by_group[g].append(phi)
    fits = []
    for g, phis in enumerate(by_group):
        n_g = int(sizes[g])
        if not replace and len(phis) == n_g:  # a census of the group: exact
            fits.append((phis[-1] if census is None else float(census[g]), 0.0, np.inf))
        elif len(phis) < 2:
            raise ValueError(f"group {labels[g]!r} has {len(phis)} draw(s) so far; its variance needs two.")
        else:
            fits.append(pai_inference(phis, interval=interval, n_questions=None if replace else n_g))
    n_asked = np.array([len(p) for p in by_group])
    return _group_results(labels, fits, sizes, n_asked, replace, None, interval)


def combine_strata(results, shares):
    """``(estimate, variance, df)`` of ``sum_g a_g theta_g``: uncorrelated groups, Welch-Satterthwaite df."""
    a = np.asarray(shares, dtype=float)
    parts = a**2 * results.std_error**2
    var = float(parts.sum())
    finite = np.isfinite(results.df) & (parts > 0)
    denominator = float(np.sum(parts[finite] ** 2 / results.df[finite]))
    df = var**2 / denominator if denominator > 0 else np.inf
    return float(a @ results.estimate), var, df
