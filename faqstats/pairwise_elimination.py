"""Adaptive leaderboard by elimination on shared draws: one question at a time for every model still in doubt.

Every pairwise difference has its own betting confidence sequence, fed by the two models' PAI increments on the
same draw (exactly unbiased for the difference); a model leaves once a wealth betting against its being the best
is large enough (``stop="best"``) or once its rank is known well enough (``stop="rank-width"``). See
docs/statistics.md, "Adaptive allocation".
"""

from itertools import combinations

import numpy as np
from sklearn.base import clone

from ._engine import Oracle, SequentialRun
from ._inference import census_mean, pai_inference
from ._progress import progress_bar
from ._validation import check_generator
from .confseq import BettingConfidenceSequences, OneSidedTests
from .design import check_design, outcomes_bank_size
from .joint import JointResults, ranks_from_better
from .loop_setup import predictor_for
from .sampling import Sampler, UniformSampler, draw_from

__all__ = ["BEST_SHARE", "DISAGREEMENT_MIX", "PAIR_SHARE", "active_models", "difference_range", "disagreement_law",
           "elimination_horizon", "fit_pairwise"]

#: ``stop="rank-width"``: the share of ``alpha`` spent on the ``K (K - 1) / 2`` difference sequences (the rest on the
#: K accuracies'): the stop and the ranks use the differences alone.
PAIR_SHARE = 0.9
#: ``stop="best"``: the share of ``alpha`` spent on the wealths betting against each model being the best (the stop);
#: the rest goes half to the difference sequences, half to the accuracies'.
BEST_SHARE = 0.9
#: The confidence sequences' bets are sized for this share of the most rounds the run can make.
HORIZON_SHARE = 0.1
#: Truncation of the bets (every capital factor stays >= 1 - TRUNCATION).
TRUNCATION = 0.99
#: ``stop="best"``: the share of each wealth moved, every round, to the challenger now estimated strongest.
REBALANCE = 0.5
#: ``stop="best"``: the prior sum of squares of the wealths' bets' variance estimate (larger: smaller first bets).
BEST_PRIOR = 1.0
#: ``stop="best"``: the share of each round's law moved from the policies' law to the questions where the two
#: leaders are predicted to disagree (:func:`disagreement_law`).
DISAGREEMENT_MIX = 0.25


def elimination_horizon(budget, n_questions, replace):
    """The rounds the bets are sized for: :data:`HORIZON_SHARE` of the most rounds possible (at least 2 queries
    each; without replacement at most ``n_questions``), at least 2.

    Parameters
    ----------
    budget : int
        Total queries over all models.
    n_questions : int
        The bank size N.
    replace : bool
        Whether questions are drawn with replacement.

    Returns
    -------
    int

    Examples
    --------
    >>> elimination_horizon(5000, 700, False), elimination_horizon(40, 700, False)
    (70, 2)
    """
    rounds = budget // 2 if replace else min(budget // 2, n_questions)
    return max(int(round(HORIZON_SHARE * rounds)), 2)


def difference_range(base_a, base_b, predictions_a, predictions_b, law, n_questions):
    """``(L, U)`` containing ``phi^a_t - phi^b_t`` whatever ``law`` draws, with outcomes in [0, 1]: known before the
    draw.

    The difference of two PAI increments on the same draw ``I`` is
    ``[base_a - base_b + ((z^a_I - z^b_I) - (p^a_I - p^b_I)) / q_t(I)] / N`` with ``z^a_I - z^b_I`` in [-1, 1].

    Parameters
    ----------
    base_a, base_b : float
        The two models' prediction parts (N times; :meth:`~faqstats._engine.SequentialRun.base`).
    predictions_a, predictions_b : ndarray of shape (N,)
        Their predictions.
    law : ndarray of shape (N,)
        The common law ``q_t``.
    n_questions : int

    Returns
    -------
    low : float
    high : float

    Examples
    --------
    >>> law = np.array([0.5, 0.5])
    >>> [float(x) for x in difference_range(1.0, 0.5, np.array([0.5, 0.5]), np.array([0.0, 0.5]), law, 2)]
    [-1.25, 1.25]
    """
    support = law > 0
    gap, q = (predictions_a - predictions_b)[support], law[support]
    base = base_a - base_b
    return float((base + np.min((-1.0 - gap) / q)) / n_questions), float((base + np.max((1.0 - gap) / q)) / n_questions)


def disagreement_law(law, predictions, estimates, mix):
    """The policies' ``law`` with a share ``mix`` moved to the questions where the two leaders (by ``estimates``)
    are predicted to disagree: known before the draw, positive wherever ``law`` is.

    The score of question ``j`` is ``p^a_j (1 - p^b_j) + p^b_j (1 - p^a_j)`` for the leaders ``a`` and ``b``,
    normalised over the support of ``law``; the result is ``(1 - mix) law + mix score``. Every probability is at
    least ``(1 - mix)`` times the policies', so the increments' ranges widen by at most ``1 / (1 - mix)``, and every
    increment stays exactly unbiased (it divides by the probability it was drawn with).

    Parameters
    ----------
    law : ndarray of shape (N,)
        The policies' law (sums to 1).
    predictions : ndarray of shape (M, N)
        The asked models' predictions.
    estimates : array-like of shape (M,)
        Their current accuracy estimates (from past rounds only).
    mix : float in [0, 1)
        The share moved.

    Returns
    -------
    ndarray of shape (N,)

    Examples
    --------
    >>> P = np.array([[0.9, 0.9, 0.1, 0.5], [0.9, 0.1, 0.1, 0.5]])
    >>> disagreement_law(np.full(4, 0.25), P, np.array([0.6, 0.4]), 0.5).round(3).tolist()
    [0.179, 0.369, 0.179, 0.274]
    """
    if not 0 <= mix < 1:
        raise ValueError(f"mix must be in [0, 1), got {mix!r}.")
    predictions = np.asarray(predictions, dtype=float)
    if predictions.ndim != 2 or predictions.shape[0] < 2 or mix == 0:
        return law
    a, b = np.argsort(-np.asarray(estimates, dtype=float), kind="stable")[:2]
    pa, pb = np.clip(predictions[a], 0.0, 1.0), np.clip(predictions[b], 0.0, 1.0)
    score = np.where(law > 0, pa * (1 - pb) + pb * (1 - pa), 0.0)
    total = score.sum()
    if not total > 0:  # agreement predicted everywhere: nothing to favour
        return law
    return (1 - mix) * law + mix * score / total


def active_models(better, stop, rank_width=0):
    """The models the next round asks: those whose standing is still in doubt.

    ``stop="best"``: the models no other is surely better than (that may be best). ``stop="rank-width"``: the
    models of every pair not yet ordered where either model's rank interval is wider than ``rank_width``. Both
    sets only shrink as more pairs are ordered, so a model that leaves never comes back.

    Parameters
    ----------
    better : array-like of bool of shape (K, K)
        ``better[i, j]``: model ``i`` is surely more accurate than ``j``.
    stop : {"best", "rank-width"}
    rank_width : int, default=0
        The widest rank interval (``worst - best``) accepted (``stop="rank-width"``).

    Returns
    -------
    ndarray of bool of shape (K,)

    Examples
    --------
    >>> B = np.array([[False, True, True], [False, False, False], [False, False, False]])
    >>> active_models(B, "best").tolist(), active_models(B, "rank-width", 0).tolist()
    ([True, False, False], [False, True, True])
    """
    better = np.asarray(better, dtype=bool)
    if stop == "best":
        return ~better.any(axis=0)
    best, worst = ranks_from_better(better)
    wide = worst - best > rank_width
    open_pair = ~(better | better.T) & (wide[:, None] | wide[None, :])
    np.fill_diagonal(open_pair, False)
    return open_pair.any(axis=1)


class _Board:
    """The K models' runs and oracles, the accuracy and difference sequences, and who is still asked."""

    def __init__(self, board, models, n_questions, alpha):
        self.best_stop = board.stop == "best"
        sampler = UniformSampler() if board.sampler is None else clone(board.sampler)
        if not isinstance(sampler, Sampler) or getattr(sampler, "design", "sequential") != "sequential":
            raise ValueError("the adaptive design needs a sequential sampler (one law over the bank), not "
                             f"{type(sampler).__name__}.")
        self.replace = bool(sampler.replace)
        rounds = max(board.budget if self.replace else n_questions, 2)
        sampler = check_design(sampler, board.predictor, n_questions, rounds, 1, board.interval)
        K = len(models)
        self.K, self.n_questions = K, n_questions
        horizon = elimination_horizon(board.budget, n_questions, self.replace)
        self.runs = [SequentialRun(clone(sampler), predictor_for(board.predictor, n_questions), n_questions, rounds)
                     for _ in range(K)]
        self.oracles = [Oracle(z, n_questions) for z in models]
        self.pairs = list(combinations(range(K), 2))
        n_pairs = max(len(self.pairs), 1)
        # alpha's shares: (the best's wealths,) the differences, the accuracies; a union bound over all of them
        best, pairs = (BEST_SHARE, (1 - BEST_SHARE) / 2) if self.best_stop else (0.0, PAIR_SHARE)
        self.models_cs = BettingConfidenceSequences(K, alpha=alpha * (1 - best - pairs) / K, truncation=TRUNCATION,
                                                    horizon=horizon)
        self.pairs_cs = BettingConfidenceSequences(n_pairs, alpha=alpha * pairs / n_pairs, truncation=TRUNCATION,
                                                   horizon=horizon)
        self.best_level = alpha * best
        if self.best_stop:
            self.best_tests = OneSidedTests(n_pairs, 0.5, alpha=self.best_level, truncation=TRUNCATION, horizon=horizon)
            self.best_tests.squares[:] = BEST_PRIOR
        self.log_wealth = np.zeros(K)  # W^a: the wealth against "model a is the best"
        self.not_best = np.zeros(K, dtype=bool)  # (stop="best") shown not to be the best: left the draws
        self.shares = np.full((K, K), 1.0 / max(K - 1, 1))  # how W^a is spread over the challengers
        np.fill_diagonal(self.shares, 0.0)
        self.bounds = np.column_stack([np.zeros(K), np.ones(K)])
        self.pair_bounds = np.column_stack([-np.ones(len(self.pairs)), np.ones(len(self.pairs))])
        self.better = np.zeros((K, K), dtype=bool)
        self.rounds = 0

    @property
    def spent(self):
        """Queries so far: each model's distinct questions answered (a cached answer costs nothing)."""
        return sum(len(o.cache) for o in self.oracles)

    def round(self, active, rng, budget):
        """Draw one question for the ``active`` models and record it; the models asked, or None past the budget."""
        act = np.flatnonzero(active)
        law = np.mean([self.runs[k].law() for k in act], axis=0)
        law = law / law.sum()
        if self.best_stop and len(act) >= 2:  # the leaders by the plug-in estimates (answers so far, predictions)
            estimates = [self.runs[k].base() / self.n_questions for k in act]
            law = disagreement_law(law, np.array([self.runs[k].predictions for k in act]), estimates,
                                   DISAGREEMENT_MIX)
        question, probability = draw_from(law, rng)
        new = [k for k in act if question not in self.oracles[k].cache]
        if self.spent + len(new) > budget:
            return None
        runs = [self.runs[k] for k in act]
        ranges = np.array([run.increment_range(law) for run in runs])
        pair_rows = [i for i, (a, b) in enumerate(self.pairs) if active[a] and active[b]]
        pair_ranges = np.array([difference_range(self.runs[a].base(), self.runs[b].base(), self.runs[a].predictions,
                                                 self.runs[b].predictions, law, self.n_questions)
                                for a, b in (self.pairs[i] for i in pair_rows)]).reshape(-1, 2)
        phi = np.zeros(self.K)
        for k, run in zip(act, runs):
            z = self.oracles[k].ask([question])[0]
            phi[k] = run.record(question, probability, z)
            run.end_round([question], [z])
        self.models_cs.update(phi[act], ranges[:, 0], ranges[:, 1], runs=act)
        if pair_rows:  # on the [0, 1] grid: (d + 1) / 2
            a, b = np.array([self.pairs[i] for i in pair_rows]).T
            x, lo, hi = (phi[a] - phi[b] + 1) / 2, (pair_ranges[:, 0] + 1) / 2, (pair_ranges[:, 1] + 1) / 2
            self.pairs_cs.update(x, lo, hi, runs=pair_rows)
            if self.best_stop:
                self._bet_on_best(pair_rows, x, lo, hi, act)
        self.rounds += 1
        self._refresh(act, pair_rows)
        return act

    def _bet_on_best(self, pair_rows, x, lo, hi, act):
        """Move each W^a by its challengers' one-sided factors, spread as the (predictable) ``shares`` say."""
        plus, minus = self.best_tests.update(x, lo, hi, runs=pair_rows)
        grow = np.ones((self.K, self.K))  # grow[a, b]: challenger b's factor against "a is best"
        for i, up, down in zip(pair_rows, plus, minus):
            a, b = self.pairs[i]
            grow[b, a], grow[a, b] = np.exp(up), np.exp(down)  # up grows when a beats b, down when b beats a
        factor = (self.shares * grow).sum(axis=1)
        self.log_wealth += np.log(factor)
        new = self.shares * grow / factor[:, None]
        if REBALANCE > 0:  # part of the wealth moves to the challenger now estimated strongest (from data so far)
            mean = np.where(self.best_tests.n > 0, self.best_tests.sums / np.maximum(self.best_tests.n, 1), 0.5)
            gap = np.full((self.K, self.K), -np.inf)
            for i, (a, b) in enumerate(self.pairs):
                if a in act and b in act:
                    gap[b, a], gap[a, b] = mean[i] - 0.5, 0.5 - mean[i]
            for a in range(self.K):
                if np.isfinite(gap[a]).any():
                    target = np.zeros(self.K)
                    target[int(np.argmax(gap[a]))] = 1.0
                    new[a] = (1 - REBALANCE) * new[a] + REBALANCE * target
        self.shares = new

    def _refresh(self, act, pair_rows):
        """The bounds after a round (exact for the models that have answered every question) and the order."""
        low, high = self.models_cs.interval(act)
        self.bounds[act] = np.column_stack([low, high])
        if pair_rows:
            low, high = self.pairs_cs.interval(pair_rows)
            self.pair_bounds[pair_rows] = np.column_stack([2 * low - 1, 2 * high - 1])
        exact = {k: self.census(k) for k in act}
        for k, value in exact.items():
            if value is not None:
                self.bounds[k] = value
        for i in pair_rows:
            a, b = self.pairs[i]
            if exact[a] is not None and exact[b] is not None:  # a census orders them
                self.pair_bounds[i] = exact[a] - exact[b]
                self.better[a, b] |= exact[a] > exact[b]
                self.better[b, a] |= exact[b] > exact[a]
        for (a, b), (low, high) in zip(self.pairs, self.pair_bounds):
            self.better[a, b] |= low > 0
            self.better[b, a] |= high < 0
        before = self.not_best.copy()
        self.not_best |= self.better.any(axis=0)
        if self.best_stop:  # Ville: the true best's wealth reaches 1 / level with probability <= level
            self.not_best |= self.log_wealth >= np.log(1.0 / self.best_level)
        if self.not_best.all():  # (only when some bound failed) keep the model least shown not to be the best
            self.not_best[int(np.argmin(np.where(before, np.inf, self.log_wealth)))] = False

    def census(self, k):
        """Model ``k``'s exact accuracy once it has answered every question, else None."""
        cache = self.oracles[k].cache
        if len(cache) < self.n_questions:
            return None
        return float(census_mean(np.fromiter(cache.values(), dtype=float), self.n_questions))

    def exhausted(self, active):
        """Whether the draws are spent (a run's rounds) or every model asked has answered every question."""
        if self.rounds >= self.runs[0].budget:
            return True
        return all(len(self.oracles[k].cache) == self.n_questions for k in np.flatnonzero(active))

    def results(self, names, interval, alpha):
        """The :class:`~faqstats.joint.JointResults` at the stop."""
        estimate, var, df = np.zeros(self.K), np.zeros(self.K), np.full(self.K, np.inf)
        for k, run in enumerate(self.runs):
            phi = run.table()["increment"]
            census = self.census(k)
            if phi.size < 2 and census is None:  # left after one answer (the budget holds two rounds): no variance
                estimate[k], var[k] = (phi[0] if phi.size else 0.5), 0.25
                continue
            est, v, d, _ = pai_inference(phi, interval=interval, census=census,
                                         n_questions=None if self.replace else self.n_questions)
            estimate[k], var[k], df[k] = est, v, np.inf if d is None else d
        n_queries = np.array([len(o.cache) for o in self.oracles])
        return JointResults(estimate, np.diag(var), tuple(names), n_queries, "confidence-sequence", df,
                            bounds=self.bounds.copy(), alpha=alpha, difference_bounds=self.pair_bounds.copy(),
                            not_best=self.not_best.copy() if self.best_stop else None)


def fit_pairwise(board, models, names, alpha, rank_width):
    """Run the elimination design for ``board`` (a LeaderboardEstimator with ``stop`` "best" or "rank-width").

    Each round draws one question from the mean of the asked models' policy laws and asks it of every model
    still in doubt, fixed before the draw (``stop="best"``: those not yet shown not to be the best;
    ``stop="rank-width"``: :func:`active_models`). Every model's increments, and every pair's difference of
    increments on the rounds both were asked, are martingale differences with conditional means ``theta_k`` and
    ``theta_a - theta_b``, each with a betting confidence sequence. With ``stop="best"`` every model ``a`` also has
    a wealth betting against "``a`` is the best" (a nonnegative supermartingale if it is), and leaves once it
    reaches ``1 / (alpha BEST_SHARE)``; the rest of ``alpha`` is split between the difference sequences and the
    accuracies'. With ``stop="rank-width"`` the differences get ``alpha PAIR_SHARE / (K (K - 1) / 2)`` each, the
    accuracies ``alpha (1 - PAIR_SHARE) / K``. Everything holds at once, at every stopping time, with probability
    at least ``1 - alpha``.

    Parameters
    ----------
    board : LeaderboardEstimator
        Its ``predictor``, ``sampler`` (None: uniform over the askable questions, the predictions as control
        variates), ``budget`` (total queries), ``stop``, ``interval``, ``random_state`` and ``verbose``; every
        round is one draw (``batch_size`` is not used).
    models : list
        Each model's outcomes (array of shape (N,) or callable).
    names : list of str
    alpha : float in (0, 1)
        One minus the joint level.
    rank_width : int or None
        With ``stop="rank-width"``: the widest rank interval accepted.

    Returns
    -------
    result : JointResults
    order : ndarray of shape (n_queries,)
        The models asked, round by round (a cached answer included).
    stop_reason : {"best", "rank-width", "budget", "exhausted"}

    Examples
    --------
    >>> import faqstats as fq
    >>> Z = (np.random.default_rng(0).random((3, 400)) < np.array([[0.9], [0.5], [0.3]])).astype(float)
    >>> board = fq.LeaderboardEstimator(None, None, budget=1200, design="adaptive", stop="best", random_state=0)
    >>> result, order, reason = fit_pairwise(board, list(Z), ["a", "b", "c"], 0.05, None)
    >>> reason, result.may_be_best()
    ('best', ['a'])
    """
    state = _Board(board, models, outcomes_bank_size(board.predictor, models), alpha)
    rng = check_generator(board.random_state)
    width = 0 if rank_width is None else rank_width
    order, stop_reason = [], None
    with progress_bar(board.budget, "queries", board.verbose) as bar:
        while True:
            active = ~state.not_best if board.stop == "best" else active_models(state.better, board.stop, width)
            if active.sum() <= (1 if board.stop == "best" else 0):
                stop_reason = board.stop
                break
            if state.exhausted(active):
                stop_reason = "exhausted"
                break
            asked = state.round(active, rng, board.budget)
            if asked is None:
                stop_reason = "budget"
                break
            order.extend(asked.tolist())
            bar.update(state.spent - bar.n)
    return state.results(names, board.interval, alpha), np.array(order, dtype=np.intp), stop_reason
