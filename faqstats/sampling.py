"""Sampling policies: which question to ask next, and with what probability.

Every policy is a :class:`Sampler`. A sampler sees a read-only :class:`PolicyState`
(current predictions, the factor posterior, the step, which questions may still be
asked) and returns non-negative *scores*; the base class restricts them to the
askable questions, normalises them and mixes in a uniform floor ``tau``:

    q_t(j) = tau / |R| + (1 - tau) * score(j) / sum_{j' in R} score(j'),   j in R,

so every policy inherits the bound ``1/q_t <= |R| / tau`` that keeps the
inverse-probability terms of the estimator bounded. Samplers never see the estimator
and never hold randomness of their own: the estimator lends its generator.

A new policy is one small class overriding :meth:`Sampler.scores`.

:class:`BernoulliAIPW` is the nature's-order design of Zrnic & Candes (2024): items
arrive in a fixed stream and each gets a label/skip coin with probability
:meth:`BernoulliAIPW.inclusion_probability`; it shares the scores and ``tau`` of the
other policies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import BaseEstimator

from ._validation import check_scalar

__all__ = [
    "PolicyState",
    "Sampler",
    "UniformSampler",
    "NeymanSampler",
    "ActiveLearningSampler",
    "HybridSampler",
    "BernoulliAIPW",
    "active_learning_scores",
    "oracle_draw",
    "oracle_masses",
    "oracle_scores",
]


@dataclass(frozen=True)
class PolicyState:
    """What a policy may look at before choosing question ``step``.

    Attributes
    ----------
    predictions : ndarray of shape (N,)
        Current predicted P(correct) for every question (``p_hat^{(t-1)}``).
    available : ndarray of bool, shape (N,)
        Questions that may be asked now (all of them when sampling with replacement).
    step : int
        The round being chosen, 1-based (``t``).
    budget : int
        Total number of rounds (``n_b``).
    question_factors : ndarray of shape (N, k) or None
    posterior_mean : ndarray of shape (k,) or None
    posterior_cov : ndarray of shape (k, k) or None
        The Gaussian approximation of the new model's factor; ``None`` without a
        factor model.
    posterior : object or None
        The estimator's live factor posterior, which caches quantities derived from
        ``posterior_cov`` across rounds (see :meth:`quadratic_forms`); ``None`` when the
        state was built by hand. Policies must not modify it.
    """

    predictions: np.ndarray
    available: np.ndarray
    step: int
    budget: int
    question_factors: np.ndarray | None = None
    posterior_mean: np.ndarray | None = None
    posterior_cov: np.ndarray | None = None
    posterior: object | None = field(default=None, repr=False, compare=False)

    def oracle_scores(self):
        """The oracle score ``sqrt(p_j (1 - p_j))`` for every question (shape (N,), read-only).

        Taken from the live posterior when it made this state's predictions (computed there
        from the logits, accurate also where ``p`` rounds to 0 or 1), otherwise from the
        predictions (:func:`oracle_scores`). Every oracle-score policy reads it here, so the
        generic and the fast paths draw from the same scores.
        """
        post = self.posterior
        if post is not None and getattr(post, "predictions", None) is self.predictions:
            return post.oracle_scores
        return oracle_scores(self.predictions)

    def quadratic_forms(self):
        """``v_j' Sigma v_j`` for every question (shape (N,)).

        Taken from the live posterior's cache when it describes this state's
        ``posterior_cov`` (O(N k) per answer since the previous round), otherwise
        computed from scratch (O(N k^2)).
        """
        post = self.posterior
        if post is not None and post.cov is self.posterior_cov and post.V is self.question_factors:
            return post.quadratic_forms()
        return quadratic_forms_from_scratch(self.question_factors, self.posterior_cov)


class Sampler(BaseEstimator):
    """Base class of sampling policies.

    Parameters
    ----------
    tau : float in (0, 1], default=0.5
        Weight of the uniform distribution mixed into every policy. It bounds the
        inverse-probability weights by ``N / tau``, which the validity guarantees need.
        The default is larger than the seed paper's 0.05: on openllm_v1 at 35-173
        queries tau=0.5 had the same mean squared error as 0.25 and 0.05 but covered
        1-2 points better, because the increments are less heavy-tailed
        (``docs/statistics.md``).
    replace : bool, default=False
        Sample without replacement (each question at most once; the estimator then
        uses the Des Raj-type increment that keeps it exactly unbiased, see
        ``PAIEstimator``) or with replacement (the seed paper). Without replacement had
        8-30% lower mean squared error on real data.
    """

    #: whether the policy's scores need a fitted factor model
    needs_factor_model = True

    def __init__(self, tau=0.5, replace=False):
        self.tau = tau
        self.replace = replace

    def _check_params(self):
        check_scalar(self.tau, "tau", low=0.0, high=1.0, closed="right")
        if not isinstance(self.replace, (bool, np.bool_)):
            raise TypeError(f"replace must be True or False, got {self.replace!r}.")

    def scores(self, state: PolicyState) -> np.ndarray:
        """Non-negative, unnormalised preference for each question (shape (N,))."""
        raise NotImplementedError

    def _oracle_normalisations(self, step, budget):
        """How many times :meth:`probabilities` would normalise the oracle score
        ``sqrt(p (1 - p))`` (1 or 2) when the scores at round ``step`` of ``budget`` are
        exactly that score; 0 otherwise. Selects the fused paths
        (:func:`_oracle_probabilities`, :func:`oracle_draw`)."""
        return 0

    def probabilities(self, state: PolicyState) -> np.ndarray:
        """The sampling distribution ``q_t`` over all N questions (zero where unavailable)."""
        avail = state.available
        n_avail = int(np.count_nonzero(avail))
        if n_avail == 0:
            raise RuntimeError("No question left to ask: the bank is exhausted.")
        times = self._oracle_normalisations(state.step, state.budget)
        if times and _plain_float64(state.predictions, avail):
            q = _oracle_probabilities(state.oracle_scores(), avail, n_avail, self.tau, times)
            if q is not None:
                return q
        s = np.asarray(self.scores(state), dtype=float)
        if s.shape != avail.shape:
            raise RuntimeError(f"{type(self).__name__}.scores returned shape {s.shape}, expected {avail.shape}.")
        if np.any(np.isnan(s)) or np.any(s < 0) or np.any(np.isinf(s)):
            raise FloatingPointError(f"{type(self).__name__}.scores returned negative or non-finite values.")
        s = np.where(avail, s, 0.0)
        total = s.sum()
        uniform = avail / n_avail
        if not total > 0:  # all scores zero: nothing to prefer
            return uniform
        return self.tau * uniform + (1.0 - self.tau) * (s / total)


class UniformSampler(Sampler):
    """Every askable question equally likely.

    With ``replace=False`` and no factor model, ``PAIEstimator`` reports the plain
    sample mean with the finite-population correction: the honest baseline.

    Examples
    --------
    >>> import numpy as np
    >>> from faqstats.sampling import UniformSampler, PolicyState
    >>> st = PolicyState(predictions=np.full(4, .5), available=np.array([1, 1, 0, 1], bool), step=2, budget=3)
    >>> UniformSampler().probabilities(st).round(3)
    array([0.333, 0.333, 0.   , 0.333])
    """

    needs_factor_model = False

    def __init__(self, replace=False):
        super().__init__(tau=1.0, replace=replace)

    def scores(self, state):
        return np.ones_like(state.predictions)


class NeymanSampler(Sampler):
    """``q_t(j)`` proportional to ``sqrt(p_j (1 - p_j))`` of the current predictions.

    The variance-minimising policy when the predictions are the true probabilities
    (paper Theorem 3.2); ``tau`` mixes in the uniform floor.
    """

    def scores(self, state):
        return state.oracle_scores()

    def _oracle_normalisations(self, step, budget):
        return 1 if type(self).scores is NeymanSampler.scores else 0


def active_learning_scores(predictions, question_factors, posterior_cov, quadratic_forms=None):
    """The paper's d(j) (Appendix A.2.3): posterior-variance reduction of theta from asking j.

    ``d(j) = w_j (v_j' S g)^2 / (1 + w_j v_j' S v_j)`` with ``w_j = p_j (1 - p_j)`` and
    ``g = mean_j' w_j' v_j'``. The projections ``v_j' S g = (V (S g))_j`` cost O(N k);
    the quadratic forms ``v_j' S v_j`` cost O(N k^2) unless given (``quadratic_forms``,
    shape (N,), e.g. :meth:`PolicyState.quadratic_forms`, which the estimator's
    posterior keeps up to date in O(N k) per answer).
    """
    p = predictions
    w = p * (1.0 - p)
    V = question_factors
    g = (w @ V) / V.shape[0]
    proj = V @ (posterior_cov @ g)
    quad = quadratic_forms_from_scratch(V, posterior_cov) if quadratic_forms is None else quadratic_forms
    return w * proj**2 / (1.0 + w * quad)


def quadratic_forms_from_scratch(question_factors, cov):
    """``v_j' cov v_j`` for every row ``v_j`` of ``question_factors``: O(N k^2)."""
    V = question_factors
    return np.einsum("jk,jk->j", V @ cov, V)


class ActiveLearningSampler(Sampler):
    """``q_t(j)`` proportional to the active-learning score d(j) of the paper (Appendix A.2.3)."""

    def scores(self, state):
        _require_factors(self, state)
        return active_learning_scores(
            state.predictions, state.question_factors, state.posterior_cov, state.quadratic_forms()
        )


class HybridSampler(Sampler):
    """The FAQ hybrid policy (paper Eqs. 6-7).

    ``h = ((1 - alpha_t) Norm(s_o) + alpha_t Norm(s_a)) ** beta_t`` with the oracle score
    ``s_o = sqrt(p (1 - p))``, the active-learning score ``s_a = d``,
    ``alpha_t = max(0, 1 - t / (rho n_b))`` and ``beta_t = beta0 min(1, t / (gamma n_b))``;
    then ``q_t = tau / |R| + (1 - tau) Norm(h)`` over the askable questions ``R``.

    Parameters
    ----------
    tau : float in (0, 1], default=0.5
        Uniform mixing weight (the paper tuned 0.05 or 0.25; see :class:`Sampler`).
    beta0 : float in [0, 1], default=1.0
        Final tempering exponent (0 gives uniform sampling, 1 no tempering).
    rho : float in [0, 1], default=0.0
        Fraction of the budget over which the active-learning weight decays from 1 to 0
        (0: never use active learning, the paper's usual tuned choice).
    gamma : float in [0, 1], default=0.0
        Fraction of the budget over which the tempering exponent rises to ``beta0``
        (0: ``beta0`` from the start).
    replace : bool, default=False
        Without replacement by default; ``True`` is the paper's with-replacement policy.

    Examples
    --------
    >>> import numpy as np
    >>> from faqstats import HybridSampler
    >>> from faqstats.sampling import PolicyState
    >>> st = PolicyState(predictions=np.array([.5, .9, .99]), available=np.ones(3, bool), step=1, budget=2)
    >>> HybridSampler(tau=0.1).probabilities(st).round(3)
    array([0.534, 0.334, 0.133])
    """

    def __init__(self, tau=0.5, beta0=1.0, rho=0.0, gamma=0.0, replace=False):
        super().__init__(tau=tau, replace=replace)
        self.beta0 = beta0
        self.rho = rho
        self.gamma = gamma

    def _check_params(self):
        super()._check_params()
        for name in ("beta0", "rho", "gamma"):
            check_scalar(getattr(self, name), name, low=0.0, high=1.0)

    def schedule(self, step, budget):
        """``(alpha_t, beta_t)`` at round ``step`` of ``budget``."""
        alpha_t = max(0.0, 1.0 - step / (self.rho * budget)) if self.rho > 0 else 0.0
        beta_t = self.beta0 * min(1.0, step / (self.gamma * budget)) if self.gamma > 0 else self.beta0
        return alpha_t, beta_t

    def _oracle_normalisations(self, step, budget):
        # alpha_t == 0, beta_t == 1 (the default policy): scores() is the normalised oracle score
        if type(self).scores is HybridSampler.scores and self.schedule(step, budget) == (0.0, 1.0):
            return 2
        return 0

    def scores(self, state):
        alpha_t, beta_t = self.schedule(state.step, state.budget)
        p = state.predictions
        mix = _normalise(state.oracle_scores(), state.available)
        if alpha_t > 0:
            _require_factors(self, state)
            d = active_learning_scores(p, state.question_factors, state.posterior_cov, state.quadratic_forms())
            mix = (1.0 - alpha_t) * mix + alpha_t * _normalise(d, state.available)
        # x ** 0 == 1 also for x == 0: beta_t == 0 means uniform over the askable questions
        return np.where(state.available, mix**beta_t, 0.0)


class BernoulliAIPW(Sampler):
    """Nature's-order active inference (Zrnic & Candes, 2024): label or skip each item.

    Items are visited once, in ``order``; item ``t`` is labelled with probability
    ``pi_t``, and the estimate is the AIPW mean
    ``(1/N) sum_t [p_t + (z_t - p_t) xi_t / pi_t]``.

    Budget stabilisation: with ``B_t`` labels left and ``R_t`` items left,

    ``pi_t = min(1, (B_t / R_t) * [(1 - tau) s_t / mean_{remaining} s + tau])``,

    so the expected number of labels tracks the budget whatever the scores, labelling
    speeds up when the budget is under-spent and slows down when over-spent. Once the
    budget is spent, ``pi_t`` falls to a floor ``pi_floor`` (a fraction of the initial
    rate) rather than 0, which keeps the estimator exactly unbiased; the number of
    labels is therefore random with mean close to ``budget``.

    Parameters
    ----------
    score : {"uniform", "neyman", "min"}, default="neyman"
        ``"neyman"``: ``sqrt(p (1 - p))``; ``"min"``: ``min(p, 1 - p)`` (Zrnic & Candes);
        ``"uniform"``: constant (Bernoulli sampling; with no factor model this is the
        paper's Horvitz-Thompson "uniform" baseline).
    tau : float in (0, 1], default=0.5
    order : {"random", "natural"}, default="random"
        Stream order: a seeded random permutation, or question index order.
    pi_floor : float in (0, 1], default=0.5
        Floor of ``pi_t`` as a fraction of ``budget / N``. The floor only binds once the
        budget is spent, which with this rule happens about ``N / budget`` items before
        the end of the stream, so it costs about ``pi_floor`` extra labels on average;
        a high floor keeps the inverse-probability weights below ``N / (pi_floor budget)``
        (at 0.05 a late label could weigh ``20 N / budget``).
    """

    needs_factor_model = False
    replace = False  # every item is visited exactly once

    def __init__(self, score="neyman", tau=0.5, order="random", pi_floor=0.5):
        self.score = score
        self.tau = tau
        self.order = order
        self.pi_floor = pi_floor

    def _check_params(self):
        check_scalar(self.tau, "tau", low=0.0, high=1.0, closed="right")
        check_scalar(self.pi_floor, "pi_floor", low=0.0, high=1.0, closed="right")
        if self.score not in ("uniform", "neyman", "min"):
            raise ValueError(f"score must be 'uniform', 'neyman' or 'min', got {self.score!r}.")
        if self.order not in ("random", "natural"):
            raise ValueError(f"order must be 'random' or 'natural', got {self.order!r}.")

    def scores(self, state):
        p = state.predictions
        if self.score == "uniform":
            return np.ones_like(p)
        if self.score == "neyman":
            return np.sqrt(np.clip(p * (1.0 - p), 0.0, None))
        return np.minimum(p, 1.0 - p)

    def inclusion_probability(self, state: PolicyState, item: int, labels_used: int) -> float:
        """``pi_t`` for ``item`` given the items not yet visited (``state.available``)."""
        n_items = state.available.size
        remaining = int(state.available.sum())
        s = self.scores(state)
        mean_s = s[state.available].mean()
        rel = s[item] / mean_s if mean_s > 0 else 1.0
        floor = self.pi_floor * state.budget / n_items
        rate = max(state.budget - labels_used, 0) / remaining
        pi = rate * ((1.0 - self.tau) * rel + self.tau)
        return float(min(1.0, max(pi, floor)))


def _oracle_probabilities(scores, available, n_avail, tau, times):
    """``q_t`` for the oracle scores ``sqrt(p (1 - p))`` (:meth:`PolicyState.oracle_scores`),
    bit for bit what the generic path (``scores``, ``_normalise``, then the ``tau`` mix)
    computes, in one buffer.

    ``times`` is how often the masked score is normalised (twice for
    :class:`HybridSampler`, whose ``scores`` normalise once already: folding the two
    would change the last bits of ``q`` and, now and then, a draw). Returns ``None``
    where the generic path must decide (a NaN score, which it may report, or all
    scores zero).
    """
    q = np.array(scores, dtype=float)
    unavailable = np.logical_not(available) if n_avail < q.size else None
    if unavailable is None:
        total = q.sum()
    else:
        if times == 1 and not np.isfinite(q.sum()):
            return None  # NeymanSampler reports a NaN score even where unavailable
        np.copyto(q, 0.0, where=unavailable)
        total = None
    for _ in range(times):
        total = q.sum() if total is None else total
        if not total > 0:  # NaN or all zero
            return None
        np.divide(q, total, out=q)
        total = None
    # tau * (available / n_avail) + (1 - tau) * q, without forming the uniform term
    np.multiply(q, 1.0 - tau, out=q)
    np.add(q, tau * (1.0 / n_avail), out=q)
    if unavailable is not None:
        np.copyto(q, 0.0, where=unavailable)
    return q


#: questions per block of the two-level inverse-CDF draw (:func:`oracle_draw`; the batched
#: engine uses the same blocks)
DRAW_BLOCK = 128


def oracle_scores(predictions):
    """``sqrt(p (1 - p))`` as a new float64 array: ``np.sqrt(np.clip(p * (1 - p), 0, None))``,
    operation for operation (0 for a prediction outside ``[0, 1]``, NaN for NaN)."""
    s = np.subtract(1.0, predictions)
    np.multiply(predictions, s, out=s)
    np.maximum(s, 0.0, out=s)  # == np.clip(., 0.0, None)
    return np.sqrt(s, out=s)


def oracle_draw(scores, asked, tau, rng):
    """One draw from the oracle-score policy, in few passes (the live step's fast path).

    ``q_j = tau / |R| + (1 - tau) s_j / S`` over the askable questions ``R`` (all but
    ``asked``), with ``s_j = sqrt(p_j (1 - p_j))`` (``scores``, e.g. from
    :func:`oracle_scores`) and ``S`` their sum over ``R``: the distribution of
    :class:`NeymanSampler` and of the default :class:`HybridSampler`. It is drawn from by
    the inverse CDF in two levels: the block of :data:`DRAW_BLOCK` questions holding
    ``u sum(q)`` from the block sums, then the question inside that block from a
    cumulative sum over the block alone. It consumes one ``rng.random()`` as
    ``Generator.choice(p=q)`` does and picks the same question up to the rounding of the
    cumulative sums (summed in another order), without ``choice``'s copies, checks and
    length-N cumulative sum. The probability returned is the drawn question's share of
    the masses the draw used, so it is exact for the draw made whatever the rounding.

    Parameters
    ----------
    scores : float64 ndarray of shape (N,) (not modified)
    asked : int ndarray
        Indices no longer askable (empty when sampling with replacement).
    tau : float
    rng : numpy.random.Generator

    Returns
    -------
    (question, probability) or None
        ``None``, with ``rng`` untouched, when a score is NaN or infinite (a NaN
        prediction): the generic path decides then.

    Examples
    --------
    >>> import numpy as np
    >>> p = np.array([0.5, 0.9, 0.99, 0.2])
    >>> j, q_j = oracle_draw(oracle_scores(p), np.array([3]), 0.1, np.random.default_rng(0))
    >>> st = PolicyState(p, np.array([1, 1, 1, 0], bool), step=2, budget=3)
    >>> bool(np.isclose(q_j, NeymanSampler(tau=0.1).probabilities(st)[j]))
    True
    """
    masses = oracle_masses(scores, asked, tau)
    if masses is None:
        return None
    q, cdf = masses
    mass = cdf[-1]
    target = rng.random() * mass
    # the first block whose cdf passes the target (past the end only by rounding: the
    # last block with mass), then the first question inside it
    blk = int(cdf.searchsorted(target, side="right"))
    if blk == cdf.size:
        blk = int(np.flatnonzero(np.diff(cdf, prepend=0.0))[-1])
    lo = blk * DRAW_BLOCK
    inside = q[lo : lo + DRAW_BLOCK]
    j = int(np.cumsum(inside).searchsorted(target - (cdf[blk - 1] if blk else 0.0), side="right"))
    if j == inside.size:
        j = int(np.flatnonzero(inside)[-1])
    return lo + j, float(inside[j] / mass)


def oracle_masses(scores, asked, tau):
    """The masses :func:`oracle_draw` draws from: ``(q, cdf)`` with ``q`` the unnormalised
    ``q_t`` (zero where asked) and ``cdf`` the cumulative sums of its blocks of
    :data:`DRAW_BLOCK` questions; question ``j`` is drawn with probability
    ``q[j] / cdf[-1]``. ``None`` when a score is NaN or infinite."""
    N = scores.size
    # the askable scores' sum: all of them less the few asked (a gather, not a pass over a
    # mask), summed directly when that subtraction cancels (the asked ones dominate)
    full = float(scores.sum())
    total = full - float(scores[asked].sum()) if asked.size else full
    if not math.isfinite(total):
        return None
    if asked.size and total <= 1e-8 * full:
        total = float(np.delete(scores, asked).sum())
    n_avail = N - asked.size
    scale = (1.0 - tau) / total if total > 0 else 0.0
    if total > 0 and math.isfinite(scale) and full * scale < 1e300:  # the usual case: one pass
        q = scores * scale
        q += tau / n_avail
    elif total > 0:
        # a subnormal total or asked scores far above the askable ones: s / total first, <= 1
        # on the askable questions (overflow only where asked, zeroed below)
        with np.errstate(over="ignore", invalid="ignore"):
            q = np.divide(scores, total)
        q *= 1.0 - tau
        q += tau / n_avail
    else:  # every askable score 0: uniform
        q = np.full(N, 1.0 / n_avail)
    if asked.size:
        q[asked] = 0.0
    return q, np.cumsum(np.add.reduceat(q, np.arange(0, N, DRAW_BLOCK)))


def _plain_float64(p, available):
    """Whether the fused path applies: float64 predictions and a boolean mask of one shape."""
    return (
        isinstance(p, np.ndarray) and p.dtype == np.float64 and isinstance(available, np.ndarray)
        and available.dtype == np.bool_ and p.shape == available.shape and p.ndim == 1
    )


def _normalise(x, available):
    x = np.where(available, x, 0.0)
    total = x.sum()
    return x / total if total > 0 else available / available.sum()


def _require_factors(sampler, state):
    if state.question_factors is None or state.posterior_cov is None:
        raise ValueError(f"{type(sampler).__name__} needs a fitted factor model (its question factors and posterior).")
