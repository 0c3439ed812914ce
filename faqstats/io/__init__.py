"""Every disk format of faqstats, one module each; never a pickle, every write atomic, every read
checks the format name and version first.

:mod:`~faqstats.io.models` (factor models and every predictor: ``.npz`` + JSON metadata),
:mod:`~faqstats.io.configuration` (what ``configure_from_history`` chose, in the same kind of file),
:mod:`~faqstats.io.step_weights` (JSON), :mod:`~faqstats.io.session_state` (a session's
``session.json``), :mod:`~faqstats.io.samplers` (a sampler as JSON), :mod:`~faqstats.io.history`
(a history: outcomes, models' names and question ids, checksummed), :mod:`~faqstats.io.tables`
(histories from long tables: CSV, TSV, Parquet, JSON Lines), :mod:`~faqstats.io.checks`
(what they share: headers, hashes, JSON safety, question ids) and :mod:`~faqstats.io.npz` (checked
reads of an ``.npz`` archive).
"""

from .checks import array_sha256, check_format_header, check_question_ids, check_reader_options, json_safe
from .checks import question_ids_sha256, utc_now
from .configuration import configuration_from, load_configuration, save_configuration
from .models import FORMAT_NAME, FORMAT_VERSION, PREDICTOR_FORMAT_VERSION
from .models import load_factor_model, load_model_file, save_factor_model, save_predictor, unsaved_reason
from .samplers import sampler_from_spec, sampler_spec
from .session_state import SESSION_FORMAT, SESSION_FORMAT_VERSION
from .session_state import read_session_state, session_checksums, write_session_state
from .step_weights import STEP_WEIGHTS_FORMAT, STEP_WEIGHTS_FORMAT_VERSION, load_step_weights, save_step_weights

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
