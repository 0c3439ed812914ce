"""Pro-Active Inference: estimate a new model's accuracy from an actively chosen set of queries.

:class:`PAIEstimator` runs the query loop (:class:`faqstats._engine.QueryLoop`) against an
array of outcomes or a callable and reports the mean of the increments with an exactly unbiased
variance (:mod:`faqstats._inference`; ``docs/statistics.md``, "Increments"). The predictor (the
new model's factor posterior) learns the answers after each round.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ._engine import (
    CLUSTER_SCORES,
    ClusterRun,
    Oracle,
    QueryLoop,
    SequentialRun,
    check_design,
    encode_clusters,
    sample_mean_design,
    start_run,
)
from ._inference import (
    fpc_mean,
    interval_df,
    martingale_variance,
    pai_inference,
    paper_variance,
    weighted_martingale,
)
from ._progress import progress_bar
from ._validation import check_alpha, check_generator, check_scalar
from .confseq import BettingConfidenceSequence
from .estimands import (
    EstimandTracker,
    combine_strata,
    encode_groups,
    estimand_weights,
    group_results,
    stratified_allocation,
    stratified_results,
)
from .posterior import FixedPredictions
from .results import AccuracyResult
from .sampling import CostWeightedSampler, HybridSampler, Sampler, StreamSampler, check_costs, draws_for_cost

__all__ = [
    "PAIEstimator",
    "martingale_variance",
    "paper_variance",
    "resolve_bank_size",
    "weighted_martingale",
]


class PAIResultMixin:
    """What both estimators share: the bank size, and ``conf_int`` and ``summary`` of ``result_``."""

    def bank_size(self):
        """Questions of the factor model's bank, or ``None`` without a factor model."""
        if self.factor_model is None:
            return None
        check_is_fitted(self.factor_model)
        return int(self.factor_model.n_features_in_)

    def conf_int(self, alpha=0.05, alternative="two-sided"):
        """Confidence interval ``(low, high)`` at level ``1 - alpha``: the ``result_``'s ``conf_int``."""
        check_is_fitted(self, "result_")
        return self.result_.conf_int(alpha=alpha, alternative=alternative)

    confint = conf_int

    def summary(self, alpha=0.05):
        """The ``result_``'s summary table."""
        check_is_fitted(self, "result_")
        return self.result_.summary(alpha)


class PAIEstimator(PAIResultMixin, BaseEstimator):
    """Estimate a new model's accuracy on a bank from a small, actively chosen set of queries.

    Parameters
    ----------
    factor_model : fitted LogisticFactorModel (or LogisticFactorModelCV) or None
        Supplies the new model's factor posterior (:meth:`LogisticFactorModel.posterior`).
        ``None``: zero predictions, so ``UniformSampler(replace=False)`` gives the FPC sample
        mean and ``BernoulliAIPW(score="uniform")`` the paper's Horvitz-Thompson baseline.
    sampler : Sampler or StreamSampler, default=HybridSampler()
        The sampling policy. ``sampler.replace`` chooses with/without replacement.
    budget : int, default=100
        Number of queries (expected number of labels for ``BernoulliAIPW``; cluster draws
        with ``fit(..., clusters=)``). At least 2; without replacement at most N (or the
        number of clusters).
    variance : {"martingale", "paper"}, default="martingale"
        ``"martingale"``: the exactly unbiased estimator ``sum (phi - mean)^2 / (n (n-1))``, or its
        weighted form for weighted increments (:func:`weighted_martingale`).
        ``"paper"``: the paper's closed form (with replacement only).
    interval : {"robust-t", "t", "normal"}, default="robust-t"
        Quantile ``c`` of the Wald-type interval ``estimate -/+ c se``: Student's t with the
        kurtosis-adjusted degrees of freedom of :func:`faqstats._inference.effective_df`, with
        ``n - 1``, or normal (user guide, "Intervals"). Nature's-order AIPW always uses normal.
    batch_size : int, default=1
        Questions drawn per round from one policy; the posterior learns between rounds only
        (user guide, "Batches"). Ignored by ``BernoulliAIPW``.
    stop_when_width : float in (0, 1] or None, default=None
        Stop after the first round at which the anytime-valid 95% confidence sequence is at
        most this wide (``budget`` is then the maximum); the interval reported is the
        sequence's, valid at this data-dependent stopping time.
    confidence_sequence : bool or float, default=False
        Also track a :class:`~faqstats.confseq.BettingConfidenceSequence` over the increments:
        ``True`` for 95%, or a float ``alpha``. Implied by ``stop_when_width``. Not for ``BernoulliAIPW``.
    step_weights : array-like of shape (>= budget,) or None, default=None
        Increment weights fixed before the run (:func:`weighted_martingale`; user guide,
        "Weighted increments"), e.g. from :func:`faqstats.step_weights.learn_step_weights`;
        ``None``: without replacement the finite-population weights (the width falls to 0 as
        ``budget`` reaches the bank; user guide, "Finite-population weights"), with replacement
        equal. Not for ``BernoulliAIPW``, the plain sample mean or ``variance="paper"``.
    random_state : int, Generator or None, default=None
        Seeds every draw; the same seed and answers give the same queries.
    verbose : bool, default=False
        Show a progress bar over queries.
    dtype : {"float64", "float32"}, default="float64"
        Precision of the predictions ``sigmoid(V m)`` recomputed after every answer.
        ``"float32"`` roughly halves that pass on large banks; validity is untouched, the
        draws differ from float64's now and then.
    predict_every : int, default=1
        Recompute the predictions after every ``predict_every``-th answer only (the posterior
        still learns every answer): on large banks that pass dominates a query's cost. Still
        exactly unbiased (user guide, "Predictions refreshed on a schedule").
    estimand : {"micro", "macro"} or array-like of shape (N,), default="micro"
        What ``estimate_`` estimates: the bank's accuracy, the mean of the groups' accuracies
        (``fit(..., groups=)``), or ``sum_j w_j z_j / sum_j w_j`` for question weights ``w``
        (user guide, "Groups and weighted estimands").
    min_group_share : float in [0, 1), default=0.0
        With ``groups``: mix this share of a law giving every group the same mass into the
        policy, so that no group goes without draws (still exactly unbiased). With
        ``stratify``: the share of the budget split evenly between the groups.
    stratify : bool, default=False
        With ``groups``: a stratified design, a fixed number of draws per group
        (:func:`~faqstats.estimands.stratified_allocation`), the policy's law restricted to the
        draw's group; every group's interval then rests on its own draws (user guide, "Groups
        and weighted estimands"). For ``estimand`` "micro" or "macro"; the bank-wide
        ``queries_["increment"]`` is then not an estimate (the groups' increments are).
    budget_cost : float > 0 or None, default=None
        A budget in cost units (tokens, dollars) instead of questions; needs ``fit(...,
        costs=)``. The number of draws is fixed before the run, ``n = floor(budget_cost /
        E_q1[cost])`` for the policy's first law ``q1`` (at most N without replacement), and
        ``budget`` is ignored; the spend is then random, ``budget_cost`` in expectation for a
        law that does not move (docs/statistics.md, "Cost budgets").

    Attributes
    ----------
    result_ : AccuracyResult
    estimate_ : float
    std_error_ : float
    group_results_ : GroupResults or None
        With ``fit(..., groups=)``: every group's estimate, standard error and interval
        (:meth:`~faqstats.estimands.GroupResults.conf_int`, ``simultaneous=True`` for all at once).
    n_queries_ : int
        Distinct questions answered (a question drawn again with replacement is asked once;
        with clusters, every question of the distinct clusters drawn).
    queries_ : structured ndarray
        One row per draw with fields ``question``, ``probability`` (q_t(I_t), or pi_t),
        ``outcome``, ``increment`` (phi_t), ``prediction`` (p_I before the answer) and
        ``prediction_total`` (the sum of predictions the increment used). With
        ``fit(..., clusters=)`` one row per cluster draw: ``cluster`` (an index into
        ``cluster_labels_``), ``size``, ``probability`` (q_t(c)), ``outcome`` (the cluster's
        summed outcomes Y_c), ``increment``, ``prediction`` (its summed predictions P_c) and
        ``prediction_total``.
    cluster_labels_ : ndarray or None
        With ``fit(..., clusters=)``: the sorted cluster ids (``queries_["cluster"]`` indexes them).
    posterior_mean_, posterior_cov_ : ndarray or None
        The new model's factor posterior after the last answer.
    confidence_sequence_ : ndarray of shape (n_rounds, 3) or None
        ``(queries so far, low, high)`` of the running confidence sequence after each
        round (theta in every row at once with probability ``>= 1 - alpha``).
    stop_reason_ : {"budget", "width"}
    cost_spent_ : float or None
        With ``fit(..., costs=)``: the summed cost of the distinct questions asked (random).
    cost_per_draw_ : float or None
        With ``budget_cost``: the expected cost per draw ``E_q1[cost]`` that fixed the draws.

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
        predict_every=1,
        estimand="micro",
        min_group_share=0.0,
        stratify=False,
        budget_cost=None,
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
        self.random_state = random_state
        self.verbose = verbose
        self.dtype = dtype
        self.predict_every = predict_every
        self.estimand = estimand
        self.min_group_share = min_group_share
        self.stratify = stratify
        self.budget_cost = budget_cost

    @classmethod
    def from_history(cls, history, budget, *, random_state=0, **options):
        """An estimator configured from the history alone, ready to ``fit`` a new model.

        See :func:`faqstats.configure.configure_from_history` (call it directly for the report
        of what was chosen and why).

        Parameters
        ----------
        history : array-like of shape (n_models, N)
            Earlier models' outcomes (NaN = not observed).
        budget : int
            Queries the estimator will make.
        random_state : int, Generator or None, default=0
            Seeds the validation split and runs, and is the returned estimator's
            ``random_state`` (its draws): an int makes the whole path reproducible; ``None``
            keeps the configuration seeded (0) and draws afresh at every ``fit``.
        **options
            Keyword arguments of :func:`~faqstats.configure_from_history`.

        Returns
        -------
        PAIEstimator
            Unfitted: the chosen predictor (fitted) and step weights, or the sample mean.

        Examples
        --------
        >>> import faqstats as fq
        >>> bank = fq.make_synthetic_bank(n_models=120, n_questions=80, n_components=2, random_state=0)
        >>> est = fq.PAIEstimator.from_history(bank.history, budget=20, n_runs=100, random_state=0)
        >>> est.fit(bank.new_outcomes[0]).n_queries_, est.random_state
        (20, 0)
        """
        from .configure import configure_from_history

        seed = 0 if random_state is None or isinstance(random_state, np.random.Generator) else random_state
        estimator = configure_from_history(history, budget, random_state=seed, **options).estimator
        return estimator.set_params(random_state=random_state)

    # -- set-up ----------------------------------------------------------------
    def validate(self, n_questions, budget=None, sampler=None):
        """Check every parameter for a bank of ``n_questions``; return the sampler.

        Parameters
        ----------
        n_questions : int
            The bank size ``N``.
        budget : int or None, default=None
            The draws of the run (``None``: ``self.budget``; a cost budget's draws otherwise).
        sampler : Sampler or None, default=None
            The policy to check (``None``: ``self.sampler``; a cost-weighted one otherwise).

        Returns
        -------
        Sampler or StreamSampler
            The policy to run (``HybridSampler()`` when ``sampler`` is None).
        """
        budget = self.budget if budget is None else budget
        if sampler is None:
            sampler = HybridSampler() if self.sampler is None else self.sampler
        if not isinstance(sampler, (Sampler, StreamSampler)):
            raise TypeError(f"sampler must be a faqstats Sampler, got {type(sampler).__name__}.")
        stream = sampler.design == "stream"
        if self.dtype not in ("float64", "float32"):
            raise ValueError(f"dtype must be 'float64' or 'float32', got {self.dtype!r}.")
        check_scalar(self.predict_every, "predict_every", kind=numbers.Integral, low=1)
        if self.variance not in ("martingale", "paper"):
            raise ValueError(f"variance must be 'martingale' or 'paper', got {self.variance!r}.")
        if self.stop_when_width is not None:
            check_scalar(self.stop_when_width, "stop_when_width", low=0.0, high=1.0, closed="right")
        if self._cs_alpha() is not None and stream:
            raise ValueError("Confidence sequences and stop_when_width need a sequential sampler, not BernoulliAIPW.")
        check_design(sampler, self.factor_model, n_questions, budget, self.batch_size, self.interval)
        if self.variance == "paper" and (not sampler.replace or stream):
            raise ValueError("variance='paper' is defined for with-replacement sequential sampling only.")
        if self.step_weights is not None:
            self._check_step_weights(sampler, budget)
        return sampler

    def _check_step_weights(self, sampler, budget):
        w = np.asarray(self.step_weights, dtype=float)
        if w.ndim != 1 or w.size < budget:
            raise ValueError(
                f"step_weights must be a 1-D array with at least budget={budget} entries, got shape {w.shape}."
            )
        if not np.all(np.isfinite(w[:budget])) or np.any(w[:budget] <= 0):
            raise ValueError("step_weights must be finite and positive.")
        if sampler.design == "stream":
            raise ValueError("step_weights weight sequential increments; BernoulliAIPW has none.")
        if sample_mean_design(self.factor_model, sampler):
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

    def _tracker(self, sampler, n_questions, groups, budget):
        """The :class:`~faqstats.estimands.EstimandTracker` the run needs, or None (the bank's mean)."""
        micro = isinstance(self.estimand, str) and self.estimand == "micro"
        share = check_scalar(self.min_group_share, "min_group_share", low=0.0, high=1.0, closed="left")
        if groups is None and micro:
            if share > 0 or self.stratify:
                raise ValueError(f"{'stratify' if self.stratify else 'min_group_share'} needs groups: pass groups= to fit.")
            return None
        if sampler.design == "stream":
            raise ValueError("groups and weighted estimands need a sequential sampler, not BernoulliAIPW.")
        if self.variance != "martingale":
            raise ValueError("groups and weighted estimands need variance='martingale'.")
        if not micro and self._cs_alpha() is not None:
            raise ValueError("confidence sequences and stop_when_width track the bank's accuracy: use estimand='micro'.")
        codes, labels = (None, None) if groups is None else encode_groups(groups, n_questions)
        if share > 0 and codes is None:
            raise ValueError("min_group_share needs groups: pass groups= to fit.")
        allocation = None
        if self.stratify:
            if codes is None:
                raise ValueError("stratify needs groups: pass groups= to fit.")
            if not isinstance(self.estimand, str):
                raise ValueError("stratify is for estimand='micro' or 'macro'.")
            if self.step_weights is not None or self._cs_alpha() is not None:
                raise ValueError("stratify weights each group's draws itself: drop step_weights, "
                                 "confidence_sequence and stop_when_width.")
            allocation = stratified_allocation(np.bincount(codes), budget, share, sampler.replace)
        tracker = EstimandTracker(estimand_weights(self.estimand, codes, n_questions), codes, sampler.replace, share,
                                  allocation)
        tracker.labels = labels
        return tracker

    def new_loop(self, n_questions=None, rng=None, groups=None, costs=None, clusters=None):
        """A fresh :class:`~faqstats._engine.QueryLoop` for this configuration.

        Used by ``fit``, the session and the tests.

        Parameters
        ----------
        n_questions : int or None, default=None
            The bank size (``None``: the factor model's).
        rng : numpy.random.Generator, int or None, default=None
            Draws the order of a nature's-order design's stream (unused by sequential policies).
        groups : array-like of shape (N,) or None, default=None
            As in :meth:`fit`.
        costs : array-like of shape (N,) or None, default=None
            As in :meth:`fit`.
        clusters : array-like of shape (N,) or None, default=None
            As in :meth:`fit`: the run is then a :class:`~faqstats._engine.ClusterRun`.

        Returns
        -------
        faqstats._engine.QueryLoop
            The loop, before its first draw.
        """
        n_questions = resolve_bank_size(self.bank_size(), n_questions)
        if clusters is not None:
            return self._cluster_loop(n_questions, groups, costs, clusters)
        sampler, budget, costs, per_draw = self._cost_design(n_questions, groups, costs)
        sampler = self.validate(n_questions, budget, sampler)
        tracker = self._tracker(sampler, n_questions, groups, budget)
        run = start_run(sampler, self._predictor(n_questions), n_questions, budget, check_generator(rng))
        run.tracker = tracker
        run.costs, run.cost_per_draw = costs, per_draw
        alpha = self._cs_alpha()
        cs = None if alpha is None else BettingConfidenceSequence(alpha=alpha, truncation=0.9, horizon=budget)
        return QueryLoop(run, batch_size=self.batch_size, confidence_sequence=cs, stop_when_width=self.stop_when_width)

    def _cluster_loop(self, n_questions, groups, costs, clusters):
        """The loop of a clustered design (``fit(clusters=)``; docs/statistics.md, "Clusters")."""
        codes, labels = encode_clusters(clusters, n_questions)
        n_clusters = labels.size
        group_codes = group_labels = None
        if groups is not None:  # every cluster in one group: each group's accuracy from the cluster draws
            group_codes, group_labels = encode_groups(groups, n_questions)
            pairs = np.unique(np.stack([codes, group_codes], axis=1), axis=0)
            split = np.flatnonzero(np.bincount(pairs[:, 0], minlength=n_clusters) > 1)
            if split.size:
                c = split[0]
                found = group_labels[np.unique(group_codes[codes == c])].tolist()
                raise ValueError(f"cluster {labels.tolist()[c]!r} spans groups {found}: with clusters every cluster must lie in "
                                 f"one group ({split.size} cluster(s) do not).")
        if not (isinstance(self.estimand, str) and self.estimand == "micro"):
            raise ValueError("clusters estimate the bank's accuracy (and every group's): use estimand='micro' "
                             "(the default).")
        if self.stratify or self.min_group_share:
            raise ValueError("stratify and min_group_share are not available with clusters: leave them at their "
                             "defaults.")
        if self.variance != "martingale":
            raise ValueError("clusters need variance='martingale' (the paper's closed form is per question).")
        sampler = HybridSampler() if self.sampler is None else self.sampler
        if not isinstance(sampler, Sampler):
            raise ValueError(f"clusters need a sequential Sampler (one law over the bank), not "
                             f"{type(sampler).__name__}: nature's-order designs visit questions one by one.")
        if isinstance(sampler, CostWeightedSampler):
            raise ValueError("the sampler is a CostWeightedSampler: pass its base policy and the costs to fit.")
        budget, cluster_costs, root_costs, per_draw = self.budget, None, None, None
        if costs is None and self.budget_cost is not None:
            raise ValueError("budget_cost needs costs: pass costs= to fit (a positive cost per question).")
        if costs is not None:
            # a cluster costs the sum of its questions' costs
            cluster_costs = np.bincount(codes, check_costs(costs, n_questions), n_clusters)
            if sampler.tau != 1.0:  # tau = 1 ignores the scores (and so the costs)
                if type(sampler).probabilities is not Sampler.probabilities:
                    raise ValueError(f"{type(sampler).__name__} overrides probabilities: costs weigh a policy's "
                                     "scores, so the policy must be defined by scores.")
                root_costs = np.sqrt(cluster_costs)
            if self.budget_cost is not None:
                def first_law(n):  # the law of draw 1 in a run of n cluster draws, from the prior predictor
                    return self._cluster_run(n_questions, n, sampler, codes, root_costs).law()

                budget, per_draw = draws_for_cost(self.budget_cost, cluster_costs, first_law, sampler.replace,
                                                  n_clusters)
        run = self._cluster_run(n_questions, budget, sampler, codes, root_costs)
        run.labels = labels
        if group_codes is not None:
            run.set_groups(group_codes)
            run.group_labels = group_labels
        run.costs, run.cost_per_draw = cluster_costs, per_draw
        alpha = self._cs_alpha()
        cs = None if alpha is None else BettingConfidenceSequence(alpha=alpha, truncation=0.9, horizon=budget)
        return QueryLoop(run, batch_size=self.batch_size, confidence_sequence=cs, stop_when_width=self.stop_when_width)

    def _cluster_run(self, n_questions, budget, sampler, codes, root_costs):
        n_clusters = int(codes.max()) + 1
        if not sampler.replace and budget > n_clusters:
            raise ValueError(
                f"budget={budget} exceeds the {n_clusters} clusters; without replacement each cluster can be drawn "
                "only once (with clusters, budget counts cluster draws)."
            )
        sampler = self.validate(n_questions, budget, sampler)
        if self._cluster_score not in CLUSTER_SCORES:
            raise ValueError(f"cluster score must be one of {CLUSTER_SCORES}, got {self._cluster_score!r}.")
        return ClusterRun(sampler, self._predictor(n_questions), n_questions, budget, codes, root_costs,
                          self._cluster_score)

    #: how a cluster's score is made from its questions' (engine.cluster_law); for experiments
    _cluster_score = "root-sum-square"

    def _predictor(self, n_questions):
        fm = self.factor_model
        if fm is None:
            return FixedPredictions(np.zeros(n_questions))
        return fm.posterior(dtype=self.dtype, predict_every=self.predict_every)

    def _cost_design(self, n_questions, groups, costs):
        """``(sampler, draws, costs, E_q1[cost])`` of the run: the policy weighed by cost and the
        draws ``budget_cost`` buys, fixed before the first draw (``None, budget, None, None``
        without costs)."""
        if costs is None:
            if self.budget_cost is not None:
                raise ValueError("budget_cost needs costs: pass costs= to fit (a positive cost per question).")
            return None, self.budget, None, None
        costs = check_costs(costs, n_questions)
        base = HybridSampler() if self.sampler is None else self.sampler
        if not isinstance(base, Sampler):
            raise ValueError(f"costs need a sequential Sampler (one law over the bank), not {type(base).__name__}.")
        if isinstance(base, CostWeightedSampler):
            raise ValueError("the sampler is already a CostWeightedSampler: pass its base policy, "
                             "or leave costs out of fit.")
        if self.stratify:
            raise ValueError("costs are not available with stratify (its draws per group are fixed): "
                             "use min_group_share for a floor on every group's draws.")
        # tau = 1 ignores the scores: the uniform law, and the FPC sample mean without a predictor
        sampler = base if base.tau == 1.0 else CostWeightedSampler(base, costs)
        if self.budget_cost is None:
            return sampler, self.budget, costs, None

        def first_law(n):  # the law of draw 1 in a run of n draws, from the prior predictor
            checked = self.validate(n_questions, n, sampler)
            run = SequentialRun(checked, self._predictor(n_questions), n_questions, n)
            run.tracker = self._tracker(checked, n_questions, groups, n)
            return run.law()

        n, per_draw = draws_for_cost(self.budget_cost, costs, first_law, base.replace, n_questions)
        return sampler, n, costs, per_draw

    # -- fitting ---------------------------------------------------------------
    def fit(self, outcomes, y=None, *, groups=None, costs=None, clusters=None):
        """Run the query loop against ``outcomes`` and estimate the accuracy.

        Parameters
        ----------
        outcomes : array-like of shape (N,) or callable
            The new model's outcomes in [0, 1] (0/1 or graded: user guide, "Graded outcomes");
            only the asked entries are read, NaN elsewhere is fine. Or a function mapping an
            integer array of question indices to their outcomes (called once per round).
        y : None
            Ignored (scikit-learn's signature).
        groups : array-like of shape (N,) or None
            A label per question (a subject, a task): ``group_results_`` then holds every
            group's estimate and interval, and ``estimand="macro"`` averages them.
        costs : array-like of shape (N,) or None
            A finite, positive cost per question (tokens, dollars): the policy weighs its scores
            by ``1 / sqrt(cost)`` (the Neyman rule with costs), ``cost_spent_`` reports the spend,
            and ``budget_cost`` fixes the draws from it (docs/statistics.md, "Cost budgets").
        clusters : array-like of shape (N,) or None
            A cluster id per question (questions sharing a passage, an image, a prompt
            template, or the repeats of a question when each repeat is a question of the bank):
            every draw then asks a whole cluster, ``budget`` counts cluster draws, the estimand
            stays the bank's per-question accuracy, and the variance is the martingale variance
            of the cluster-level increments, so the interval allows for answers that move
            together (docs/statistics.md, "Clusters and repeated samples"). ``queries_`` then has
            one row per cluster draw and ``cluster_labels_`` the sorted ids. With ``costs`` a
            cluster costs the sum of its questions' costs. With ``groups`` every cluster must lie
            in one group (``group_results_`` from the cluster draws; ``n_asked`` counts cluster
            draws). Not with a weighted ``estimand``, ``min_group_share``, ``stratify``,
            ``variance="paper"`` or ``BernoulliAIPW``.

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
        >>> passages = np.arange(200) // 4
        >>> est = fq.PAIEstimator(fm, budget=10, random_state=0).fit(bank.new_outcomes[0], clusters=passages)
        >>> est.n_queries_, len(est.queries_), est.result_.method  # 10 passages of 4 questions
        (40, 10, 'pai-cluster')
        >>> low, high = est.conf_int()
        >>> bool(low <= est.estimate_ <= high)
        True
        """
        n_questions = self.bank_size()
        if n_questions is None:
            if callable(outcomes):
                raise ValueError("Without a factor model the bank size is unknown: pass outcomes as an array.")
            n_questions = int(np.size(outcomes))
        oracle = Oracle(outcomes, n_questions)
        rng = check_generator(self.random_state)
        loop = self.new_loop(n_questions, rng, groups=groups, costs=costs, clusters=clusters)
        run = loop.run
        total = n_questions if run.design == "stream" else run.budget
        clustered = isinstance(run, ClusterRun)
        with progress_bar(total, "querying", self.verbose) as bar:
            try:
                while not loop.done:
                    drawn = [d.question for d in loop.draw_round(rng)]
                    if clustered:  # every question of the round's clusters, asked at once
                        members = [run.members[c] for c in drawn]
                        answers = np.array(oracle.ask(np.concatenate(members)), dtype=float)
                        outcomes = np.split(answers, np.cumsum([m.size for m in members])[:-1])
                    else:
                        outcomes = oracle.ask(drawn)
                    for outcome in outcomes:
                        loop.record(outcome)
                    bar.update(run.progress - bar.n)
            except BaseException as exc:
                self.queries_ = run.table()
                exc.add_note(f"faqstats: {len(run.records)} answers recorded before the failure are in .queries_.")
                raise
        self.result_ = result = self.result_of(loop)
        self.queries_ = run.table()
        self.estimate_ = result.estimate
        self.std_error_ = result.std_error
        self.n_queries_ = result.n_queries
        self.stop_reason_ = result.stop_reason
        self.cost_spent_ = result.cost_spent
        self.cost_per_draw_ = run.cost_per_draw
        self.group_results_ = self.group_results_of(loop)
        self.cluster_labels_ = getattr(run, "labels", None) if clustered else None
        self.confidence_sequence_ = self._confidence_rows(loop)
        self.posterior_mean_ = getattr(run.predictor, "mean", None)
        self.posterior_cov_ = getattr(run.predictor, "cov", None)
        return self

    @staticmethod
    def _confidence_rows(loop):
        rows = loop.confidence_rows
        return np.array(rows, dtype=float).reshape(-1, 3) if loop.cs is not None and rows else None

    def _weights_for(self, run):
        """The increment weights and the bank size the inference needs (None with replacement):
        with clusters the number of clusters (the finite-population weights and the census)."""
        units = run.n_clusters if isinstance(run, ClusterRun) else run.n_questions
        return self.step_weights, None if run.sampler.replace else units

    def group_results_of(self, loop, n_draws=None):
        """Every group's estimate from a loop made by :meth:`new_loop` with ``groups``.

        Parameters
        ----------
        loop : faqstats._engine.QueryLoop
            The loop, with its recorded draws.
        n_draws : int or None, default=None
            Use the first ``n_draws`` draws only; ``None``: every recorded draw.

        Returns
        -------
        GroupResults or None
            None when the loop was started without groups.
        """
        run = loop.run
        if isinstance(run, ClusterRun):
            if run.group_codes is None:
                return None
            table = run.table()[:n_draws]
            weights, without = self._weights_for(run)
            rows = np.array(run.group_rows, dtype=float).reshape(len(run.group_rows), -1)[:n_draws]
            return group_results(rows, run.group_labels, run.group_sizes, run.cluster_group[table["cluster"]],
                                 interval=self.interval, weights=weights, n_questions=without,
                                 n_units=run.group_clusters)
        tracker = run.tracker
        if tracker is None or tracker.codes is None:
            return None
        if tracker.stratified:
            return stratified_results(tracker.strata[:n_draws], tracker.labels, tracker.sizes,
                                      interval=self.interval, replace=loop.run.sampler.replace)
        run, table = loop.run, loop.run.table()[:n_draws]
        weights, without = self._weights_for(run)
        return group_results(tracker.increments()[:n_draws, 1:], tracker.labels, tracker.sizes,
                             tracker.codes[table["question"]], interval=self.interval, weights=weights,
                             n_questions=without)

    def result_of(self, loop, n_draws=None):
        """The :class:`AccuracyResult` of a loop made by :meth:`new_loop`.

        Parameters
        ----------
        loop : faqstats._engine.QueryLoop
            The loop, with its recorded draws.
        n_draws : int or None, default=None
            Use the first ``n_draws`` draws only (an interim result, ``stop_reason`` None);
            ``None``: every recorded draw.

        Returns
        -------
        AccuracyResult
            The estimate and its uncertainty.
        """
        run = loop.run
        table = run.table()[:n_draws]
        partial = n_draws is not None
        n_questions = run.n_questions
        if run.design == "stream":
            method, variance_method, df = "aipw", "design-based", None
            estimate = float(np.mean(run.terms))
            var = float(np.sum(run.variance_terms)) / n_questions**2
        elif run.tracker is not None and run.tracker.stratified:
            groups = self.group_results_of(loop, n_draws)
            macro = self.estimand == "macro"
            shares = np.full(groups.labels.size, 1.0 / groups.labels.size) if macro else groups.n_questions / n_questions
            method, variance_method = ("pai-stratified-macro" if macro else "pai-stratified"), "stratified martingale"
            estimate, var, df = combine_strata(groups, shares)
            df = None if np.isinf(df) else df
        elif run.tracker is not None and not (isinstance(self.estimand, str) and self.estimand == "micro"):
            # the headline is a weighted estimand: its own increments (estimands.py), same inference
            method = "pai-macro" if isinstance(self.estimand, str) else "pai-weighted"
            weights, without = self._weights_for(run)
            estimate, var, df, variance_method = pai_inference(
                run.tracker.increments()[:n_draws, 0], interval=self.interval, weights=weights, n_questions=without)
        elif isinstance(run, ClusterRun):
            estimate, var, df, method, variance_method = self._cluster_inference(run, table)
        elif sample_mean_design(self.factor_model, run.sampler):
            method, variance_method = "sample_mean", "finite-population"
            estimate, var = fpc_mean(table["outcome"], n_questions)
            df = interval_df(self.interval, table["outcome"])
        else:
            method = "pai"
            if self.variance == "martingale":
                weights, without = self._weights_for(run)
                estimate, var, df, variance_method = pai_inference(
                    table["increment"], interval=self.interval, weights=weights, n_questions=without)
            else:
                variance_method = "paper"
                estimate = float(table["increment"].mean())
                var = paper_variance(
                    table["outcome"], table["prediction"], table["probability"], table["prediction_total"], n_questions
                )
                if var < 0:
                    warnings.warn("The paper's variance estimate is negative; reporting 0.", RuntimeWarning, stacklevel=3)
                    var = 0.0
                df = interval_df(self.interval, table["increment"])
        if not np.isfinite(estimate) or not np.isfinite(var):
            raise FloatingPointError("Non-finite estimate or variance; check the sampler's probabilities.")
        rows = None if partial else self._confidence_rows(loop)
        if isinstance(run, ClusterRun):  # distinct questions asked; costs are per cluster
            units = np.unique(table["cluster"])
            n_queries = int(run.sizes[units].sum())
        else:
            units = np.unique(table["question"])
            n_queries = int(units.size)
        return AccuracyResult(
            estimate=float(estimate),
            std_error=float(np.sqrt(var)),
            n_queries=n_queries,
            n_questions=n_questions,
            method=method,
            variance_method=variance_method,
            df=df,
            stop_reason=None if partial else loop.stop_reason,
            anytime_interval=None if rows is None else tuple(rows[-1, 1:]),
            anytime_alpha=self._cs_alpha(),
            design=self._design_label(run.sampler) + (
                f"; {run.n_clusters} clusters, one per draw" if isinstance(run, ClusterRun) else ""),
            cost_spent=None if run.costs is None else float(run.costs[units].sum()),
            cost_budget=None if run.costs is None else self.budget_cost,
        )

    def _cluster_inference(self, run, table):
        """``(estimate, variance, df, method, variance_method)`` of a clustered run: the cluster
        sample mean with its FPC variance for uniform draws of equal-size clusters without
        replacement and no predictor, else the martingale inference of the cluster increments."""
        if sample_mean_design(self.factor_model, run.sampler) and np.all(run.sizes == run.sizes[0]):
            scale = run.n_clusters / run.n_questions  # theta = (C / N) mean_c Y_c
            estimate, var = fpc_mean(table["outcome"], run.n_clusters)
            return (scale * estimate, scale**2 * var, interval_df(self.interval, table["outcome"]),
                    "cluster_sample_mean", "finite-population (clusters)")
        weights, without = self._weights_for(run)
        estimate, var, df, variance_method = pai_inference(
            table["increment"], interval=self.interval, weights=weights, n_questions=without)
        return estimate, var, df, "pai-cluster", variance_method + " (clusters)"

    def _design_label(self, sampler):
        """One line naming the predictor, the policy and the increment weights (for the summary)."""
        fm = self.factor_model
        if fm is None:
            predictor = "none"
        else:
            rank = getattr(fm, "n_components", None)
            predictor = type(fm).__name__ + ("" if rank is None else f" (rank {rank})")
        if self.step_weights is not None:
            weights = "given (step_weights)"
        else:  # what pai_inference does without step_weights
            weights = "equal" if getattr(sampler, "replace", True) else "finite-population"
        return f"predictor {predictor}; policy {sampler!r}; increment weights {weights}"


def resolve_bank_size(n_factor_model, n_questions):
    """The bank size: the factor model's (``n_factor_model``, None without one) and the
    outcomes' (``n_questions``, None when unknown) must agree, and one must be known."""
    n = n_factor_model if n_questions is None else n_questions
    if n is None:
        raise ValueError("Without a factor model the bank size comes from the outcomes; pass n_questions.")
    if n_factor_model is not None and n != n_factor_model:
        raise ValueError(f"outcomes cover {n} questions but the factor model was fitted on {n_factor_model} questions.")
    return n
