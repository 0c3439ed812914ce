"""The nature's-order design's run (``BernoulliAIPW``): items visited in stream order, each labelled or
skipped by a coin, driven by the same :class:`~faqstats._engine.QueryLoop` (docs/architecture.md, "One loop")."""

import numpy as np

from ._engine import Run, aipw_terms

__all__ = ["StreamRun"]


class StreamRun(Run):
    """State of one nature's-order run: a skipped item contributes its prediction, a labelled one
    ``p + (z - p) / pi``."""

    design = "stream"

    def __init__(self, sampler, predictor, n_questions, budget, order):
        super().__init__(sampler, predictor, n_questions, budget)
        self.order = np.asarray(order)
        self.position = self.labels_used = 0
        self.terms = []  # psi_t = p_t + (z_t - p_t) xi_t / pi_t, one per visited item
        self.variance_terms = []  # xi_t (z_t - p_t)^2 (1 - pi_t) / pi_t^2
        self._rescore()

    def _rescore(self):  # the scores of the items not yet visited and their sum
        self.scores = np.asarray(self.sampler.item_scores(self.predictions), dtype=float)
        self.score_sum = float(np.where(self.available, self.scores, 0.0).sum())

    @property
    def item(self):
        return int(self.order[self.position])

    @property
    def done(self):
        return self.position >= self.n_questions

    @property
    def progress(self):
        """Items visited (for progress bars)."""
        return self.position

    def round_size(self, requested):
        return 1

    def inclusion_probability(self):
        """``pi_t`` of the current item."""
        remaining = self.n_questions - self.position
        return float(self.sampler.inclusion_probability(self.scores[self.item], self.score_sum / remaining,
                                                        self.labels_used, remaining, self.budget, self.n_questions))

    def _advance(self, item):
        self.available[item] = False
        self.score_sum -= self.scores[item]
        self.position += 1

    def skip(self):
        """The coin said skip: the item contributes its prediction."""
        item = self.item
        self.terms.append(self.predictions[item])
        self._advance(item)

    def draw_round(self, rng, size=1, keep_laws=False):
        """Coins along the stream until one says label: ``[(item, pi, None)]``, or ``[]`` at its end."""
        while not self.done:
            pi = self.inclusion_probability()
            if rng.random() < pi:
                return [(self.item, pi, None)]
            self.skip()
        return []

    def record(self, question, probability, outcome):
        """The labelled current item's answer; returns its term."""
        p = self.predictions[question]
        term, variance_term = aipw_terms(p, outcome, probability)
        self.terms.append(term)
        self.variance_terms.append(variance_term)
        self.records.append((question, probability, outcome, term, p, np.nan))
        self.labels_used += 1
        self._advance(question)
        return term

    def end_round(self, questions, outcomes):
        super().end_round(questions, outcomes)
        self._rescore()
