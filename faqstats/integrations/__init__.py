"""Evaluation harnesses: past runs as a history, a session's questions as harness arguments.

* :mod:`faqstats.integrations.lm_eval`: EleutherAI lm-evaluation-harness
  (``--log_samples`` output in, ``--samples`` JSON out).
* :mod:`faqstats.integrations.inspect_ai`: inspect-ai eval logs in, ``--sample-id`` out.

The harnesses need not be installed (each module says how it reads their files).
Question ids are ``"<task>/<id>"`` strings, the columns of the history matrix; pass them
to :func:`faqstats.save_factor_model` so that a later session can check the bank's order.
The command line does the same without Python: ``faqstats fit-history --lm-eval|--inspect``,
``faqstats session next --format lm-eval|inspect``, ``faqstats session record --lm-eval|--inspect``.

* :mod:`faqstats.integrations.question_files`: per-question values from CSV/JSON files
  (question ids, group and cluster labels, costs, outcomes), as the command line reads them.
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
