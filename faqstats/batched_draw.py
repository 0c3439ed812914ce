"""The two-level inverse-CDF draw of :func:`~faqstats.sampling.draw_from`, for many runs at once.

The batched engine (:mod:`faqstats.batched`) keeps a policy's law as ``q = a A + b s`` (``A``
the askable questions, ``s`` the scores, ``a`` and ``b`` one per run) and its block sums; the
law itself is never formed. Each run draws from its own uniform, as ``draw_from`` would.
"""

from __future__ import annotations

import torch

from .sampling import DRAW_BLOCK

__all__ = ["block_sums", "draw_runs", "resum_block"]

_BLOCK = DRAW_BLOCK


def resum_block(s, block_s, blk):
    """``block_s[r, blk[r]]`` summed again from ``s`` (as :func:`block_sums` sums it), for every run ``r``.

    >>> s = torch.ones(1, 300, dtype=torch.float64)
    >>> block_s = block_sums(s)
    >>> s[0, 5] = 0.0
    >>> resum_block(s, block_s, torch.tensor([0]))
    >>> block_s.tolist()
    [[127.0, 128.0, 44.0]]
    """
    R, N = s.shape
    cols = blk[:, None] * _BLOCK + torch.arange(_BLOCK, device=s.device)
    inside = cols < N
    vals = s.gather(1, cols.clamp_(max=N - 1)).mul_(inside)
    block_s.scatter_(1, blk[:, None], vals.sum(1, keepdim=True))


def block_sums(s):
    """Row sums of ``s`` (R, N) over consecutive blocks of ``DRAW_BLOCK`` columns (the last one shorter).

    >>> block_sums(torch.ones(2, 300)).tolist()
    [[128.0, 128.0, 44.0], [128.0, 128.0, 44.0]]
    """
    R, N = s.shape
    full = N // _BLOCK * _BLOCK
    parts = [s[:, :full].reshape(R, -1, _BLOCK).sum(2)]
    if full < N:
        parts.append(s[:, full:].sum(1, keepdim=True))
    return torch.cat(parts, 1) if len(parts) > 1 else parts[0]


def draw_runs(s, block_s, A, a, b, counts, u, with_mass=False):
    """:func:`faqstats.sampling.draw_from` for every run, up to rounding, with ``q = a A + b s``
    never formed: the block from the masses ``a counts + b block_s``, then the question inside it.

    Returns each run's question, and with ``with_mass`` also the total mass ``sum_j q_j`` the
    draw used (1 up to rounding for a policy's law; less for a later draw of a round without
    replacement, whose law is the round's less the questions already drawn).

    Examples
    --------
    >>> A = torch.ones(2, 3, dtype=torch.float64)
    >>> s = torch.tensor([[0.0, 1.0, 0.0], [1.0, 1.0, 2.0]], dtype=torch.float64)
    >>> a, b = torch.zeros(2, dtype=torch.float64), 1 / s.sum(1)
    >>> questions, mass = draw_runs(s, block_sums(s), A, a, b, torch.full((2, 1), 3.0, dtype=torch.float64),
    ...                             torch.tensor([0.5, 0.9], dtype=torch.float64), with_mass=True)
    >>> questions.tolist(), mass.tolist()
    ([1, 2], [1.0, 1.0])
    """
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
    question = (blk * _BLOCK + j).squeeze(1)
    return (question, cdf[:, -1]) if with_mass else question


def _guard_needed(index, size):
    """Whether some search ran past the end (always assumed off the CPU, where asking would wait for the device)."""
    return index.device.type != "cpu" or bool((index >= size).any())
