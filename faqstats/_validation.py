"""Input and parameter checks shared by every public entry point: errors name the argument and what was expected."""

import inspect
import numbers

import numpy as np
from sklearn.utils.validation import check_array

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _validate_data
except ImportError:  # pragma: no cover - older scikit-learn

    def _validate_data(estimator, X, **kwargs):
        return estimator._validate_data(X, **kwargs)


# check_array renamed force_all_finite to ensure_all_finite in scikit-learn 1.6.
_FINITE_KW = "ensure_all_finite" if "ensure_all_finite" in inspect.signature(check_array).parameters else "force_all_finite"

__all__ = ["validate_history", "check_history", "check_binary_values", "check_outcome_values", "check_alpha",
           "check_scalar", "check_generator", "check_seed", "observed_halves"]


def check_scalar(value, name, *, kind=numbers.Real, low=None, high=None, closed="both"):
    """Check that ``value`` is a scalar of ``kind`` (not a bool) inside ``[low, high]``, whose ends
    ``closed`` allows: ``"both"``, ``"left"``, ``"right"`` or ``"neither"``."""
    if isinstance(value, bool) or not isinstance(value, kind):
        kind_name = getattr(kind, "__name__", kind)
        kind_name = {"Integral": "an integer", "Real": "a real number"}.get(kind_name, f"a {kind_name}")
        raise TypeError(f"{name} must be {kind_name}, got {value!r} ({type(value).__name__}).")
    if isinstance(value, numbers.Real) and not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}.")
    left, right = closed in ("both", "left"), closed in ("both", "right")
    if not ((low is None or (value >= low if left else value > low))
            and (high is None or (value <= high if right else value < high))):
        raise ValueError(f"{name} must be in {'[' if left else '('}{'-inf' if low is None else low}, "
                         f"{'inf' if high is None else high}{']' if right else ')'}, got {value!r}.")
    return value


def check_alpha(alpha):
    """Significance level of an interval: a float strictly inside (0, 1)."""
    return float(check_scalar(alpha, "alpha", low=0.0, high=1.0, closed="neither"))


def check_outcome_values(values, name, *, allow_nan=False, allow_graded=True):
    """``values`` as a float64 array, if every entry is an outcome in [0, 1] (0/1 without ``allow_graded``)."""
    if _is_non_numeric(values):
        kind = "outcomes in [0, 1]" if allow_graded else "0/1 outcomes"
        raise TypeError(f"{name} must be numeric {kind}, got dtype {np.asarray(values).dtype}.")
    arr = np.asarray(values, dtype=float)
    nan = np.isnan(arr)
    if allow_graded:
        with np.errstate(invalid="ignore"):
            ok = (arr >= 0.0) & (arr <= 1.0)
        what = "in [0, 1] (0/1 or graded scores"
    else:
        ok = np.isin(arr, (0.0, 1.0))
        what = "binary (0 or 1"
    bad = ~(ok | (nan if allow_nan else False))
    if np.any(bad):
        first = np.flatnonzero(bad.ravel())[0]
        where = tuple(int(i) for i in np.unravel_index(first, arr.shape)) if arr.ndim > 1 else int(first)
        raise ValueError(f"{name} must be {what}{', NaN for not observed' if allow_nan else ''}); "
                         f"found {float(arr.ravel()[first])!r} at position {where} ({int(bad.sum())} such entries).")
    return arr


def check_binary_values(values, name, *, allow_nan=False):
    """:func:`check_outcome_values` with ``allow_graded=False``."""
    return check_outcome_values(values, name, allow_nan=allow_nan, allow_graded=False)


def _is_non_numeric(values):
    """Whether ``values`` is not real numbers (complex ones would lose their imaginary part)."""
    dtype = np.asarray(values).dtype
    return np.issubdtype(dtype, np.complexfloating) or not (
        np.issubdtype(dtype, np.number) or np.issubdtype(dtype, np.bool_))


def check_history(H, *, name="H", allow_graded=True):
    """A float64 copy of a models x questions history of outcomes in [0, 1] (NaN: not observed), checked."""
    if hasattr(H, "to_numpy"):  # pandas without importing it
        H = H.to_numpy(dtype=float, na_value=np.nan)
    if _is_non_numeric(H):
        raise TypeError(f"{name} must be a numeric array of outcomes in [0, 1] with NaN for missing entries.")
    H = np.array(H, dtype=float, copy=True)
    if H.ndim != 2:
        raise ValueError(f"{name} must be 2-D (models x questions), got an array with {H.ndim} dimension(s).")
    if H.shape[0] < 1 or H.shape[1] < 1:
        raise ValueError(f"{name} must have at least one model and one question, got shape {H.shape}.")
    if np.isinf(H).any():
        raise ValueError(f"{name} contains infinite values; use NaN for 'not observed'.")
    check_outcome_values(H, name, allow_nan=True, allow_graded=allow_graded)
    check_no_empty_rows(H, name)
    return H


def check_no_empty_rows(H, name):
    """Refuse rows (models) with no observed outcome."""
    empty_rows = np.flatnonzero(np.isnan(H).all(axis=1))
    if empty_rows.size:
        shown = ", ".join(map(str, empty_rows[:10])) + (" ..." if empty_rows.size > 10 else "")
        raise ValueError(f"{name} has {empty_rows.size} row(s) with no observed outcome (all NaN): rows {shown}. "
                         "Drop them before fitting.")


def validate_history(estimator, X, *, reset, allow_empty_rows=False):
    """A float64 copy of the outcome matrix ``X`` given to an estimator's fit (``reset=True``) or
    score, through scikit-learn's ``validate_data``, with :func:`check_history`'s checks."""
    if hasattr(X, "to_numpy") and hasattr(X, "columns"):
        # pandas nullable columns (pd.NA) become NaN, the "not observed" marker
        X = X.astype("float64")
    H = _validate_data(estimator, X, reset=reset, dtype=np.float64, copy=True, **{_FINITE_KW: "allow-nan"})
    with np.errstate(invalid="ignore"):
        negative = H < 0
    if negative.any():
        first = np.unravel_index(np.flatnonzero(negative)[0], H.shape)
        raise ValueError(f"Negative values in data passed to X: outcomes must be in [0, 1] (0 wrong, 1 correct, "
                         f"or a graded score), NaN for not observed; found {float(H[first])!r} at position "
                         f"{tuple(map(int, first))}.")
    check_outcome_values(H, "X", allow_nan=True)
    if not allow_empty_rows:
        check_no_empty_rows(H, "X")
    return H


def check_generator(random_state):
    """A ``np.random.Generator`` from ``None``, an int, ints, a ``SeedSequence``, a Generator or a ``RandomState``."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, (bool, np.bool_)):  # an int to numpy, but never meant as a seed
        raise TypeError(f"random_state must be None, an int, a SeedSequence or a numpy Generator, got {random_state!r}.")
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**32 - 1, dtype=np.uint64))
    if isinstance(random_state, (numbers.Integral, np.integer)) and random_state < 0:
        raise ValueError(f"random_state must be a non-negative integer, got {random_state}.")
    if isinstance(random_state, (type(None), numbers.Integral, np.integer, np.random.SeedSequence)):
        return np.random.default_rng(random_state)
    if isinstance(random_state, (list, tuple)) and all(
        isinstance(x, (numbers.Integral, np.integer)) and not isinstance(x, bool) and x >= 0 for x in random_state
    ):
        return np.random.default_rng(list(random_state))
    raise TypeError("random_state must be None, a non-negative int (or a list of them), a SeedSequence or a numpy "
                    f"Generator, got {type(random_state).__name__}.")


def check_seed(random_state):
    """An int seed from ``random_state``: an int as is, else drawn (``None``: fresh)."""
    if isinstance(random_state, (numbers.Integral, np.integer)) and not isinstance(random_state, bool):
        return int(check_scalar(int(random_state), "random_state", kind=numbers.Integral, low=0))
    return int(check_generator(random_state).integers(2**31 - 1))


def observed_halves(estimator, X):
    """``(H, fit_half, test_half)`` for a held-out ``score``: each row's observed cells split in two halves,
    seeded by the estimator's int ``random_state`` (0 otherwise)."""
    H = validate_history(estimator, X, reset=False, allow_empty_rows=True)
    seed = getattr(estimator, "random_state", None)
    seed = seed if isinstance(seed, numbers.Integral) and not isinstance(seed, bool) else 0
    fit_half = (check_generator(seed).random(H.shape) < 0.5) & ~np.isnan(H)
    return H, fit_half, ~fit_half & ~np.isnan(H)
