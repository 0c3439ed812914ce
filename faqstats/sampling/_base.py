"""What a policy sees (:class:`PolicyState`), the base of sequential policies, and the one draw
(:func:`draw_from`) every loop makes from the law ``probabilities`` returns."""

import functools
import math
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import BaseEstimator

from .._backend import is_torch
from .._validation import check_scalar
from ..posterior import PosteriorView, read_only, oracle_scores, quadratic_forms_from_scratch

__all__ = ["DRAW_BLOCK", "PolicyState", "Sampler", "check_law", "draw_from", "inverse_cdf", "mixture",
           "mixture_coefficients", "within_round"]

_sum = np.add.reduce

#: Questions per block of the two-level inverse-CDF draw (:func:`draw_from` and the batched engine's).
DRAW_BLOCK = 128


@dataclass(frozen=True)
class PolicyState:
    """What a policy may look at before choosing question ``step`` (torch, with a run axis, in the batched engine).

    Attributes
    ----------
    predictions : ndarray of shape (N,)
        Current predicted P(correct) for every question, read-only.
    available : ndarray of bool, shape (N,)
    step, budget : int
        The round being chosen, 1-based (``t``), of ``budget``.
    question_factors, posterior_mean, posterior_cov : ndarray or None
        The factor posterior; ``None`` without a factor model.
    posterior : PosteriorView or None
        A read-only view of the predictor and its caches; ``None`` when built by hand.
    asked : ndarray of int or None
        The questions no longer askable (default: those not ``available``).

    Examples
    --------
    >>> import numpy as np
    >>> from faqstats import PolicyState
    >>> state = PolicyState(predictions=np.array([0.5, 0.9]), available=np.array([True, False]), step=2, budget=3)
    >>> state.oracle_scores(), state.asked_indices()
    (array([0.5, 0.3]), array([1]))
    """

    predictions: np.ndarray
    available: np.ndarray
    step: int
    budget: int
    question_factors: np.ndarray | None = None
    posterior_mean: np.ndarray | None = None
    posterior_cov: np.ndarray | None = None
    posterior: PosteriorView | None = field(default=None, repr=False, compare=False)
    asked: np.ndarray | None = field(default=None, repr=False, compare=False)

    def oracle_scores(self):
        """The oracle score ``sqrt(p_j (1 - p_j))`` of every question (read-only; the predictor's cache if any)."""
        if self.posterior is not None:
            return self.posterior.oracle_scores()
        return oracle_scores(self.predictions)

    def quadratic_forms(self):
        """``v_j' Sigma v_j`` for every question: the predictor's cache, or computed from scratch."""
        if self.posterior is not None and self.posterior.question_factors is not None:
            return self.posterior.quadratic_forms()
        return quadratic_forms_from_scratch(self.question_factors, self.posterior_cov)

    def asked_indices(self):
        """Indices of the questions no longer askable."""
        return np.flatnonzero(~self.available) if self.asked is None else self.asked


class Sampler(BaseEstimator):
    """Base class of sequential sampling policies.

    Parameters
    ----------
    tau : float in (0, 1], default=0.5
        Weight of the uniform floor mixed into every policy; it bounds the weights by ``N / tau``.
    replace : bool, default=False
        Sample without replacement (each question at most once) or with replacement (the seed paper).

    Examples
    --------
    >>> import faqstats as fq
    >>> class Easiest(fq.Sampler):  # prefer the questions the model likely gets right
    ...     def scores(self, state):
    ...         return state.predictions
    >>> bank = fq.make_synthetic_bank(n_models=30, n_questions=100, n_new=1, random_state=0)
    >>> fm = fq.LogisticFactorModel.from_factors(bank.question_factors, model_factors=bank.model_factors)
    >>> est = fq.PAIEstimator(fm, Easiest(tau=0.5), budget=20, random_state=0).fit(bank.new_outcomes[0])
    >>> est.n_queries_, est.result_.method
    (20, 'pai')
    """

    design = "sequential"  # (a stream design visits every item once)
    needs_factor_model = True
    batched = False  # a subclass defining scores or probabilities: numpy-only, its law checked before each draw,
    checks_law = False  # unless it sets batched = True or checks_law = False (docs/architecture.md)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "scores" in vars(cls) or "probabilities" in vars(cls):
            cls.batched = vars(cls).get("batched", False)
            cls.checks_law = vars(cls).get("checks_law", True)

    def __init__(self, tau=0.5, replace=False):
        self.tau = tau
        self.replace = replace

    @property
    def scores_follow_predictions(self):
        """Whether ``scores`` depends on the current predictions alone (the batched engine then keeps them between
        prediction refreshes)."""
        return False

    def check_params(self):
        """Raise ``ValueError``/``TypeError`` for invalid parameters; return ``self``."""
        check_scalar(self.tau, "tau", low=0.0, high=1.0, closed="right")
        if not isinstance(self.replace, (bool, np.bool_)):
            raise TypeError(f"replace must be True or False, got {self.replace!r}.")
        return self

    def scores(self, state: PolicyState):
        """Non-negative, unnormalised preference for each question.

        Parameters
        ----------
        state : PolicyState

        Returns
        -------
        ndarray of shape (N,)
        """
        raise NotImplementedError

    def probabilities(self, state: PolicyState) -> np.ndarray:
        """The sampling distribution ``q_t`` over all N questions (zero where unavailable).

        Parameters
        ----------
        state : PolicyState

        Returns
        -------
        ndarray of shape (N,)
        """
        s = np.asarray(self.scores(state), dtype=float)
        if s.shape != state.available.shape:
            raise RuntimeError(f"{type(self).__name__}.scores returned shape {s.shape}, "
                               f"expected {state.available.shape}.")
        if self.checks_law and np.any(s[state.available] < 0):  # (built-in scores are non-negative)
            raise FloatingPointError(f"{type(self).__name__}.scores returned negative values.")
        return mixture(s, self.tau, state.asked_indices(), name=type(self).__name__ + ".scores")

    def draw(self, state: PolicyState, rng):
        """One question from :meth:`probabilities`: ``(question, probability)`` (see :func:`draw_from`).

        Parameters
        ----------
        state : PolicyState
        rng : numpy.random.Generator

        Returns
        -------
        question : int
        probability : float
            Its probability ``q_t(question)``.
        """
        return draw_from(self.probabilities(state), rng)


def mixture(scores, tau, asked, name="scores"):
    """``q = tau / |R| + (1 - tau) s / sum_R s`` on the askable questions ``R`` (all but ``asked``), zero
    elsewhere; uniform over ``R`` when every askable score is 0. Scores need only be finite where askable."""
    N = scores.size
    n_avail = N - asked.size
    if n_avail <= 0:
        raise RuntimeError("No question left to ask: the bank is exhausted.")
    full = float(_sum(scores))  # (the ufunc itself: ndarray.sum's wrapper costs a microsecond a call)
    total = full - float(_sum(scores[asked])) if asked.size else full
    valid = math.isfinite(full)
    if not valid or (asked.size and not 0.01 * full < total <= full):
        askable = np.delete(scores, asked) if asked.size else scores
        if not np.all(np.isfinite(askable)):
            raise FloatingPointError(f"{name} returned non-finite values.")
        total = float(askable.sum())
    a, b = mixture_coefficients(total, tau, n_avail)  # Python floats: inf, not an error, on overflow
    if b == 0:  # every askable score 0: uniform
        q = np.full(N, a)
    elif math.isfinite(b) and valid and full * b < 1e300:  # the usual case: one pass
        q = scores * b
        q += a
    else:  # s / total first: at most 1 where askable (what overflows is zeroed below)
        with np.errstate(over="ignore", invalid="ignore"):
            q = np.divide(scores, total)
        q *= 1.0 - tau
        q += a
    if asked.size:
        q[asked] = 0.0
    return q


def mixture_coefficients(total, tau, n_avail):
    """``(a, b)`` of the law ``q_j = a + b s_j`` given the askable scores' sum ``total`` (a float or a tensor)."""
    if not isinstance(total, float) and is_torch(total):
        positive = total > 0  # (python scalars in torch.where would make float32: keep the dtype)
        a = total.new_full(total.shape, 1.0 / n_avail).masked_fill_(positive, tau / n_avail)
        b = ((1.0 - tau) / total.where(positive, total.new_ones(()))).masked_fill_(~positive, 0.0)
        return a, b
    return (tau / n_avail, (1.0 - tau) / total) if total > 0 else (1.0 / n_avail, 0.0)


def check_law(q, shape, asked, name):
    """Raise unless ``q`` is non-negative, of ``shape`` and zero at ``asked``; return it as float64."""
    if not isinstance(q, np.ndarray) or q.shape != shape or q.dtype != np.float64:
        q = np.asarray(q, dtype=float)
        if q.shape != shape:
            raise RuntimeError(f"{name} returned shape {q.shape}, expected {shape}.")
    if not float(q.min()) >= 0.0:  # NaN fails too
        raise FloatingPointError(f"{name} is not a probability distribution (negative or NaN entries).")
    if asked.size and float(q[asked].sum()) > 0.0:  # non-negative entries: a positive sum is a positive entry
        raise RuntimeError(f"{name} gives positive probability to a question that cannot be asked.")
    return q


def draw_from(q, rng):
    """One question from the law ``q``, ``(question, probability)``: a two-level inverse CDF (the block of
    :data:`DRAW_BLOCK` questions, then the question in it) of one ``rng.random()``: ``Generator.choice(p=q)``
    up to rounding."""
    return inverse_cdf(q, rng.random())


def inverse_cdf(q, u):
    """:func:`draw_from` with the uniform ``u`` in [0, 1) given."""
    cdf = np.add.reduceat(q, _block_starts(q.size)).cumsum()
    mass = cdf[-1]
    if not (math.isfinite(mass) and mass > 0):
        raise FloatingPointError(f"cannot draw from a law of total mass {mass!r}.")
    target = u * mass
    # the first block whose cdf passes the target (past the end only by rounding: the last block with mass)
    blk = int(cdf.searchsorted(target, side="right"))
    if blk == cdf.size:
        blk = int(np.flatnonzero(np.diff(cdf, prepend=0.0))[-1])
    lo = blk * DRAW_BLOCK
    inside = q[lo : lo + DRAW_BLOCK]
    j = int(inside.cumsum().searchsorted(target - (cdf[blk - 1] if blk else 0.0), side="right"))
    if j == inside.size:
        j = int(np.flatnonzero(inside)[-1])
    return lo + j, float(inside[j] / mass)


@functools.lru_cache(maxsize=16)
def _block_starts(n):
    return read_only(np.arange(0, n, DRAW_BLOCK))


def within_round(q_round, available, replace):
    """A later draw's law inside a round: the round's ``q``, renormalised over the questions not yet drawn."""
    if replace:
        return q_round
    q = np.where(available, q_round, 0.0)
    return q / q.sum()
