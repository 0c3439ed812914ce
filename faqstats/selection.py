"""The choice of a configuration from the history: candidate predictors and policies validated on held-out history
models against the sample mean (the user guide's Results page, "self-configuration"). :func:`select_configuration`
gives the chosen estimator's parameters; :func:`~faqstats.configure_from_history` and
:meth:`PAIEstimator.from_history <faqstats.PAIEstimator.from_history>` build the estimator."""

import math
import numbers
import time
import warnings
from typing import NamedTuple

import numpy as np
import pandas as pd
from sklearn.base import clone

from ._progress import progress_bar
from ._validation import check_history, check_scalar, check_seed
from .predictor import predictor_class
from .sampling import HybridSampler, Sampler, UniformSampler
from .step_weights import default_runs, learn_step_weights, validation_split

__all__ = ["Selection", "default_candidates", "default_policies", "default_predict_every", "select_configuration"]

PREDICT_EVERY_QUESTIONS = 2048


def default_predict_every(n_questions):
    """The ``predict_every`` chosen for a bank of ``n_questions``: every answer up to 4,095 questions,
    then every ``N // 2048``-th (its cost in efficiency: docs/performance.md, "Scale targets")."""
    return max(1, int(n_questions) // PREDICT_EVERY_QUESTIONS)


#: relative validation gain in ESS another policy needs over the default's (same predictor) to be chosen
POLICY_MARGIN = 0.03
#: histories with fewer models than this also try a shrunk surrogate (:func:`default_candidates`)
THIN_HISTORY = 100
#: with ``n_runs=None``: a first round with this share of the runs, then the full runs for at most
#: :data:`SCREEN_FINALISTS` (the best and those not clearly worse)
SCREEN_SHARE = 0.25
SCREEN_FINALISTS = 2
#: with ``n_runs=None``, at most this many full runs (beyond it the validation models set the error)
MAX_SELECTION_RUNS = 1000
#: budgets of at least this many queries get at most :data:`LARGE_BUDGET_RUNS` full runs
#: (docs/performance.md, "What the shortcuts cost in efficiency")
LARGE_BUDGET = 1000
LARGE_BUDGET_RUNS = 100
#: at most this many validation models; larger histories are validated on a seeded subsample
MAX_VALIDATION_MODELS = 250
MAX_HISTORY_MODELS = 2000
#: histories of at most this many cells run on one thread (a second only adds spin-waits)
ONE_THREAD_MAX_CELLS = 2_000_000
#: the stack is tried while history models x questions is at most this (its step is O(models x N))
STACK_MAX_CELLS = 2_500_000


def default_candidates(n_models, random_state=0, n_questions=None):
    """``{name: unfitted predictor}`` tried by default, in validation order: ``"factor"`` (rank at most 16) and
    ``"gp"``; with at least :data:`THIN_HISTORY` models also ``"gp-16"``, ``"gp-64"`` and ``"stack"`` (up to
    :data:`STACK_MAX_CELLS` cells, when ``n_questions`` is given), with fewer ``"gp-shrink-0.5"`` and ``"-0.8"``."""
    # the built-in predictors, by their registered names (faqstats.predictor)
    factor, gp, stack = (predictor_class(name) for name in ("LogisticFactorModel", "GaussianProcessSurrogate",
                                                            "StackedPredictor"))
    rank = int(max(1, min(16, n_models - 1)))
    candidates = {"factor": factor(n_components=rank, solver="newton", regularization=3.0, tol=1e-3, max_iter=10,
                                   random_state=random_state),
                  "gp": gp(random_state=random_state)}
    if n_models >= THIN_HISTORY:
        for k in (16, 64):
            candidates[f"gp-{k}"] = gp(n_components=k, random_state=random_state)
        if n_questions is None or n_models * n_questions <= STACK_MAX_CELLS:
            candidates["stack"] = stack(random_state=random_state)
    else:  # a few models: the rank is capped by them; trust their correlations less instead
        for shrinkage in (0.5, 0.8):
            candidates[f"gp-shrink-{shrinkage}"] = gp(shrinkage=shrinkage, random_state=random_state)
    return candidates


def default_policies():
    """``{name: unfitted Sampler}`` tried by default, the first (every predictor's) the package default."""
    return {"hybrid": HybridSampler(), "tau-0.25": HybridSampler(tau=0.25), "tau-1": HybridSampler(tau=1.0)}


class Selection(NamedTuple):
    """The chosen estimator's ``params`` and the :class:`~faqstats.configure.Configuration` fields after it."""

    params: dict
    choice: str
    table: pd.DataFrame
    budget: int
    n_validation: int
    n_runs: int
    seconds: float
    predict_every: int


def _sample_mean(budget):
    """The FPC sample mean's parameters."""
    return {"predictor": None, "sampler": UniformSampler(replace=False), "budget": budget}


def _cached_fit(cache, key, candidate, data):
    if key not in cache:
        cache[key] = clone(candidate).fit(data)
    return cache[key]


def select_configuration(history, budget, *, candidates=None, policies=None, validation_fraction=0.25, n_runs=None,
                         predict_every="auto", random_state=0, verbose=True, cache=None):
    """:func:`~faqstats.configure_from_history`'s choice as a :class:`Selection` (the estimator's parameters)."""
    from threadpoolctl import threadpool_limits

    from ._torch_backend import intra_op_threads

    start = time.perf_counter()
    H = check_history(history, name="history")
    one = 1 if H.size <= ONE_THREAD_MAX_CELLS else None
    with threadpool_limits(limits=one), intra_op_threads(one):
        return _select(H, budget, candidates, policies, validation_fraction, n_runs, predict_every, random_state,
                       verbose, cache, start)


def _select(H, budget, candidates, policies, validation_fraction, n_runs, predict_every, random_state, verbose, cache,
            start):
    random_state = check_seed(random_state)
    budget = int(check_scalar(budget, "budget", kind=numbers.Integral, low=3, high=H.shape[1]))
    if predict_every == "auto":
        predict_every = default_predict_every(H.shape[1])
    predict_every = int(check_scalar(predict_every, "predict_every", kind=numbers.Integral, low=1))
    if candidates is None:
        candidates = default_candidates(H.shape[0], random_state, H.shape[1])
    if not candidates:
        raise ValueError("candidates must name at least one predictor.")
    for name, candidate in candidates.items():
        if not (callable(getattr(candidate, "fit", None)) and callable(getattr(candidate, "posterior", None))):
            raise TypeError(f"candidates must be predictors (faqstats.Predictor: fit and posterior); {name!r} is "
                            f"{type(candidate).__name__}.")
    policies = default_policies() if policies is None else dict(policies)
    if not policies:
        raise ValueError("policies must name at least one sampler.")
    for name, policy in policies.items():
        if not isinstance(policy, Sampler) or policy.design == "stream":
            raise ValueError(f"policies must be sequential faqstats Samplers; {name!r} is {type(policy).__name__}.")
        policy.check_params()
    columns = ["candidate", "predictor", "policy", "predicted_ess", "variance_ratio", "runs", "fit_seconds",
               "validation_seconds"]
    V = H
    if H.shape[0] > MAX_HISTORY_MODELS:  # validated on a seeded subsample of the models; refitted on them all
        V = H[np.sort(np.random.default_rng([random_state, 5]).choice(H.shape[0], MAX_HISTORY_MODELS, replace=False))]
    try:
        train, Z = validation_split(V, validation_fraction, random_state, max_validation=MAX_VALIDATION_MODELS)
    except ValueError as exc:  # too few complete rows to validate anything on: the safe choice
        warnings.warn(f"configure_from_history: the sample mean, since no predictor can be validated ({exc})",
                      RuntimeWarning, stacklevel=3)
        seconds = time.perf_counter() - start
        return Selection(_sample_mean(budget), "sample-mean", pd.DataFrame(columns=columns), budget,
                             0, 0, seconds, predict_every)
    var_fpc = float(np.mean((1.0 - budget / Z.shape[1]) * Z.var(axis=1, ddof=1) / budget))  # the FPC sample mean's
    cache = {} if cache is None else cache
    default_policy = next(iter(policies))
    full_runs = min(default_runs(Z.shape[1], budget), MAX_SELECTION_RUNS,
                    LARGE_BUDGET_RUNS if budget >= LARGE_BUDGET else MAX_SELECTION_RUNS) if n_runs is None else n_runs
    check_scalar(full_runs, "n_runs", kind=numbers.Integral, low=1)
    n_val = Z.shape[0]
    # n_runs=None: a first round with a share of the runs, then the full runs for those not clearly worse
    screen_runs = max(1, int(round(SCREEN_SHARE * full_runs)))
    screening = n_runs is None and math.ceil(screen_runs / n_val) < math.ceil(full_runs / n_val)
    rows, results = {}, {}  # by label: the table's row, and (StepWeights, variance per validation model)
    bar = progress_bar(len(candidates) + (len(policies) - 1) * (1 + screening) + screening * SCREEN_FINALISTS,
                       "configuring", verbose, unit="validation", delay=2)

    def validate(name, model, policy, runs, fit_seconds):
        t1 = time.perf_counter()
        bar.set_postfix_str(f"{name}/{policy}, {runs} runs", refresh=False)
        sw = learn_step_weights(V, None, budget=budget, sampler=policies[policy],
                                validation_fraction=validation_fraction, n_runs=runs, random_state=random_state,
                                fitted_factor_model=model, predict_every=predict_every, cache=cache,
                                max_validation=MAX_VALIDATION_MODELS)
        lam = sw.weights / sw.weights.sum()
        per_model = sw.model_errors @ lam**2  # the martingale's variance: increments are uncorrelated
        var = float(per_model.mean())
        label = name if policy == default_policy else f"{name}/{policy}"
        rows[label] = {"candidate": label, "predictor": name, "policy": policy,
                       "predicted_ess": var_fpc / var if var > 0 else np.inf, "variance_ratio": sw.variance_ratio,
                       "runs": sw.n_runs, "fit_seconds": fit_seconds, "validation_seconds": time.perf_counter() - t1}
        results[label] = (sw, per_model)
        bar.update(1)
        return label

    def not_clearly_worse(label, than, margin=0.0):
        """Whether ``label``'s validation variance is within two paired standard errors of ``than``'s / (1 + margin)."""
        a, b = results[label][1], results[than][1]
        if not (a.mean() > 0 and b.mean() > 0):
            return True
        d = a / a.mean() - b / b.mean()  # delta method for log(var_a / var_b)
        se = float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else np.inf
        return np.log(a.mean() / b.mean()) <= 2.0 * se - np.log1p(margin)

    models, fits = {}, {}
    for name, candidate in candidates.items():  # every predictor with the default policy
        t0 = time.perf_counter()
        model = _cached_fit(cache, ("train", name), candidate, train)
        same = next((other for other, m in models.items() if _same_fit(m, model)), None)
        models[name], fits[name] = model, time.perf_counter() - t0
        if same is not None:  # e.g. a rank the history cannot support: nothing new to validate
            bar.update(1)
            continue
        validate(name, model, default_policy, screen_runs if screening else full_runs, fits[name])
    first = list(rows)
    if screening:  # the full runs for the best and those not clearly worse
        lead = max(first, key=lambda k: rows[k]["predicted_ess"])
        close = sorted((k for k in first if k == lead or not_clearly_worse(k, lead)),
                       key=lambda k: -rows[k]["predicted_ess"])[:SCREEN_FINALISTS]
        screened = {k: results[k] for k in close}
        for k in close:
            validate(k, models[k], default_policy, full_runs, fits[k])
        bar.total -= SCREEN_FINALISTS - len(close)
    else:
        screened = {}
        bar.total -= SCREEN_FINALISTS * screening
    best = max((k for k in first if rows[k]["runs"] == max(rows[j]["runs"] for j in first)),
               key=lambda k: rows[k]["predicted_ess"])
    for policy in list(policies)[1:]:  # the other policies with the best predictor
        if screening and best in screened:  # promoted unless clearly short of the margin the choice asks
            results[f"{best}:screen"] = screened[best]
            label = validate(best, models[best], policy, screen_runs, 0.0)
            if not not_clearly_worse(label, f"{best}:screen", POLICY_MARGIN):
                bar.total -= 1
                continue
        validate(best, models[best], policy, full_runs, 0.0)
    bar.close()
    rows = list(rows.values())
    table = pd.DataFrame(rows, columns=columns)
    # another policy must beat the default with the same predictor by POLICY_MARGIN: a smaller tau
    # makes heavier-tailed increments (the t interval's coverage at small budgets), and the best of
    # several noisy validation figures is optimistic
    base = table.loc[(table["predictor"] == best) & (table["policy"] == default_policy), "predicted_ess"].iloc[0]
    eligible = (table["policy"] == default_policy) | (table["predicted_ess"] > (1.0 + POLICY_MARGIN) * base)
    eligible &= table["runs"] == table["runs"].max()  # not left at the first round
    top = table.loc[table["predicted_ess"].where(eligible).idxmax()]
    sw = results[top["candidate"]][0]
    if top["predicted_ess"] > 1.0:
        choice = str(top["candidate"])
        model = _cached_fit(cache, ("whole", top["predictor"]), candidates[top["predictor"]], H)
        params = {"predictor": model, "sampler": clone(policies[top["policy"]]), "budget": budget,
                  "step_weights": sw.weights, "predict_every": predict_every}
    else:
        choice, params = "sample-mean", _sample_mean(budget)
    seconds = time.perf_counter() - start
    return Selection(params, choice, table, budget, sw.n_validation, sw.n_runs, seconds,
                         predict_every)


def _same_fit(a, b):
    """Whether two fitted predictors are the same (e.g. two surrogate ranks both capped by a thin history)."""
    if type(a) is not type(b) or getattr(a, "question_factors_", None) is None:
        return False  # predictors without the low-rank form (a stack, a mixture) are never merged
    names = ("question_factors_", "question_means_", "noise_", "prior_mean_", "prior_cov_")
    return all(np.array_equal(getattr(a, n, None), getattr(b, n, None)) for n in names)
