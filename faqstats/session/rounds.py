"""A session's rounds: the loop's draws, the answers taken so far, and the rule that records each draw, in draw
order, once every question it asks is answered (with clusters: its cluster's)."""

import numpy as np

from .._engine import ClusterRun
from .config import check_outcome

__all__ = ["Rounds"]


class Rounds:
    """A session's rounds: a fresh query loop's draws, the answers so far (``{question: outcome}`` in arrival
    order), and the rule that records each draw, in draw order, once all its questions (with clusters: its
    cluster's, ``members``) are answered."""

    def __init__(self, loop):
        self.loop = loop
        self.members = loop.run.members if isinstance(loop.run, ClusterRun) else None
        self.answers = {}

    def questions_of(self, draw):
        """The questions a draw asks (with clusters: its cluster's, in question order)."""
        return (draw.question,) if self.members is None else self.members[draw.question].tolist()

    def pending(self):
        """``{question: probability}`` of the unanswered questions of the pending draws, in draw order."""
        first = {}  # question -> probability of its first unanswered pending draw
        for draw in self.loop.pending:
            for question in self.questions_of(draw):
                if question not in self.answers:
                    first.setdefault(question, draw.probability)
        return first

    def drawn_units(self):
        """The distinct questions (with clusters: clusters) of the recorded draws."""
        return {d.question for d in self.loop.draws[: self.loop.n_recorded]}

    def n_queries(self):
        drawn = self.drawn_units()
        return len(drawn) if self.members is None else int(sum(self.members[c].size for c in drawn))

    def state(self):
        """``(draws, answers)`` as stored: ``[question, probability, round]`` and ``[question, outcome]`` lists."""
        return ([[d.question, d.probability, d.round] for d in self.loop.draws],
                [[q, v] for q, v in self.answers.items()])

    def draw(self, rng, n):
        """Draw rounds of ``n`` until one waits for answers or the loop is done."""
        while not self.loop.done and not self.loop.pending:
            self.loop.draw_round(rng, n)
            self.advance()

    def check_answers(self, ids, outcomes, index_of):
        """``{question: outcome}`` of answers to pending questions, each checked (``index_of``: id to question)."""
        waiting, new = self.pending(), {}
        for qid, value in zip(ids, outcomes):
            question = index_of(qid)
            if question in new:
                raise ValueError(f"question id {qid!r} is given twice in one call to record.")
            if question in self.answers:
                raise ValueError(f"question id {qid!r} is already recorded (outcome {self.answers[question]!r}); "
                                 "an answer cannot be changed.")
            if question not in waiting:
                raise ValueError(f"question id {qid!r} is not pending: it was not handed out by next_questions.")
            new[question] = check_outcome(value, qid)
        return new

    def advance(self):
        """Record, in draw order, every pending draw whose answers are all in."""
        loop, answers = self.loop, self.answers
        while not loop.done and loop.pending:
            questions = self.questions_of(loop.pending[0])
            if any(q not in answers for q in questions):
                return
            loop.record(answers[questions[0]] if self.members is None
                        else np.array([answers[q] for q in questions], dtype=float))

    def replay(self, draws, answers, where, question_ids=None):
        """Rebuild the loop from stored draws and answers, round by round, as it was computed live."""
        n = self.loop.run.n_questions
        units = n if self.members is None else len(self.members)  # what a draw picks
        for answer in answers:
            if not (isinstance(answer, (list, tuple)) and len(answer) == 2):
                raise ValueError(f"{where}: invalid answer {answer!r}.")
            question, value = answer
            if not (_is_int(question) and 0 <= question < n) or question in self.answers:
                raise ValueError(f"{where}: answers hold an invalid or repeated question index {question!r}.")
            try:
                self.answers[question] = check_outcome(value, question if question_ids is None
                                                       else question_ids[question])
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{where}: {exc}") from exc
        rounds = {}
        for draw in draws:
            if not (isinstance(draw, (list, tuple)) and len(draw) == 3 and _is_int(draw[0])
                    and 0 <= draw[0] < units and (_is_int(draw[1]) or isinstance(draw[1], float))
                    and 0 < draw[1] <= 1 and _is_int(draw[2])):
                raise ValueError(f"{where}: invalid draw {draw!r}.")
            rounds.setdefault(draw[2], []).append((draw[0], float(draw[1])))
        if list(rounds) != list(range(len(rounds))):
            raise ValueError(f"{where}: draws are not in consecutive rounds.")
        for r, round_draws in rounds.items():
            if self.loop.done or self.loop.pending:
                raise ValueError(f"{where}: round {r} was drawn before the previous rounds were complete.")
            self.loop.replay_round(round_draws, where=f"{where}, round {r}")
            self.advance()
        drawn = {q for d in self.loop.draws for q in self.questions_of(d)}
        if any(q not in drawn for q in self.answers):
            raise ValueError(f"{where}: answers hold a question that was never drawn.")


def _is_int(value):  # a JSON int, not a bool (which Python counts as an int: false is no question index)
    return isinstance(value, int) and not isinstance(value, bool)
