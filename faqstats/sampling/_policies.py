"""The built-in sequential policies (their scores work on numpy and on the batched engine's torch states), the
Neyman rule with costs (:class:`CostWeightedSampler`) and the draws a cost budget buys."""

import math
import numbers
from operator import attrgetter

import numpy as np

from .._backend import is_torch, matvec, namespace
from .._validation import check_scalar
from ..posterior import quadratic_forms_from_scratch
from ._base import Sampler

__all__ = ["UniformSampler", "NeymanSampler", "ActiveLearningSampler", "HybridSampler", "VarianceReductionSampler",
           "CostWeightedSampler", "active_learning_scores", "check_costs", "draws_for_cost",
           "variance_reduction_scores"]


class UniformSampler(Sampler):
    """Every askable question equally likely (with no factor model: the sample mean).

    Parameters
    ----------
    replace : bool, default=False

    Examples
    --------
    >>> import numpy as np
    >>> from faqstats.sampling import UniformSampler, PolicyState
    >>> st = PolicyState(predictions=np.full(4, .5), available=np.array([1, 1, 0, 1], bool), step=2, budget=3)
    >>> UniformSampler().probabilities(st).round(3)
    array([0.333, 0.333, 0.   , 0.333])
    """

    needs_factor_model = False
    batched = True
    checks_law = False
    tau = 1.0  # all mass on the uniform floor (a class constant, not a parameter)

    def __init__(self, replace=False):
        self.replace = replace

    @property
    def scores_follow_predictions(self):
        """True for this class (ones at every step), not for a subclass (see :class:`Sampler`)."""
        return type(self) is UniformSampler

    def scores(self, state):
        return namespace(state.predictions).ones_like(state.predictions)


class NeymanSampler(Sampler):
    """``q_t(j)`` proportional to ``sqrt(p_j (1 - p_j))``: variance-minimising if the predictions are true.

    Parameters
    ----------
    tau : float in (0, 1], default=0.5
    replace : bool, default=False

    Examples
    --------
    >>> import numpy as np
    >>> from faqstats import NeymanSampler, PolicyState
    >>> state = PolicyState(predictions=np.array([0.5, 0.9, 0.99]), available=np.ones(3, bool), step=1, budget=2)
    >>> NeymanSampler(tau=0.1).probabilities(state).round(3)  # most mass on the most uncertain question
    array([0.534, 0.334, 0.133])
    """

    batched = True
    checks_law = False

    @property
    def scores_follow_predictions(self):
        """True for this class (the oracle scores), not for a subclass (see :class:`Sampler`)."""
        return type(self) is NeymanSampler

    def scores(self, state):
        return state.oracle_scores()


def active_learning_scores(predictions, question_factors, posterior_cov, quadratic_forms=None):
    """The paper's d(j) (Appendix A.2.3): ``w_j (v_j' S g)^2 / (1 + w_j v_j' S v_j)``, ``w_j = p_j (1 - p_j)``,
    ``g = mean_j' w_j' v_j'``; the quadratic forms are computed unless given. Leading run axes allowed."""
    p = predictions
    w = p * (1.0 - p)
    V = question_factors
    g = (w @ V) / V.shape[0]
    proj = matvec(posterior_cov, g) @ V.T
    quad = quadratic_forms_from_scratch(V, posterior_cov) if quadratic_forms is None else quadratic_forms
    return w * proj**2 / (1.0 + w * quad)


class ActiveLearningSampler(Sampler):
    """``q_t(j)`` proportional to the paper's active-learning score d(j) (:func:`active_learning_scores`).

    Parameters
    ----------
    tau : float in (0, 1], default=0.5
    replace : bool, default=False

    Examples
    --------
    >>> import numpy as np
    >>> from faqstats import ActiveLearningSampler, PolicyState
    >>> state = PolicyState(predictions=np.array([0.5, 0.7, 0.9]), available=np.ones(3, bool), step=1, budget=2,
    ...                     question_factors=np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
    ...                     posterior_mean=np.zeros(2), posterior_cov=np.eye(2))
    >>> ActiveLearningSampler(tau=0.1).probabilities(state).round(3)
    array([0.331, 0.234, 0.435])
    """

    batched = True
    checks_law = False

    def scores(self, state):
        return _active_learning(self, state)


class HybridSampler(Sampler):
    """The FAQ hybrid policy (paper Eqs. 6-7).

    ``h = ((1 - a_t) Norm(s_o) + a_t Norm(s_a)) ** b_t`` of the oracle score ``s_o`` and the active-learning
    score ``s_a``, with ``a_t = max(0, 1 - t / (rho n_b))`` and ``b_t = beta0 min(1, t / (gamma n_b))``;
    then ``q_t = tau / |R| + (1 - tau) Norm(h)`` over the askable questions ``R``.

    Parameters
    ----------
    tau : float in (0, 1], default=0.5
    beta0 : float in [0, 1], default=1.0
        Final tempering exponent (0 gives uniform sampling, 1 no tempering).
    rho : float in [0, 1], default=0.0
        Fraction of the budget over which the active-learning weight decays to 0 (0: none).
    gamma : float in [0, 1], default=0.0
        Fraction of the budget over which the exponent rises to ``beta0`` (0: ``beta0`` from the start).
    replace : bool, default=False

    Examples
    --------
    >>> import numpy as np
    >>> from faqstats import HybridSampler, PolicyState
    >>> st = PolicyState(predictions=np.array([.5, .9, .99]), available=np.ones(3, bool), step=1, budget=2)
    >>> HybridSampler(tau=0.1).probabilities(st).round(3)
    array([0.534, 0.334, 0.133])
    """

    batched = True
    checks_law = False

    def __init__(self, tau=0.5, beta0=1.0, rho=0.0, gamma=0.0, replace=False):
        super().__init__(tau=tau, replace=replace)
        self.beta0 = beta0
        self.rho = rho
        self.gamma = gamma

    def check_params(self):
        super().check_params()
        for name in ("beta0", "rho", "gamma"):
            check_scalar(getattr(self, name), name, low=0.0, high=1.0)
        return self

    @property
    def scores_follow_predictions(self):
        """True for this class without active learning or tempering, not for a subclass (see :class:`Sampler`)."""
        return type(self) is HybridSampler and self.rho == 0 and self.gamma == 0 and self.beta0 == 1

    def schedule(self, step, budget):
        """The active-learning weight ``a_t`` and the tempering exponent ``b_t`` at round ``step``.

        Parameters
        ----------
        step, budget : int

        Returns
        -------
        weight : float
        exponent : float
        """
        weight = max(0.0, 1.0 - step / (self.rho * budget)) if self.rho > 0 else 0.0
        exponent = self.beta0 * min(1.0, step / (self.gamma * budget)) if self.gamma > 0 else self.beta0
        return weight, exponent

    def scores(self, state):
        weight, exponent = self.schedule(state.step, state.budget)
        s = state.oracle_scores()
        if weight == 0 and exponent == 1:
            return s  # the mixture normalises over the askable questions anyway
        xp, available = namespace(s), state.available
        mix = _normalise(s, available)
        if weight > 0:
            mix = (1.0 - weight) * mix + weight * _normalise(_active_learning(self, state), available)
        # x ** 0 == 1 also for x == 0: b_t == 0 means uniform over the askable questions
        return xp.where(available, mix**exponent, 0.0)


def _normalise(x, available):
    """``x`` on the askable questions scaled to sum 1 (per run); uniform there if all 0."""
    xp = namespace(x)
    x = xp.where(available, x, 0.0)
    total = x.sum(-1)[..., None]
    ones = xp.where(available, xp.ones_like(x), 0.0)
    return xp.where(total > 0, x / xp.where(total > 0, total, 1.0), ones / ones.sum(-1)[..., None])


def variance_reduction_scores(predictions, question_factors, posterior_cov, available, quadratic_forms, noise=None):
    """The randomised Bayesian-quadrature score ``|Cov(S, z_j)| / sd(z_j)`` (``S`` the unasked outcomes' sum) under
    the linearised posterior; ``quadratic_forms`` are ``v_j' Sigma v_j``, ``noise`` a Gaussian process's residual
    variances (None: the logistic link). Leading run axes allowed."""
    xp = namespace(predictions)
    bernoulli = predictions * (1.0 - predictions)
    slope = bernoulli if noise is None else xp.ones_like(predictions)
    own = bernoulli if noise is None else noise
    g = xp.where(available, slope, 0.0) @ question_factors
    covariance = slope * (matvec(posterior_cov, g) @ question_factors.T) + own
    variance = slope**2 * quadratic_forms + own
    return xp.where(variance > 0, abs(covariance) / xp.sqrt(xp.where(variance > 0, variance, 1.0)), 0.0)


class VarianceReductionSampler(Sampler):
    """``q_t(j)`` proportional to :func:`variance_reduction_scores` (ProEval's acquisition made a law with
    ``q > 0``), mixed with uniform; it needs a predictor with question factors.

    Parameters
    ----------
    tau : float in (0, 1], default=0.5
    replace : bool, default=False
    power : float >= 1, default=1.0
        The scores raised to this power (scaled by their largest first): large powers approach ProEval's
        greedy choice while the floor keeps every probability positive.

    Examples
    --------
    >>> import numpy as np
    >>> from faqstats import VarianceReductionSampler, PolicyState
    >>> state = PolicyState(predictions=np.array([0.5, 0.7, 0.9]), available=np.ones(3, bool), step=1, budget=2,
    ...                     question_factors=np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
    ...                     posterior_mean=np.zeros(2), posterior_cov=np.eye(2))
    >>> VarianceReductionSampler(tau=0.1).probabilities(state).round(3)
    array([0.372, 0.339, 0.289])
    """

    batched = True
    checks_law = False

    def __init__(self, tau=0.5, replace=False, power=1.0):
        super().__init__(tau=tau, replace=replace)
        self.power = power

    def check_params(self):
        super().check_params()
        if not (isinstance(self.power, (int, float)) and self.power >= 1.0 and math.isfinite(self.power)):
            raise ValueError(f"power must be a finite number >= 1, got {self.power!r}.")
        return self

    def scores(self, state):
        if state.question_factors is None or state.posterior_cov is None:
            raise ValueError(f"{type(self).__name__} needs a fitted predictor with question factors and a posterior.")
        noise = None if state.posterior is None else state.posterior.noise
        s = variance_reduction_scores(state.predictions, state.question_factors, state.posterior_cov,
                                      state.available, state.quadratic_forms(), noise)
        if self.power == 1.0:
            return s
        top = s.max(-1, keepdims=True) if isinstance(s, np.ndarray) else s.amax(-1, keepdim=True)
        return (s / top.clip(min=1e-300)) ** self.power  # scaled first: no underflow of every score


def _active_learning(sampler, state):
    if state.question_factors is None or state.posterior_cov is None:
        raise ValueError(f"{type(sampler).__name__} needs a fitted factor model (its question factors and posterior).")
    return active_learning_scores(state.predictions, state.question_factors, state.posterior_cov,
                                  state.quadratic_forms())


def check_costs(costs, n_questions, ids=None):
    """``costs`` as a read-only float array of shape ``(n_questions,)``, every entry finite and > 0 (a bad one
    named by its question id when ``ids`` are given)."""
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
    """A policy's scores divided by ``sqrt(cost)``: the Neyman rule with costs (the uniform floor kept as it is).

    :class:`~faqstats.PAIEstimator` wraps its sampler in one when ``fit`` gets ``costs``.

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

    # the base policy's (properties: not parameters of their own)
    tau = property(attrgetter("base_sampler.tau"), doc="The base policy's uniform floor.")
    replace = property(attrgetter("base_sampler.replace"), doc="Whether the base policy samples with replacement.")
    needs_factor_model = property(attrgetter("base_sampler.needs_factor_model"), doc="Whether it needs a predictor.")
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

    ``first_law(n)`` is the policy's first law for ``n`` draws; ``n`` starts at ``floor(C / mean cost)`` and is
    updated until it repeats (at most ``max_iter`` times); at most ``N`` without replacement.
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
