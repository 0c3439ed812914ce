"""Anytime-valid confidence sequences for the mean of bounded martingale increments: the hedged betting
capital of Waudby-Smith and Ramdas (JRSS-B 2024) over a grid of candidate means (``docs/statistics.md``,
"Anytime-valid confidence sequences")."""

import numpy as np

from ._validation import check_alpha

__all__ = ["BettingConfidenceSequence", "BettingConfidenceSequences", "OneSidedTests", "log_capital_paths"]


def _log_factors(x, m, lower, upper, sq, k, alpha, truncation, horizon):
    """The ``k``-th increment's log capital factors ``log(1 +- lam (x - m))`` (WSR's capped plug-in bets)."""
    scale = k * np.log(1.0 + k) if horizon is None else float(horizon)
    lam = np.sqrt(2.0 * np.log(2.0 / alpha) / ((sq / k) * scale))
    with np.errstate(divide="ignore"):
        lam_plus = np.minimum(lam, truncation / np.maximum(m - lower, 0.0))
        lam_minus = np.minimum(lam, truncation / np.maximum(upper - m, 0.0))
    return np.log1p(lam_plus * (x - m)), np.log1p(-lam_minus * (x - m))


class BettingConfidenceSequences:
    """:class:`BettingConfidenceSequence` for ``n_runs`` runs at once, updated selectively (``runs=``) if need be."""

    def __init__(self, n_runs, alpha=0.05, grid_size=2001, truncation=0.5, horizon=None):
        self.alpha, self.horizon, self.truncation = check_alpha(alpha), horizon, float(truncation)
        self.grid = np.linspace(0.0, 1.0, int(grid_size))
        shape = (int(n_runs), self.grid.size)
        self.log_plus, self.log_minus = np.zeros(shape), np.zeros(shape)
        self.alive = np.ones(shape, dtype=bool)  # running intersection
        self.n = np.zeros(shape[0], dtype=np.int64)
        self.sums, self.squares = np.zeros(shape[0]), np.full(shape[0], 0.25)  # the single sequence's prior

    def update(self, x, lower, upper, runs=None):
        """Add ``x[i]``, known beforehand to lie in ``[lower[i], upper[i]]``, to run ``runs[i]`` (None: all)."""
        rows = np.arange(self.n.size) if runs is None else np.asarray(runs, dtype=np.intp)
        x, lower, upper = (np.asarray(v, dtype=float).reshape(-1, 1) for v in (x, lower, upper))
        n = self.n[rows]
        # a rejected candidate stays rejected: only a window holding every live candidate is updated
        cols, at = self._window(rows), rows[:, None]
        plus, minus = _log_factors(x, self.grid[cols], lower, upper, self.squares[rows, None], n[:, None] + 1,
                                   self.alpha, self.truncation, self.horizon)
        log_plus = self.log_plus[at, cols] + plus
        log_minus = self.log_minus[at, cols] + minus
        log_capital = np.logaddexp(log_plus, log_minus) - np.log(2.0)  # the hedged capital, in log-space
        self.log_plus[at, cols], self.log_minus[at, cols] = log_plus, log_minus
        self.alive[at, cols] &= log_capital < np.log(1.0 / self.alpha)
        x = x[:, 0]
        mean_before = np.where(n > 0, self.sums[rows] / np.maximum(n, 1), 0.5)
        self.squares[rows] += (x - mean_before) ** 2
        self.sums[rows] += x
        self.n[rows] += 1

    def _window(self, rows):
        """Column indices ``(len(rows), W)``: for each run ``W`` consecutive candidates holding its live ones."""
        alive, size = self.alive[rows], self.grid.size
        some = alive.any(1)
        first = np.where(some, alive.argmax(1), 0)
        last = np.where(some, size - 1 - alive[:, ::-1].argmax(1), -1)
        width = int((last - first).max(initial=-1)) + 1
        return np.minimum(first, size - width)[:, None] + np.arange(width)

    def interval(self, runs=None):
        """``(low, high)``: each run's hull of the candidates never rejected, as arrays (of ``runs``)."""
        sel = slice(None) if runs is None else np.asarray(runs, dtype=np.intp)
        alive, n, sums = self.alive[sel], self.n[sel], self.sums[sel]
        step = self.grid[1] - self.grid[0]
        first = alive.argmax(1)
        last = self.grid.size - 1 - alive[:, ::-1].argmax(1)
        # every candidate rejected (probability <= alpha): the clipped mean
        mean = np.clip(sums / np.maximum(n, 1), 0.0, 1.0)
        some = alive.any(1)
        low = np.where(some, np.maximum(0.0, self.grid[first] - step), mean)
        high = np.where(some, np.minimum(1.0, self.grid[last] + step), mean)
        return low, high


class BettingConfidenceSequence:
    """Running hedged-betting confidence sequence for a mean in [0, 1] over ``grid_size`` candidates (the hull is
    widened by one step so it never costs coverage); bets keep each capital factor >= ``1 - truncation`` and
    are sized for ``horizon`` increments (``None``: ``t log(1 + t)``).
    """

    def __init__(self, alpha=0.05, grid_size=2001, truncation=0.5, horizon=None):
        self.alpha, self.horizon, self.truncation = check_alpha(alpha), horizon, float(truncation)
        self.grid = np.linspace(0.0, 1.0, int(grid_size))
        self.log_plus, self.log_minus = np.zeros_like(self.grid), np.zeros_like(self.grid)
        self.alive = np.ones(self.grid.size, dtype=bool)  # running intersection
        self.n, self._sum, self._sq = 0, 0.0, 0.25  # prior sum of squared deviations: a Bernoulli(1/2) variance

    def update(self, x, lower, upper):
        """Add an increment ``x`` known beforehand to lie in ``[lower, upper]``."""
        if not (lower <= x <= upper):
            raise ValueError(f"increment {x} outside its announced range [{lower}, {upper}].")
        plus, minus = _log_factors(x, self.grid, lower, upper, self._sq, self.n + 1, self.alpha, self.truncation,
                                   self.horizon)
        self.log_plus += plus
        self.log_minus += minus
        log_capital = np.logaddexp(self.log_plus, self.log_minus) - np.log(2.0)  # the hedged capital, in log-space
        self.alive &= log_capital < np.log(1.0 / self.alpha)
        mean_before = self._sum / self.n if self.n else 0.5
        self._sq += (x - mean_before) ** 2
        self._sum += x
        self.n += 1

    def interval(self):
        """``(low, high)``: the hull of the candidates never rejected so far, in [0, 1]."""
        idx = np.flatnonzero(self.alive)
        if idx.size == 0:  # every candidate rejected: happens with probability <= alpha
            mean = min(max(self._sum / max(self.n, 1), 0.0), 1.0)
            return mean, mean
        step = self.grid[1] - self.grid[0]
        return max(0.0, self.grid[idx[0]] - step), min(1.0, self.grid[idx[-1]] + step)


class OneSidedTests:
    """Anytime-valid one-sided tests of ``mean <= m`` and ``mean >= m`` for ``n_runs`` runs at one candidate ``m``
    each: the two halves of the hedged capital, kept apart. ``K^+`` is a nonnegative supermartingale when
    ``mean <= m`` and ``K^-`` when ``mean >= m``, so each reaches ``1 / a`` with probability at most ``a`` (Ville);
    :meth:`update` returns the step's log factors, for bets built on them.

    Parameters
    ----------
    n_runs : int
        Number of runs tested at once.
    m : float or array-like of shape (n_runs,)
        The candidate of each run, in [0, 1].
    alpha : float in (0, 1), default=0.05
        The level the plug-in bets are sized for.
    truncation : float in (0, 1), default=0.5
        Every capital factor stays >= ``1 - truncation``.
    horizon : int or None, default=None
        The bets are sized for this many increments (None: ``t log(1 + t)``).

    Examples
    --------
    >>> t = OneSidedTests(1, 0.5, truncation=0.9)
    >>> for x in [0.9] * 20:
    ...     plus, minus = t.update([x], [0.0], [1.0])
    >>> bool(t.log_plus[0] > np.log(100)), bool(t.log_minus[0] < 0)
    (True, True)
    """

    def __init__(self, n_runs, m, alpha=0.05, truncation=0.5, horizon=None):
        self.alpha, self.horizon, self.truncation = check_alpha(alpha), horizon, float(truncation)
        self.m = np.broadcast_to(np.asarray(m, dtype=float), (int(n_runs),)).copy()
        self.log_plus, self.log_minus = np.zeros(self.m.size), np.zeros(self.m.size)
        self.n = np.zeros(self.m.size, dtype=np.int64)
        self.sums, self.squares = np.zeros(self.m.size), np.full(self.m.size, 0.25)

    def update(self, x, lower, upper, runs=None):
        """Add ``x[i]``, known beforehand to lie in ``[lower[i], upper[i]]``, to run ``runs[i]`` (None: all);
        returns the step's log factors ``(plus, minus)`` of those runs."""
        rows = np.arange(self.n.size) if runs is None else np.asarray(runs, dtype=np.intp)
        x, lower, upper = (np.asarray(v, dtype=float).reshape(-1) for v in (x, lower, upper))
        n = self.n[rows]
        plus, minus = _log_factors(x, self.m[rows], lower, upper, self.squares[rows], n + 1, self.alpha,
                                   self.truncation, self.horizon)
        self.log_plus[rows] += plus
        self.log_minus[rows] += minus
        mean_before = np.where(n > 0, self.sums[rows] / np.maximum(n, 1), 0.5)
        self.squares[rows] += (x - mean_before) ** 2
        self.sums[rows] += x
        self.n[rows] += 1
        return plus, minus


def log_capital_paths(increments, lower, upper, m, *, alpha=0.05, truncation=0.5, horizon=None):
    """Log hedged capital ``log K_t(m_r)`` along ``R`` runs at once, at one candidate ``m_r`` per run (``lower`` and
    ``upper``: the ranges announced before each increment was drawn).
    """
    x, lo, hi = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (increments, lower, upper))
    m = np.asarray(m, dtype=float).reshape(-1, 1)
    R, n = x.shape
    k = np.arange(1, n + 1)  # each bet sees the increments before it (sums in the sequence's order)
    mean_before = np.concatenate([np.full((R, 1), 0.5), np.cumsum(x, axis=1)[:, :-1] / k[:-1]], axis=1)
    sq = np.cumsum(np.concatenate([np.full((R, 1), 0.25), (x - mean_before)[:, :-1] ** 2], axis=1), axis=1)
    plus, minus = _log_factors(x, m, lo, hi, sq, k, check_alpha(alpha), truncation, horizon)
    return np.logaddexp(np.cumsum(plus, axis=1), np.cumsum(minus, axis=1)) - np.log(2.0)
