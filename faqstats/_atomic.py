"""Crash-safe file replacement shared by model files and session state."""

import contextlib
import os
import secrets
from pathlib import Path


def atomic_write(path, write):
    """Replace ``path`` so that a crash leaves either the old or the new file, never a mix: ``write(fileobj)``
    writes a temporary binary file beside it, ``fsync``-ed and moved over ``path``; on failure ``path`` is untouched."""
    given = Path(path)
    # a link is written through to its target (replacing the link would leave the target stale)
    path = Path(os.path.realpath(given)) if given.is_symlink() else given
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    try:
        while True:
            tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
            try:
                fd = os.open(tmp, flags, 0o666)  # the process umask applies, as for a plain open()
                break
            except FileExistsError:  # pragma: no cover - 48 random bits collided
                continue
    except OSError as exc:
        raise _naming(exc, path) from exc
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):  # disk full, quota: say which file could not be written
            raise _naming(exc, path) from exc
        raise
    # directories cannot be opened on every platform
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return given


def _naming(exc, path):
    """``exc`` as an OSError that names ``path``."""
    if exc.errno is None:
        return OSError(f"{path} was not written (it is as it was): {exc}")
    return OSError(exc.errno, f"{exc.strerror or exc} (not written; the file is as it was)", str(path))


def remove_stale_temporaries(path):
    """Delete the temporary files a killed :func:`atomic_write` left (only while holding ``path``'s writers' lock)."""
    path = Path(os.path.realpath(path)) if Path(path).is_symlink() else Path(path)
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(OSError):
            stale.unlink()
