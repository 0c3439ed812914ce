"""A predictor of your own in a model file (format version 2), through its save pair ``get_arrays() -> (arrays,
params)`` / ``from_arrays(arrays, params)``: metadata ``estimator`` (its registered name), ``params``,
``n_questions``, ``array_names`` and ``array_params``; each array as the entry ``arrays.<name>``. Only registered
classes are read back."""

import json

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..predictor import predictor_name, registered_predictors, saving_error

__all__ = ["read_save_pair", "save_pair_entries", "unsaved_reason"]

ARRAY_PREFIX = "arrays."


def unsaved_reason(model):
    """Why ``model`` cannot be written to a model file (a message saying what to add), or None."""
    if not (callable(getattr(model, "fit", None)) and callable(getattr(model, "posterior", None))):
        layouts = [name for name, cls in registered_predictors().items() if callable(getattr(cls, "get_entries", None))]
        return (f"model must be a {', '.join(layouts)} or a registered faqstats.Predictor with get_arrays and "
                f"from_arrays, got {type(model).__name__}.")
    return saving_error(model)


def save_pair_entries(model, saver):
    """``(fields, arrays)`` of a predictor saved through its save pair (``saver``: as ``get_entries`` is handed)."""
    reason = saving_error(model)
    if reason is not None:
        raise TypeError(reason)
    check_is_fitted(model)
    kind = type(model).__name__
    result = model.get_arrays()
    if not (isinstance(result, tuple) and len(result) == 2 and all(isinstance(x, dict) for x in result)):
        raise TypeError(f"{kind}.get_arrays() must return (dict of arrays, dict of JSON params).")
    arrays, params = result
    out = {}
    for key, value in arrays.items():
        if not isinstance(key, str) or not key or "/" in key:
            raise TypeError(f"{kind}.get_arrays(): array names must be non-empty str without '/', got {key!r}.")
        arr = np.asarray(value)
        if arr.dtype.hasobject:
            raise TypeError(f"{kind}.get_arrays(): array {key!r} has dtype object (it would need pickle).")
        out[ARRAY_PREFIX + key] = arr
    try:
        params = json.loads(json.dumps(params, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{kind}.get_arrays(): params must be JSON (str keys; numbers, str, lists, dicts): "
                        f"{exc}") from exc
    return {"estimator": predictor_name(model), "params": saver.json(model.get_params(deep=False), "params"),
            "n_questions": int(model.n_features_in_), "array_names": sorted(arrays), "array_params": params}, out


def read_save_pair(cls, entries, fields, kind):
    """The predictor registered as ``kind`` (class ``cls`` or None), rebuilt by its ``from_arrays``."""
    if not callable(getattr(cls, "from_arrays", None)):
        raise entries.error(f"metadata{entries.where} names an unknown estimator {kind!r} (a predictor of your own "
                            "must be registered with faqstats.register_predictor before loading).")
    names, params = fields.get("array_names"), fields.get("array_params")
    if not isinstance(names, list) or not all(isinstance(k, str) for k in names) or not isinstance(params, dict):
        raise entries.error(f"metadata{entries.where} needs 'array_names' (a list of str) and 'array_params' (an "
                            "object).")
    entries.require(*[ARRAY_PREFIX + k for k in names])
    arrays = {k: entries.array(ARRAY_PREFIX + k) for k in names}
    try:
        model = cls.from_arrays(arrays, params)
        known = model.get_params(deep=False)
        stored = fields.get("params") if isinstance(fields.get("params"), dict) else {}
        model.set_params(**{k: v for k, v in stored.items() if k in known})
    except (TypeError, ValueError, KeyError) as exc:
        raise entries.error(f"{kind}.from_arrays refused the stored arrays{entries.where}: {exc}") from exc
    if getattr(model, "n_features_in_", entries.n_questions) != entries.n_questions:
        raise entries.error(f"{kind}.from_arrays gave n_features_in_={model.n_features_in_}{entries.where}, the "
                            f"file {entries.n_questions}.")
    return model
