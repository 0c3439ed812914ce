"""Pro-Active Inference: estimate a new model's accuracy from an actively chosen set of queries.

:class:`PAIEstimator` runs the query loop against an array of outcomes or a callable and reports
the mean of the increments with an exactly unbiased variance (``docs/statistics.md``, "Increments").
"""

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ._engine import ClusterRun, Oracle
from ._inference import martingale_variance, paper_variance, weighted_martingale
from ._progress import progress_bar
from ._validation import check_generator
from .design import EstimatorParameters, bank_size, outcomes_bank_size, resolve_bank_size
from .loop_setup import answer_round, new_loop
from .predictor import resolve_predictor_keyword
from .run_results import confidence_rows, group_results_of, result_of
from .selection import select_configuration

__all__ = ["PAIEstimator", "martingale_variance", "paper_variance", "resolve_bank_size", "weighted_martingale"]


_UNSET = object()  # predictor= not given to set_params


class PAIResultMixin:
    """What both estimators share: the bank size, the predictor's old name, ``conf_int`` and ``summary``."""

    def bank_size(self):
        """Questions of the predictor's bank, or ``None`` without a predictor."""
        return bank_size(self.predictor)

    def _bank_size_of(self, *outcomes):
        """The predictor's bank size, or without one the size of the first array among ``outcomes``."""
        return outcomes_bank_size(self.predictor, outcomes)

    @property
    def factor_model(self):
        """The ``predictor`` (its old name)."""
        return self.predictor

    @factor_model.setter
    def factor_model(self, value):
        self.predictor = value

    def set_params(self, **params):
        """Set parameters (scikit-learn's ``set_params``; ``factor_model`` is ``predictor``'s old name).

        Parameters
        ----------
        **params

        Returns
        -------
        self
        """
        if "factor_model" in params:
            params = dict(params)
            old = {"factor_model": params.pop("factor_model")}
            params["predictor"] = resolve_predictor_keyword(params.pop("predictor", _UNSET), old,
                                                            f"{type(self).__name__}.set_params", _UNSET)
        return super().set_params(**params)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # only the asked outcomes are read: NaN elsewhere is fine
        tags.input_tags.positive_only = True  # outcomes are in [0, 1]
        return tags

    def conf_int(self, alpha=0.05, alternative="two-sided"):
        """The ``result_``'s ``conf_int``."""
        check_is_fitted(self, "result_")
        return self.result_.conf_int(alpha=alpha, alternative=alternative)

    confint = conf_int

    def summary(self, alpha=0.05):
        """The ``result_``'s summary table."""
        check_is_fitted(self, "result_")
        return self.result_.summary(alpha)


class PAIEstimator(PAIResultMixin, EstimatorParameters, BaseEstimator):
    """Estimate a new model's accuracy on a bank from a small, actively chosen set of queries.

    Parameters
    ----------
    predictor : fitted Predictor or None
        Supplies the new model's posterior (e.g. :class:`LogisticFactorModel`); ``None``: zero predictions.
    sampler : Sampler or StreamSampler, default=HybridSampler()
        The sampling policy. ``sampler.replace`` chooses with/without replacement.
    budget : int, default=100
        Number of queries (expected labels for ``BernoulliAIPW``; with clusters, cluster draws).
    variance : {"martingale", "paper"}, default="martingale"
        The exactly unbiased martingale variance, or the paper's closed form (with replacement only).
    interval : {"robust-t", "t", "normal"}, IntervalRule or a registered name, default="robust-t"
        Quantile of the interval ``estimate -/+ c se`` (user guide, "Intervals").
    batch_size : int, default=1
        Questions drawn per round; the posterior learns between rounds only. Ignored by ``BernoulliAIPW``.
    stop_when_width : float in (0, 1] or None, default=None
        Stop once the anytime-valid 95% confidence sequence is at most this wide (and report its interval).
    confidence_sequence : bool or float, default=False
        Also track a :class:`~faqstats.confseq.BettingConfidenceSequence` (``True``: 95%, or ``alpha``).
    step_weights : array-like of shape (>= budget,) or None, default=None
        Increment weights fixed before the run (:func:`~faqstats.learn_step_weights`; user guide).
    random_state : int, Generator or None, default=None
        Seeds every draw.
    verbose : bool, default=False
        Show a progress bar over queries.
    dtype : {"float64", "float32"}, default="float64"
        Precision of the predictions recomputed after every answer (float32: faster on large banks).
    predict_every : int, default=1
        Recompute the predictions after every ``predict_every``-th answer only (still exactly unbiased).
    estimand : {"micro", "macro"}, array-like of shape (N,) or Estimand, default="micro"
        The bank's accuracy, the mean of the groups', or a mean with question weights (user guide).
    min_group_share : float in [0, 1), default=0.0
        With ``groups``: this share of the policy (or, with ``stratify``, of the budget) is spread evenly over groups.
    stratify : bool, default=False
        With ``groups``: a fixed number of draws per group (:func:`~faqstats.estimands.stratified_allocation`).
    budget_cost : float > 0 or None, default=None
        A budget in cost units (with ``fit(..., costs=)``): ``floor(budget_cost / E_q1[cost])`` draws.
    cluster_score : {"root-sum-square", "sum"}, default="root-sum-square"
        With ``fit(..., clusters=)``: how a cluster's score is made from its questions' scores.
    **deprecated
        ``factor_model``: the old name of ``predictor`` (accepted with a ``FutureWarning``).

    Attributes
    ----------
    result_ : AccuracyResult
    estimate_, std_error_ : float
    group_results_ : GroupResults or None
        With ``fit(..., groups=)``: every group's estimate, standard error and interval.
    n_queries_ : int
        Distinct questions answered.
    queries_ : structured ndarray
        One row per draw (with clusters, per cluster draw): question, probability, outcome, increment, ...
    cluster_labels_ : ndarray or None
        With ``fit(..., clusters=)``: the sorted cluster ids (``queries_["cluster"]`` indexes them).
    posterior_mean_, posterior_cov_ : ndarray or None
        The new model's factor posterior after the last answer.
    confidence_sequence_ : ndarray of shape (n_rounds, 3) or None
        ``(queries so far, low, high)`` after each round.
    stop_reason_ : {"budget", "width"}
    cost_spent_, cost_per_draw_ : float or None
        With costs: the summed cost of the questions asked, and ``E_q1[cost]`` with ``budget_cost``.

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=80, n_questions=200, n_components=3, random_state=0)
    >>> fm = fq.LogisticFactorModel(n_components=3, max_iter=300, random_state=0).fit(bank.history)
    >>> est = fq.PAIEstimator(fm, fq.HybridSampler(tau=0.25), budget=40, random_state=0).fit(bank.new_outcomes[0])
    >>> low, high = est.confint(alpha=0.05)
    >>> 0 <= low <= est.estimate_ <= high <= 1
    True
    """

    @classmethod
    def from_history(cls, history, budget, *, random_state=0, **options):
        """An estimator configured from the history alone (:func:`faqstats.configure_from_history`).

        Parameters
        ----------
        history : array-like of shape (n_models, N)
            Earlier models' outcomes (NaN = not observed).
        budget : int
            Queries the estimator will make.
        random_state : int, Generator or None, default=0
            Seeds the configuration (0 for ``None`` or a Generator) and the estimator.
        **options
            Keyword arguments of :func:`~faqstats.configure_from_history`.

        Returns
        -------
        PAIEstimator
            Unfitted.

        Examples
        --------
        >>> import faqstats as fq
        >>> bank = fq.make_synthetic_bank(n_models=120, n_questions=80, n_components=2, random_state=0)
        >>> est = fq.PAIEstimator.from_history(bank.history, budget=20, n_runs=100, random_state=0)
        >>> est.fit(bank.new_outcomes[0]).n_queries_, est.random_state
        (20, 0)
        """
        seed = 0 if random_state is None or isinstance(random_state, np.random.Generator) else random_state
        return cls(**select_configuration(history, budget, random_state=seed, **options).params).set_params(
            random_state=random_state)

    def fit(self, outcomes, y=None, *, groups=None, costs=None, clusters=None):
        """Run the query loop against ``outcomes`` and estimate the accuracy.

        Parameters
        ----------
        outcomes : array-like of shape (N,) or callable
            The new model's outcomes in [0, 1] (only the asked entries are read), or a function
            mapping an integer array of question indices to their outcomes (called once per round).
        y : None
            Ignored (scikit-learn's signature).
        groups : array-like of shape (N,) or None
            A label per question: ``group_results_`` then holds every group's estimate and interval.
        costs : array-like of shape (N,) or None
            A positive cost per question: scores are weighed by ``1 / sqrt(cost)`` and
            ``cost_spent_`` reports the spend (docs/statistics.md, "Cost budgets").
        clusters : array-like of shape (N,) or None
            A cluster id per question: every draw asks a whole cluster and the interval allows for
            answers that move together (docs/statistics.md, "Clusters and repeated samples").

        Returns
        -------
        self

        Examples
        --------
        Four questions per passage: ask a passage at a time.

        >>> import numpy as np
        >>> import faqstats as fq
        >>> bank = fq.make_synthetic_bank(n_models=80, n_questions=200, n_components=3, random_state=0)
        >>> fm = fq.LogisticFactorModel(n_components=3, max_iter=300, random_state=0).fit(bank.history)
        >>> est = fq.PAIEstimator(fm, budget=10, random_state=0).fit(bank.new_outcomes[0], clusters=np.arange(200) // 4)
        >>> est.n_queries_, len(est.queries_), est.result_.method  # 10 passages of 4 questions
        (40, 10, 'pai-cluster')
        """
        n_questions = self._bank_size_of(outcomes)
        oracle = Oracle(outcomes, n_questions)
        rng = check_generator(self.random_state)
        loop = new_loop(self, n_questions, rng, groups=groups, costs=costs, clusters=clusters)
        run = loop.run
        total = n_questions if run.design == "stream" else run.budget
        with progress_bar(total, "querying", self.verbose) as bar:
            try:
                while not loop.done:
                    answer_round(loop, rng, oracle)
                    bar.update(run.progress - bar.n)
            except BaseException as exc:
                self.queries_ = run.table()
                exc.add_note(f"faqstats: {len(run.records)} answers recorded before the failure are in .queries_.")
                raise
        self.result_ = result = result_of(self, loop)
        self.queries_ = run.table()
        self.estimate_, self.std_error_, self.n_queries_ = result.estimate, result.std_error, result.n_queries
        self.stop_reason_, self.cost_spent_ = result.stop_reason, result.cost_spent
        self.cost_per_draw_ = run.cost_per_draw
        self.group_results_ = group_results_of(self, loop)
        self.cluster_labels_ = getattr(run, "labels", None) if isinstance(run, ClusterRun) else None
        self.confidence_sequence_ = confidence_rows(loop)
        self.posterior_mean_ = getattr(run.predictor, "mean", None)
        self.posterior_cov_ = getattr(run.predictor, "cov", None)
        return self
