"""Learned step weights (:class:`~faqstats.StepWeights`) as JSON (format ``faqstats-step-weights``, version 2):
the header fields, ``budget``, ``weights``, ``step_variance``, ``smoothed_variance`` (``budget`` floats each),
``n_validation``, ``n_runs``, ``variance_ratio``, ``seconds`` and ``sha256`` (of the rest; version 1 files have
none and load only with ``allow_unchecked=True``)."""

from pathlib import Path

import numpy as np

from ..step_weights import StepWeights
from .checks import header, json_sha256, read_json, write_json

__all__ = ["save_step_weights", "load_step_weights"]

STEP_WEIGHTS_FORMAT = "faqstats-step-weights"
STEP_WEIGHTS_FORMAT_VERSION = 2  # 2: with the SHA-256 of the rest of the document


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
    >>> save_step_weights(sw, pathlib.Path(tempfile.mkdtemp()) / "w.json").name
    'w.json'
    """
    doc = header(STEP_WEIGHTS_FORMAT, STEP_WEIGHTS_FORMAT_VERSION) | {
        "budget": int(step_weights.weights.size), "weights": step_weights.weights.tolist(),
        "step_variance": step_weights.step_variance.tolist(),
        "smoothed_variance": step_weights.smoothed_variance.tolist(),
        "n_validation": int(step_weights.n_validation), "n_runs": int(step_weights.n_runs),
        "variance_ratio": float(step_weights.variance_ratio), "seconds": float(step_weights.seconds)}
    return write_json(path, doc | {"sha256": json_sha256(doc)}, indent=1)


def load_step_weights(path, *, allow_unchecked=False):
    """Read a file written by :func:`save_step_weights` (a :class:`~faqstats.StepWeights`).

    Parameters
    ----------
    path : str or os.PathLike
        The JSON file.
    allow_unchecked : bool, default=False
        Also read a format version 1 file (no checksum: nothing in it can be verified).

    Returns
    -------
    StepWeights
        As saved, with ``factor_model`` None.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import numpy as np
    >>> from faqstats import StepWeights, save_step_weights
    >>> sw = StepWeights(np.array([0.5, 1.0, 1.5]), np.ones(3), np.ones(3), 10, 100, 0.9, 0.5)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     loaded = load_step_weights(save_step_weights(sw, pathlib.Path(tmp) / "weights.json"))
    >>> loaded.weights.tolist(), loaded.variance_ratio, loaded.factor_model
    ([0.5, 1.0, 1.5], 0.9, None)
    """
    path = Path(path)
    doc = read_json(path, "step-weights", STEP_WEIGHTS_FORMAT, STEP_WEIGHTS_FORMAT_VERSION)
    if doc["format_version"] == 1 and not allow_unchecked:
        raise ValueError(f"{path}: step-weights file of format version 1 has no checksum, so damage to it cannot be "
                         "seen; load it with allow_unchecked=True (the command line: --allow-unchecked), or learn "
                         "the weights again.")
    if doc["format_version"] >= 2:
        if "sha256" not in doc:
            raise ValueError(f"{path}: step-weights file has no 'sha256' (format version 2 always has one): it was "
                             "edited; restore it or learn the weights again.")
        try:
            checked = doc.pop("sha256") == json_sha256(doc)
        except ValueError as exc:  # a number that reads as infinite ("1e999"): no file faqstats writes holds one
            raise ValueError(f"{path}: step-weights file holds a value JSON cannot store ({exc}).") from exc
        if not checked:
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
