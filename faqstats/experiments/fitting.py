"""What the experiments learn from the history before the sweep: the factor model, each (method, budget)'s
sampler and increment weights, and the ceilings' oracle predictors."""

import copy
import time
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.base import clone

from ..configure import configure_from_history
from ..factor_model import LogisticFactorModel
from ..step_weights import learn_step_weights, validation_split
from .field import FieldMethod
from .methods import build_method, method_spec, predictor_kind

__all__ = ["NEWTON_MIN_QUESTIONS", "fit_factor_model", "oracle_predictor", "OraclePredictors", "prepare_methods"]

#: banks of at least this many questions get the Newton solver by default (AdamW costs minutes there)
NEWTON_MIN_QUESTIONS = 20000


def _default_factor_model(verbose, n_questions=0, spec=None):
    """The experiments' factor model: AdamW as in the paper, on large banks Newton (unless ``spec`` sets the solver)."""
    fm = LogisticFactorModel(n_components=16, regularization=0.1, max_iter=2000, random_state=0, verbose=verbose)
    if n_questions >= NEWTON_MIN_QUESTIONS and not {"solver", "regularization", "max_iter"} & set(spec or {}):
        # ten sweeps: as good as converged (41 sweeps) in validation there, a quarter of the time
        fm.set_params(solver="newton", regularization=3.0, tol=1e-3, max_iter=10)
    return fm.set_params(**(spec or {}))


def fit_factor_model(spec, history, verbose):
    """``(fitted model, seconds)``: ``spec`` (None or a dict: the default with those parameters; an estimator: cloned)
    fitted on the history, or an already fitted model as is (0 seconds).
    """
    if hasattr(spec, "question_factors_") or hasattr(spec, "best_estimator_"):  # already fitted
        n = spec.question_factors_.shape[0]
        if n != history.shape[1]:
            raise ValueError(f"the fitted factor_model covers {n} questions, the matrix {history.shape[1]}.")
        return spec, 0.0
    if spec is None or isinstance(spec, dict):
        fm = _default_factor_model(verbose, history.shape[1], spec)
    elif hasattr(spec, "fit") and hasattr(spec, "get_params"):
        fm = clone(spec)
    else:
        raise TypeError("factor_model must be None, a dict of LogisticFactorModel parameters or an "
                        f"estimator, got {type(spec).__name__}.")
    start = time.perf_counter()
    fm.fit(history)
    return fm, time.perf_counter() - start


def oracle_predictor(predictor, outcomes):
    """The ceiling's predictor of a new model (a list for 2-D ``outcomes``): a shallow copy of ``predictor`` whose prior
    is the point mass at ``transform`` of all its answers, so no answer moves the predictions (docs/results.md).
    """
    fitted = getattr(predictor, "best_estimator_", predictor)
    z = np.asarray(outcomes, dtype=float)
    if z.ndim not in (1, 2) or np.isnan(z).any():
        raise ValueError("oracle_predictor needs all of the new model's outcomes (no NaN), one row per model.")
    oracles = []
    for u in np.asarray(fitted.transform(z.reshape(-1, z.shape[-1])), dtype=float):
        oracle = copy.copy(fitted)
        oracle.prior_mean_, oracle.prior_cov_ = u, np.zeros((u.size, u.size))
        oracles.append(oracle)
    return oracles[0] if z.ndim == 1 else oracles


@dataclass(frozen=True)
class OraclePredictors:
    """One :func:`oracle_predictor` per new model (in model order), for a ceiling method."""

    predictors: list


def prepare_methods(methods, sizes, history, fitted, others, alpha, random_state, tuning, step_weights, verbose,
                    predict_every=1):
    """``({(method, budget): (predictor, sampler, step weights or None)}, tuning, step_weights, configurations)``:
    every method's predictor, sampler and increment weights, tuned and learned on the history; the other
    arguments as :func:`~faqstats.experiments.run_methods`' (``others``: the fitted predictors by kind).
    """
    # "-equal" methods: the plain mean of the increments, not the default's finite-population weights
    specs = {(m, int(b)): (*build_method(m, fitted, others),
                           np.ones(int(b)) if method_spec(m).weights == "equal" else None)
             for m in methods for b in sizes}
    for m in methods:  # the field (field.py): fitted on the history once, shared by every budget
        if isinstance(specs[(m, int(sizes[0]))][1], FieldMethod):
            field_method = specs[(m, int(sizes[0]))][1].fit(history)
            specs.update({(m, int(b)): (None, field_method, None) for b in sizes})
    unfitted = clone(fitted) if fitted is not None else _default_factor_model(False, history.shape[1])
    tuning_results, weight_results, configurations, cross_fm, cross = {}, {}, {}, None, {}
    weight_cfg = dict(step_weights or {})
    weight_cfg.setdefault("predict_every", predict_every)
    largest_first = sorted((int(b) for b in sizes), reverse=True)  # whose validation runs serve the smaller ones
    if "auto" in methods:
        cache = {}
        for b in largest_first:
            configurations[b] = configure_from_history(history, b, random_state=random_state, cache=cache,
                                                       verbose=verbose, **weight_cfg)
        configurations = {int(b): configurations[int(b)] for b in sizes}
        for b, cfg in configurations.items():
            est = cfg.estimator
            specs[("auto", b)] = (est.factor_model, est.sampler, est.step_weights)
    if "faq-tuned" in methods:
        from .tuning import tune_policy

        for b in sizes:  # one split and one refit, shared by every budget
            res = tune_policy(history, unfitted, budget=int(b), alpha=alpha, random_state=random_state,
                              fitted_factor_model=cross_fm, verbose=verbose, **(tuning or {}))
            tuning_results[int(b)] = res
            specs[("faq-tuned", int(b))] = (fitted, res.sampler(), None)
            cross_fm = res.factor_model
    weighted = [m for m in methods if method_spec(m).weights == "learned"]
    if weighted:
        split = weight_cfg.get("validation_fraction", 0.25)
        if cross_fm is None or split != (tuning or {}).get("validation_fraction", 0.25):
            try:  # one refit on the training part of the history, shared by every budget
                train, _ = validation_split(history, split, random_state)
                if any(predictor_kind(m) is None for m in weighted):
                    cross_fm = clone(unfitted).fit(train)
                kinds = {predictor_kind(m) for m in weighted} - {None}
                cross = {kind: clone(others[kind]).fit(train) for kind in kinds}
            except ValueError as exc:  # too few complete rows to cross-fit
                warnings.warn(f"{', '.join(weighted)}: the default increment weights ({exc})", RuntimeWarning,
                              stacklevel=3)
                weighted = []
    cache = {}
    for m in weighted:
        learned = {}
        for b in largest_first:
            fm_m, sampler_m, _ = specs[(m, b)]
            sw = learn_step_weights(history, None, budget=b, sampler=sampler_m, random_state=random_state,
                                    fitted_factor_model=cross.get(predictor_kind(m), cross_fm), cache=cache,
                                    **weight_cfg)
            specs[(m, b)] = (fm_m, sampler_m, sw.weights)
            learned[b] = sw
        weight_results.update({(m, int(b)): learned[int(b)] for b in sizes})
    return specs, tuning_results, weight_results, configurations
