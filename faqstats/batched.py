"""Many PAI runs in lockstep: a batched torch engine for simulations.

:func:`simulate` advances ``R`` runs of :class:`~faqstats.PAIEstimator`'s loop together: in float64 it asks
the estimator's questions (docs/architecture.md, "One loop"; timings: docs/performance.md, "Batched engine").
"""

import warnings
from dataclasses import dataclass

import numpy as np
import torch

from ._engine import Oracle
from ._inference import all_equal_interval, census_mean, fpc_mean, interval_df, pai_inference
from ._validation import check_alpha, check_generator
from .design import EstimatorParameters, bank_size, check_estimator, confidence_alpha, resolve_bank_size
from .intervals import interval_rule
from .lockstep import Lockstep
from .loop_setup import answer_round, cost_design, new_loop
from .predictor import resolve_predictor_keyword
from .run_results import group_results_of, result_of

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
    estimate, std_error, df, low, high : ndarray
        As :class:`~faqstats.AccuracyResult` gives them (``df`` is ``inf`` for the normal quantile).
    n_queries : ndarray of int
        Distinct questions answered.
    method : str
        ``"pai"``, ``"sample_mean"`` or ``"aipw"``.
    increments : ndarray of shape (R, budget) or None
        With ``keep_increments=True``: each run's ``phi_t`` (its outcomes for the sample mean).
    increment_ranges : ndarray of shape (R, budget, 2) or None
        With ``keep_increments=True``: the range of each ``phi_t`` known before its draw (NaN after a stop).
    stop_reason, n_draws : ndarray or None
        ``"budget"`` or ``"width"``, and the draws each run made (None for the stream design).
    anytime_low, anytime_high, anytime_alpha : ndarray, ndarray, float or None
        With a confidence sequence: each run's sequence after its last round, and its level.
    cost_spent : ndarray or None
        With ``costs``: each run's summed cost of the distinct questions asked.
    group_labels : ndarray of shape (G,) or None
    group_estimate, group_std_error, group_low, group_high : ndarray of shape (R, G) or None
    group_results : tuple of GroupResults or None
        With ``groups``: the sorted labels, every run's group estimates, errors, intervals and results.

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


def simulate(outcomes, generators, *, predictor=None, sampler=None, budget=100, rows=None, interval="robust-t",
             alpha=0.05, device="cpu", dtype="float64", max_elements=None, progress=None, keep_increments=False,
             step_weights=None, predict_every=1, keep_ranges=None, batch_size=1, confidence_sequence=False,
             stop_when_width=None, variance="martingale", groups=None, costs=None, clusters=None, estimand="micro",
             min_group_share=0.0, stratify=False, budget_cost=None, cluster_score="root-sum-square", **deprecated):
    """Run ``PAIEstimator(predictor, sampler, budget)`` once per generator, in lockstep.

    Parameters
    ----------
    outcomes : array-like of shape (n_models, N)
        The new models' complete outcomes in [0, 1].
    generators : sequence of numpy Generators (or seeds), length R
        One per run, used exactly as ``PAIEstimator(random_state=g)`` would use it.
    predictor, sampler, budget
        As in :class:`~faqstats.PAIEstimator` (any predictor and policy).
    rows : array-like of int, shape (R,), or None
        Which row of ``outcomes`` run ``r`` evaluates; ``None`` means run ``r`` uses row ``r``.
    interval, alpha
        As in :class:`~faqstats.PAIEstimator` and the level of the reported intervals.
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
    step_weights, predict_every
        As in :class:`~faqstats.PAIEstimator`.
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
    resolve_bank_size(bank_size(factor_model), N)
    est = EstimatorParameters(factor_model, sampler, budget, variance, interval, batch_size, stop_when_width,
                              confidence_sequence, step_weights, dtype=dtype, predict_every=predict_every,
                              estimand=estimand, min_group_share=min_group_share, stratify=stratify,
                              budget_cost=budget_cost, cluster_score=cluster_score)
    if variance != "martingale":
        raise ValueError(f"simulate does not cover variance={variance!r}: "
                         "run faqstats.PAIEstimator once per run for it.")
    cs_alpha = confidence_alpha(confidence_sequence, stop_when_width)  # the level of the runs' sequences
    if stop_when_width is not None and abs(alpha - cs_alpha) > 1e-12:
        raise ValueError(f"alpha={alpha} but with stop_when_width a run that stops on width reports its confidence "
                         f"sequence's interval, at level {cs_alpha}: pass alpha={cs_alpha} "
                         "(or confidence_sequence=alpha).")
    if (groups is not None or clusters is not None
            or (estimand, min_group_share, stratify, cluster_score) != ("micro", 0.0, False, "root-sum-square")):
        # per-run state the tensors do not carry (a tracker, a law over clusters): the estimator's own loops
        runs = run_designs(est, Z, rows, gens, alpha, groups=groups, costs=costs, clusters=clusters,
                           progress=progress)
        return BatchedRuns(**dict(runs, increments=runs["increments"] if keep_increments else None),
                           anytime_alpha=cs_alpha)
    # costs: the policy weighed by cost (its scores over the runs' tensors too) and the draws budget_cost buys
    cost_sampler, budget, costs, _ = cost_design(est, N, None, costs)
    sampler = check_estimator(est, N, budget, None if costs is None else cost_sampler)
    engine = Lockstep(factor_model, sampler, int(budget), N, torch.device(device), _DTYPES[dtype])
    engine.predict_every, engine.batch_size = int(predict_every), int(batch_size)
    engine.costs = None if costs is None else engine.tensor(np.array(costs))  # (a writable copy)
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
    parts, start = [], 0
    while start < R:
        sl = slice(start, min(R, start + chunk))
        states = [g.bit_generator.state for g in gens[sl]]
        try:
            parts.append(engine.run(rows[sl], gens[sl]))
        except Exception as exc:
            text = str(exc)  # an allocation failure (host or device) that a smaller chunk may avoid?
            oom = isinstance(exc, (MemoryError, getattr(torch, "OutOfMemoryError", ()))) or isinstance(
                exc, RuntimeError) and ("out of memory" in text.lower() or "can't allocate memory" in text)
            if sl.stop - sl.start == 1 or not oom:
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
        v = values[at, :n]
        if engine.method == "aipw":  # as result_of infers them
            estimate[at], var[at], df[at] = v.sum(1) / N, var_terms[at].sum(1) / N**2, np.inf
        elif engine.method == "sample_mean":
            (estimate[at], var[at]), df[at] = fpc_mean(v, N), interval_df(interval, v)
        else:  # a census (every question asked, without replacement) reports the answers' exact mean
            census = census_mean(Z[rows[at]], N) if not sampler.replace and n == N else None
            estimate[at], var[at], df[at], _ = pai_inference(v, interval=interval, weights=step_weights,
                                                             n_questions=None if sampler.replace else N, census=census)
    if not (np.all(np.isfinite(estimate)) and np.all(np.isfinite(var))):
        raise FloatingPointError("Non-finite estimate or variance in a batched run.")
    se = np.sqrt(var)
    low, high = interval_rule(interval).interval(estimate, se, alpha=alpha, df=df)
    if engine.method == "sample_mean":  # all answers equal: the exact interval, as AccuracyResult.conf_int gives
        flat = (var == 0.0) & (lengths < N)
        for n in np.unique(lengths[flat]):
            at = np.flatnonzero(flat & (lengths == n))
            low[at], high[at] = all_equal_interval(estimate[at], n, N, alpha)
    if reasons is not None:  # stopped on width: the sequence's interval is the one valid (AccuracyResult.conf_int)
        width = reasons == "width"
        low[width], high[width] = any_low[width], any_high[width]
    return BatchedRuns(estimate, se, df, low, high, n_queries.astype(np.int64), engine.method,
                       values if keep_increments else None, ranges if keep_increments else None,
                       np.full(R, "budget", dtype=object) if reasons is None else reasons,
                       None if engine.stream else lengths.astype(np.int64), any_low, any_high, cs_alpha, spent)


def run_designs(est, outcomes, rows, generators, alpha, *, groups=None, costs=None, clusters=None, progress=None):
    """Every run ``r`` of ``est`` (``fit`` with ``generators[r]``) on ``outcomes[rows[r]]``, rounds in lockstep:
    :class:`BatchedRuns`' fields but ``increment_ranges`` and ``anytime_alpha``.
    """
    n_runs, n_questions = len(generators), outcomes.shape[1]
    loops = [new_loop(est, n_questions, g, groups=groups, costs=costs, clusters=clusters) for g in generators]
    oracles = [Oracle(outcomes[i], n_questions) for i in rows]
    going = list(range(n_runs))
    while going:  # a round of every run still going, each from its own generator
        for r in going:
            answer_round(loops[r], generators[r], oracles[r])
        going = [r for r in going if not loops[r].done]
    results = [result_of(est, loop) for loop in loops]
    per_group = [group_results_of(est, loop) for loop in loops]
    if progress is not None:
        progress(n_runs)
    column = lambda name: np.array([getattr(x, name) for x in results])  # noqa: E731
    intervals = np.array([x.conf_int(alpha=alpha) for x in results], dtype=float).reshape(n_runs, 2)
    n_draws = np.array([len(loop.run.records) for loop in loops], dtype=np.int64)
    increments = np.full((n_runs, int(n_draws.max(initial=0))), np.nan)
    for r, loop in enumerate(loops):  # the estimate's values: increments, or outcomes for the sample mean
        table = loop.run.table()
        increments[r, :n_draws[r]] = table["outcome" if results[r].method.endswith("sample_mean") else "increment"]
    any_low = any_high = None
    if n_runs and results[0].anytime_interval is not None:
        any_low, any_high = np.array([x.anytime_interval for x in results], dtype=float).T
    labels = g_est = g_se = g_low = g_high = None
    if n_runs and per_group[0] is not None:
        labels = per_group[0].labels
        g_est, g_se = (np.stack([getattr(g, k) for g in per_group]) for k in ("estimate", "std_error"))
        bounds = np.stack([g.conf_int(alpha=alpha).to_numpy(dtype=float) for g in per_group])
        g_low, g_high = bounds[..., 0], bounds[..., 1]
    df = np.array([np.inf if x.df is None else x.df for x in results], dtype=float)
    return dict(estimate=column("estimate").astype(float), std_error=column("std_error").astype(float), df=df,
                low=intervals[:, 0], high=intervals[:, 1], n_queries=column("n_queries").astype(np.int64),
                method=results[0].method if n_runs else "pai", increments=increments,
                stop_reason=np.array([x.stop_reason for x in results], dtype=object), n_draws=n_draws,
                anytime_low=any_low, anytime_high=any_high, group_labels=labels,
                cost_spent=None if costs is None else column("cost_spent").astype(float),
                group_estimate=g_est, group_std_error=g_se, group_low=g_low, group_high=g_high,
                group_results=None if labels is None else tuple(per_group))
