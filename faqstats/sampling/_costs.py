"""Costs per question: the Neyman rule with costs (:class:`CostWeightedSampler`, a policy like any other,
so every increment stays the ordinary PAI increment) and the draws a cost budget buys."""

import numbers
from operator import attrgetter

import numpy as np

from .._backend import is_torch
from .._validation import check_scalar
from ._base import Sampler

__all__ = ["CostWeightedSampler", "check_costs", "draws_for_cost"]


def check_costs(costs, n_questions, ids=None):
    """``costs`` as a read-only float array of shape ``(n_questions,)``, every entry finite and > 0 (a bad one
    named by its question id when ``ids`` are given).

    Examples
    --------
    >>> check_costs([1, 2.5, 4], 3).tolist()
    [1.0, 2.5, 4.0]
    """
    try:
        c = np.array(costs, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"costs must be an array of positive numbers: {exc}") from None
    if c.ndim != 1 or c.size != n_questions:
        raise ValueError(f"costs must be a 1-D array with one cost per question ({n_questions}), got shape {c.shape}.")
    bad = np.flatnonzero(~(np.isfinite(c) & (c > 0)))  # NaN fails c > 0 too
    if bad.size:
        j = int(bad[0])
        at = f"costs[{j}] =" if ids is None else f"question id {ids[j]!r} has cost"
        raise ValueError(f"costs must be finite and positive; {at} {float(c[j])!r} ({bad.size} such entries).")
    c.flags.writeable = False
    return c


class CostWeightedSampler(Sampler):
    """A policy's scores divided by ``sqrt(cost)``: the Neyman rule with costs.

    With the oracle score this minimises variance times expected cost per draw; the uniform floor is
    kept as it is. :class:`~faqstats.PAIEstimator` wraps its sampler in one when ``fit`` gets ``costs``.

    Parameters
    ----------
    base_sampler : Sampler
        The policy whose scores are weighed (its ``tau`` and ``replace`` are used); defined by ``scores``.
    costs : array-like of shape (N,)
        A finite, positive cost per question.

    Examples
    --------
    >>> import numpy as np
    >>> import faqstats as fq
    >>> state = fq.PolicyState(predictions=np.full(3, 0.5), available=np.ones(3, bool), step=1, budget=2)
    >>> sampler = fq.CostWeightedSampler(fq.NeymanSampler(tau=0.0), costs=[1.0, 4.0, 4.0])
    >>> sampler.probabilities(state).round(3)  # equal scores: mass in proportion to 1 / sqrt(cost)
    array([0.5 , 0.25, 0.25])
    """

    def __init__(self, base_sampler, costs):
        self.base_sampler = base_sampler
        self.costs = costs

    # the base policy's floor, replacement and needs (properties: not parameters of their own)
    tau = property(attrgetter("base_sampler.tau"), doc="The base policy's uniform floor.")
    replace = property(attrgetter("base_sampler.replace"), doc="Whether the base policy samples with replacement.")
    needs_factor_model = property(attrgetter("base_sampler.needs_factor_model"),
                                  doc="Whether the base policy needs a predictor.")
    checks_law = property(attrgetter("base_sampler.checks_law"), doc="Whether the base policy's law is checked.")
    batched = property(attrgetter("base_sampler.batched"), doc="Whether ``scores`` takes torch states.")

    def check_params(self):
        """Check the base policy and the costs; return ``self``."""
        base = self.base_sampler
        if not isinstance(base, Sampler):
            raise TypeError(f"base_sampler must be a sequential faqstats Sampler, got {type(base).__name__}.")
        if type(base).probabilities is not Sampler.probabilities:
            raise ValueError(f"{type(base).__name__} overrides probabilities: costs weigh a policy's scores, so the "
                             "policy must be defined by scores.")
        base.check_params()
        c = np.asarray(self.costs, dtype=float)
        check_costs(c, c.size if c.ndim == 1 else -1)
        return self

    def __repr__(self, N_CHAR_MAX=700):  # (the costs array itself would fill a summary)
        n = np.size(self.costs)
        return f"CostWeightedSampler(base_sampler={self.base_sampler!r}, costs=<{n} costs>)"

    def _root_costs(self, n):
        c = getattr(self, "_root", None)
        if c is None or c.size != n:  # (costs are fixed for the run: their roots once)
            c = self._root = np.sqrt(check_costs(self.costs, n))
        return c

    def scores(self, state):
        s = self.base_sampler.scores(state)
        if is_torch(s):  # the batched engine's (runs x N) scores: the same division, run by run
            return s / s.new_tensor(self._root_costs(s.shape[-1]))
        s = np.asarray(s, dtype=float)
        return s / self._root_costs(s.size)


def draws_for_cost(budget_cost, costs, first_law, replace, n_questions, max_iter=5):
    """``(n, E_{q_1}[cost])``: the draws a cost budget buys, ``n = floor(C / E_{q_1}[cost])``, fixed before the run.

    ``first_law(n)`` is the policy's first law for a run of ``n`` draws; ``n`` starts at ``floor(C / mean
    cost)`` and is updated until it repeats (at most ``max_iter`` times); at most ``N`` without replacement.

    Examples
    --------
    >>> costs = np.array([1.0, 1.0, 2.0, 4.0])
    >>> draws_for_cost(6.0, costs, lambda n: np.full(4, 0.25), False, 4)
    (3, 2.0)
    """
    check_scalar(budget_cost, "budget_cost", kind=numbers.Real, low=0.0, closed="neither")
    C = float(budget_cost)
    cap = n_questions if not replace else float("inf")
    per_draw = float(costs.mean())
    n = min(max(int(C // per_draw), 2), cap)
    for _ in range(max_iter):
        q = np.asarray(first_law(n), dtype=float)
        per_draw = float(q @ costs / q.sum())
        new = min(int(C // per_draw), cap)
        if new < 2:
            raise ValueError(f"budget_cost={budget_cost!r} buys {new} draw(s) at an expected cost of {per_draw:.4g} "
                             "per draw; at least 2 are needed.")
        if new == n:
            break
        n = new
    return n, per_draw
