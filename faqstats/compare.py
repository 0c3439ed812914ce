"""Paired comparison of two models on actively chosen questions.

The estimand is the accuracy difference ``delta = theta_A - theta_B`` on the whole bank.
Each step gives each model one Pro-Active Inference increment (its own predictions,
its own draw probability; the Des Raj form without replacement),

    phi^M_t = [ base^M_t + (z^M_{J_M} - p^M_{J_M}) / q^M_t(J_M) ] / N,    M = A, B,

(``base^M_t`` is ``sum_j p^M_j`` with replacement and ``sum_{asked by M} z^M +
sum_{j in R^M_{t-1}} p^M_j`` without, ``R^M`` the questions M has not been asked) and
the estimate is ``delta_hat = mean_t d_t`` with ``d_t = phi^A_t - phi^B_t``. Whatever the
joint law of the two draws ``(J_A, J_B)``, as long as each marginal is the ``q^M_t`` the
increment divides by and both are predictable, ``E[phi^M_t | F_{t-1}] = theta_M``; so
``E[d_t | F_{t-1}] = delta``, the ``d_t - delta`` form a martingale difference sequence and
``V_hat = sum_t (d_t - delta_hat)^2 / (n (n - 1))`` is exactly unbiased for
``Var(delta_hat)``. The designs differ in that joint law, which sets the covariance of
the two increments: ``Var(d_t | F) = Var(phi^A_t | F) + Var(phi^B_t | F) - 2 Cov``.
Pairing pays when the two models' *surprises* ``z - p`` on a shared question are
positively correlated (hard questions are hard for both); two independent evaluations
have ``Cov = 0``.

Two new models (``fit(outcomes_a, outcomes_b)``), each with its own factor posterior
updated with its own answers, 2 answers per step (as many as two independent
evaluations of ``budget`` queries each):

* ``design="coupled"`` (default): each model draws from its *own* single-model policy
  ``q^M = tau uniform + (1 - tau) sqrt(p^M (1 - p^M)) / sum`` over its own askable
  questions (exactly the policy of ``PAIEstimator(fm, HybridSampler(tau))``), and the two
  draws are made from the **maximal coupling** of ``q^A`` and ``q^B``: with probability
  ``w = sum_j min(q^A_j, q^B_j)`` both get the same question ``J ~ min(q^A, q^B) / w``,
  otherwise ``J_A ~ (q^A - q^B)_+ / (1 - w)`` and ``J_B ~ (q^B - q^A)_+ / (1 - w)``
  independently (disjoint supports, so never the same question). Each model's draws
  are marginally those of its own evaluation, so neither pays for a compromise policy,
  and the models share a question as often as any joint law with these marginals
  allows. With ``x^M(j) = (z^M_j - p^M_j) / q^M(j)``, ``pi = min(q^A, q^B) / w``, ``a = E_pi
  x^A``, ``a' = E_{(q^A - q^B)_+ / (1 - w)} x^A`` (and ``b, b'`` for B), the step's covariance is

      N^2 Cov(phi^A_t, phi^B_t | F_{t-1}) = w Cov_pi(x^A, x^B) + w (1 - w) (a - a') (b - b'):

  the shared part's covariance of the weighted surprises (positive when they are
  correlated) plus a term that is small unless the surprises differ systematically
  between the shared and the residual parts.
* ``design="shared"``: one question ``I ~ q_t`` per step, asked to both, from the
  compromise policy ``q ~ tau uniform + (1 - tau) sqrt(p^A (1 - p^A) + p^B (1 - p^B))``
  (the standard deviation of ``z^A - z^B`` for independent Bernoulli answers); ``d_t`` is
  then the PAI increment of the differenced outcome ``y = z^A - z^B`` with the predicted
  difference ``p^A - p^B``. Always the same question, but for unrelated models the
  compromise costs more than the (small) covariance gains: by Minkowski,
  ``(sum_j sqrt(s_Aj^2 + s_Bj^2))^2 >= (sum_j s_Aj)^2 + (sum_j s_Bj)^2``.

A new model against a fully known reference (``fit(outcomes_a, reference=z_R)``):
``theta_R`` is known, and the reference's outcomes serve as the control for the new
model's: the prediction of ``z^A_j`` is ``lambda z^R_j + (1 - lambda) p^A_j`` (the
reference itself when ``lambda = 1``), with ``lambda`` fixed or re-fitted each round by
least squares on the answers so far (predictable, so validity is untouched). The
policy score is the root mean squared error of that prediction under the factor
model, ``sqrt(p^A (1 - p^A) + (p^A - prediction)^2)``: for ``lambda = 1`` the square root of
the predicted probability that the new model disagrees with the reference. (Only A
answers; ``design`` does not apply.)

Without a factor model both models' policies are uniform over the same questions, so
the coupled draws always coincide and every design with sampling without replacement
reduces to the uniform sample mean of the differences with finite-population
correction.
"""

from __future__ import annotations

import json
import numbers
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ._inference import effective_df, wald_interval
from ._validation import check_alpha, check_generator, check_outcome_values, check_scalar
from .estimator import _FactorPosterior, _Oracle, draw_question, martingale_variance, resolve_bank_size, within_round

__all__ = ["PairedPAIEstimator", "ComparisonResult", "compare", "maximal_coupling", "draw_coupled"]

PAIRED_QUERY_DTYPE = np.dtype(
    [
        ("question", np.int64),  # model A's question (both models' in the shared and reference designs)
        ("probability", np.float64),  # its draw probability q^A_t(question)
        ("question_b", np.int64),  # model B's question (the reference's: = question)
        ("probability_b", np.float64),  # its draw probability q^B_t(question_b)
        ("outcome_a", np.float64),
        ("outcome_b", np.float64),
        ("increment_a", np.float64),
        ("increment_b", np.float64),
        ("increment", np.float64),
    ]
)


@dataclass(frozen=True)
class ComparisonResult:
    """Estimated accuracy difference ``theta_A - theta_B`` with its uncertainty.

    Attributes
    ----------
    estimate : float
        Estimate of ``delta = theta_A - theta_B``.
    std_error : float
    estimate_a, estimate_b : float
        The two accuracies (each unbiased); ``estimate_b`` is the exact reference
        accuracy in the reference design.
    n_queries : int
        Distinct questions asked (to at least one model; to the new model only in the
        reference design).
    n_questions : int
    method : {"coupled", "paired", "reference", "paired_sample_mean", "reference_sample_mean"}
        ``"coupled"``: two new models, coupled design; ``"paired"``: shared design;
        ``"*_sample_mean"``: no factor model, without replacement (the designs coincide).
    variance_method : {"martingale", "finite-population"}
    df : float or None
        Degrees of freedom of the t quantile (``None``: normal quantile).

    Examples
    --------
    >>> r = ComparisonResult(estimate=0.05, std_error=0.02, estimate_a=0.7, estimate_b=0.65,
    ...                      n_queries=50, n_questions=500, method="paired",
    ...                      variance_method="martingale", df=40.0)
    >>> [round(x, 3) for x in r.conf_int()]
    [0.01, 0.09]
    >>> round(r.pvalue(), 4)
    0.0166
    """

    estimate: float
    std_error: float
    estimate_a: float
    estimate_b: float
    n_queries: int
    n_questions: int
    method: str
    variance_method: str
    df: float | None = None

    def conf_int(self, alpha=0.05, alternative="two-sided"):
        """Wald-type interval for the difference (t quantile when ``df`` is set), clipped to [-1, 1]."""
        return wald_interval(
            self.estimate, self.std_error, alpha=alpha, alternative=alternative, bounds=(-1.0, 1.0), df=self.df
        )

    confint = conf_int

    def pvalue(self, null=0.0, alternative="two-sided"):
        """P-value of ``H0: delta = null`` (``alternative="larger"``: ``H1: delta > null``)."""
        check_scalar(null, "null", low=-1.0, high=1.0)
        if alternative not in ("two-sided", "larger", "smaller"):
            raise ValueError(f"alternative must be 'two-sided', 'larger' or 'smaller', got {alternative!r}.")
        dist = stats.norm if self.df is None else stats.t(self.df)
        if self.std_error == 0:
            stat = 0.0 if self.estimate == null else np.copysign(np.inf, self.estimate - null)
        else:
            stat = (self.estimate - null) / self.std_error
        if alternative == "two-sided":
            return float(2 * dist.sf(abs(stat)))
        return float(dist.sf(stat) if alternative == "larger" else dist.cdf(stat))

    def summary(self, alpha=0.05):
        """A plain-text table of the comparison."""
        low, high = self.conf_int(alpha)
        rows = [
            ("Design", self.method),
            ("Variance estimator", self.variance_method),
            ("Interval quantile", "normal" if self.df is None else f"t, {self.df:g} df"),
            ("Questions in bank", f"{self.n_questions}"),
            ("Questions asked", f"{self.n_queries} ({100 * self.n_queries / self.n_questions:.1f}%)"),
            ("Accuracy A", f"{self.estimate_a:.4f}"),
            ("Accuracy B" + (" (known)" if self.method.startswith("reference") else ""), f"{self.estimate_b:.4f}"),
            ("Difference A - B", f"{self.estimate:+.4f}"),
            ("Standard error", f"{self.std_error:.4f}"),
            (f"{100 * (1 - alpha):g}% CI", f"[{low:+.4f}, {high:+.4f}]"),
            ("p-value (no difference)", f"{self.pvalue():.4g}"),
        ]
        width = max(len(k) for k, _ in rows)
        line = "=" * (width + 24)
        body = "\n".join(f"{k:<{width}}  {v:>20}" for k, v in rows)
        return f"{line}\nfaqstats paired comparison\n{line}\n{body}\n{line}"

    def to_dict(self):
        return asdict(self)

    def to_json(self):
        return json.dumps(self.to_dict())

    def __str__(self):
        return self.summary()


def maximal_coupling(q_a, q_b):
    """The maximal coupling of two distributions over the same questions.

    Parameters
    ----------
    q_a, q_b : ndarray of shape (N,)
        Probability vectors (non-negative, summing to 1).

    Returns
    -------
    p_shared : float
        Probability that both draws are the same question: ``w = sum_j min(q_a_j, q_b_j)``
        (1 when the two vectors are equal, or when one residual vanishes by rounding).
    shared : ndarray or None
        ``min(q_a, q_b) / w``, the law of the common question (None when ``w = 0``).
    residual_a, residual_b : ndarray or None
        ``(q_a - q_b)_+`` and ``(q_b - q_a)_+``, each normalised: the laws of the two draws
        when they differ (disjoint supports); None when ``p_shared == 1``.

    So ``P(J_A = i, J_B = k) = p_shared shared_i [i == k] + (1 - p_shared) residual_a_i
    residual_b_k``, whose margins are ``q_a`` and ``q_b`` (up to rounding) and whose
    ``P(J_A = J_B) = w`` is the largest any joint law with these margins allows.

    Examples
    --------
    >>> import numpy as np
    >>> p, shared, ra, rb = maximal_coupling(np.array([.5, .3, .2, 0.]), np.array([.2, .3, .2, .3]))
    >>> round(p, 3), shared.round(3), ra.round(3), rb.round(3)
    (0.7, array([0.286, 0.429, 0.286, 0.   ]), array([1., 0., 0., 0.]), array([0., 0., 0., 1.]))
    """
    q_a = np.asarray(q_a, dtype=float)
    q_b = np.asarray(q_b, dtype=float)
    m = np.minimum(q_a, q_b)
    r_a, r_b = q_a - m, q_b - m  # exactly zero where the two agree
    w, tv_a, tv_b = m.sum(), r_a.sum(), r_b.sum()
    if not (tv_a > 0 and tv_b > 0):  # equal (possibly up to rounding): always the same question
        return 1.0, m / w, None, None
    shared = m / w if w > 0 else None
    return float(min(w, 1.0)), shared, r_a / tv_a, r_b / tv_b


def draw_coupled(rng, q_a, q_b):
    """Draw ``(J_A, J_B)`` from the maximal coupling of ``q_a`` and ``q_b``.

    Randomness used, in this order: when the coupling puts all its mass on the diagonal
    (``q_a == q_b``), one ``rng.choice`` from the shared law (the call one draw of the shared
    design makes, so without a factor model the two designs draw alike); otherwise one ``rng.random()`` coin (the same question when it is below
    ``p_shared``), then one ``rng.choice`` from the shared law, or two, A's then B's, from
    the residual laws. See :func:`maximal_coupling`.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> pairs = [draw_coupled(rng, np.array([.5, .5, 0.]), np.array([0., .5, .5])) for _ in range(2000)]
    >>> ja, jb = np.array(pairs).T
    >>> round(float(np.mean(ja == jb)), 1), sorted(set(zip(ja.tolist(), jb.tolist())))
    (0.5, [(0, 2), (1, 1)])
    """
    p_shared, shared, r_a, r_b = maximal_coupling(q_a, q_b)
    if r_a is None:
        j = draw_question(rng, shared)
        return j, j
    if rng.random() < p_shared:
        j = draw_question(rng, shared)
        return j, j
    return draw_question(rng, r_a), draw_question(rng, r_b)


class PairedRun:
    """State of one paired run; tests copy it (``copy.deepcopy``) to enumerate paths.

    A round starts with :meth:`begin_round`, which freezes the round's predictions and
    returns its policy: ``q`` (shared and reference designs) or ``(q_a, q_b)`` (coupled
    design). Draws inside the round use :func:`~faqstats.estimator.within_round`, with
    ``available`` (A's askable questions, both models' outside the coupled design) and
    ``available_b`` (B's); the coupled design couples each pair of within-round laws
    with :func:`maximal_coupling`. :meth:`record` returns the difference increment
    ``d_t``; :meth:`end_round` applies the Laplace updates (each model with its own answers).
    """

    def __init__(self, n_questions, budget, replace, tau, policy, posterior_a=None, posterior_b=None,
                 reference=None, reference_weight="auto", design="shared"):
        if design not in ("shared", "coupled"):
            raise ValueError(f"design must be 'coupled' or 'shared', got {design!r}.")
        self.n_questions = n_questions
        self.budget = budget
        self.replace = replace
        self.tau = tau
        self.policy = policy
        self.posterior_a = posterior_a
        self.posterior_b = posterior_b
        self.reference = reference
        self.reference_weight = reference_weight
        self.design = "shared" if reference is not None else design  # a reference is never asked
        self.available = np.ones(n_questions, dtype=bool)  # A's askable questions
        self.available_b = np.ones(n_questions, dtype=bool)  # B's (equal to A's unless coupled)
        self.asked_a = 0.0  # sums of the outcomes of distinct asked questions (without replacement)
        self.asked_b = 0.0
        self.records = []
        self.weights = []  # lambda of each round (reference design)
        self.answers = {}  # question -> (z_a, z_b) of the distinct questions answered by both
        self.step = 1
        self._pred_a = self._pred_b = None

    @property
    def coupled(self):
        return self.design == "coupled"

    def _model_predictions(self, posterior):
        return None if posterior is None else posterior.predictions

    def _weight(self, p_a):
        """``lambda`` for this round: fixed, or least squares of ``z^A - p^A`` on ``z^R - p^A`` so far."""
        if p_a is None:
            return 1.0
        if self.reference_weight != "auto":
            return float(self.reference_weight)
        if len(self.answers) < 2:
            return 0.5
        idx = np.fromiter(self.answers, dtype=np.int64)
        z_a = np.array([self.answers[j][0] for j in idx])
        x = self.reference[idx] - p_a[idx]
        sxx = float(x @ x)
        if sxx <= 0:
            return 0.5
        return float(np.clip(x @ (z_a - p_a[idx]) / sxx, 0.0, 1.0))

    def _mix(self, avail, score):
        """``tau`` uniform over ``avail`` plus ``1 - tau`` of the normalised score (uniform when none)."""
        n_avail = int(avail.sum())
        if n_avail == 0:
            raise RuntimeError("No question left to ask: the bank is exhausted.")
        uniform = avail / n_avail
        if self.policy == "uniform" or score is None:
            return uniform
        s = np.where(avail, score, 0.0)
        total = s.sum()
        if not total > 0:
            return uniform
        return self.tau * uniform + (1.0 - self.tau) * s / total

    def begin_round(self):
        """Freeze the round's predictions and return its policy (zero where unavailable):
        ``q`` in the shared and reference designs, ``(q_a, q_b)`` in the coupled design."""
        p_a = self._model_predictions(self.posterior_a)
        if self.reference is None:
            p_b = self._model_predictions(self.posterior_b)
            self._pred_a = np.zeros(self.n_questions) if p_a is None else p_a
            self._pred_b = np.zeros(self.n_questions) if p_b is None else p_b
            if self.coupled:
                # each model's own policy: what PAIEstimator(fm, HybridSampler(tau)) would use
                score_a = None if p_a is None else np.sqrt(np.clip(p_a * (1 - p_a), 0.0, None))
                score_b = None if p_b is None else np.sqrt(np.clip(p_b * (1 - p_b), 0.0, None))
                return self._mix(self.available, score_a), self._mix(self.available_b, score_b)
            score = None if p_a is None else np.sqrt(p_a * (1 - p_a) + p_b * (1 - p_b))
        else:
            lam = self._weight(p_a)
            self.weights.append(lam)
            ref = self.reference
            self._pred_a = ref if p_a is None else lam * ref + (1.0 - lam) * p_a
            self._pred_b = ref
            score = None if p_a is None else np.sqrt(p_a * (1 - p_a) + (p_a - self._pred_a) ** 2)
        return self._mix(self.available, score)

    def _base(self, pred, asked, available):
        return pred.sum() if self.replace else asked + pred[available].sum()

    def record(self, question, probability, outcome_a, outcome_b, question_b=None, probability_b=None):
        """Record A's answer to ``question`` (drawn with ``probability``) and B's to
        ``question_b`` (drawn with ``probability_b``; by default the same question and
        probability, the only choice outside the coupled design); return ``d_t``."""
        if question_b is None:
            question_b, probability_b = question, probability
        elif not self.coupled and (question_b != question or probability_b != probability):
            raise ValueError("Outside the coupled design both models answer the same question.")
        n = self.n_questions
        phi_a = (self._base(self._pred_a, self.asked_a, self.available)
                 + (outcome_a - self._pred_a[question]) / probability) / n
        phi_b = (self._base(self._pred_b, self.asked_b, self.available_b)
                 + (outcome_b - self._pred_b[question_b]) / probability_b) / n
        d = phi_a - phi_b
        self.records.append((question, probability, question_b, probability_b, outcome_a, outcome_b, phi_a, phi_b, d))
        if question_b == question:
            self.answers[int(question)] = (float(outcome_a), float(outcome_b))
        if not self.replace:
            self.available[question] = False
            self.available_b[question_b] = False
            self.asked_a += outcome_a
            self.asked_b += outcome_b
        self.step += 1
        return d

    def end_round(self, questions, outcomes_a, outcomes_b, questions_b=None):
        """The Laplace updates of the round, in draw order, each model with its own answers
        (B's questions are ``questions_b``, by default ``questions``)."""
        questions_b = questions if questions_b is None else questions_b
        for post, qs, outcomes in ((self.posterior_a, questions, outcomes_a),
                                   (self.posterior_b, questions_b, outcomes_b)):
            if post is not None:
                for question, outcome in zip(qs, outcomes):
                    post.update(question, outcome)

    def draw_round(self, policy, size, rng):
        """Draw a round of ``size`` (A's, B's) questions and probabilities from ``policy``
        (:meth:`begin_round`'s output) with ``rng``, successively without replacement
        when sampling without replacement; B's equal A's outside the coupled design."""
        avail_a, avail_b = self.available.copy(), self.available_b.copy()
        qa_, pa_, qb_, pb_ = [], [], [], []
        for _ in range(size):
            if self.coupled:
                q_a = within_round(policy[0], avail_a, self.replace)
                q_b = within_round(policy[1], avail_b, self.replace)
                j_a, j_b = draw_coupled(rng, q_a, q_b)
            else:
                q_a = q_b = within_round(policy, avail_a, self.replace)
                j_a = j_b = int(rng.choice(q_a.size, p=q_a))
            qa_.append(j_a)
            pa_.append(float(q_a[j_a]))
            qb_.append(j_b)
            pb_.append(float(q_b[j_b]))
            if not self.replace:
                avail_a[j_a] = avail_b[j_b] = False
        return qa_, pa_, qb_, pb_

    def table(self):
        return np.array(self.records, dtype=PAIRED_QUERY_DTYPE)


class PairedPAIEstimator(BaseEstimator):
    """Estimate the accuracy difference of two models from the same actively chosen questions.

    See the module docstring for the increments and why their martingale variance is
    exactly unbiased. ``fit(outcomes_a, outcomes_b)`` compares two new models (one
    question each per step, from each model's own policy, maximally coupled so that
    they share the question as often as possible; or, with ``design="shared"``, one
    question asked to both); ``fit(outcomes_a, reference=z_R)`` compares a new model
    with a reference whose outcomes on the whole bank are known.

    Parameters
    ----------
    factor_model : fitted LogisticFactorModel (or LogisticFactorModelCV) or None
        Question factors and the prior shared by both models' factor posteriors.
        ``None``: no predictions; with ``replace=False`` the result is the uniform
        sample mean of the differences with finite-population correction.
    budget : int, default=100
        Steps, each asking one question to each new model (``2 * budget`` answers in
        the two-model design, as many as two independent evaluations of ``budget``
        queries). At least 2; at most N without replacement.
    tau : float in (0, 1], default=0.5
        Weight of the uniform distribution mixed into the policy (bounds the weights).
    policy : {"neyman", "uniform"}, default="neyman"
        ``"neyman"``: the scores described in the module docstring (coupled design: each
        model's own ``sqrt(p (1 - p))``, the policy of ``HybridSampler(tau)``); ``"uniform"``.
    design : {"coupled", "shared"}, default="coupled"
        Two-model design only (ignored with a reference). ``"coupled"``: each model
        draws from its own policy, the two draws maximally coupled (see
        :func:`maximal_coupling`); ``"shared"``: one question from a compromise policy,
        asked to both. On openllm_v1 at 69 steps the coupled interval was narrower than
        two independent evaluations also for unrelated models, where the shared one
        was not (``docs/statistics.md``).
    replace : bool, default=False
        Sample with replacement, or without (Des Raj increments).
    reference_weight : "auto" or float in [0, 1], default="auto"
        Reference design only: ``lambda`` in the prediction
        ``lambda z^R + (1 - lambda) p^A`` of the new model's outcome. ``"auto"`` re-fits it
        each round by least squares on the answers so far (0.5 until two answers);
        ``1`` uses the reference's outcomes alone. Without a factor model it is 1.
    batch_size : int, default=1
        Steps drawn per round (successively without replacement, each model over its
        own questions; the coupled design couples the two within-round laws draw by
        draw); posteriors move between rounds only. Unbiasedness and exactness hold for
        any batch size.
    interval : {"robust-t", "t", "normal"}, default="robust-t"
        Quantile of ``conf_int``, as in :class:`~faqstats.PAIEstimator`.
    random_state : int, Generator or None, default=None

    Attributes
    ----------
    result_ : ComparisonResult
    estimate_ : float
        Estimated ``theta_A - theta_B``.
    std_error_ : float
    estimates_ : tuple of float
        ``(theta_A_hat, theta_B_hat)``.
    n_queries_ : int
        Distinct questions asked (to at least one model in the coupled design).
    queries_ : structured ndarray
        One row per step: ``question`` and ``probability`` (A's question and its draw
        probability; both models' outside the coupled design), ``question_b`` and
        ``probability_b`` (B's; equal to A's outside the coupled design), ``outcome_a``,
        ``outcome_b`` (B's answer to ``question_b``; the reference's outcome in the
        reference design), ``increment_a``, ``increment_b`` and ``increment`` (their
        difference ``d_t``).
    reference_weights_ : ndarray or None
        ``lambda`` used in each round (reference design).

    Examples
    --------
    >>> import faqstats as fq
    >>> from faqstats.compare import PairedPAIEstimator
    >>> bank = fq.make_synthetic_bank(n_models=80, n_questions=200, n_components=3, random_state=0)
    >>> fm = fq.LogisticFactorModel(n_components=3, max_iter=200, random_state=0).fit(bank.history)
    >>> z_a, z_b = bank.new_outcomes[0], bank.new_outcomes[1]
    >>> est = PairedPAIEstimator(fm, budget=40, random_state=0).fit(z_a, z_b)
    >>> low, high = est.conf_int()
    >>> bool(-1 <= low <= est.estimate_ <= high <= 1), est.result_.method
    (True, 'coupled')
    >>> q = est.queries_  # the steps where the coupling gave both models the same question
    >>> 0 < int((q["question"] == q["question_b"]).sum()) <= 40
    True
    >>> shared = PairedPAIEstimator(fm, budget=40, design="shared", random_state=0).fit(z_a, z_b)
    >>> bool((shared.queries_["question"] == shared.queries_["question_b"]).all())
    True
    >>> ref = PairedPAIEstimator(fm, budget=40, random_state=0).fit(z_a, reference=z_b)
    >>> bool(ref.estimates_[1] == z_b.mean())
    True
    """

    def __init__(
        self,
        factor_model=None,
        budget=100,
        tau=0.5,
        policy="neyman",
        design="coupled",
        replace=False,
        reference_weight="auto",
        batch_size=1,
        interval="robust-t",
        random_state=None,
    ):
        self.factor_model = factor_model
        self.budget = budget
        self.tau = tau
        self.policy = policy
        self.design = design
        self.replace = replace
        self.reference_weight = reference_weight
        self.batch_size = batch_size
        self.interval = interval
        self.random_state = random_state

    # -- set-up ------------------------------------------------------------------
    def _bank_size(self):
        if self.factor_model is None:
            return None
        fm = self.factor_model
        check_is_fitted(fm, "best_estimator_" if hasattr(fm, "best_estimator_") else "question_factors_")
        return fm.question_factors_.shape[0]

    def _posterior(self):
        fm = self.factor_model
        return None if fm is None else _FactorPosterior(fm.question_factors_, fm.prior_mean_, fm.prior_cov_)

    def _check_params(self, n_questions):
        check_scalar(self.budget, "budget", kind=numbers.Integral, low=2)
        check_scalar(self.batch_size, "batch_size", kind=numbers.Integral, low=1)
        check_scalar(self.tau, "tau", low=0.0, high=1.0, closed="right")
        if self.policy not in ("neyman", "uniform"):
            raise ValueError(f"policy must be 'neyman' or 'uniform', got {self.policy!r}.")
        if self.design not in ("coupled", "shared"):
            raise ValueError(f"design must be 'coupled' or 'shared', got {self.design!r}.")
        if not isinstance(self.replace, (bool, np.bool_)):
            raise TypeError(f"replace must be True or False, got {self.replace!r}.")
        if self.interval not in ("robust-t", "t", "normal"):
            raise ValueError(f"interval must be 'robust-t', 't' or 'normal', got {self.interval!r}.")
        if not (isinstance(self.reference_weight, str) and self.reference_weight == "auto"):
            check_scalar(self.reference_weight, "reference_weight", low=0.0, high=1.0)
        if not self.replace and self.budget > n_questions:
            raise ValueError(
                f"budget={self.budget} exceeds the {n_questions} questions of the bank; sampling without "
                "replacement can ask each question only once."
            )

    def _check_reference(self, reference, n_questions):
        ref = check_outcome_values(reference, "reference")  # no NaN: the reference is fully known
        if ref.ndim != 1 or (n_questions is not None and ref.size != n_questions):
            raise ValueError(
                f"reference must be a 1-D array with one outcome per question ({n_questions}), got shape {ref.shape}."
            )
        return ref

    def new_run(self, n_questions=None, reference=None):
        """A fresh :class:`PairedRun` for this configuration (used by ``fit`` and by tests)."""
        n_questions = resolve_bank_size(self._bank_size(), n_questions)
        self._check_params(n_questions)
        ref = None if reference is None else self._check_reference(reference, n_questions)
        return PairedRun(
            n_questions,
            self.budget,
            bool(self.replace),
            float(self.tau),
            self.policy,
            posterior_a=self._posterior(),
            posterior_b=None if ref is not None else self._posterior(),
            reference=ref,
            reference_weight=self.reference_weight,
            design=self.design,
        )

    # -- fitting -------------------------------------------------------------------
    def fit(self, outcomes_a, outcomes_b=None, *, reference=None):
        """Ask the chosen questions and estimate ``theta_A - theta_B``.

        Parameters
        ----------
        outcomes_a : array-like of shape (N,) or callable
            The first model's outcomes in [0, 1] (0/1 or graded; NaN where never
            asked is fine), or a function mapping question indices to outcomes.
        outcomes_b : array-like of shape (N,) or callable, optional
            The second new model's outcomes (two-model design).
        reference : array-like of shape (N,), keyword-only, optional
            Fully known outcomes of a reference model (reference design). Give exactly
            one of ``outcomes_b`` and ``reference``.

        Returns
        -------
        self
        """
        if (outcomes_b is None) == (reference is None):
            raise ValueError("Give exactly one of outcomes_b (a second new model) and reference (known outcomes).")
        n_questions = self._bank_size()
        if n_questions is None:
            sized = [x for x in (outcomes_a, outcomes_b, reference) if x is not None and not callable(x)]
            if not sized:
                raise ValueError("Without a factor model the bank size is unknown: pass outcomes as arrays.")
            n_questions = int(np.size(sized[0]))
        oracle_a = _Oracle(outcomes_a, n_questions)
        oracle_b = None if outcomes_b is None else _Oracle(outcomes_b, n_questions)
        run = self.new_run(n_questions, reference=reference)
        rng = check_generator(self.random_state)
        while run.step <= self.budget:
            size = min(self.batch_size, self.budget - run.step + 1)
            # draw the whole round first (it may be answered in parallel), then record it in draw order
            questions, probabilities, questions_b, probabilities_b = run.draw_round(run.begin_round(), size, rng)
            z_a = oracle_a.ask(questions)
            z_b = run.reference[questions] if oracle_b is None else oracle_b.ask(questions_b)
            for row in zip(questions, probabilities, z_a, z_b, questions_b, probabilities_b):
                run.record(*row)
            run.end_round(questions, z_a, z_b, questions_b)
        self._finish(run, n_questions)
        return self

    def _finish(self, run, n_questions):
        table = run.table()
        design = "reference" if run.reference is not None else "coupled" if run.coupled else "paired"
        if self.factor_model is None and not run.replace:
            # both policies uniform over the same questions: the coupled draws always coincide
            if not np.array_equal(table["question"], table["question_b"]):
                raise RuntimeError("internal error: uniform coupled draws differed between the models.")
            design = "paired" if run.reference is None else design
            y = table["outcome_a"] - table["outcome_b"]
            n = y.size
            method, variance_method = f"{design}_sample_mean", "finite-population"
            estimate = float(y.mean())
            var = (1.0 - n / n_questions) * float(y.var(ddof=1)) / n
            est_a = float(table["outcome_a"].mean())
            est_b = float(run.reference.mean()) if run.reference is not None else float(table["outcome_b"].mean())
            if run.reference is not None:
                est_a = est_b + estimate
            increments = y
        else:
            method, variance_method = design, "martingale"
            increments = table["increment"]
            estimate = float(increments.mean())
            var = martingale_variance(increments)
            est_a = float(table["increment_a"].mean())
            # the reference's increments are theta_R up to rounding: report it exactly
            est_b = float(table["increment_b"].mean()) if run.reference is None else float(run.reference.mean())
        if self.interval == "normal":
            df = None
        elif self.interval == "t":
            df = float(len(table) - 1)
        else:
            df = effective_df(increments)
        self.queries_ = table
        self.n_queries_ = int(np.unique(np.r_[table["question"], table["question_b"]]).size)
        self.estimate_ = estimate
        self.std_error_ = float(np.sqrt(var))
        self.estimates_ = (est_a, est_b)
        self.reference_weights_ = None if run.reference is None else np.array(run.weights)
        self.result_ = ComparisonResult(
            estimate=estimate,
            std_error=self.std_error_,
            estimate_a=est_a,
            estimate_b=est_b,
            n_queries=self.n_queries_,
            n_questions=n_questions,
            method=method,
            variance_method=variance_method,
            df=df,
        )

    # -- inference ---------------------------------------------------------------
    def conf_int(self, alpha=0.05, alternative="two-sided"):
        """Confidence interval for ``theta_A - theta_B`` at level ``1 - alpha``, clipped to [-1, 1]."""
        check_is_fitted(self, "result_")
        return self.result_.conf_int(alpha=check_alpha(alpha), alternative=alternative)

    confint = conf_int

    def summary(self, alpha=0.05):
        check_is_fitted(self, "result_")
        return self.result_.summary(alpha)


def compare(outcomes_a, outcomes_b=None, *, reference=None, factor_model=None, budget=100, **params):
    """Compare two models on the same chosen questions; returns a :class:`ComparisonResult`.

    Shorthand for ``PairedPAIEstimator(factor_model, budget=budget, **params).fit(outcomes_a,
    outcomes_b, reference=reference).result_``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> z_a = (rng.random(400) < 0.7).astype(float)
    >>> z_b = np.where(rng.random(400) < 0.8, z_a, 1 - z_a)  # agrees with A on ~80% of questions
    >>> res = compare(z_a, z_b, budget=100, random_state=0)
    >>> res.method, bool(abs(res.estimate - (z_a.mean() - z_b.mean())) < 4 * res.std_error)
    ('paired_sample_mean', True)
    """
    est = PairedPAIEstimator(factor_model, budget=budget, **params)
    return est.fit(outcomes_a, outcomes_b, reference=reference).result_
