"""The experiments' named methods: one table of specs (sampler, predictor, increment weights), method names with
sampler parameters (``"aipw-min:tau=0.05"``), the predictors they take, and what they learn from the history before
the sweep: the factor model, each (method, budget)'s sampler (a policy tuned on validation models of the history,
docs/results.md) and increment weights, and the ceilings' oracle predictors."""

import contextlib
import copy
import itertools
import numbers
import time
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
from sklearn.base import clone

from .._progress import progress_bar
from .._validation import check_alpha, check_history, check_scalar, check_seed
from ..batched import simulate
from ..configure import configure_from_history
from ..factor_model import LogisticFactorModel
from ..predictor import predictor_class
from ..sampling import ActiveLearningSampler, BernoulliAIPW, HybridSampler, NeymanSampler, UniformSampler
from ..step_weights import learn_step_weights, validation_split
from .field import FieldMethod, IRTFisher, ModelBased, ProEvalBQ, TinyBenchmarks

__all__ = ["MethodSpec", "METHODS", "CEILING_METHODS", "PREDICTORS", "parse_method", "method_spec",
           "build_method", "predictor_kind", "check_methods", "NEWTON_MIN_QUESTIONS", "PAPER_GRID", "TuningResult",
           "fit_factor_model", "oracle_predictor", "OraclePredictors", "prepare_methods", "tune_policy"]


@dataclass(frozen=True)
class MethodSpec:
    """A named method: its sampler's maker, its predictor (``"factor"``, a kind of :data:`PREDICTORS` or None), its
    increments' weights (``"default"``, ``"learned"``, ``"equal"``) and whether it is an oracle ceiling.
    """

    name: str
    make_sampler: Callable
    predictor: str | None = "factor"
    weights: str = "default"
    ceiling: bool = False

    def __call__(self, predictor):
        """``(predictor or None, a new sampler)``: the predictor when the method takes one."""
        return (predictor if self.predictor else None), self.make_sampler()


METHODS = {spec.name: spec for spec in (
    MethodSpec("faq", HybridSampler, weights="learned"),
    MethodSpec("faq-equal", HybridSampler, weights="equal"),  # the same policy, the plain mean of increments
    MethodSpec("faq-paper", lambda: HybridSampler(tau=0.05, replace=True)),  # the seed paper's policy
    MethodSpec("neyman", NeymanSampler),
    MethodSpec("active", ActiveLearningSampler),
    MethodSpec("uniform-fpc", lambda: UniformSampler(replace=False), predictor=None),  # sample mean with FPC
    MethodSpec("ht-uniform", lambda: BernoulliAIPW(score="uniform"), predictor=None),  # the paper's baseline
    MethodSpec("aipw-neyman", lambda: BernoulliAIPW(score="neyman")),
    MethodSpec("aipw-min", lambda: BernoulliAIPW(score="min")),
    # fallbacks: run_methods swaps in the sampler tuned on the history (tune_policy) or configure_from_history's
    MethodSpec("faq-tuned", HybridSampler, weights="learned"),
    MethodSpec("gp", HybridSampler, predictor="gp", weights="learned"),  # the Gaussian-process surrogate
    MethodSpec("gp-equal", HybridSampler, predictor="gp", weights="equal"),
    MethodSpec("irt", HybridSampler, predictor="irt", weights="learned"),  # a 2PL item response model
    MethodSpec("irt-equal", HybridSampler, predictor="irt", weights="equal"),
    MethodSpec("stack", HybridSampler, predictor="stack", weights="learned"),  # surrogate + history mixtures
    MethodSpec("stack-equal", HybridSampler, predictor="stack", weights="equal"),
    MethodSpec("auto", lambda: UniformSampler(replace=False), predictor=None),
    # the unguaranteed field (field.py): their own estimators, fitted on the history, no PAI
    MethodSpec("proeval", ProEvalBQ, predictor=None),  # ProEval's Bayesian quadrature (extra "field")
    MethodSpec("irt-fisher", IRTFisher, predictor=None),  # IRT adaptive test, max Fisher information
    MethodSpec("tinybench", TinyBenchmarks, predictor=None),  # tinyBenchmarks' gp-IRT on anchors, no interval
    # answers asked + predictions for the rest, its interval calibrated on held-out history models
    MethodSpec("model-based", ModelBased, predictor=None),
    # diagnostics, not estimators one can run: the predictions given all of the new model's answers (issue 16)
    MethodSpec("ceiling", lambda: NeymanSampler(tau=0.5, replace=True), ceiling=True),
    MethodSpec("ceiling-gp", lambda: NeymanSampler(tau=0.5, replace=True), predictor="gp", ceiling=True),
)}
"""Named methods (docs/results.md): ``name -> MethodSpec``, ``spec(factor_model) -> (factor_model or None, sampler)``.

Examples
--------
>>> METHODS["faq-paper"]("a fitted factor model")
('a fitted factor model', HybridSampler(replace=True, tau=0.05))
"""

#: Oracle diagnostics: each new model's factor fixed at its fit to all its answers.
CEILING_METHODS = tuple(name for name, spec in METHODS.items() if spec.ceiling)

#: The predictors other than the factor model, unfitted: ``kind -> callable(random_state)``.
PREDICTORS = {"gp": lambda seed: predictor_class("GaussianProcessSurrogate")(random_state=seed),
              "irt": lambda seed: predictor_class("ItemResponseModel")(),
              "stack": lambda seed: predictor_class("StackedPredictor")(random_state=seed)}


def parse_method(name):
    """``"base:key=value,..."`` -> ``(base, {key: value})``, values read as bool, int, float or string."""
    base, _, rest = str(name).partition(":")
    params = {}
    for item in filter(None, rest.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"method {name!r}: parameters must be written key=value, got {item!r}.")
        params[key.strip()] = _parse_value(value.strip())
    return base, params


def _parse_value(text):
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for kind in (int, float):
        with contextlib.suppress(ValueError):
            return kind(text)
    return text


def build_method(name, fitted, others=None):
    """``(predictor or None, sampler)`` of a possibly parametrised method name (``others``: predictors by kind)."""
    base, params = parse_method(name)
    spec = METHODS[base]
    fm, sampler = spec(fitted if spec.predictor == "factor" else (others or {}).get(spec.predictor))
    if params:
        try:
            sampler.set_params(**params)
            sampler.check_params()
        except (ValueError, TypeError) as exc:
            raise ValueError(f"method {name!r}: {exc}") from exc
    return fm, sampler


def method_spec(name):
    """The :class:`MethodSpec` of a possibly parametrised method name."""
    return METHODS[parse_method(name)[0]]


def predictor_kind(name):
    """The kind in :data:`PREDICTORS` of a method's predictor (``None``: the factor model or none)."""
    kind = method_spec(name).predictor
    return kind if kind in PREDICTORS else None


def check_methods(methods):
    """The method names as a list, checked: known, sampler parameters valid, no repeats."""
    methods = [methods] if isinstance(methods, str) else list(methods)
    if not methods:
        raise ValueError("methods must name at least one method.")
    unknown = [m for m in methods if parse_method(m)[0] not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; choose from {sorted(METHODS)} "
                         "(optionally with sampler parameters, e.g. 'aipw-min:tau=0.05').")
    for m in methods:
        build_method(m, None)  # sampler parameters checked now, not in a worker
    if len(set(methods)) != len(methods):
        raise ValueError(f"methods must not repeat names, got {methods}.")
    return methods


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
    """``({(method, budget): (predictor, sampler, step weights or None)}, tuning, step_weights, configurations)``,
    tuned and learned on the history; arguments as in :func:`~faqstats.experiments.run_methods` (``others``: the
    fitted predictors by kind).
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


PAPER_GRID = {"beta0": (0.5, 1.0), "rho": (0.0, 0.5), "gamma": (0.0, 0.5), "tau": (0.05, 0.25, 0.5)}
"""The seed paper's grid over the hybrid policy's parameters, plus tau 0.5: :func:`tune_policy`'s default.

Examples
--------
>>> PAPER_GRID["tau"]
(0.05, 0.25, 0.5)
"""


@dataclass(frozen=True)
class TuningResult:
    """What :func:`tune_policy` returns.

    Attributes
    ----------
    best_params : dict
        The winner's values of the grid's parameters.
    table : pandas.DataFrame
        One row per grid point: its parameters, n_runs, coverage, mean width, RMSE, ``qualifies``.
    factor_model : fitted estimator
        The factor model fitted on the training part of the history.
    n_validation, seconds : int, float
        The number of validation models and the tuning's duration.
    template : Sampler
        The sampler whose parameters were tuned (unchanged).

    Examples
    --------
    >>> TuningResult({"tau": 0.25}, pd.DataFrame(), None, 15, 0.0).sampler()
    HybridSampler(tau=0.25)
    """

    best_params: dict
    table: pd.DataFrame
    factor_model: object
    n_validation: int
    seconds: float
    template: object = None

    def sampler(self):
        """The tuned sampler: an unfitted clone of the template with :attr:`best_params`.

        Returns
        -------
        Sampler
        """
        return clone(self.template if self.template is not None else HybridSampler()).set_params(**self.best_params)


def tune_policy(history, factor_model, *, budget, sampler=None, grid=None, validation_fraction=0.25, seeds=3,
                alpha=0.05, guard=0.01, random_state=None, fitted_factor_model=None, verbose=False):
    """Choose a sampler's parameters on validation models from the history: the narrowest mean interval among
    the grid points with validation coverage at least ``1 - alpha - guard`` wins, else the best-covering point.

    Parameters
    ----------
    history : array-like of shape (n_models, N)
        The history (NaN = not observed); its complete rows supply the validation models.
    factor_model : unfitted estimator
        Cloned and fitted on the training part.
    budget : int
        Queries per validation run.
    sampler : Sampler or None, default=None
        The policy to tune; ``None`` is ``HybridSampler()``.
    grid : dict of sequences or None
        Values of the sampler's parameters to cross; ``None`` is :data:`PAPER_GRID`.
    validation_fraction : float in (0, 1)
        Fraction of the complete history rows held out as validation models.
    seeds : int
        Runs per validation model and grid point.
    alpha, guard : float
        Intervals at level ``1 - alpha``; the coverage guard is ``1 - alpha - guard``.
    random_state : int or None, default=None
        Seeds the split (as :func:`~faqstats.learn_step_weights`') and the runs.
    fitted_factor_model : fitted estimator or None
        Already fitted on this split's training part: no refit.
    verbose : bool, default=False
        A progress bar.

    Returns
    -------
    TuningResult

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=120, n_questions=80, n_components=2, random_state=0)
    >>> fm = fq.LogisticFactorModel(n_components=2, max_iter=100, random_state=0)
    >>> res = tune_policy(bank.history, fm, budget=10, grid={"tau": (0.25, 0.5)}, seeds=2)
    >>> sorted(res.best_params), type(res.sampler()).__name__
    (['tau'], 'HybridSampler')
    """
    start = time.perf_counter()
    random_state = check_seed(random_state)
    H = check_history(history, name="history")
    check_scalar(validation_fraction, "validation_fraction", low=0.0, high=1.0, closed="neither")
    check_scalar(seeds, "seeds", kind=numbers.Integral, low=1)
    check_scalar(budget, "budget", kind=numbers.Integral, low=2)
    alpha = check_alpha(alpha)
    check_scalar(guard, "guard", low=0.0, high=1.0)
    template = HybridSampler() if sampler is None else sampler
    grid = dict(PAPER_GRID if grid is None else grid)
    unknown = set(grid) - set(template.get_params())
    if unknown:
        raise ValueError(f"grid keys must be parameters of {type(template).__name__} "
                         f"({sorted(template.get_params())}); got {sorted(unknown)}.")
    points = [dict(zip(grid, values)) for values in itertools.product(*grid.values())]
    for params in points:  # every point checked before any run
        clone(template).set_params(**params).check_params()
    train, Z = validation_split(H, validation_fraction, random_state)
    fm = fitted_factor_model if fitted_factor_model is not None else clone(factor_model).fit(train)
    truth = np.repeat(Z.mean(axis=1), seeds)
    model_rows = np.repeat(np.arange(Z.shape[0]), seeds)
    rows = []
    bar = progress_bar(len(points), "tuning", verbose, unit="point")
    for params in points:
        gens = [np.random.default_rng([random_state, 3, int(budget), r]) for r in range(model_rows.size)]
        runs = simulate(Z, gens, predictor=fm, sampler=clone(template).set_params(**params), budget=int(budget),
                        rows=model_rows, alpha=alpha)
        covered = (runs.low <= truth) & (truth <= runs.high)
        rows.append(params | {"n_runs": covered.size, "coverage": covered.mean(),
                              "mean_width": np.mean(runs.high - runs.low),
                              "rmse": np.sqrt(np.mean((runs.estimate - truth) ** 2))})
        bar.update(1)
    bar.close()
    table = pd.DataFrame(rows)
    table["qualifies"] = table["coverage"] >= 1 - alpha - guard
    ok = table[table["qualifies"]]
    best = ok["mean_width"].idxmin() if len(ok) else table["coverage"].idxmax()
    return TuningResult(points[best], table, fm, Z.shape[0], time.perf_counter() - start, template)

