"""Resumable evaluations: a query loop driven from outside, kept on disk between calls.

:class:`EvaluationSession` is the loop; :class:`SessionStore` is where it lives (a
directory with the factor model, the state file and a lock; formats in
:mod:`faqstats.io`).
"""

from ._session import EvaluationSession, NextQuestions
from ._store import SessionStore

__all__ = ["EvaluationSession", "NextQuestions", "SessionStore"]
