"""faqstats: valid confidence intervals for benchmark accuracy from few queries.

Data flow: history -> a :class:`Predictor` (:class:`LogisticFactorModel`...) -> a :class:`Sampler` ->
:class:`PAIEstimator` -> :class:`AccuracyResult`.
"""

from ._version import __version__
from .cold_start import cold_start_factor_model, transfer_question_factors
from .compare import PairedPAIEstimator, compare
from .configure import configure_from_history
from .datasets import SyntheticBank, draw_bank_from_factors, load_response_matrix, make_synthetic_bank
from .estimator import PAIEstimator, martingale_variance, paper_variance, weighted_martingale
from .evaluate import evaluate
from .factor_model import LogisticFactorModel, LogisticFactorModelCV, laplace_update
from .irt import ItemResponseModel
from .joint import JointResults
from .leaderboard import LeaderboardEstimator
from .model_based import ModelBasedEstimator, ModelBasedResult
from .model_based_predictor import AbilityFactorModel, AveragedPredictor
from .predictor import Predictor, predictor_class, register_predictor
from .history import add_rows_to_history, add_sessions_to_history
from .io.history import load_history, save_history
from .io.tables import history_from_frame, read_history_table
from .io import (load_configuration, load_factor_model, load_step_weights, save_configuration, save_factor_model,
                 save_step_weights)
from .estimands import GroupResults
from .intervals import IntervalRule, register_interval_rule
from .results import AccuracyResult, ComparisonResult
from .session import EvaluationSession, LeaderboardSession
from .sampling import (ActiveLearningSampler, BernoulliAIPW, CostWeightedSampler, HybridSampler, NeymanSampler,
                       PolicyState, Sampler, StreamSampler, UniformSampler, VarianceReductionSampler)
from .step_weights import StepWeights, learn_step_weights
from .stacking import HistoryMixture, StackedPredictor
from .surrogate import GaussianProcessSurrogate

__all__ = [
    "AbilityFactorModel", "AccuracyResult", "AveragedPredictor", "add_rows_to_history", "add_sessions_to_history",
    "history_from_frame", "read_history_table",
    "save_history", "load_history", "ActiveLearningSampler", "BernoulliAIPW", "ComparisonResult",
    "CostWeightedSampler", "EvaluationSession", "GaussianProcessSurrogate", "GroupResults", "HistoryMixture",
    "HybridSampler", "IntervalRule", "ItemResponseModel", "JointResults", "LeaderboardEstimator", "LeaderboardSession",
    "LogisticFactorModel", "LogisticFactorModelCV",
    "ModelBasedEstimator", "ModelBasedResult", "NeymanSampler", "PAIEstimator", "PairedPAIEstimator",
    "PolicyState", "Predictor", "Sampler", "StackedPredictor", "StepWeights", "StreamSampler", "SyntheticBank",
    "UniformSampler", "VarianceReductionSampler", "cold_start_factor_model", "compare", "configure_from_history",
    "evaluate", "laplace_update", "learn_step_weights", "draw_bank_from_factors", "load_configuration",
    "load_factor_model", "load_step_weights", "load_response_matrix", "make_synthetic_bank", "martingale_variance",
    "paper_variance", "predictor_class", "register_predictor", "register_interval_rule", "save_configuration",
    "save_factor_model", "save_step_weights", "transfer_question_factors", "weighted_martingale",
]
