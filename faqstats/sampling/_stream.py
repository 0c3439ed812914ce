"""Nature's-order designs: every item visited once, in a stream, labelled or skipped by a coin (an AIPW mean)."""

import numpy as np
from sklearn.base import BaseEstimator

from .._backend import namespace
from .._validation import check_scalar

__all__ = ["StreamSampler", "BernoulliAIPW"]


class StreamSampler(BaseEstimator):
    """Base class of nature's-order designs: :meth:`item_scores` and :meth:`inclusion_probability` to define.

    Examples
    --------
    >>> import numpy as np
    >>> import faqstats as fq
    >>> class Coin(fq.StreamSampler):
    ...     def item_scores(self, predictions):
    ...         return np.ones_like(predictions)
    ...     def inclusion_probability(self, item_score, mean_score, labels_used, remaining, budget, n_items):
    ...         return budget / n_items
    >>> z = fq.make_synthetic_bank(n_models=30, n_questions=100, n_new=1, random_state=0).new_outcomes[0]
    >>> est = fq.PAIEstimator(sampler=Coin(), budget=20, random_state=0).fit(z)
    >>> est.result_.method, est.n_queries_  # the number of labels is random
    ('aipw', 19)
    """

    design = "stream"
    needs_factor_model = False
    replace = False  # every item is visited exactly once
    batched = False  # whether both methods accept torch arrays with a leading run axis

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "item_scores" in vars(cls) or "inclusion_probability" in vars(cls):
            cls.batched = vars(cls).get("batched", False)

    def check_params(self):
        """Raise for invalid parameters; return ``self``."""
        return self

    def stream_order(self, n_items, rng):
        """The order in which the items are visited.

        Parameters
        ----------
        n_items : int
        rng : numpy.random.Generator

        Returns
        -------
        ndarray of int, shape (n_items,)
            A permutation of ``0 .. N-1`` (here the natural order).
        """
        return np.arange(n_items)

    def item_scores(self, predictions):
        """Non-negative preference of each item, from the current predictions.

        Parameters
        ----------
        predictions : ndarray of shape (N,)

        Returns
        -------
        ndarray of shape (N,)
        """
        raise NotImplementedError

    def inclusion_probability(self, item_score, mean_score, labels_used, remaining, budget, n_items):
        """``pi_t``, the probability of labelling the current item.

        Parameters
        ----------
        item_score, mean_score : float
            The item's score, and the mean score of the items not yet visited (itself included).
        labels_used, remaining, budget, n_items : int
            Labels used, items left (itself included), the expected number of labels, and ``N``.

        Returns
        -------
        float
        """
        raise NotImplementedError


class BernoulliAIPW(StreamSampler):
    """Nature's-order active inference (Zrnic & Candes, 2024): label or skip each item.

    Item ``t`` is labelled with probability ``pi_t = min(1, (B_t / R_t) [(1 - tau) s_t / mean_{remaining} s
    + tau])`` (``B_t`` labels and ``R_t`` items left), never below a floor: the label count is random.

    Parameters
    ----------
    score : {"uniform", "neyman", "min"}, default="neyman"
        ``sqrt(p (1 - p))``, ``min(p, 1 - p)`` (Zrnic & Candes) or constant (Bernoulli sampling).
    tau : float in (0, 1], default=0.5
    order : {"random", "natural"}, default="random"
        Stream order: a seeded random permutation, or question index order.
    pi_floor : float in (0, 1], default=0.5
        Floor of ``pi_t`` as a fraction of ``budget / N``; it bounds the weights by ``N / (pi_floor budget)``.

    Examples
    --------
    >>> import numpy as np
    >>> s = BernoulliAIPW(tau=0.5)
    >>> scores = s.item_scores(np.array([0.5, 0.9]))
    >>> float(s.inclusion_probability(scores[0], scores.mean(), 0, 2, 1, 2))  # (1/2) (0.5 * 0.5/0.4 + 0.5)
    0.5625
    """

    batched = True

    def __init__(self, score="neyman", tau=0.5, order="random", pi_floor=0.5):
        self.score = score
        self.tau = tau
        self.order = order
        self.pi_floor = pi_floor

    def check_params(self):
        check_scalar(self.tau, "tau", low=0.0, high=1.0, closed="right")
        check_scalar(self.pi_floor, "pi_floor", low=0.0, high=1.0, closed="right")
        if self.score not in ("uniform", "neyman", "min"):
            raise ValueError(f"score must be 'uniform', 'neyman' or 'min', got {self.score!r}.")
        if self.order not in ("random", "natural"):
            raise ValueError(f"order must be 'random' or 'natural', got {self.order!r}.")
        return self

    def stream_order(self, n_items, rng):
        return rng.permutation(n_items) if self.order == "random" else np.arange(n_items)

    def item_scores(self, predictions):
        p = predictions
        xp = namespace(p)
        if self.score == "uniform":
            return xp.ones_like(p)
        if self.score == "neyman":
            return xp.sqrt(xp.clip(p * (1.0 - p), 0.0, None))
        return xp.minimum(p, 1.0 - p)

    def inclusion_probability(self, item_score, mean_score, labels_used, remaining, budget, n_items):
        xp = namespace(mean_score)
        positive = mean_score > 0
        rel = xp.where(positive, item_score / xp.where(positive, mean_score, 1.0), 1.0)
        rate = xp.clip(budget - labels_used, 0.0, None) / remaining
        return xp.clip(rate * ((1.0 - self.tau) * rel + self.tau), self.pi_floor * budget / n_items, 1.0)
