"""Arithmetic written once for numpy arrays (one run) and torch tensors (runs in lockstep, a leading run
axis). torch is never imported here: a tensor can only come from code that did."""

import math
import sys

import numpy as np
from scipy.special import expit

__all__ = ["namespace", "is_torch", "sigmoid"]


def is_torch(x):
    """Whether ``x`` is a torch tensor (without importing torch)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def namespace(x):
    """The module whose functions apply to ``x``: ``torch`` for a tensor, else ``numpy``."""
    return sys.modules["torch"] if is_torch(x) else np


def sigmoid(x):
    """``1 / (1 + exp(-x))`` without overflow warnings (a Python float gives a Python float: fast scalar steps)."""
    if isinstance(x, float):
        return 1.0 / (1.0 + math.exp(-x)) if x > -700.0 else 0.0  # exp(700) is finite; beyond, p < 1e-304
    return x.sigmoid() if is_torch(x) else expit(x)


def matvec(A, x):
    """``A @ x`` over leading (run) axes: ``A`` (..., m, k), ``x`` (..., k) -> (..., m)."""
    return A @ x if x.ndim == 1 else (A @ x[..., None])[..., 0]


def dot(a, b):
    """``a . b`` along the last axis (over leading run axes; a Python float for vectors)."""
    return float(a @ b) if a.ndim == 1 else (a * b).sum(-1)


def column(x):
    """``x`` broadcast against a trailing axis: a scalar as is, ``x[..., None]`` otherwise."""
    return x[..., None] if getattr(x, "ndim", 0) else x
