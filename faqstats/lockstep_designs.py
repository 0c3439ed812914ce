"""Groups, weighted estimands, costs and clusters in :func:`faqstats.batched.simulate`.

These designs hold per-run state the tensor loop does not carry (an estimand tracker, a law over
clusters): every run is the one-run engine's own loop (:func:`~faqstats.loop_setup.new_loop`), the
runs advancing a round at a time, so each is ``PAIEstimator.fit`` exactly, at one estimator's cost.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._engine import Oracle
from .design import bank_size
from .loop_setup import answer_round, new_loop
from .run_results import group_results_of, result_of

__all__ = ["DesignConfiguration", "run_designs"]


@dataclass(frozen=True)
class DesignConfiguration:
    """:class:`~faqstats.PAIEstimator`'s parameters (same names and defaults) and ``bank_size``, as
    :func:`~faqstats.loop_setup.new_loop` reads them (the batched engine does not import the estimator).

    Examples
    --------
    >>> import faqstats as fq
    >>> from faqstats.design import check_estimator
    >>> check_estimator(DesignConfiguration(sampler=fq.UniformSampler(), budget=5), 20)
    UniformSampler()
    """

    predictor: object = None
    sampler: object = None
    budget: int = 100
    variance: str = "martingale"
    interval: object = "robust-t"
    batch_size: int = 1
    stop_when_width: float | None = None
    confidence_sequence: object = False
    step_weights: object = None
    dtype: str = "float64"
    predict_every: int = 1
    estimand: object = "micro"
    min_group_share: float = 0.0
    stratify: bool = False
    budget_cost: float | None = None
    cluster_score: str = "root-sum-square"

    @property
    def factor_model(self):
        """The ``predictor`` (its old name, as the estimator has it)."""
        return self.predictor

    def bank_size(self):
        """Questions of the predictor's bank, or ``None`` without a predictor."""
        return bank_size(self.predictor)


def run_designs(est, outcomes, rows, generators, alpha, *, groups=None, costs=None, clusters=None, progress=None):
    """Every run ``r`` of ``est`` on ``outcomes[rows[r]]`` with ``generators[r]``, rounds in lockstep.

    Parameters
    ----------
    est : DesignConfiguration
        The configuration (a :class:`~faqstats.PAIEstimator` works too).
    outcomes : ndarray of shape (n_models, N)
        Complete outcomes in [0, 1].
    rows : ndarray of int, shape (R,)
    generators : list of numpy Generators, length R
        Used as ``PAIEstimator(random_state=g).fit`` uses its generator.
    alpha : float
        Level of the reported intervals.
    groups, costs, clusters : array-like of shape (N,) or None
        As in :meth:`PAIEstimator.fit <faqstats.PAIEstimator.fit>`.
    progress : callable or None
        Called with the number of runs finished, once at the end.

    Returns
    -------
    dict
        :class:`~faqstats.batched.BatchedRuns`' fields but ``increment_ranges`` and ``anytime_alpha``.

    Examples
    --------
    >>> import numpy as np
    >>> import faqstats as fq
    >>> z = np.tile([0.0, 1.0], (2, 10))
    >>> est = DesignConfiguration(sampler=fq.UniformSampler(), budget=6, estimand="macro")
    >>> runs = run_designs(est, z, np.array([0, 1]), [np.random.default_rng(s) for s in (0, 1)], 0.05,
    ...                    groups=np.arange(20) % 2)
    >>> runs["group_estimate"].shape, runs["estimate"].shape
    ((2, 2), (2,))
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
    width = max(int(n_draws.max()), 0) if n_runs else 0
    increments = np.full((n_runs, width), np.nan)
    for r, loop in enumerate(loops):  # the estimate's values: increments, or outcomes for the sample mean
        table = loop.run.table()
        increments[r, :n_draws[r]] = table["outcome" if results[r].method.endswith("sample_mean") else "increment"]
    anytime = [x.anytime_interval for x in results]
    any_low = any_high = None
    if n_runs and anytime[0] is not None:
        any_low, any_high = (np.array([a[i] for a in anytime], dtype=float) for i in (0, 1))
    spent = None if costs is None else column("cost_spent").astype(float)
    df = np.array([np.inf if x.df is None else x.df for x in results], dtype=float)
    labels = g_est = g_se = g_low = g_high = None
    if n_runs and per_group[0] is not None:
        labels = per_group[0].labels
        g_est = np.stack([g.estimate for g in per_group])
        g_se = np.stack([g.std_error for g in per_group])
        bounds = np.stack([g.conf_int(alpha=alpha).to_numpy(dtype=float) for g in per_group])
        g_low, g_high = bounds[..., 0], bounds[..., 1]
    return dict(estimate=column("estimate").astype(float), std_error=column("std_error").astype(float), df=df,
                low=intervals[:, 0], high=intervals[:, 1], n_queries=column("n_queries").astype(np.int64),
                method=results[0].method if n_runs else "pai", increments=increments,
                stop_reason=np.array([x.stop_reason for x in results], dtype=object), n_draws=n_draws,
                anytime_low=any_low, anytime_high=any_high, cost_spent=spent, group_labels=labels,
                group_estimate=g_est, group_std_error=g_se, group_low=g_low, group_high=g_high,
                group_results=None if labels is None else tuple(per_group))
