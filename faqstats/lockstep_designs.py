"""Groups, weighted estimands, costs and clusters in :func:`faqstats.batched.simulate`.

These designs hold per-run state that the tensor loop (:mod:`faqstats.lockstep`) does not carry:
an :class:`~faqstats.estimands.EstimandTracker` per run (groups, the macro or weighted estimand,
``min_group_share``, ``stratify``), a policy weighed by cost with the draws a cost budget buys,
or a law over clusters and cluster totals (:class:`~faqstats._engine.ClusterRun`). Here every
run is the one-run engine's own loop (:func:`~faqstats.loop_setup.new_loop`, as
:meth:`PAIEstimator.fit <faqstats.PAIEstimator.fit>` makes it), with its own
predictor's posterior, and the runs advance a round at a time in lockstep: run ``r`` draws its round from its own generator, is answered from
its row of the outcomes (:func:`~faqstats.loop_setup.answer_round`, as ``fit`` answers), and its
results are the estimator's (:func:`~faqstats.run_results.result_of`,
:func:`~faqstats.run_results.group_results_of`). So each run is ``PAIEstimator.fit`` exactly:
the same draws, estimates and generator state afterwards; the cost is one estimator's per run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._engine import Oracle
from .design import bank_size
from .loop_setup import answer_round, new_loop
from .run_results import group_results_of, result_of

__all__ = ["DesignConfiguration", "DesignRuns", "run_designs"]


@dataclass(frozen=True)
class DesignConfiguration:
    """An estimator's configuration as :func:`~faqstats.loop_setup.new_loop` and
    :func:`~faqstats.run_results.result_of` read it: :class:`~faqstats.PAIEstimator`'s parameters
    (the same names and defaults) and ``bank_size``. (The batched engine does not
    import the estimator: the estimator's module reaches the engine through the step weights.)

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


@dataclass
class DesignRuns:
    """The per-run columns :func:`run_designs` gathers (arrays over the runs, length ``R``)."""

    estimate: np.ndarray
    std_error: np.ndarray
    df: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n_queries: np.ndarray
    method: str
    increments: np.ndarray
    stop_reason: np.ndarray
    n_draws: np.ndarray
    anytime_low: np.ndarray | None
    anytime_high: np.ndarray | None
    cost_spent: np.ndarray | None
    group_labels: np.ndarray | None
    group_estimate: np.ndarray | None
    group_std_error: np.ndarray | None
    group_low: np.ndarray | None
    group_high: np.ndarray | None
    group_results: tuple | None


def run_designs(est, outcomes, rows, generators, alpha, *, groups=None, costs=None, clusters=None, progress=None):
    """Every run ``r`` of ``est`` on ``outcomes[rows[r]]`` with ``generators[r]``, rounds in lockstep.

    Parameters
    ----------
    est : DesignConfiguration
        The configuration (a :class:`~faqstats.PAIEstimator` works too; its ``random_state`` is
        not used: each run has its generator).
    outcomes : ndarray of shape (n_models, N)
        Complete outcomes in [0, 1].
    rows : ndarray of int, shape (R,)
    generators : list of numpy Generators, length R
        Used as ``PAIEstimator(random_state=g).fit`` uses its generator.
    alpha : float
        Level of the reported intervals (``AccuracyResult.conf_int``, the groups' ``conf_int``).
    groups, costs, clusters : array-like of shape (N,) or None
        As in :meth:`PAIEstimator.fit <faqstats.PAIEstimator.fit>`.
    progress : callable or None
        Called with the number of runs finished, once at the end.

    Returns
    -------
    DesignRuns

    Examples
    --------
    >>> import numpy as np
    >>> import faqstats as fq
    >>> z = np.tile([0.0, 1.0], (2, 10))
    >>> est = DesignConfiguration(sampler=fq.UniformSampler(), budget=6, estimand="macro")
    >>> runs = run_designs(est, z, np.array([0, 1]), [np.random.default_rng(s) for s in (0, 1)], 0.05,
    ...                    groups=np.arange(20) % 2)
    >>> runs.group_estimate.shape, runs.estimate.shape
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
    method = results[0].method if n_runs else "pai"
    return DesignRuns(column("estimate").astype(float), column("std_error").astype(float), df,
                      intervals[:, 0], intervals[:, 1], column("n_queries").astype(np.int64), method,
                      increments, np.array([x.stop_reason for x in results], dtype=object), n_draws,
                      any_low, any_high, spent, labels, g_est, g_se, g_low, g_high,
                      None if labels is None else tuple(per_group))
