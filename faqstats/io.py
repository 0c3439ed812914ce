"""Every disk format of faqstats: factor models (``.npz``), step weights and session state (JSON).

Never a pickle; every write is atomic; every read checks the format name and version first.

File format ``faqstats.factor_model``, format version 1
--------------------------------------------------------
An ``.npz`` archive that ``np.load(path, allow_pickle=False)`` reads (no object arrays):

``metadata_json`` : uint8 array
    UTF-8 JSON: the header fields (``format``, ``format_version``, ``faqstats_version``), ``numpy_version``,
    ``created_utc``, ``estimator`` (class name), ``params`` (``get_params()``, JSON-safe),
    ``n_questions``, ``n_components``, ``n_models``, ``fitted_device``, ``question_ids_sha256``
    (:func:`question_ids_sha256`), ``notes``, ``reader`` (only in a model fitted on harness output:
    how ``faqstats fit-history`` read it, ``{"harness": "lm-eval" | "inspect", "options": {name:
    {"default": str or null, "tasks": {task: str}}}}``, the defaults of ``faqstats session record``;
    :func:`check_reader_options`), ``cv`` (null, or a ``LogisticFactorModelCV``'s
    ``params``, ``best_params``, ``best_index``) and ``array_sha256`` (:func:`array_sha256` of every
    other entry: an edited or damaged file is refused; older files without it load unchecked).
``question_factors`` (n, k), ``prior_mean`` (k,), ``prior_cov`` (k, k) : float64
``observed_questions`` : bool (n,)
``model_factors`` (n_models, k), ``loss_curve`` (n_iter,) : float64, when the model has them
``question_ids``, ``feature_names_in`` : str (n,), when given / when the model has ``feature_names_in_``
``cv_results.<name>`` : one per entry of a ``LogisticFactorModelCV``'s ``cv_results_``

File format ``faqstats-step-weights``, format version 1
-------------------------------------------------------
UTF-8 JSON: the header fields, ``budget``, ``weights``, ``step_variance``, ``smoothed_variance``
(``budget`` floats each), ``n_validation``, ``n_runs``, ``variance_ratio``, ``seconds``
(:class:`~faqstats.StepWeights`).

File format ``faqstats.session``, format version 1
--------------------------------------------------
A session directory's ``session.json`` (:mod:`faqstats.session`): UTF-8 JSON with the header
fields, ``created_utc``, ``updated_utc``, ``revision`` (+1 per write), ``factor_model_file``,
``factor_model_sha256`` (of its bytes), ``question_ids_sha256``, ``n_questions``,
``question_id_type`` (``"str"`` or ``"int"``), ``config`` (the sampler's class and parameters and
the other :class:`~faqstats.EvaluationSession` parameters; ``step_weights``, ``dtype``, ``groups``,
``estimand``, ``min_group_share``, ``stratify``, ``costs`` (a float per question, in the bank's order)
and ``budget_cost`` only when not the defaults), ``rng_state`` (the generator's state after the last draw), ``draws``
(``[question index, probability, round]``, pending ones included), ``answers`` (``[question
index, outcome]`` in arrival order) and ``checksums`` (:func:`session_checksums`, checked on every
load: a hand edit or damage is refused with the parts named; older sessions load unchecked).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import numbers
import os
import zipfile
import zlib
from pathlib import Path

import numpy as np

from ._atomic import atomic_write, remove_stale_temporaries
from sklearn.utils.validation import check_is_fitted

from .factor_model import LogisticFactorModel, LogisticFactorModelCV
from .irt import ItemResponseModel
from .surrogate import GaussianProcessSurrogate

__all__ = [
    "save_factor_model",
    "load_factor_model",
    "check_question_ids",
    "check_reader_options",
    "question_ids_sha256",
    "array_sha256",
    "save_step_weights",
    "load_step_weights",
    "read_session_state",
    "session_checksums",
    "write_session_state",
]

FORMAT_NAME = "faqstats.factor_model"
FORMAT_VERSION = 1

_METADATA_KEY = "metadata_json"
_REQUIRED_ARRAYS = ("question_factors", "prior_mean", "prior_cov", "observed_questions")
_CV_PREFIX = "cv_results."
_GP_ARRAYS = ("question_means", "noise")  # a GaussianProcessSurrogate's, besides the factor model's


def _npz_path(path):
    """``path`` as numpy's ``savez`` names it: ``.npz`` appended when missing."""
    path = Path(os.fspath(path))
    if not path.name.endswith(".npz"):
        path = path.with_name(path.name + ".npz")
    return path


def question_ids_sha256(question_ids):
    """SHA-256 (hex) of the UTF-8 compact JSON list of the ids (order matters), as stored in the metadata.

    Examples
    --------
    >>> question_ids_sha256(["q1", "q2"])[:12]
    '3741c44601fd'
    """
    text = json.dumps([str(q) for q in question_ids], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _check_ids(ids, n_questions, name):
    if isinstance(ids, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of strings, not a single {type(ids).__name__}.")
    ids = list(ids)
    bad = [q for q in ids if not isinstance(q, str)]
    if bad:
        raise TypeError(f"{name} must be strings; got {bad[0]!r} ({type(bad[0]).__name__}).")
    if len(ids) != n_questions:
        raise ValueError(f"{name} has {len(ids)} entries, the model has {n_questions} questions.")
    if len(set(ids)) != len(ids):
        dup = next(q for q in ids if ids.count(q) > 1)
        raise ValueError(f"{name} must be unique; {dup!r} appears more than once.")
    # numpy's fixed-width str arrays drop trailing NUL characters: refuse what would not round-trip
    if np.array(ids, dtype=str).tolist() != ids:
        raise ValueError(f"{name} must not end in NUL characters (they do not survive a numpy str array).")
    return ids


def json_safe(value, name, notes):
    """``value`` as plain JSON types; what cannot be stored becomes None with a note."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        value = float(value)
        if np.isfinite(value):
            return value
        notes.append(f"{name}={value!r} is not finite and is stored as null.")
        return None
    if isinstance(value, (list, tuple, np.ndarray)):
        return [json_safe(v, f"{name}[{i}]", notes) for i, v in enumerate(list(value))]
    if isinstance(value, dict):
        return {str(k): json_safe(v, f"{name}[{k!r}]", notes) for k, v in value.items()}
    notes.append(
        f"{name} was a {type(value).__module__}.{type(value).__name__} (not storable as JSON) and is stored as "
        "null; a refit of the loaded model is not seeded the same way."
    )
    return None


def check_reader_options(reader, where="reader"):
    """``reader`` (how a history was read from harness output) checked and as plain JSON, or None.

    ``{"harness": "lm-eval" | "inspect", "options": {name: {"default": str or None, "tasks":
    {task: str}}}}``: for each reader option (``metric``, ``filter``, ``scorer``), the value for every
    task (``None``: the reader's own choice) and the tasks that read another one. ``faqstats
    fit-history --lm-eval/--inspect`` stores it with the model; ``faqstats session record`` reads
    with it unless an option is given again.

    Examples
    --------
    >>> check_reader_options({"harness": "lm-eval", "options": {"metric": {"default": "acc", "tasks": {}}}})
    {'harness': 'lm-eval', 'options': {'metric': {'default': 'acc', 'tasks': {}}}}
    >>> check_reader_options(None) is None
    True
    """
    if reader is None:
        return None

    def bad(what):
        return ValueError(f"{where} {what}; expected {{'harness': 'lm-eval' or 'inspect', 'options': {{name: "
                          "{'default': str or None, 'tasks': {task: str}}}}.")

    if not isinstance(reader, dict) or set(reader) != {"harness", "options"}:
        raise bad(f"must be a mapping with the keys 'harness' and 'options', got {reader!r}")
    if reader["harness"] not in ("lm-eval", "inspect"):
        raise bad(f"names an unknown harness {reader['harness']!r}")
    options = reader["options"]
    if not isinstance(options, dict):
        raise bad(f"'options' must be a mapping, got {options!r}")
    out = {}
    for name, spec in options.items():
        if name not in ("metric", "filter", "scorer"):
            raise bad(f"has an unknown option {name!r}")
        if not isinstance(spec, dict) or set(spec) != {"default", "tasks"}:
            raise bad(f"option {name!r} must be a mapping with 'default' and 'tasks', got {spec!r}")
        default, tasks = spec["default"], spec["tasks"]
        if not (default is None or (isinstance(default, str) and default)):
            raise bad(f"option {name!r}: 'default' must be a non-empty string or None, got {default!r}")
        if not isinstance(tasks, dict) or not all(isinstance(t, str) and t and isinstance(v, str) and v
                                                  for t, v in tasks.items()):
            raise bad(f"option {name!r}: 'tasks' must map task names to non-empty strings, got {tasks!r}")
        out[name] = {"default": default, "tasks": dict(tasks)}
    return {"harness": reader["harness"], "options": out}


def _float_array(model, attr):
    arr = np.asarray(getattr(model, attr), dtype=np.float64)
    if not np.isfinite(arr).all():
        raise ValueError(f"Refusing to save: {attr} has non-finite values.")
    return arr


def save_factor_model(model, path, *, question_ids=None, reader=None):
    """Write a fitted factor model to one ``.npz`` file, atomically and without pickle.

    Parameters
    ----------
    model : fitted LogisticFactorModel, LogisticFactorModelCV, GaussianProcessSurrogate or ItemResponseModel
        For the CV model its ``best_estimator_`` is saved, with the CV results; an item response
        model as its factor-model view (:meth:`~faqstats.ItemResponseModel.as_factor_model`).
    path : str or os.PathLike
        Destination; like :func:`numpy.savez`, ``".npz"`` is appended when missing
        (:func:`load_factor_model` applies the same rule).
    question_ids : sequence of str, optional
        Unique ids of the questions, in the order of ``question_factors_``, stored with
        their SHA-256 for :func:`check_question_ids`. Defaults to ``feature_names_in_``.
    reader : dict, optional
        How the history was read from harness output (:func:`check_reader_options`), stored as
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
    if hasattr(model, "batched_posterior"):  # StackedPredictor, HistoryMixture: not of the low-rank form
        raise TypeError(f"A {type(model).__name__} cannot be saved as a factor model (it has no low-rank form): "
                        "keep the history and refit it, or save one of its parts, e.g. a GaussianProcessSurrogate.")
    if not isinstance(model, (LogisticFactorModel, GaussianProcessSurrogate)):
        raise TypeError("model must be a LogisticFactorModel, LogisticFactorModelCV, GaussianProcessSurrogate or "
                        f"ItemResponseModel, got {type(model).__name__}.")
    check_is_fitted(model, "question_factors_")

    V = _float_array(model, "question_factors_")
    if V.ndim != 2 or V.shape[0] < 1 or V.shape[1] < 1:
        raise ValueError(f"Refusing to save: question_factors_ must be a non-empty 2-D array, got shape {V.shape}.")
    n, k = V.shape
    arrays = {
        "question_factors": V,
        "prior_mean": _float_array(model, "prior_mean_"),
        "prior_cov": _float_array(model, "prior_cov_"),
        "observed_questions": np.asarray(model.observed_questions_, dtype=bool),
    }
    for key in ("model_factors", "loss_curve", *_GP_ARRAYS):
        if getattr(model, key + "_", None) is not None:
            arrays[key] = _float_array(model, key + "_")

    feature_names = getattr(model, "feature_names_in_", None)
    if feature_names is not None:
        arrays["feature_names_in"] = np.array(_check_ids(feature_names, n, "feature_names_in_"), dtype=str)
        if question_ids is None:
            question_ids = list(feature_names)
    if question_ids is not None:
        question_ids = _check_ids(question_ids, n, "question_ids")
        arrays["question_ids"] = np.array(question_ids, dtype=str)

    notes = []
    cv_meta = None
    if cv is not None:
        cv_meta = {
            "params": json_safe(cv.get_params(deep=False), "cv.params", notes),
            "best_params": json_safe(cv.best_params_, "cv.best_params", notes),
            "best_index": json_safe(getattr(cv, "best_index_", None), "cv.best_index", notes),
        }
        for name, values in cv.cv_results_.items():
            arrays[_CV_PREFIX + name] = np.asarray(values)
    metadata = _header(FORMAT_NAME, FORMAT_VERSION) | {
        "numpy_version": np.__version__,
        "created_utc": utc_now(),
        "estimator": type(cv if cv is not None else model).__name__,
        "params": json_safe(model.get_params(deep=False), "params", notes),
        "n_questions": n,
        "n_components": k,
        "n_models": None if "model_factors" not in arrays else int(arrays["model_factors"].shape[0]),
        "fitted_device": json_safe(getattr(model, "device_", None), "device_", notes),
        "question_ids_sha256": None if question_ids is None else question_ids_sha256(question_ids),
        "cv": cv_meta,
        "notes": notes,
    }
    reader = check_reader_options(reader)
    if reader is not None:  # only when given: files without it read as before
        metadata["reader"] = reader
    metadata["array_sha256"] = {key: array_sha256(arr) for key, arr in arrays.items()}
    text = json.dumps(metadata, ensure_ascii=False, allow_nan=False, sort_keys=True)
    arrays[_METADATA_KEY] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    for key, arr in arrays.items():
        if arr.dtype.hasobject:  # pragma: no cover - guarded by the conversions above
            raise TypeError(f"Refusing to save: entry {key!r} has dtype object (it would need pickle).")
    return atomic_write(_npz_path(path), lambda f: np.savez(f, **arrays))


def array_sha256(arr):
    """SHA-256 (hex) of an array's dtype, shape and C-order bytes.

    >>> array_sha256(np.zeros(2))[:12]
    'cdead7b1f559'
    """
    arr = np.ascontiguousarray(arr)
    h = hashlib.sha256(f"{arr.dtype.str}{arr.shape}".encode())
    h.update(arr.tobytes())
    return h.hexdigest()


def check_format_header(doc, path, *, format_name, max_version, what, version_label="format version"):
    """Refuse a JSON document that is not ``format_name`` or was written by a newer format version."""
    if not isinstance(doc, dict) or doc.get("format") != format_name:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(f"{path} is not a faqstats {what}: format is {found!r}, expected {format_name!r}.")
    version = doc.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"{path}: format_version must be a positive integer, got {version!r}.")
    if version > max_version:
        raise ValueError(
            f"{path} was written by a newer faqstats ({version_label} {version} > {max_version}); upgrade faqstats "
            f"to load it (it was written by faqstats {doc.get('faqstats_version')!s})."
        )
    return version


def _read_metadata(data, path):
    if _METADATA_KEY not in data.files:
        raise ValueError(f"{path} is not a faqstats factor model file: entry {_METADATA_KEY!r} is missing.")
    raw = _read_array(data, _METADATA_KEY, path)
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise ValueError(f"{path}: {_METADATA_KEY!r} must be a 1-D uint8 array, got {raw.dtype} {raw.shape}.")
    try:
        meta = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: {_METADATA_KEY!r} is not valid UTF-8 JSON ({exc}).") from exc
    check_format_header(meta, path, format_name=FORMAT_NAME, max_version=FORMAT_VERSION, what="factor model file")
    for field in ("n_questions", "n_components"):
        value = meta.get(field)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{path}: metadata {field!r} must be a positive integer, got {value!r}.")
    if not isinstance(meta.get("params"), dict):
        raise ValueError(f"{path}: metadata 'params' must be a JSON object.")
    if meta.get("reader") is not None:
        meta["reader"] = check_reader_options(meta["reader"], f"{path}: metadata 'reader'")
    return meta


def _read_array(data, key, path):
    try:
        return data[key]
    except ValueError as exc:  # object arrays need pickle, which is refused
        if "pickle" in str(exc):
            raise ValueError(f"{path}: entry {key!r} cannot be read without pickle ({exc}); refusing to load it.") from exc
        raise ValueError(f"{path}: entry {key!r} is damaged ({exc}).") from exc
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError) as exc:
        # a flipped byte, a truncated file; zipfile reads flipped flag bits as "encrypted" or "patched"
        raise ValueError(f"{path}: entry {key!r} is damaged ({type(exc).__name__}: {exc}).") from exc


def _array_hash_error(data, meta, path):
    """The error naming the entries whose bytes differ from their stored SHA-256, or None."""
    stored = meta.get("array_sha256")
    if stored is None:  # written before faqstats stored the hashes
        return None
    if not isinstance(stored, dict):
        return ValueError(f"{path}: metadata 'array_sha256' must be a JSON object.")
    changed = sorted(key for key in set(stored) | (set(data.files) - {_METADATA_KEY})
                     if key not in data.files or stored.get(key) != array_sha256(_read_array(data, key, path)))
    if not changed:
        return None
    what = f"entry {changed[0]!r} differs" if len(changed) == 1 else f"entries {changed} differ"
    return ValueError(f"{path}: {what} from the SHA-256 written with the model: the file was edited or damaged; "
                      "refit or restore it.")


def _read_float(data, key, shape, path):
    arr = _read_array(data, key, path)
    if arr.dtype.kind != "f":
        raise ValueError(f"{path}: {key!r} must be a float array, got dtype {arr.dtype}.")
    if len(arr.shape) != len(shape) or any(want not in (None, got) for want, got in zip(shape, arr.shape)):
        expected = "(" + ", ".join("n" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
        raise ValueError(f"{path}: {key!r} has shape {arr.shape}, expected {expected}.")
    if not np.isfinite(arr).all():
        raise ValueError(f"{path}: {key!r} has {int((~np.isfinite(arr)).sum())} non-finite value(s).")
    return arr.astype(np.float64, copy=False)


def load_factor_model(path):
    """Load a factor model written by :func:`save_factor_model`, without pickle, checking it all first.

    Parameters
    ----------
    path : str or os.PathLike
        The file, named as for :func:`save_factor_model`.

    Returns
    -------
    LogisticFactorModel or GaussianProcessSurrogate
        Fitted (a saved CV model's best estimator), predicting exactly as the saved one,
        with its parameters (a Generator ``random_state`` comes back as None),
        ``question_ids_`` (for :func:`check_question_ids`) and ``metadata_`` (the JSON metadata; for a
        CV model ``metadata_["cv"]["cv_results"]`` is a dict of ndarrays).

    Raises
    ------
    ValueError
        If the file is not a faqstats factor model (or a newer format), needs pickle, or has
        a missing, misshapen, non-finite or altered entry.

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
    path = _npz_path(path)
    try:
        data = np.load(path, allow_pickle=False)
    except OSError:  # missing file, permissions: as open() reports them
        raise
    except Exception as exc:  # np.load reports a non-npz file as "pickled data"
        raise ValueError(f"{path} is not a readable .npz archive ({type(exc).__name__}: {exc}).") from exc
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ValueError(f"{path} is not a faqstats factor model file: a single .npy array, not an .npz archive.")
    with data:
        meta = _read_metadata(data, path)
        missing = [key for key in _REQUIRED_ARRAYS if key not in data.files]
        if missing:
            raise ValueError(f"{path}: required entr{'y' if len(missing) == 1 else 'ies'} {missing} missing.")
        n, k = meta["n_questions"], meta["n_components"]
        V = _read_float(data, "question_factors", (n, k), path)
        mean = _read_float(data, "prior_mean", (k,), path)
        cov = _read_float(data, "prior_cov", (k, k), path)
        if not np.allclose(cov, cov.T):
            raise ValueError(f"{path}: 'prior_cov' is not symmetric.")
        eig = np.linalg.eigvalsh(0.5 * (cov + cov.T))
        if eig.min() < -1e-10 * max(1.0, float(np.abs(eig).max())):
            raise ValueError(f"{path}: 'prior_cov' is not positive semi-definite (eigenvalue {eig.min():.3g}).")
        observed = _read_array(data, "observed_questions", path)
        if observed.dtype != np.bool_ or observed.shape != (n,):
            raise ValueError(
                f"{path}: 'observed_questions' must be bool of shape ({n},), got {observed.dtype} {observed.shape}."
            )
        gp = meta.get("estimator") == "GaussianProcessSurrogate"
        gp_arrays = {key: _read_float(data, key, (n,), path) for key in _GP_ARRAYS} if gp else {}
        if gp and gp_arrays["noise"].min() <= 0:
            raise ValueError(f"{path}: 'noise' must be positive.")
        U = _read_float(data, "model_factors", (None, k), path) if "model_factors" in data.files else None
        losses = _read_float(data, "loss_curve", (None,), path) if "loss_curve" in data.files else None
        ids = _read_ids(data, "question_ids", n, path)
        names = _read_ids(data, "feature_names_in", n, path)
        cv_results = {
            key[len(_CV_PREFIX) :]: _read_array(data, key, path) for key in data.files if key.startswith(_CV_PREFIX)
        }
        hash_error = _array_hash_error(data, meta, path)  # raised last: the specific checks name what is wrong

    stored_hash = meta.get("question_ids_sha256")
    if ids is not None and stored_hash != question_ids_sha256(ids):
        raise ValueError(f"{path}: the stored question ids do not match their SHA-256 in the metadata (file altered?).")
    if ids is None and stored_hash is not None:
        raise ValueError(f"{path}: metadata has a question-id hash but entry 'question_ids' is missing.")
    if hash_error is not None:
        raise hash_error

    fm = GaussianProcessSurrogate() if gp else LogisticFactorModel()
    known = fm.get_params(deep=False)
    params = dict(meta["params"])
    if "alpha" in params and "regularization" not in params:  # files written before faqstats renamed it
        params["regularization"] = params.pop("alpha")
    fm.set_params(**{name: value for name, value in params.items() if name in known})
    try:
        fm.check_params()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: invalid estimator parameters in metadata: {exc}") from exc
    if not gp and fm.n_components != k:  # the surrogate's rank may be below n_components (a small history)
        raise ValueError(f"{path}: params n_components={fm.n_components} but the factors have {k} components.")
    fitted = {"question_factors": V, "model_factors": U, "prior_mean": mean, "prior_cov": cov,
              "observed_questions": observed, **gp_arrays}
    for key, value in fitted.items():
        setattr(fm, key + "_", value)
    if losses is not None:
        fm.loss_curve_ = losses
        fm.n_iter_ = int(losses.size)
    fm.n_features_in_ = n
    if names is not None:
        fm.feature_names_in_ = np.asarray(names, dtype=object)
    fm.question_ids_ = ids
    if meta.get("cv") is not None:
        if not isinstance(meta["cv"], dict):
            raise ValueError(f"{path}: metadata 'cv' must be a JSON object or null.")
        meta["cv"]["cv_results"] = cv_results
    fm.metadata_ = meta
    return fm


def _read_ids(data, key, n, path):
    if key not in data.files:
        return None
    arr = _read_array(data, key, path)
    if arr.dtype.kind != "U" or arr.shape != (n,):
        raise ValueError(f"{path}: {key!r} must be a str array of shape ({n},), got {arr.dtype} {arr.shape}.")
    return arr.tolist()


def check_question_ids(model, question_ids):
    """Raise unless ``question_ids`` are the model's question ids, in the same order.

    Parameters
    ----------
    model : LogisticFactorModel
        With ``question_ids_`` (from :func:`load_factor_model`) or ``feature_names_in_``.
    question_ids : sequence of str
        The bank's ids, in the order the outcomes will be given.

    Raises
    ------
    ValueError
        If the model carries no ids, or they differ in number, content or order.

    Examples
    --------
    >>> import numpy as np
    >>> from faqstats import LogisticFactorModel
    >>> fm = LogisticFactorModel.from_factors(np.eye(2), np.zeros(2), np.eye(2))
    >>> fm.question_ids_ = ["a", "b"]
    >>> check_question_ids(fm, ["a", "b"])
    >>> check_question_ids(fm, ["b", "a"])
    Traceback (most recent call last):
    ...
    ValueError: question ids are the model's in a different order (first difference at index 0: 'b' != 'a').
    """
    expected = getattr(model, "question_ids_", None)
    if expected is None and getattr(model, "feature_names_in_", None) is not None:
        expected = list(model.feature_names_in_)
    if expected is None:
        raise ValueError("The model carries no question ids (saved without question_ids=): nothing to check against.")
    given = [str(q) for q in question_ids]
    expected = [str(q) for q in expected]
    if len(given) != len(expected):
        raise ValueError(f"{len(given)} question ids given, the model has {len(expected)}.")
    if given != expected:
        first = next(i for i, (a, b) in enumerate(zip(given, expected)) if a != b)
        how = "the model's in a different order" if sorted(given) == sorted(expected) else "not the model's"
        raise ValueError(
            f"question ids are {how} (first difference at index {first}: {given[first]!r} != {expected[first]!r})."
        )


# -- JSON documents ------------------------------------------------------------------
def _read_json(path, what, format_name, max_version, version_label="format version"):
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a {what} JSON file, or not valid UTF-8 JSON ({exc}).") from exc
    check_format_header(doc, path, format_name=format_name, max_version=max_version, what=f"{what} file",
                        version_label=version_label)
    return doc


def _write_json(path, doc, indent=None):
    text = json.dumps(doc, ensure_ascii=False, allow_nan=False, indent=indent,
                      separators=None if indent else (",", ":"))
    return atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def _header(format_name, format_version):
    from . import __version__

    return {"format": format_name, "format_version": format_version, "faqstats_version": __version__}


# -- step weights ----------------------------------------------------------------------
STEP_WEIGHTS_FORMAT = "faqstats-step-weights"
STEP_WEIGHTS_FORMAT_VERSION = 2  # 2: with the SHA-256 of the rest of the document


def _json_sha256(value):
    """SHA-256 of a JSON value in canonical form (sorted keys, no spaces)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def save_step_weights(step_weights, path):
    """Write :class:`~faqstats.StepWeights` as JSON (atomically); :func:`load_step_weights` reads it back.

    Parameters
    ----------
    step_weights : StepWeights
        What :func:`~faqstats.learn_step_weights` returned (its ``factor_model`` is not stored).
    path : str or os.PathLike
        The file to write.

    Returns
    -------
    pathlib.Path
        The file written.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import numpy as np
    >>> from faqstats import StepWeights
    >>> sw = StepWeights(np.ones(3), np.ones(3), np.ones(3), 10, 100, 1.0, 0.5)
    >>> path = save_step_weights(sw, pathlib.Path(tempfile.mkdtemp()) / "w.json")
    >>> load_step_weights(path).weights.tolist()
    [1.0, 1.0, 1.0]
    """
    doc = _header(STEP_WEIGHTS_FORMAT, STEP_WEIGHTS_FORMAT_VERSION) | {
        "budget": int(step_weights.weights.size),
        "weights": step_weights.weights.tolist(),
        "step_variance": step_weights.step_variance.tolist(),
        "smoothed_variance": step_weights.smoothed_variance.tolist(),
        "n_validation": int(step_weights.n_validation),
        "n_runs": int(step_weights.n_runs),
        "variance_ratio": float(step_weights.variance_ratio),
        "seconds": float(step_weights.seconds),
    }
    return _write_json(path, doc | {"sha256": _json_sha256(doc)}, indent=1)


def load_step_weights(path):
    """Read a file written by :func:`save_step_weights` (a :class:`~faqstats.StepWeights`).

    Parameters
    ----------
    path : str or os.PathLike
        The JSON file.

    Returns
    -------
    StepWeights
        As saved, with ``factor_model`` None.

    Raises
    ------
    ValueError
        If the file is not a step-weights file (or a newer format), or was edited or damaged.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import numpy as np
    >>> from faqstats import StepWeights, save_step_weights
    >>> sw = StepWeights(weights=np.array([0.5, 1.0, 1.5]), step_variance=np.array([4.0, 2.0, 1.0]),
    ...                  smoothed_variance=np.array([4.0, 2.0, 1.0]), n_validation=10, n_runs=100,
    ...                  variance_ratio=0.9, seconds=0.5)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     loaded = load_step_weights(save_step_weights(sw, pathlib.Path(tmp) / "weights.json"))
    >>> loaded.weights.tolist(), loaded.variance_ratio, loaded.factor_model
    ([0.5, 1.0, 1.5], 0.9, None)
    """
    from .step_weights import StepWeights

    path = Path(path)
    doc = _read_json(path, "step-weights", STEP_WEIGHTS_FORMAT, STEP_WEIGHTS_FORMAT_VERSION)
    if doc["format_version"] >= 2 and doc.pop("sha256", None) != _json_sha256(doc):
        raise ValueError(f"{path}: step-weights file does not match its checksum (edited or damaged).")
    try:
        arrays = {k: np.asarray(doc[k], dtype=float) for k in ("weights", "step_variance", "smoothed_variance")}
        budget, n_val, n_runs = int(doc["budget"]), int(doc["n_validation"]), int(doc["n_runs"])
        ratio, seconds = float(doc["variance_ratio"]), float(doc["seconds"])
    except KeyError as exc:
        raise ValueError(f"{path}: step-weights file lacks {exc}.") from exc
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: step-weights file has a malformed entry ({exc}).") from exc
    w = arrays["weights"]
    if w.shape != (budget,) or not np.all(np.isfinite(w)) or not np.all(w > 0):
        raise ValueError(f"{path}: weights must be {budget} finite positive numbers.")
    return StepWeights(w, arrays["step_variance"], arrays["smoothed_variance"], n_val, n_runs, ratio, seconds)


# -- session state ---------------------------------------------------------------------
SESSION_FORMAT = "faqstats.session"
SESSION_FORMAT_VERSION = 1
_SESSION_FIELDS = ("revision", "factor_model_file", "factor_model_sha256", "question_ids_sha256", "question_id_type",
                   "config", "rng_state", "draws", "answers")
_SETTINGS = ("config", "n_questions", "question_id_type", "question_ids_sha256", "factor_model_sha256")
_PARTS = ("draws", "answers", "rng_state", "checksums", "updated_utc")  # the header: all else but these


def session_checksums(state):
    """SHA-256 of each part of a session state: settings, draws, answers, rng_state and the rest (header)."""
    parts = {"settings": {key: state.get(key) for key in _SETTINGS}, "draws": state.get("draws"),
             "answers": state.get("answers"), "rng_state": state.get("rng_state"),
             "header": {key: value for key, value in state.items() if key not in _SETTINGS + _PARTS}}
    return {name: _json_sha256(value) for name, value in parts.items()}


def read_session_state(path):
    """A session's state document (format ``faqstats.session``), checked field by field and by checksum."""
    state = _read_json(path, "session", SESSION_FORMAT, SESSION_FORMAT_VERSION, "session format version")
    missing = [key for key in _SESSION_FIELDS if key not in state]
    if missing:
        raise ValueError(f"{path}: missing field(s) {missing}.")
    stored = state.get("checksums")
    if stored is not None:  # absent from sessions written before faqstats stored them
        try:
            now = session_checksums(state)
        except (TypeError, ValueError) as exc:  # e.g. NaN written by hand
            raise ValueError(f"{path}: not a valid session state ({exc}).") from exc
        changed = [name for name in now if not isinstance(stored, dict) or stored.get(name) != now[name]]
        if changed:
            raise ValueError(
                f"{path}: the session's {', '.join(changed)} differ from the checksums written with them: the file "
                "was edited by hand or damaged; restore it (a session cannot be changed after the fact)."
            )
    kinds = {"config": dict, "rng_state": dict, "draws": list, "answers": list, "revision": int,
             "n_questions": int}
    wrong = [key for key, kind in kinds.items() if key in state and not isinstance(state[key], kind)]
    if wrong:
        raise ValueError(f"{path}: field(s) {wrong} have the wrong type (the file was edited or damaged).")
    if state["question_id_type"] not in ("str", "int"):
        raise ValueError(f"{path}: question_id_type must be 'str' or 'int', got {state['question_id_type']!r}.")
    if not isinstance(state["factor_model_file"], str) or Path(state["factor_model_file"]).name != state[
            "factor_model_file"]:
        raise ValueError(f"{path}: factor_model_file must be a file name in the session directory.")
    return state


def write_session_state(path, fields):
    """Write a session's state (header, ``updated_utc``, ``fields``) atomically, under the caller's lock."""
    doc = _header(SESSION_FORMAT, SESSION_FORMAT_VERSION) | {"updated_utc": utc_now()} | fields
    doc["checksums"] = session_checksums(doc)
    remove_stale_temporaries(path)
    return _write_json(path, doc)


def utc_now():
    """The current UTC time, ISO 8601 to the second."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
