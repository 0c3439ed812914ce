"""Resumable evaluations: :class:`EvaluationSession` (the loop), :class:`SessionStore` (its directory) and
:class:`LeaderboardSession` (several models, a session each, and their leaderboard)."""

from ._session import EvaluationSession, NextQuestions
from ._store import SessionStore
from .leaderboard import LeaderboardSession

__all__ = ["EvaluationSession", "LeaderboardSession", "NextQuestions", "SessionStore"]
