"""Resumable evaluations: :class:`EvaluationSession` (the loop) and :class:`SessionStore` (its directory)."""

from ._session import EvaluationSession, NextQuestions
from ._store import SessionStore

__all__ = ["EvaluationSession", "NextQuestions", "SessionStore"]
