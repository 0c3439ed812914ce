"""An ``.npz`` archive's name, and checked reads of its entries (``np.load(path, allow_pickle=False)``)."""

from __future__ import annotations

import os
import zipfile
import zlib
from pathlib import Path

import numpy as np

__all__ = ["npz_path", "read_array", "read_float", "read_ids", "require_entries"]


def npz_path(path):
    """``path`` as numpy's ``savez`` names it: ``.npz`` appended when missing."""
    path = Path(os.fspath(path))
    if not path.name.endswith(".npz"):
        path = path.with_name(path.name + ".npz")
    return path


def read_array(data, key, path):
    """Entry ``key`` of an open archive; a damaged entry or one that needs pickle is a ValueError naming it."""
    try:
        return data[key]
    except ValueError as exc:  # object arrays need pickle, which is refused
        if "pickle" in str(exc):
            raise ValueError(f"{path}: entry {key!r} cannot be read without pickle ({exc}); refusing to load it.") from exc
        raise ValueError(f"{path}: entry {key!r} is damaged ({exc}).") from exc
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError) as exc:
        # a flipped byte, a truncated file; zipfile reads flipped flag bits as "encrypted" or "patched"
        raise ValueError(f"{path}: entry {key!r} is damaged ({type(exc).__name__}: {exc}).") from exc


def read_float(data, key, shape, path):
    """Entry ``key`` as float64, refused unless a float array of ``shape`` (None: any length) with finite values."""
    arr = read_array(data, key, path)
    if arr.dtype.kind != "f":
        raise ValueError(f"{path}: {key!r} must be a float array, got dtype {arr.dtype}.")
    if len(arr.shape) != len(shape) or any(want not in (None, got) for want, got in zip(shape, arr.shape)):
        expected = "(" + ", ".join("n" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
        raise ValueError(f"{path}: {key!r} has shape {arr.shape}, expected {expected}.")
    if not np.isfinite(arr).all():
        raise ValueError(f"{path}: {key!r} has {int((~np.isfinite(arr)).sum())} non-finite value(s).")
    return arr.astype(np.float64, copy=False)


def read_ids(data, key, n, path):
    """Entry ``key`` as a list of ``n`` str, or None when the archive has none."""
    if key not in data.files:
        return None
    arr = read_array(data, key, path)
    if arr.dtype.kind != "U" or arr.shape != (n,):
        raise ValueError(f"{path}: {key!r} must be a str array of shape ({n},), got {arr.dtype} {arr.shape}.")
    return arr.tolist()


def require_entries(data, keys, prefix, path):
    """Raise unless the archive has every one of ``keys`` (prefixed with ``prefix``), naming those it lacks."""
    absent = [prefix + key for key in keys if prefix + key not in data.files]
    if absent:
        raise ValueError(f"{path}: required entr{'y' if len(absent) == 1 else 'ies'} {absent} missing.")
