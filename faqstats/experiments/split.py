"""A response matrix split into a history and new models, and budgets as numbers of queries."""

import numbers
import warnings

import numpy as np

from .._validation import check_history, check_scalar

__all__ = ["DEFAULT_BUDGETS", "split_matrix", "budget_sizes"]

DEFAULT_BUDGETS = tuple(float(f) for f in np.round(np.linspace(0.025, 0.25, 10), 4))
"""Budgets as fractions of the bank: 2.5%, 5%, ..., 25% (:func:`run_experiment`'s default).

Examples
--------
>>> budget_sizes(DEFAULT_BUDGETS, 200)[1]  # queries on a bank of 200 questions
array([ 5, 10, 15, 20, 25, 30, 35, 40, 45, 50])
"""


def split_matrix(matrix, *, history_fraction=0.75, split_seed=0, order=None, complete_rows=False, n_full_obs=None,
                 p_obs=None, max_models=None):
    """Split a response matrix into a history and fully observed new models: of the complete rows, permuted by
    ``split_seed`` or in ``order``, the first ``round(history_fraction * n)`` go to the history.

    Parameters
    ----------
    matrix : array-like of shape (n_models, n_questions)
        0/1 outcomes, NaN for not observed.
    history_fraction : float in (0, 1)
        The history's share of the complete rows.
    split_seed : int
        Seeds the permutation and ``p_obs``' mask.
    order : sequence of int or None
        Complete rows in the order to use instead of the seeded permutation (e.g. by release date).
    complete_rows : bool
        Drop incomplete rows; otherwise they join the history.
    n_full_obs : int or None
        History rows (in split order) that ``p_obs`` leaves as they are.
    p_obs : float in (0, 1] or None
        Keep every other history cell with this probability (every row keeps one cell); ``None``:
        the data's own missingness.
    max_models : int or None
        Keep only the first ``max_models`` new models.

    Returns
    -------
    history, new : ndarray of shape (n_history, n_questions), (n_new, n_questions)
        The history and the new models' complete outcomes.
    new_rows : ndarray of int
        The rows of ``matrix`` behind ``new``.

    Examples
    --------
    >>> import numpy as np
    >>> m = (np.random.default_rng(0).random((10, 6)) < 0.5).astype(float)
    >>> m[0, 0] = np.nan
    >>> h, new, rows = split_matrix(m, history_fraction=0.5, split_seed=0)
    >>> h.shape, new.shape, 0 in rows
    ((5, 6), (5, 6), False)
    """
    H = check_history(matrix, name="matrix")
    check_scalar(history_fraction, "history_fraction", low=0.0, high=1.0, closed="neither")
    complete = np.flatnonzero(~np.isnan(H).any(axis=1))
    incomplete = np.flatnonzero(np.isnan(H).any(axis=1))
    if order is None:
        ordered = complete[np.random.default_rng(split_seed).permutation(complete.size)]
    else:
        ordered = np.asarray(order)
        if ordered.ndim != 1 or not np.issubdtype(ordered.dtype, np.integer):
            raise TypeError("order must be a 1-D sequence of integer row indices.")
        if np.unique(ordered).size != ordered.size:
            raise ValueError("order must not repeat rows.")
        bad = ordered[~np.isin(ordered, complete)]
        if bad.size:
            raise ValueError(f"order must list complete rows only (new models need every outcome); rows "
                             f"{bad[:10].tolist()} are out of range or have missing entries.")
    n_history = int(round(history_fraction * ordered.size))
    if n_history < 2 or n_history >= ordered.size:
        raise ValueError(f"history_fraction={history_fraction} of {ordered.size} complete rows leaves "
                         f"{n_history} history rows and {ordered.size - n_history} new models; "
                         "need at least 2 and 1.")
    history_rows, new_rows = ordered[:n_history], ordered[n_history:]
    if max_models is not None:
        check_scalar(max_models, "max_models", kind=numbers.Integral, low=1)
        new_rows = new_rows[:max_models]
    if not complete_rows:
        history_rows = np.concatenate([history_rows, incomplete])
    history = H[history_rows]
    if p_obs is not None:
        check_scalar(p_obs, "p_obs", low=0.0, high=1.0, closed="right")
        n_full = 0 if n_full_obs is None else check_scalar(n_full_obs, "n_full_obs", kind=numbers.Integral, low=0)
        if n_full > history.shape[0]:
            raise ValueError(f"n_full_obs={n_full} exceeds the {history.shape[0]} history rows.")
        rng = np.random.default_rng([split_seed, 1])
        hide = rng.random(history.shape) >= p_obs
        hide[:n_full] = False
        keep = rng.integers(history.shape[1], size=history.shape[0])  # one cell per row survives
        hide[np.arange(history.shape[0]), keep] = False
        history[hide] = np.nan
        if np.isnan(history).all(axis=1).any():  # a row observed only where the mask kept nothing
            raise ValueError("p_obs leaves some history rows without any observed outcome; raise p_obs.")
    elif n_full_obs is not None:
        raise ValueError("n_full_obs needs p_obs (the MCAR observation rate of the other history rows).")
    return history, H[new_rows], new_rows


def budget_sizes(fractions, n_questions):
    """Budget fractions of the bank -> numbers of queries ``round(f * N)``, at least 2.

    Parameters
    ----------
    fractions : sequence of float in (0, 1]
        Budgets as fractions of the bank.
    n_questions : int
        The bank size ``N``.

    Returns
    -------
    fractions : ndarray of float
        The fractions kept (one giving an earlier size is dropped with a warning).
    sizes : ndarray of int

    Examples
    --------
    >>> budget_sizes([0.05, 0.1, 0.25], 693)
    (array([0.05, 0.1 , 0.25]), array([ 35,  69, 173]))
    """
    fr = np.atleast_1d(np.asarray(fractions, dtype=float))
    if fr.ndim != 1 or fr.size == 0:
        raise ValueError("budgets must be a non-empty sequence of fractions of the bank.")
    bad = fr[~((fr > 0) & (fr <= 1))]
    if bad.size:
        raise ValueError(f"budgets are fractions of the bank and must be in (0, 1]; got {bad.tolist()}.")
    sizes = np.maximum(np.round(fr * n_questions).astype(np.int64), 2)
    _, first = np.unique(sizes, return_index=True)
    first = np.sort(first)
    if first.size < sizes.size:
        dropped = sorted(set(range(sizes.size)) - set(first.tolist()))
        warnings.warn(f"budget fractions {fr[dropped].tolist()} give the same number of queries as an "
                      f"earlier one on a bank of {n_questions} questions; dropped.", UserWarning,
                      stacklevel=2)
    return fr[first], sizes[first]
