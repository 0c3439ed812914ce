"""Many PAI runs in lockstep: a batched torch engine for simulations.

:func:`simulate` advances ``R`` runs of :class:`~faqstats.PAIEstimator`'s loop together, each
round a few tensor operations over an ``R x N`` block, with the estimator's parts (policies'
scores, Laplace step, increments, inference) and draws: in float64 it asks the estimator's
questions (docs/architecture.md, "One loop"; memory and timings: docs/performance.md,
"Batched engine"). What it covers: :func:`supports`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch

from ._engine import aipw_terms, des_raj_base, pai_increment
from ._inference import census_mean, fpc_mean, interval_df, pai_inference
from .intervals import interval_rule
from ._validation import check_alpha, check_generator
from .batched_posterior import batched_posterior
from .design import bank_size, check_configuration, sample_mean_design
from .posterior import PosteriorView
from .predictor import resolve_predictor_keyword
from .sampling import DRAW_BLOCK, PolicyState, check_law, inverse_cdf, mixture_coefficients

__all__ = ["BatchedRuns", "simulate", "supports"]

_DTYPES = {"float32": torch.float32, "float64": torch.float64}

#: elements of one ``R x N`` block; runs are processed in chunks of at most this size
DEFAULT_MAX_ELEMENTS = 2**20
#: the same where the scores are kept between prediction refreshes: a query then costs little
#: per run, so larger chunks spread its fixed cost (about 25 bytes per element in float64: up to 840 MB)
CACHED_MAX_ELEMENTS = 2**25
_BLOCK = DRAW_BLOCK  # the estimator's draw uses the same blocks


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
        With ``keep_increments=True``: each run's ``phi_t`` (its outcomes for the sample mean).
    increment_ranges : ndarray of shape (R, budget, 2) or None
        With ``keep_increments=True``: the range of each ``phi_t`` known before its draw.

    Examples
    --------
    >>> import numpy as np
    >>> import faqstats as fq
    >>> z = fq.make_synthetic_bank(n_models=30, n_questions=100, n_new=2, random_state=0).new_outcomes
    >>> runs = simulate(z, [0, 1, 2, 3], sampler=fq.UniformSampler(), budget=20, rows=[0, 0, 1, 1],
    ...                 keep_increments=True)
    >>> runs.method, runs.estimate.shape, runs.increments.shape
    ('sample_mean', (4,), (4, 20))
    >>> bool(np.all((runs.low <= runs.estimate) & (runs.estimate <= runs.high)))
    True
    >>> est = fq.PAIEstimator(sampler=fq.UniformSampler(), budget=20, random_state=2).fit(z[1])
    >>> bool(runs.estimate[2] == est.estimate_)  # run 2: row 1 with seed 2
    True
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

    It does for any policy with one draw per round, the martingale variance and no early stopping.

    Parameters
    ----------
    sampler : Sampler or StreamSampler
        The policy.
    batch_size, variance, stop_when_width, confidence_sequence
        As in :class:`~faqstats.PAIEstimator`.

    Returns
    -------
    bool
        Whether :func:`simulate` covers the settings.

    Examples
    --------
    >>> from faqstats import HybridSampler
    >>> supports(HybridSampler()), supports(HybridSampler(), batch_size=4)
    (True, False)
    """
    return batch_size == 1 and variance == "martingale" and stop_when_width is None and not confidence_sequence


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
        Any fitted predictor (a built-in, or a :class:`~faqstats.Predictor` of your own, whose
        one-run posteriors are then driven side by side); ``factor_model=`` is its old name
        (deprecated, with a ``FutureWarning``).
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
        Runs are processed in chunks of at most ``max_elements // N`` runs; a chunk that runs
        out of memory is run again in halves (``ResourceWarning``), with the same results.
        ``None``: :data:`DEFAULT_MAX_ELEMENTS`, or :data:`CACHED_MAX_ELEMENTS` where a query
        costs O(R (N / 128 + 128)) between prediction refreshes (fixed predictions, or
        ``predict_every > 1``, with a policy whose scores follow the predictions).
    progress : callable or None
        Called with the number of runs finished after each chunk.
    keep_increments : bool, default=False
        Also return every run's increments and their ranges (sequential samplers only).
    step_weights : array-like or None
        As in :class:`~faqstats.PAIEstimator` (weighted increments).
    predict_every : int, default=1
        As in :class:`~faqstats.PAIEstimator` (predictions refreshed on a schedule).
    keep_ranges : bool or None, default=None
        Whether ``keep_increments`` includes the ranges (``None``: it does); computing them
        costs a few passes over the ``R x N`` block per query.
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
    sampler = check_configuration(N, budget, sampler, predictor=factor_model, interval=interval,
                                  step_weights=step_weights, predict_every=predict_every)
    engine = _Lockstep(factor_model, sampler, int(budget), N, torch.device(device), _DTYPES[dtype])
    engine.predict_every = int(predict_every)
    if keep_increments and engine.stream:
        raise ValueError("keep_increments is for sequential samplers; BernoulliAIPW has no per-query increments.")
    engine.keep_ranges = bool(keep_increments) and (keep_ranges is None or bool(keep_ranges))
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
            engine.release()  # the failed chunk's blocks, before the smaller chunk allocates its own
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
    n_queries, values, var_terms, ranges = (np.concatenate(x) if x[0] is not None else None for x in zip(*parts))
    if engine.method == "aipw":
        estimate, var, df = values.sum(1) / N, var_terms.sum(1) / N**2, np.full(R, np.inf)
    elif engine.method == "sample_mean":
        (estimate, var), df = fpc_mean(values, N), interval_df(interval, values)
    else:
        census = census_mean(Z[rows], N) if not sampler.replace and values.shape[1] == N else None
        estimate, var, df, _ = pai_inference(values, interval=interval, weights=step_weights,
                                             n_questions=None if sampler.replace else N, census=census)
    if not (np.all(np.isfinite(estimate)) and np.all(np.isfinite(var))):
        raise FloatingPointError("Non-finite estimate or variance in a batched run.")
    se = np.sqrt(var)
    low, high = interval_rule(interval).interval(estimate, se, alpha=alpha, df=df)
    return BatchedRuns(estimate, se, df, low, high, n_queries.astype(np.int64), engine.method,
                       values if keep_increments else None, ranges if keep_increments else None)


def _out_of_memory(exc):
    """Whether ``exc`` is an allocation failure (host or device) that a smaller chunk may avoid."""
    if isinstance(exc, MemoryError) or isinstance(exc, getattr(torch, "OutOfMemoryError", ())):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("out of memory" in text.lower() or "can't allocate memory" in text)


class _Lockstep:
    """The lockstep loop for one configuration; :meth:`run` handles one chunk of runs."""

    def __init__(self, factor_model, sampler, budget, n_questions, device, dtype):
        self.sampler, self.budget, self.N = sampler, budget, n_questions
        self.keep_ranges = False
        self.device, self.dtype = device, dtype
        self.stream = sampler.design == "stream"
        self.factor_model = factor_model  # batched_posterior gives its runs' posteriors, chunk by chunk
        self.predict_every = 1
        self.outcomes = None  # the (models x N) outcomes the runs read, set by simulate
        self.method = "aipw" if self.stream else "sample_mean" if sample_mean_design(factor_model, sampler) else "pai"
        self.posterior = None

    def tensor(self, a, dtype=None):
        """``a`` as a tensor of the engine's dtype (or ``dtype``) on its device."""
        return torch.as_tensor(a, dtype=self.dtype if dtype is None else dtype, device=self.device)

    def release(self):
        """Drop the current chunk's per-run tensors (predictions, posteriors, quadratic forms)."""
        self.posterior = None

    def run(self, rows, generators):
        """``(distinct questions asked, increments or terms, variance terms, ranges)`` of one chunk: run
        ``r`` evaluates row ``rows[r]`` of :attr:`outcomes`."""
        self.posterior = batched_posterior(self.factor_model, len(generators), self.N, self.dtype, self.device,
                                           self.predict_every)
        rows = torch.as_tensor(np.asarray(rows, dtype=np.int64), device=self.device)
        if self.stream:
            return self._run_stream(rows, generators)
        return self._run_sequential(rows, generators)

    # -- sequential designs --------------------------------------------------------
    def _state(self, available, step, drawn):
        post = self.posterior
        return PolicyState(post.predictions, available, step, self.budget, post.question_factors, post.mean, post.cov,
                           posterior=PosteriorView(post), asked=drawn)

    def _numpy_laws(self, available, step, drawn):
        """Each run's law from the policy's numpy scores (a policy without torch scores)."""
        post = self.posterior
        host = lambda x: None if x is None else x.detach().cpu().numpy().astype(float)  # noqa: E731
        P, mean, cov, V = host(post.predictions), host(post.mean), host(post.cov), host(post.question_factors)
        avail, asked = available.cpu().numpy(), drawn.cpu().numpy()
        name = f"{type(self.sampler).__name__}.probabilities"
        for r in range(P.shape[0]):
            state = PolicyState(P[r], avail[r], step, self.budget, V, None if mean is None else mean[r],
                                None if cov is None else cov[r], asked=asked[r])
            q = self.sampler.probabilities(state)
            yield check_law(q, avail[r].shape, asked[r], name) if self.sampler.checks_law else q

    def _run_sequential(self, rows, generators):
        R, N, budget = len(generators), self.N, self.budget
        sampler, post = self.sampler, self.posterior
        replace, tau = sampler.replace, sampler.tau
        U = np.stack([g.random(budget) for g in generators]) if R else np.empty((0, budget))
        Ut = self.tensor(U)
        Zt = self.outcomes
        ar = torch.arange(R, device=self.device)
        A = torch.ones(R, N, dtype=self.dtype, device=self.device)  # 1 where askable
        available = torch.ones(R, N, dtype=torch.bool, device=self.device)
        drawn = torch.zeros(R, budget, dtype=torch.int64, device=self.device)  # questions, in draw order
        asked_total = torch.zeros(R, dtype=self.dtype, device=self.device)
        phi = torch.empty(R, budget, dtype=self.dtype, device=self.device)
        zs = torch.empty(R, budget, dtype=self.dtype, device=self.device)
        # availability per block of _BLOCK questions (the draw's first level)
        nb = -(-N // _BLOCK)
        counts = torch.full((R, nb), float(_BLOCK), dtype=self.dtype, device=self.device)
        counts[:, -1] = N - (nb - 1) * _BLOCK
        ranges = torch.empty(R, budget, 2, dtype=self.dtype, device=self.device) if self.keep_ranges else None
        # scores that follow the predictions are kept, with their block sums and the prediction
        # sums, while the predictions stand (fixed ones, or on a schedule): only the asked
        # question's entries move; recomputed (as before) after every refresh
        cache = sampler.batched and sampler.scores_follow_predictions
        cached_at = -1  # the posterior's refresh count the cached scores belong to
        s = None  # the kept scores' buffer
        # tau = 1 (UniformSampler): the law ignores the scores (b = 0), so they are not kept at all
        uniform = cache and tau == 1.0 and not self.keep_ranges
        for t in range(budget):
            n_avail = N if replace else N - t
            done = drawn[:, :t]
            asked_now = drawn[:, :0] if replace else done
            if uniform:  # q = 1 / n_avail on the askable questions, as mixture_coefficients gives it
                if cached_at != post.refreshes:
                    cached_at = post.refreshes
                    p_sum = post.predictions.sum(1)
                    p_asked = post.predictions.gather(1, done).sum(1)
                a = torch.full((R,), 1.0 / n_avail, dtype=self.dtype, device=self.device)
                question = _draw(None, None, A, a, None, counts, Ut[:, t])
                prob = a
                q_full = None
            elif sampler.batched:
                if not cache or cached_at != post.refreshes:
                    if cache:  # the sampler's scores, into one buffer (no fresh R x N block per refresh)
                        s = _follow_scores(sampler, post, s)
                    else:
                        s = sampler.scores(self._state(available, t + 1, asked_now))
                    if not replace and t:
                        s.scatter_(1, done, 0.0)
                    block_s = _block_sums(s)
                    if cache:
                        cached_at = post.refreshes
                        p_sum = post.predictions.sum(1)
                        p_asked = post.predictions.gather(1, done).sum(1)
                a, b = mixture_coefficients(block_s.sum(1), tau, n_avail)
                question = _draw(s, block_s, A, a, b, counts, Ut[:, t])
                prob = a + b * s[ar, question]
                q_full = torch.addcmul(A * a[:, None], s, b[:, None]) if self.keep_ranges else None
            else:
                laws = list(self._numpy_laws(available, t + 1, asked_now))
                picked = [inverse_cdf(q, u) for q, u in zip(laws, U[:, t])]
                question = torch.as_tensor([j for j, _ in picked], dtype=torch.int64, device=self.device)
                prob = self.tensor([p for _, p in picked])
                q_full = self.tensor(np.stack(laws)) if self.keep_ranges and R else None
            z = Zt[rows, question]
            P = post.predictions
            p_q = P[ar, question]
            if cache:  # the sums kept since the last refresh
                base = p_sum if replace else des_raj_base(p_sum, p_asked, asked_total)
            else:  # unasked predictions: all of them less the few asked (a gather, not a pass over A)
                base = P.sum(1) if replace else des_raj_base(P.sum(1), P.gather(1, done).sum(1), asked_total)
            phi[:, t] = pai_increment(base, z, p_q, prob, N)
            if self.keep_ranges:  # SequentialRun.increment_range: phi_t's range before the draw
                inf = torch.full((), float("inf"), dtype=self.dtype)
                ranges[:, t, 0] = (base + torch.where(q_full > 0, -P / q_full, inf).amin(1)) / N
                ranges[:, t, 1] = (base + torch.where(q_full > 0, (1.0 - P) / q_full, -inf).amax(1)) / N
            zs[:, t] = z
            drawn[:, t] = question
            if not replace:
                A[ar, question] = 0.0
                available[ar, question] = False
                counts[ar, question // _BLOCK] -= 1.0
                asked_total += z
                if cache:
                    p_asked = p_asked + p_q
                if cache and not uniform:  # the asked question leaves the cached scores: its block summed again
                    s[ar, question] = 0.0
                    _resum_block(s, block_s, question // _BLOCK)
            post.update(None, question, z)
        values = zs if self.method == "sample_mean" else phi
        return (_distinct(drawn, replace).cpu().numpy(), values.cpu().numpy(), None,
                None if ranges is None else ranges.cpu().numpy())

    # -- nature's-order designs ----------------------------------------------------
    def _run_stream(self, rows, generators):
        """Nature's-order label/skip runs (:class:`~faqstats.sampling.StreamSampler`), one item per step."""
        sampler, post = self.sampler, self.posterior
        R, N, budget = len(generators), self.N, self.budget
        orders, coins = [], []
        for g in generators:  # the estimator draws the order first, then one coin per item
            orders.append(sampler.stream_order(N, g))
            coins.append(g.random(N))
        order = torch.as_tensor(np.stack(orders) if R else np.empty((0, N), np.int64), device=self.device)
        U = self.tensor(np.stack(coins) if R else np.empty((0, N)))
        Zt = self.outcomes
        ar = torch.arange(R, device=self.device)
        avail = torch.ones(R, N, dtype=torch.bool, device=self.device)
        zero = torch.zeros((), dtype=self.dtype)
        item_scores, inclusion = self._stream_policy()
        S = item_scores(post.predictions)
        ssum = S.sum(1)
        labels = torch.zeros(R, dtype=self.dtype, device=self.device)
        total = torch.zeros(R, dtype=self.dtype, device=self.device)
        var_total = torch.zeros(R, dtype=self.dtype, device=self.device)
        for t in range(N):
            remaining = N - t
            j = order[:, t]
            s_j = S[ar, j]
            pi = inclusion(s_j, ssum / remaining, labels, remaining, budget, N)
            lab = U[:, t] < pi
            p = post.predictions[ar, j]
            z = Zt[rows, j]
            term, variance_term = aipw_terms(p, z, pi)
            total += torch.where(lab, term, p)
            var_total += torch.where(lab, variance_term, zero)
            labels += lab.to(self.dtype)
            avail[ar, j] = False
            ssum = ssum - s_j
            idx = torch.nonzero(lab).squeeze(1)
            if self.factor_model is not None and idx.numel():
                post.update(idx, j[idx], z[idx])
                S[idx] = item_scores(post.predictions[idx])
                ssum[idx] = torch.where(avail[idx], S[idx], zero).sum(1)
        return (labels.cpu().numpy().astype(np.int64), total.cpu().numpy()[:, None],
                var_total.cpu().numpy()[:, None], None)

    def _stream_policy(self):
        """``(item_scores, inclusion_probability)`` on tensors: the sampler's own, or its
        numpy methods called run by run."""
        sampler = self.sampler
        if sampler.batched:
            return sampler.item_scores, sampler.inclusion_probability

        def item_scores(P):
            host = P.detach().cpu().numpy().astype(float)
            return self.tensor(np.stack([np.asarray(sampler.item_scores(p), dtype=float) for p in host]))

        def inclusion(s, mean_s, labels, remaining, budget, n):
            args = zip(*(x.detach().cpu().numpy().astype(float).tolist() for x in (s, mean_s, labels)))
            return self.tensor([float(sampler.inclusion_probability(a, m, l, remaining, budget, n))
                                 for a, m, l in args])

        return item_scores, inclusion


def _distinct(drawn, replace):
    """Distinct questions in each row of ``drawn`` (all of them without replacement)."""
    R, budget = drawn.shape
    if not replace or budget < 2:
        return torch.full((R,), budget, dtype=torch.int64, device=drawn.device)
    d = drawn.sort(1).values
    return (d[:, 1:] != d[:, :-1]).sum(1) + 1


def _follow_scores(sampler, posterior, out):
    """What ``sampler.scores`` gives for a policy whose ``scores_follow_predictions``, written into
    ``out`` when given: ones where ``tau = 1`` (the law ignores the scores then, ``b = 0``: the
    uniform policy's), else the oracle scores (UniformSampler, NeymanSampler and HybridSampler
    follow the predictions): the posterior's own (the engine may zero entries of them until the
    next refresh) or the same operations as ``posterior.oracle_scores``, so the same values."""
    P = posterior.predictions
    uniform = sampler.tau == 1.0
    if not uniform and posterior.scores is not None:
        return posterior.scores
    if out is None or out is posterior.scores:
        out = torch.empty_like(P)
    if uniform:
        return out.fill_(1.0)
    return torch.addcmul(P, P, P, value=-1.0, out=out).sqrt_()  # posterior.oracle_scores


def _resum_block(s, block_s, blk):
    """``block_s[r, blk[r]]`` summed again from ``s`` (as :func:`_block_sums` sums it), for every run ``r``."""
    R, N = s.shape
    cols = blk[:, None] * _BLOCK + torch.arange(_BLOCK, device=s.device)
    inside = cols < N
    vals = s.gather(1, cols.clamp_(max=N - 1)).mul_(inside)
    block_s.scatter_(1, blk[:, None], vals.sum(1, keepdim=True))


def _block_sums(s):
    """Row sums of ``s`` (R, N) over consecutive blocks of ``_BLOCK`` columns (the last one shorter)."""
    R, N = s.shape
    full = N // _BLOCK * _BLOCK
    parts = [s[:, :full].reshape(R, -1, _BLOCK).sum(2)]
    if full < N:
        parts.append(s[:, full:].sum(1, keepdim=True))
    return torch.cat(parts, 1) if len(parts) > 1 else parts[0]


def _draw(s, block_s, A, a, b, counts, u):
    """:func:`faqstats.sampling.draw_from` for every run, up to rounding, with ``q = a A + b s``
    never formed: the block from the masses ``a counts + b block_s``, then the question inside it."""
    R, N = A.shape
    uniform = s is None  # the uniform law (b = 0): the masses are the counts'
    mass = counts * a[:, None] if uniform else torch.addcmul(counts * a[:, None], block_s, b[:, None])
    cdf = torch.cumsum(mass, 1)
    target = u[:, None] * cdf[:, -1:]
    nb = cdf.shape[1]
    blk = torch.searchsorted(cdf, target, right=True)
    # past the end only by rounding: then the last block with mass (the first block whose cdf
    # passes the target is never one without mass, so the guard changes nothing else)
    if _guard_needed(blk, nb):
        last = torch.where(mass > 0, torch.arange(nb, device=A.device), -1).amax(1, keepdim=True)
        blk = torch.minimum(blk, last)
    before = torch.where(blk > 0, cdf.gather(1, (blk - 1).clamp_(min=0)), torch.zeros_like(target))
    cols = blk * _BLOCK + torch.arange(_BLOCK, device=A.device)
    inside = cols < N
    cols = cols.clamp_(max=N - 1)
    q = A.gather(1, cols) * a[:, None]
    if not uniform:
        q = torch.addcmul(q, s.gather(1, cols), b[:, None])
    q.mul_(inside)
    j = torch.searchsorted(torch.cumsum(q, 1), target - before, right=True)
    if _guard_needed(j, _BLOCK):  # likewise inside the block: its last question with mass
        last = torch.where(q > 0, torch.arange(_BLOCK, device=A.device), -1).amax(1, keepdim=True)
        j = torch.minimum(j, last)
    return (blk * _BLOCK + j).squeeze(1)


def _guard_needed(index, size):
    """Whether some search ran past the end (always assumed off the CPU, where asking would wait for the device)."""
    return index.device.type != "cpu" or bool((index >= size).any())
