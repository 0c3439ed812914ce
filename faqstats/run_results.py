"""What a finished (or interim) query loop reports: its :class:`~faqstats.AccuracyResult` and groups
(``PAIEstimator.fit``'s ``result_`` and ``group_results_``, and a session's)."""

import warnings

import numpy as np

from ._engine import ClusterRun
from ._inference import census_mean, fpc_mean, interval_df, pai_inference, paper_variance
from .design import confidence_alpha, sample_mean_design
from .estimands import as_estimand, combine_strata, group_census_means, group_results, stratified_results
from .results import AccuracyResult

__all__ = ["census_answers", "cluster_inference", "confidence_rows", "group_results_of", "result_of"]


def confidence_rows(loop):
    """``(queries so far, low, high)`` of the loop's confidence sequence after each round, or None."""
    rows = loop.confidence_rows
    return np.array(rows, dtype=float).reshape(-1, 3) if loop.cs is not None and rows else None


def census_answers(run, table):
    """Every question's answer when the draws in ``table`` are a census (reported exactly), else None."""
    if run.design == "stream":  # a census by design only when every item was labelled with certainty
        certain = len(table) == run.n_questions and bool(np.all(table["probability"] == 1.0))
        return table["outcome"].copy() if certain else None
    if run.sampler.replace:
        return None
    if isinstance(run, ClusterRun):
        return run.values.copy() if len(table) == run.n_clusters else None
    if len(table) != run.n_questions:
        return None
    answers = np.empty(run.n_questions)
    answers[table["question"]] = table["outcome"]
    return answers


def _weights_for(est, run):
    """The increment weights and the units (questions or clusters; None with replacement) of the inference."""
    units = run.n_clusters if isinstance(run, ClusterRun) else run.n_questions
    return est.step_weights, None if run.sampler.replace else units


def group_results_of(est, loop, n_draws=None):
    """Every group's estimate from a loop of ``est`` (from its first ``n_draws`` draws), or None without groups."""
    run, table = loop.run, loop.run.table()[:n_draws]
    if isinstance(run, ClusterRun):
        if run.group_codes is None:
            return None
        rows = np.array(run.group_rows, dtype=float).reshape(len(run.group_rows), -1)[:n_draws]
        codes, labels, sizes, units = run.group_codes, run.group_labels, run.group_sizes, run.group_clusters
        drawn = run.cluster_group[table["cluster"]]
    else:
        tracker = run.tracker
        if tracker is None or tracker.codes is None:
            return None
        codes, labels, sizes, units = tracker.codes, tracker.labels, tracker.sizes, None
        if tracker.stratified:  # a group fully asked has all its answers in tracker.values
            return stratified_results(tracker.strata[:n_draws], labels, sizes, interval=est.interval,
                                      replace=run.sampler.replace,
                                      census=group_census_means(tracker.values, codes, labels.size))
        rows, drawn = tracker.increments()[:n_draws, 1:], codes[table["question"]]
    weights, without = _weights_for(est, run)
    answers = census_answers(run, table)
    return group_results(rows, labels, sizes, drawn, interval=est.interval, weights=weights, n_questions=without,
                         n_units=units, census=None if answers is None else group_census_means(answers, codes,
                                                                                                sizes.size))


def result_of(est, loop, n_draws=None):
    """The :class:`~faqstats.AccuracyResult` of a loop of ``est`` (an interim one from its first ``n_draws``)."""
    run, table = loop.run, loop.run.table()[:n_draws]
    partial = n_draws is not None
    n_questions = run.n_questions
    clustered = isinstance(run, ClusterRun)
    weights, without = _weights_for(est, run)
    answers = census_answers(run, table)
    census = None if answers is None else census_mean(answers, n_questions)
    if run.design == "stream":
        method, variance_method, df = "aipw", "design-based", None
        estimate = float(np.mean(run.terms)) if census is None else census
        var = float(np.sum(run.variance_terms)) / n_questions**2
    elif run.tracker is not None and run.tracker.stratified:
        groups = group_results_of(est, loop, n_draws)
        estimand = as_estimand(est.estimand)
        method, variance_method = estimand.stratified_method, "stratified martingale"
        estimate, var, df = combine_strata(groups, estimand.strata_shares(groups.n_questions, n_questions))
        if answers is not None:  # every group a census: the estimand's exact value
            estimate = estimand.census(answers, run.tracker.codes)
        df = None if np.isinf(df) else df
    elif run.tracker is not None and not as_estimand(est.estimand).is_bank_mean:
        # the headline is a weighted estimand: its own increments (estimands.py), same inference
        estimand = as_estimand(est.estimand)
        method = estimand.method
        estimate, var, df, variance_method = estimand.inference(
            run.tracker.increments()[:n_draws, 0], interval=est.interval, weights=weights, n_questions=without,
            answers=answers, codes=run.tracker.codes)
    elif clustered:
        estimate, var, df, method, variance_method = cluster_inference(est, run, table)
        if census is not None:
            estimate = census
    elif sample_mean_design(est.predictor, run.sampler):
        method, variance_method = "sample_mean", "finite-population"
        estimate, var = fpc_mean(table["outcome"], n_questions)
        df = interval_df(est.interval, table["outcome"])
    elif est.variance == "martingale":
        method = "pai"
        estimate, var, df, variance_method = pai_inference(
            table["increment"], interval=est.interval, weights=weights, n_questions=without, census=census)
    else:
        method, variance_method = "pai", "paper"
        estimate = float(table["increment"].mean())
        var = paper_variance(table["outcome"], table["prediction"], table["probability"], table["prediction_total"],
                             n_questions)
        if var < 0:
            warnings.warn("The paper's variance estimate is negative; reporting 0.", RuntimeWarning, stacklevel=4)
            var = 0.0
        df = interval_df(est.interval, table["increment"])
    if not np.isfinite(estimate) or not np.isfinite(var):
        raise FloatingPointError("Non-finite estimate or variance; check the sampler's probabilities.")
    rows = None if partial else confidence_rows(loop)
    units = np.unique(table["cluster" if clustered else "question"])  # costs are per cluster
    return AccuracyResult(
        estimate=float(estimate), std_error=float(np.sqrt(var)),
        n_queries=int(run.sizes[units].sum()) if clustered else int(units.size),  # distinct questions asked
        n_questions=n_questions, method=method, variance_method=variance_method, df=df,
        stop_reason=None if partial else loop.stop_reason,
        anytime_interval=None if rows is None else tuple(rows[-1, 1:]),
        anytime_alpha=confidence_alpha(est.confidence_sequence, est.stop_when_width),
        design=_design_label(est, run.sampler) + (f"; {run.n_clusters} clusters, one per draw" if clustered else ""),
        cost_spent=None if run.costs is None else float(run.costs[units].sum()),
        cost_budget=None if run.costs is None else est.budget_cost, interval_rule=est.interval)


def cluster_inference(est, run, table):
    """The cluster sample mean (uniform draws of equal clusters, no predictor) or the martingale inference."""
    if sample_mean_design(est.predictor, run.sampler) and np.all(run.sizes == run.sizes[0]):
        scale = run.n_clusters / run.n_questions  # theta = (C / N) mean_c Y_c
        estimate, var = fpc_mean(table["outcome"], run.n_clusters)
        return (scale * estimate, scale**2 * var, interval_df(est.interval, table["outcome"]),
                "cluster_sample_mean", "finite-population (clusters)")
    weights, without = _weights_for(est, run)
    estimate, var, df, variance_method = pai_inference(
        table["increment"], interval=est.interval, weights=weights, n_questions=without)
    return estimate, var, df, "pai-cluster", variance_method + " (clusters)"


def _design_label(est, sampler):
    """One line naming the predictor, the policy and the increment weights (for the summary)."""
    fm = est.predictor
    rank = getattr(fm, "n_components", None)
    predictor = "none" if fm is None else type(fm).__name__ + ("" if rank is None else f" (rank {rank})")
    if est.step_weights is not None:
        weights = "given (step_weights)"
    else:  # what pai_inference does without step_weights
        weights = "equal" if getattr(sampler, "replace", True) else "finite-population"
    return f"predictor {predictor}; policy {sampler!r}; increment weights {weights}"
