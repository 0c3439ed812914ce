"""Sampling policies: which question to ask next, and with what probability: sequential policies subclass
:class:`Sampler`, nature's-order designs :class:`StreamSampler` (docs/architecture.md, "Adding a policy")."""

from ..posterior import oracle_scores, quadratic_forms_from_scratch
from ._base import (DRAW_BLOCK, PolicyState, Sampler, check_law, draw_from, inverse_cdf, mixture,
                    mixture_coefficients, within_round)
from ._policies import (ActiveLearningSampler, CostWeightedSampler, HybridSampler, NeymanSampler, UniformSampler,
                        VarianceReductionSampler, active_learning_scores, check_costs, draws_for_cost,
                        variance_reduction_scores)
from ._stream import BernoulliAIPW, StreamSampler

__all__ = [
    "DRAW_BLOCK", "ActiveLearningSampler", "BernoulliAIPW", "CostWeightedSampler", "HybridSampler", "NeymanSampler",
    "PolicyState", "Sampler", "StreamSampler", "UniformSampler", "VarianceReductionSampler", "active_learning_scores",
    "check_costs", "check_law", "draws_for_cost", "draw_from", "inverse_cdf", "mixture", "mixture_coefficients",
    "oracle_scores", "variance_reduction_scores", "quadratic_forms_from_scratch", "within_round",
]
