"""Cold start: each question of a new bank gets the weighted mean factor of its ``k`` most cosine-similar
questions (by embedding) of an old bank, whose prior carries over (the paper's cross-suite transfer, Section 4)."""

import numbers

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ._validation import check_scalar
from .factor_model import LogisticFactorModel

__all__ = ["transfer_question_factors", "cold_start_factor_model"]

_WEIGHTINGS = ("similarity", "softmax", "uniform")


def _matrix(x, name, n_rows=None, n_cols=None):
    """``x`` as a finite non-empty 2-D float array, its rows or columns matching ``(count, other name)``."""
    arr = np.asarray(x)
    if not (np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_)):
        raise TypeError(f"{name} must be a numeric array, got dtype {arr.dtype}.")
    arr = arr.astype(float)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"{name} must be a non-empty 2-D array, got shape {arr.shape}.")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite (no NaN or infinity).")
    if n_rows is not None and arr.shape[0] != n_rows[0]:
        raise ValueError(f"{name} has {arr.shape[0]} rows but {n_rows[1]} has {n_rows[0]}.")
    if n_cols is not None and arr.shape[1] != n_cols[0]:
        raise ValueError(f"{name} has {arr.shape[1]} columns (embedding dimension) but {n_cols[1]} has {n_cols[0]}.")
    return arr


def _unit_rows(E, name):
    norms = np.linalg.norm(E, axis=1)
    zero = np.flatnonzero(norms == 0)
    if zero.size:
        raise ValueError(f"{name} has {zero.size} all-zero row(s) (first: row {zero[0]}); cosine similarity is "
                         "undefined.")
    return E / norms[:, None]


def transfer_question_factors(source_factors, source_embeddings, target_embeddings, *, n_neighbors=8,
                              weighting="similarity", temperature=0.1, return_neighbors=False, chunk_size=2048):
    """Question factors for target questions from their nearest source questions (cosine k-NN).

    Parameters
    ----------
    source_factors : array-like of shape (n_source, k)
    source_embeddings : array-like of shape (n_source, d)
    target_embeddings : array-like of shape (n_target, d)
        The new bank's questions, in the same embedding space.
    n_neighbors : int or None, default=8
        Neighbours per target question (capped at ``n_source``; ``None``: all).
    weighting : {"similarity", "softmax", "uniform"}, default="similarity"
        Weights proportional to ``max(cosine, 0)`` (equal if none is positive), to
        ``exp(cosine / temperature)``, or equal.
    temperature : float > 0, default=0.1
        Softmax temperature (``"softmax"`` only).
    return_neighbors : bool, default=False
        Also return the neighbours' indices and weights, (n_target, n_neighbors), nearest first.
    chunk_size : int, default=2048
        Target rows per block of the similarity matrix.

    Returns
    -------
    factors : ndarray of shape (n_target, k)
    indices, weights : ndarrays, only with ``return_neighbors=True``

    Examples
    --------
    >>> import numpy as np
    >>> V_old, E_old = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]]), np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> V, idx, w = transfer_question_factors(V_old, E_old, [[3.0, 0.0]], n_neighbors=2, return_neighbors=True)
    >>> idx, w.round(3)                             # cosines 1 and 0.707
    (array([[0, 2]]), array([[0.586, 0.414]]))
    """
    V = _matrix(source_factors, "source_factors")
    E_src = _matrix(source_embeddings, "source_embeddings", n_rows=(V.shape[0], "source_factors"))
    E_tgt = _matrix(target_embeddings, "target_embeddings", n_cols=(E_src.shape[1], "source_embeddings"))
    n_source = V.shape[0]
    if n_neighbors is None:
        n_neighbors = n_source
    check_scalar(n_neighbors, "n_neighbors", kind=numbers.Integral, low=1)
    if weighting not in _WEIGHTINGS:
        raise ValueError(f"weighting must be one of {_WEIGHTINGS}, got {weighting!r}.")
    check_scalar(temperature, "temperature", low=0.0, closed="neither")
    check_scalar(chunk_size, "chunk_size", kind=numbers.Integral, low=1)
    n_neighbors = min(int(n_neighbors), n_source)
    A_src = _unit_rows(E_src, "source_embeddings")
    A_tgt = _unit_rows(E_tgt, "target_embeddings")
    n_target = A_tgt.shape[0]
    indices = np.empty((n_target, n_neighbors), dtype=np.int64)
    weights = np.empty((n_target, n_neighbors))
    for start in range(0, n_target, chunk_size):
        S = np.clip(A_tgt[start : start + chunk_size] @ A_src.T, -1.0, 1.0)
        if n_neighbors < n_source:
            top = np.argpartition(-S, n_neighbors - 1, axis=1)[:, :n_neighbors]
        else:
            top = np.broadcast_to(np.arange(n_source), (S.shape[0], n_source))
        s_top = np.take_along_axis(S, top, axis=1)
        # nearest first; ties broken by source index, so results do not depend on argpartition
        order = np.lexsort((top, -s_top), axis=1)
        top, s_top = np.take_along_axis(top, order, axis=1), np.take_along_axis(s_top, order, axis=1)
        if weighting == "uniform":
            w = np.ones_like(s_top)
        elif weighting == "softmax":
            w = np.exp((s_top - s_top[:, :1]) / temperature)  # the nearest has the largest s
        else:
            w = np.maximum(s_top, 0.0)
            w[w.sum(axis=1) == 0] = 1.0  # no positively similar neighbour: plain average
        indices[start : start + chunk_size] = top
        weights[start : start + chunk_size] = w / w.sum(axis=1, keepdims=True)
    factors = np.einsum("tn,tnk->tk", weights, V[indices])
    return (factors, indices, weights) if return_neighbors else factors


def cold_start_factor_model(source_model, source_embeddings, target_embeddings, *, n_neighbors=8,
                            weighting="similarity", temperature=0.1, prior_mean=None, prior_cov=None):
    """A fitted :class:`~faqstats.LogisticFactorModel` for a new bank with no history, its question factors
    transferred from ``source_model``'s (:func:`transfer_question_factors`), the prior too unless given.

    Parameters
    ----------
    source_model : fitted LogisticFactorModel or LogisticFactorModelCV
    source_embeddings : array-like of shape (n_source_questions, d)
    target_embeddings : array-like of shape (n_target_questions, d)
    n_neighbors, weighting, temperature
        As in :func:`transfer_question_factors`.
    prior_mean, prior_cov : array-like of shape (k,), (k, k), optional
        Override the prior of the new model's factor (give both or neither).

    Returns
    -------
    LogisticFactorModel

    Examples
    --------
    >>> import numpy as np, faqstats as fq
    >>> rng = np.random.default_rng(0)
    >>> old = fq.LogisticFactorModel.from_factors(rng.normal(size=(50, 2)), np.zeros(2), np.eye(2))
    >>> fm = cold_start_factor_model(old, rng.normal(size=(50, 8)), rng.normal(size=(20, 8)), n_neighbors=5)
    >>> fm.question_factors_.shape, fm.prior_cov_.shape
    ((20, 2), (2, 2))
    """
    fm = source_model
    check_is_fitted(fm, "best_estimator_" if hasattr(fm, "best_estimator_") else "question_factors_")
    if (prior_mean is None) != (prior_cov is None):
        raise ValueError("Give both prior_mean and prior_cov, or neither.")
    if prior_mean is None:
        prior_mean, prior_cov = fm.prior_mean_, fm.prior_cov_
    factors = transfer_question_factors(fm.question_factors_, source_embeddings, target_embeddings,
                                        n_neighbors=n_neighbors, weighting=weighting, temperature=temperature)
    return LogisticFactorModel.from_factors(factors, prior_mean, prior_cov)
