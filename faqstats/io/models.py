"""Factor models and every other predictor as one ``.npz`` file: arrays plus JSON metadata, never a pickle.

File format ``faqstats.factor_model``, format version 1
--------------------------------------------------------
An ``.npz`` archive that ``np.load(path, allow_pickle=False)`` reads (no object arrays):

``metadata_json`` : uint8 array
    UTF-8 JSON: the header fields (``format``, ``format_version``, ``faqstats_version``), ``numpy_version``,
    ``created_utc``, ``estimator`` (class name), ``params`` (``get_params()``, JSON-safe),
    ``n_questions``, ``n_components``, ``n_models``, ``fitted_device``, ``question_ids_sha256``
    (:func:`~faqstats.io.checks.question_ids_sha256`), ``notes``, ``reader`` (only in a model fitted on
    harness output: how ``faqstats fit-history`` read it, ``{"harness": "lm-eval" | "inspect", "options":
    {name: {"default": str or null, "tasks": {task: str}}}}``, the defaults of ``faqstats session record``;
    :func:`~faqstats.io.checks.check_reader_options`), ``cv`` (null, or a ``LogisticFactorModelCV``'s
    ``params``, ``best_params``, ``best_index``) and ``array_sha256``
    (:func:`~faqstats.io.checks.array_sha256` of every other entry: an edited or damaged file is refused, and
    so is a file without it, unless read with ``allow_unchecked=True``: files written before faqstats stored it).
``question_factors`` (n, k), ``prior_mean`` (k,), ``prior_cov`` (k, k) : float64
``observed_questions`` : bool (n,)
``model_factors`` (n_models, k), ``loss_curve`` (n_iter,) : float64, when the model has them
``question_means``, ``noise`` (n,) : float64, a ``GaussianProcessSurrogate``'s
``question_ids``, ``feature_names_in`` : str (n,), when given / when the model has ``feature_names_in_``
``cv_results.<name>`` : one per entry of a ``LogisticFactorModelCV``'s ``cv_results_``

Format version 2 (same format name, same header and checks) holds a predictor beyond the low-rank
form, or none, or a saved configuration; older faqstats refuse it as newer. ``estimator`` is
``"HistoryMixture"`` (``profiles`` (n_models, n) in (0, 1), ``question_means`` (n,)),
``"StackedPredictor"`` (``steps`` int (S,), ``weights`` (S, K) convex rows, ``validation_mse``
(S, K + 1); metadata ``components``: each component's ``name``, ``estimator``, ``params`` and
sizes, its arrays prefixed ``component<i>.``), a low-rank class (its arrays as in version 1, without
``loss_curve``), or null (no predictor: the FPC sample mean; only ``question_ids``).
``estimator`` may also name a predictor of your own, registered by that name and saved through its
save pair (:mod:`faqstats.io.predictor_arrays`).
``configuration`` (:func:`~faqstats.save_configuration`; with its own ``sha256``): ``choice``,
``budget``, ``predict_every``, ``policy`` (class, module, params), ``predicted_ess``,
``n_validation``, ``n_runs``, ``seconds``, ``configured_budget`` and ``table`` (``columns``,
``rows``); the step weights are the array ``configuration.step_weights`` (budget,).
"""

from __future__ import annotations

import json

import numpy as np
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

from .._atomic import atomic_write
from .._validation import check_scalar
from ..factor_model import LogisticFactorModel, LogisticFactorModelCV
from ..irt import ItemResponseModel
from ..stacking import HistoryMixture, StackedPredictor
from ..surrogate import GaussianProcessSurrogate
from .checks import (array_sha256, changed_entries, check_format_header, check_ids, check_reader_options, header,
                     json_safe, json_sha256, question_ids_sha256, utc_now)
from .npz import npz_path, open_array_file, read_array, read_float, read_ids, require_entries
from .predictor_arrays import read_save_pair, save_pair_entries, unsaved_reason

__all__ = ["save_factor_model", "load_factor_model", "load_model_file", "save_predictor", "unsaved_reason"]

FORMAT_NAME = "faqstats.factor_model"
FORMAT_VERSION = 1  # what low-rank predictors are written as (older faqstats read them)
#: 2: a HistoryMixture, a StackedPredictor, no predictor (the sample mean) or a saved configuration
PREDICTOR_FORMAT_VERSION = 2
LOW_RANK_KINDS = ("LogisticFactorModel", "LogisticFactorModelCV", "GaussianProcessSurrogate")

METADATA_KEY = "metadata_json"
CONFIG_WEIGHTS = "configuration.step_weights"
_REQUIRED_ARRAYS = ("question_factors", "prior_mean", "prior_cov", "observed_questions")
_GP_ARRAYS = ("question_means", "noise")  # a GaussianProcessSurrogate's, besides the factor model's
_STACK_ARRAYS = ("steps", "weights", "validation_mse")
_CV_PREFIX = "cv_results."
# factors, means and noise beyond this (logits of 1e12 per component) make every score non-finite:
# no fit produces them, so a file holding them was edited
VALUE_BOUND = 1e6
_BOUND_WHY = " (no fit gives a logit-scale value beyond it; larger ones overflow the policy's scores)"


# -- writing ---------------------------------------------------------------------------
def save_factor_model(model, path, *, question_ids=None, reader=None):
    """Write a fitted factor model to one ``.npz`` file, atomically and without pickle.

    Parameters
    ----------
    model : fitted predictor
        A built-in predictor: for the CV model its ``best_estimator_`` is saved, with the CV
        results; an item response model as its factor-model view
        (:meth:`~faqstats.ItemResponseModel.as_factor_model`); a mixture or a stack in format
        version 2. Or a registered :class:`~faqstats.Predictor` of your own with the save pair
        ``get_arrays`` / ``from_arrays`` (format version 2); one without it is refused with a
        ``TypeError`` saying what to add.
    path : str or os.PathLike
        Destination; like :func:`numpy.savez`, ``".npz"`` is appended when missing
        (:func:`load_factor_model` applies the same rule).
    question_ids : sequence of str, optional
        Unique ids of the questions, in the order of ``question_factors_``, stored with
        their SHA-256 for :func:`~faqstats.io.check_question_ids`. Defaults to ``feature_names_in_``.
    reader : dict, optional
        How the history was read from harness output (:func:`~faqstats.io.check_reader_options`), stored as
        ``metadata_["reader"]``; ``faqstats fit-history`` writes it, ``faqstats session record``
        reads with it.

    Returns
    -------
    pathlib.Path
        The file written (with the ``.npz`` suffix).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import numpy as np
    >>> from faqstats import LogisticFactorModel, load_factor_model, save_factor_model
    >>> fm = LogisticFactorModel.from_factors(np.eye(3)[:, :2], np.zeros(2), np.eye(2))
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = save_factor_model(fm, pathlib.Path(tmp) / "fm", question_ids=["a", "b", "c"])
    ...     loaded = load_factor_model(path)
    >>> path.name
    'fm.npz'
    >>> np.array_equal(loaded.predict_proba([1.0, -1.0]), fm.predict_proba([1.0, -1.0]))
    True
    >>> loaded.question_ids_, loaded.metadata_["format_version"]
    (['a', 'b', 'c'], 1)
    """
    cv = None
    if isinstance(model, LogisticFactorModelCV):
        check_is_fitted(model, "best_estimator_")
        cv, model = model, model.best_estimator_
    if isinstance(model, ItemResponseModel):  # saved as its factor-model view: same predictions and posterior
        model = model.as_factor_model()
    if not isinstance(model, (LogisticFactorModel, GaussianProcessSurrogate)):
        reason = unsaved_reason(model)
        if reason is not None:
            raise TypeError(reason)
        # not of the low-rank form (a mixture, a stack, a predictor of your own): format version 2
        return save_predictor(model, path, question_ids=question_ids, reader=reader)
    notes, cv_meta, cv_arrays = [], None, {}
    if cv is not None:
        cv_meta = {
            "params": json_safe(cv.get_params(deep=False), "cv.params", notes),
            "best_params": json_safe(cv.best_params_, "cv.best_params", notes),
            "best_index": json_safe(getattr(cv, "best_index_", None), "cv.best_index", notes),
        }
        cv_arrays = {_CV_PREFIX + name: np.asarray(values) for name, values in cv.cv_results_.items()}
    meta, arrays = _low_rank_entries(model, "", notes, loss_curve=True)
    meta |= {
        "estimator": type(cv if cv is not None else model).__name__,
        "n_models": int(arrays["model_factors"].shape[0]) if "model_factors" in arrays else None,
        "fitted_device": json_safe(getattr(model, "device_", None), "device_", notes),
        "cv": cv_meta,
    }
    return _write_model_file(path, FORMAT_VERSION, meta, arrays, notes, getattr(model, "feature_names_in_", None),
                             question_ids, reader, cv_arrays)


def save_predictor(model, path, *, question_ids=None, reader=None, configuration=None, n_questions=None):
    """Write a predictor of any kind (None: the sample mean, with ``n_questions``) in format version 2.

    Parameters
    ----------
    model : fitted predictor or None
        As :func:`save_factor_model` takes, or None (no predictor: only the ids are stored).
    path : str or os.PathLike
        Destination (``".npz"`` appended when missing).
    question_ids : sequence of str, optional
        The bank's unique ids (default: the model's ``feature_names_in_``).
    reader : dict, optional
        As in :func:`save_factor_model`.
    configuration : tuple (dict, ndarray or None), optional
        A configuration's JSON document and step weights (:func:`~faqstats.save_configuration`).
    n_questions : int, optional
        The bank size, needed (only) when ``model`` is None.

    Returns
    -------
    pathlib.Path
        The file written.
    """
    notes = []
    if model is None:
        meta, arrays = {"estimator": None, "params": {}, "n_questions": int(n_questions)}, {}
    else:
        meta, arrays = _predictor_entries(model, "", notes)
    extra = {}
    if configuration is not None:
        doc, step_weights = configuration
        if step_weights is not None:
            extra[CONFIG_WEIGHTS] = step_weights
        meta["configuration"] = doc | {"sha256": json_sha256(doc)}
    return _write_model_file(path, PREDICTOR_FORMAT_VERSION, meta, arrays, notes,
                             getattr(model, "feature_names_in_", None), question_ids, reader, extra)


def _write_model_file(path, format_version, meta, arrays, notes, feature_names, question_ids, reader, extra):
    """Add the ids, ``extra`` arrays and the metadata (with every array's SHA-256) and write the file."""
    n = meta["n_questions"]
    if feature_names is not None:
        arrays["feature_names_in"] = np.array(check_ids(feature_names, n, "feature_names_in_"), dtype=str)
        if question_ids is None:
            question_ids = list(feature_names)
    if question_ids is not None:
        question_ids = check_ids(question_ids, n, "question_ids")
        arrays["question_ids"] = np.array(question_ids, dtype=str)
    arrays |= extra
    metadata = header(FORMAT_NAME, format_version) | {
        "numpy_version": np.__version__, "created_utc": utc_now(), **meta,
        "question_ids_sha256": None if question_ids is None else question_ids_sha256(question_ids), "notes": notes,
    }
    reader = check_reader_options(reader)
    if reader is not None:  # only when given: files without it read as before
        metadata["reader"] = reader
    metadata["array_sha256"] = {key: array_sha256(arr) for key, arr in arrays.items()}
    text = json.dumps(metadata, ensure_ascii=False, allow_nan=False, sort_keys=True)
    arrays[METADATA_KEY] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    for key, arr in arrays.items():
        if arr.dtype.hasobject:  # pragma: no cover - guarded by the conversions above
            raise TypeError(f"Refusing to save: entry {key!r} has dtype object (it would need pickle).")
    return atomic_write(npz_path(path), lambda f: np.savez(f, **arrays))


def _float_array(model, attr, bound=None):
    arr = np.asarray(getattr(model, attr), dtype=np.float64)
    if not np.isfinite(arr).all():
        raise ValueError(f"Refusing to save: {attr} has non-finite values.")
    if bound is not None and arr.size and np.abs(arr).max() > bound:  # the reader would refuse it
        raise ValueError(f"Refusing to save: {attr} has values beyond +-{bound:g} (largest {np.abs(arr).max():.3g})"
                         f"{_BOUND_WHY}.")
    return arr


def _low_rank_entries(model, prefix, notes, loss_curve=False):
    """``(metadata, arrays)`` of a fitted low-rank predictor (the factors, the prior...), names prefixed."""
    check_is_fitted(model, "question_factors_")
    V = _float_array(model, "question_factors_", VALUE_BOUND)
    if V.ndim != 2 or V.shape[0] < 1 or V.shape[1] < 1:
        raise ValueError(f"Refusing to save: question_factors_ must be a non-empty 2-D array, got shape {V.shape}.")
    arrays = {"question_factors": V, "prior_mean": _float_array(model, "prior_mean_", VALUE_BOUND),
              "prior_cov": _float_array(model, "prior_cov_", VALUE_BOUND**2),
              "observed_questions": np.asarray(model.observed_questions_, dtype=bool)}
    for key in ("model_factors", *(("loss_curve",) if loss_curve else ()), *_GP_ARRAYS):
        if getattr(model, key + "_", None) is not None:
            arrays[key] = _float_array(model, key + "_", None if key == "loss_curve" else VALUE_BOUND)
    meta = {"estimator": type(model).__name__,
            "params": json_safe(model.get_params(deep=False), f"{prefix}params", notes),
            "n_questions": int(V.shape[0]), "n_components": int(V.shape[1])}
    return meta, {prefix + key: arr for key, arr in arrays.items()}


def _predictor_entries(model, prefix, notes):
    """``(metadata, arrays)`` of a fitted predictor of any kind, its array names prefixed with ``prefix``."""
    if isinstance(model, LogisticFactorModelCV):
        check_is_fitted(model, "best_estimator_")
        model = model.best_estimator_
    if isinstance(model, ItemResponseModel):  # as save_factor_model does: same predictions and posterior
        model = model.as_factor_model()
    kind = type(model).__name__
    if isinstance(model, HistoryMixture):
        check_is_fitted(model, "profiles_")
        profiles = _float_array(model, "profiles_")
        meta = {"estimator": kind, "params": json_safe(model.get_params(deep=False), f"{prefix}params", notes),
                "n_questions": int(profiles.shape[1]), "n_models": int(profiles.shape[0])}
        return meta, {prefix + "profiles": profiles, prefix + "question_means": _float_array(model, "question_means_")}
    if isinstance(model, StackedPredictor):
        check_is_fitted(model, "weights_")
        params = model.get_params(deep=False)
        if params["estimators"] is not None:  # the components' classes and parameters are stored with them
            params["estimators"] = [name for name, _ in params["estimators"]]
        arrays = {prefix + "steps": np.asarray(model.steps_, dtype=np.int64),
                  prefix + "weights": _float_array(model, "weights_"),
                  prefix + "validation_mse": _float_array(model, "validation_mse_")}
        components = []
        names = model.component_names()
        for i, (name, part) in enumerate(zip(names, model.estimators_)):
            part_meta, part_arrays = _predictor_entries(part, f"{prefix}component{i}.", notes)
            components.append({"name": name, **part_meta})
            arrays |= part_arrays
        n = {c["n_questions"] for c in components}
        if len(n) != 1:
            raise ValueError(f"Refusing to save: the stack's components have different numbers of questions {n}.")
        meta = {"estimator": kind, "params": json_safe(params, f"{prefix}params", notes), "n_questions": n.pop(),
                "n_validation": int(getattr(model, "n_validation_", 0)), "components": components}
        return meta, arrays
    if not isinstance(model, (LogisticFactorModel, GaussianProcessSurrogate)):
        return save_pair_entries(model, prefix, notes)  # a predictor of your own (TypeError without the pair)
    return _low_rank_entries(model, prefix, notes)


# -- reading ---------------------------------------------------------------------------
def load_factor_model(path, *, allow_unchecked=False):
    """Load a factor model written by :func:`save_factor_model`, without pickle, checking it all first.

    Parameters
    ----------
    path : str or os.PathLike
        The file, named as for :func:`save_factor_model`.
    allow_unchecked : bool, default=False
        Also read a format-version-1 file written before faqstats stored the SHA-256 of its
        entries (metadata ``array_sha256``): nothing in it can be verified. By default such a file
        is refused, as is one whose hashes were deleted.

    Returns
    -------
    LogisticFactorModel, GaussianProcessSurrogate, HistoryMixture or StackedPredictor
        Fitted (a saved CV model's best estimator), predicting exactly as the saved one,
        with its parameters (a Generator ``random_state`` comes back as None),
        ``question_ids_`` (for :func:`~faqstats.io.check_question_ids`) and ``metadata_`` (the JSON
        metadata; for a CV model ``metadata_["cv"]["cv_results"]`` is a dict of ndarrays).

    Raises
    ------
    ValueError
        If the file is not a faqstats factor model (or a newer format), needs pickle, has
        a missing, misshapen, non-finite, out-of-range or altered entry, lacks its entries'
        SHA-256 (unless ``allow_unchecked``), or holds no predictor
        (a configuration that chose the sample mean: :func:`~faqstats.load_configuration`).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import numpy as np
    >>> from faqstats import LogisticFactorModel, load_factor_model, save_factor_model
    >>> fm = LogisticFactorModel.from_factors(np.ones((4, 2)), model_factors=np.eye(2))
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     loaded = load_factor_model(save_factor_model(fm, pathlib.Path(tmp) / "fm.npz"))
    >>> loaded.question_factors_.shape, loaded.model_factors_.shape, loaded.question_ids_
    ((4, 2), (2, 2), None)
    """
    model, meta, _ = load_model_file(path, allow_unchecked=allow_unchecked)
    if model is None:
        raise ValueError(f"{npz_path(path)} holds no predictor (the FPC sample mean was chosen); read it with "
                         "load_configuration, or start a session from it.")
    return model


def load_model_file(path, *, allow_unchecked=False):
    """The predictor, metadata and question ids of a file written by :func:`save_factor_model` or
    :func:`~faqstats.save_configuration`, checked as :func:`load_factor_model` checks it.

    Parameters
    ----------
    path : str or os.PathLike
        The file, named as for :func:`save_factor_model`.
    allow_unchecked : bool, default=False
        As in :func:`load_factor_model`.

    Returns
    -------
    tuple
        ``(predictor or None, metadata, question ids or None)``; None: no predictor, the sample mean.
    """
    path = npz_path(path)
    data = open_array_file(path, "factor model file")  # shapes checked against the file's size first
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ValueError(f"{path} is not a faqstats factor model file: a single .npy array, not an .npz archive.")
    with data:
        meta = _read_metadata(data, path)
        n, kind = meta["n_questions"], meta.get("estimator")
        first_format = meta["format_version"] == 1 and kind in LOW_RANK_KINDS
        if first_format and kind == "LogisticFactorModelCV":  # its best estimator was saved
            kind = "LogisticFactorModel"
        model = None if kind is None else _read_predictor(data, meta, "", n, path, kind)
        if first_format and "loss_curve" in data.files:
            model.loss_curve_ = read_float(data, "loss_curve", (None,), path)
            model.n_iter_ = int(model.loss_curve_.size)
        ids = read_ids(data, "question_ids", n, path)
        names = read_ids(data, "feature_names_in", n, path)
        cv_results = {
            key[len(_CV_PREFIX) :]: read_array(data, key, path) for key in data.files if key.startswith(_CV_PREFIX)
        }
        weights = _read_configuration_weights(data, meta, path)
        hash_error = _array_hash_error(data, meta, path, allow_unchecked)  # raised last: the specific checks name what is wrong

    stored_hash = meta.get("question_ids_sha256")
    if ids is not None and stored_hash != question_ids_sha256(ids):
        raise ValueError(f"{path}: the stored question ids do not match their SHA-256 in the metadata (file altered?).")
    if ids is None and stored_hash is not None:
        raise ValueError(f"{path}: metadata has a question-id hash but entry 'question_ids' is missing.")
    if hash_error is not None:
        raise hash_error
    if meta.get("cv") is not None:
        if not isinstance(meta["cv"], dict):
            raise ValueError(f"{path}: metadata 'cv' must be a JSON object or null.")
        meta["cv"]["cv_results"] = cv_results
    if meta.get("configuration") is not None:
        meta["configuration"] = dict(meta["configuration"], step_weights=weights)
    if model is not None:
        if names is not None:
            model.feature_names_in_ = np.asarray(names, dtype=object)
        model.question_ids_, model.metadata_ = ids, meta
    return model, meta, ids


def _read_metadata(data, path):
    if METADATA_KEY not in data.files:
        raise ValueError(f"{path} is not a faqstats factor model file: entry {METADATA_KEY!r} is missing.")
    raw = read_array(data, METADATA_KEY, path)
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise ValueError(f"{path}: {METADATA_KEY!r} must be a 1-D uint8 array, got {raw.dtype} {raw.shape}.")
    try:
        meta = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: {METADATA_KEY!r} is not valid UTF-8 JSON ({exc}).") from exc
    check_format_header(meta, path, format_name=FORMAT_NAME, max_version=PREDICTOR_FORMAT_VERSION,
                        what="factor model file")
    low_rank = meta.get("estimator") in LOW_RANK_KINDS
    for field in ("n_questions", "n_components") if low_rank else ("n_questions",):
        value = meta.get(field)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{path}: metadata {field!r} must be a positive integer, got {value!r}.")
    if not isinstance(meta.get("params"), dict):
        raise ValueError(f"{path}: metadata 'params' must be a JSON object.")
    if meta.get("reader") is not None:
        meta["reader"] = check_reader_options(meta["reader"], f"{path}: metadata 'reader'")
    return meta


def _read_configuration_weights(data, meta, path):
    """The step weights of the file's configuration (checked with its checksum), or None."""
    config = meta.get("configuration")
    if config is None:
        return None
    if isinstance(config, dict) and "sha256" not in config:
        raise ValueError(f"{path}: the saved configuration has no 'sha256' (faqstats writes one with every "
                         "configuration): the file was edited; configure again or restore it.")
    if not isinstance(config, dict) or config.get("sha256") != json_sha256(
            {key: value for key, value in config.items() if key != "sha256"}):
        raise ValueError(f"{path}: the saved configuration does not match its checksum: the file was edited or "
                         "damaged; configure again or restore it.")
    if CONFIG_WEIGHTS not in data.files:
        return None
    weights = read_float(data, CONFIG_WEIGHTS, (config.get("budget"),), path)
    if np.any(weights <= 0):
        raise ValueError(f"{path}: {CONFIG_WEIGHTS!r} must be positive.")
    return weights


def _array_hash_error(data, meta, path, allow_unchecked):
    """The error naming the entries whose bytes differ from their stored SHA-256 (or the hashes
    missing), or None."""
    stored = meta.get("array_sha256")
    if stored is None:
        if allow_unchecked and meta["format_version"] == 1:  # written before faqstats stored the hashes
            return None
        return ValueError(f"{path}: metadata has no 'array_sha256' (faqstats writes the SHA-256 of every entry): "
                          "the file was edited; restore it (a format version 1 file written before faqstats stored "
                          "them reads with allow_unchecked=True).")
    if not isinstance(stored, dict):
        return ValueError(f"{path}: metadata 'array_sha256' must be a JSON object.")
    changed = changed_entries(data, stored, path, skip=(METADATA_KEY,))
    if not changed:
        return None
    what = f"entry {changed[0]!r} differs" if len(changed) == 1 else f"entries {changed} differ"
    return ValueError(f"{path}: {what} from the SHA-256 written with the model: the file was edited or damaged; "
                      "refit or restore it.")


def _set_params(model, params, path, where):
    """Set the stored parameters the model knows, then check them as the model does."""
    if not isinstance(params, dict):
        raise ValueError(f"{path}: metadata{where} 'params' must be a JSON object.")
    params = dict(params)
    if "alpha" in params and "regularization" not in params:  # files written before faqstats renamed it
        params["regularization"] = params.pop("alpha")
    known = model.get_params(deep=False)
    try:
        model.set_params(**{name: value for name, value in params.items() if name in known})
        if isinstance(model, HistoryMixture):
            check_scalar(model.smoothing, "smoothing", low=0.0, high=1.0, closed="right")
            check_scalar(model.temperature, "temperature", low=0.0, closed="neither")
            if model.target not in ("low-rank", "means"):
                raise ValueError(f"target must be 'low-rank' or 'means', got {model.target!r}.")
        elif not isinstance(model, StackedPredictor):
            model.check_params()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: invalid estimator parameters in metadata{where}: {exc}") from exc


def _read_predictor(data, meta, prefix, n, path, kind):
    """The fitted ``kind`` stored under ``prefix``, every entry checked (shapes, finiteness, ranges)."""
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: metadata of component {prefix!r} must be a JSON object.")
    where = f" ({prefix})" if prefix else ""
    if meta.get("n_questions") != n:
        raise ValueError(f"{path}:{where} has n_questions={meta.get('n_questions')!r}, the file {n}.")
    if kind == "HistoryMixture":
        return _read_history_mixture(data, meta, prefix, n, path, where)
    if kind == "StackedPredictor":
        return _read_stack(data, meta, prefix, n, path, where)
    if kind not in ("LogisticFactorModel", "GaussianProcessSurrogate"):
        return read_save_pair(data, meta, prefix, n, path, where, kind)  # registered, or an unknown estimator
    return _read_low_rank(data, meta, prefix, n, path, where, kind)


def _read_low_rank(data, meta, prefix, n, path, where, kind):
    """A LogisticFactorModel or GaussianProcessSurrogate: its factors, prior, observed questions..."""
    require_entries(data, _REQUIRED_ARRAYS, prefix, path)
    k = meta.get("n_components")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"{path}: metadata{where} 'n_components' must be a positive integer, got {k!r}.")
    bounded = {"bound": VALUE_BOUND, "why": _BOUND_WHY}
    fitted = {"question_factors": read_float(data, prefix + "question_factors", (n, k), path, **bounded),
              "prior_mean": read_float(data, prefix + "prior_mean", (k,), path, **bounded),
              "prior_cov": read_float(data, prefix + "prior_cov", (k, k), path, bound=VALUE_BOUND ** 2,
                                      why=" (the square of the factors' bound)")}
    cov, key = fitted["prior_cov"], prefix + "prior_cov"
    if not np.allclose(cov, cov.T):
        raise ValueError(f"{path}: {key!r} is not symmetric.")
    eig = np.linalg.eigvalsh(0.5 * (cov + cov.T))
    if eig.min() < -1e-10 * max(1.0, float(np.abs(eig).max())):
        raise ValueError(f"{path}: {key!r} is not positive semi-definite (eigenvalue {eig.min():.3g}).")
    observed = read_array(data, prefix + "observed_questions", path)
    if observed.dtype != np.bool_ or observed.shape != (n,):
        raise ValueError(f"{path}: {prefix + 'observed_questions'!r} must be bool of shape ({n},), got "
                         f"{observed.dtype} {observed.shape}.")
    fitted["observed_questions"] = observed
    gp = kind == "GaussianProcessSurrogate"
    if gp:
        require_entries(data, _GP_ARRAYS, prefix, path)
        fitted |= {key: read_float(data, prefix + key, (n,), path, **bounded) for key in _GP_ARRAYS}
        if fitted["noise"].min() <= 0:
            raise ValueError(f"{path}: {prefix + 'noise'!r} must be positive.")
    fitted["model_factors"] = (read_float(data, prefix + "model_factors", (None, k), path, **bounded)
                               if prefix + "model_factors" in data.files else None)
    model = GaussianProcessSurrogate() if gp else LogisticFactorModel()
    _set_params(model, meta.get("params"), path, where)
    if not gp and model.n_components != k:  # the surrogate's rank may be below n_components (a small history)
        raise ValueError(f"{path}: params n_components={model.n_components} but the factors have {k} components.")
    for key, value in fitted.items():
        setattr(model, key + "_", value)
    model.n_features_in_ = n
    return model


def _read_history_mixture(data, meta, prefix, n, path, where):
    require_entries(data, ("profiles", "question_means"), prefix, path)
    profiles = read_float(data, prefix + "profiles", (None, n), path)
    if profiles.shape[0] < 1 or not np.all((profiles > 0) & (profiles < 1)):
        raise ValueError(f"{path}: {prefix + 'profiles'!r} must hold at least one row, every entry in (0, 1).")
    means = read_float(data, prefix + "question_means", (n,), path)
    if not np.all((means >= 0) & (means <= 1)):
        raise ValueError(f"{path}: {prefix + 'question_means'!r} must be in [0, 1].")
    model = HistoryMixture()
    _set_params(model, meta.get("params"), path, where)
    model.profiles_, model.question_means_, model.n_features_in_ = profiles, means, n
    return model


def _read_stack(data, meta, prefix, n, path, where):
    require_entries(data, _STACK_ARRAYS, prefix, path)
    steps = read_array(data, prefix + "steps", path)
    if steps.dtype.kind not in "iu" or steps.ndim != 1 or steps.size < 1 or steps[0] != 0 or np.any(
            np.diff(steps) <= 0):
        raise ValueError(f"{path}: {prefix + 'steps'!r} must be increasing integers starting at 0, got "
                         f"{steps.dtype} {steps.shape}.")
    components = meta.get("components")
    if not isinstance(components, list) or not components:
        raise ValueError(f"{path}: metadata{where} 'components' must be a non-empty list.")
    K = len(components)
    weights = read_float(data, prefix + "weights", (steps.size, K), path)
    if np.any(weights < 0) or not np.allclose(weights.sum(1), 1.0, rtol=0, atol=1e-9):
        raise ValueError(f"{path}: {prefix + 'weights'!r} must be convex weights (non-negative, each row "
                         "summing to 1).")
    mse = read_float(data, prefix + "validation_mse", (steps.size, K + 1), path)
    parts = []
    for i, part_meta in enumerate(components):
        kind = part_meta.get("estimator") if isinstance(part_meta, dict) else None
        part = _read_predictor(data, part_meta, f"{prefix}component{i}.", n, path, kind)
        if not isinstance(part_meta.get("name"), str):
            raise ValueError(f"{path}: component {i} of{where or ' the file'} has no name.")
        parts.append((part_meta["name"], part))
    model = StackedPredictor()
    params = dict(meta.get("params") or {})
    names = params.pop("estimators", None)
    _set_params(model, params, path, where)
    if names is not None:
        if names != [name for name, _ in parts]:
            raise ValueError(f"{path}: metadata{where} 'estimators' {names} are not its components' names.")
        model.set_params(estimators=[(name, clone(part)) for name, part in parts])
    n_validation = meta.get("n_validation", 0)
    if isinstance(n_validation, bool) or not isinstance(n_validation, int) or n_validation < 0:
        raise ValueError(f"{path}: metadata{where} 'n_validation' must be a non-negative integer.")
    model.estimators_, model.steps_, model.weights_ = [part for _, part in parts], steps.astype(np.int64), weights
    model.validation_mse_, model.n_validation_, model.n_features_in_ = mse, n_validation, n
    return model
