"""A session directory's ``session.json`` (format ``faqstats.session``, version 1), written after every change:
the header, ``revision`` (+1 per write), the factor model file and its SHA-256, the bank (``n_questions``, ids'
SHA-256 and type), ``config`` (the sampler and session parameters), ``rng_state``, ``draws`` (``[question,
probability, round]``), ``answers`` (``[question, outcome]``) and ``checksums`` (:func:`session_checksums`, checked
on every load: an edit is refused with the parts named; a state without them only with ``allow_unchecked=True``).
"""

from pathlib import Path

from .._atomic import remove_stale_temporaries
from .checks import header, json_sha256, read_json, utc_now, write_json

__all__ = ["read_session_state", "session_checksums", "write_session_state"]

SESSION_FORMAT = "faqstats.session"
SESSION_FORMAT_VERSION = 1
_SESSION_FIELDS = ("revision", "factor_model_file", "factor_model_sha256", "question_ids_sha256", "question_id_type",
                   "config", "rng_state", "draws", "answers")
_SETTINGS = ("config", "n_questions", "question_id_type", "question_ids_sha256", "factor_model_sha256")
_PARTS = ("draws", "answers", "rng_state", "checksums", "updated_utc")  # the header: all else but these


def session_checksums(state):
    """``{part: SHA-256}`` of a session state's parts: settings, draws, answers, rng_state and the rest (header)."""
    parts = {"settings": {key: state.get(key) for key in _SETTINGS}, "draws": state.get("draws"),
             "answers": state.get("answers"), "rng_state": state.get("rng_state"),
             "header": {key: value for key, value in state.items() if key not in _SETTINGS + _PARTS}}
    return {name: json_sha256(value) for name, value in parts.items()}


def read_session_state(path, *, allow_unchecked=False):
    """A ``session.json`` state, checked field by field and by checksum (``allow_unchecked``: also one written
    before faqstats stored checksums).
    """
    state = read_json(path, "session", SESSION_FORMAT, SESSION_FORMAT_VERSION, "session format version")
    missing = [key for key in _SESSION_FIELDS if key not in state]
    if missing:
        raise ValueError(f"{path}: missing field(s) {missing}.")
    stored = state.get("checksums")
    if stored is None and not allow_unchecked:
        raise ValueError(f"{path}: the session has no 'checksums' (faqstats writes them with every state): the file "
                         "was edited; restore it (a session written before faqstats stored them loads with "
                         "allow_unchecked=True).")
    if stored is not None:
        try:
            now = session_checksums(state)
        except (TypeError, ValueError) as exc:  # e.g. NaN written by hand
            raise ValueError(f"{path}: not a valid session state ({exc}).") from exc
        changed = [name for name in now if not isinstance(stored, dict) or stored.get(name) != now[name]]
        if changed:
            raise ValueError(f"{path}: the session's {', '.join(changed)} differ from the checksums written with them: "
                             "the file was edited by hand or damaged; restore it (a session cannot be changed after "
                             "the fact).")
    kinds = {"config": dict, "rng_state": dict, "draws": list, "answers": list, "revision": int, "n_questions": int}
    wrong = [key for key, kind in kinds.items()
             if key in state and (not isinstance(state[key], kind) or isinstance(state[key], bool))]
    if wrong:
        raise ValueError(f"{path}: field(s) {wrong} have the wrong type (the file was edited or damaged).")
    lowest = {"revision": 0, "n_questions": 1}  # revisions count writes from 0; a bank has a question
    below = [f"{key}={state[key]}" for key, low in lowest.items() if key in state and state[key] < low]
    if below:
        raise ValueError(f"{path}: {', '.join(below)} is out of range (revision counts writes from 0, a bank has at "
                         "least one question): the file was edited.")
    if state["question_id_type"] not in ("str", "int"):
        raise ValueError(f"{path}: question_id_type must be 'str' or 'int', got {state['question_id_type']!r}.")
    name = state["factor_model_file"]
    if not isinstance(name, str) or name in ("", ".", "..") or Path(name).name != name:
        raise ValueError(f"{path}: factor_model_file must be a file name in the session directory.")
    return state


def write_session_state(path, fields):
    """Write a session's ``session.json`` (header, ``updated_utc``, checksums, ``fields``) atomically, under the
    caller's lock; returns the path.
    """
    doc = header(SESSION_FORMAT, SESSION_FORMAT_VERSION) | {"updated_utc": utc_now()} | fields
    doc["checksums"] = session_checksums(doc)
    remove_stale_temporaries(path)
    return write_json(path, doc)
