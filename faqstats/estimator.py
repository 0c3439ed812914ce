"""Pro-Active Inference: the query loop, its increments and their variance.

At round t a sampler gives ``q_t`` over the askable questions, the estimator draws
``I_t ~ q_t``, observes ``z_{I_t}`` and records the increment

* with replacement (the seed paper, Eq. 3)
  ``phi_t = [ sum_j p_j + (z_I - p_I) / q_t(I) ] / N``;
* without replacement (a Des Raj-type increment over the not-yet-asked set R_{t-1})
  ``phi_t = [ sum_{j asked} z_j + sum_{j in R_{t-1}} p_j + (z_I - p_I) / q_t(I) ] / N``.

Both satisfy ``E[phi_t | F_{t-1}] = theta`` for any predictable policy and
predictions, so ``theta_hat = mean_t phi_t`` is unbiased and ``phi_t - theta`` are
martingale differences. Then ``Var(theta_hat) = E[sum_t (phi_t - theta)^2] / n^2`` and

    V_hat = sum_t (phi_t - theta_hat)^2 / (n (n - 1))

has ``E[V_hat] = Var(theta_hat)`` exactly (``../shared/NOTES.md`` facts 2-3). That
is the default variance; the paper's closed form (Appendix A.2.2) is an option.

After each answer the new model's factor posterior gets one Laplace update, which
changes the predictions used from the next round on.
"""

from __future__ import annotations

import math
import numbers
import sys
import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ._inference import effective_df
from ._validation import check_alpha, check_generator, check_outcome_values, check_scalar
from .confseq import BettingConfidenceSequence
from .factor_model import _laplace_step
from .results import AccuracyResult
from .sampling import (
    BernoulliAIPW,
    HybridSampler,
    PolicyState,
    Sampler,
    UniformSampler,
    oracle_draw,
    oracle_scores,
    quadratic_forms_from_scratch,
)

__all__ = [
    "PAIEstimator",
    "SequentialRun",
    "StreamRun",
    "martingale_variance",
    "paper_variance",
    "weighted_martingale",
]

QUERY_DTYPE = np.dtype(
    [
        ("question", np.int64),
        ("probability", np.float64),
        ("outcome", np.float64),
        ("increment", np.float64),
        ("prediction", np.float64),
        ("prediction_total", np.float64),
    ]
)


def martingale_variance(increments):
    """``sum (phi_t - mean)^2 / (n (n - 1))``: exactly unbiased for ``Var(mean phi)``."""
    phi = np.asarray(increments, dtype=float)
    n = phi.size
    if n < 2:
        raise ValueError("At least two increments are needed to estimate a variance.")
    return float(np.sum((phi - phi.mean()) ** 2) / (n * (n - 1)))


def weighted_martingale(increments, weights):
    """Estimate and exactly unbiased variance of ``sum_t lambda_t phi_t`` for fixed weights.

    ``lambda_t = weights_t / sum_s weights_s`` over the ``n`` increments given. Weights
    fixed before the run keep the estimate exactly unbiased (every ``phi_t`` has
    conditional mean theta and the ``lambda_t`` sum to one whatever happens), and
    ``Var = sum_t lambda_t^2 E[(phi_t - theta)^2]`` (martingale differences). The
    estimator ``V_hat = sum_t c_t (phi_t - theta_hat)^2`` with
    ``c_t = lambda_t^2 / ((1 - 2 lambda_t)(1 + K))``, ``K = sum_t lambda_t^2 / (1 - 2 lambda_t)``
    has ``E[V_hat] = Var`` exactly (since ``E[(phi_t - theta_hat)^2] =
    sigma_t^2 (1 - 2 lambda_t) + Var``); for equal weights it is
    :func:`martingale_variance`. Needs ``lambda_t < 1/2``.

    Weights that grow as the increments' variance falls (later answers, a better
    factor posterior, fewer questions left) lower the variance: see
    :func:`faqstats.step_weights.learn_step_weights`.

    Parameters
    ----------
    increments : array-like of shape (n,) or (R, n)
    weights : array-like of shape (>= n,)
        Positive; only the first ``n`` are used.

    Returns
    -------
    estimate, variance : float or ndarray of shape (R,)
    scaled_residuals : ndarray like ``increments``
        ``n lambda_t (phi_t - theta_hat)``: their spread and tails give the interval's
        degrees of freedom (for equal weights, the increments' residuals).

    Examples
    --------
    >>> import numpy as np
    >>> phi = np.array([0.2, 0.9, 0.4, 0.7])
    >>> est, var, _ = weighted_martingale(phi, np.ones(4))
    >>> bool(np.isclose(est, phi.mean()) and np.isclose(var, martingale_variance(phi)))
    True
    """
    phi = np.asarray(increments, dtype=float)
    n = phi.shape[-1]
    if n < 2:
        raise ValueError("At least two increments are needed to estimate a variance.")
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or w.size < n:
        raise ValueError(f"weights must be a 1-D array with at least {n} entries (one per increment).")
    w = w[:n]
    if not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise ValueError("weights must be finite and positive.")
    lam = w / w.sum()
    if lam.max() >= 0.5:
        raise ValueError(
            f"one increment would carry {lam.max():.0%} of the weight; the variance estimate needs every "
            "normalised weight below 1/2 (use more queries or flatter weights)."
        )
    est = phi @ lam
    resid = phi - np.expand_dims(est, -1)
    K = np.sum(lam**2 / (1.0 - 2.0 * lam))
    c = lam**2 / ((1.0 - 2.0 * lam) * (1.0 + K))
    var = resid**2 @ c
    return est, var, n * lam * resid


def paper_variance(outcomes, predictions, probabilities, prediction_totals, n_questions):
    """The seed paper's closed-form variance of ``theta_hat`` (Appendix A.2.2), i.e. ``sigma_hat^2 / n``.

    ``sigma^2 = [sum_t (z - p)^2 / q^2 - sum_t (S - P_t)^2] / (n N^2)`` with
    ``S = mean_s z_s / q_s`` and ``P_t = sum_j p_j^{(t-1)}``. It is biased downward on
    small banks (``../shared/NOTES.md`` fact 1); kept for comparison with the paper.
    """
    z, p, q, P = (np.asarray(a, dtype=float) for a in (outcomes, predictions, probabilities, prediction_totals))
    n = z.size
    S = np.mean(z / q)
    sigma2 = (np.sum((z - p) ** 2 / q**2) - np.sum((S - P) ** 2)) / (n * n_questions**2)
    return float(sigma2 / n)


class _Oracle:
    """Answers questions from an array or a callable; validates and caches answers."""

    def __init__(self, outcomes, n_questions):
        self.n_questions = n_questions
        self.cache = {}
        if callable(outcomes):
            self.fn = outcomes
            self.array = None
        else:
            arr = check_outcome_values(outcomes, "outcomes", allow_nan=True)  # in [0, 1] or NaN
            if arr.ndim != 1 or arr.size != n_questions:
                raise ValueError(
                    f"outcomes must be a 1-D array with one entry per question ({n_questions}), got shape {arr.shape}."
                )
            self.fn = None
            self.array = arr

    def ask_one(self, question):
        """The outcome of one question (a float): :meth:`ask` without its batch bookkeeping."""
        z = self.cache.get(question)
        if z is None:
            if self.array is None:
                return float(self.ask([question])[0])
            z = float(self.array[question])
            if math.isnan(z):
                raise ValueError(f"outcomes[{question}] is NaN but question {question} was asked.")
            self.cache[question] = z
        return z

    def ask(self, questions):
        """Outcomes of ``questions`` (a sequence of indices); the callable is called once
        with the not-yet-answered ones, so a batch can be answered in parallel."""
        questions = [int(q) for q in questions]
        new = list(dict.fromkeys(q for q in questions if q not in self.cache))
        if new and self.array is not None:
            for q in new:  # read (and NaN-checked) one at a time, as for a round of one draw
                self.ask_one(q)
        elif new:
            got = np.atleast_1d(check_outcome_values(self.fn(np.array(new)), f"outcomes returned for questions {new}"))
            if got.shape != (len(new),):
                raise ValueError(
                    "the outcomes callable must return one outcome per requested question; "
                    f"asked for {len(new)} question(s), got shape {got.shape}."
                )
            # the bank is fixed: a repeated question has the same answer, asked once
            self.cache.update(zip(new, map(float, got)))
        return np.array([self.cache[q] for q in questions])


def within_round(q_round, available, replace, own=False):
    """Distribution of the next draw inside a round of a batch.

    With replacement every draw of the round uses the round's ``q``; without, later
    draws use ``q`` renormalised over the questions not yet drawn (successive
    sampling), whose probability is what the increment must divide by.
    ``own=True`` says ``q_round`` is the caller's to overwrite and already zero where
    unavailable (a round of one draw from :meth:`Sampler.probabilities`): it is then
    renormalised in place, the same numbers without copies.
    """
    if replace:
        return q_round
    if own:
        return np.divide(q_round, q_round.sum(), out=q_round)
    q = np.where(available, q_round, 0.0)
    return q / q.sum()


def draw_question(rng, q):
    """``int(rng.choice(q.size, p=q))``: the same index, consuming ``rng`` the same way.

    ``Generator.choice(p=q)`` checks ``q``, then returns the first ``i`` with
    ``cdf[i] > u`` where ``cdf = cumsum(q) / cumsum(q)[-1]`` and ``u = rng.random()``.
    For a float64 ``q`` that clearly passes its checks (non-negative, summing to 1
    within 1e-9, well inside its tolerance ``sqrt(eps)``) this finds the same ``i``
    without ``choice``'s compensated sum, copies and division over ``q``: as
    ``c -> fl(c / total)`` is non-decreasing, ``cdf[i] > u`` exactly when
    ``cumsum(q)[i] >= c*``, the least float with ``fl(c* / total) > u`` (a few ulps
    from ``u * total``). Anything else, and generators whose ``choice`` is overridden
    (tests script paths that way), goes to ``choice`` itself.
    """
    if (
        type(rng).choice is np.random.Generator.choice
        and isinstance(q, np.ndarray) and q.dtype == np.float64 and q.ndim == 1 and q.size and q.flags.c_contiguous
    ):
        cs = _cumsum(q)
        total = float(cs[-1])
        if abs(total - 1.0) <= 1e-9 and q.min() >= 0.0:
            u = rng.random()
            c = u * total
            if c / total > u:
                while (below := math.nextafter(c, -math.inf)) / total > u:
                    c = below
            else:
                while not c / total > u:
                    c = math.nextafter(c, math.inf)
            return int(cs.searchsorted(c, side="left"))
    return int(rng.choice(q.size, p=q))


def _cumsum(q):
    """``np.cumsum(q)``: a sequential float64 sum in numpy and in torch alike, and
    torch's loop is about 4x faster, so it is used when torch is already imported."""
    torch = sys.modules.get("torch")
    if torch is not None and q.flags.writeable:
        return torch.cumsum(torch.from_numpy(q), 0).numpy()
    return np.cumsum(q)


def draw_next(sampler, run, rng):
    """A round of one draw: ``(question, probability)`` for ``run`` (a :class:`SequentialRun`).

    The oracle-score policies (the default :class:`~faqstats.HybridSampler`,
    :class:`~faqstats.NeymanSampler`, unless a subclass overrides ``scores`` or
    ``probabilities``) draw through :func:`~faqstats.sampling.oracle_draw` without
    forming ``q_t``; every other policy through its ``probabilities`` and
    :func:`draw_question`. Both consume one ``rng.random()`` and pick the same question
    up to rounding.
    """
    # the base class's probabilities() returns a new array, zero where unavailable
    fresh = type(sampler).probabilities is Sampler.probabilities
    if fresh and sampler._oracle_normalisations(run.step, run.budget):
        post = run.posterior
        scores = oracle_scores(run.predictions) if post is None else post.oracle_scores
        drawn = oracle_draw(scores, run.asked, sampler.tau, rng)
        if drawn is not None:
            return drawn
    q = within_round(sampler.probabilities(run.state()), run.available, run.replace, own=fresh)
    question = draw_question(rng, q)
    return question, float(q[question])


class _FactorPosterior:
    """Gaussian approximation of the new model's factor and the predictions it implies.

    It also keeps, lazily, the quadratic forms ``quad_j = v_j' cov v_j`` that the
    active-learning score needs. Nothing is maintained until a policy first asks
    (:meth:`quadratic_forms`, O(N k^2) once); from then on each Laplace update
    ``cov' = cov - c (cov v)(cov v)'`` with ``c = w / (1 + w v' cov v)`` changes them by
    ``quad' = quad - c (V cov v)^2``: O(N k) per answer. Updates are queued and applied
    when the forms are next asked for (a batch of ``m`` answers is one ``N x m`` product);
    if more than ``max(4, k // 4)`` updates queue up without being asked for (a policy that
    has stopped using them, such as the hybrid policy past ``rho * budget``), the cache
    is dropped, so policies that never use the score pay nothing.

    Each downdate uses ``V cov v`` computed afresh, so rounding errors add up without
    being amplified; to keep them from accumulating over long runs the forms are
    recomputed from scratch after ``refresh_every`` incremental updates (default 256,
    i.e. ``k / 256`` extra matrix-vector products per answer on average). They stay within
    about 1e-12 (relative to ``max_j quad_j``) of ``einsum(V @ cov, V)``.
    """

    refresh_every = 256

    def __init__(self, question_factors, mean, cov, refresh_every=None, dtype="float64"):
        self.V = question_factors
        # predictions from a float32 copy of the factors (opt-in): half the memory traffic of
        # the one O(N k) pass every answer needs; the quadratic forms stay float64
        self._V32 = None if dtype == "float64" else np.ascontiguousarray(question_factors, dtype=np.float32)
        self.mean = np.array(mean, dtype=float)
        cov = np.asarray(cov, dtype=float)
        # exactly symmetric from the start; the Laplace downdates keep it so (see _laplace_step)
        self.cov = 0.5 * (cov + cov.T)
        self.predictions = self._predict()
        if refresh_every is not None:
            self.refresh_every = int(refresh_every)
        self._quad = None  # quad_j for the covariance before the queued updates, or None
        self._queued = []  # (cov v, c) of the Laplace updates not yet applied to _quad
        self._since_refresh = 0  # incremental updates applied since the last recomputation

    def update(self, question, outcome):
        self.mean, self.cov, Sv, c = _laplace_step(self.mean, self.cov, self.V[question], outcome, symmetric=True)
        if self._quad is not None:
            if len(self._queued) >= max(4, self.V.shape[1] // 4):
                self._quad, self._queued = None, []  # not asked for lately: stop maintaining
            else:
                self._queued.append((Sv, c))
        self.predictions = self._predict()

    def _predict(self):
        if self._V32 is None:
            # sigmoid(x) = 1 / (1 + h^2) with h = exp(-x / 2), numpy's vectorised exp (scipy's
            # expit takes 5x as long); h also gives the oracle score sqrt(p (1 - p)) = h p
            # without a square root or the cancellation in 1 - p. Logits below -1418 are
            # clipped there (h stays finite, h^2 overflows: p = 0 and score 0, both exact to
            # within 1e-300).
            h = self.V @ (-0.5 * self.mean)
            np.minimum(h, 709.0, out=h)
            with np.errstate(over="ignore"):
                np.exp(h, out=h)
                p = np.multiply(h, h)
                p += 1.0
                np.reciprocal(p, out=p)
                self._scores = np.multiply(h, p, out=h)
            return p
        # sigmoid(x) = (1 + tanh(x / 2)) / 2 with numpy's SIMD float32 tanh: no overflow, 3x faster
        # than scipy's expit in float32, within 1e-7 of float64 expit on the same float32 logits
        x = self._V32 @ (0.5 * self.mean).astype(np.float32)
        np.tanh(x, out=x)
        x *= 0.5
        x += 0.5
        self._scores = None
        return x.astype(np.float64)

    @property
    def oracle_scores(self):
        """``sqrt(p (1 - p))`` for the current predictions (read-only; computed once per update)."""
        if self._scores is None:
            self._scores = oracle_scores(self.predictions)
        self._scores.flags.writeable = False
        return self._scores

    def quadratic_forms(self):
        """``v_j' cov v_j`` for every question (shape (N,), read-only), for the current ``cov``."""
        queued = len(self._queued)
        if self._quad is None or self._since_refresh + queued > self.refresh_every:
            self._quad = quadratic_forms_from_scratch(self.V, self.cov)
            self._since_refresh = 0
        elif queued == 1:
            Sv, c = self._queued[0]
            u = self.V @ Sv
            self._quad = self._quad - c * (u * u)
            self._since_refresh += 1
        elif queued:
            U = self.V @ np.column_stack([Sv for Sv, _ in self._queued])
            self._quad = self._quad - (U * U) @ np.array([c for _, c in self._queued])
            self._since_refresh += queued
        self._queued = []
        self._quad.flags.writeable = False  # handed to policies; replaced, never modified
        return self._quad


class _Run:
    """What both kinds of run share: predictions (posterior or fixed) and the policy's view."""

    def __init__(self, n_questions, budget, posterior, predictions):
        self.n_questions = n_questions
        self.budget = budget
        self.posterior = posterior
        self._fixed = np.zeros(n_questions) if predictions is None else np.asarray(predictions, dtype=float)
        self.available = np.ones(n_questions, dtype=bool)
        self.records = []

    @property
    def predictions(self):
        return self.posterior.predictions if self.posterior is not None else self._fixed

    def _policy_state(self, step):
        post = self.posterior
        return PolicyState(
            predictions=self.predictions,
            available=self.available.copy(),
            step=step,
            budget=self.budget,
            question_factors=None if post is None else post.V,
            posterior_mean=None if post is None else post.mean,
            posterior_cov=None if post is None else post.cov,
            posterior=post,
        )

    def table(self):
        return np.array(self.records, dtype=QUERY_DTYPE)


class SequentialRun(_Run):
    """State of one sequential PAI run, advanced one answer at a time.

    The estimator drives it; tests copy it (``copy.deepcopy``) at every node to
    enumerate all sampling paths exactly. ``predictions`` are fixed when no
    posterior is given.
    """

    def __init__(self, n_questions, budget, replace, posterior=None, predictions=None):
        super().__init__(n_questions, budget, posterior, predictions)
        self.replace = replace
        self.asked_total = 0.0  # sum of outcomes of distinct asked questions (without replacement)
        self._asked = np.empty(max(int(budget), 1), dtype=np.intp)  # those questions, in order
        self._n_asked = 0
        self.step = 1

    @property
    def asked(self):
        """Indices of the questions no longer askable (empty with replacement), in draw order."""
        return self._asked[: self._n_asked]

    def state(self):
        return self._policy_state(self.step)

    def _base(self):
        """The prediction part of the increment (times N): sum p, or asked z + unasked p."""
        p = self.predictions
        # all predictions less the few asked: a gather, not a pass over a mask
        return p.sum() if self.replace else self.asked_total + (p.sum() - p[self.asked].sum())

    def increment(self, question, probability, outcome, base=None):
        """``phi_t`` for asking ``question`` now (before any update); ``base``: ``_base()`` if known."""
        correction = (outcome - self.predictions[question]) / probability
        return ((self._base() if base is None else base) + correction) / self.n_questions

    def increment_range(self, q):
        """``[L, U]`` containing ``phi_t`` whichever question ``q`` draws and whatever its
        outcome in [0, 1]; known before the draw (used by confidence sequences)."""
        support = q > 0
        p, qs = self.predictions[support], q[support]
        base = self._base()
        return (base + np.min(-p / qs)) / self.n_questions, (base + np.max((1.0 - p) / qs)) / self.n_questions

    def record(self, question, probability, outcome, update=True):
        """Record the answer and return ``phi_t``.

        ``update=False`` defers the posterior update (inside a batch the predictions stay
        those of the round's start; call :meth:`update_posterior` after the round).
        """
        base = self._base()
        phi = self.increment(question, probability, outcome, base)
        self.records.append((question, probability, outcome, phi, self.predictions[question], base))
        if not self.replace:
            self.available[question] = False
            self.asked_total += outcome
            if self._n_asked == self._asked.size:
                self._asked = np.concatenate([self._asked, np.empty_like(self._asked)])
            self._asked[self._n_asked] = question
            self._n_asked += 1
        if update and self.posterior is not None:
            self.posterior.update(question, outcome)
        self.step += 1
        return phi

    def update_posterior(self, questions, outcomes):
        """The Laplace updates deferred during a batch, in draw order."""
        if self.posterior is not None:
            for question, outcome in zip(questions, outcomes):
                self.posterior.update(question, outcome)


class StreamRun(_Run):
    """State of one nature's-order (Bernoulli label/skip) AIPW run."""

    def __init__(self, n_questions, budget, order, posterior=None, predictions=None):
        super().__init__(n_questions, budget, posterior, predictions)  # available = not yet visited
        self.order = np.asarray(order)
        self.position = 0
        self.labels_used = 0
        self.terms = []  # psi_t = p_t + (z_t - p_t) xi_t / pi_t, one per visited item
        self.variance_terms = []  # xi_t (z_t - p_t)^2 (1 - pi_t) / pi_t^2

    @property
    def item(self):
        return int(self.order[self.position])

    def state(self):
        return self._policy_state(self.position + 1)

    def record(self, pi, labelled, outcome=None):
        """Record the coin for the current item (and its outcome when labelled)."""
        j = self.item
        p = self.predictions[j]
        if labelled:
            self.terms.append(p + (outcome - p) / pi)
            self.variance_terms.append((outcome - p) ** 2 * (1.0 - pi) / pi**2)
            self.records.append((j, pi, outcome, self.terms[-1], p, np.nan))
            self.labels_used += 1
            if self.posterior is not None:
                self.posterior.update(j, outcome)
        else:
            self.terms.append(p)
        self.available[j] = False
        self.position += 1

    @property
    def done(self):
        return self.position >= self.n_questions


class PAIEstimator(BaseEstimator):
    """Estimate a new model's accuracy on a bank from a small, actively chosen set of queries.

    Parameters
    ----------
    factor_model : fitted LogisticFactorModel (or LogisticFactorModelCV) or None
        Supplies question factors and the prior of the new model's factor. ``None``
        means no predictions (all zero): with ``UniformSampler(replace=False)`` the
        result is the plain sample mean with finite-population correction, and with
        ``BernoulliAIPW(score="uniform")`` the paper's Horvitz-Thompson baseline.
    sampler : Sampler, default=HybridSampler()
        The sampling policy. ``sampler.replace`` chooses with/without replacement.
    budget : int, default=100
        Number of queries (expected number of labels for ``BernoulliAIPW``). At least
        2; at most N without replacement.
    variance : {"martingale", "paper"}, default="martingale"
        ``"martingale"``: the exactly unbiased estimator ``sum (phi - mean)^2 / (n (n-1))``.
        ``"paper"``: the paper's closed form (with replacement only).
    interval : {"robust-t", "t", "normal"}, default="robust-t"
        Quantile ``c`` of the Wald-type interval ``estimate -/+ c se``:

        * ``"robust-t"``: Student's t with the kurtosis-adjusted (Satterthwaite)
          degrees of freedom of :func:`faqstats._inference.effective_df`: ``n - 1`` for
          light-tailed increments, fewer when a few large inverse-probability weights
          make the variance estimate unreliable. On openllm_v1 (100 seeds x 615 test
          models) it covered 0.950 / 0.953 / 0.951 / 0.952 at 25 / 35 / 70 / 170 queries
          where the normal quantile covered 0.913 / 0.923 / 0.934 / 0.943, for 22% / 9% / 4%
          more width at 25 / 70 / 170 queries (``docs/validity.md``).
        * ``"t"``: Student's t with ``n - 1`` degrees of freedom.
        * ``"normal"``: the seed paper's normal quantile.

        Nature's-order AIPW always uses the normal quantile.
    batch_size : int, default=1
        Questions drawn per round from the same policy, e.g. to send them to an API or
        to graders in parallel; the factor posterior is updated between rounds only.
        Without replacement the draws of a round are successive (each from the round's
        ``q`` renormalised over the questions not yet drawn). The estimate stays exactly
        unbiased and the martingale variance exactly unbiased for any batch size.
        Ignored by ``BernoulliAIPW``.
    stop_when_width : float in (0, 1] or None, default=None
        Stop as soon as the anytime-valid 95% confidence sequence (see
        ``confidence_sequence``) is at most this wide, checked after every round;
        ``budget`` is then the maximum number of queries. The interval reported at the
        stopping time is that of the confidence sequence, which keeps its guarantee
        at any data-dependent stopping time (the Wald-type interval would not).
    confidence_sequence : bool or float, default=False
        Also track a hedged-betting confidence sequence (:class:`~faqstats.confseq.BettingConfidenceSequence`)
        over the increments: ``True`` for level 95%, or a float ``alpha``. Implied
        (at 95%) by ``stop_when_width``. Not available for ``BernoulliAIPW``.
    dtype : {"float64", "float32"}, default="float64"
        Precision of the predictions ``sigmoid(V m)`` recomputed after every answer (the
        one pass over all N x k question factors per answer). ``"float32"`` uses a float32
        copy of the factors: about half the time of that pass on large banks (the live
        step at N = 12,032, k = 64: ``docs/performance.md``), predictions within about 2e-7
        of float64's. Validity is untouched (predictions may be any numbers fixed before
        each draw); the draws differ from float64's now and then.
    step_weights : array-like of shape (>= budget,) or None, default=None
        Fixed positive weights of the increments: the estimate is
        ``sum_t lambda_t phi_t`` with ``lambda = step_weights[:n] / sum(step_weights[:n])``
        instead of the plain mean (:func:`weighted_martingale`; still exactly unbiased,
        with an exactly unbiased variance). Later increments are less variable (the
        factor posterior has learned the model, fewer questions remain), so weights
        proportional to the inverse of each step's variance cut the variance:
        :func:`faqstats.step_weights.learn_step_weights` estimates them from the
        history. ``None``: equal weights. Weights must be fixed before the run (not
        chosen from its answers); with ``stop_when_width`` the first ``n`` are
        renormalised at the stopping time, and a result over so few increments that one
        would carry half the weight (a session's first draws) is the plain mean. Not for
        ``BernoulliAIPW``, the plain sample mean or ``variance="paper"``.
    random_state : int, Generator or None, default=None
        Seeds every draw; the same seed and answers give the same queries.
    verbose : bool, default=False
        Show a progress bar over queries.

    Attributes
    ----------
    result_ : AccuracyResult
    estimate_ : float
    std_error_ : float
    n_queries_ : int
        Answers observed (distinct questions are asked only once even when a
        with-replacement policy draws a question again).
    queries_ : structured ndarray
        One row per draw with fields ``question``, ``probability`` (q_t(I_t), or pi_t),
        ``outcome``, ``increment`` (phi_t), ``prediction`` (p_I before the answer) and
        ``prediction_total`` (the sum of predictions the increment used).
    posterior_mean_, posterior_cov_ : ndarray or None
        The new model's factor posterior after the last answer.
    confidence_sequence_ : ndarray of shape (n_rounds, 3) or None
        ``(queries so far, low, high)`` of the running confidence sequence after each
        round; it contains theta at every row simultaneously with probability
        ``>= 1 - alpha``.
    stop_reason_ : {"budget", "width"}

    See Also
    --------
    LogisticFactorModel, HybridSampler, AccuracyResult

    Examples
    --------
    >>> import numpy as np
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=80, n_questions=200, n_components=3, random_state=0)
    >>> fm = fq.LogisticFactorModel(n_components=3, max_iter=300, random_state=0).fit(bank.history)
    >>> z = bank.new_outcomes[0]
    >>> est = fq.PAIEstimator(fm, fq.HybridSampler(tau=0.25), budget=40, random_state=0).fit(z)
    >>> low, high = est.confint(alpha=0.05)
    >>> 0 <= low <= est.estimate_ <= high <= 1
    True
    """

    def __init__(
        self,
        factor_model=None,
        sampler=None,
        budget=100,
        variance="martingale",
        interval="robust-t",
        batch_size=1,
        stop_when_width=None,
        confidence_sequence=False,
        step_weights=None,
        random_state=None,
        verbose=False,
        dtype="float64",
    ):
        self.factor_model = factor_model
        self.sampler = sampler
        self.budget = budget
        self.variance = variance
        self.interval = interval
        self.batch_size = batch_size
        self.stop_when_width = stop_when_width
        self.confidence_sequence = confidence_sequence
        self.step_weights = step_weights
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    # -- set-up ----------------------------------------------------------------
    def _sampler(self):
        sampler = HybridSampler() if self.sampler is None else self.sampler
        if not isinstance(sampler, Sampler):
            raise TypeError(f"sampler must be a faqstats Sampler, got {type(sampler).__name__}.")
        sampler._check_params()
        return sampler

    def _bank_size(self):
        if self.factor_model is None:
            return None
        check_is_fitted(self.factor_model, "question_factors_" if not hasattr(self.factor_model, "best_estimator_") else "best_estimator_")
        return self.factor_model.question_factors_.shape[0]

    def _posterior(self):
        fm = self.factor_model
        if fm is None:
            return None
        return _FactorPosterior(fm.question_factors_, fm.prior_mean_, fm.prior_cov_, dtype=self.dtype)

    def _check(self, n_questions):
        sampler = self._sampler()
        if self.dtype not in ("float64", "float32"):
            raise ValueError(f"dtype must be 'float64' or 'float32', got {self.dtype!r}.")
        check_scalar(self.budget, "budget", kind=numbers.Integral, low=2)
        check_scalar(self.batch_size, "batch_size", kind=numbers.Integral, low=1)
        if self.variance not in ("martingale", "paper"):
            raise ValueError(f"variance must be 'martingale' or 'paper', got {self.variance!r}.")
        if self.stop_when_width is not None:
            check_scalar(self.stop_when_width, "stop_when_width", low=0.0, high=1.0, closed="right")
        if self._cs_alpha() is not None and isinstance(sampler, BernoulliAIPW):
            raise ValueError("Confidence sequences and stop_when_width need a sequential sampler, not BernoulliAIPW.")
        if self.interval not in ("robust-t", "t", "normal"):
            raise ValueError(f"interval must be 'robust-t', 't' or 'normal', got {self.interval!r}.")
        if self.factor_model is None and sampler.needs_factor_model:
            raise ValueError(f"{type(sampler).__name__} needs a fitted factor_model; pass one or use UniformSampler.")
        if not sampler.replace and self.budget > n_questions:
            raise ValueError(
                f"budget={self.budget} exceeds the {n_questions} questions of the bank; sampling without "
                "replacement can ask each question only once."
            )
        if self.variance == "paper" and (not sampler.replace or isinstance(sampler, BernoulliAIPW)):
            raise ValueError("variance='paper' is defined for with-replacement sequential sampling only.")
        if self.step_weights is not None:
            self._check_step_weights(sampler)
        return sampler

    def _check_step_weights(self, sampler):
        w = np.asarray(self.step_weights, dtype=float)
        if w.ndim != 1 or w.size < self.budget:
            raise ValueError(
                f"step_weights must be a 1-D array with at least budget={self.budget} entries, got shape {w.shape}."
            )
        if not np.all(np.isfinite(w[: self.budget])) or np.any(w[: self.budget] <= 0):
            raise ValueError("step_weights must be finite and positive.")
        if isinstance(sampler, BernoulliAIPW):
            raise ValueError("step_weights weight sequential increments; BernoulliAIPW has none.")
        if self.factor_model is None and isinstance(sampler, UniformSampler) and not sampler.replace:
            raise ValueError("step_weights do not apply to the plain sample mean (uniform sampling, no factor model).")
        if self.variance != "martingale":
            raise ValueError("step_weights need variance='martingale'.")

    def _cs_alpha(self):
        """Level of the confidence sequence to track, or None."""
        cs = self.confidence_sequence
        if cs is True or (cs is False and self.stop_when_width is not None):
            return 0.05
        if cs is False or cs is None:
            return None
        return check_alpha(cs)

    def new_run(self, n_questions=None, rng=None):
        """A fresh :class:`SequentialRun`/:class:`StreamRun` for this configuration (used by tests and replays)."""
        n_questions = resolve_bank_size(self._bank_size(), n_questions)
        sampler = self._check(n_questions)
        if isinstance(sampler, BernoulliAIPW):
            if sampler.order == "random":
                order = check_generator(rng).permutation(n_questions)
            else:
                order = np.arange(n_questions)
            return StreamRun(n_questions, self.budget, order, posterior=self._posterior())
        return SequentialRun(n_questions, self.budget, sampler.replace, posterior=self._posterior())

    # -- fitting ---------------------------------------------------------------
    def fit(self, outcomes, y=None):
        """Run the query loop against ``outcomes`` and estimate the accuracy.

        Parameters
        ----------
        outcomes : array-like of shape (N,) or callable
            The new model's outcomes in [0, 1]: 0/1, or graded scores such as rubric
            scores, pass@k fractions or partial credit (then the estimate is the mean
            score over the bank). Only the asked entries are read; NaN elsewhere is
            fine. Or a function mapping an integer array of question indices to
            their outcomes (it is called with one index at a time).

        Returns
        -------
        self
        """
        n_questions = self._bank_size()
        if n_questions is None:
            if callable(outcomes):
                raise ValueError("Without a factor model the bank size is unknown: pass outcomes as an array.")
            n_questions = int(np.size(outcomes))
        oracle = _Oracle(outcomes, n_questions)
        rng = check_generator(self.random_state)
        run = self.new_run(n_questions, rng)
        sampler = self._sampler()
        try:
            if isinstance(run, StreamRun):
                self._loop_stream(run, sampler, oracle, rng)
            else:
                self._loop_sequential(run, sampler, oracle, rng)
        except BaseException as exc:
            # Nothing lost: what was answered stays inspectable on the estimator.
            self.queries_ = run.table()
            exc.add_note(f"faqstats: {len(run.records)} answers recorded before the failure are in .queries_.")
            raise
        self._finish(run, sampler, n_questions)
        return self

    def _loop_sequential(self, run, sampler, oracle, rng):
        bar = _bar(self.budget, self.verbose)
        cs_alpha = self._cs_alpha()
        cs = None if cs_alpha is None else BettingConfidenceSequence(alpha=cs_alpha, truncation=0.9, horizon=self.budget)
        self.stop_reason_ = "budget"
        cs_rows = []
        # the base class's probabilities() returns a new array every round, zero where unavailable
        fresh = type(sampler).probabilities is Sampler.probabilities
        while run.step <= self.budget:
            size = min(self.batch_size, self.budget - run.step + 1)
            if size == 1 and cs is None:  # the usual case: no q_t kept for later
                question, probability = draw_next(sampler, run, rng)
                outcome = oracle.ask_one(question)
                run.record(question, probability, outcome)
                if bar is not None:
                    bar.update(1)
                continue
            q_round = sampler.probabilities(run.state())
            # draw the whole round first (it may be answered in parallel) ...
            available = run.available.copy()
            questions, probabilities, ranges = [], [], []
            for _ in range(size):
                # a round of one draw (the usual case) renormalises q_round in place
                q = within_round(q_round, available, run.replace, own=size == 1 and fresh)
                if cs is not None:
                    ranges.append(q)
                question = draw_question(rng, q)
                questions.append(question)
                probabilities.append(float(q[question]))
                if not run.replace:
                    available[question] = False
            # ... then record it in draw order; the factor posterior moves between rounds only
            outcomes = oracle.ask(questions)
            for k, (question, probability, outcome) in enumerate(zip(questions, probabilities, outcomes)):
                bounds = run.increment_range(ranges[k]) if cs is not None else None
                phi = run.record(question, probability, outcome, update=False)
                if cs is not None:
                    cs.update(phi, *bounds)
            run.update_posterior(questions, outcomes)
            if bar is not None:
                bar.update(size)
            if cs is not None:
                low, high = cs.interval()
                cs_rows.append((run.step - 1, low, high))
                if self.stop_when_width is not None and high - low <= self.stop_when_width and run.step > 2:
                    self.stop_reason_ = "width"
                    break
        if bar is not None:
            bar.close()
        self.confidence_sequence_ = np.array(cs_rows, dtype=float).reshape(-1, 3) if cs is not None else None

    def _loop_stream(self, run, sampler, oracle, rng):
        self.stop_reason_, self.confidence_sequence_ = "budget", None
        bar = _bar(run.n_questions, self.verbose)
        while not run.done:
            pi = sampler.inclusion_probability(run.state(), run.item, run.labels_used)
            labelled = bool(rng.random() < pi)
            run.record(pi, labelled, oracle.ask([run.item])[0] if labelled else None)
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()

    def _finish(self, run, sampler, n_questions):
        table = run.table()
        if isinstance(run, StreamRun):
            method, variance_method = "aipw", "design-based"
            estimate = float(np.mean(run.terms))
            var = float(np.sum(run.variance_terms)) / n_questions**2
        elif self.factor_model is None and isinstance(sampler, UniformSampler) and not sampler.replace:
            method, variance_method = "sample_mean", "finite-population"
            z = table["outcome"]
            n = z.size
            estimate = float(z.mean())
            var = (1.0 - n / n_questions) * float(z.var(ddof=1)) / n
        else:
            method = "pai"
            estimate = float(table["increment"].mean())
            if self.step_weights is not None and _weights_usable(self.step_weights, len(table)):
                variance_method = "weighted martingale"
                estimate, var, weighted_residuals = weighted_martingale(table["increment"], self.step_weights)
                estimate, var = float(estimate), float(var)
            elif self.variance == "martingale":
                variance_method = "martingale"
                var = martingale_variance(table["increment"])
            else:
                variance_method = "paper"
                var = paper_variance(
                    table["outcome"], table["prediction"], table["probability"], table["prediction_total"], n_questions
                )
                if var < 0:
                    warnings.warn("The paper's variance estimate is negative; reporting 0.", RuntimeWarning, stacklevel=3)
                    var = 0.0
        if not np.isfinite(estimate) or not np.isfinite(var):
            raise FloatingPointError("Non-finite estimate or variance; check the sampler's probabilities.")
        self.queries_ = table
        self.n_queries_ = int(np.unique(table["question"]).size)
        self.estimate_ = estimate
        self.std_error_ = float(np.sqrt(var))
        self.posterior_mean_ = None if run.posterior is None else run.posterior.mean
        self.posterior_cov_ = None if run.posterior is None else run.posterior.cov
        if self.interval == "normal" or method == "aipw":
            df = None
        elif self.interval == "t":
            df = float(len(table) - 1)
        elif variance_method == "weighted martingale":
            df = effective_df(weighted_residuals)
        else:  # the increments behind the variance: outcomes for the sample mean
            df = effective_df(table["outcome"] if method == "sample_mean" else table["increment"])
        self.result_ = AccuracyResult(
            estimate=estimate,
            std_error=self.std_error_,
            n_queries=self.n_queries_,
            n_questions=n_questions,
            method=method,
            variance_method=variance_method,
            df=df,
            stop_reason=self.stop_reason_,
            anytime_interval=None if self.confidence_sequence_ is None else tuple(self.confidence_sequence_[-1, 1:]),
            anytime_alpha=self._cs_alpha(),
        )

    # -- inference -------------------------------------------------------------
    def conf_int(self, alpha=0.05, alternative="two-sided"):
        """Confidence interval ``(low, high)`` at level ``1 - alpha``, clipped to [0, 1] (see ``interval``)."""
        check_is_fitted(self, "result_")
        return self.result_.conf_int(alpha=alpha, alternative=alternative)

    confint = conf_int

    def summary(self, alpha=0.05):
        check_is_fitted(self, "result_")
        return self.result_.summary(alpha)


def resolve_bank_size(n_factor_model, n_questions):
    """The bank size: the factor model's (``n_factor_model``, None without one) and the
    outcomes' (``n_questions``, None when unknown) must agree, and one must be known."""
    n = n_factor_model if n_questions is None else n_questions
    if n is None:
        raise ValueError("Without a factor model the bank size comes from the outcomes; pass n_questions.")
    if n_factor_model is not None and n != n_factor_model:
        raise ValueError(f"outcomes cover {n} questions but the factor model was fitted on {n_factor_model} questions.")
    return n


def _weights_usable(weights, n):
    """Whether ``n`` increments can be weighted (every normalised weight below 1/2).

    A final result always can (``budget`` is large enough in practice); a session's
    running result after a few draws may not, and is then the plain mean.
    """
    w = np.asarray(weights, dtype=float)[:n]
    return n >= 3 and w.max() < 0.5 * w.sum()


def _bar(total, enabled):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="querying", leave=False)





