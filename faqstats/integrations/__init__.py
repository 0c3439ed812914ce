"""Evaluation harnesses: past runs as a history, a session's questions as harness arguments.

lm-evaluation-harness (:mod:`~faqstats.integrations.lm_eval`) and inspect-ai (:mod:`~faqstats.integrations.inspect_ai`),
neither needed installed; per-question CSV/JSON files (:mod:`~faqstats.integrations.question_files`). Question ids
are ``"<task>/<id>"``, the history's columns: pass them to :func:`faqstats.save_factor_model`.
"""

from ._common import task_groups
from .inspect_ai import (DEFAULT_VALUE_MAP, inspect_sample_id_arg, read_inspect_clusters, read_inspect_costs,
                         read_inspect_groups, read_inspect_logs, read_inspect_outcomes)
from .lm_eval import (read_lm_eval_costs, read_lm_eval_groups, read_lm_eval_outcomes, read_lm_eval_samples,
                      write_lm_eval_samples_arg)
from .question_files import (read_outcome_pairs, read_question_costs, read_question_ids, read_question_labels,
                             read_question_values)

__all__ = ["DEFAULT_VALUE_MAP", "inspect_sample_id_arg", "read_inspect_clusters", "read_inspect_costs",
           "read_inspect_groups", "read_inspect_logs", "read_inspect_outcomes",
           "read_lm_eval_costs", "read_lm_eval_groups", "read_lm_eval_outcomes", "read_lm_eval_samples", "task_groups",
           "write_lm_eval_samples_arg", "read_question_ids", "read_question_values", "read_question_labels",
           "read_question_costs", "read_outcome_pairs"]
