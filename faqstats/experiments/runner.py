"""Experiments on a response matrix: split, sweep, tidy records, summaries, CSV; no statistics of
their own (docs/architecture.md, 'Experiments').

Reproducibility: run (method, budget, model, seed) draws from
``np.random.default_rng([random_state, method_key(method), budget, model, seed])``
(``budget`` in queries), so its numbers do not depend on ``n_jobs``, the joblib backend,
nor the other methods and budgets run alongside it. Chunks of (method, budget, seed) go
through :class:`joblib.Parallel` (``backend=`` or an enclosing ``joblib.parallel_config``).
"""

from __future__ import annotations

import contextlib
import inspect
import numbers
import time
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.base import clone

from .._progress import progress_bar
from .._validation import check_history, check_scalar
from ..batched import simulate, supports
from ..estimator import PAIEstimator
from ..factor_model import LogisticFactorModel
from ..results import markdown_table, table_summary
from ..sampling import ActiveLearningSampler, BernoulliAIPW, HybridSampler, NeymanSampler, Sampler, UniformSampler
from ..step_weights import learn_step_weights, validation_split
from ..irt import ItemResponseModel
from ..stacking import StackedPredictor
from ..surrogate import GaussianProcessSurrogate
from ..configure import configure_from_history, default_predict_every
from .field import FieldMethod, IRTFisher, ProEvalBQ, TinyBenchmarks

__all__ = [
    "METHODS",
    "DEFAULT_BUDGETS",
    "RECORD_COLUMNS",
    "ExperimentResult",
    "MethodRuns",
    "method_key",
    "parse_method",
    "split_matrix",
    "budget_sizes",
    "run_experiment",
    "run_methods",
    "summarize",
    "summarize_groups",
    "GROUP_RECORD_COLUMNS",
    "per_model_coverage",
    "format_summary",
    "write_csv",
    "read_csv",
    "oracle_predictor",
]

DEFAULT_BUDGETS = tuple(float(f) for f in np.round(np.linspace(0.025, 0.25, 10), 4))
"""Budgets as fractions of the bank: 2.5%, 5%, ..., 25% (:func:`run_experiment`'s default).

Examples
--------
>>> DEFAULT_BUDGETS[:3], len(DEFAULT_BUDGETS)
((0.025, 0.05, 0.075), 10)
>>> budget_sizes(DEFAULT_BUDGETS, 200)[1]  # queries on a bank of 200 questions
array([ 5, 10, 15, 20, 25, 30, 35, 40, 45, 50])
"""


def _method(sampler_factory, uses_fm=True):
    return lambda fm: (fm if uses_fm else None, sampler_factory())


METHODS = {
    "faq": _method(HybridSampler),  # run_methods adds increment weights learned from the history
    "faq-equal": _method(HybridSampler),  # the same policy, equal weights (the plain mean of increments)
    "faq-paper": _method(lambda: HybridSampler(tau=0.05, replace=True)),  # the seed paper's policy
    "neyman": _method(NeymanSampler),
    "active": _method(ActiveLearningSampler),
    "uniform-fpc": _method(lambda: UniformSampler(replace=False), uses_fm=False),  # sample mean with FPC
    "ht-uniform": _method(lambda: BernoulliAIPW(score="uniform"), uses_fm=False),  # the paper's baseline
    "aipw-neyman": _method(lambda: BernoulliAIPW(score="neyman")),
    "aipw-min": _method(lambda: BernoulliAIPW(score="min")),
    # fallbacks: run_methods swaps in the sampler tuned on the history (tuning.py) or configure_from_history's
    "faq-tuned": _method(HybridSampler),
    "gp": _method(HybridSampler),  # the Gaussian-process surrogate's predictions, learned weights as "faq"
    "gp-equal": _method(HybridSampler),
    "irt": _method(HybridSampler),  # a 2PL item response model's predictions (ItemResponseModel), learned weights
    "irt-equal": _method(HybridSampler),
    "stack": _method(HybridSampler),  # StackedPredictor (surrogate + history mixtures), learned weights
    "stack-equal": _method(HybridSampler),
    "auto": _method(lambda: UniformSampler(replace=False), uses_fm=False),
    # the unguaranteed field (field.py): their own estimators, fitted on the history, no PAI
    "proeval": _method(ProEvalBQ, uses_fm=False),  # ProEval's Bayesian quadrature (extra "field")
    "irt-fisher": _method(IRTFisher, uses_fm=False),  # IRT adaptive test, max Fisher information
    "tinybench": _method(TinyBenchmarks, uses_fm=False),  # tinyBenchmarks' gp-IRT on anchors, no interval
    # diagnostics, not estimators one can run: the predictions given all of the new model's answers (issue 16)
    "ceiling": _method(lambda: NeymanSampler(tau=0.5, replace=True)),
    "ceiling-gp": _method(lambda: NeymanSampler(tau=0.5, replace=True)),
}
"""Named methods: ``name -> callable(factor_model) -> (factor_model or None, sampler)``.

A method uses the factor model exactly when its callable returns it. Described in
docs/results.md; :func:`run_methods` takes their names.

Examples
--------
>>> sorted(METHODS)[:4]
['active', 'aipw-min', 'aipw-neyman', 'auto']
>>> METHODS["uniform-fpc"](None)  # no factor model: the sample mean
(None, UniformSampler())
>>> fm, sampler = METHODS["faq-paper"]("a fitted factor model")
>>> fm, sampler
('a fitted factor model', HybridSampler(replace=True, tau=0.05))
"""

#: Methods whose predictor is not the factor model: ``name -> kind`` in :data:`PREDICTORS`.
PREDICTOR_OF = {"gp": "gp", "gp-equal": "gp", "ceiling-gp": "gp", "irt": "irt", "irt-equal": "irt", "stack": "stack",
                "stack-equal": "stack"}

#: The other predictors, unfitted (``kind -> callable(random_state)``), each fitted once on the history.
PREDICTORS = {"gp": lambda seed: GaussianProcessSurrogate(random_state=seed), "irt": lambda seed: ItemResponseModel(),
              "stack": lambda seed: StackedPredictor(random_state=seed)}

#: Methods whose predictor is :class:`~faqstats.GaussianProcessSurrogate()` fitted on the history.
SURROGATE_METHODS = tuple(m for m, kind in PREDICTOR_OF.items() if kind == "gp")

#: Oracle diagnostics: each new model's predictor is the experiment's fitted factor model (or
#: surrogate) with that model's factor fixed at its fit to all its answers (:func:`oracle_predictor`).
CEILING_METHODS = ("ceiling", "ceiling-gp")

#: Methods whose increments are weighted equally (their plain mean).
EQUAL_METHODS = ("faq-equal", "gp-equal", "irt-equal", "stack-equal")

#: Methods whose increments get weights learned from the history (:func:`learn_step_weights`).
WEIGHTED_METHODS = ("faq", "faq-tuned", "gp", "irt", "stack")

#: The columns of the records, one row per (method, budget, model, seed).
RECORD_COLUMNS = ("method", "budget_fraction", "budget", "model", "row", "seed", "truth", "estimate", "std_error",
                  "low", "high", "covered", "n_queries")
#: The columns of :attr:`MethodRuns.group_records` (``groups=``): every group's estimate in every run,
#: its truth, its interval and the simultaneous one (Bonferroni over the groups).
GROUP_RECORD_COLUMNS = ("method", "budget_fraction", "budget", "model", "row", "seed", "group", "n_questions",
                        "n_asked", "truth", "estimate", "std_error", "low", "high", "covered", "simultaneous_low",
                        "simultaneous_high", "simultaneous_covered")
#: The columns of :func:`summarize_groups`' table.
GROUP_SUMMARY_COLUMNS = ("method", "budget_fraction", "budget", "group", "n_questions", "n_runs", "mean_asked",
                         "coverage", "simultaneous_coverage", "joint_simultaneous_coverage", "mean_width", "rmse")
#: The columns of :func:`summarize`'s table and of :func:`per_model_coverage`'s.
SUMMARY_COLUMNS = ("method", "budget_fraction", "budget", "n_runs", "coverage", "coverage_se", "mean_width", "rmse",
                   "mean_variance", "mean_queries", "ess_fpc", "ess_ht", "ceiling_share")
MODEL_COVERAGE_COLUMNS = ("method", "budget_fraction", "budget", "model", "row", "truth", "n_runs", "coverage",
                          "mean_width")


def method_key(name):
    """A stable 32-bit integer for a method name (CRC-32), used in every run's seed.

    >>> method_key("faq") == method_key("faq") != method_key("uniform-fpc")
    True
    """
    return zlib.crc32(str(name).encode("utf-8"))


@dataclass(frozen=True)
class MethodRuns:
    """What :func:`run_methods` returns.

    Attributes
    ----------
    records : pandas.DataFrame
        One row per (method, budget, model, seed), columns :data:`RECORD_COLUMNS`.
    factor_model, fit_seconds : fitted LogisticFactorModel or None, float
        The factor model (``None`` when no method needed one) and the seconds its fit took.
    tuning : dict
        ``{budget (queries): TuningResult}`` when "faq-tuned" ran.
    step_weights : dict
        ``{(method, budget): StepWeights}`` for the methods with learned increment weights.
    surrogate : fitted GaussianProcessSurrogate or None
        The predictor of the :data:`SURROGATE_METHODS`, when one ran.
    configurations : dict
        ``{budget (queries): Configuration}`` when "auto" ran (:func:`faqstats.configure_from_history`).
    group_records : pandas.DataFrame or None
        With ``groups``: one row per (method, budget, model, seed, group), columns
        :data:`GROUP_RECORD_COLUMNS` (:func:`summarize_groups`).

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_new=3, n_components=2, random_state=0)
    >>> runs = run_methods(bank.history, bank.new_outcomes, [8, 16], seeds=2,
    ...                    methods=["uniform-fpc", "ht-uniform"], verbose=False)
    >>> runs.records.shape, runs.factor_model is None  # the two baselines need no factor model
    ((24, 13), True)
    >>> runs.summary()[["method", "budget", "n_runs"]].values.tolist()
    [['uniform-fpc', 8, 6], ['uniform-fpc', 16, 6], ['ht-uniform', 8, 6], ['ht-uniform', 16, 6]]
    """

    records: pd.DataFrame
    factor_model: object
    fit_seconds: float = 0.0
    tuning: dict = field(default_factory=dict)
    step_weights: dict = field(default_factory=dict)
    surrogate: object = None
    configurations: dict = field(default_factory=dict)
    group_records: pd.DataFrame = None

    def summary(self, **kwargs):
        """:func:`summarize` of the records.

        Parameters
        ----------
        **kwargs
            Keyword arguments of :func:`summarize`.

        Returns
        -------
        pandas.DataFrame
            One row per (method, budget).
        """
        return summarize(self.records, **kwargs)


@dataclass(frozen=True, kw_only=True)
class ExperimentResult(MethodRuns):
    """What :func:`run_experiment` returns: the :class:`MethodRuns` and the split.

    Attributes
    ----------
    history_shape, history_observed : tuple of int, float
        Shape and fraction of observed cells of the history after masking.
    new_rows : ndarray of int
        Rows of the input matrix evaluated as new models, in model order.
    budgets : ndarray of float
        The budget fractions actually run (after merging duplicates).
    elapsed : float
        Seconds for the whole experiment (factor fit included).
    config : dict
        The experiment's settings.

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_components=2, random_state=0)
    >>> out = run_experiment(bank.history, budgets=[0.2], seeds=1, methods=["uniform-fpc"], verbose=False)
    >>> out.history_shape, out.new_rows.size, out.budgets.tolist(), out.config["methods"]
    ((45, 40), 15, [0.2], ['uniform-fpc'])
    >>> out.summary()[["method", "budget", "n_runs"]].values.tolist()
    [['uniform-fpc', 8, 15]]
    """

    history_shape: tuple
    history_observed: float
    new_rows: np.ndarray
    budgets: np.ndarray
    elapsed: float
    config: dict = field(default_factory=dict)


# ---------------------------------------------------------------- split and budgets
def split_matrix(matrix, *, history_fraction=0.75, split_seed=0, order=None, complete_rows=False, n_full_obs=None,
                 p_obs=None, max_models=None):
    """Split a response matrix into a history and fully observed new models.

    Only complete rows can be new models (their truth must be known). They are permuted
    with ``np.random.default_rng(split_seed)``, or taken in ``order``; the first
    ``round(history_fraction * n)`` go to the history, the rest are the new models.

    Parameters
    ----------
    matrix : array-like of shape (n_models, n_questions)
        0/1 outcomes, NaN for not observed.
    history_fraction : float in (0, 1)
    split_seed : int
    order : sequence of int or None
        Complete rows in the order to use instead of the seeded permutation (e.g. by release date).
    complete_rows : bool
        Drop incomplete rows; otherwise they join the history.
    n_full_obs : int or None
        History rows (in split order) that ``p_obs`` leaves as they are.
    p_obs : float in (0, 1] or None
        Keep every other history cell with this probability, completely at random (seeded by
        ``[split_seed, 1]``; every row keeps one cell); ``None`` keeps the data's own missingness.
    max_models : int or None
        Keep only the first ``max_models`` new models.

    Returns
    -------
    history : ndarray of shape (n_history, n_questions)
    new : ndarray of shape (n_new, n_questions), no NaN
    new_rows : ndarray of int, rows of ``matrix`` behind ``new``

    Examples
    --------
    >>> import numpy as np
    >>> m = (np.random.default_rng(0).random((10, 6)) < 0.5).astype(float)
    >>> m[0, 0] = np.nan
    >>> h, new, rows = split_matrix(m, history_fraction=0.5, split_seed=0)
    >>> h.shape, new.shape, 0 in rows
    ((5, 6), (5, 6), False)
    """
    H = check_history(matrix, name="matrix")
    check_scalar(history_fraction, "history_fraction", low=0.0, high=1.0, closed="neither")
    complete = np.flatnonzero(~np.isnan(H).any(axis=1))
    incomplete = np.flatnonzero(np.isnan(H).any(axis=1))
    if order is None:
        ordered = complete[np.random.default_rng(split_seed).permutation(complete.size)]
    else:
        ordered = np.asarray(order)
        if ordered.ndim != 1 or not np.issubdtype(ordered.dtype, np.integer):
            raise TypeError("order must be a 1-D sequence of integer row indices.")
        if np.unique(ordered).size != ordered.size:
            raise ValueError("order must not repeat rows.")
        bad = ordered[~np.isin(ordered, complete)]
        if bad.size:
            raise ValueError(f"order must list complete rows only (new models need every outcome); rows "
                             f"{bad[:10].tolist()} are out of range or have missing entries.")
    n_history = int(round(history_fraction * ordered.size))
    if n_history < 2 or n_history >= ordered.size:
        raise ValueError(f"history_fraction={history_fraction} of {ordered.size} complete rows leaves "
                         f"{n_history} history rows and {ordered.size - n_history} new models; "
                         "need at least 2 and 1.")
    history_rows, new_rows = ordered[:n_history], ordered[n_history:]
    if max_models is not None:
        check_scalar(max_models, "max_models", kind=numbers.Integral, low=1)
        new_rows = new_rows[:max_models]
    if not complete_rows:
        history_rows = np.concatenate([history_rows, incomplete])
    history = H[history_rows]
    if p_obs is not None:
        check_scalar(p_obs, "p_obs", low=0.0, high=1.0, closed="right")
        n_full = 0 if n_full_obs is None else check_scalar(n_full_obs, "n_full_obs", kind=numbers.Integral, low=0)
        if n_full > history.shape[0]:
            raise ValueError(f"n_full_obs={n_full} exceeds the {history.shape[0]} history rows.")
        rng = np.random.default_rng([split_seed, 1])
        hide = rng.random(history.shape) >= p_obs
        hide[:n_full] = False
        keep = rng.integers(history.shape[1], size=history.shape[0])  # one cell per row survives
        hide[np.arange(history.shape[0]), keep] = False
        history[hide] = np.nan
        if np.isnan(history).all(axis=1).any():  # a row observed only where the mask kept nothing
            raise ValueError("p_obs leaves some history rows without any observed outcome; raise p_obs.")
    elif n_full_obs is not None:
        raise ValueError("n_full_obs needs p_obs (the MCAR observation rate of the other history rows).")
    return history, H[new_rows], new_rows


def budget_sizes(fractions, n_questions):
    """Budget fractions of the bank -> numbers of queries ``round(f * N)``, at least 2.

    Parameters
    ----------
    fractions : sequence of float in (0, 1]
        Budgets as fractions of the bank.
    n_questions : int
        The bank size ``N``.

    Returns
    -------
    fractions : ndarray of float
        The fractions kept: those mapping to an already used size are dropped with a warning.
    sizes : ndarray of int
        Their numbers of queries.

    Examples
    --------
    >>> budget_sizes([0.05, 0.1, 0.25], 693)
    (array([0.05, 0.1 , 0.25]), array([ 35,  69, 173]))
    """
    fr = np.atleast_1d(np.asarray(fractions, dtype=float))
    if fr.ndim != 1 or fr.size == 0:
        raise ValueError("budgets must be a non-empty sequence of fractions of the bank.")
    bad = fr[~((fr > 0) & (fr <= 1))]
    if bad.size:
        raise ValueError(f"budgets are fractions of the bank and must be in (0, 1]; got {bad.tolist()}.")
    sizes = np.maximum(np.round(fr * n_questions).astype(np.int64), 2)
    _, first = np.unique(sizes, return_index=True)
    first = np.sort(first)
    if first.size < sizes.size:
        dropped = sorted(set(range(sizes.size)) - set(first.tolist()))
        warnings.warn(f"budget fractions {fr[dropped].tolist()} give the same number of queries as an "
                      f"earlier one on a bank of {n_questions} questions; dropped.", UserWarning,
                      stacklevel=2)
    return fr[first], sizes[first]


def _check_methods(methods):
    methods = [methods] if isinstance(methods, str) else list(methods)
    if not methods:
        raise ValueError("methods must name at least one method.")
    unknown = [m for m in methods if parse_method(m)[0] not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; choose from {sorted(METHODS)} "
                         "(optionally with sampler parameters, e.g. 'aipw-min:tau=0.05').")
    for m in methods:
        _method_spec(m, None)  # sampler parameters checked now, not in a worker
    if len(set(methods)) != len(methods):
        raise ValueError(f"methods must not repeat names, got {methods}.")
    return methods


def _check_seeds(seeds):
    if isinstance(seeds, numbers.Integral) and not isinstance(seeds, bool):
        check_scalar(seeds, "seeds", kind=numbers.Integral, low=1)
        return list(range(int(seeds)))
    seeds = [int(s) for s in seeds]
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
        raise ValueError("seeds must be a positive count or a non-empty sequence of distinct non-negative ints.")
    return seeds


def parse_method(name):
    """``"base:key=value,..."`` -> ``(base, {key: value})``: a named method with other sampler parameters.

    Values are read as bool (``true``/``false``), int or float.

    >>> parse_method("aipw-min:tau=0.05,order=natural")
    ('aipw-min', {'tau': 0.05, 'order': 'natural'})
    >>> parse_method("faq")
    ('faq', {})
    """
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
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _method_spec(name, fitted, others=None):
    """``(factor model or None, sampler)`` of a possibly parametrised method name (``others``: the
    fitted predictors of :data:`PREDICTORS` by kind)."""
    base, params = parse_method(name)
    fm, sampler = METHODS[base]((others or {}).get(PREDICTOR_OF[base]) if base in PREDICTOR_OF else fitted)
    if params:
        try:
            sampler.set_params(**params)
            sampler.check_params()
        except (ValueError, TypeError) as exc:
            raise ValueError(f"method {name!r}: {exc}") from exc
    return fm, sampler


def _predictor_kind(name):
    """The kind in :data:`PREDICTORS` of a method's predictor, ``None`` for the factor model."""
    return PREDICTOR_OF.get(parse_method(name)[0])


#: banks of at least this many questions get the alternating Newton solver by default, regularization
#: 3, at most 10 sweeps (AdamW's 2,000 passes over the history cost minutes there;
#: docs/performance.md, "Scale targets (issue 16)")
NEWTON_MIN_QUESTIONS = 20000


def _default_factor_model(verbose, n_questions=0, spec=None):
    """The experiments' factor model: AdamW as in the paper, or on large banks (unless ``spec``
    names the solver, the regularization or the iterations, whose meaning depends on it) the Newton solver."""
    fm = LogisticFactorModel(n_components=16, regularization=0.1, max_iter=2000, random_state=0, verbose=verbose)
    if n_questions >= NEWTON_MIN_QUESTIONS and not {"solver", "regularization", "max_iter"} & set(spec or {}):
        # ten sweeps: as good as converged (41 sweeps) in validation there, a quarter of the time
        fm.set_params(solver="newton", regularization=3.0, tol=1e-3, max_iter=10)
    return fm.set_params(**(spec or {}))


def _fit_factor_model(spec, history, verbose):
    """``(fitted model, seconds)``: fit ``spec`` on the history, or take an already fitted one as is."""
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


# ---------------------------------------------------------------- the sweep
def _run_chunk(name, factor_model, sampler, step_weights, fraction, budget, seeds, new, truths, rows, random_state,
               alpha, engine, groups=None, costs=None, clusters=None):
    """Every new model for one (method, budget) and some seeds: a block of records, seed by seed, and
    the block's group records (None without ``groups``)."""
    if isinstance(sampler, FieldMethod):  # the field (field.py): its own runs, designs shared per seed
        return sampler._records(name, fraction, budget, seeds, new, truths, rows, random_state, alpha), None
    key = method_key(name)
    seeds = [int(s) for s in np.atleast_1d(seeds)]
    n = new.shape[0]
    gens = [np.random.default_rng([random_state, key, int(budget), i, seed]) for seed in seeds for i in range(n)]
    models = np.tile(np.arange(n), len(seeds))
    extra = {"groups": groups, "costs": costs, "clusters": clusters}
    per_group = [None] * len(gens)
    if isinstance(factor_model, _OraclePredictors):  # the ceiling: a predictor of its own per new model
        columns = np.empty((6, len(gens)))
        # its predictions never move: refreshing them would only cost time (same values, same draws)
        fixed = dict(engine, predict_every=int(budget))
        for i in range(n):
            at = np.flatnonzero(models == i)
            columns[:, at], found = _run_columns(factor_model.predictors[i], sampler, step_weights, budget,
                                                 [gens[r] for r in at], models[at], new, alpha, fixed, **extra)
            for r, res in zip(at, found):
                per_group[r] = res
    else:
        columns, per_group = _run_columns(factor_model, sampler, step_weights, budget, gens, models, new, alpha,
                                          engine, **extra)
    estimate, std_error, low, high, n_queries, cost_spent = columns
    truth = np.tile(truths, len(seeds))
    base = {"method": name, "budget_fraction": float(fraction), "budget": int(budget), "model": models,
            "row": np.tile(rows, len(seeds)), "seed": np.repeat(seeds, n)}
    records = pd.DataFrame({
        **base, "truth": truth, "estimate": estimate,
        "std_error": std_error, "low": low, "high": high, "covered": (low <= truth) & (truth <= high),
        "n_queries": np.asarray(n_queries, np.int64),
    }, columns=RECORD_COLUMNS)
    if costs is not None:
        records["cost_spent"] = cost_spent
    return records, None if groups is None else _group_rows(base, per_group, groups, new, models, alpha)


def _group_rows(base, per_group, groups, new, models, alpha):
    """The group records of a block: a row per run and group (:data:`GROUP_RECORD_COLUMNS`)."""
    from ..estimands import encode_groups

    codes, labels = encode_groups(groups, new.shape[1])
    sizes = np.bincount(codes, minlength=labels.size)
    truth = np.stack([np.bincount(codes, weights=new[i], minlength=labels.size) / sizes for i in range(new.shape[0])])
    frames = []
    for r, res in enumerate(per_group):
        both = res.to_frame(alpha=alpha)
        wide = res.conf_int(alpha=alpha, simultaneous=True)
        t = truth[models[r]]
        frames.append(pd.DataFrame({
            **{k: (v[r] if isinstance(v, np.ndarray) else v) for k, v in base.items()},
            "group": labels, "n_questions": sizes, "n_asked": both["n_asked"].to_numpy(), "truth": t,
            "estimate": both["estimate"].to_numpy(), "std_error": both["std_error"].to_numpy(),
            "low": both["lower"].to_numpy(), "high": both["upper"].to_numpy(),
            "covered": (both["lower"].to_numpy() <= t) & (t <= both["upper"].to_numpy()),
            "simultaneous_low": wide["lower"].to_numpy(), "simultaneous_high": wide["upper"].to_numpy(),
            "simultaneous_covered": (wide["lower"].to_numpy() <= t) & (t <= wide["upper"].to_numpy()),
        }, columns=GROUP_RECORD_COLUMNS))
    return pd.concat(frames, ignore_index=True)


def _run_columns(factor_model, sampler, step_weights, budget, gens, models, new, alpha, engine, groups=None,
                 costs=None, clusters=None):
    """``(estimate, std_error, low, high, n_queries, cost_spent)`` of the runs ``gens`` on the rows ``models``
    of ``new``, and each run's :class:`~faqstats.GroupResults` (None without ``groups``). With groups,
    costs or clusters every run is a :class:`~faqstats.PAIEstimator` (the batched engine takes none)."""
    plain = groups is None and costs is None and clusters is None
    if engine["engine"] != "sequential" and supports(sampler) and plain:
        with _torch_threads(engine["threads"]):  # the seeds in lockstep too: one query's fixed cost for all
            runs = simulate(new, gens, factor_model=factor_model, sampler=sampler, budget=int(budget), alpha=alpha,
                            device=engine["device"], dtype=engine["dtype"], step_weights=step_weights,
                            predict_every=engine["predict_every"], rows=models)
        columns = [runs.estimate, runs.std_error, runs.low, runs.high, runs.n_queries, np.full(len(gens), np.nan)]
        return np.array(columns, dtype=float), [None] * len(gens)
    columns = np.empty((6, len(gens)))
    per_group = []
    for r, (i, gen) in enumerate(zip(models, gens)):
        est = PAIEstimator(factor_model, sampler, budget=int(budget), random_state=gen,
                           step_weights=step_weights, predict_every=engine["predict_every"])
        est.fit(new[i], groups=groups, costs=costs, clusters=clusters)
        spent = np.nan if est.cost_spent_ is None else est.cost_spent_
        columns[:, r] = (est.estimate_, est.std_error_, *est.conf_int(alpha=alpha), est.n_queries_, spent)
        per_group.append(est.group_results_)
    return columns, per_group


def oracle_predictor(predictor, outcomes):
    """The ceiling's predictor for one new model: ``predictor`` with the model's factor known.

    The factor (the surrogate's latent) is fixed at ``predictor.transform`` of all the model's
    ``outcomes`` and its covariance at zero, so no answer moves the predictions: they are those
    of the model's own fit, fixed before the first draw, and PAI with them stays exactly
    unbiased. Not an estimator one can run (it reads every answer): the ``ceiling`` methods
    (:data:`CEILING_METHODS`) use it to measure the headroom of a predictor class
    (docs/results.md, "Ceiling and realised share").

    Parameters
    ----------
    predictor : fitted LogisticFactorModel, LogisticFactorModelCV or GaussianProcessSurrogate
        Fitted on the history; it is not modified.
    outcomes : array-like of shape (N,) or (n_models, N)
        The new model's answers to every question, in [0, 1]; or several models' rows (one
        ``transform`` for all: each row is still solved on its own, to the solver's tolerance).

    Returns
    -------
    LogisticFactorModel or GaussianProcessSurrogate, or a list of them
        A shallow copy (sharing the fitted question factors) whose prior is the point mass at
        the model's factor; one per row for 2-D ``outcomes``.

    Examples
    --------
    >>> import numpy as np
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_new=1, n_components=2, random_state=0)
    >>> fm = fq.LogisticFactorModel(n_components=2, max_iter=100, random_state=0).fit(bank.history)
    >>> oracle = oracle_predictor(fm, bank.new_outcomes[0])
    >>> post = oracle.posterior()
    >>> before = post.predictions.copy()
    >>> post.update(0, 1.0 - bank.new_outcomes[0, 0])  # even a surprising answer moves nothing
    >>> bool(np.array_equal(before, post.predictions))
    True
    """
    import copy

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
class _OraclePredictors:
    """One :func:`oracle_predictor` per new model (in model order), for a ceiling method."""

    predictors: list


def _seed_groups(seeds, n_jobs, n_settings):
    """The seeds in consecutive groups: one group, or enough groups for ``n_jobs`` workers to share
    ``n_settings`` (method, budget) pairs evenly."""
    from joblib import effective_n_jobs

    workers = effective_n_jobs(n_jobs) if n_jobs not in (None, 1) else 1
    n_groups = min(len(seeds), max(1, -(-workers // max(n_settings, 1))) if workers > 1 else 1)
    return [list(g) for g in np.array_split(np.asarray(seeds), n_groups)]


@contextlib.contextmanager
def _torch_threads(n):
    """Torch's intra-op threads set to ``n`` meanwhile (``None``: left as is; docs/performance.md)."""
    if n is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _method_settings(methods, sizes, history, fitted, others, alpha, random_state, tuning, step_weights, verbose,
                     predict_every=1):
    """``{(method, budget): (factor model, sampler, step weights)}``, tuning and weights learned on the history."""
    # "-equal" methods: literally equal weights, the plain mean of the increments (not the default's
    # finite-population weights), so that their results stay comparable with earlier runs
    specs = {(m, int(b)): (*_method_spec(m, fitted, others), np.ones(int(b)) if parse_method(m)[0] in EQUAL_METHODS else None)
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
                                                       **weight_cfg)
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
    weighted = [m for m in methods if parse_method(m)[0] in WEIGHTED_METHODS]
    if weighted:
        split = weight_cfg.get("validation_fraction", 0.25)
        if cross_fm is None or split != (tuning or {}).get("validation_fraction", 0.25):
            try:  # one refit on the training part of the history, shared by every budget
                train, _ = validation_split(history, split, random_state)
                if any(_predictor_kind(m) is None for m in weighted):
                    cross_fm = clone(unfitted).fit(train)
                cross = {kind: clone(others[kind]).fit(train) for kind in {_predictor_kind(m) for m in weighted} - {None}}
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
                                    fitted_factor_model=cross.get(_predictor_kind(m), cross_fm), cache=cache,
                                    **weight_cfg)
            specs[(m, b)] = (fm_m, sampler_m, sw.weights)
            learned[b] = sw
        weight_results.update({(m, int(b)): learned[int(b)] for b in sizes})
    return specs, tuning_results, weight_results, configurations


def run_methods(history, new, budgets, *, seeds=3, methods=("faq", "uniform-fpc", "ht-uniform"), factor_model=None,
                budget_fractions=None, new_rows=None, alpha=0.05, random_state=0, n_jobs=None, backend=None,
                engine="auto", device="cpu", dtype="float64", torch_threads="auto", tuning=None, step_weights=None,
                predict_every="auto", groups=None, costs=None, clusters=None, verbose=True):
    """Run methods x budgets x new models x seeds, given a history and the new models apart.

    :func:`run_experiment` splits a matrix and calls this.

    Parameters
    ----------
    history : array-like of shape (n_history, N)
        Earlier models' outcomes (NaN = not observed), the only data fitting and tuning see.
    new : array-like of shape (n_new, N)
        Complete outcomes of the models to evaluate.
    budgets : sequence of int
        Numbers of queries (at least 2, distinct).
    seeds : int or sequence of int, default=3
        Repeats per (method, budget, model): a count (``range(seeds)``) or explicit seeds.
    methods : sequence of str, default=("faq", "uniform-fpc", "ht-uniform")
        Names in :data:`METHODS`; :func:`summarize`'s ESS columns need the baselines among them.
    factor_model : None, dict or estimator
        ``None``: ``LogisticFactorModel(n_components=16, regularization=0.1, max_iter=2000, random_state=0)``;
        a dict overrides some of those; an estimator is cloned and fitted on the history when some
        method needs it, or used as is if already fitted (on this split's history: unchecked).
    budget_fractions : sequence of float or None
        Fractions of the bank the budgets stand for, for the records; ``None`` is ``budgets / N``.
    new_rows : sequence of int or None
        Row labels of the new models for the records; ``None`` is ``0 .. n_new - 1``.
    alpha : float, default=0.05
        Significance level of the intervals.
    random_state : int, default=0
        Root of every run's seed (see the module docstring).
    n_jobs, backend : int, str or None
        Workers and backend of :class:`joblib.Parallel`; ``None`` defers to an enclosing
        ``joblib.parallel_config``. Results do not depend on them.
    engine : {"auto", "batched", "sequential"}, default="auto"
        ``"auto"``/``"batched"``: :func:`faqstats.batched.simulate` where it covers the sampler, else
        one :class:`~faqstats.PAIEstimator` per run; ``"sequential"``: always the estimator (for checks).
    device, dtype : str
        Torch device and precision of the batched engine.
    torch_threads : int, None or "auto", default="auto"
        Torch threads per worker in the batched engine; ``"auto"`` is 1 when ``n_jobs`` is not 1.
    tuning : dict or None
        Keyword arguments of :func:`faqstats.experiments.tuning.tune_policy` for "faq-tuned",
        tuned at every budget on validation models from the history.
    step_weights : dict or None
        Keyword arguments of :func:`faqstats.step_weights.learn_step_weights` for the
        :data:`WEIGHTED_METHODS` (learned per budget by cross-fitting on the history; equal
        weights, with a warning, when it has too few complete rows) and for "auto".
    predict_every : int or "auto", default="auto"
        The predictions' refresh schedule of every run (``PAIEstimator(predict_every=...)``)
        and of the validation runs behind the learned weights; ``"auto"``:
        :func:`faqstats.configure.default_predict_every` of the bank (every answer up to
        4,095 questions).
    groups : array-like of shape (N,) or None, default=None
        A group label per question: every run also estimates every group's accuracy
        (``PAIEstimator.fit(groups=)``), in :attr:`MethodRuns.group_records`
        (:func:`summarize_groups`: per-group and simultaneous coverage). The policy is unchanged.
    costs : array-like of shape (N,) or None, default=None
        A positive cost per question: every run's policy weighs its scores by ``1 / sqrt(cost)``
        (``PAIEstimator.fit(costs=)``), and the records gain a ``cost_spent`` column (the summary
        a ``mean_cost`` one). The budgets stay numbers of queries.
        With ``groups``, ``costs`` or ``clusters`` every run is a :class:`~faqstats.PAIEstimator`
        (slower than the batched engine), and every method must take them: not the nature's-order
        designs (``ht-uniform``, ``aipw-*``) nor the field's methods.
    clusters : array-like of shape (N,) or None, default=None
        A cluster id per question: every run is the cluster design (``PAIEstimator.fit(clusters=)``:
        a draw asks a whole cluster), ``budgets`` count cluster draws (at most the number of
        clusters), ``n_queries`` in the records the questions asked, and ``uniform-fpc`` is the
        cluster sample mean (its ESS baseline). With ``groups`` every cluster must lie in one group
        (``n_asked`` in the group records counts cluster draws). The learned increment weights
        of the :data:`WEIGHTED_METHODS` are learned on question draws (any fixed weights keep the
        estimate unbiased; prefer ``faq-equal`` for a clean comparison).
    verbose : bool, default=True
        Progress bars for the factor fit and the sweep.

    Returns
    -------
    MethodRuns

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_new=3, n_components=2, random_state=0)
    >>> runs = run_methods(bank.history, bank.new_outcomes, [8], seeds=2, methods=["uniform-fpc"], verbose=False)
    >>> runs.records.shape, runs.factor_model is None
    ((6, 13), True)
    """
    from joblib import Parallel, delayed, parallel_config

    if engine not in ("auto", "batched", "sequential"):
        raise ValueError(f"engine must be 'auto', 'batched' or 'sequential', got {engine!r}.")
    if torch_threads == "auto":
        torch_threads = None if n_jobs in (None, 1) else 1
    elif torch_threads is not None:
        check_scalar(torch_threads, "torch_threads", kind=numbers.Integral, low=1)
    if predict_every == "auto":
        predict_every = default_predict_every(np.shape(history)[1])
    check_scalar(predict_every, "predict_every", kind=numbers.Integral, low=1)
    engine_cfg = {"engine": engine, "device": device, "dtype": dtype, "threads": torch_threads,
                  "predict_every": int(predict_every)}
    methods = _check_methods(methods)
    seeds = _check_seeds(seeds)
    check_scalar(random_state, "random_state", kind=numbers.Integral, low=0)
    history = check_history(history, name="history")
    new = np.ascontiguousarray(check_history(new, name="new"), dtype=np.float64)
    if np.isnan(new).any() or new.shape[1] != history.shape[1]:
        raise ValueError(f"new must be complete (no NaN) with the history's {history.shape[1]} questions.")
    sizes = np.asarray(budgets, dtype=np.int64).ravel()
    units, what = new.shape[1], "queries"
    if clusters is not None:
        from .._engine import encode_clusters

        clusters = np.asarray(clusters)
        units, what = encode_clusters(clusters, new.shape[1])[1].size, "cluster draws"  # checked here, once
    if sizes.size == 0 or sizes.min() < 2 or sizes.max() > units or np.unique(sizes).size != sizes.size:
        raise ValueError(f"budgets must be distinct numbers of {what} in [2, {units}], got {sizes.tolist()}.")
    fractions = sizes / new.shape[1] if budget_fractions is None else np.asarray(budget_fractions, dtype=float)
    rows = np.arange(new.shape[0]) if new_rows is None else np.asarray(new_rows)
    truths = new.mean(axis=1)
    if groups is not None:
        from ..estimands import encode_groups

        groups = np.asarray(groups)
        encode_groups(groups, new.shape[1])  # checked here, not in every worker
    if costs is not None:
        from ..sampling import check_costs

        costs = np.array(check_costs(costs, new.shape[1]))

    fitted, fit_seconds = None, 0.0
    if any(_method_spec(m, True)[0] is True for m in methods):  # a method returns the factor model it uses
        fitted, fit_seconds = _fit_factor_model(factor_model, history, verbose)
    others = {kind: PREDICTORS[kind](random_state).fit(history) for kind in {_predictor_kind(m) for m in methods}
              if kind is not None}
    # resolved here: workers need no registry
    specs, tuning_results, weight_results, configurations = _method_settings(
        methods, sizes, history, fitted, others, alpha, random_state, tuning, step_weights, verbose,
        engine_cfg["predict_every"])
    for m in methods:  # the ceilings: each new model's predictor fitted to all its answers
        if parse_method(m)[0] in CEILING_METHODS:
            oracles = _OraclePredictors(oracle_predictor(others.get(_predictor_kind(m), fitted), new))
            specs.update({(m, int(b)): (oracles, specs[(m, int(b))][1], None) for b in sizes})
    if groups is not None or costs is not None:
        _check_group_methods(specs, "groups" if costs is None else "costs" if groups is None else "groups and costs")
    if clusters is not None:
        _check_group_methods(specs, "clusters")
    # one task per (method, budget) and group of seeds: the batched engine runs a group in lockstep
    seed_groups = _seed_groups(seeds, n_jobs, len(methods) * len(sizes))
    chunks = [(m, f, b, g) for m in methods for f, b in zip(fractions, sizes) for g in seed_groups]
    tasks = (delayed(_run_chunk)(m, *specs[(m, int(b))], f, b, g, new, truths, rows, random_state, alpha, engine_cfg,
                                 groups, costs, clusters)
             for m, f, b, g in chunks)
    bar = progress_bar(len(seeds) * len(methods) * len(sizes) * new.shape[0], "runs", verbose, unit="run")
    blocks, group_blocks = [], []
    with parallel_config(**({} if backend is None else {"backend": backend})):
        for block, group_block in Parallel(n_jobs=n_jobs, return_as="generator")(tasks):
            blocks.append(block)
            group_blocks.append(group_block)
            bar.update(len(block))
    bar.close()
    records = pd.concat(blocks, ignore_index=True)
    group_records = None if groups is None else pd.concat(group_blocks, ignore_index=True)
    return MethodRuns(records, fitted, fit_seconds, tuning_results, weight_results, others.get("gp"), configurations,
                      group_records)


def _check_group_methods(specs, what):
    """Refuse methods that cannot take groups or costs (nature's order, the field), by name."""
    for (name, _), (_, sampler, _) in specs.items():
        if isinstance(sampler, FieldMethod) or not isinstance(sampler, Sampler):
            raise ValueError(f"method {name!r} cannot take {what}: its design is not a sequential policy over the "
                             "bank (nature's order or the field's); leave it out of methods.")


def run_experiment(matrix, *, history_fraction=0.75, split_seed=0, order=None, complete_rows=False, n_full_obs=None,
                   p_obs=None, max_models=None, budgets=DEFAULT_BUDGETS, **options):
    """Split a response matrix, then run methods x budgets x new models x seeds on it; return tidy records.

    Parameters
    ----------
    matrix : array-like of shape (n_models, n_questions)
        0/1 outcomes, NaN for not observed (see :func:`faqstats.load_response_matrix`).
    history_fraction, split_seed, order, complete_rows, n_full_obs, p_obs, max_models
        The history/new-model split and the history's missingness: see :func:`split_matrix`.
    budgets : sequence of float in (0, 1], default=2.5%, 5%, ..., 25%
        Budgets as fractions of the bank; each becomes ``max(2, round(f * N))`` queries (with
        ``clusters``: ``max(2, round(f * C))`` draws of the ``C`` clusters).
    **options
        The sweep's settings: :func:`run_methods`' keyword arguments but ``budget_fractions``, ``new_rows``.

    Returns
    -------
    ExperimentResult

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=80, n_questions=40, n_components=2, random_state=0)
    >>> out = run_experiment(bank.history, budgets=[0.2], seeds=1, methods=["uniform-fpc"], verbose=False)
    >>> sorted(set(out.records["budget"]))
    [8]
    """
    start = time.perf_counter()
    unknown = (set(options) - set(_RUN_DEFAULTS)) | (set(options) & {"budget_fractions", "new_rows"})
    if unknown:
        raise TypeError(f"run_experiment() got unexpected keyword argument(s) {sorted(unknown)}.")
    split = dict(history_fraction=history_fraction, split_seed=split_seed, complete_rows=complete_rows,
                 n_full_obs=n_full_obs, p_obs=p_obs, max_models=max_models)
    history, new, new_rows = split_matrix(matrix, order=order, **split)
    clusters = options.get("clusters")
    if clusters is not None:  # budgets are fractions of the clusters
        from .._engine import encode_clusters

        units = encode_clusters(np.asarray(clusters), new.shape[1])[1].size
    else:
        units = new.shape[1]
    fractions, sizes = budget_sizes(budgets, units)
    runs = run_methods(history, new, sizes, budget_fractions=fractions, new_rows=new_rows, **options)
    settings = _RUN_DEFAULTS | options
    return ExperimentResult(
        **vars(runs), history_shape=tuple(history.shape), history_observed=float(np.mean(~np.isnan(history))),
        new_rows=np.asarray(new_rows), budgets=fractions, elapsed=time.perf_counter() - start,
        config=dict(**split, seeds=_check_seeds(settings["seeds"]),
                    methods=_check_methods(settings["methods"]),
                    **{k: settings[k] for k in ("alpha", "random_state", "engine", "device", "dtype")},
                    predict_every=(default_predict_every(new.shape[1]) if settings["predict_every"] == "auto"
                                   else int(settings["predict_every"]))),
    )


#: :func:`run_methods`' keyword arguments and their defaults.
_RUN_DEFAULTS = {name: p.default for name, p in inspect.signature(run_methods).parameters.items()
                 if p.kind is p.KEYWORD_ONLY}


# ---------------------------------------------------------------- reductions
_NEEDED = ("method", "budget", "model", "seed", "truth", "estimate", "std_error", "low", "high", "covered")


def _as_records(records):
    if isinstance(records, MethodRuns):
        records = records.records
    records = pd.DataFrame(records)
    missing = [c for c in _NEEDED if c not in records.columns]
    if missing:
        raise ValueError(f"records lack the column(s) {missing}; pass the records of run_experiment or read_csv.")
    optional = {"budget_fraction": np.nan, "n_queries": np.nan, "row": -1}
    records = records.assign(**{c: d for c, d in optional.items() if c not in records.columns})
    return records.assign(variance=records["std_error"] ** 2, width=records["high"] - records["low"],
                          sq_error=(records["estimate"] - records["truth"]) ** 2,
                          covered=records["covered"].astype(float))


def _in_order(table, records):
    """Methods in their first appearance in ``records``, budgets increasing."""
    rank = {m: i for i, m in enumerate(records["method"].unique())}
    return table.sort_values(["method", "budget"], key=lambda c: c.map(rank) if c.name == "method" else c,
                             kind="stable").reset_index(drop=True)


def _ess(records, baseline):
    """(mean baseline variance) / (mean method variance) over the (model, seed) runs both have, per (method, budget)."""
    keys = ["budget", "model", "seed"]
    base = records.loc[records["method"] == baseline, keys + ["variance"]]
    pairs = records[["method", *keys, "variance"]].merge(base, on=keys, suffixes=("", "_base"))
    means = pairs.groupby(["method", "budget"])[["variance", "variance_base"]].mean()
    with np.errstate(divide="ignore", invalid="ignore"):
        return means["variance_base"] / means["variance"]


def _ceiling_share(table, ceiling_method):
    """Each row's ``ess_fpc`` over the ceiling's at its budget (NaN where the ceiling did not run)."""
    ess = table["ess_fpc"]
    methods, budgets = ess.index.get_level_values("method"), ess.index.get_level_values("budget")
    ceiling = ess[methods == ceiling_method].droplevel("method")
    with np.errstate(divide="ignore", invalid="ignore"):
        return ess.to_numpy() / ceiling.reindex(budgets).to_numpy()


def summarize(records, *, fpc_method="uniform-fpc", ht_method="ht-uniform", ceiling_method="ceiling"):
    """One row per (method, budget): coverage, width, RMSE, variance, ESS and share of the ceiling.

    Columns :data:`SUMMARY_COLUMNS`, defined in docs/results.md: ``coverage_se`` is
    ``sd / sqrt(n_runs)``; ``ess_fpc`` and ``ess_ht`` are (mean variance of the baseline) /
    (mean variance of the method) over the (model, seed) runs both have at the budget (a
    ratio of means), NaN when the baseline was not run; ``ceiling_share`` is ``ess_fpc`` over
    the ``ess_fpc`` of ``ceiling_method`` at the same budget (the share of the headroom a
    method realises), NaN when the ceiling (or the FPC baseline) was not run.

    Parameters
    ----------
    records : DataFrame, ExperimentResult or MethodRuns
    fpc_method, ht_method : str
        Names of the two baselines in ``records``.
    ceiling_method : str, default="ceiling"
        Name of the oracle diagnostic in ``records`` (see :data:`CEILING_METHODS`).

    Returns
    -------
    pandas.DataFrame
        Methods in their order of appearance, budgets increasing.

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_new=3, n_components=2, random_state=0)
    >>> runs = run_methods(bank.history, bank.new_outcomes, [8, 16], seeds=2,
    ...                    methods=["uniform-fpc", "ht-uniform"], verbose=False)
    >>> table = summarize(runs.records)
    >>> table[["method", "budget", "n_runs"]].values.tolist()
    [['uniform-fpc', 8, 6], ['uniform-fpc', 16, 6], ['ht-uniform', 8, 6], ['ht-uniform', 16, 6]]
    >>> table["ess_fpc"].iloc[:2].tolist()  # the FPC baseline against itself
    [1.0, 1.0]
    """
    records = _as_records(records)
    table = records.groupby(["method", "budget"]).agg(
        budget_fraction=("budget_fraction", "first"), n_runs=("covered", "size"),
        coverage=("covered", "mean"), coverage_se=("covered", "std"), mean_width=("width", "mean"),
        rmse=("sq_error", "mean"), mean_variance=("variance", "mean"), mean_queries=("n_queries", "mean"))
    table["coverage_se"] /= np.sqrt(table["n_runs"])
    table["rmse"] = np.sqrt(table["rmse"])
    table["ess_fpc"] = _ess(records, fpc_method)
    table["ess_ht"] = _ess(records, ht_method)
    table["ceiling_share"] = _ceiling_share(table, ceiling_method)
    columns = list(SUMMARY_COLUMNS)
    if "cost_spent" in records.columns:  # runs with costs per question
        table["mean_cost"] = records.groupby(["method", "budget"])["cost_spent"].mean()
        columns.append("mean_cost")
    return _in_order(table.reset_index()[columns], records)


def summarize_groups(group_records):
    """One row per (method, budget, group): coverage of each group's interval and of the simultaneous ones.

    Parameters
    ----------
    group_records : DataFrame or MethodRuns
        :attr:`MethodRuns.group_records` (``run_methods(..., groups=)``), or a table with its columns.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`GROUP_SUMMARY_COLUMNS`: ``coverage`` of the group's own interval,
        ``simultaneous_coverage`` of its simultaneous one, ``joint_simultaneous_coverage`` the
        share of runs in which every group's simultaneous interval covered (the same on every
        row of a method and budget; at least ``1 - alpha`` is the aim), ``mean_asked`` the draws
        in the group, ``mean_width`` and ``rmse`` of the group's estimate.

    Examples
    --------
    >>> import numpy as np, faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_new=3, n_components=2, random_state=0)
    >>> groups = np.repeat(["a", "b"], 20)
    >>> runs = run_methods(bank.history, bank.new_outcomes, [12], seeds=2, methods=["uniform-fpc"],
    ...                    groups=groups, verbose=False)
    >>> summarize_groups(runs)[["method", "budget", "group", "n_runs"]].values.tolist()
    [['uniform-fpc', 12, 'a', 6], ['uniform-fpc', 12, 'b', 6]]
    """
    if isinstance(group_records, MethodRuns):
        if group_records.group_records is None:
            raise ValueError("these runs have no group records: run them with groups=.")
        group_records = group_records.group_records
    g = pd.DataFrame(group_records)
    missing = [c for c in GROUP_RECORD_COLUMNS if c not in g.columns]
    if missing:
        raise ValueError(f"group records lack the column(s) {missing}.")
    g = g.assign(width=g["high"] - g["low"], sq_error=(g["estimate"] - g["truth"]) ** 2,
                 covered=g["covered"].astype(float), simultaneous_covered=g["simultaneous_covered"].astype(float))
    table = g.groupby(["method", "budget", "group"]).agg(
        budget_fraction=("budget_fraction", "first"), n_questions=("n_questions", "first"),
        n_runs=("covered", "size"), mean_asked=("n_asked", "mean"), coverage=("covered", "mean"),
        simultaneous_coverage=("simultaneous_covered", "mean"), mean_width=("width", "mean"),
        rmse=("sq_error", "mean")).reset_index()
    joint = g.groupby(["method", "budget", "model", "seed"])["simultaneous_covered"].min()
    joint = joint.groupby(["method", "budget"]).mean().rename("joint_simultaneous_coverage").reset_index()
    table = table.merge(joint, on=["method", "budget"])
    table["rmse"] = np.sqrt(table["rmse"])
    rank = {m: i for i, m in enumerate(g["method"].unique())}
    table = table.sort_values(["method", "budget", "group"], key=lambda c: c.map(rank) if c.name == "method" else c,
                              kind="stable").reset_index(drop=True)
    return table[list(GROUP_SUMMARY_COLUMNS)]


def per_model_coverage(records):
    """One row per (method, budget, model): its truth, coverage over seeds and mean width.

    Parameters
    ----------
    records : DataFrame, ExperimentResult or MethodRuns
        The runs' records.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`MODEL_COVERAGE_COLUMNS`.

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_new=3, n_components=2, random_state=0)
    >>> runs = run_methods(bank.history, bank.new_outcomes, [8], seeds=4, methods=["uniform-fpc"], verbose=False)
    >>> table = per_model_coverage(runs)
    >>> table[["model", "n_runs"]].values.tolist()
    [[0, 4], [1, 4], [2, 4]]
    >>> bool(table["truth"].equals(pd.Series(bank.new_accuracy)))
    True
    """
    records = _as_records(records)
    table = records.groupby(["method", "budget", "model"]).agg(
        budget_fraction=("budget_fraction", "first"), row=("row", "first"), truth=("truth", "first"),
        n_runs=("covered", "size"), coverage=("covered", "mean"), mean_width=("width", "mean"))
    return _in_order(table.reset_index()[list(MODEL_COVERAGE_COLUMNS)], records)


def format_summary(summary, markdown=False):
    """The summary table as text (a statsmodels summary's) or as a Markdown table.

    Parameters
    ----------
    summary : pandas.DataFrame
        What :func:`summarize` returns.
    markdown : bool, default=False
        A Markdown table instead of text.

    Returns
    -------
    str
        The table; the ESS columns of a baseline that did not run are left out.

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_new=3, n_components=2, random_state=0)
    >>> runs = run_methods(bank.history, bank.new_outcomes, [8], seeds=2, methods=["uniform-fpc"], verbose=False)
    >>> print(format_summary(summarize(runs.records), markdown=True))
    | method | budget | queries | runs | coverage | +/- se | mean width | RMSE | ESS vs FPC |
    |---|---|---|---|---|---|---|---|---|
    | uniform-fpc | 20.0% | 8.0 | 6 | ... | 1.00 |
    """
    s = pd.DataFrame(summary)
    shown = pd.DataFrame({
        "method": s["method"], "budget": [f"{100 * f:.1f}%" for f in s["budget_fraction"]],
        "queries": [f"{q:.1f}" for q in s["mean_queries"]], "runs": s["n_runs"].astype(str),
        "coverage": [f"{c:.3f}" for c in s["coverage"]], "+/- se": [f"{c:.3f}" for c in s["coverage_se"]],
        "mean width": [f"{w:.4f}" for w in s["mean_width"]], "RMSE": [f"{r:.4f}" for r in s["rmse"]],
        "ESS vs FPC": [f"{e:.2f}" for e in s["ess_fpc"]], "ESS vs HT": [f"{e:.2f}" for e in s["ess_ht"]],
        "share of ceiling": [f"{e:.2f}" for e in s.get("ceiling_share", pd.Series(np.nan, index=s.index))],
    })
    shown = shown.drop(columns=[c for c, col in (("ESS vs FPC", "ess_fpc"), ("ESS vs HT", "ess_ht"),
                                                 ("share of ceiling", "ceiling_share"))
                                if col not in s or s[col].isna().all()])  # a baseline that did not run
    if markdown:
        return markdown_table(shown)
    return str(table_summary("Experiment summary", table=shown, index=False,
                             notes=["ESS: mean variance of the baseline / mean variance of the method, same runs."]))


# ---------------------------------------------------------------- CSV
def write_csv(table, path):
    """Write a table (records, summary, per-model table) as CSV; floats round-trip exactly.

    Parameters
    ----------
    table : pandas.DataFrame
        The table (its index is not written).
    path : str or os.PathLike
        The file; missing parent directories are made.

    Returns
    -------
    pathlib.Path
        The file written.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_new=3, n_components=2, random_state=0)
    >>> runs = run_methods(bank.history, bank.new_outcomes, [8], seeds=2, methods=["uniform-fpc"], verbose=False)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = write_csv(runs.records, pathlib.Path(tmp) / "runs" / "records.csv")
    ...     back = read_csv(path)
    >>> path.name, back.equals(runs.records)
    ('records.csv', True)
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(table).to_csv(path, index=False, float_format="%.17g")
    return path


def read_csv(path, columns=RECORD_COLUMNS):
    """Read a table written by :func:`write_csv`, checking it has ``columns`` (in order).

    Parameters
    ----------
    path : str or os.PathLike
        The CSV file.
    columns : sequence of str, default=RECORD_COLUMNS
        The columns the table must have, in order (e.g. :data:`SUMMARY_COLUMNS` for a summary).

    Returns
    -------
    pandas.DataFrame
        The table, floats exactly as written.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_new=3, n_components=2, random_state=0)
    >>> runs = run_methods(bank.history, bank.new_outcomes, [8], seeds=2, methods=["uniform-fpc"], verbose=False)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = write_csv(runs.summary(), pathlib.Path(tmp) / "summary.csv")
    ...     summary = read_csv(path, columns=SUMMARY_COLUMNS)
    >>> summary[["method", "budget", "n_runs"]].values.tolist()
    [['uniform-fpc', 8, 6]]
    """
    # exact float parsing: pandas 3's default; pandas 2 needs it asked for
    exact = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}
    table = pd.read_csv(path, **exact)
    if tuple(table.columns) != tuple(columns):
        raise ValueError(f"{path} has columns {list(table.columns)}, expected {list(columns)}.")
    return table
