"""Many PAI runs in lockstep: a batched torch engine for simulations.

:func:`simulate` advances ``R`` runs of :class:`~faqstats.PAIEstimator`'s loop together, each round a
few tensor operations over an ``R x N`` block: in float64 it asks the estimator's questions
(docs/architecture.md, "One loop"; memory and timings: docs/performance.md, "Batched engine").
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch

from ._inference import census_mean, fpc_mean, interval_df, pai_inference
from ._validation import check_alpha, check_generator
from .design import bank_size, check_configuration, confidence_alpha
from .intervals import interval_rule
from .lockstep import Lockstep
from .lockstep_designs import DesignConfiguration, run_designs
from .loop_setup import cost_design
from .predictor import resolve_predictor_keyword

__all__ = ["BatchedRuns", "simulate"]

_DTYPES = {"float32": torch.float32, "float64": torch.float64}

#: elements of one ``R x N`` block; runs are processed in chunks of at most this size
DEFAULT_MAX_ELEMENTS = 2**20
#: the same where the scores are kept between prediction refreshes (about 25 bytes per element in float64)
CACHED_MAX_ELEMENTS = 2**25


@dataclass(frozen=True)
class BatchedRuns:
    """Per-run results of :func:`simulate` (arrays of shape ``(R,)``).

    Attributes
    ----------
    estimate, std_error : ndarray
    df : ndarray
        Degrees of freedom of the t quantile (``inf`` for the normal quantile).
    low, high : ndarray
        Two-sided ``1 - alpha`` intervals, as :meth:`AccuracyResult.conf_int` gives them.
    n_queries : ndarray of int
        Distinct questions answered.
    method : str
        ``"pai"``, ``"sample_mean"`` or ``"aipw"``, as in :class:`~faqstats.AccuracyResult`.
    increments : ndarray of shape (R, budget) or None
        With ``keep_increments=True``: each run's ``phi_t`` (its outcomes for the sample mean).
    increment_ranges : ndarray of shape (R, budget, 2) or None
        With ``keep_increments=True``: the range of each ``phi_t`` known before its draw (NaN after a stop).
    stop_reason : ndarray of str or None
        ``"budget"`` or ``"width"``, as :attr:`AccuracyResult.stop_reason`.
    n_draws : ndarray of int or None
        Draws each run made; None for the stream design.
    anytime_low, anytime_high : ndarray or None
        With a confidence sequence: each run's sequence after its last round.
    anytime_alpha : float or None
        The confidence sequence's level, as :attr:`AccuracyResult.anytime_alpha`.
    cost_spent : ndarray or None
        With ``costs``: each run's summed cost of the distinct questions asked.
    group_labels : ndarray of shape (G,) or None
        With ``groups``: the sorted group labels (the columns of the group arrays).
    group_estimate, group_std_error, group_low, group_high : ndarray of shape (R, G) or None
        With ``groups``: every run's group estimates, standard errors and ``1 - alpha`` intervals.
    group_results : tuple of GroupResults or None
        With ``groups``: each run's :class:`~faqstats.GroupResults`.

    Examples
    --------
    >>> import faqstats as fq
    >>> z = fq.make_synthetic_bank(n_models=30, n_questions=100, n_new=2, random_state=0).new_outcomes
    >>> runs = simulate(z, [0, 1], sampler=fq.UniformSampler(), budget=20, keep_increments=True)
    >>> runs.method, runs.estimate.shape, runs.increments.shape
    ('sample_mean', (2,), (2, 20))
    """

    estimate: np.ndarray
    std_error: np.ndarray
    df: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n_queries: np.ndarray
    method: str
    increments: np.ndarray | None = None
    increment_ranges: np.ndarray | None = None
    stop_reason: np.ndarray | None = None
    n_draws: np.ndarray | None = None
    anytime_low: np.ndarray | None = None
    anytime_high: np.ndarray | None = None
    anytime_alpha: float | None = None
    cost_spent: np.ndarray | None = None
    group_labels: np.ndarray | None = None
    group_estimate: np.ndarray | None = None
    group_std_error: np.ndarray | None = None
    group_low: np.ndarray | None = None
    group_high: np.ndarray | None = None
    group_results: tuple | None = None


def simulate(
    outcomes,
    generators,
    *,
    predictor=None,
    sampler=None,
    budget=100,
    rows=None,
    interval="robust-t",
    alpha=0.05,
    device="cpu",
    dtype="float64",
    max_elements=None,
    progress=None,
    keep_increments=False,
    step_weights=None,
    predict_every=1,
    keep_ranges=None,
    batch_size=1,
    confidence_sequence=False,
    stop_when_width=None,
    variance="martingale",
    groups=None,
    costs=None,
    clusters=None,
    estimand="micro",
    min_group_share=0.0,
    stratify=False,
    budget_cost=None,
    cluster_score="root-sum-square",
    **deprecated,
):
    """Run ``PAIEstimator(predictor, sampler, budget)`` once per generator, in lockstep.

    Parameters
    ----------
    outcomes : array-like of shape (n_models, N)
        The new models' complete outcomes in [0, 1].
    generators : sequence of numpy Generators (or seeds), length R
        One per run, used exactly as ``PAIEstimator(random_state=g)`` would use it.
    predictor : fitted Predictor or None
        Any fitted predictor (one of your own has its one-run posteriors driven side by side).
    sampler : Sampler, StreamSampler or None
        Any policy (``None`` is ``HybridSampler()``); one with numpy-only ``scores`` is asked run by run.
    budget : int
    rows : array-like of int, shape (R,), or None
        Which row of ``outcomes`` run ``r`` evaluates; ``None`` means run ``r`` uses row ``r``.
    interval : {"robust-t", "t", "normal"}, another registered name, or IntervalRule
        As in :class:`~faqstats.PAIEstimator`.
    alpha : float
        Level of the reported intervals.
    device : str
        Torch device ("cpu", "cuda", ...).
    dtype : {"float64", "float32"}
        float64 reproduces the sequential estimator to rounding; float32 is faster on GPUs.
    max_elements : int or None
        Runs go in chunks of at most ``max_elements // N`` (halved, with a ``ResourceWarning``, when
        out of memory). ``None``: :data:`DEFAULT_MAX_ELEMENTS`, or :data:`CACHED_MAX_ELEMENTS` where scores are kept.
    progress : callable or None
        Called with the number of runs finished after each chunk.
    keep_increments : bool, default=False
        Also return every run's increments and their ranges (sequential samplers only).
    step_weights : array-like or None
        As in :class:`~faqstats.PAIEstimator` (weighted increments).
    predict_every : int, default=1
        As in :class:`~faqstats.PAIEstimator` (predictions refreshed on a schedule).
    keep_ranges : bool or None, default=None
        Whether ``keep_increments`` includes the ranges (``None``: it does; they cost a few passes per query).
    batch_size, confidence_sequence, stop_when_width : optional
        As in :class:`~faqstats.PAIEstimator` (each run stops at its own round; with ``stop_when_width``,
        ``alpha`` must be the sequence's level).
    variance : {"martingale"}
        ``variance="paper"`` is refused by name (``ValueError``).
    groups, costs, clusters : array-like of shape (N,) or None
        As in :meth:`PAIEstimator.fit <faqstats.PAIEstimator.fit>`.
    estimand, min_group_share, stratify, budget_cost, cluster_score : optional
        As in :class:`~faqstats.PAIEstimator`. With groups, clusters or these settings every run is the
        estimator's own loop, on the host (no ``increment_ranges``).
    **deprecated
        ``factor_model``: the old name of ``predictor`` (accepted with a ``FutureWarning``).

    Returns
    -------
    BatchedRuns

    Examples
    --------
    >>> import numpy as np
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=150, n_components=3, random_state=0)
    >>> fm = fq.LogisticFactorModel(n_components=3, max_iter=200, random_state=0).fit(bank.history)
    >>> runs = simulate(bank.new_outcomes, [np.random.default_rng(s) for s in range(4)], predictor=fm,
    ...                 budget=20, rows=[0, 0, 1, 1])
    >>> est = fq.PAIEstimator(fm, budget=20, random_state=np.random.default_rng(2)).fit(bank.new_outcomes[1])
    >>> bool(abs(runs.estimate[2] - est.estimate_) < 1e-9)
    True
    """
    factor_model = resolve_predictor_keyword(predictor, deprecated, "simulate")
    alpha = check_alpha(alpha)
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, got {dtype!r}.")
    Z = np.asarray(outcomes, dtype=float)
    if Z.ndim != 2:
        raise ValueError(f"outcomes must be a 2-D (models x questions) array, got shape {Z.shape}.")
    if np.isnan(Z).any() or Z.min() < 0 or Z.max() > 1:
        raise ValueError("outcomes must be complete (no NaN) with values in [0, 1].")
    gens = [check_generator(g) for g in generators]
    R, N = len(gens), Z.shape[1]
    rows = np.arange(R) if rows is None else np.asarray(rows, dtype=np.int64)
    if rows.shape != (R,) or (R and (rows.min() < 0 or rows.max() >= Z.shape[0])):
        raise ValueError(f"rows must hold one row index of outcomes per generator ({R}).")
    # the estimator's own checks (budget, sampler, factor model, bank size, interval)
    n_fm = bank_size(factor_model)
    if n_fm is not None and n_fm != N:
        raise ValueError(f"outcomes cover {N} questions but the factor model was fitted on {n_fm}.")
    design = dict(estimand=estimand, min_group_share=min_group_share, stratify=stratify, budget_cost=budget_cost,
                  cluster_score=cluster_score)
    est = DesignConfiguration(factor_model, sampler, budget, variance=variance, interval=interval,
                              batch_size=batch_size, stop_when_width=stop_when_width,
                              confidence_sequence=confidence_sequence, step_weights=step_weights, dtype=dtype,
                              predict_every=predict_every, **design)
    if groups is not None or clusters is not None or dict(design, budget_cost=None) != _PLAIN_DESIGN:
        # per-run state: the estimator's own loops (which check the configuration themselves)
        cs_alpha = _sequence_level(alpha, variance, confidence_sequence, stop_when_width)
        runs = run_designs(est, Z, rows, gens, alpha, groups=groups, costs=costs, clusters=clusters,
                           progress=progress)
        return BatchedRuns(**dict(runs, increments=runs["increments"] if keep_increments else None),
                           anytime_alpha=cs_alpha)
    # costs: the policy weighed by cost (its scores over the runs' tensors too) and the draws budget_cost buys
    cost_sampler, budget, costs, _ = cost_design(est, N, None, costs)
    sampler = sampler if costs is None else cost_sampler
    sampler = check_configuration(N, budget, sampler, predictor=factor_model, interval=interval,
                                  step_weights=step_weights, predict_every=predict_every, batch_size=batch_size,
                                  variance=variance, stop_when_width=stop_when_width,
                                  confidence_sequence=confidence_sequence)
    cs_alpha = _sequence_level(alpha, variance, confidence_sequence, stop_when_width)
    engine = Lockstep(factor_model, sampler, int(budget), N, torch.device(device), _DTYPES[dtype])
    engine.predict_every = int(predict_every)
    engine.costs = None if costs is None else engine.tensor(np.array(costs))  # (a writable copy)
    engine.batch_size = int(batch_size)
    engine.stops = None if cs_alpha is None else (cs_alpha, stop_when_width)
    if keep_increments and engine.stream:
        raise ValueError("keep_increments is for sequential samplers; BernoulliAIPW has no per-query increments.")
    engine.keep_ranges = (bool(keep_increments) and (keep_ranges is None or bool(keep_ranges))) or cs_alpha is not None
    if max_elements is None:  # larger chunks where a query costs little per run (kept scores)
        cheap = (not engine.stream and sampler.batched and sampler.scores_follow_predictions
                 and (factor_model is None or engine.predict_every > 1)
                 and not engine.keep_ranges)
        max_elements = CACHED_MAX_ELEMENTS if cheap else DEFAULT_MAX_ELEMENTS
    chunk = max(1, int(max_elements) // max(N, 1))
    chunk = -(-R // -(-R // chunk)) if R else chunk  # as many chunks, of even sizes
    engine.outcomes = engine.tensor(Z)  # one copy of the rows, read by index (no runs x N copy)
    parts = []
    start = 0
    while start < R:
        sl = slice(start, min(R, start + chunk))
        states = [g.bit_generator.state for g in gens[sl]]
        try:
            parts.append(engine.run(rows[sl], gens[sl]))
        except Exception as exc:
            if sl.stop - sl.start == 1 or not _out_of_memory(exc):
                raise
            for g, state in zip(gens[sl], states):
                g.bit_generator.state = state
            chunk = (sl.stop - sl.start) // 2
            del exc
            engine.posterior = None  # the failed chunk's blocks, before the smaller chunk allocates its own
            if engine.device.type == "cuda":
                torch.cuda.empty_cache()
            warnings.warn(f"simulate: out of memory with {sl.stop - sl.start} runs per chunk; going on with {chunk}.",
                          ResourceWarning, stacklevel=2)
            continue
        if progress is not None:
            progress(sl.stop - sl.start)
        start = sl.stop
    if not parts:
        empty = np.empty(0)
        return BatchedRuns(empty, empty, empty, empty, empty, np.empty(0, np.int64), engine.method)
    n_queries, values, var_terms, ranges, n_draws, reasons, any_low, any_high, spent = (
        np.concatenate(x) if x[0] is not None else None for x in zip(*parts))
    lengths = np.full(R, values.shape[1]) if n_draws is None else n_draws
    estimate, var, df = np.empty(R), np.empty(R), np.empty(R)
    for n in np.unique(lengths):  # runs that stopped together: their first n values (all runs, usually)
        at = np.flatnonzero(lengths == n)
        census = census_mean(Z[rows[at]], N) if engine.method == "pai" and not sampler.replace and n == N else None
        estimate[at], var[at], df[at] = _inference(engine.method, values[at, :n],
                                                   None if var_terms is None else var_terms[at],
                                                   interval, step_weights, N, sampler, census)
    if not (np.all(np.isfinite(estimate)) and np.all(np.isfinite(var))):
        raise FloatingPointError("Non-finite estimate or variance in a batched run.")
    se = np.sqrt(var)
    low, high = interval_rule(interval).interval(estimate, se, alpha=alpha, df=df)
    if reasons is not None:  # stopped on width: the sequence's interval is the one valid (AccuracyResult.conf_int)
        width = reasons == "width"
        low[width], high[width] = any_low[width], any_high[width]
    return BatchedRuns(estimate, se, df, low, high, n_queries.astype(np.int64), engine.method,
                       values if keep_increments else None, ranges if keep_increments else None,
                       np.full(R, "budget", dtype=object) if reasons is None else reasons,
                       None if engine.stream else lengths.astype(np.int64), any_low, any_high, cs_alpha, spent)


#: the estimator's defaults for the settings only the one-run loops take (run_designs)
_PLAIN_DESIGN = dict(estimand="micro", min_group_share=0.0, stratify=False, budget_cost=None,
                     cluster_score="root-sum-square")


def _sequence_level(alpha, variance, confidence_sequence, stop_when_width):
    """The confidence sequence's level (None without one), after refusing what the engine does not cover."""
    if variance != "martingale":
        raise ValueError(f"simulate does not cover variance={variance!r}: "
                         "run faqstats.PAIEstimator once per run for it.")
    cs_alpha = confidence_alpha(confidence_sequence, stop_when_width)
    if stop_when_width is not None and abs(alpha - cs_alpha) > 1e-12:
        raise ValueError(f"alpha={alpha} but with stop_when_width a run that stops on width reports its confidence "
                         f"sequence's interval, at level {cs_alpha}: pass alpha={cs_alpha} "
                         "(or confidence_sequence=alpha).")
    return cs_alpha


def _inference(method, values, var_terms, interval, step_weights, N, sampler, census=None):
    """``(estimate, variance, df)`` of runs of equal length from their values (as result_of infers them);
    ``census``: each run's exact mean when it asked every question (without replacement)."""
    if method == "aipw":
        return values.sum(1) / N, var_terms.sum(1) / N**2, np.full(values.shape[0], np.inf)
    if method == "sample_mean":
        return (*fpc_mean(values, N), interval_df(interval, values))
    estimate, var, df, _ = pai_inference(values, interval=interval, weights=step_weights,
                                         n_questions=None if sampler.replace else N, census=census)
    return estimate, var, df


def _out_of_memory(exc):
    """Whether ``exc`` is an allocation failure (host or device) that a smaller chunk may avoid."""
    if isinstance(exc, MemoryError) or isinstance(exc, getattr(torch, "OutOfMemoryError", ())):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("out of memory" in text.lower() or "can't allocate memory" in text)
