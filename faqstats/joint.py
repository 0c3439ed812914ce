"""Joint inference for several models evaluated on one bank: simultaneous intervals, rank intervals, the best.

:class:`JointResults` holds K models' exactly unbiased accuracy estimates and the estimated
covariance of their errors (diagonal for independent runs; full when the models answered the same
draws). Its intervals hold for all models, or all pairwise differences, at once: a max-t critical
value over the estimated correlation, or Bonferroni's where that correlation cannot be trusted.
Rank intervals follow from the simultaneous differences, as in "ranking with confidence". Given
anytime-valid bounds instead (an adaptive design), the intervals are those bounds, at their one level.
"""

import functools
import math
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd
from scipy import stats

from ._inference import all_equal_interval
from ._validation import check_alpha
from .results import table_summary

__all__ = ["JointResults", "SampleMeans", "max_t_quantile", "ranks_from_better", "surely_better"]

#: draws of the max-t critical value's Monte Carlo (seeded: a result's intervals are reproducible)
MAX_T_DRAWS = 2**17
#: a variance at most this is zero: equal answers (with 0/1 answers a real one is at least ~(1 - n / N) / n^3, far
#: above it; graded answers closer than this are equal for the interval's purpose)
ZERO_VARIANCE = 1e-15


@dataclass(frozen=True)
class SampleMeans:
    """How a leaderboard's estimates were drawn when they are sample means: each model's answers (in [0, 1]) to
    ``n_queries`` uniform draws without replacement from ``n_questions``, the same draws for every model
    (``shared``) or each its own. A model whose answers were all equal, or two models whose differences on shared
    draws were, then get the exact intervals of :func:`~faqstats._inference.all_equal_interval` at their share of
    the level, where the variance estimate is zero and says nothing.

    Examples
    --------
    >>> SampleMeans(500, shared=True)
    SampleMeans(n_questions=500, shared=True)
    """

    n_questions: int
    shared: bool


def max_t_quantile(corr, alpha, n_draws=MAX_T_DRAWS, random_state=0):
    """The ``1 - alpha`` quantile of ``max_i |Z_i|`` for ``Z ~ N(0, corr)``: the critical value of
    intervals that cover all ``K`` means at once.

    Exact for one mean (the normal quantile) and for independent means (Sidak's); otherwise a
    seeded Monte Carlo of ``n_draws`` draws. ``corr`` may be singular (the pairwise differences
    of ``K`` means have rank ``K - 1``).

    Parameters
    ----------
    corr : array-like of shape (K, K)
        A correlation matrix (positive semi-definite, unit diagonal).
    alpha : float in (0, 1)
        One minus the joint level.
    n_draws : int, default=MAX_T_DRAWS
        Monte Carlo draws.
    random_state : int, default=0
        Seeds the draws (an int: the same matrix and level give the same value, computed once).

    Returns
    -------
    float

    Examples
    --------
    >>> round(max_t_quantile([[1.0]], 0.05), 3), round(max_t_quantile(np.eye(3), 0.05), 3)
    (1.96, 2.388)
    >>> round(max_t_quantile(np.ones((3, 3)), 0.05), 2)  # perfectly correlated: one mean
    1.96
    """
    alpha = check_alpha(alpha)
    R = np.atleast_2d(np.asarray(corr, dtype=float))
    K = R.shape[0]
    if np.allclose(R, np.eye(K)):  # Sidak: independent
        return float(stats.norm.ppf(0.5 + 0.5 * (1.0 - alpha) ** (1.0 / K)))
    return _monte_carlo_max_t(((R + R.T) / 2).tobytes(), K, alpha, int(n_draws), int(random_state))


@functools.lru_cache(maxsize=256)
def _monte_carlo_max_t(corr_bytes, K, alpha, n_draws, random_state):
    # cached: a leaderboard's intervals, differences, ranks and summary ask for the same quantile several times
    w, U = np.linalg.eigh(np.frombuffer(corr_bytes).reshape(K, K))
    root = U * np.sqrt(np.clip(w, 0.0, None))
    Z = np.random.default_rng(random_state).standard_normal((n_draws, K)) @ root.T
    return float(np.quantile(np.abs(Z).max(axis=1), 1.0 - alpha))


def _correlation(cov):
    sd = np.sqrt(np.clip(np.diag(cov), 0.0, None))  # a zero variance may come out of D C D' as -1e-19
    with np.errstate(divide="ignore", invalid="ignore"):
        R = cov / np.outer(sd, sd)
    R[~np.isfinite(R)] = 0.0
    np.fill_diagonal(R, 1.0)
    return R


def surely_better(differences):
    """Which model the pairwise difference intervals say is more accurate than which.

    Parameters
    ----------
    differences : pandas.DataFrame
        One row per pair ``i < j`` in ``itertools.combinations`` order, with columns ``lower`` and ``upper``
        (the intervals of ``theta_i - theta_j``), as :meth:`JointResults.differences` returns.

    Returns
    -------
    ndarray of bool of shape (K, K)
        ``B[i, j]``: the interval of ``theta_i - theta_j`` lies above zero.

    Examples
    --------
    >>> import pandas as pd
    >>> d = pd.DataFrame({"lower": [0.1, -0.2, -0.3], "upper": [0.3, 0.1, -0.1]})
    >>> surely_better(d).astype(int).tolist()
    [[0, 1, 0], [0, 0, 0], [0, 1, 0]]
    """
    n_pairs = len(differences)
    K = int(round((1 + np.sqrt(1 + 8 * n_pairs)) / 2))
    if K * (K - 1) // 2 != n_pairs:
        raise ValueError(f"expected K(K-1)/2 pairwise differences, got {n_pairs} rows.")
    B = np.zeros((K, K), dtype=bool)
    for (i, j), (low, high) in zip(combinations(range(K), 2), differences[["lower", "upper"]].to_numpy()):
        B[i, j], B[j, i] = low > 0, high < 0
    return B


def ranks_from_better(better):
    """Each model's best and worst rank (1 = most accurate) consistent with ``better``, as in "ranking with
    confidence": the best rank is 1 + the models surely better, the worst K - the models surely worse.

    Parameters
    ----------
    better : array-like of bool of shape (K, K)
        ``better[i, j]``: model ``i`` is surely more accurate than ``j``.

    Returns
    -------
    best : ndarray of shape (K,)
    worst : ndarray of shape (K,)

    Examples
    --------
    >>> [r.tolist() for r in ranks_from_better([[False, True, True], [False, False, False], [False, False, False]])]
    [[1, 2, 2], [1, 3, 3]]
    """
    better = np.asarray(better, dtype=bool)
    return 1 + better.sum(axis=0), better.shape[0] - better.sum(axis=1)


@dataclass(frozen=True)
class JointResults:
    """K models' accuracies from one evaluation, with intervals that hold for all of them at once.

    Attributes
    ----------
    estimate : ndarray of shape (K,)
        Each model's exactly unbiased accuracy estimate.
    cov : ndarray of shape (K, K)
        The estimated covariance of the estimates' errors (symmetric positive semi-definite).
    names : tuple of str
        The models' names (``"0"``, ``"1"``, ... when none were given).
    n_queries : ndarray of shape (K,)
        Questions asked of each model.
    simultaneous_method : {"max-t", "bonferroni", "confidence-sequence"}, default="max-t"
        How the joint intervals are made: the max-t critical value over the estimated correlation,
        Bonferroni's (no use of the correlation), or given ``bounds`` (anytime-valid confidence
        sequences, each at level ``1 - alpha / K``: all hold at once with probability ``1 - alpha``).
    df : ndarray of shape (K,) or None, default=None
        Degrees of freedom of each estimate's variance (``inf`` or None: normal). The joint level
        is split as the normal max-t splits it, and each interval takes Student's t at its share.
    bounds : ndarray of shape (K, 2) or None, default=None
        With ``"confidence-sequence"``: every model's ``(lower, upper)``, holding for all models at
        once with probability ``1 - alpha`` at a data-dependent stop. Differences are
        ``[L_i - U_j, U_i - L_j]``; no other level is available.
    alpha : float in (0, 1) or None, default=None
        With ``bounds``: one minus the joint level they hold at (the methods' ``alpha=None`` means it).
    pair_df : ndarray of shape (K, K) or None, default=None
        Degrees of freedom of each difference ``theta_i - theta_j`` from its own increments (shared
        draws); ``None``: Welch-Satterthwaite's from the two models' (the smaller where correlated).
    difference_bounds : ndarray of shape (K (K - 1) / 2, 2) or None, default=None
        With ``bounds``: anytime-valid ``(lower, upper)`` of every difference ``theta_i - theta_j``
        (pairs ``i < j`` in ``itertools.combinations`` order) from their own confidence sequences,
        holding together with ``bounds`` at the joint level; each difference's interval is then the
        intersection of these with ``[L_i - U_j, U_i - L_j]``.
    not_best : ndarray of bool of shape (K,) or None, default=None
        With ``bounds``: the models an anytime-valid test has shown not to be the best, holding together with
        ``bounds`` at the joint level (the adaptive design's ``stop="best"``). Their best rank is then at least 2,
        and a model left alone is the best.
    sample_means : SampleMeans or None, default=None
        The estimates are sample means (uniform draws without replacement, no predictor): a model whose answers
        were all equal (or, on shared draws, two models whose differences were) gets the exact interval at its
        share of the level, where a zero variance estimate would give a zero width.

    Examples
    --------
    >>> r = JointResults(np.array([0.60, 0.55, 0.40]), np.diag([0.02, 0.02, 0.02]) ** 2, ("a", "b", "c"),
    ...                  np.array([50, 50, 50]))
    >>> r.rank_intervals().to_dict("index")
    {'a': {'best': 1, 'worst': 2}, 'b': {'best': 1, 'worst': 2}, 'c': {'best': 3, 'worst': 3}}
    >>> r.may_be_best()
    ['a', 'b']
    >>> cs = JointResults(np.array([0.60, 0.55, 0.40]), np.diag([0.02, 0.02, 0.02]) ** 2, ("a", "b", "c"),
    ...                   np.array([50, 30, 10]), "confidence-sequence",
    ...                   bounds=np.array([[0.56, 0.66], [0.45, 0.55], [0.20, 0.50]]), alpha=0.05)
    >>> cs.may_be_best(), cs.rank_intervals().loc["c"].tolist()
    (['a'], [2, 3])
    """

    estimate: np.ndarray
    cov: np.ndarray = field(repr=False)
    names: tuple
    n_queries: np.ndarray
    simultaneous_method: str = "max-t"
    df: np.ndarray | None = None
    bounds: np.ndarray | None = field(default=None, repr=False)
    alpha: float | None = None
    pair_df: np.ndarray | None = field(default=None, repr=False)
    difference_bounds: np.ndarray | None = field(default=None, repr=False)
    not_best: np.ndarray | None = field(default=None, repr=False)
    sample_means: SampleMeans | None = None

    def __post_init__(self):
        est, cov = np.asarray(self.estimate, dtype=float), np.asarray(self.cov, dtype=float)
        K = est.size
        if cov.shape != (K, K) or len(self.names) != K:
            raise ValueError(f"{K} estimates need a ({K}, {K}) covariance and {K} names; got {cov.shape} and "
                             f"{len(self.names)}.")
        if not (np.all(np.isfinite(est)) and np.all(np.isfinite(cov))):
            raise ValueError("the estimates and their covariance must be finite.")
        if self.simultaneous_method not in ("max-t", "bonferroni", "confidence-sequence"):
            raise ValueError("simultaneous_method must be 'max-t', 'bonferroni' or 'confidence-sequence', got "
                             f"{self.simultaneous_method!r}.")
        given = self.simultaneous_method == "confidence-sequence"
        if given != (self.bounds is not None) or given != (self.alpha is not None):
            raise ValueError("bounds and alpha go with simultaneous_method='confidence-sequence' (and only with it).")
        if given:
            bounds = np.asarray(self.bounds, dtype=float)
            if bounds.shape != (K, 2) or not np.all(np.isfinite(bounds)) or np.any(bounds[:, 0] > bounds[:, 1]):
                raise ValueError(f"bounds must be a finite ({K}, 2) array of (lower, upper) rows, lower <= upper.")
            object.__setattr__(self, "bounds", bounds)
            object.__setattr__(self, "alpha", check_alpha(self.alpha))
        if self.difference_bounds is not None:
            pair_bounds = np.asarray(self.difference_bounds, dtype=float)
            n_pairs = K * (K - 1) // 2
            if not given:
                raise ValueError("difference_bounds go with simultaneous_method='confidence-sequence' and bounds.")
            if pair_bounds.shape != (n_pairs, 2) or not np.all(np.isfinite(pair_bounds)) or np.any(
                    pair_bounds[:, 0] > pair_bounds[:, 1]):
                raise ValueError(f"difference_bounds must be a finite ({n_pairs}, 2) array of (lower, upper) rows, "
                                 "lower <= upper.")
            object.__setattr__(self, "difference_bounds", pair_bounds)
        if self.not_best is not None:
            not_best = np.asarray(self.not_best)
            if not given or not_best.shape != (K,) or not_best.dtype != bool or not_best.all():
                raise ValueError(f"not_best goes with simultaneous_method='confidence-sequence' and bounds: a ({K},) "
                                 "boolean array that leaves at least one model.")
            object.__setattr__(self, "not_best", not_best.copy())
        df = np.full(K, np.inf) if self.df is None else np.asarray(self.df, dtype=float)
        if df.shape != (K,) or np.any(np.isnan(df)) or np.any(df <= 0):
            raise ValueError(f"df must hold {K} positive degrees of freedom (inf: normal), got {self.df!r}.")
        object.__setattr__(self, "df", df)
        if self.pair_df is not None:
            pair_df = np.asarray(self.pair_df, dtype=float)
            if pair_df.shape != (K, K) or np.any(np.isnan(pair_df)) or np.any(pair_df <= 0):
                raise ValueError(f"pair_df must be a ({K}, {K}) array of positive degrees of freedom, got "
                                 f"{self.pair_df!r}.")
            object.__setattr__(self, "pair_df", pair_df)
        if self.sample_means is not None:
            if not isinstance(self.sample_means, SampleMeans) or given:
                raise ValueError("sample_means must be a SampleMeans, and goes with max-t or Bonferroni intervals.")
            n = np.asarray(self.n_queries)
            if n.shape != (K,) or np.any(n < 1) or np.any(n > self.sample_means.n_questions):
                raise ValueError(f"with sample_means every model's n_queries must lie in [1, "
                                 f"{self.sample_means.n_questions}], got {self.n_queries!r}.")
        object.__setattr__(self, "cov", (cov + cov.T) / 2)
        object.__setattr__(self, "names", tuple(str(n) for n in self.names))

    def _level(self, alpha, simultaneous=True):
        """The ``alpha`` asked for (None: 0.05 or the bounds'), refused where given bounds cannot give it."""
        if self.bounds is None:
            return check_alpha(0.05 if alpha is None else alpha)
        if (alpha is not None and abs(check_alpha(alpha) - self.alpha) > 1e-12) or not simultaneous:
            raise ValueError("These intervals are anytime-valid confidence sequences run at one level, valid at a "
                             f"data-dependent stop: only the simultaneous intervals at alpha={self.alpha} are "
                             f"available (got alpha={alpha}, simultaneous={simultaneous}).")
        return self.alpha

    def _share(self, cov, alpha, simultaneous):
        """The two-sided level each row of ``cov``'s estimates gets."""
        m = cov.shape[0]
        if not simultaneous:
            return alpha
        if self.simultaneous_method == "bonferroni" or m == 1:
            return alpha / m
        return 2 * stats.norm.sf(max_t_quantile(_correlation(cov), alpha))

    def _equal_answers(self):
        """The models whose sample mean is of equal answers, short of a census (their variance estimate is zero)."""
        if self.sample_means is None:
            return np.zeros(self.estimate.size, dtype=bool)
        return (np.diag(self.cov) <= ZERO_VARIANCE) & (np.asarray(self.n_queries) < self.sample_means.n_questions)

    def _row_interval(self, k, share, flat):
        """Model ``k``'s interval at the two-sided level ``share``: exact for equal answers (``flat[k]``, from
        :meth:`_equal_answers`), else Student's t."""
        if flat[k]:
            return all_equal_interval(self.estimate[k], self.n_queries[k], self.sample_means.n_questions, share)
        half = stats.t.ppf(1 - share / 2, self.df[k]) * math.sqrt(max(self.cov[k, k], 0.0))
        return max(0.0, self.estimate[k] - half), min(1.0, self.estimate[k] + half)

    def _exact_differences(self, pairs, est, var, share, low, high):
        """``differences``' intervals where equal answers leave a zero variance: on shared draws, differences all
        equal get the exact interval on [-1, 1]; on independent draws, a pair with a model of equal answers gets
        ``[L_i - U_j, U_i - L_j]`` from the two models' intervals at half the pair's share each."""
        N, flat = self.sample_means.n_questions, self._equal_answers()
        for row, (i, j) in enumerate(pairs):
            if self.sample_means.shared and var[row] <= ZERO_VARIANCE and self.n_queries[i] < N:
                lo, hi = all_equal_interval((est[row] + 1.0) / 2.0, self.n_queries[i], N, share)
                low[row], high[row] = 2.0 * lo - 1.0, 2.0 * hi - 1.0
            elif not self.sample_means.shared and (flat[i] or flat[j]):
                (lo_i, hi_i) = self._row_interval(i, share / 2, flat)
                (lo_j, hi_j) = self._row_interval(j, share / 2, flat)
                low[row], high[row] = lo_i - hi_j, hi_i - lo_j
        return low, high

    def conf_int(self, alpha=None, simultaneous=True):
        """Every model's interval: a DataFrame indexed by model with columns ``lower`` and ``upper``.

        Parameters
        ----------
        alpha : float in (0, 1) or None, default=None
            One minus the level (``None``: 0.05, or the level of given ``bounds``).
        simultaneous : bool, default=True
            ``True``: all K intervals cover at once with probability about ``1 - alpha``;
            ``False``: each alone (a per-model 95% interval when ``alpha=0.05``).

        Returns
        -------
        pandas.DataFrame
        """
        alpha = self._level(alpha, simultaneous)
        index = pd.Index(self.names, name="model")
        if self.bounds is not None:
            return pd.DataFrame({"lower": self.bounds[:, 0], "upper": self.bounds[:, 1]}, index=index)
        se = np.sqrt(np.diag(self.cov))
        share = self._share(self.cov, alpha, simultaneous)
        c = stats.t.ppf(1 - share / 2, self.df)
        low, high = np.clip(self.estimate - c * se, 0, 1), np.clip(self.estimate + c * se, 0, 1)
        flat = self._equal_answers()
        for k in np.flatnonzero(flat):  # exact where the variance estimate says nothing
            low[k], high[k] = self._row_interval(k, share, flat)
        return pd.DataFrame({"lower": low, "upper": high}, index=index)

    def differences(self, alpha=None, simultaneous=True):
        """Every pairwise difference ``theta_i - theta_j`` (``i < j``) with its interval.

        Parameters
        ----------
        alpha : float in (0, 1) or None, default=None
            One minus the level (``None``: 0.05, or the level of given ``bounds``).
        simultaneous : bool, default=True
            ``True``: all ``K (K - 1) / 2`` intervals cover at once with probability about ``1 - alpha``.

        Returns
        -------
        pandas.DataFrame
            Indexed by ``(model, other)``: ``estimate``, ``std_error``, ``lower``, ``upper``.
        """
        alpha = self._level(alpha, simultaneous)
        K = self.estimate.size
        pairs = list(combinations(range(K), 2))
        D = np.zeros((len(pairs), K))
        for row, (i, j) in enumerate(pairs):
            D[row, i], D[row, j] = 1.0, -1.0
        est, cov = D @ self.estimate, D @ self.cov @ D.T
        se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
        index = pd.MultiIndex.from_tuples([(self.names[i], self.names[j]) for i, j in pairs], names=["model", "other"])
        if self.bounds is not None:  # [L_i - U_j, U_i - L_j]: holds for every pair whenever every bound holds
            first, second = np.array([p[0] for p in pairs], dtype=int), np.array([p[1] for p in pairs], dtype=int)
            low, high = self.bounds[first, 0] - self.bounds[second, 1], self.bounds[first, 1] - self.bounds[second, 0]
            if self.difference_bounds is not None:  # both hold on the same event: so does their intersection
                low = np.maximum(low, self.difference_bounds[:, 0])
                high = np.maximum(low, np.minimum(high, self.difference_bounds[:, 1]))
            return pd.DataFrame({"estimate": est, "std_error": se, "lower": low, "upper": high}, index=index)
        share = self._share(cov, alpha, simultaneous) if pairs else alpha
        c = stats.t.ppf(1 - share / 2, [self._pair_df(i, j) for i, j in pairs]) if pairs else 0.0
        low, high = est - c * se, est + c * se
        if self.sample_means is not None and pairs:
            low, high = self._exact_differences(pairs, est, np.diag(cov), share, low, high)
        return pd.DataFrame({"estimate": est, "std_error": se, "lower": low, "upper": high}, index=index)

    def _pair_df(self, i, j):
        """The degrees of freedom of ``theta_i - theta_j``: ``pair_df``'s, or Welch-Satterthwaite's."""
        if self.pair_df is not None:
            return self.pair_df[i, j]
        vi, vj, di, dj = self.cov[i, i], self.cov[j, j], self.df[i], self.df[j]
        denominator = vi**2 / di + vj**2 / dj
        if self.cov[i, j] != 0 or denominator == 0:  # correlated, or both normal (inf df) or exact
            return min(di, dj)
        return (vi + vj) ** 2 / denominator

    def rank_intervals(self, alpha=None):
        """Each model's ranks consistent with the simultaneous differences (1 = most accurate).

        Best rank: 1 + the models surely better; worst: K - the models surely worse. They hold for
        all models at once whenever the difference intervals do. A model shown not to be the best
        (``not_best``) ranks 2 or worse, and a model left alone by that test ranks first.

        Parameters
        ----------
        alpha : float in (0, 1) or None, default=None
            One minus the joint level (``None``: 0.05, or the level of given ``bounds``).

        Returns
        -------
        pandas.DataFrame
            Indexed by model: ``best``, ``worst``.
        """
        better = surely_better(self.differences(alpha, simultaneous=True))
        if self.not_best is not None:  # (at the bounds' level: the only one differences() gives with bounds)
            left = np.flatnonzero(~self.not_best)
            if left.size == 1:  # every other model is not the best: it is
                better[left[0]] = np.arange(better.shape[0]) != left[0]
        best, worst = ranks_from_better(better)
        if self.not_best is not None:
            best = np.where(self.not_best, np.maximum(best, 2), best)
        return pd.DataFrame({"best": best, "worst": worst}, index=pd.Index(self.names, name="model"))

    def may_be_best(self, alpha=None):
        """The models whose rank interval includes 1: the set that holds the best with probability about ``1 - alpha``.

        Parameters
        ----------
        alpha : float in (0, 1) or None, default=None
            One minus the joint level (``None``: 0.05, or the level of given ``bounds``).

        Returns
        -------
        list of str
        """
        ranks = self.rank_intervals(alpha)
        return ranks.index[ranks["best"] == 1].tolist()

    def to_frame(self, alpha=None):
        """The leaderboard: one row per model, most accurate first, with simultaneous intervals and rank intervals.

        Parameters
        ----------
        alpha : float in (0, 1) or None, default=None
            One minus the joint level (``None``: 0.05, or the level of given ``bounds``).

        Returns
        -------
        pandas.DataFrame
            Indexed by model: ``estimate``, ``std_error``, ``n_queries``, ``lower``, ``upper``, ``best``, ``worst``.
        """
        frame = pd.DataFrame({"estimate": self.estimate, "std_error": np.sqrt(np.diag(self.cov)),
                              "n_queries": self.n_queries}, index=pd.Index(self.names, name="model"))
        frame = frame.join(self.conf_int(alpha)).join(self.rank_intervals(alpha))
        return frame.sort_values("estimate", ascending=False)

    def summary(self, alpha=None):
        """The leaderboard as a statsmodels summary, with how the joint intervals were made.

        Parameters
        ----------
        alpha : float in (0, 1) or None, default=None
            One minus the joint level (``None``: 0.05, or the level of given ``bounds``).

        Returns
        -------
        statsmodels.iolib.summary2.Summary
        """
        alpha = self._level(alpha)
        level = f"{100 * (1 - alpha):g}%"
        how = self.simultaneous_method
        if self.difference_bounds is not None:
            how = ("anytime-valid confidence sequences for every accuracy and every pairwise difference, union "
                   "bound, valid at the data-dependent stop")
            if self.not_best is not None:
                how = how.replace("difference, union", "difference and tests of which model is best, union")
        elif self.bounds is not None:
            how = (f"anytime-valid confidence sequences, each at {100 * (1 - alpha / self.estimate.size):g}%, "
                   "valid at the data-dependent stop")
        notes = [f"Intervals and rank intervals hold for all models at once with probability {level} ({how}).",
                 f"May be best: {', '.join(self.may_be_best(alpha))}."]
        table = self.to_frame(alpha)
        counts = ["n_queries", "best", "worst"]
        table[counts] = table[counts].astype(int).astype(str)  # (float_format would print 60 as 60.0000)
        return table_summary("faqstats leaderboard", table=table, notes=notes)

    def plot(self, alpha=None, ax=None):
        """Estimates with their simultaneous intervals, most accurate on top, rank intervals as labels.

        Parameters
        ----------
        alpha : float in (0, 1) or None, default=None
            One minus the joint level (``None``: 0.05, or the level of given ``bounds``).
        ax : matplotlib Axes or None, default=None
            Where to draw; ``None``: a new figure (your backend is left alone).

        Returns
        -------
        matplotlib.axes.Axes
        """
        if ax is None:
            from matplotlib.figure import Figure

            ax = Figure(figsize=(6, 0.5 + 0.4 * self.estimate.size)).subplots()
        alpha = self._level(alpha)
        frame = self.to_frame(alpha).iloc[::-1]
        y = np.arange(len(frame))
        # the interval as a line and the estimate as a point: a confidence sequence's bounds, or an estimate outside
        # [0, 1] at a tiny budget, need not hold the point between them (an error bar cannot draw that)
        ax.hlines(y, frame["lower"], frame["upper"], color="C0")
        ax.plot(frame["estimate"], y, "o", color="C0")
        labels = [f"{name}  (rank {b}-{w})" if b != w else f"{name}  (rank {b})"
                  for name, b, w in zip(frame.index, frame["best"], frame["worst"])]
        ax.set_yticks(y, labels)
        ax.set_xlabel(f"accuracy ({100 * (1 - alpha):g}% simultaneous intervals, {self.simultaneous_method})")
        return ax
