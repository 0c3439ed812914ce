"""Every disk format of faqstats, one module each (:mod:`~faqstats.io.models`, :mod:`~faqstats.io.configuration`,
:mod:`~faqstats.io.step_weights`, :mod:`~faqstats.io.session_state`, :mod:`~faqstats.io.samplers`,
:mod:`~faqstats.io.history`, :mod:`~faqstats.io.tables`), with what they share (:mod:`~faqstats.io.checks`,
:mod:`~faqstats.io.npz`): never a pickle, every write atomic, every read checks the format name and version first.
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

__all__ = ["save_factor_model", "load_factor_model", "check_question_ids", "check_reader_options",
           "question_ids_sha256", "array_sha256", "save_step_weights", "load_step_weights", "save_configuration",
           "load_configuration", "read_session_state", "session_checksums", "write_session_state"]
