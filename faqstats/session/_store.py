"""Where a session lives: a directory with ``factor_model.npz`` (the model and the bank's ids),
``session.json`` (the state) and ``.session.lock``, held while the state is written."""

import contextlib
import hashlib
import os
from pathlib import Path

from .._atomic import remove_stale_temporaries
from ..io import load_model_file, read_session_state, save_factor_model, save_predictor, write_session_state
from ..io.npz import check_regular_file

__all__ = ["SessionStore"]

STATE_FILE = "session.json"
MODEL_FILE = "factor_model.npz"
LOCK_FILE = ".session.lock"


class SessionStore:
    """A session directory, its files read and written one revision after another: ``revision`` is the state's
    this store last read or wrote, ``model_sha256`` the model file's; ``allow_unchecked`` reads files without
    checksums."""

    def __init__(self, directory, revision, model_sha256, question_ids=None, model_metadata=None,
                 allow_unchecked=False):
        self.directory = Path(directory)
        self.revision = revision
        self.model_sha256 = model_sha256
        self.question_ids = question_ids
        self.model_metadata = model_metadata or {}
        self.allow_unchecked = allow_unchecked

    @property
    def state_path(self):
        return self.directory / STATE_FILE

    @staticmethod
    def refuse_existing(directory):
        """Raise ``FileExistsError`` if ``directory`` already holds a session."""
        if isinstance(directory, str) and not directory.strip():  # Path("") is the current directory
            raise ValueError(f"directory must name a directory, got {directory!r}.")
        directory = Path(os.fspath(directory))
        if directory.exists() and not directory.is_dir():
            raise ValueError(f"{directory} is not a directory: a session lives in a directory of its own.")
        if (directory / STATE_FILE).exists() or (directory / STATE_FILE).is_symlink():
            raise FileExistsError(f"{directory} already holds a faqstats session; resume it with "
                                  "EvaluationSession.load.")
        return directory

    @classmethod
    def create(cls, directory, factor_model, question_ids, reader=None):
        """``(store, model as stored)`` of a new session directory with ``factor_model`` (None: the sample mean)."""
        directory = cls.refuse_existing(directory)
        directory.mkdir(parents=True, exist_ok=True)
        # the harness reader options stored with a model from 'faqstats fit-history' go with it
        reader = reader or (getattr(factor_model, "metadata_", None) or {}).get("reader")
        ids = [str(q) for q in question_ids]
        remove_stale_temporaries(directory / MODEL_FILE)  # left by a create that was killed mid-write
        if factor_model is None:
            model_path = save_predictor(None, directory / MODEL_FILE, question_ids=ids, reader=reader,
                                        n_questions=len(ids))
        else:
            model_path = save_factor_model(factor_model, directory / MODEL_FILE, question_ids=ids, reader=reader)
        model, meta, ids = load_model_file(model_path)
        return cls(directory, 0, file_sha256(model_path), ids, meta), model

    @classmethod
    def open(cls, directory, allow_unchecked=False):
        """``(store, state, factor model)`` of an existing session, checked against each other."""
        directory = Path(os.fspath(directory))
        state_path = directory / STATE_FILE
        if not (state_path.exists() or state_path.is_symlink()):
            raise FileNotFoundError(f"No faqstats session in {directory} ({STATE_FILE} is missing).")
        check_regular_file(state_path, "session state file")  # a FIFO, a directory, a link to a device
        state = read_session_state(state_path, allow_unchecked=allow_unchecked)
        model_path = directory / state["factor_model_file"]
        if not (model_path.exists() or model_path.is_symlink()):
            raise FileNotFoundError(f"{directory}: the session's factor model file {model_path.name} (named in "
                                    f"{STATE_FILE}) is missing.")
        check_regular_file(model_path, "factor model file")
        fm, meta, ids = load_model_file(model_path, allow_unchecked=allow_unchecked)
        model_ids_hash = meta.get("question_ids_sha256")
        if model_ids_hash != state["question_ids_sha256"]:
            raise ValueError(f"{directory}: the bank's question ids in {STATE_FILE} (sha256 "
                             f"{str(state['question_ids_sha256'])[:12]}...) differ from those of the factor model "
                             f"file {model_path.name} (sha256 {str(model_ids_hash)[:12]}...); the session and the "
                             "model describe different banks.")
        model_sha = file_sha256(model_path)
        if model_sha != state["factor_model_sha256"]:
            raise ValueError(f"{directory}: {model_path.name} is not the factor model this session started with (its "
                             f"SHA-256 differs from the one in {STATE_FILE}); restore it or start a new session.")
        return cls(directory, state["revision"], model_sha, ids, meta, allow_unchecked), state, fm

    def save(self, fields):
        """Write ``fields`` as the next revision under the lock, unless another process wrote one since."""
        path = self.state_path
        fields = fields | {"revision": self.revision + 1, "factor_model_file": MODEL_FILE,
                           "factor_model_sha256": self.model_sha256}
        with _locked(self.directory / LOCK_FILE):
            if path.exists():
                on_disk = read_session_state(path, allow_unchecked=self.allow_unchecked).get("revision")
                if on_disk != self.revision:
                    raise RuntimeError(f"{path} was changed by another process (revision {on_disk}, this session "
                                       f"loaded {self.revision}); nothing was written. Load the session again to "
                                       "continue.")
            remove_stale_temporaries(self.directory / MODEL_FILE)
            write_session_state(path, fields)
        self.revision = fields["revision"]


def file_sha256(path):
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


@contextlib.contextmanager
def _locked(path):
    """An exclusive advisory lock on ``path`` (a no-op where ``fcntl`` is missing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock (the kernel releases it too if the process dies)
