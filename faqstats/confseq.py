"""Anytime-valid confidence sequences for the mean of bounded martingale increments.

The hedged betting capital of Waudby-Smith and Ramdas (JRSS-B 2024) over a grid of candidate
means; by Ville's inequality the candidates never rejected contain theta at every step at once
with probability ``>= 1 - alpha`` (``docs/statistics.md``, "Anytime-valid confidence sequences").
"""

from __future__ import annotations

import numpy as np

from ._validation import check_alpha

__all__ = ["BettingConfidenceSequence", "BettingConfidenceSequences", "log_capital_paths"]


def _log_factors(x, m, lower, upper, sq, k, alpha, truncation, horizon):
    """One increment's log capital factors ``log(1 + lam+ (x - m))`` and ``log(1 - lam- (x - m))``:
    WSR's predictable plug-in bet for the ``k``-th increment (``sq``: squared deviations so far),
    capped so that each factor stays at least ``1 - truncation``."""
    scale = k * np.log(1.0 + k) if horizon is None else float(horizon)
    lam = np.sqrt(2.0 * np.log(2.0 / alpha) / ((sq / k) * scale))
    with np.errstate(divide="ignore"):
        lam_plus = np.minimum(lam, truncation / np.maximum(m - lower, 0.0))
        lam_minus = np.minimum(lam, truncation / np.maximum(upper - m, 0.0))
    return np.log1p(lam_plus * (x - m)), np.log1p(-lam_minus * (x - m))


class BettingConfidenceSequence:
    """Running hedged-betting confidence sequence over a grid of candidate means in [0, 1].

    Parameters
    ----------
    alpha : float in (0, 1), default=0.05
        The sequence covers theta at all times with probability at least ``1 - alpha``.
    grid_size : int, default=2001
        Candidate values ``m``; the reported hull is widened by one grid step so it never costs coverage.
    truncation : float in (0, 1), default=0.5
        Bets are capped at ``truncation / (m - L_t)`` (and ``/ (U_t - m)``), keeping each
        capital factor at least ``1 - truncation``; any value below 1 keeps the guarantee.
        ``PAIEstimator`` uses 0.9 with ``horizon=budget`` (user guide, "validity").
    horizon : int or None, default=None
        The number of increments the sequence should be tightest at (e.g. the query
        budget): bets are sized ``sqrt(2 log(2/alpha) / (sigma^2 horizon))``. ``None`` uses
        the horizon-free ``t log(1 + t)``. Any choice keeps the guarantee.

    Examples
    --------
    >>> import numpy as np
    >>> cs = BettingConfidenceSequence(alpha=0.05)
    >>> rng = np.random.default_rng(0)
    >>> for x in rng.binomial(1, 0.3, size=400):
    ...     cs.update(float(x), 0.0, 1.0)
    >>> low, high = cs.interval()
    >>> bool(low < 0.3 < high), bool(high - low < 0.2)
    (True, True)
    """

    def __init__(self, alpha=0.05, grid_size=2001, truncation=0.5, horizon=None):
        self.alpha = check_alpha(alpha)
        self.horizon = horizon
        self.grid = np.linspace(0.0, 1.0, int(grid_size))
        self.truncation = float(truncation)
        self.log_plus = np.zeros_like(self.grid)
        self.log_minus = np.zeros_like(self.grid)
        self.alive = np.ones(self.grid.size, dtype=bool)  # running intersection
        self.n = 0
        self._sum = 0.0
        self._sq = 0.25  # prior sum of squared deviations: a Bernoulli(1/2) variance

    def update(self, x, lower, upper):
        """Add an increment ``x`` known beforehand to lie in ``[lower, upper]``."""
        if not (lower <= x <= upper):
            raise ValueError(f"increment {x} outside its announced range [{lower}, {upper}].")
        plus, minus = _log_factors(x, self.grid, lower, upper, self._sq, self.n + 1, self.alpha,
                                   self.truncation, self.horizon)
        self.log_plus += plus
        self.log_minus += minus
        # log of the hedged capital 1/2 e^a + 1/2 e^b, in log-space
        log_capital = np.logaddexp(self.log_plus, self.log_minus) - np.log(2.0)
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



class BettingConfidenceSequences:
    """:class:`BettingConfidenceSequence` for many runs at once: one sequence per run, the same arithmetic.

    Run ``r``'s sequence is the one a :class:`BettingConfidenceSequence` with the same parameters
    would give after the same updates (the same float operations, element by element); runs may
    be updated selectively (``runs=``), e.g. while others have stopped. A run's capital at a
    candidate outside the span it has left is not kept up to date (``log_plus``, ``log_minus``).

    Parameters
    ----------
    n_runs : int
    alpha, grid_size, truncation, horizon
        As in :class:`BettingConfidenceSequence`.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).binomial(1, 0.3, size=(3, 200)).astype(float)
    >>> many = BettingConfidenceSequences(3, horizon=200)
    >>> one = BettingConfidenceSequence(horizon=200)
    >>> for t in range(200):
    ...     many.update(x[:, t], np.zeros(3), np.ones(3))
    ...     one.update(x[1, t], 0.0, 1.0)
    >>> low, high = many.interval()
    >>> (float(low[1]), float(high[1])) == one.interval()
    True
    """

    def __init__(self, n_runs, alpha=0.05, grid_size=2001, truncation=0.5, horizon=None):
        self.alpha = check_alpha(alpha)
        self.horizon = horizon
        self.grid = np.linspace(0.0, 1.0, int(grid_size))
        self.truncation = float(truncation)
        shape = (int(n_runs), self.grid.size)
        self.log_plus = np.zeros(shape)
        self.log_minus = np.zeros(shape)
        self.alive = np.ones(shape, dtype=bool)
        self.n = np.zeros(shape[0], dtype=np.int64)
        self.sums = np.zeros(shape[0])
        self.squares = np.full(shape[0], 0.25)  # as BettingConfidenceSequence's prior

    def update(self, x, lower, upper, runs=None):
        """Add one increment ``x[i]``, known beforehand to lie in ``[lower[i], upper[i]]``, to
        each run ``runs[i]`` (every run when ``runs`` is None)."""
        rows = np.arange(self.n.size) if runs is None else np.asarray(runs, dtype=np.intp)
        x, lower, upper = (np.asarray(v, dtype=float).reshape(-1, 1) for v in (x, lower, upper))
        n = self.n[rows]
        # a rejected candidate stays rejected: each run updates only a window of columns holding
        # every candidate it has left (the others' capital is never read again)
        cols, at = self._window(rows), rows[:, None]
        plus, minus = _log_factors(x, self.grid[cols], lower, upper, self.squares[rows, None], n[:, None] + 1,
                                   self.alpha, self.truncation, self.horizon)
        log_plus = self.log_plus[at, cols] + plus
        log_minus = self.log_minus[at, cols] + minus
        log_capital = np.logaddexp(log_plus, log_minus) - np.log(2.0)
        self.log_plus[at, cols], self.log_minus[at, cols] = log_plus, log_minus
        self.alive[at, cols] &= log_capital < np.log(1.0 / self.alpha)
        x = x[:, 0]
        mean_before = np.where(n > 0, self.sums[rows] / np.maximum(n, 1), 0.5)
        self.squares[rows] += (x - mean_before) ** 2
        self.sums[rows] += x
        self.n[rows] += 1

    def _window(self, rows):
        """Column indices of shape ``(len(rows), W)``: for each run ``W`` consecutive candidates
        holding every one it has left, ``W`` the widest such span among the runs."""
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
        # every candidate rejected (probability <= alpha): the clipped mean, as BettingConfidenceSequence
        mean = np.clip(sums / np.maximum(n, 1), 0.0, 1.0)
        some = alive.any(1)
        low = np.where(some, np.maximum(0.0, self.grid[first] - step), mean)
        high = np.where(some, np.minimum(1.0, self.grid[last] + step), mean)
        return low, high


def log_capital_paths(increments, lower, upper, m, *, alpha=0.05, truncation=0.5, horizon=None):
    """Log hedged capital ``log K_t(m)`` along many runs at once, for one candidate per run.

    The same bets and capital as :class:`BettingConfidenceSequence` at one value ``m_r`` per
    run: theta stays in run ``r``'s sequence throughout iff ``max_t log K_t(theta) < log(1/alpha)``.

    Parameters
    ----------
    increments, lower, upper : ndarray of shape (R, n)
        The increments and the ranges announced before each was drawn.
    m : ndarray of shape (R,)
    alpha, truncation, horizon
        As in :class:`BettingConfidenceSequence`.

    Returns
    -------
    ndarray of shape (R, n)

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).binomial(1, 0.3, size=(2, 300)).astype(float)
    >>> lc = log_capital_paths(x, np.zeros_like(x), np.ones_like(x), np.array([0.3, 0.6]))
    >>> bool(lc[0].max() < np.log(20)), bool(lc[1].max() > np.log(20))
    (True, True)
    """
    x, lo, hi = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (increments, lower, upper))
    m = np.asarray(m, dtype=float).reshape(-1, 1)
    alpha = check_alpha(alpha)
    R, n = x.shape
    log_plus = np.zeros((R, 1))
    log_minus = np.zeros((R, 1))
    out = np.empty((R, n))
    total = np.zeros(R)
    sq = np.full(R, 0.25)
    for t in range(n):
        plus, minus = _log_factors(x[:, t : t + 1], m, lo[:, t : t + 1], hi[:, t : t + 1], sq[:, None], t + 1,
                                   alpha, truncation, horizon)
        log_plus = log_plus + plus
        log_minus = log_minus + minus
        out[:, t] = (np.logaddexp(log_plus, log_minus) - np.log(2.0))[:, 0]
        mean_before = np.where(t > 0, total / max(t, 1), 0.5)
        sq = sq + (x[:, t] - mean_before) ** 2
        total = total + x[:, t]
    return out
