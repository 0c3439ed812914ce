"""The built-in sequential policies; their scores work on numpy and on the batched engine's torch states."""

import math

import numpy as np

from .._backend import matvec, namespace
from .._validation import check_scalar
from ..posterior import quadratic_forms_from_scratch
from ._base import Sampler

__all__ = ["UniformSampler", "NeymanSampler", "ActiveLearningSampler", "HybridSampler", "VarianceReductionSampler",
           "active_learning_scores", "variance_reduction_scores"]


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
        step : int
        budget : int

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
    """The randomised Bayesian-quadrature score ``|Cov(S, z_j)| / sd(z_j)``, ``S`` the unasked outcomes' sum.

    Under the predictor's linearised posterior (user guide's Statistics page); leading run axes allowed.

    Parameters
    ----------
    predictions : ndarray of shape (..., N)
    question_factors : ndarray of shape (N, k)
    posterior_cov : ndarray of shape (..., k, k)
    available : ndarray of bool, shape (..., N)
    quadratic_forms : ndarray of shape (..., N)
        ``v_j' Sigma v_j``.
    noise : ndarray of shape (N,) or None
        The Gaussian process's residual variances; ``None``: the logistic link.

    Returns
    -------
    ndarray of shape (..., N)

    Examples
    --------
    >>> p, V = np.array([0.5, 0.9]), np.eye(2)
    >>> variance_reduction_scores(p, V, np.zeros((2, 2)), np.ones(2, bool), np.zeros(2)).round(3)  # oracle score
    array([0.5, 0.3])
    """
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
