"""An ``.npz`` archive's name, its opening (every entry's declared shape checked against the bytes that hold it,
before numpy allocates anything) and checked reads of its entries."""

import math
import os
import stat
import zipfile
import zlib
from pathlib import Path

import numpy as np

__all__ = ["check_regular_file", "npz_path", "open_array_file", "read_array", "read_float", "read_ids",
           "require_entries"]

# deflate expands at most ~1032:1; a member declaring more than that is damaged or a zip bomb
_MAX_DEFLATE_RATIO = 1100
_NPY_MAGIC = b"\x93NUMPY"


def check_regular_file(path, what="file"):
    """Raise unless ``path`` is a regular file (following links): a FIFO would block a read, a directory or a
    device is no file of data. A missing path raises ``FileNotFoundError``."""
    mode = os.stat(path).st_mode  # FileNotFoundError, PermissionError: as open() reports them
    if not stat.S_ISREG(mode):
        kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "not a regular file")
        link = f" (a link to {os.path.realpath(path)})" if os.path.islink(path) else ""
        raise ValueError(f"{path}{link} is {kind}, not a {what}.")


def _check_npy_header(stream, size, where):
    """Raise unless the ``.npy`` header at the start of ``stream`` declares an array of exactly the ``size``
    bytes held after it (object arrays: numpy refuses them without pickle)."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(stream)
        # version 3.0 differs from 2.0 only in the header's text encoding (utf-8 field names)
        shape, _, dtype = (fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0)(stream)
    except Exception as exc:  # noqa: BLE001 - numpy parses the header with tokenize and ast: any of their errors
        raise ValueError(f"{where} is not a valid .npy array ({type(exc).__name__}: {exc}).") from exc
    if dtype.hasobject:
        return
    declared = math.prod(shape) * dtype.itemsize  # Python ints: no overflow
    held = size - stream.tell()
    if declared != held:
        raise ValueError(f"{where} declares an array of shape {shape} and dtype {dtype} ({declared:,} bytes) but "
                         f"holds {held:,} bytes: the file is damaged; refusing to allocate it.")


def open_array_file(path, what="array file"):
    """``np.load(path, allow_pickle=False)`` of an ``.npz`` or ``.npy`` file (``what`` names its kind in errors),
    refused unless every declared shape, dtype and member size fits the stored bytes (no hostile allocations).
    """
    check_regular_file(path, what)
    file_size = os.path.getsize(path)
    with open(path, "rb") as raw:
        is_npy = raw.read(len(_NPY_MAGIC)) == _NPY_MAGIC
        raw.seek(0)
        if is_npy:
            _check_npy_header(raw, file_size, f"{path}")
        else:
            _check_archive(raw, file_size, path, what)
    try:
        return np.load(path, allow_pickle=False)
    except OSError:  # permissions: as open() reports them
        raise
    except Exception as exc:  # np.load reports a file of another kind as "pickled data"
        raise ValueError(f"{path} is not a readable .npz archive or .npy array ({type(exc).__name__}: {exc}).") \
            from exc


def _check_archive(raw, file_size, path, what):
    try:
        archive = zipfile.ZipFile(raw)
        members = archive.infolist()
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError) as exc:
        raise ValueError(f"{path} is not a readable .npz archive or .npy array (expected a {what}; "
                         f"{type(exc).__name__}: {exc}).") from exc
    with archive:
        for info in members:
            where = f"{path}: entry {info.filename.removesuffix('.npy')!r}"
            ratio = {zipfile.ZIP_STORED: 1, zipfile.ZIP_DEFLATED: _MAX_DEFLATE_RATIO}.get(info.compress_type)
            if info.compress_size > file_size or (ratio is not None and info.file_size > ratio * info.compress_size
                                                  + 1024):
                raise ValueError(f"{where} declares {info.file_size:,} bytes ({info.compress_size:,} compressed) in "
                                 f"a file of {file_size:,} bytes: the file is damaged; refusing to read it.")
            if not info.filename.endswith(".npy"):
                continue
            try:
                with archive.open(info) as stream:
                    _check_npy_header(stream, info.file_size, where)
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError) as exc:
                raise ValueError(f"{where} is damaged ({type(exc).__name__}: {exc}).") from exc


def npz_path(path):
    """``path`` as numpy's ``savez`` names it: ``.npz`` appended when missing."""
    path = Path(os.fspath(path))
    if not path.name.endswith(".npz"):
        path = path.with_name(path.name + ".npz")
    return path


def read_array(data, key, path):
    """Entry ``key`` of an open archive; a damaged entry or one that needs pickle is a ValueError naming it."""
    try:
        arr = data[key]
    except ValueError as exc:  # object arrays need pickle, which is refused
        if "pickle" in str(exc):
            raise ValueError(f"{path}: entry {key!r} cannot be read without pickle ({exc}); refusing to load "
                             "it.") from exc
        raise ValueError(f"{path}: entry {key!r} is damaged ({exc}).") from exc
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError) as exc:
        # a flipped byte, a truncated file; zipfile reads flipped flag bits as "encrypted" or "patched"
        raise ValueError(f"{path}: entry {key!r} is damaged ({type(exc).__name__}: {exc}).") from exc
    if not isinstance(arr, np.ndarray):  # numpy hands back the raw bytes of a member that is no .npy
        raise ValueError(f"{path}: entry {key!r} is not a .npy array (the file is damaged).")
    return arr


def read_float(data, key, shape, path, bound=None, why=""):
    """Entry ``key`` as float64, refused unless a float array of ``shape`` (None: any length) with finite
    values (and, with ``bound``, none above it in absolute value; ``why`` says why it is the bound)."""
    arr = read_array(data, key, path)
    if arr.dtype.kind != "f":
        raise ValueError(f"{path}: {key!r} must be a float array, got dtype {arr.dtype}.")
    if len(arr.shape) != len(shape) or any(want not in (None, got) for want, got in zip(shape, arr.shape)):
        expected = "(" + ", ".join("n" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
        raise ValueError(f"{path}: {key!r} has shape {arr.shape}, expected {expected}.")
    if not np.isfinite(arr).all():
        raise ValueError(f"{path}: {key!r} has {int((~np.isfinite(arr)).sum())} non-finite value(s).")
    if bound is not None and arr.size and np.abs(arr).max() > bound:
        raise ValueError(f"{path}: {key!r} has {int((np.abs(arr) > bound).sum())} value(s) beyond +-{bound:g} "
                         f"(largest {np.abs(arr).max():.3g}){why}; the file was edited or damaged.")
    return arr.astype(np.float64, copy=False)


def read_ids(data, key, n, path, kinds="U"):
    """Entry ``key`` as a list of ``n`` unique str (with ``kinds="Uiu"`` integers too, as str), or None when the
    archive has none."""
    if key not in data.files:
        return None
    arr = read_array(data, key, path)
    if arr.dtype.kind not in kinds or arr.shape != (n,):
        what = f"a str array of shape ({n},)" if kinds == "U" else f"an array of {n} names or ids"
        raise ValueError(f"{path}: {key!r} must be {what}, got {arr.dtype} {arr.shape}.")
    ids = [str(v) for v in arr.tolist()]
    if len(set(ids)) != n:
        seen = set()
        dup = next(q for q in ids if q in seen or seen.add(q))
        raise ValueError(f"{path}: {key!r} must be unique; {dup!r} appears more than once.")
    return ids


def require_entries(data, keys, prefix, path):
    """Raise unless the archive has every one of ``keys`` (prefixed with ``prefix``), naming those it lacks."""
    absent = [prefix + key for key in keys if prefix + key not in data.files]
    if absent:
        raise ValueError(f"{path}: required entr{'y' if len(absent) == 1 else 'ies'} {absent} missing.")
