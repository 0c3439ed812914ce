"""Sampling policies: which question to ask next, and with what probability.

Sequential policies are :class:`Sampler` subclasses: they see a read-only
:class:`PolicyState` (current predictions, the factor posterior through a read-only
view, the step, which questions may still be asked) and return non-negative scores;
the base class mixes in a uniform floor ``tau`` and draws (:func:`draw_from`). Samplers
never see the estimator and never hold randomness of their own: the loop lends its
generator. A new policy is one small class overriding :meth:`Sampler.scores`, and it
runs everywhere: :class:`~faqstats.PAIEstimator`, :class:`~faqstats.EvaluationSession`,
:class:`~faqstats.PairedPAIEstimator`, :func:`faqstats.batched.simulate` and through it
step-weight learning and policy tuning.

:class:`BernoulliAIPW` is the nature's-order design of Zrnic & Candes (2024), on its own
base :class:`StreamSampler`: items arrive in a fixed stream and each gets a label/skip
coin.
"""

from ..posterior import oracle_scores, quadratic_forms_from_scratch
from ._base import (
    DRAW_BLOCK,
    PolicyState,
    Sampler,
    check_law,
    draw_from,
    inverse_cdf,
    mixture,
    mixture_coefficients,
    within_round,
)
from ._policies import ActiveLearningSampler, HybridSampler, NeymanSampler, UniformSampler, active_learning_scores
from ._stream import BernoulliAIPW, StreamSampler

__all__ = [
    "DRAW_BLOCK",
    "ActiveLearningSampler",
    "BernoulliAIPW",
    "HybridSampler",
    "NeymanSampler",
    "PolicyState",
    "Sampler",
    "StreamSampler",
    "UniformSampler",
    "active_learning_scores",
    "check_law",
    "draw_from",
    "inverse_cdf",
    "mixture",
    "mixture_coefficients",
    "oracle_scores",
    "quadratic_forms_from_scratch",
    "within_round",
]
