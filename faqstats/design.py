"""The checks of an estimator's configuration, shared by the estimators and the batched engine."""

import numbers

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ._engine import CLUSTER_SCORES
from ._inference import check_interval
from ._validation import check_alpha, check_scalar
from .predictor import resolve_predictor_keyword
from .sampling import HybridSampler, Sampler, StreamSampler, UniformSampler

__all__ = ["EstimatorParameters", "bank_size", "check_design", "check_estimator", "confidence_alpha",
           "resolve_bank_size", "sample_mean_design"]


def bank_size(predictor):
    """Questions of the predictor's bank (its ``n_features_in_``), or ``None`` without a predictor."""
    if predictor is None:
        return None
    check_is_fitted(predictor)
    return int(predictor.n_features_in_)


def outcomes_bank_size(predictor, outcomes):
    """The predictor's bank size, or without one the size of the first array among ``outcomes`` (None skipped)."""
    sized = [x for x in outcomes if x is not None and not callable(x)]
    if predictor is None and not sized:
        raise ValueError("Without a predictor the bank size is unknown: pass outcomes as arrays.")
    return int(np.size(sized[0])) if predictor is None else int(bank_size(predictor))


def resolve_bank_size(n_factor_model, n_questions):
    """The bank size the factor model's and the outcomes' (each None when unknown) agree on."""
    n = n_factor_model if n_questions is None else n_questions
    if n is None:
        raise ValueError("Without a factor model the bank size comes from the outcomes; pass n_questions.")
    if n_factor_model is not None and n != n_factor_model:
        raise ValueError(f"outcomes cover {n} questions but the factor model was fitted on {n_factor_model} questions.")
    return n


def sample_mean_design(predictor, sampler):
    """Whether the FPC sample mean is reported: uniform sampling without replacement, no predictions."""
    return predictor is None and isinstance(sampler, UniformSampler) and not sampler.replace


def check_design(sampler, predictor, n_questions, budget, batch_size, interval):
    """The checks every estimator makes of its design; returns the (checked) sampler."""
    sampler.check_params()
    check_scalar(budget, "budget", kind=numbers.Integral, low=2)
    check_scalar(batch_size, "batch_size", kind=numbers.Integral, low=1)
    check_interval(interval)
    if predictor is None and sampler.needs_factor_model:
        raise ValueError(f"{type(sampler).__name__} needs a fitted factor_model; pass one or use UniformSampler.")
    if not sampler.replace and budget > n_questions:
        raise ValueError(f"budget={budget} exceeds the {n_questions} questions of the bank; sampling without "
                         "replacement can ask each question only once.")
    return sampler


def confidence_alpha(confidence_sequence, stop_when_width):
    """Level of the confidence sequence a run tracks, or None (``PAIEstimator``'s two parameters)."""
    if confidence_sequence is True or (confidence_sequence is False and stop_when_width is not None):
        return 0.05
    if confidence_sequence is False or confidence_sequence is None:
        return None
    return check_alpha(confidence_sequence)


def check_estimator(est, n_questions, budget=None, sampler=None):
    """Check every parameter of an estimator (or an object with its public parameters) for ``n_questions``."""
    budget = est.budget if budget is None else budget
    sampler = est.sampler if sampler is None else sampler
    sampler = HybridSampler() if sampler is None else sampler
    predictor, variance, step_weights = est.predictor, est.variance, est.step_weights
    if not isinstance(sampler, (Sampler, StreamSampler)):
        raise TypeError(f"sampler must be a faqstats Sampler, got {type(sampler).__name__}.")
    stream = sampler.design == "stream"
    if est.dtype not in ("float64", "float32"):
        raise ValueError(f"dtype must be 'float64' or 'float32', got {est.dtype!r}.")
    check_scalar(est.predict_every, "predict_every", kind=numbers.Integral, low=1)
    if variance not in ("martingale", "paper"):
        raise ValueError(f"variance must be 'martingale' or 'paper', got {variance!r}.")
    if est.stop_when_width is not None:
        check_scalar(est.stop_when_width, "stop_when_width", low=0.0, high=1.0, closed="right")
    if confidence_alpha(est.confidence_sequence, est.stop_when_width) is not None and stream:
        raise ValueError("Confidence sequences and stop_when_width need a sequential sampler, not BernoulliAIPW.")
    if est.cluster_score not in CLUSTER_SCORES:
        raise ValueError(f"cluster_score must be one of {CLUSTER_SCORES}, got {est.cluster_score!r}.")
    check_design(sampler, predictor, n_questions, budget, est.batch_size, est.interval)
    if variance == "paper" and (not sampler.replace or stream):
        raise ValueError("variance='paper' is defined for with-replacement sequential sampling only.")
    if step_weights is None:
        return sampler
    w = np.asarray(step_weights, dtype=float)
    if w.ndim != 1 or w.size < budget:
        raise ValueError(f"step_weights must be a 1-D array with at least budget={budget} entries, "
                         f"got shape {w.shape}.")
    if not np.all(np.isfinite(w[:budget])) or np.any(w[:budget] <= 0):
        raise ValueError("step_weights must be finite and positive.")
    if stream:
        raise ValueError("step_weights weight sequential increments; BernoulliAIPW has none.")
    if sample_mean_design(predictor, sampler):
        raise ValueError("step_weights do not apply to the plain sample mean (uniform sampling, no factor model).")
    if variance != "martingale":
        raise ValueError("step_weights need variance='martingale'.")
    return sampler


class EstimatorParameters:
    """:class:`~faqstats.PAIEstimator`'s parameters (its ``__init__``) and the bank size they imply: what the query
    loop reads of an estimator, so that :func:`~faqstats.batched.simulate` configures its runs without the class."""

    def __init__(self, predictor=None, sampler=None, budget=100, variance="martingale", interval="robust-t",
                 batch_size=1, stop_when_width=None, confidence_sequence=False, step_weights=None, random_state=None,
                 verbose=False, dtype="float64", predict_every=1, estimand="micro", min_group_share=0.0,
                 stratify=False, budget_cost=None, cluster_score="root-sum-square", **deprecated):
        self.predictor = resolve_predictor_keyword(predictor, deprecated, "PAIEstimator")
        self.sampler = sampler
        self.budget = budget
        self.variance = variance
        self.interval = interval
        self.batch_size = batch_size
        self.stop_when_width = stop_when_width
        self.confidence_sequence = confidence_sequence
        self.step_weights = step_weights
        self.random_state = random_state
        self.verbose = verbose
        self.dtype = dtype
        self.predict_every = predict_every
        self.estimand = estimand
        self.min_group_share = min_group_share
        self.stratify = stratify
        self.budget_cost = budget_cost
        self.cluster_score = cluster_score

    def bank_size(self):
        """Questions of the predictor's bank, or ``None`` without a predictor."""
        return bank_size(self.predictor)
