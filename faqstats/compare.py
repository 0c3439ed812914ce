"""Paired comparison of two models on the same actively chosen questions.

The estimand is the accuracy difference ``delta = theta_A - theta_B`` on the whole bank.
Each round draws questions ``I ~ q_t`` and asks them to *both* models, so the two
Pro-Active Inference increments share the draw and the difference

    d_t = phi^A_t - phi^B_t = [ base_t + (y_I - r_I) / q_t(I) ] / N,    y = z^A - z^B,

is the PAI increment of the differenced outcome ``y`` with the predicted difference
``r = p^A - p^B`` (``base_t`` is ``sum_j r_j`` with replacement and
``sum_{asked} y + sum_{j in R_{t-1}} r_j`` without, the Des Raj form). As for one model,
``E[d_t | F_{t-1}] = delta`` for any predictable policy and predictions, so
``delta_hat = mean_t d_t`` is unbiased, the ``d_t - delta`` form a martingale difference
sequence and ``V_hat = sum_t (d_t - delta_hat)^2 / (n (n - 1))`` is exactly unbiased for
``Var(delta_hat)``. Pairing pays because the two models' surprises on a shared
question are positively correlated (hard questions are hard for both), which the
difference cancels; two independent evaluations add their variances instead.

Two designs:

* **two new models** (``fit(outcomes_a, outcomes_b)``): each model keeps its own factor
  posterior, updated with its own answers; the policy mixes ``tau`` of uniform with the
  Neyman-like score ``sqrt(p^A (1 - p^A) + p^B (1 - p^B))``, the standard deviation of
  ``z^A - z^B`` if both were independent Bernoulli draws with the current predictions.
* **a new model against a fully known reference** (``fit(outcomes_a, reference=z_R)``):
  ``theta_R`` is known, and the reference's outcomes serve as the control for the new
  model's: the prediction of ``z^A_j`` is ``lambda z^R_j + (1 - lambda) p^A_j`` (the
  reference itself when ``lambda = 1``), with ``lambda`` fixed or re-fitted each round by
  least squares on the answers so far (predictable, so validity is untouched). The
  policy score is the root mean squared error of that prediction under the factor
  model, ``sqrt(p^A (1 - p^A) + (p^A - prediction)^2)``: for ``lambda = 1`` the square root of
  the predicted probability that the new model disagrees with the reference.

Without a factor model and with sampling without replacement both designs reduce to
the uniform sample mean of the differences with finite-population correction.
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
from .estimator import _FactorPosterior, _Oracle, draw_question, martingale_variance, within_round

__all__ = ["PairedPAIEstimator", "ComparisonResult", "compare"]

PAIRED_QUERY_DTYPE = np.dtype(
    [
        ("question", np.int64),
        ("probability", np.float64),
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
        Distinct questions asked (each to both models, or to the new model only).
    n_questions : int
    method : {"paired", "reference", "paired_sample_mean", "reference_sample_mean"}
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


class PairedRun:
    """State of one paired run; tests copy it (``copy.deepcopy``) to enumerate paths.

    A round starts with :meth:`begin_round`, which freezes the round's predictions and
    returns its policy ``q``; draws inside the round use :func:`~faqstats.estimator.within_round`;
    :meth:`record` returns the difference increment ``d_t``; :meth:`end_round` applies the
    Laplace updates (each model with its own answers).
    """

    def __init__(self, n_questions, budget, replace, tau, policy, posterior_a=None, posterior_b=None,
                 reference=None, reference_weight="auto"):
        self.n_questions = n_questions
        self.budget = budget
        self.replace = replace
        self.tau = tau
        self.policy = policy
        self.posterior_a = posterior_a
        self.posterior_b = posterior_b
        self.reference = reference
        self.reference_weight = reference_weight
        self.available = np.ones(n_questions, dtype=bool)
        self.asked_a = 0.0  # sums of the outcomes of distinct asked questions (without replacement)
        self.asked_b = 0.0
        self.records = []
        self.weights = []  # lambda of each round (reference design)
        self.answers = {}  # question -> (z_a, z_b) of the distinct answered questions
        self.step = 1
        self._pred_a = self._pred_b = None

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

    def begin_round(self):
        """Freeze the round's predictions and return its policy ``q`` (zero where unavailable)."""
        avail = self.available
        n_avail = int(avail.sum())
        if n_avail == 0:
            raise RuntimeError("No question left to ask: the bank is exhausted.")
        p_a = self._model_predictions(self.posterior_a)
        if self.reference is None:
            p_b = self._model_predictions(self.posterior_b)
            self._pred_a = np.zeros(self.n_questions) if p_a is None else p_a
            self._pred_b = np.zeros(self.n_questions) if p_b is None else p_b
            score = None if p_a is None else np.sqrt(p_a * (1 - p_a) + p_b * (1 - p_b))
        else:
            lam = self._weight(p_a)
            self.weights.append(lam)
            ref = self.reference
            self._pred_a = ref if p_a is None else lam * ref + (1.0 - lam) * p_a
            self._pred_b = ref
            score = None if p_a is None else np.sqrt(p_a * (1 - p_a) + (p_a - self._pred_a) ** 2)
        uniform = avail / n_avail
        if self.policy == "uniform" or score is None:
            return uniform
        s = np.where(avail, score, 0.0)
        total = s.sum()
        if not total > 0:
            return uniform
        return self.tau * uniform + (1.0 - self.tau) * s / total

    def _base(self, pred, asked):
        return pred.sum() if self.replace else asked + pred[self.available].sum()

    def record(self, question, probability, outcome_a, outcome_b):
        """Record both answers to ``question`` (drawn with ``probability``); return ``d_t``."""
        n = self.n_questions
        phi_a = (self._base(self._pred_a, self.asked_a) + (outcome_a - self._pred_a[question]) / probability) / n
        phi_b = (self._base(self._pred_b, self.asked_b) + (outcome_b - self._pred_b[question]) / probability) / n
        d = phi_a - phi_b
        self.records.append((question, probability, outcome_a, outcome_b, phi_a, phi_b, d))
        self.answers[int(question)] = (float(outcome_a), float(outcome_b))
        if not self.replace:
            self.available[question] = False
            self.asked_a += outcome_a
            self.asked_b += outcome_b
        self.step += 1
        return d

    def end_round(self, questions, outcomes_a, outcomes_b):
        """The Laplace updates of the round, in draw order, each model with its own answers."""
        for post, outcomes in ((self.posterior_a, outcomes_a), (self.posterior_b, outcomes_b)):
            if post is not None:
                for question, outcome in zip(questions, outcomes):
                    post.update(question, outcome)

    def table(self):
        return np.array(self.records, dtype=PAIRED_QUERY_DTYPE)


class PairedPAIEstimator(BaseEstimator):
    """Estimate the accuracy difference of two models from the same actively chosen questions.

    See the module docstring for the increments and why their martingale variance is
    exactly unbiased. ``fit(outcomes_a, outcomes_b)`` compares two new models (each
    chosen question is asked to both); ``fit(outcomes_a, reference=z_R)`` compares a new
    model with a reference whose outcomes on the whole bank are known.

    Parameters
    ----------
    factor_model : fitted LogisticFactorModel (or LogisticFactorModelCV) or None
        Question factors and the prior shared by both models' factor posteriors.
        ``None``: no predictions; with ``replace=False`` the result is the uniform
        sample mean of the differences with finite-population correction.
    budget : int, default=100
        Questions to ask (each is asked to both new models: ``2 * budget`` answers in
        the two-model design). At least 2; at most N without replacement.
    tau : float in (0, 1], default=0.5
        Weight of the uniform distribution mixed into the policy (bounds the weights).
    policy : {"neyman", "uniform"}, default="neyman"
        ``"neyman"``: the score described in the module docstring; ``"uniform"``.
    replace : bool, default=False
        Sample with replacement, or without (Des Raj increments).
    reference_weight : "auto" or float in [0, 1], default="auto"
        Reference design only: ``lambda`` in the prediction
        ``lambda z^R + (1 - lambda) p^A`` of the new model's outcome. ``"auto"`` re-fits it
        each round by least squares on the answers so far (0.5 until two answers);
        ``1`` uses the reference's outcomes alone. Without a factor model it is 1.
    batch_size : int, default=1
        Questions drawn per round (successively without replacement); posteriors move
        between rounds only. Unbiasedness and exactness hold for any batch size.
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
    queries_ : structured ndarray
        One row per draw: ``question``, ``probability``, ``outcome_a``, ``outcome_b``
        (the reference's outcome in the reference design), ``increment_a``,
        ``increment_b`` and ``increment`` (their difference ``d_t``).
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
    >>> bool(-1 <= low <= est.estimate_ <= high <= 1)
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
        n_fm = self._bank_size()
        n_questions = n_fm if n_questions is None else n_questions
        if n_questions is None:
            raise ValueError("Without a factor model the bank size comes from the outcomes; pass n_questions.")
        if n_fm is not None and n_questions != n_fm:
            raise ValueError(
                f"outcomes cover {n_questions} questions but the factor model was fitted on {n_fm} questions."
            )
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
            q_round = run.begin_round()
            available = run.available.copy()
            questions, probabilities = [], []
            for _ in range(size):
                q = within_round(q_round, available, run.replace)
                question = draw_question(rng, q)
                questions.append(question)
                probabilities.append(float(q[question]))
                if not run.replace:
                    available[question] = False
            z_a = oracle_a.ask(questions)
            z_b = run.reference[questions] if oracle_b is None else oracle_b.ask(questions)
            for question, probability, a, b in zip(questions, probabilities, z_a, z_b):
                run.record(question, probability, a, b)
            run.end_round(questions, z_a, z_b)
        self._finish(run, n_questions)
        return self

    def _finish(self, run, n_questions):
        table = run.table()
        design = "paired" if run.reference is None else "reference"
        if self.factor_model is None and not run.replace:
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
        self.n_queries_ = int(np.unique(table["question"]).size)
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
