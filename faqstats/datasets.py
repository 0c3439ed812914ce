"""Synthetic banks with realistic factor structure (demo, quickstart, tests) and response matrices from disk."""

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import expit

from ._validation import check_generator
from .io.history import METADATA_KEY as HISTORY_METADATA
from .io.history import check_history_checksums
from .io.npz import open_array_file, read_array

__all__ = ["SyntheticBank", "make_synthetic_bank", "load_response_matrix"]


@dataclass(frozen=True)
class SyntheticBank:
    """A planted logistic factor bank.

    Attributes
    ----------
    history : ndarray of shape (n_models, n_questions)
        Historical outcomes, NaN where masked.
    new_outcomes : ndarray of int8, shape (n_new, n_questions)
        Fully observed outcomes of the new models to evaluate.
    new_accuracy : ndarray of shape (n_new,)
        True finite-bank accuracy ``theta`` of each new model.
    model_factors, question_factors, new_model_factors : ndarray
        The planted factors (logit = u . v).

    Examples
    --------
    >>> from faqstats import make_synthetic_bank
    >>> bank = make_synthetic_bank(n_models=30, n_questions=40, n_new=5, n_components=4, random_state=0)
    >>> bank.history.shape, bank.question_factors.shape, bank.new_model_factors.shape
    ((30, 40), (40, 4), (5, 4))
    """

    history: np.ndarray
    new_outcomes: np.ndarray
    new_accuracy: np.ndarray
    model_factors: np.ndarray
    question_factors: np.ndarray
    new_model_factors: np.ndarray


def make_synthetic_bank(n_models=200, n_questions=500, n_new=20, n_components=4, missing_rate=0.0, random_state=None):
    """Draw a fixed bank from a planted logistic factor model.

    Latent coordinates: an intercept, general ability, then sparse skills. New models are stronger than the
    history, so the prior is imperfect.

    Parameters
    ----------
    n_models, n_questions, n_new, n_components : int, default=200, 500, 20, 4
        History models, questions, new models to evaluate, and latent coordinates.
    missing_rate : float in [0, 1), default=0.0
        Fraction of history cells hidden completely at random (every row keeps at least one).
    random_state : int, Generator or None

    Returns
    -------
    SyntheticBank

    Examples
    --------
    >>> bank = make_synthetic_bank(n_models=30, n_questions=40, n_new=5, random_state=0)
    >>> bank.history.shape, bank.new_outcomes.shape
    ((30, 40), (5, 40))
    """
    rng = check_generator(random_state)
    k = n_components
    if k < 2:
        raise ValueError(f"n_components must be at least 2 (intercept and ability), got {k}.")
    V = rng.normal(size=(n_questions, k)) * 0.8
    V[:, 2:] *= rng.random((n_questions, k - 2)) < 0.5
    V[:, 0] = rng.normal(0.3, 2.0, size=n_questions)
    V[:, 1] = np.abs(rng.normal(1.0, 0.5, size=n_questions))

    def draw_models(n, shift):
        U = rng.normal(size=(n, k)) * 0.6
        U[:, 0] = 1.0 + 0.1 * rng.normal(size=n)
        U[:, 1] = rng.normal(shift, 1.5, size=n)
        return U

    U = draw_models(n_models, 0.0)
    U_new = draw_models(n_new, 0.5)
    history = (rng.random((n_models, n_questions)) < expit(U @ V.T)).astype(float)
    new = (rng.random((n_new, n_questions)) < expit(U_new @ V.T)).astype(np.int8)
    if missing_rate > 0:
        hide = rng.random(history.shape) < missing_rate
        keep = rng.integers(n_questions, size=n_models)
        hide[np.arange(n_models), keep] = False
        history[hide] = np.nan
    return SyntheticBank(history=history, new_outcomes=new, new_accuracy=new.mean(axis=1), model_factors=U,
                         question_factors=V, new_model_factors=U_new)


def draw_bank_from_factors(model_factors, question_factors, *, random_state=None):
    """Draw a fixed semi-synthetic 0/1 bank from published factors: ``z_ij ~ Bernoulli(sigmoid(u_i' v_j))``.

    Parameters
    ----------
    model_factors : array-like of shape (n_models, k)
    question_factors : array-like of shape (n_questions, k)
    random_state : int, Generator or None, default=None

    Returns
    -------
    ndarray of int8, shape (n_models, n_questions)

    Examples
    --------
    >>> from faqstats import make_synthetic_bank
    >>> bank = make_synthetic_bank(n_models=30, n_questions=40, n_new=5, random_state=0)
    >>> Z = draw_bank_from_factors(bank.new_model_factors, bank.question_factors, random_state=0)
    >>> Z.shape, Z.dtype
    ((5, 40), dtype('int8'))
    """
    U = np.asarray(model_factors, dtype=np.float64)
    V = np.asarray(question_factors, dtype=np.float64)
    if U.ndim != 2 or V.ndim != 2 or U.shape[1] != V.shape[1]:
        raise ValueError(f"model_factors (M, k) and question_factors (N, k) must share k; got {U.shape}, {V.shape}.")
    rng = check_generator(random_state)
    out = np.empty((U.shape[0], V.shape[0]), dtype=np.int8)
    for s in range(0, U.shape[0], 256):
        p = expit(U[s : s + 256] @ V.T)
        out[s : s + 256] = rng.random(p.shape) < p
    return out


def load_response_matrix(path):
    """Load a models x items matrix: an ``.npz`` with an ``outcomes`` array (a history file checked against its
    checksums first), or an ``.npy`` array.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    matrix : ndarray of float, shape (n_models, n_items)
        The outcomes; entries ``-1`` ("not observed") become NaN.
    metadata : dict
        The other arrays of an ``.npz`` file (empty for ``.npy``).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "bank.npz"
    >>> np.savez(path, outcomes=np.array([[1, 0, -1], [0, 1, 1]]), models=np.array(["m1", "m2"]))
    >>> matrix, metadata = load_response_matrix(path)
    >>> matrix.tolist(), metadata["models"].tolist()
    ([[1.0, 0.0, nan], [0.0, 1.0, 1.0]], ['m1', 'm2'])
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"No response matrix at {path}.")
    # declared shapes checked against the file's size before anything is allocated
    data = open_array_file(path, "response matrix file (.npz or .npy)")
    if isinstance(data, np.ndarray):
        raw, meta = data, {}
    else:
        with data:
            if "outcomes" not in data:
                raise ValueError(f"{path} has no 'outcomes' array (found {sorted(data.files)}).")
            if HISTORY_METADATA in data.files:  # a history file (faqstats history add): its checksums first
                check_history_checksums(data, path)
            raw = read_array(data, "outcomes", path)
            meta = {name: read_array(data, name, path) for name in data.files if name not in ("outcomes",
                                                                                              HISTORY_METADATA)}
    if raw.ndim != 2 or not (np.issubdtype(raw.dtype, np.number) or raw.dtype == np.bool_):
        raise ValueError(f"{path}: the outcomes must be a numeric models x questions matrix, got {raw.dtype} "
                         f"of shape {raw.shape}.")
    matrix = raw.astype(float)
    matrix[raw < 0] = np.nan
    return matrix, meta
