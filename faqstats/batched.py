"""Many PAI runs in lockstep: a batched torch engine for simulations.

A simulation study evaluates the same policy on many new models and seeds. Run one
at a time, each round of each run is a handful of small numpy calls, and the Python
overhead dominates. :func:`simulate` advances ``R`` runs together: every round is a
few tensor operations over an ``R x N`` block (predictions, scores, sampling
distributions, cumulative sums for the draws) plus batched rank-one Laplace
updates of the ``R`` factor posteriors (``R x k x k``). Memory is
O(R (N + k^2)) per chunk of runs; no ``R x N x k`` intermediate is ever formed
(the quadratic forms ``v_j' S_r v_j`` of the active-learning score are kept up to
date by rank-one downdates, ``R x N``, and recomputed from scratch in chunks).

It reproduces :class:`~faqstats.PAIEstimator` draw for draw: run ``r`` takes its
uniforms from its own generator exactly as the estimator would (one ``random()``
per draw through the same inverse-CDF rule as ``Generator.choice``; for
:class:`~faqstats.BernoulliAIPW` a ``permutation`` then one ``random()`` per item),
so in float64 the estimates agree with sequential runs to rounding (tested). It
covers the built-in policies with ``batch_size=1``, a fixed budget, the martingale
variance and the ``robust-t``/``t``/``normal`` intervals; anything else (custom
samplers, early stopping, batches) goes through the estimator itself
(:func:`supports` says which).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats

from ._inference import effective_df
from .estimator import weighted_martingale
from ._validation import check_alpha, check_generator
from .sampling import (
    DRAW_BLOCK,
    ActiveLearningSampler,
    BernoulliAIPW,
    HybridSampler,
    NeymanSampler,
    UniformSampler,
)

__all__ = ["BatchedRuns", "simulate", "supports"]

_SEQUENTIAL = (UniformSampler, NeymanSampler, ActiveLearningSampler, HybridSampler)
_DTYPES = {"float32": torch.float32, "float64": torch.float64}

#: elements of one ``R x N`` block; runs are processed in chunks of at most this size
DEFAULT_MAX_ELEMENTS = 2**20
# quadratic forms are recomputed from scratch after this many rank-one downdates
_REFRESH_EVERY = 256
# questions per block of the two-level inverse-CDF draw (about sqrt(N) for paper-scale banks)
_BLOCK = DRAW_BLOCK  # the estimator's oracle_draw uses the same blocks


@dataclass(frozen=True)
class BatchedRuns:
    """Per-run results of :func:`simulate` (arrays of shape ``(R,)``).

    Attributes
    ----------
    estimate, std_error : ndarray
    df : ndarray
        Degrees of freedom of the t quantile (``inf`` for the normal quantile).
    low, high : ndarray
        Two-sided ``1 - alpha`` intervals, clipped to [0, 1] as :meth:`AccuracyResult.conf_int` does.
    n_queries : ndarray of int
        Distinct questions answered.
    method : str
        ``"pai"``, ``"sample_mean"`` or ``"aipw"``, as in :class:`~faqstats.AccuracyResult`.
    increments : ndarray of shape (R, budget) or None
        With ``keep_increments=True``: each run's ``phi_t`` (its outcomes for the sample
        mean), for studying other intervals on the same runs.
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


def supports(sampler, *, batch_size=1, variance="martingale", stop_when_width=None, confidence_sequence=False):
    """Whether :func:`simulate` reproduces ``PAIEstimator`` with these settings.

    >>> from faqstats import HybridSampler
    >>> supports(HybridSampler()), supports(HybridSampler(), batch_size=4)
    (True, False)
    """
    if batch_size != 1 or variance != "martingale" or stop_when_width is not None or confidence_sequence:
        return False
    return type(sampler) in _SEQUENTIAL + (BernoulliAIPW,)


def simulate(
    outcomes,
    generators,
    *,
    factor_model=None,
    sampler=None,
    budget=100,
    rows=None,
    interval="robust-t",
    alpha=0.05,
    device="cpu",
    dtype="float64",
    max_elements=DEFAULT_MAX_ELEMENTS,
    progress=None,
    keep_increments=False,
    step_weights=None,
):
    """Run ``PAIEstimator(factor_model, sampler, budget)`` once per generator, in lockstep.

    Parameters
    ----------
    outcomes : array-like of shape (n_models, N)
        The new models' complete outcomes in [0, 1].
    generators : sequence of numpy Generators (or seeds), length R
        One per run, used exactly as ``PAIEstimator(random_state=g)`` would use it.
    factor_model : fitted LogisticFactorModel or None
    sampler : Sampler or None
        A built-in sampler (see :func:`supports`); ``None`` is ``HybridSampler()``.
    budget : int
    rows : array-like of int, shape (R,), or None
        Which row of ``outcomes`` run ``r`` evaluates; ``None`` means run ``r`` uses row ``r``.
    interval : {"robust-t", "t", "normal"}
    alpha : float
        Level of the reported intervals.
    device : str
        Torch device ("cpu", "cuda", ...).
    dtype : {"float64", "float32"}
        float64 reproduces the sequential estimator to rounding; float32 is faster on GPUs.
    max_elements : int
        Runs are processed in chunks of at most ``max_elements // N`` runs. A chunk that
        runs out of memory (host or GPU) is run again in halves from the same generator
        states, with a ``ResourceWarning``: the results are those of any chunking.
    progress : callable or None
        Called with the number of runs finished after each chunk.
    keep_increments : bool, default=False
        Also return every run's increments (sequential samplers only).
    step_weights : array-like or None
        As in :class:`~faqstats.PAIEstimator` (weighted increments).

    Returns
    -------
    BatchedRuns

    Examples
    --------
    >>> import numpy as np
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=150, n_components=3, random_state=0)
    >>> fm = fq.LogisticFactorModel(n_components=3, max_iter=200, random_state=0).fit(bank.history)
    >>> runs = simulate(bank.new_outcomes, [np.random.default_rng(s) for s in range(4)], factor_model=fm,
    ...                 budget=20, rows=[0, 0, 1, 1])
    >>> est = fq.PAIEstimator(fm, budget=20, random_state=np.random.default_rng(2)).fit(bank.new_outcomes[1])
    >>> bool(abs(runs.estimate[2] - est.estimate_) < 1e-9)
    True
    """
    from .estimator import PAIEstimator

    alpha = check_alpha(alpha)
    if interval not in ("robust-t", "t", "normal"):
        raise ValueError(f"interval must be 'robust-t', 't' or 'normal', got {interval!r}.")
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
    # the estimator's own checks (budget, sampler, factor model, bank size)
    est = PAIEstimator(factor_model, sampler, budget=budget, interval=interval, step_weights=step_weights)
    sampler = est._check(N)
    if not supports(sampler):
        raise ValueError(f"simulate does not cover {type(sampler).__name__}; use PAIEstimator.")
    if factor_model is not None and factor_model.question_factors_.shape[0] != N:
        raise ValueError(f"outcomes cover {N} questions but the factor model was fitted on "
                         f"{factor_model.question_factors_.shape[0]}.")
    engine = _Engine(factor_model, sampler, int(budget), N, torch.device(device), _DTYPES[dtype], step_weights)
    if keep_increments and engine.stream:
        raise ValueError("keep_increments is for sequential samplers; BernoulliAIPW has no per-query increments.")
    engine.keep_ranges = bool(keep_increments) and not engine.stream
    range_parts = []
    chunk = max(1, int(max_elements) // max(N, 1))
    parts = []
    start = 0
    while start < R:
        sl = slice(start, min(R, start + chunk))
        # a chunk that runs out of memory is run again in halves, from the same generator
        # states, so the draws (and results) do not depend on where memory ran short
        states = [g.bit_generator.state for g in gens[sl]]
        try:
            parts.append(engine.run(Z[rows[sl]], gens[sl]))
        except Exception as exc:
            if sl.stop - sl.start == 1 or not _out_of_memory(exc):
                raise
            for g, state in zip(gens[sl], states):
                g.bit_generator.state = state
            chunk = (sl.stop - sl.start) // 2
            del exc
            engine.release()  # the failed chunk's blocks, before the smaller chunk allocates its own
            if engine.device.type == "cuda":
                torch.cuda.empty_cache()
            warnings.warn(f"simulate: out of memory with {sl.stop - sl.start} runs per chunk; going on with {chunk}.",
                          ResourceWarning, stacklevel=2)
            continue
        range_parts.append(engine.ranges if engine.keep_ranges else None)
        if progress is not None:
            progress(sl.stop - sl.start)
        start = sl.stop
    if parts:
        est_, var_, df_, nq, inc = (np.concatenate(x) if x[0] is not None else None for x in zip(*parts))
    else:
        est_, var_, df_, nq, inc = (np.empty(0), np.empty(0), np.empty(0), np.empty(0, np.int64), None)
    if not (np.all(np.isfinite(est_)) and np.all(np.isfinite(var_))):
        raise FloatingPointError("Non-finite estimate or variance in a batched run.")
    if engine.method == "aipw" or interval == "normal":
        df_ = np.full(R, np.inf)
    elif interval == "t":
        df_ = np.full(R, float(budget - 1))
    se = np.sqrt(var_)
    normal = np.isinf(df_)
    crit = np.where(normal, stats.norm.ppf(1 - alpha / 2), stats.t.ppf(1 - alpha / 2, np.where(normal, 1, df_)))
    low = np.clip(est_ - crit * se, 0.0, 1.0)
    high = np.clip(est_ + crit * se, 0.0, 1.0)
    ranges = np.concatenate(range_parts) if keep_increments and range_parts else None
    return BatchedRuns(est_, se, df_, low, high, nq.astype(np.int64), engine.method,
                       inc if keep_increments else None, ranges)


def _out_of_memory(exc):
    """Whether ``exc`` is an allocation failure (host or device) that a smaller chunk may avoid."""
    if isinstance(exc, MemoryError) or isinstance(exc, getattr(torch, "OutOfMemoryError", ())):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("out of memory" in text.lower() or "can't allocate memory" in text)


def robust_df(phi):
    """Row-wise :func:`faqstats._inference.effective_df` of increments ``phi`` (R, n)."""
    return effective_df(np.asarray(phi, dtype=float).reshape(len(phi), -1))


class _Engine:
    """The lockstep loop for one configuration; :meth:`run` handles one chunk of runs."""

    def __init__(self, factor_model, sampler, budget, n_questions, device, dtype, step_weights=None):
        self.sampler, self.budget, self.N = sampler, budget, n_questions
        self.step_weights = None if step_weights is None else np.asarray(step_weights, dtype=float)
        self.keep_ranges, self.ranges = False, None
        self.device, self.dtype = device, dtype
        self.stream = isinstance(sampler, BernoulliAIPW)
        if factor_model is None:
            self.V = None
        else:
            # a copy: fitted attributes may be read-only arrays, which torch will not wrap
            t = lambda a: torch.tensor(np.array(a, dtype=float), dtype=dtype, device=device)  # noqa: E731
            self.V = t(factor_model.question_factors_)
            self.mean0 = t(factor_model.prior_mean_)
            cov0 = t(factor_model.prior_cov_)
            self.cov0 = 0.5 * (cov0 + cov0.T)  # exactly symmetric, as the estimator's posterior
        if self.stream:
            self.method = "aipw"
        elif factor_model is None and isinstance(sampler, UniformSampler) and not sampler.replace:
            self.method = "sample_mean"
        else:
            self.method = "pai"
        self.uses_al = isinstance(sampler, ActiveLearningSampler) or (
            isinstance(sampler, HybridSampler) and sampler.rho > 0
        )

    def _tensor(self, a, dtype=None):
        return torch.as_tensor(a, dtype=self.dtype if dtype is None else dtype, device=self.device)

    def release(self):
        """Drop the current chunk's per-run tensors (predictions, posteriors, quadratic forms)."""
        self.P = self.mean = self.cov = self.quad = None
        self.ranges = None

    # -- the factor posteriors of a chunk ----------------------------------------
    def _init_posterior(self, R):
        if self.V is None:
            self.mean = self.cov = None
            self.P = torch.zeros(R, self.N, dtype=self.dtype, device=self.device)
            return
        self.mean = self.mean0.expand(R, -1).clone()
        self.cov = self.cov0.expand(R, -1, -1).clone()
        self.P = torch.sigmoid(self.mean @ self.V.T)
        self.quad = None
        if self.uses_al:
            q0 = torch.einsum("jk,kl,jl->j", self.V, self.cov0, self.V)
            self.quad = q0.expand(R, -1).clone()
            self.since_refresh = 0

    def _laplace(self, idx, question, z):
        """One Laplace step for the runs ``idx`` (all runs when None), as ``_laplace_step``."""
        sel = (lambda x: x) if idx is None else (lambda x: x[idx])  # noqa: E731
        mean, cov = sel(self.mean), sel(self.cov)
        v = self.V[question]
        p = torch.sigmoid((mean * v).sum(1))
        w = p * (1.0 - p)
        Sv = torch.bmm(cov, v.unsqueeze(2)).squeeze(2)
        denom = 1.0 + w * (v * Sv).sum(1)
        c = w / denom
        # cov - (sqrt(c) Sv)(sqrt(c) Sv)': exactly symmetric as computed (a product of two
        # factors commutes), so no re-symmetrising pass as in the estimator's update
        h = Sv * c.sqrt()[:, None]
        cov = cov - h.unsqueeze(2) * h.unsqueeze(1)
        mean = mean + (Sv / denom[:, None]) * (z - p)[:, None]
        if idx is None:  # predictions overwritten in place (the old ones are not needed any more)
            self.mean, self.cov = mean, cov
            torch.mm(mean, self.V.T, out=self.P).sigmoid_()
        else:
            P = (mean @ self.V.T).sigmoid_()
            self.mean[idx], self.cov[idx], self.P[idx] = mean, cov, P
        if self.quad is not None:  # idx is None here: only sequential policies use the score
            u = Sv @ self.V.T
            self.quad -= c[:, None] * (u * u)
            self.since_refresh += 1
            if self.since_refresh >= _REFRESH_EVERY:
                self._refresh_quad()

    def _refresh_quad(self):
        R, k = self.cov.shape[0], self.V.shape[1]
        step = max(1, DEFAULT_MAX_ELEMENTS // max(self.N * k, 1))
        for s in range(0, R, step):  # chunked: the (runs, N, k) product stays bounded
            self.quad[s : s + step] = torch.einsum("jk,rkl,jl->rj", self.V, self.cov[s : s + step], self.V)
        self.since_refresh = 0

    # -- one chunk -----------------------------------------------------------------
    def run(self, Z, generators):
        R = len(generators)
        self._init_posterior(R)
        if self.stream:
            return self._run_stream(Z, generators)
        return self._run_sequential(Z, generators)

    def _scores(self, A, step, drawn):
        """Scores of the sequential policies, zero where ``A`` (0/1 availability) is 0.

        The same numbers as the samplers' ``scores`` (up to rounding), written with few
        passes over the ``R x N`` block: elementwise work dominates the loop. ``drawn``
        (R, t) holds the questions asked so far (None with replacement): zeroing those
        few entries is cheaper than a pass multiplying by ``A``.
        """
        s, P = self.sampler, self.P
        if isinstance(s, UniformSampler):
            return A.clone()
        if isinstance(s, ActiveLearningSampler):
            return self._al_scores().mul_(A)
        # p - p^2 in one pass; no clamp: fl(p * p) <= p for p in [0, 1], so it is >= 0
        neyman = torch.addcmul(P, P, P, value=-1.0).sqrt_()
        if drawn is not None and drawn.shape[1]:
            neyman.scatter_(1, drawn, 0.0)
        if isinstance(s, NeymanSampler):
            return neyman
        alpha_t, beta_t = s.schedule(step, self.budget)
        if alpha_t == 0 and beta_t == 1:
            return neyman  # normalised later anyway
        mix = _normalise(neyman, A)
        if alpha_t > 0:
            mix = (1.0 - alpha_t) * mix + alpha_t * _normalise(self._al_scores().mul_(A), A)
        # x ** 0 == 1: beta_t == 0 is uniform over the askable questions
        return mix.pow_(beta_t).mul_(A) if beta_t != 0 else A.clone()

    def _al_scores(self):
        P, V = self.P, self.V
        w = P - P * P
        g = (w @ V) / V.shape[0]
        proj = torch.bmm(self.cov, g.unsqueeze(2)).squeeze(2) @ V.T
        return w * proj**2 / (1.0 + w * self.quad)

    def _run_sequential(self, Z, generators):
        R, N, budget = len(generators), self.N, self.budget
        replace = self.sampler.replace
        tau = self.sampler.tau
        U = self._tensor(np.stack([g.random(budget) for g in generators]) if R else np.empty((0, budget)))
        Zt = self._tensor(Z)
        ar = torch.arange(R, device=self.device)
        A = torch.ones(R, N, dtype=self.dtype, device=self.device)  # 1 where askable
        asked = torch.zeros(R, N, dtype=torch.bool, device=self.device)
        drawn = torch.zeros(R, budget, dtype=torch.int64, device=self.device)  # questions, in draw order
        asked_total = torch.zeros(R, dtype=self.dtype, device=self.device)
        phi = torch.empty(R, budget, dtype=self.dtype, device=self.device)
        zs = torch.empty(R, budget, dtype=self.dtype, device=self.device)
        # availability per block of _BLOCK questions (the draw's first level)
        nb = -(-N // _BLOCK)
        counts = torch.full((R, nb), float(_BLOCK), dtype=self.dtype, device=self.device)
        counts[:, -1] = N - (nb - 1) * _BLOCK
        ranges = torch.empty(R, budget, 2, dtype=self.dtype, device=self.device) if self.keep_ranges else None
        for t in range(budget):
            n_avail = N if replace else N - t
            done = None if replace else drawn[:, :t]
            s = self._scores(A, t + 1, done)
            block_s = _block_sums(s)
            total = block_s.sum(1)
            # q = tau * uniform + (1 - tau) * s / total, or uniform where every score is 0
            pos = total > 0
            # (python scalars in torch.where would make float32 tensors: keep the working dtype)
            a = torch.full_like(total, 1.0 / n_avail).masked_fill_(pos, tau / n_avail)
            b = ((1.0 - tau) / torch.where(pos, total, torch.ones_like(total))).masked_fill_(~pos, 0.0)
            question = _draw(s, block_s, A, a, b, counts, U[:, t])
            prob = a + b * s[ar, question]
            z = Zt[ar, question]
            P = self.P
            # unasked predictions: all of them less the few asked (a gather, not a pass over A)
            base = P.sum(1) if replace else asked_total + (P.sum(1) - P.gather(1, done).sum(1))
            phi[:, t] = (base + (z - P[ar, question]) / prob) / N
            if self.keep_ranges:  # SequentialRun.increment_range: phi_t's range before the draw
                q = torch.addcmul(A * a[:, None], s, b[:, None])
                inf = torch.full((), float("inf"), dtype=self.dtype)
                ranges[:, t, 0] = (base + torch.where(A > 0, -P / q, inf).amin(1)) / N
                ranges[:, t, 1] = (base + torch.where(A > 0, (1.0 - P) / q, -inf).amax(1)) / N
            zs[:, t] = z
            asked[ar, question] = True
            drawn[:, t] = question
            if not replace:
                A[ar, question] = 0.0
                counts[ar, question // _BLOCK] -= 1.0
                asked_total += z
            if self.V is not None:
                self._laplace(None, question, z)
        phi, zs = phi.cpu().numpy(), zs.cpu().numpy()
        self.ranges = None if ranges is None else ranges.cpu().numpy()
        n_queries = asked.sum(1).cpu().numpy()
        if self.method == "sample_mean":
            n = budget
            var = (1.0 - n / N) * zs.var(axis=1, ddof=1) / n
            return zs.mean(1), var, robust_df(zs), n_queries, zs
        if self.step_weights is not None:
            est, var, resid = weighted_martingale(phi, self.step_weights)
            return est, var, robust_df(resid), n_queries, phi
        est = phi.mean(1)
        var = ((phi - est[:, None]) ** 2).sum(1) / (budget * (budget - 1))
        return est, var, robust_df(phi), n_queries, phi

    def _run_stream(self, Z, generators):
        """Nature's-order label/skip runs (:class:`BernoulliAIPW`), one item per step."""
        s_cfg = self.sampler
        R, N, budget = len(generators), self.N, self.budget
        orders, coins = [], []
        for g in generators:  # the estimator draws the order first, then one coin per item
            orders.append(g.permutation(N) if s_cfg.order == "random" else np.arange(N))
            coins.append(g.random(N))
        order = torch.as_tensor(np.stack(orders) if R else np.empty((0, N), np.int64), device=self.device)
        U = self._tensor(np.stack(coins) if R else np.empty((0, N)))
        Zt = self._tensor(Z)
        ar = torch.arange(R, device=self.device)
        avail = torch.ones(R, N, dtype=torch.bool, device=self.device)
        zero = torch.zeros((), dtype=self.dtype)

        def scores(P):
            if s_cfg.score == "uniform":
                return torch.ones_like(P)
            if s_cfg.score == "neyman":
                return torch.sqrt(torch.clamp(P * (1.0 - P), min=0.0))
            return torch.minimum(P, 1.0 - P)

        S = scores(self.P)
        ssum = S.sum(1)
        labels = torch.zeros(R, dtype=self.dtype, device=self.device)
        total = torch.zeros(R, dtype=self.dtype, device=self.device)
        var_total = torch.zeros(R, dtype=self.dtype, device=self.device)
        floor = s_cfg.pi_floor * budget / N
        for t in range(N):
            remaining = N - t
            j = order[:, t]
            s_j = S[ar, j]
            mean_s = ssum / remaining
            rel = torch.where(mean_s > 0, s_j / torch.where(mean_s > 0, mean_s, 1.0), torch.ones_like(s_j))
            rate = torch.clamp(budget - labels, min=0.0) / remaining
            pi = torch.clamp(torch.clamp(rate * ((1.0 - s_cfg.tau) * rel + s_cfg.tau), min=floor), max=1.0)
            lab = U[:, t] < pi
            p = self.P[ar, j]
            z = Zt[ar, j]
            total += torch.where(lab, p + (z - p) / pi, p)
            var_total += torch.where(lab, (z - p) ** 2 * (1.0 - pi) / pi**2, zero)
            labels += lab.to(self.dtype)
            avail[ar, j] = False
            ssum = ssum - s_j
            idx = torch.nonzero(lab).squeeze(1)
            if self.V is not None and idx.numel():
                self._laplace(idx, j[idx], z[idx])
                S[idx] = scores(self.P[idx])
                ssum[idx] = torch.where(avail[idx], S[idx], zero).sum(1)
        est = (total / N).cpu().numpy()
        var = (var_total / N**2).cpu().numpy()
        return est, var, np.full(R, np.inf), labels.cpu().numpy().astype(np.int64), None


def _block_sums(s):
    """Row sums of ``s`` (R, N) over consecutive blocks of ``_BLOCK`` columns (the last one shorter)."""
    R, N = s.shape
    full = N // _BLOCK * _BLOCK
    parts = [s[:, :full].reshape(R, -1, _BLOCK).sum(2)]
    if full < N:
        parts.append(s[:, full:].sum(1, keepdim=True))
    return torch.cat(parts, 1) if len(parts) > 1 else parts[0]


def _draw(s, block_s, A, a, b, counts, u):
    """``Generator.choice(p=q)`` for every run, with ``q = a A + b s`` never formed.

    The inverse CDF in two levels: the block holding ``u * sum(q)`` from the block
    masses ``a counts + b block_s`` (``block_s = _block_sums(s)``), then the question inside that block from a
    cumulative sum over ``_BLOCK`` columns. Up to rounding (the masses are summed in
    another order than one cumulative sum over N) this is the sequential draw; it saves
    forming ``q`` and its R x N cumulative sum, two of the few passes over the block
    each round makes.
    """
    R, N = s.shape
    mass = torch.addcmul(counts * a[:, None], block_s, b[:, None])
    cdf = torch.cumsum(mass, 1)
    target = u[:, None] * cdf[:, -1:]
    nb = cdf.shape[1]
    ar_b = torch.arange(nb, device=s.device)
    last = torch.where(mass > 0, ar_b, -1).amax(1, keepdim=True)  # rounding guard: a block with mass
    blk = torch.minimum(torch.searchsorted(cdf, target, right=True), last)
    before = torch.where(blk > 0, cdf.gather(1, (blk - 1).clamp_(min=0)), torch.zeros_like(target))
    cols = blk * _BLOCK + torch.arange(_BLOCK, device=s.device)
    inside = cols < N
    cols = cols.clamp_(max=N - 1)
    q = torch.addcmul(A.gather(1, cols) * a[:, None], s.gather(1, cols), b[:, None]).mul_(inside)
    ar_q = torch.arange(_BLOCK, device=s.device)
    last = torch.where(q > 0, ar_q, -1).amax(1, keepdim=True)
    j = torch.minimum(torch.searchsorted(torch.cumsum(q, 1), target - before, right=True), last)
    return (blk * _BLOCK + j).squeeze(1)


def _normalise(x, A):
    """Rows of ``x`` (already zero where ``A`` is 0) scaled to sum 1; uniform over ``A`` if all 0."""
    total = x.sum(1, keepdim=True)
    pos = total > 0
    return torch.where(pos, x / torch.where(pos, total, 1.0), A / A.sum(1, keepdim=True))
