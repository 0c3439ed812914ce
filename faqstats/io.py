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

Format version 2 (same format name, same header and checks) holds a predictor beyond the low-rank
form, or none, or a saved configuration; older faqstats refuse it as newer. ``estimator`` is
``"HistoryMixture"`` (``profiles`` (n_models, n) in (0, 1), ``question_means`` (n,)),
``"StackedPredictor"`` (``steps`` int (S,), ``weights`` (S, K) convex rows, ``validation_mse``
(S, K + 1); metadata ``components``: each component's ``name``, ``estimator``, ``params`` and
sizes, its arrays prefixed ``component<i>.``), a low-rank class, or null (no predictor: the FPC
sample mean; only ``question_ids``). ``configuration`` (:func:`save_configuration`; with its own
``sha256``): ``choice``, ``budget``, ``predict_every``, ``policy`` (class, module, params),
``predicted_ess``, ``n_validation``, ``n_runs``, ``seconds``, ``configured_budget`` and ``table``
(``columns``, ``rows``); the step weights are the array ``configuration.step_weights`` (budget,).

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
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

from .factor_model import LogisticFactorModel, LogisticFactorModelCV
from .irt import ItemResponseModel
from .stacking import HistoryMixture, StackedPredictor
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
    "save_configuration",
    "load_configuration",
    "read_session_state",
    "session_checksums",
    "write_session_state",
]

FORMAT_NAME = "faqstats.factor_model"
FORMAT_VERSION = 1  # what low-rank predictors are written as (older faqstats read them)
#: 2: a HistoryMixture, a StackedPredictor, no predictor (the sample mean) or a saved configuration
PREDICTOR_FORMAT_VERSION = 2
_LOW_RANK_KINDS = ("LogisticFactorModel", "LogisticFactorModelCV", "GaussianProcessSurrogate")

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
    if isinstance(model, (HistoryMixture, StackedPredictor)):  # not of the low-rank form: format version 2
        return _save_predictor(model, path, question_ids=question_ids, reader=reader)
    if not isinstance(model, (LogisticFactorModel, GaussianProcessSurrogate)):
        raise TypeError("model must be a LogisticFactorModel, LogisticFactorModelCV, GaussianProcessSurrogate, "
                        f"ItemResponseModel, HistoryMixture or StackedPredictor, got {type(model).__name__}.")
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
    check_format_header(meta, path, format_name=FORMAT_NAME, max_version=PREDICTOR_FORMAT_VERSION,
                        what="factor model file")
    low_rank = meta.get("estimator") in _LOW_RANK_KINDS
    for field in ("n_questions", "n_components") if low_rank else ("n_questions",):
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
    LogisticFactorModel, GaussianProcessSurrogate, HistoryMixture or StackedPredictor
        Fitted (a saved CV model's best estimator), predicting exactly as the saved one,
        with its parameters (a Generator ``random_state`` comes back as None),
        ``question_ids_`` (for :func:`check_question_ids`) and ``metadata_`` (the JSON metadata; for a
        CV model ``metadata_["cv"]["cv_results"]`` is a dict of ndarrays).

    Raises
    ------
    ValueError
        If the file is not a faqstats factor model (or a newer format), needs pickle, has
        a missing, misshapen, non-finite, out-of-range or altered entry, or holds no predictor
        (a configuration that chose the sample mean: :func:`load_configuration`).

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
    model, meta, _ = load_model_file(path)
    if model is None:
        raise ValueError(f"{_npz_path(path)} holds no predictor (the FPC sample mean was chosen); read it with "
                         "load_configuration, or start a session from it.")
    return model


def load_model_file(path):
    """``(predictor or None, metadata, question ids or None)`` of a file of :func:`save_factor_model`
    or :func:`save_configuration` (None: no predictor, the sample mean), checked as :func:`load_factor_model`."""
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
        if meta["format_version"] >= 2 or meta.get("estimator") not in _LOW_RANK_KINDS:  # any predictor, or none
            return _load_predictor(data, meta, path)
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
    return fm, meta, ids


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


# -- predictors beyond the low-rank form, and configurations (format version 2) -------------
_STACK_ARRAYS = ("steps", "weights", "validation_mse")


def _component_entries(model, prefix, notes):
    """``(metadata, arrays)`` of a fitted predictor, its array names prefixed with ``prefix``."""
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
        names = [name for name, _ in model._components()]
        for i, (name, part) in enumerate(zip(names, model.estimators_)):
            part_meta, part_arrays = _component_entries(part, f"{prefix}component{i}.", notes)
            components.append({"name": name, **part_meta})
            arrays |= part_arrays
        n = {c["n_questions"] for c in components}
        if len(n) != 1:
            raise ValueError(f"Refusing to save: the stack's components have different numbers of questions {n}.")
        meta = {"estimator": kind, "params": json_safe(params, f"{prefix}params", notes), "n_questions": n.pop(),
                "n_validation": int(getattr(model, "n_validation_", 0)), "components": components}
        return meta, arrays
    if not isinstance(model, (LogisticFactorModel, GaussianProcessSurrogate)):
        raise TypeError(f"A {kind} cannot be saved: its predictors must be LogisticFactorModel, "
                        "GaussianProcessSurrogate, ItemResponseModel, HistoryMixture or StackedPredictor.")
    check_is_fitted(model, "question_factors_")
    V = _float_array(model, "question_factors_")
    arrays = {"question_factors": V, "prior_mean": _float_array(model, "prior_mean_"),
              "prior_cov": _float_array(model, "prior_cov_"),
              "observed_questions": np.asarray(model.observed_questions_, dtype=bool)}
    for key in ("model_factors", *_GP_ARRAYS):
        if getattr(model, key + "_", None) is not None:
            arrays[key] = _float_array(model, key + "_")
    meta = {"estimator": kind, "params": json_safe(model.get_params(deep=False), f"{prefix}params", notes),
            "n_questions": int(V.shape[0]), "n_components": int(V.shape[1])}
    return meta, {prefix + key: arr for key, arr in arrays.items()}


def _save_predictor(model, path, *, question_ids=None, reader=None, configuration=None, n_questions=None):
    """Write a predictor (or None: the sample mean, with ``n_questions``) in format version 2."""
    notes = []
    if model is None:
        meta, arrays = {"estimator": None, "params": {}, "n_questions": int(n_questions)}, {}
    else:
        meta, arrays = _component_entries(model, "", notes)
    n = meta["n_questions"]
    feature_names = getattr(model, "feature_names_in_", None)
    if feature_names is not None:
        arrays["feature_names_in"] = np.array(_check_ids(feature_names, n, "feature_names_in_"), dtype=str)
        if question_ids is None:
            question_ids = list(feature_names)
    if question_ids is not None:
        question_ids = _check_ids(question_ids, n, "question_ids")
        arrays["question_ids"] = np.array(question_ids, dtype=str)
    metadata = _header(FORMAT_NAME, PREDICTOR_FORMAT_VERSION) | {
        "numpy_version": np.__version__, "created_utc": utc_now(), **meta,
        "question_ids_sha256": None if question_ids is None else question_ids_sha256(question_ids), "notes": notes,
    }
    reader = check_reader_options(reader)
    if reader is not None:
        metadata["reader"] = reader
    if configuration is not None:
        doc, step_weights = configuration
        if step_weights is not None:
            arrays[_CONFIG_WEIGHTS] = step_weights
        metadata["configuration"] = doc | {"sha256": _json_sha256(doc)}
    metadata["array_sha256"] = {key: array_sha256(arr) for key, arr in arrays.items()}
    text = json.dumps(metadata, ensure_ascii=False, allow_nan=False, sort_keys=True)
    arrays[_METADATA_KEY] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    return atomic_write(_npz_path(path), lambda f: np.savez(f, **arrays))


def _check_psd(cov, key, path):
    if not np.allclose(cov, cov.T):
        raise ValueError(f"{path}: {key!r} is not symmetric.")
    eig = np.linalg.eigvalsh(0.5 * (cov + cov.T))
    if eig.min() < -1e-10 * max(1.0, float(np.abs(eig).max())):
        raise ValueError(f"{path}: {key!r} is not positive semi-definite (eigenvalue {eig.min():.3g}).")


def _set_params(model, params, path, where):
    if not isinstance(params, dict):
        raise ValueError(f"{path}: metadata {where}'params' must be a JSON object.")
    known = model.get_params(deep=False)
    try:
        model.set_params(**{name: value for name, value in params.items() if name in known})
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: invalid estimator parameters in metadata {where}: {exc}") from exc


def _read_component(data, meta, prefix, n, path):
    """The fitted predictor stored under ``prefix``, every entry checked (shapes, finiteness, ranges)."""
    from ._validation import check_scalar

    if not isinstance(meta, dict):
        raise ValueError(f"{path}: metadata of component {prefix!r} must be a JSON object.")
    kind, where = meta.get("estimator"), f"({prefix or 'top level'}) "
    if meta.get("n_questions") != n:
        raise ValueError(f"{path}: {where}has n_questions={meta.get('n_questions')!r}, the file {n}.")

    def missing(keys):
        absent = [prefix + key for key in keys if prefix + key not in data.files]
        if absent:
            raise ValueError(f"{path}: required entr{'y' if len(absent) == 1 else 'ies'} {absent} missing.")

    if kind == "HistoryMixture":
        missing(("profiles", "question_means"))
        profiles = _read_float(data, prefix + "profiles", (None, n), path)
        if profiles.shape[0] < 1 or not np.all((profiles > 0) & (profiles < 1)):
            raise ValueError(f"{path}: {prefix + 'profiles'!r} must hold at least one row, every entry in (0, 1).")
        means = _read_float(data, prefix + "question_means", (n,), path)
        if not np.all((means >= 0) & (means <= 1)):
            raise ValueError(f"{path}: {prefix + 'question_means'!r} must be in [0, 1].")
        model = HistoryMixture()
        _set_params(model, meta.get("params"), path, where)
        try:
            check_scalar(model.smoothing, "smoothing", low=0.0, high=1.0, closed="right")
            check_scalar(model.temperature, "temperature", low=0.0, closed="neither")
            if model.target not in ("low-rank", "means"):
                raise ValueError(f"target must be 'low-rank' or 'means', got {model.target!r}.")
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}: invalid estimator parameters in metadata {where}: {exc}") from exc
        model.profiles_, model.question_means_, model.n_features_in_ = profiles, means, n
        return model
    if kind == "StackedPredictor":
        missing(_STACK_ARRAYS)
        steps = _read_array(data, prefix + "steps", path)
        if steps.dtype.kind not in "iu" or steps.ndim != 1 or steps.size < 1 or steps[0] != 0 or np.any(
                np.diff(steps) <= 0):
            raise ValueError(f"{path}: {prefix + 'steps'!r} must be increasing integers starting at 0, got "
                             f"{steps.dtype} {steps.shape}.")
        components = meta.get("components")
        if not isinstance(components, list) or not components:
            raise ValueError(f"{path}: metadata {where}'components' must be a non-empty list.")
        K = len(components)
        weights = _read_float(data, prefix + "weights", (steps.size, K), path)
        if np.any(weights < 0) or not np.allclose(weights.sum(1), 1.0, rtol=0, atol=1e-9):
            raise ValueError(f"{path}: {prefix + 'weights'!r} must be convex weights (non-negative, each row "
                             "summing to 1).")
        mse = _read_float(data, prefix + "validation_mse", (steps.size, K + 1), path)
        parts = []
        for i, part_meta in enumerate(components):
            part = _read_component(data, part_meta, f"{prefix}component{i}.", n, path)
            if not isinstance(part_meta.get("name"), str):
                raise ValueError(f"{path}: component {i} of {where}has no name.")
            parts.append((part_meta["name"], part))
        model = StackedPredictor()
        params = dict(meta.get("params") or {})
        names = params.pop("estimators", None)
        _set_params(model, params, path, where)
        if names is not None:
            if names != [name for name, _ in parts]:
                raise ValueError(f"{path}: metadata {where}'estimators' {names} are not its components' names.")
            model.set_params(estimators=[(name, clone(part)) for name, part in parts])
        n_validation = meta.get("n_validation", 0)
        if isinstance(n_validation, bool) or not isinstance(n_validation, int) or n_validation < 0:
            raise ValueError(f"{path}: metadata {where}'n_validation' must be a non-negative integer.")
        model.estimators_, model.steps_, model.weights_ = [part for _, part in parts], steps.astype(np.int64), weights
        model.validation_mse_, model.n_validation_, model.n_features_in_ = mse, n_validation, n
        return model
    if kind not in ("LogisticFactorModel", "GaussianProcessSurrogate"):
        raise ValueError(f"{path}: metadata {where}names an unknown estimator {kind!r}.")
    missing(_REQUIRED_ARRAYS)
    k = meta.get("n_components")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"{path}: metadata {where}'n_components' must be a positive integer, got {k!r}.")
    fitted = {"question_factors": _read_float(data, prefix + "question_factors", (n, k), path),
              "prior_mean": _read_float(data, prefix + "prior_mean", (k,), path),
              "prior_cov": _read_float(data, prefix + "prior_cov", (k, k), path)}
    _check_psd(fitted["prior_cov"], prefix + "prior_cov", path)
    observed = _read_array(data, prefix + "observed_questions", path)
    if observed.dtype != np.bool_ or observed.shape != (n,):
        raise ValueError(f"{path}: {prefix + 'observed_questions'!r} must be bool of shape ({n},).")
    fitted["observed_questions"] = observed
    gp = kind == "GaussianProcessSurrogate"
    if gp:
        missing(_GP_ARRAYS)
        fitted |= {key: _read_float(data, prefix + key, (n,), path) for key in _GP_ARRAYS}
        if fitted["noise"].min() <= 0:
            raise ValueError(f"{path}: {prefix + 'noise'!r} must be positive.")
    fitted["model_factors"] = (_read_float(data, prefix + "model_factors", (None, k), path)
                               if prefix + "model_factors" in data.files else None)
    model = GaussianProcessSurrogate() if gp else LogisticFactorModel()
    _set_params(model, meta.get("params"), path, where)
    try:
        model.check_params()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: invalid estimator parameters in metadata {where}: {exc}") from exc
    for key, value in fitted.items():
        setattr(model, key + "_", value)
    model.n_features_in_ = n
    return model


def _load_predictor(data, meta, path):
    """``(predictor or None, metadata, ids)`` of a format-2 file (``data`` open)."""
    n = meta["n_questions"]
    model = None if meta.get("estimator") is None else _read_component(data, meta, "", n, path)
    ids = _read_ids(data, "question_ids", n, path)
    names = _read_ids(data, "feature_names_in", n, path)
    weights = None
    config = meta.get("configuration")
    if config is not None:
        if not isinstance(config, dict) or config.get("sha256") != _json_sha256(
                {key: value for key, value in config.items() if key != "sha256"}):
            raise ValueError(f"{path}: the saved configuration does not match its checksum: the file was edited or "
                             "damaged; configure again or restore it.")
        if _CONFIG_WEIGHTS in data.files:
            weights = _read_float(data, _CONFIG_WEIGHTS, (config.get("budget"),), path)
            if np.any(weights <= 0):
                raise ValueError(f"{path}: {_CONFIG_WEIGHTS!r} must be positive.")
    hash_error = _array_hash_error(data, meta, path)
    stored_hash = meta.get("question_ids_sha256")
    if (ids is not None and stored_hash != question_ids_sha256(ids)) or (ids is None and stored_hash is not None):
        raise ValueError(f"{path}: the stored question ids do not match their SHA-256 in the metadata (file altered?).")
    if hash_error is not None:
        raise hash_error
    if model is not None:
        if names is not None:
            model.feature_names_in_ = np.asarray(names, dtype=object)
        model.question_ids_, model.metadata_ = ids, meta
    if config is not None:
        meta["configuration"] = dict(config, step_weights=weights)
    return model, meta, ids


_CONFIG_WEIGHTS = "configuration.step_weights"


def save_configuration(configuration, path, *, question_ids=None, reader=None):
    """Write what :func:`~faqstats.configure_from_history` chose to one ``.npz`` file, without pickle.

    The file is a factor model file (format version 2) holding the chosen predictor, whatever its
    kind (none when the sample mean was chosen), with the policy (class and parameters), the step
    weights, the budget, the refresh schedule, the predicted ESS and the validation table;
    :func:`load_configuration` gives back an estimator that runs exactly as the configured one, and
    :meth:`EvaluationSession.from_configuration <faqstats.EvaluationSession.from_configuration>` a
    session that does.

    Parameters
    ----------
    configuration : Configuration
        What :func:`~faqstats.configure_from_history` returned.
    path : str or os.PathLike
        Destination (``".npz"`` appended when missing).
    question_ids : sequence of str, optional
        The bank's unique ids, in the history's column order.
    reader : dict, optional
        How the history was read from harness output (:func:`check_reader_options`).

    Returns
    -------
    pathlib.Path
        The file written.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=120, n_questions=80, n_components=2, random_state=0)
    >>> cfg = fq.configure_from_history(bank.history, 20, n_runs=100, random_state=0)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     loaded = load_configuration(save_configuration(cfg, pathlib.Path(tmp) / "cfg"))
    >>> loaded.choice == cfg.choice, loaded.budget
    (True, 20)
    """
    from .session._session import _sampler_spec

    est = configuration.estimator
    notes = []
    table = configuration.table
    doc = {
        "choice": str(configuration.choice), "budget": int(est.budget), "predict_every": int(est.predict_every),
        "policy": _sampler_spec(est.sampler),
        "predicted_ess": json_safe(configuration.predicted_ess, "predicted_ess", notes),
        "n_validation": int(configuration.n_validation), "n_runs": int(configuration.n_runs),
        "seconds": float(configuration.seconds), "configured_budget": int(configuration.budget),
        "table": {"columns": [str(c) for c in table.columns],
                  "rows": json_safe(table.to_numpy(dtype=object).tolist(), "table", notes)},
        "notes": notes,
    }
    weights = None
    if est.step_weights is not None:
        weights = np.asarray(est.step_weights, dtype=np.float64)[: doc["budget"]]
        if weights.shape != (doc["budget"],) or not np.all(np.isfinite(weights)) or np.any(weights <= 0):
            raise ValueError(f"Refusing to save: the step weights must be {doc['budget']} finite positive numbers.")
    n_questions = None
    if est.factor_model is None:
        if question_ids is None:
            raise ValueError("question_ids are needed to save a configuration without a predictor (the sample mean).")
        n_questions = len(list(question_ids))
    return _save_predictor(est.factor_model, path, question_ids=question_ids, reader=reader,
                           configuration=(doc, weights), n_questions=n_questions)


def load_configuration(path):
    """Read a file written by :func:`save_configuration`: the :class:`~faqstats.configure.Configuration`.

    Parameters
    ----------
    path : str or os.PathLike
        The file, named as for :func:`save_configuration`.

    Returns
    -------
    Configuration
        Its ``estimator`` (unfitted, ``random_state=None``: set it) makes exactly the draws and the
        estimate of the one :func:`~faqstats.configure_from_history` returned, for the same seed.
        ``estimator.factor_model`` carries ``question_ids_`` and ``metadata_`` (None for the sample mean).

    Raises
    ------
    ValueError
        If the file is damaged or edited (as :func:`load_factor_model`), or holds no configuration.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=120, n_questions=80, n_components=2, random_state=0)
    >>> cfg = fq.configure_from_history(bank.history, 20, n_runs=100, random_state=0)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     est = load_configuration(save_configuration(cfg, pathlib.Path(tmp) / "cfg")).estimator
    >>> z = bank.new_outcomes[0]
    >>> est.set_params(random_state=0).fit(z).result_ == cfg.estimator.set_params(random_state=0).fit(z).result_
    True
    """
    model, meta, _ = load_model_file(path)
    return configuration_from(model, meta, _npz_path(path))


def configuration_from(model, meta, path):
    """The :class:`~faqstats.configure.Configuration` of a loaded file (:func:`load_model_file`)."""
    import pandas as pd

    from .configure import Configuration
    from .estimator import PAIEstimator
    from .session._session import _sampler_from_spec

    config = meta.get("configuration")
    if config is None:
        raise ValueError(f"{path} holds a predictor without a configuration: it was saved with save_factor_model "
                         "(faqstats fit-history without --budget).")
    try:
        sampler = _sampler_from_spec(config["policy"])
        table = pd.DataFrame(config["table"]["rows"], columns=config["table"]["columns"])
        est = PAIEstimator(model, sampler, budget=int(config["budget"]), step_weights=config["step_weights"],
                           predict_every=int(config["predict_every"]))
        est.validate(meta["n_questions"])
        return Configuration(est, str(config["choice"]), table, int(config["configured_budget"]),
                             int(config["n_validation"]), int(config["n_runs"]), float(config["seconds"]),
                             int(config["predict_every"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: the saved configuration is not valid ({exc}).") from exc


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
