"""The experiments' named methods: one table of specs (sampler, predictor, increment weights),
method names with sampler parameters (``"aipw-min:tau=0.05"``), and the predictors they take."""

import contextlib
from dataclasses import dataclass
from typing import Callable

from ..predictor import predictor_class
from ..sampling import ActiveLearningSampler, BernoulliAIPW, HybridSampler, NeymanSampler, UniformSampler
from .field import IRTFisher, ModelBased, ProEvalBQ, TinyBenchmarks

__all__ = ["MethodSpec", "METHODS", "CEILING_METHODS", "PREDICTORS", "parse_method", "method_spec",
           "build_method", "predictor_kind", "check_methods"]


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
    # fallbacks: run_methods swaps in the sampler tuned on the history (fitting.py) or configure_from_history's
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
