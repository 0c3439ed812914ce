"""The query loop of an estimator's configuration (its run, predictor, groups, costs and clusters) that
``PAIEstimator.fit``, the session and :func:`faqstats.batched.simulate` drive."""

import numpy as np

from ._engine import ClusterRun, QueryLoop, SequentialRun, StreamRun, encode_clusters
from ._validation import check_generator, check_scalar
from .confseq import BettingConfidenceSequence
from .design import check_estimator, confidence_alpha, resolve_bank_size
from .estimands import EstimandTracker, as_estimand, encode_groups, stratified_allocation
from .posterior import FixedPredictions
from .predictor import engine_posterior
from .sampling import CostWeightedSampler, HybridSampler, Sampler, check_costs, draws_for_cost

__all__ = ["answer_round", "cost_design", "estimand_tracker", "new_loop", "predictor_for"]


def predictor_for(predictor, n_questions, dtype="float64", predict_every=1):
    """A new model's posterior at its prior (the engine's protocol): the predictor's, or zero predictions."""
    if predictor is None:
        return FixedPredictions(np.zeros(n_questions))
    return engine_posterior(predictor.posterior(dtype=dtype, predict_every=predict_every), n_questions)


def new_loop(est, n_questions=None, rng=None, groups=None, costs=None, clusters=None):
    """A fresh :class:`~faqstats._engine.QueryLoop` for the configuration of ``est`` (``n_questions=None``: the
    predictor's; ``rng`` draws a nature's-order design's stream order).
    """
    n_questions = resolve_bank_size(est.bank_size(), n_questions)
    if clusters is not None:
        run = _cluster_run_of(est, n_questions, groups, costs, clusters)
    else:
        sampler, budget, costs, per_draw = cost_design(est, n_questions, groups, costs)
        run = _run(est, n_questions, budget, sampler, groups, rng)
        run.costs, run.cost_per_draw = costs, per_draw
    alpha = confidence_alpha(est.confidence_sequence, est.stop_when_width)
    cs = None if alpha is None else BettingConfidenceSequence(alpha=alpha, truncation=0.9, horizon=run.budget)
    return QueryLoop(run, batch_size=est.batch_size, confidence_sequence=cs, stop_when_width=est.stop_when_width)


def _run(est, n_questions, budget, sampler, groups, rng=None):
    """The (unclustered) run of ``budget`` draws of ``sampler`` for ``est``, at the predictor's prior."""
    sampler = check_estimator(est, n_questions, budget, sampler)
    tracker = estimand_tracker(est, sampler, n_questions, groups, budget)
    predictor = predictor_for(est.predictor, n_questions, est.dtype, est.predict_every)
    rng = check_generator(rng)  # draws a stream's order
    if sampler.design == "stream":
        run = StreamRun(sampler, predictor, n_questions, budget, sampler.stream_order(n_questions, rng))
    else:
        run = SequentialRun(sampler, predictor, n_questions, budget)
    run.tracker = tracker
    return run


def answer_round(loop, rng, oracle):
    """Draw the loop's next round from ``rng``, ask ``oracle`` its answers and record them, in draw order."""
    run = loop.run
    drawn = [d.question for d in loop.draw_round(rng)]
    if isinstance(run, ClusterRun):
        members = [run.members[c] for c in drawn]
        answers = np.array(oracle.ask(np.concatenate(members)), dtype=float)
        outcomes = np.split(answers, np.cumsum([m.size for m in members])[:-1])
    else:
        outcomes = oracle.ask(drawn)
    for outcome in outcomes:
        loop.record(outcome)


def estimand_tracker(est, sampler, n_questions, groups, budget):
    """The :class:`~faqstats.estimands.EstimandTracker` a run of ``est`` needs, or None (the bank's mean)."""
    estimand = as_estimand(est.estimand)
    micro = estimand.is_bank_mean
    share = check_scalar(est.min_group_share, "min_group_share", low=0.0, high=1.0, closed="left")
    tracks_sequence = confidence_alpha(est.confidence_sequence, est.stop_when_width) is not None
    if groups is None and micro:
        if share > 0 or est.stratify:
            raise ValueError(f"{'stratify' if est.stratify else 'min_group_share'} needs groups: pass groups= to fit.")
        return None
    if sampler.design == "stream":
        raise ValueError("groups and weighted estimands need a sequential sampler, not BernoulliAIPW.")
    if est.variance != "martingale":
        raise ValueError("groups and weighted estimands need variance='martingale'.")
    if not micro and tracks_sequence:
        raise ValueError("confidence sequences and stop_when_width track the bank's accuracy: use estimand='micro'.")
    codes, labels = (None, None) if groups is None else encode_groups(groups, n_questions)
    if share > 0 and codes is None:
        raise ValueError("min_group_share needs groups: pass groups= to fit.")
    allocation = None
    if est.stratify:
        if codes is None:
            raise ValueError("stratify needs groups: pass groups= to fit.")
        if estimand.stratified_method is None:
            raise ValueError("stratify is for estimand='micro' or 'macro'.")
        if est.step_weights is not None or tracks_sequence:
            raise ValueError("stratify weights each group's draws itself: drop step_weights, "
                             "confidence_sequence and stop_when_width.")
        allocation = stratified_allocation(np.bincount(codes), budget, share, sampler.replace)
    tracker = EstimandTracker(estimand.question_weights(codes, n_questions), codes, sampler.replace, share,
                              allocation)
    tracker.labels = labels
    return tracker


def cost_design(est, n_questions, groups, costs):
    """``(sampler, draws, costs, E_q1[cost])``: the policy weighed by cost and the draws ``budget_cost`` buys, fixed
    before the first draw (``None, budget, None, None`` without costs).
    """
    if costs is None:
        if est.budget_cost is not None:
            raise ValueError("budget_cost needs costs: pass costs= to fit (a positive cost per question).")
        return None, est.budget, None, None
    costs = check_costs(costs, n_questions)
    base = HybridSampler() if est.sampler is None else est.sampler
    if not isinstance(base, Sampler):
        raise ValueError(f"costs need a sequential Sampler (one law over the bank), not {type(base).__name__}.")
    if isinstance(base, CostWeightedSampler):
        raise ValueError("the sampler is already a CostWeightedSampler: pass its base policy, "
                         "or leave costs out of fit.")
    if est.stratify:
        raise ValueError("costs are not available with stratify (its draws per group are fixed): "
                         "use min_group_share for a floor on every group's draws.")
    # tau = 1 ignores the scores: the uniform law, and the FPC sample mean without a predictor
    sampler = base if base.tau == 1.0 else CostWeightedSampler(base, costs)
    if est.budget_cost is None:
        return sampler, est.budget, costs, None

    def first_law(n):  # the law of draw 1 in a run of n draws, from the prior predictor
        return _run(est, n_questions, n, sampler, groups).law()

    n, per_draw = draws_for_cost(est.budget_cost, costs, first_law, base.replace, n_questions)
    return sampler, n, costs, per_draw


def _cluster_run_of(est, n_questions, groups, costs, clusters):
    """The run of a clustered design (``fit(clusters=)``; docs/statistics.md, "Clusters")."""
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
            raise ValueError(f"cluster {labels.tolist()[c]!r} spans groups {found}: with clusters every cluster must "
                             f"lie in one group ({split.size} cluster(s) do not).")
    if not as_estimand(est.estimand).is_bank_mean:
        raise ValueError("clusters estimate the bank's accuracy (and every group's): use estimand='micro' "
                         "(the default).")
    if est.stratify or est.min_group_share:
        raise ValueError("stratify and min_group_share are not available with clusters: leave them at their "
                         "defaults.")
    if est.variance != "martingale":
        raise ValueError("clusters need variance='martingale' (the paper's closed form is per question).")
    sampler = HybridSampler() if est.sampler is None else est.sampler
    if not isinstance(sampler, Sampler):
        raise ValueError(f"clusters need a sequential Sampler (one law over the bank), not "
                         f"{type(sampler).__name__}: nature's-order designs visit questions one by one.")
    if isinstance(sampler, CostWeightedSampler):
        raise ValueError("the sampler is a CostWeightedSampler: pass its base policy and the costs to fit.")
    budget, cluster_costs, root_costs, per_draw = est.budget, None, None, None
    if costs is None and est.budget_cost is not None:
        raise ValueError("budget_cost needs costs: pass costs= to fit (a positive cost per question).")
    if costs is not None:
        # a cluster costs the sum of its questions' costs
        cluster_costs = np.bincount(codes, check_costs(costs, n_questions), n_clusters)
        if sampler.tau != 1.0:  # tau = 1 ignores the scores (and so the costs)
            if type(sampler).probabilities is not Sampler.probabilities:
                raise ValueError(f"{type(sampler).__name__} overrides probabilities: costs weigh a policy's "
                                 "scores, so the policy must be defined by scores.")
            root_costs = np.sqrt(cluster_costs)
        if est.budget_cost is not None:
            def first_law(n):  # the law of draw 1 in a run of n cluster draws, from the prior predictor
                return _cluster_run(est, n_questions, n, sampler, codes, root_costs).law()

            budget, per_draw = draws_for_cost(est.budget_cost, cluster_costs, first_law, sampler.replace, n_clusters)
    run = _cluster_run(est, n_questions, budget, sampler, codes, root_costs)
    run.labels = labels
    if group_codes is not None:
        run.set_groups(group_codes)
        run.group_labels = group_labels
    run.costs, run.cost_per_draw = cluster_costs, per_draw
    return run


def _cluster_run(est, n_questions, budget, sampler, codes, root_costs):
    n_clusters = int(codes.max()) + 1
    if not sampler.replace and budget > n_clusters:
        raise ValueError(f"budget={budget} exceeds the {n_clusters} clusters; without replacement each cluster can be "
                         "drawn only once (with clusters, budget counts cluster draws).")
    sampler = check_estimator(est, n_questions, budget, sampler)
    predictor = predictor_for(est.predictor, n_questions, est.dtype, est.predict_every)
    return ClusterRun(sampler, predictor, n_questions, budget, codes, root_costs, est.cluster_score)
