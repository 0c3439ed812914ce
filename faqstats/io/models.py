"""Factor models and every other predictor as one ``.npz`` file (format ``faqstats.factor_model``): the
predictor's arrays (as its ``get_entries`` names them), ``question_ids`` and ``feature_names_in`` (str), and
``metadata_json`` (the header, ``created_utc``, ``question_ids_sha256``, ``notes``, ``reader``, the predictor's
fields and the SHA-256 of every other entry). Version 1: the low-rank form (:func:`save_factor_model`); version 2:
any other predictor, none (the sample mean) or a configuration (:func:`~faqstats.save_configuration`), its step
weights the entry ``configuration.step_weights``. Never a pickle; see the user guide's file formats page.
"""

import numpy as np

from ..predictor import predictor_class
from .checks import (METADATA_KEY, check_ids, check_reader_options, checksum_error, header, json_safe, json_sha256,
                     question_ids_sha256, read_npz_metadata, utc_now, write_npz)
from .npz import npz_path, open_array_file, read_array, read_float, read_ids, require_entries
from .predictor_arrays import read_save_pair, save_pair_entries, unsaved_reason

__all__ = ["save_factor_model", "load_factor_model", "load_model_file", "save_predictor", "unsaved_reason"]

FORMAT_NAME = "faqstats.factor_model"
FORMAT_VERSION = 1  # what low-rank predictors are written as (older faqstats read them)
#: 2: any other predictor, no predictor (the sample mean) or a saved configuration
PREDICTOR_FORMAT_VERSION = 2

CONFIG_WEIGHTS = "configuration.step_weights"
_CV_PREFIX = "cv_results."
# factors, means and noise beyond this (logits of 1e12 per component) make every score non-finite:
# no fit produces them, so a file holding them was edited
VALUE_BOUND = 1e6
_BOUND_WHY = " (no fit gives a logit-scale value beyond it; larger ones overflow the policy's scores)"
_READ_WHY = {1: _BOUND_WHY, 2: " (the square of the factors' bound)"}


class _Saver:
    """What a predictor's ``get_entries`` is handed (:mod:`faqstats.predictor` describes it)."""

    def __init__(self, prefix, notes, first_format):
        self.prefix, self.notes, self.first_format = prefix, notes, first_format

    def float(self, model, attr, bound=None):
        arr = np.asarray(getattr(model, attr), dtype=np.float64)
        if not np.isfinite(arr).all():
            raise ValueError(f"Refusing to save: {attr} has non-finite values.")
        if bound is not None and arr.size and np.abs(arr).max() > VALUE_BOUND**bound:  # the reader would refuse it
            raise ValueError(f"Refusing to save: {attr} has values beyond +-{VALUE_BOUND**bound:g} (largest "
                             f"{np.abs(arr).max():.3g}){_BOUND_WHY}.")
        return arr

    def json(self, value, name):
        return json_safe(value, self.prefix + name, self.notes)

    def entries(self, predictor, prefix):
        fields, arrays = _predictor_entries(predictor, self.prefix + prefix, self.notes)
        return fields, {key[len(self.prefix):]: arr for key, arr in arrays.items()}


class _Entries:
    """What a predictor's ``from_entries`` is handed (:mod:`faqstats.predictor` describes it)."""

    def __init__(self, data, prefix, n_questions, path, format_version):
        self.data, self.prefix, self.n_questions, self.path = data, prefix, n_questions, path
        self.format_version, self.where = format_version, f" ({prefix})" if prefix else ""

    def __contains__(self, name):
        return self.prefix + name in self.data.files

    def key(self, name):
        return self.prefix + name

    def error(self, message):
        return ValueError(f"{self.path}: {message}")

    def require(self, *names):
        require_entries(self.data, names, self.prefix, self.path)

    def array(self, name):
        return read_array(self.data, self.prefix + name, self.path)

    def float(self, name, shape, bound=None):
        return read_float(self.data, self.prefix + name, shape, self.path,
                          bound=None if bound is None else VALUE_BOUND**bound, why=_READ_WHY.get(bound, ""))

    def set_params(self, model, params):
        known = model.get_params(deep=False)
        try:
            model.set_params(**{name: value for name, value in params.items() if name in known})
            if callable(getattr(model, "check_params", None)):
                model.check_params()
        except (TypeError, ValueError) as exc:
            raise self.error(f"invalid estimator parameters in metadata{self.where}: {exc}") from exc

    def predictor(self, fields, prefix):
        return _read_predictor(self.data, fields, self.prefix + prefix, self.n_questions, self.path,
                               self.format_version)


# -- writing ---------------------------------------------------------------------------
def save_factor_model(model, path, *, question_ids=None, reader=None):
    """Write a fitted factor model to one ``.npz`` file, atomically and without pickle.

    Parameters
    ----------
    model : fitted predictor
        A built-in predictor (the CV model: its ``best_estimator_``, with the CV results; an item
        response model: its factor-model view), or a registered :class:`~faqstats.Predictor` with the
        save pair ``get_arrays`` / ``from_arrays`` (one without it: ``TypeError`` saying what to add).
    path : str or os.PathLike
        Destination; ``".npz"`` is appended when missing.
    question_ids : sequence of str, optional
        Unique ids of the questions, in the model's order (default ``feature_names_in_``).
    reader : dict, optional
        How the history was read from harness output (:func:`~faqstats.io.check_reader_options`).

    Returns
    -------
    pathlib.Path
        The file written.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from faqstats import LogisticFactorModel, load_factor_model, save_factor_model
    >>> fm = LogisticFactorModel.from_factors(np.eye(3)[:, :2], np.zeros(2), np.eye(2))
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     loaded = load_factor_model(save_factor_model(fm, pathlib.Path(tmp) / "fm", question_ids=["a", "b", "c"]))
    >>> np.array_equal(loaded.predict_proba([1.0, -1.0]), fm.predict_proba([1.0, -1.0])), loaded.question_ids_
    (True, ['a', 'b', 'c'])
    """
    return _save(model, path, question_ids, reader, None, None, first_format=True)


def save_predictor(model, path, *, question_ids=None, reader=None, configuration=None, n_questions=None):
    """Write a predictor of any kind in format version 2 (``model=None``: the sample mean, ids only, needs
    ``n_questions``); ``configuration`` is a (JSON document, step weights) pair. Returns the path written.
    """
    return _save(model, path, question_ids, reader, configuration, n_questions, first_format=False)


def _save(model, path, question_ids, reader, configuration, n_questions, first_format):
    notes, extra = [], {}
    if model is None:
        meta, arrays = {"estimator": None, "params": {}, "n_questions": int(n_questions)}, {}
    else:
        reason = unsaved_reason(model)
        if reason is not None:
            raise TypeError(reason)
        meta, arrays = _predictor_entries(model, "", notes, first_format)
    if configuration is not None:
        doc, step_weights = configuration
        if step_weights is not None:
            extra[CONFIG_WEIGHTS] = step_weights
        meta["configuration"] = doc | {"sha256": json_sha256(doc)}
    version = meta.pop("format_version", PREDICTOR_FORMAT_VERSION)  # 1: the low-rank form, in save_factor_model
    if version not in ((FORMAT_VERSION, PREDICTOR_FORMAT_VERSION) if first_format else (PREDICTOR_FORMAT_VERSION,)):
        raise ValueError(f"Refusing to save: {type(model).__name__}.get_entries gave format_version={version!r}.")
    n = meta["n_questions"]
    feature_names = getattr(model, "feature_names_in_", None)
    if feature_names is not None:
        arrays["feature_names_in"] = np.array(check_ids(feature_names, n, "feature_names_in_"), dtype=str)
        if question_ids is None:
            question_ids = list(feature_names)
    if question_ids is not None:
        question_ids = check_ids(question_ids, n, "question_ids")
        arrays["question_ids"] = np.array(question_ids, dtype=str)
    ids_sha256 = None if question_ids is None else question_ids_sha256(question_ids)
    metadata = header(FORMAT_NAME, version) | {"numpy_version": np.__version__, "created_utc": utc_now(), **meta,
                                               "question_ids_sha256": ids_sha256, "notes": notes}
    reader = check_reader_options(reader)
    if reader is not None:  # only when given: files without it read as before
        metadata["reader"] = reader
    return write_npz(path, arrays | extra, metadata)


def _predictor_entries(model, prefix, notes, first_format=False):
    """``(metadata, arrays)`` of a fitted predictor, its array names prefixed with ``prefix``."""
    saver = _Saver(prefix, notes, first_format)
    if callable(getattr(model, "get_entries", None)):
        fields, arrays = model.get_entries(saver)
    else:  # a predictor of your own, through its save pair (TypeError without it)
        fields, arrays = save_pair_entries(model, saver)
    return fields, {prefix + key: np.asarray(arr) for key, arr in arrays.items()}


# -- reading ---------------------------------------------------------------------------
def load_factor_model(path, *, allow_unchecked=False):
    """Load a factor model written by :func:`save_factor_model`, without pickle, checking it all first.

    A file that is damaged or edited, of a newer format, without its checksums (unless ``allow_unchecked``)
    or without a predictor (:func:`~faqstats.load_configuration` reads that one) is refused (``ValueError``).

    Parameters
    ----------
    path : str or os.PathLike
        The file, named as for :func:`save_factor_model`.
    allow_unchecked : bool, default=False
        Also read a format version 1 file written before faqstats stored the SHA-256 of its entries
        (nothing in it can be verified); by default it is refused, as is one whose hashes were deleted.

    Returns
    -------
    fitted predictor
        Predicting exactly as the saved one, with its parameters (a Generator ``random_state``: None),
        ``question_ids_`` and ``metadata_`` (the JSON metadata; a CV model's
        ``metadata_["cv"]["cv_results"]``: a dict of ndarrays).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from faqstats import LogisticFactorModel, load_factor_model, save_factor_model
    >>> fm = LogisticFactorModel.from_factors(np.ones((4, 2)), model_factors=np.eye(2))
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     loaded = load_factor_model(save_factor_model(fm, pathlib.Path(tmp) / "fm.npz"))
    >>> loaded.question_factors_.shape, loaded.question_ids_
    ((4, 2), None)
    """
    model, meta, _ = load_model_file(path, allow_unchecked=allow_unchecked)
    if model is None:
        raise ValueError(f"{npz_path(path)} holds no predictor (the FPC sample mean was chosen); read it with "
                         "load_configuration, or start a session from it.")
    return model


def load_model_file(path, *, allow_unchecked=False):
    """``(predictor or None, metadata, question ids or None)`` of a model file, checked as :func:`load_factor_model`
    does (a None predictor: the sample mean).
    """
    path = npz_path(path)
    data = open_array_file(path, "factor model file")  # shapes checked against the file's size first
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ValueError(f"{path} is not a faqstats factor model file: a single .npy array, not an .npz archive.")
    with data:
        meta = _read_metadata(data, path)
        n = meta["n_questions"]
        model = None if meta.get("estimator") is None else _read_predictor(data, meta, "", n, path,
                                                                            meta["format_version"])
        ids = read_ids(data, "question_ids", n, path)
        names = read_ids(data, "feature_names_in", n, path)
        cv_results = {key[len(_CV_PREFIX):]: read_array(data, key, path) for key in data.files
                      if key.startswith(_CV_PREFIX)}
        weights = _read_configuration_weights(data, meta, path)
        # raised last: the specific checks name what is wrong
        hash_error = _array_hash_error(data, meta, path, allow_unchecked)

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
    meta = read_npz_metadata(data, path, FORMAT_NAME, PREDICTOR_FORMAT_VERSION, "factor model file")
    value = meta.get("n_questions")  # the predictor's own fields are checked as it is read
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{path}: metadata 'n_questions' must be a positive integer, got {value!r}.")
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
    """The error naming the entries whose bytes differ from their stored SHA-256 (or the hashes missing), or None."""
    stored = meta.get("array_sha256")
    if stored is None:
        if allow_unchecked and meta["format_version"] == 1:  # written before faqstats stored the hashes
            return None
        return ValueError(f"{path}: metadata has no 'array_sha256' (faqstats writes the SHA-256 of every entry): "
                          "the file was edited; restore it (a format version 1 file written before faqstats stored "
                          "them reads with allow_unchecked=True).")
    if not isinstance(stored, dict):
        return ValueError(f"{path}: metadata 'array_sha256' must be a JSON object.")
    return checksum_error(data, stored, path, "model", "refit or restore it")


def _read_predictor(data, meta, prefix, n, path, format_version):
    """The predictor stored under ``prefix``: ``from_entries`` of the class registered as its ``estimator``,
    else its save pair."""
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: metadata of component {prefix!r} must be a JSON object.")
    where, kind = f" ({prefix})" if prefix else "", meta.get("estimator")
    if meta.get("n_questions") != n:
        raise ValueError(f"{path}:{where} has n_questions={meta.get('n_questions')!r}, the file {n}.")
    try:
        cls = predictor_class(kind)
    except ValueError:
        cls = None
    entries = _Entries(data, prefix, n, path, format_version)
    if not callable(getattr(cls, "from_entries", None)):  # registered with a save pair, or an unknown estimator
        model = read_save_pair(cls, entries, meta, kind)
    elif not isinstance(meta.get("params"), dict):
        raise ValueError(f"{path}: metadata{where} 'params' must be a JSON object.")
    else:
        model = cls.from_entries(entries, meta)
    model.n_features_in_ = n
    return model
