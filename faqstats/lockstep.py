"""The lockstep loop of :func:`faqstats.batched.simulate`: ``R`` runs of one configuration, a chunk at a time,
with the one-run engine's increments, ranges, draw and stopping rules (docs/architecture.md, "One loop")."""

import math

import numpy as np
import torch

from ._engine import aipw_terms, des_raj_base, draw_at, increment_range, pai_increment, policy_law, width_reached
from .batched_posterior import batched_posterior
from .confseq import BettingConfidenceSequences
from .design import sample_mean_design
from .posterior import PosteriorView
from .sampling import DRAW_BLOCK, PolicyState, mixture_coefficients, within_round

__all__ = ["Lockstep", "block_sums", "draw_runs", "resum_block"]

_BLOCK = DRAW_BLOCK  # the estimator's draw uses the same blocks


class Lockstep:
    """The lockstep loop for one configuration (:func:`faqstats.batched.simulate` sets its settings);
    :meth:`run` handles one chunk of runs."""

    def __init__(self, factor_model, sampler, budget, n_questions, device, dtype):
        self.sampler, self.budget, self.N, self.device, self.dtype = sampler, budget, n_questions, device, dtype
        self.keep_ranges, self.batch_size = False, 1  # batch_size: draws per round
        self.stops = None  # (alpha, stop_when_width) of the runs' confidence sequences, or None
        self.stream = sampler.design == "stream"
        self.factor_model, self.predict_every = factor_model, 1  # each chunk's posteriors come from these
        self.outcomes = None  # the (models x N) outcomes the runs read, set by simulate
        self.costs = None  # with costs: a tensor of the cost per question (the runs' spend is reported)
        self.method = "aipw" if self.stream else "sample_mean" if sample_mean_design(factor_model, sampler) else "pai"
        self.posterior = None  # the current chunk's posteriors

    def tensor(self, a, dtype=None):
        """``a`` as a tensor of the engine's dtype (or ``dtype``) on its device."""
        return torch.as_tensor(a, dtype=self.dtype if dtype is None else dtype, device=self.device)

    def run(self, rows, generators):
        """``(distinct questions asked, increments or terms, variance terms, ranges, draws made, stop reasons,
        anytime lows and highs, cost spent)`` of one chunk (run ``r`` on row ``rows[r]`` of :attr:`outcomes`)."""
        self.posterior = batched_posterior(self.factor_model, len(generators), self.N, self.dtype, self.device,
                                           self.predict_every)
        rows = torch.as_tensor(np.asarray(rows, dtype=np.int64), device=self.device)
        if self.stream:
            return self._run_stream(rows, generators)
        return self._run_sequential(rows, generators)

    # -- sequential designs --------------------------------------------------------
    def _numpy_laws(self, available, step, drawn, stops=None):
        """Each run's law from the policy's numpy scores (a policy without torch scores); a run
        that has stopped gets the uniform law instead (its draws are not used)."""
        post = self.posterior
        host = lambda x: None if x is None else x.detach().cpu().numpy().astype(float)  # noqa: E731
        P, mean, cov, V = host(post.predictions), host(post.mean), host(post.cov), host(post.question_factors)
        avail, asked = available.cpu().numpy(), drawn.cpu().numpy()
        for r in range(P.shape[0]):
            if stops and not stops.active[r]:
                yield avail[r].astype(float)
                continue
            yield policy_law(self.sampler, PolicyState(P[r], avail[r], step, self.budget, V,
                                                       None if mean is None else mean[r],
                                                       None if cov is None else cov[r], asked=asked[r]))

    def _run_sequential(self, rows, generators):
        R, N, budget, sampler, post = len(generators), self.N, self.budget, self.sampler, self.posterior
        replace, tau = sampler.replace, sampler.tau
        states = [g.bit_generator.state for g in generators] if self.stops else None
        U = np.stack([g.random(budget) for g in generators]) if R else np.empty((0, budget))
        Ut = self.tensor(U)
        Zt = self.outcomes
        ar = torch.arange(R, device=self.device)
        A = torch.ones(R, N, dtype=self.dtype, device=self.device)  # 1 where askable
        drawn = torch.zeros(R, budget, dtype=torch.int64, device=self.device)  # questions, in draw order
        asked_total = torch.zeros(R, dtype=self.dtype, device=self.device)
        phi, zs = (torch.empty(R, budget, dtype=self.dtype, device=self.device) for _ in range(2))
        # availability per block of _BLOCK questions (the draw's first level)
        nb = -(-N // _BLOCK)
        counts = torch.full((R, nb), float(_BLOCK), dtype=self.dtype, device=self.device)
        counts[:, -1] = N - (nb - 1) * _BLOCK
        ranges = torch.empty(R, budget, 2, dtype=self.dtype, device=self.device) if self.keep_ranges else None
        stops = _Stops(R, budget, *self.stops) if self.stops else None
        # scores that follow the predictions are kept, with their block sums and the prediction sums,
        # while the predictions stand: only the asked question's entries move until the next refresh
        cache = sampler.batched and sampler.scores_follow_predictions
        cached_at = -1  # the posterior's refresh count the cached scores belong to
        s = None  # the kept scores' buffer
        # tau = 1 (UniformSampler): the law ignores the scores (b = 0), so they are not kept at all
        uniform = cache and tau == 1.0 and not self.keep_ranges
        t = 0
        while t < budget:  # a round: its draws from the law at its start (SequentialRun.round_of)
            size = min(self.batch_size, budget - t)
            n_avail = N if replace else N - t
            done = drawn[:, :t]
            asked_now = drawn[:, :0] if replace else done
            refresh = not cache or cached_at != post.refreshes
            if cache and refresh:
                cached_at = post.refreshes
                p_sum = post.predictions.sum(1)
                p_asked = post.predictions.gather(1, done).sum(1)
            if uniform:  # q = 1 / n_avail on the askable questions, as mixture_coefficients gives it
                a = torch.full((R,), 1.0 / n_avail, dtype=self.dtype, device=self.device)
            elif sampler.batched:
                if refresh:  # kept scores go into one buffer (no fresh R x N block per refresh)
                    s = _follow_scores(sampler, post, s) if cache else sampler.scores(PolicyState(
                        post.predictions, A > 0, t + 1, budget, post.question_factors, post.mean, post.cov,
                        posterior=PosteriorView(post), asked=asked_now))
                    if not replace and t:
                        s.scatter_(1, done, 0.0)
                    block_s = block_sums(s)
                a, b = mixture_coefficients(block_s.sum(1), tau, n_avail)
            else:
                laws = list(self._numpy_laws(A > 0, t + 1, asked_now, stops))
            P = post.predictions  # the round's: the predictor learns at its end
            for k in range(t, t + size):
                # a later draw of a round without replacement: the round's law less the questions
                # drawn, renormalised (sampling.within_round)
                later = k > t and not replace
                q_full = None
                if uniform or sampler.batched:
                    # the law's mass: 1 up to rounding for a round's first draw (then not asked for)
                    with_mass = later or stops is not None
                    picked = draw_runs(None if uniform else s, None if uniform else block_s, A, a,
                                       None if uniform else b, counts, Ut[:, k], with_mass)
                    question, mass = picked if with_mass else (picked, None)
                if uniform:
                    prob = a / mass if later else a
                elif sampler.batched:
                    if self.keep_ranges:
                        q_full = torch.addcmul(A * a[:, None], s, b[:, None])
                        if later or stops:  # normalised, as the loop's law with a confidence sequence
                            q_full.div_(mass[:, None])
                    if stops:  # the probability read from the law its range uses, as the loop does
                        prob = q_full[ar, question]
                    else:
                        prob = a + b * s[ar, question]
                        prob = prob / mass if later else prob
                else:
                    question, prob, q_full = self._numpy_draws(laws, A > 0, later, U[:, k], stops)
                z = Zt[rows, question]
                p_q = P[ar, question]
                if cache:  # the sums kept since the last refresh
                    base = p_sum if replace else des_raj_base(p_sum, p_asked, asked_total)
                else:  # unasked predictions: all of them less the few asked (a gather, not a pass over A)
                    base = P.sum(1) if replace else des_raj_base(P.sum(1), P.gather(1, drawn[:, :k]).sum(1),
                                                                 asked_total)
                phi[:, k] = pai_increment(base, z, p_q, prob, N)
                if self.keep_ranges:  # SequentialRun.increment_range: phi_t's range before the draw
                    ranges[:, k, 0], ranges[:, k, 1] = increment_range(base, P, q_full, N)
                if stops:
                    stops.record(phi[:, k], ranges[:, k, 0], ranges[:, k, 1])
                zs[:, k] = z
                drawn[:, k] = question
                if not replace:
                    A[ar, question] = 0.0
                    counts[ar, question // _BLOCK] -= 1.0
                    asked_total += z
                    if cache:
                        p_asked = p_asked + p_q
                    # the asked question leaves the kept scores (and a round's later laws): its block summed again
                    if s is not None and not uniform and (cache or k + 1 < t + size):
                        s[ar, question] = 0.0
                        resum_block(s, block_s, question // _BLOCK)
            for k in range(t, t + size):  # the round's answers, in draw order (Run.end_round)
                post.update(None, drawn[:, k], zs[:, k])
            t += size
            if stops and stops.end_round(t):  # every run has stopped
                break
        values = (zs if self.method == "sample_mean" else phi).cpu().numpy()
        ranges = None if ranges is None else ranges.cpu().numpy()
        n_draws = stops.n_draws if stops else None
        if stops:
            for g, state, n in zip(generators, states, n_draws):  # the uniforms the run used, as the estimator's
                if n < budget:
                    g.bit_generator.state = state
                    g.random(n)
            for x in values, ranges:  # nothing after a run's stop
                if x is not None:
                    x[np.arange(budget) >= n_draws[:, None]] = np.nan
        d, first = _firsts(drawn, None if n_draws is None else torch.as_tensor(n_draws, device=self.device))
        # each run's summed cost of the distinct questions among its draws (the estimator's cost_spent_)
        spent = None if self.costs is None else torch.where(first, self.costs[d], 0.0).sum(1).cpu().numpy()
        stopping = (n_draws, stops.reason, stops.low, stops.high) if stops else (None,) * 4
        return first.sum(1).cpu().numpy(), values, None, ranges, *stopping, spent

    def _numpy_draws(self, laws, available, later, u, stops):
        """Every run's draw from its numpy law (a later draw of a round: renormalised over the
        questions not yet drawn), as SequentialRun.round_of draws it: ``(questions, probabilities, laws)``."""
        avail = available.cpu().numpy() if later else None
        laws = [within_round(q, avail[r], False) if later else q for r, q in enumerate(laws)]
        picked = [draw_at(q, u[r], stops is not None) for r, q in enumerate(laws)]
        question = torch.as_tensor([d[0] for d in picked], dtype=torch.int64, device=self.device)
        prob = self.tensor([d[1] for d in picked])
        if not (self.keep_ranges and laws):
            return question, prob, None
        return question, prob, self.tensor(np.stack([q if d[2] is None else d[2] for q, d in zip(laws, picked)]))

    # -- nature's-order designs ----------------------------------------------------
    def _run_stream(self, rows, generators):
        """Nature's-order label/skip runs (:class:`~faqstats.sampling.StreamSampler`), one item per step."""
        R, N, budget, sampler, post = len(generators), self.N, self.budget, self.sampler, self.posterior
        # the estimator draws the order first, then one coin per item
        drawn = [(sampler.stream_order(N, g), g.random(N)) for g in generators]
        order = torch.as_tensor(np.stack([o for o, _ in drawn]) if R else np.empty((0, N), np.int64),
                                device=self.device)
        U = self.tensor(np.stack([c for _, c in drawn]) if R else np.empty((0, N)))
        Zt = self.outcomes
        ar = torch.arange(R, device=self.device)
        avail = torch.ones(R, N, dtype=torch.bool, device=self.device)
        zero = torch.zeros((), dtype=self.dtype)
        item_scores, inclusion = self._stream_policy()
        S = item_scores(post.predictions)
        ssum = S.sum(1)
        labels, total, var_total = (torch.zeros(R, dtype=self.dtype, device=self.device) for _ in range(3))
        certain = torch.ones(R, dtype=torch.bool, device=self.device)  # every item labelled with pi = 1 so far
        for t in range(N):
            remaining = N - t
            j = order[:, t]
            s_j = S[ar, j]
            pi = inclusion(s_j, ssum / remaining, labels, remaining, budget, N)
            lab = U[:, t] < pi
            certain &= pi >= 1.0
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
        total = total.cpu().numpy()
        for r in np.flatnonzero(certain.cpu().numpy()):  # a census by design: the answers' exact total
            total[r] = math.fsum(Zt[rows[r]].cpu().numpy().astype(float).tolist())
        return (labels.cpu().numpy().astype(np.int64), total[:, None],
                var_total.cpu().numpy()[:, None], None, None, None, None, None, None)

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


class _Stops:
    """The runs' confidence sequences and QueryLoop's stopping rule (a stopped run's later draws are made, unused)."""

    def __init__(self, n_runs, budget, alpha, width):
        self.cs = BettingConfidenceSequences(n_runs, alpha=alpha, truncation=0.9, horizon=budget)
        self.width = width
        self.active = np.ones(n_runs, dtype=bool)
        self.n_draws = np.full(n_runs, budget, dtype=np.int64)
        self.reason = np.full(n_runs, "budget", dtype=object)
        self.low, self.high = np.zeros(n_runs), np.ones(n_runs)

    def record(self, x, lower, upper):
        """One increment of every run still going, with its range."""
        runs = np.flatnonzero(self.active)
        self.cs.update(*(v.detach().cpu().numpy().astype(float)[runs] for v in (x, lower, upper)), runs)

    def end_round(self, n_draws):
        """The sequences after a round of the runs still going, ``n_draws`` draws in; whether every run has stopped."""
        runs = np.flatnonzero(self.active)
        self.low[runs], self.high[runs] = self.cs.interval(runs)
        if self.width is not None:
            stopped = runs[width_reached(self.low[runs], self.high[runs], self.width, n_draws)]
            self.n_draws[stopped] = n_draws
            self.reason[stopped] = "width"
            self.active[stopped] = False
        return not self.active.any()


def _firsts(drawn, lengths=None):
    """Each run's draws sorted, and where each question first appears (past ``lengths[r]`` none does)."""
    if lengths is not None:  # the draws past a run's length repeat its first (no new question)
        drawn = torch.where(torch.arange(drawn.shape[1], device=drawn.device) < lengths[:, None], drawn, drawn[:, :1])
    d = drawn.sort(1).values
    first = torch.ones_like(d, dtype=torch.bool)
    first[:, 1:] = d[:, 1:] != d[:, :-1]
    return d, first


def _follow_scores(sampler, posterior, out):
    """``sampler.scores`` of a policy whose scores follow the predictions, into ``out`` when given: ones
    where ``tau = 1`` (``b = 0``), else the oracle scores (the posterior's own, or computed as it does)."""
    P = posterior.predictions
    uniform = sampler.tau == 1.0
    if not uniform and posterior.scores is not None:
        return posterior.scores
    if out is None or out is posterior.scores:
        out = torch.empty_like(P)
    if uniform:
        return out.fill_(1.0)
    return torch.addcmul(P, P, P, value=-1.0, out=out).sqrt_()  # posterior.oracle_scores


def resum_block(s, block_s, blk):
    """``block_s[r, blk[r]]`` summed again from ``s`` (as :func:`block_sums` sums it), for every run ``r``."""
    R, N = s.shape
    cols = blk[:, None] * _BLOCK + torch.arange(_BLOCK, device=s.device)
    inside = cols < N
    vals = s.gather(1, cols.clamp_(max=N - 1)).mul_(inside)
    block_s.scatter_(1, blk[:, None], vals.sum(1, keepdim=True))


def block_sums(s):
    """Row sums of ``s`` (R, N) over consecutive blocks of ``DRAW_BLOCK`` columns (the last one shorter)."""
    R, N = s.shape
    full = N // _BLOCK * _BLOCK
    parts = [s[:, :full].reshape(R, -1, _BLOCK).sum(2)]
    if full < N:
        parts.append(s[:, full:].sum(1, keepdim=True))
    return torch.cat(parts, 1) if len(parts) > 1 else parts[0]


def draw_runs(s, block_s, A, a, b, counts, u, with_mass=False):
    """:func:`faqstats.sampling.draw_from` for every run at uniforms ``u``, ``q = a A + b s`` never formed:
    each run's question, and with ``with_mass`` the total mass ``sum_j q_j`` the draw used.
    """
    R, N = A.shape
    uniform = s is None  # the uniform law (b = 0): the masses are the counts'
    mass = counts * a[:, None] if uniform else torch.addcmul(counts * a[:, None], block_s, b[:, None])
    cdf = torch.cumsum(mass, 1)
    target = u[:, None] * cdf[:, -1:]
    nb = cdf.shape[1]
    blk = torch.searchsorted(cdf, target, right=True)
    # past the end only by rounding: then the last block with mass
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
    question = (blk * _BLOCK + j).squeeze(1)
    return (question, cdf[:, -1]) if with_mass else question


def _guard_needed(index, size):
    """Whether some search ran past the end (assumed off the CPU, where asking would wait for the device)."""
    return index.device.type != "cpu" or bool((index >= size).any())
