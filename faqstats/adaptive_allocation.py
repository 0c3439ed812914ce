"""Adaptive allocation of a leaderboard's queries across models, with anytime-valid joint intervals.

``stop="best"`` and ``"rank-width"``: elimination on shared draws (:mod:`faqstats.pairwise_elimination`).
``stop="budget"``: every model has its own PAI run and betting confidence sequence at level ``1 - alpha / K``;
the next query goes to the leader or its strongest challenger, whichever has the wider interval (LUCB).
"""

import numbers
from typing import NamedTuple

import numpy as np
from sklearn.base import clone

from ._engine import Oracle
from ._inference import pai_inference
from ._progress import progress_bar
from ._validation import check_alpha, check_generator, check_scalar
from .confseq import BettingConfidenceSequence
from .design import EstimatorParameters, outcomes_bank_size
from .joint import JointResults
from .loop_setup import answer_round, new_loop
from .pairwise_elimination import fit_pairwise

__all__ = ["STOP_RULES", "AdaptiveFit", "fit_adaptive", "lucb_choice"]

#: The adaptive design's stopping rules: spend the budget, stop once the best model is identified, or once every
#: rank interval is at most ``rank_width`` wide (``worst - best``).
STOP_RULES = ("budget", "best", "rank-width")
#: Queries every model gets first, in turn (a variance needs two increments).
WARMUP = 2


class AdaptiveFit(NamedTuple):
    """What :func:`fit_adaptive` returns.

    Parameters
    ----------
    result : JointResults
        The leaderboard, its intervals the confidence sequences' bounds at the stop.
    order : ndarray of shape (n_queries,)
        The model asked at each query, in order.
    stop_reason : {"budget", "best", "rank-width", "exhausted"}
        Why querying stopped: the budget was spent, the best was identified, every rank interval was
        narrow enough, or every question of every model was asked.
    """

    result: JointResults
    order: np.ndarray
    stop_reason: str


def lucb_choice(estimate, low, high, open_models):
    """The model to query next: the leader (highest estimate) or its strongest challenger (highest
    upper bound among the others), whichever interval is wider; a model that cannot be queried any
    more gives way to the other, and if both are closed the widest open interval is taken.

    Parameters
    ----------
    estimate : array-like of shape (K,)
        Every model's current estimate.
    low, high : array-like of shape (K,)
        Every model's current interval.
    open_models : array-like of bool of shape (K,)
        Whether each model can still be queried (at least one must).

    Returns
    -------
    int

    Examples
    --------
    >>> lucb_choice([0.70, 0.68, 0.30], [0.60, 0.50, 0.10], [0.80, 0.85, 0.50], [True, True, True])
    1
    >>> lucb_choice([0.70, 0.68, 0.30], [0.60, 0.50, 0.10], [0.80, 0.85, 0.50], [True, False, True])
    0
    """
    est, low, high = (np.asarray(v, dtype=float) for v in (estimate, low, high))
    open_models = np.asarray(open_models, dtype=bool)
    if not open_models.any():
        raise ValueError("no model can be queried any more.")
    leader = int(np.argmax(est))
    challenger = int(np.argmax(np.where(np.arange(est.size) == leader, -np.inf, high)))
    width = high - low
    pair = [m for m in sorted((leader, challenger), key=lambda m: -width[m]) if open_models[m]]
    if pair:
        return pair[0]
    return int(np.argmax(np.where(open_models, width, -np.inf)))


def bet_horizon(budget, n_models):
    """The queries per model the confidence sequences' bets are tuned for (fixed before the first query)."""
    return max(budget // n_models, WARMUP)


class _Model:
    """One model's run, oracle, confidence sequence and draw generator."""

    def __init__(self, board, outcomes, n_questions, alpha, horizon, rng):
        sampler = None if board.sampler is None else clone(board.sampler)
        replace = bool(getattr(sampler, "replace", False))
        cap = board.budget if replace else n_questions  # without replacement: each question once
        est = EstimatorParameters(board.predictor, sampler, cap, interval=board.interval)
        self.loop = new_loop(est, n_questions)
        if self.loop.run.design != "sequential":
            raise ValueError("the adaptive design needs a sequential sampler (one law over the bank), not "
                             f"{type(self.loop.run.sampler).__name__}.")
        self.loop.cs = BettingConfidenceSequence(alpha=alpha, truncation=0.9, horizon=horizon)
        self.oracle, self.rng, self.replace, self.n_questions = Oracle(outcomes, n_questions), rng, replace, n_questions
        self.sum, self.n = 0.0, 0

    @property
    def open(self):
        return not self.loop.done

    def query(self):
        """Ask one question; return the model's interval after it (exact once every question is answered)."""
        before = len(self.loop.run.records)
        answer_round(self.loop, self.rng, self.oracle)
        phis = [row[3] for row in self.loop.run.records[before:]]
        self.sum, self.n = self.sum + float(np.sum(phis)), self.n + len(phis)
        census = self.census()
        return (census, census) if census is not None else self.loop.cs.interval()

    def census(self):
        """The model's exact accuracy once every question is answered (without replacement), else None."""
        if self.replace or self.n < self.n_questions:
            return None
        return float(np.mean(list(self.oracle.cache.values())))

    def inference(self, interval):
        """``(estimate, variance, df)`` from the model's increments in its own query order."""
        phi = self.loop.run.table()["increment"]
        estimate, var, df, _ = pai_inference(phi, interval=interval, census=self.census(),
                                             n_questions=None if self.replace else self.n_questions)
        return estimate, var, np.inf if df is None else df


def fit_adaptive(board, models, names):
    """Run the adaptive design for ``board`` (a LeaderboardEstimator) over ``models``.

    Each model's increments, in its own query order, are martingale differences for the whole
    experiment (the choice of model is made before the draw), so its betting confidence sequence
    at level ``1 - alpha / K`` holds at every stopping time, and all K hold at once with probability
    at least ``1 - alpha`` (union bound). The point estimates are each model's own-order PAI
    estimates: consistent, but over a data-dependent number of queries not exactly unbiased; the
    intervals, not the estimates, carry the guarantee.

    Parameters
    ----------
    board : LeaderboardEstimator
        Its ``predictor``, ``sampler``, ``budget`` (total queries), ``stop``, ``alpha``, ``interval``,
        ``random_state`` and ``verbose`` are used (and ``rank_width``, an int >= 0, with
        ``stop="rank-width"``).
    models : list
        Each model's outcomes (array of shape (N,) or callable).
    names : list of str
        The models' names.

    Returns
    -------
    AdaptiveFit

    Examples
    --------
    >>> import faqstats as fq
    >>> Z = np.random.default_rng(0).random((3, 400)) < np.array([[0.9], [0.5], [0.3]])
    >>> board = fq.LeaderboardEstimator(None, fq.UniformSampler(), budget=600, design="adaptive", stop="best",
    ...                                 random_state=0)
    >>> fit = fit_adaptive(board, list(Z.astype(float)), ["a", "b", "c"])
    >>> fit.stop_reason, fit.result.may_be_best()
    ('best', ['a'])
    """
    if board.stop not in STOP_RULES:
        raise ValueError(f"stop must be one of {STOP_RULES} with design='adaptive', got {board.stop!r}.")
    rank_width = board.rank_width
    if board.stop == "rank-width":
        if rank_width is None:
            raise ValueError("stop='rank-width' needs rank_width (the widest rank interval, worst - best, allowed).")
        rank_width = check_scalar(rank_width, "rank_width", kind=numbers.Integral, low=0)
    alpha = check_alpha(board.alpha)
    if board.stop != "budget":
        return AdaptiveFit(*fit_pairwise(board, models, names, alpha, rank_width))
    K, n_questions = len(models), outcomes_bank_size(board.predictor, models)
    horizon = bet_horizon(board.budget, K)
    seeds = check_generator(board.random_state).spawn(K)
    runs = [_Model(board, z, n_questions, alpha / K, horizon, rng) for z, rng in zip(models, seeds)]
    low, high, order = np.zeros(K), np.ones(K), []
    stop_reason = "budget"

    def ask(m):
        low[m], high[m] = runs[m].query()
        order.append(m)
        bar.update(1)

    with progress_bar(board.budget, "queries", board.verbose) as bar:
        for _ in range(WARMUP):
            for m in range(K):
                if runs[m].open:
                    ask(m)
        while len(order) < board.budget:  # (stop="budget": the other stops are the elimination design's)
            open_models = np.array([r.open for r in runs])
            if not open_models.any():
                break
            ask(lucb_choice([r.sum / r.n for r in runs], low, high, open_models))
        if len(order) < board.budget:
            stop_reason = "exhausted"
    estimate, var, df = (np.array(v, dtype=float) for v in zip(*(r.inference(board.interval) for r in runs)))
    result = JointResults(estimate, np.diag(var), tuple(names), np.bincount(order, minlength=K),
                          "confidence-sequence", df, bounds=np.column_stack([low, high]), alpha=alpha)
    return AdaptiveFit(result, np.array(order, dtype=np.intp), stop_reason)
