"""Paired comparison of two models on actively chosen questions: ``theta_A - theta_B`` from the increments
``d_t = phi^A_t - phi^B_t`` of a coupled, shared or known-reference design (docs/statistics.md, "Paired comparisons").
"""

import numpy as np
from sklearn.base import BaseEstimator

from ._engine import Oracle, QueryLoop, SequentialRun
from ._inference import fpc_mean, interval_df, pai_inference
from ._validation import check_generator, check_outcome_values, check_scalar
from .design import check_design, resolve_bank_size, sample_mean_design
from .estimator import PAIResultMixin
from .loop_setup import predictor_for
from .posterior import PosteriorView
from .predictor import resolve_predictor_keyword
from .results import ComparisonResult
from .sampling import HybridSampler, PolicyState, Sampler, UniformSampler, draw_from, within_round

__all__ = ["PairedPAIEstimator", "ComparisonResult", "compare", "maximal_coupling", "draw_coupled"]

PAIRED_QUERY_DTYPE = np.dtype([("question", np.int64), ("probability", np.float64), ("question_b", np.int64),
                               ("probability_b", np.float64), ("outcome_a", np.float64), ("outcome_b", np.float64),
                               ("increment_a", np.float64), ("increment_b", np.float64), ("increment", np.float64)])


def maximal_coupling(q_a, q_b):
    """The maximal coupling of ``q_a`` and ``q_b``: ``(P(J_A = J_B) = w, law of the common question
    min(q_a, q_b) / w (None if w = 0), normalised (q_a - q_b)_+ and (q_b - q_a)_+ (None if w = 1))``."""
    q_a, q_b = np.asarray(q_a, dtype=float), np.asarray(q_b, dtype=float)
    m = np.minimum(q_a, q_b)
    r_a, r_b = q_a - m, q_b - m  # exactly zero where the two agree
    w, tv_a, tv_b = m.sum(), r_a.sum(), r_b.sum()
    if not (tv_a > 0 and tv_b > 0):  # equal (possibly up to rounding): always the same question
        return 1.0, m / w, None, None
    shared = m / w if w > 0 else None
    return float(min(w, 1.0)), shared, r_a / tv_a, r_b / tv_b


def draw_coupled(rng, q_a, q_b):
    """Draw ``(J_A, J_B)`` from the maximal coupling of ``q_a`` and ``q_b`` (:func:`maximal_coupling`)."""
    p_shared, shared, r_a, r_b = maximal_coupling(q_a, q_b)
    if r_a is None or rng.random() < p_shared:
        j = draw_from(shared, rng)[0]
        return j, j
    return draw_from(r_a, rng)[0], draw_from(r_b, rng)[0]


class _DifferenceView(PosteriorView):
    """The shared design's policy state, with the difference's oracle score ``sqrt(s_A^2 + s_B^2)``."""

    __slots__ = ("_b",)

    def __init__(self, a, b):
        super().__init__(a)
        self._b = b
        self.question_factors = self.mean = self.cov = None

    def oracle_scores(self):
        return np.sqrt(PosteriorView.oracle_scores(self) ** 2 + self._b.view().oracle_scores() ** 2)


class _ReferencePredictions:
    """The reference design's predictor of A's outcomes, ``lambda z^R + (1 - lambda) p^A``."""

    def __init__(self, model, reference, weight, informative):
        self.model, self.reference, self.weight_param, self.informative = model, reference, weight, informative
        self.answers = {}  # question -> A's answer
        self._refresh()

    def _weight(self):
        if not self.informative:
            return 1.0
        if self.weight_param != "auto":
            return float(self.weight_param)
        if len(self.answers) < 2:
            return 0.5
        idx = np.fromiter(self.answers, dtype=np.int64)
        z_a = np.fromiter(self.answers.values(), dtype=float)
        p_a = self.model.predictions
        x = self.reference[idx] - p_a[idx]
        sxx = float(x @ x)
        return 0.5 if sxx <= 0 else float(np.clip(x @ (z_a - p_a[idx]) / sxx, 0.0, 1.0))

    def _refresh(self):
        self.weight = lam = self._weight()
        p = self.model.predictions
        pred = lam * self.reference + (1.0 - lam) * p
        # the prediction's root mean squared error under the factor model (none without one)
        score = np.sqrt(p * (1.0 - p) + (p - pred) ** 2) if self.informative else np.zeros_like(p)
        self.predictions, self.oracle_scores = pred, score
        for a in (pred, score):
            a.flags.writeable = False

    def update(self, question, outcome):
        self.answers[int(question)] = float(outcome)
        self.model.update(question, outcome)
        self._refresh()

    def view(self):
        return PosteriorView(self)


class PairedRun:
    """One paired run: a :class:`~faqstats._engine.SequentialRun` per new model; a draw's question,
    probability and outcome are pairs (A's, B's)."""

    design = "paired"

    def __init__(self, sampler, predictor_a, predictor_b, n_questions, budget, design="coupled", reference=None):
        if design not in ("shared", "coupled"):
            raise ValueError(f"design must be 'coupled' or 'shared', got {design!r}.")
        self.sampler = sampler
        self.reference = reference
        self.kind = "reference" if reference is not None else design  # a reference is never asked
        self.a = SequentialRun(sampler, predictor_a, n_questions, budget)
        self.b = None if reference is not None else SequentialRun(sampler, predictor_b, n_questions, budget)
        self.theta_reference = None if reference is None else float(reference.mean())
        self.n_questions, self.budget, self.replace = self.a.n_questions, self.a.budget, self.a.replace
        self.records = []
        self.weights = []  # lambda of each round (reference design)

    coupled = property(lambda self: self.kind == "coupled")
    step = property(lambda self: self.a.step)
    done = property(lambda self: self.a.done)
    progress = property(lambda self: self.a.progress)

    def round_size(self, requested):
        return self.a.round_size(requested)

    def law(self):
        """The round's policy: ``(q_a, q_b)`` (coupled design) or ``q``."""
        if self.kind == "coupled":
            return self.a.law(), self.b.law()
        if self.kind == "reference":
            self.weights.append(self.a.predictor.weight)
            return self.a.law()
        state = self.a.state()
        view = _DifferenceView(self.a.predictor, self.b.predictor)
        mean_prediction = 0.5 * (state.predictions + self.b.predictions)
        state = PolicyState(mean_prediction, state.available, state.step, state.budget, posterior=view,
                            asked=state.asked)
        return self.sampler.probabilities(state)

    def draw_round(self, rng, size, keep_laws=False):
        """``size`` draws ``((j_a, j_b), (q_a(j_a), q_b(j_b)), None)`` from the round's policy."""
        laws = self.law()
        avail_a = self.a.available.copy()
        avail_b = avail_a if self.b is None else self.b.available.copy()
        draws = []
        for _ in range(size):
            if self.coupled:
                q_a = within_round(laws[0], avail_a, self.replace)
                q_b = within_round(laws[1], avail_b, self.replace)
                j_a, j_b = draw_coupled(rng, q_a, q_b)
            else:
                q_a = q_b = within_round(laws, avail_a, self.replace)
                j_a = j_b = draw_from(q_a, rng)[0]
            draws.append(((j_a, j_b), (float(q_a[j_a]), float(q_b[j_b])), None))
            if not self.replace:
                avail_a[j_a] = avail_b[j_b] = False
        return draws

    def record(self, question, probability, outcome):
        """Record A's answer to ``question[0]`` and B's to ``question[1]``; return ``d_t``."""
        (j_a, j_b), (p_a, p_b), (z_a, z_b) = question, probability, outcome
        if not self.coupled and (j_a != j_b or p_a != p_b):
            raise ValueError("Outside the coupled design both models answer the same question.")
        phi_a = self.a.record(j_a, p_a, z_a)
        phi_b = self.theta_reference if self.b is None else self.b.record(j_b, p_b, z_b)
        d = phi_a - phi_b
        self.records.append((j_a, p_a, j_b, p_b, z_a, z_b, phi_a, phi_b, d))
        return d

    def end_round(self, questions, outcomes):
        """Each model's predictor learns its own answers of the round."""
        self.a.end_round([q[0] for q in questions], [z[0] for z in outcomes])
        if self.b is not None:
            self.b.end_round([q[1] for q in questions], [z[1] for z in outcomes])

    def table(self):
        return np.array(self.records, dtype=PAIRED_QUERY_DTYPE)


class PairedPAIEstimator(PAIResultMixin, BaseEstimator):
    """Estimate the accuracy difference of two models from the same actively chosen questions.

    ``fit(outcomes_a, outcomes_b)`` compares two new models, ``fit(outcomes_a, reference=z_R)`` a new
    model with a reference whose outcomes on the whole bank are known.

    Parameters
    ----------
    predictor : fitted Predictor or None
        As in :class:`~faqstats.PAIEstimator`; each model gets its own posterior.
    sampler : Sampler, default=HybridSampler() (UniformSampler() without a predictor)
        Any sequential sampler, applied to each model (coupled), to the pair (shared) or the reference design.
    budget : int, default=100
        Steps, each asking one question to each new model.
    design : {"coupled", "shared"}, default="coupled"
        Two-model design only: maximally coupled draws from each model's policy, or one question for both.
    reference_weight : "auto" or float in [0, 1], default="auto"
        Reference design only: ``lambda`` in the prediction ``lambda z^R + (1 - lambda) p^A``;
        ``"auto"`` refits it each round by least squares (0.5 until two answers).
    batch_size, interval, random_state, **deprecated
        As in :class:`~faqstats.PAIEstimator`.

    Attributes
    ----------
    result_ : ComparisonResult
    estimate_, std_error_ : float
        Estimated ``theta_A - theta_B`` and its standard error.
    estimates_ : tuple of float
        ``(theta_A_hat, theta_B_hat)``.
    n_queries_ : int
        Distinct questions asked.
    queries_ : structured ndarray
        One row per step: ``question``, ``probability``, ``question_b``, ``probability_b``,
        ``outcome_a``, ``outcome_b``, ``increment_a``, ``increment_b`` and ``increment`` (``d_t``).
    reference_weights_ : ndarray or None
        ``lambda`` used in each round (reference design).

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=80, n_questions=200, n_components=3, random_state=0)
    >>> fm = fq.LogisticFactorModel(n_components=3, max_iter=200, random_state=0).fit(bank.history)
    >>> z_a, z_b = bank.new_outcomes[0], bank.new_outcomes[1]
    >>> est = PairedPAIEstimator(fm, budget=40, random_state=0).fit(z_a, z_b)
    >>> low, high = est.conf_int()
    >>> bool(low <= est.estimate_ <= high), est.result_.method
    (True, 'coupled')
    >>> ref = PairedPAIEstimator(fm, budget=40, random_state=0).fit(z_a, reference=z_b)
    >>> bool(ref.estimates_[1] == z_b.mean())
    True
    """

    def __init__(self, predictor=None, sampler=None, budget=100, design="coupled", reference_weight="auto",
                 batch_size=1, interval="robust-t", random_state=None, **deprecated):
        self.predictor = resolve_predictor_keyword(predictor, deprecated, "PairedPAIEstimator")
        self.sampler = sampler
        self.budget = budget
        self.design = design
        self.reference_weight = reference_weight
        self.batch_size = batch_size
        self.interval = interval
        self.random_state = random_state

    def new_loop(self, n_questions=None, reference=None):
        """A fresh :class:`~faqstats._engine.QueryLoop` over a :class:`PairedRun` (for ``fit`` and tests).

        Parameters
        ----------
        n_questions : int or None, default=None
            The bank size (``None``: the predictor's).
        reference : array-like of shape (N,) or None, default=None

        Returns
        -------
        faqstats._engine.QueryLoop
        """
        n_questions = resolve_bank_size(self.bank_size(), n_questions)
        sampler = self.sampler
        if sampler is None:
            sampler = UniformSampler() if self.predictor is None else HybridSampler()
        if not isinstance(sampler, Sampler):
            raise TypeError(f"sampler must be a sequential faqstats Sampler, got {type(sampler).__name__}.")
        sampler = check_design(sampler, self.predictor, n_questions, self.budget, self.batch_size, self.interval)
        if not (isinstance(self.reference_weight, str) and self.reference_weight == "auto"):
            check_scalar(self.reference_weight, "reference_weight", low=0.0, high=1.0)
        predictor_a = predictor_for(self.predictor, n_questions)
        ref = None
        if reference is not None:
            ref = check_outcome_values(reference, "reference")  # no NaN: the reference is fully known
            if ref.ndim != 1 or ref.size != n_questions:
                raise ValueError(f"reference must be a 1-D array with one outcome per question ({n_questions}), "
                                 f"got shape {ref.shape}.")
            predictor_a = _ReferencePredictions(predictor_a, ref, self.reference_weight, self.predictor is not None)
        predictor_b = None if ref is not None else predictor_for(self.predictor, n_questions)
        run = PairedRun(sampler, predictor_a, predictor_b, n_questions, self.budget, self.design, ref)
        return QueryLoop(run, batch_size=self.batch_size)

    def fit(self, outcomes_a, outcomes_b=None, *, reference=None):
        """Ask the chosen questions and estimate ``theta_A - theta_B``.

        Parameters
        ----------
        outcomes_a : array-like of shape (N,) or callable
            The first model's outcomes, as in :meth:`PAIEstimator.fit`.
        outcomes_b : array-like of shape (N,) or callable, optional
            The second new model's outcomes (two-model design).
        reference : array-like of shape (N,), keyword-only, optional
            Fully known outcomes of a reference model. Give exactly one of ``outcomes_b`` and ``reference``.

        Returns
        -------
        self
        """
        if (outcomes_b is None) == (reference is None):
            raise ValueError("Give exactly one of outcomes_b (a second new model) and reference (known outcomes).")
        loop = self.new_loop(self._bank_size_of(outcomes_a, outcomes_b, reference), reference=reference)
        run = loop.run
        oracle_a = Oracle(outcomes_a, run.n_questions)
        oracle_b = None if outcomes_b is None else Oracle(outcomes_b, run.n_questions)
        rng = check_generator(self.random_state)
        while not loop.done:
            # draw the whole round first (it may be answered in parallel), then record it in draw order
            questions = [d.question for d in loop.draw_round(rng)]
            z_a = oracle_a.ask([q[0] for q in questions])
            z_b = run.reference[[q[1] for q in questions]] if oracle_b is None else oracle_b.ask(
                [q[1] for q in questions])
            for pair in zip(z_a, z_b):
                loop.record(pair)
        self._set_result(run)
        return self

    def _set_result(self, run):
        table = run.table()
        n_questions = run.n_questions
        design = {"reference": "reference", "coupled": "coupled", "shared": "paired"}[run.kind]
        if sample_mean_design(self.predictor, run.sampler):
            # both policies uniform over the same questions: the coupled draws always coincide
            design = "paired" if run.reference is None else design
            increments = table["outcome_a"] - table["outcome_b"]
            method, variance_method = f"{design}_sample_mean", "finite-population"
            estimate, var = fpc_mean(increments, n_questions)
            df = interval_df(self.interval, increments)
            est_b = run.theta_reference if run.reference is not None else float(table["outcome_b"].mean())
            est_a = est_b + estimate if run.reference is not None else float(table["outcome_a"].mean())
        else:
            method, increments = design, table["increment"]
            # without replacement each model has N - t + 1 questions unasked at draw t: the same weights
            # for the difference and for each model, so that estimate_a - estimate_b = estimate
            without = None if run.replace else n_questions
            estimate, var, df, variance_method = pai_inference(increments, interval=self.interval, n_questions=without)
            est_a = pai_inference(table["increment_a"], n_questions=without)[0]
            # the reference's increments are theta_R: report it exactly
            est_b = pai_inference(table["increment_b"], n_questions=without)[0] if run.reference is None \
                else run.theta_reference
        self.queries_ = table
        self.n_queries_ = int(np.unique(np.r_[table["question"], table["question_b"]]).size)
        self.estimate_, self.std_error_, self.estimates_ = float(estimate), float(np.sqrt(var)), (est_a, est_b)
        self.reference_weights_ = None if run.reference is None else np.array(run.weights)
        self.result_ = ComparisonResult(self.estimate_, self.std_error_, est_a, est_b, self.n_queries_, n_questions,
                                        method, variance_method, df=df, interval_rule=self.interval)


def compare(outcomes_a, outcomes_b=None, *, reference=None, predictor=None, budget=100, **params):
    """Compare two models on the same chosen questions: ``PairedPAIEstimator(...).fit(...).result_``.

    Parameters
    ----------
    outcomes_a, outcomes_b, reference : array-like of shape (N,) or callable
        As in :meth:`PairedPAIEstimator.fit`.
    predictor, budget, **params
        As in :class:`PairedPAIEstimator`.

    Returns
    -------
    ComparisonResult

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> z_a, z_b = (rng.random((2, 400)) < [[0.7], [0.6]]).astype(float)
    >>> res = compare(z_a, z_b, budget=100, random_state=0)
    >>> res.method, bool(abs(res.estimate - (z_a.mean() - z_b.mean())) < 4 * res.std_error)
    ('paired_sample_mean', True)
    """
    est = PairedPAIEstimator(predictor, budget=budget, **params)
    return est.fit(outcomes_a, outcomes_b, reference=reference).result_
