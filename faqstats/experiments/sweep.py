"""The experiments' sweep: methods x budgets x new models x seeds, as tidy records, and the split of a response
matrix into a history and new models, with budgets as numbers of queries.

Run (method, budget, model, seed) draws from ``np.random.default_rng([random_state, method_key(method),
budget, model, seed])``, so its numbers do not depend on ``n_jobs``, the backend, nor the other runs.
"""

import contextlib
import dataclasses
import inspect
import numbers
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._engine import encode_clusters
from .._progress import progress_bar
from .._validation import check_history, check_scalar
from ..batched import simulate
from ..configure import default_predict_every
from ..estimator import PAIEstimator
from ..estimands import encode_groups
from ..sampling import Sampler, check_costs
from .field import FieldMethod
from .methods import (PREDICTORS, OraclePredictors, check_methods, fit_factor_model, method_spec, oracle_predictor,
                      predictor_kind, prepare_methods)
from .records import GROUP_RECORD_COLUMNS, RECORD_COLUMNS, method_key, summarize

__all__ = ["DEFAULT_BUDGETS", "MethodRuns", "ExperimentResult", "budget_sizes", "run_methods", "run_experiment",
           "split_matrix"]


DEFAULT_BUDGETS = tuple(float(f) for f in np.round(np.linspace(0.025, 0.25, 10), 4))
"""Budgets as fractions of the bank: 2.5%, 5%, ..., 25% (:func:`run_experiment`'s default).

Examples
--------
>>> budget_sizes(DEFAULT_BUDGETS, 200)[1]  # queries on a bank of 200 questions
array([ 5, 10, 15, 20, 25, 30, 35, 40, 45, 50])
"""


def split_matrix(matrix, *, history_fraction=0.75, split_seed=0, order=None, complete_rows=False, n_full_obs=None,
                 p_obs=None, max_models=None):
    """Split a response matrix into a history and fully observed new models: of the complete rows, permuted by
    ``split_seed`` or in ``order``, the first ``round(history_fraction * n)`` go to the history.

    Parameters
    ----------
    matrix : array-like of shape (n_models, n_questions)
        0/1 outcomes, NaN for not observed.
    history_fraction : float in (0, 1)
        The history's share of the complete rows.
    split_seed : int
        Seeds the permutation and ``p_obs``' mask.
    order : sequence of int or None
        Complete rows in the order to use instead of the seeded permutation (e.g. by release date).
    complete_rows : bool
        Drop incomplete rows; otherwise they join the history.
    n_full_obs : int or None
        History rows (in split order) that ``p_obs`` leaves as they are.
    p_obs : float in (0, 1] or None
        Keep every other history cell with this probability (every row keeps one cell); ``None``:
        the data's own missingness.
    max_models : int or None
        Keep only the first ``max_models`` new models.

    Returns
    -------
    history, new : ndarray of shape (n_history, n_questions), (n_new, n_questions)
        The history and the new models' complete outcomes.
    new_rows : ndarray of int
        The rows of ``matrix`` behind ``new``.

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
        The fractions kept (one giving an earlier size is dropped with a warning).
    sizes : ndarray of int

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


@dataclass(frozen=True)
class MethodRuns:
    """What :func:`run_methods` returns.

    Attributes
    ----------
    records : pandas.DataFrame
        One row per (method, budget, model, seed), columns :data:`RECORD_COLUMNS`.
    factor_model, fit_seconds : fitted LogisticFactorModel or None, float
        The factor model (``None`` when no method needed one) and its fit's seconds.
    tuning, step_weights : dict
        ``{budget: TuningResult}`` ("faq-tuned"), ``{(method, budget): StepWeights}`` (learned increment weights).
    surrogate : fitted GaussianProcessSurrogate or None
        The ``gp`` methods' surrogate.
    configurations : dict
        ``{budget: Configuration}`` ("auto").
    group_records : pandas.DataFrame or None
        With ``groups``: one row per run and group, columns :data:`GROUP_RECORD_COLUMNS`.

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_new=3, n_components=2, random_state=0)
    >>> runs = run_methods(bank.history, bank.new_outcomes, [8, 16], seeds=2, methods=["uniform-fpc"], verbose=False)
    >>> runs.summary()[["method", "budget", "n_runs"]].values.tolist()
    [['uniform-fpc', 8, 6], ['uniform-fpc', 16, 6]]
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
        """
        return summarize(self.records, **kwargs)


@dataclass(frozen=True, kw_only=True)
class ExperimentResult(MethodRuns):
    """What :func:`run_experiment` returns: the :class:`MethodRuns` and the split.

    Attributes
    ----------
    history_shape, history_observed : tuple of int, float
        Shape and fraction of observed cells of the history after masking.
    new_rows, budgets : ndarray
        Rows of the input matrix evaluated as new models; the budget fractions run (duplicates merged).
    elapsed : float
        Seconds for the whole experiment.
    config : dict
        The experiment's settings.

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_components=2, random_state=0)
    >>> out = run_experiment(bank.history, budgets=[0.2], seeds=1, methods=["uniform-fpc"], verbose=False)
    >>> out.history_shape, out.new_rows.size, out.budgets.tolist()
    ((45, 40), 15, [0.2])
    """

    history_shape: tuple
    history_observed: float
    new_rows: np.ndarray
    budgets: np.ndarray
    elapsed: float
    config: dict = field(default_factory=dict)


def _check_seeds(seeds):
    if isinstance(seeds, numbers.Integral) and not isinstance(seeds, bool):
        check_scalar(seeds, "seeds", kind=numbers.Integral, low=1)
        return list(range(int(seeds)))
    seeds = [int(s) for s in seeds]
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
        raise ValueError("seeds must be a positive count or a non-empty sequence of distinct non-negative ints.")
    return seeds


@dataclass(frozen=True)
class _Sweep:
    """What every chunk of a sweep shares: the new models and the checked run settings."""

    new: np.ndarray  # the new models' complete outcomes
    truths: np.ndarray  # their accuracies
    rows: np.ndarray  # their row labels in the records
    random_state: int
    alpha: float
    engine: str
    device: str
    dtype: str
    threads: int | None  # torch's intra-op threads meanwhile (None: as they are)
    predict_every: int
    groups: np.ndarray | None = None
    costs: np.ndarray | None = None
    clusters: np.ndarray | None = None


def _run_chunk(name, factor_model, sampler, step_weights, fraction, budget, seeds, sweep):
    """One (method, budget) and some seeds, every new model: records and group records (or None)."""
    if isinstance(sampler, FieldMethod):  # the field (field.py): its own runs, designs shared per seed
        return sampler.run_records(name, fraction, budget, seeds, sweep.new, sweep.truths, sweep.rows,
                                   sweep.random_state, sweep.alpha), None
    key = method_key(name)
    seeds = [int(s) for s in np.atleast_1d(seeds)]
    n = sweep.new.shape[0]
    gens = [np.random.default_rng([sweep.random_state, key, int(budget), i, seed]) for seed in seeds for i in range(n)]
    models = np.tile(np.arange(n), len(seeds))
    per_group = [None] * len(gens)
    if isinstance(factor_model, OraclePredictors):  # the ceiling: a predictor of its own per new model
        columns = np.empty((6, len(gens)))
        # its predictions never move: refreshing them would only cost time (same values, same draws)
        fixed = dataclasses.replace(sweep, predict_every=int(budget))
        for i in range(n):
            at = np.flatnonzero(models == i)
            columns[:, at], found = _run_columns(factor_model.predictors[i], sampler, step_weights, budget,
                                                 [gens[r] for r in at], models[at], fixed)
            for r, res in zip(at, found):
                per_group[r] = res
    else:
        columns, per_group = _run_columns(factor_model, sampler, step_weights, budget, gens, models, sweep)
    estimate, std_error, low, high, n_queries, cost_spent = columns
    truth = np.tile(sweep.truths, len(seeds))
    base = {"method": name, "budget_fraction": float(fraction), "budget": int(budget), "model": models,
            "row": np.tile(sweep.rows, len(seeds)), "seed": np.repeat(seeds, n)}
    records = pd.DataFrame({
        **base, "truth": truth, "estimate": estimate,
        "std_error": std_error, "low": low, "high": high, "covered": (low <= truth) & (truth <= high),
        "n_queries": np.asarray(n_queries, np.int64),
    }, columns=RECORD_COLUMNS)
    if sweep.costs is not None:
        records["cost_spent"] = cost_spent
    if sweep.groups is None:
        return records, None
    return records, _group_rows(base, per_group, sweep.groups, sweep.new, models, sweep.alpha)


def _group_rows(base, per_group, groups, new, models, alpha):
    """A block's group records: a row per run and group."""
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


def _run_columns(factor_model, sampler, step_weights, budget, gens, models, sweep):
    """The ``(estimate, std_error, low, high, n_queries, cost_spent)`` columns of the runs ``gens`` on the new
    models ``models``, and each run's :class:`~faqstats.GroupResults` (or None).
    """
    if sweep.engine != "sequential":
        with _torch_threads(sweep.threads):  # the seeds in lockstep too: one query's fixed cost for all
            runs = simulate(sweep.new, gens, predictor=factor_model, sampler=sampler, budget=int(budget),
                            alpha=sweep.alpha, device=sweep.device, dtype=sweep.dtype, step_weights=step_weights,
                            predict_every=sweep.predict_every, rows=models, groups=sweep.groups, costs=sweep.costs,
                            clusters=sweep.clusters)
        spent = np.full(len(gens), np.nan) if runs.cost_spent is None else runs.cost_spent
        columns = [runs.estimate, runs.std_error, runs.low, runs.high, runs.n_queries, spent]
        per_group = [None] * len(gens) if runs.group_results is None else list(runs.group_results)
        return np.array(columns, dtype=float), per_group
    columns = np.empty((6, len(gens)))
    per_group = []
    for r, (i, gen) in enumerate(zip(models, gens)):
        est = PAIEstimator(factor_model, sampler, budget=int(budget), random_state=gen,
                           step_weights=step_weights, predict_every=sweep.predict_every)
        est.fit(sweep.new[i], groups=sweep.groups, costs=sweep.costs, clusters=sweep.clusters)
        spent = np.nan if est.cost_spent_ is None else est.cost_spent_
        columns[:, r] = (est.estimate_, est.std_error_, *est.conf_int(alpha=sweep.alpha), est.n_queries_, spent)
        per_group.append(est.group_results_)
    return columns, per_group


def _seed_groups(seeds, n_jobs, n_settings):
    """The seeds in consecutive groups, enough for ``n_jobs`` workers to share ``n_settings`` tasks evenly."""
    from joblib import effective_n_jobs

    workers = effective_n_jobs(n_jobs) if n_jobs not in (None, 1) else 1
    n_groups = min(len(seeds), max(1, -(-workers // max(n_settings, 1))) if workers > 1 else 1)
    return [list(g) for g in np.array_split(np.asarray(seeds), n_groups)]


@contextlib.contextmanager
def _torch_threads(n):
    """Torch's intra-op threads set to ``n`` meanwhile (``None``: left as is)."""
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


def run_methods(history, new, budgets, *, seeds=3, methods=("faq", "uniform-fpc", "ht-uniform"), factor_model=None,
                budget_fractions=None, new_rows=None, alpha=0.05, random_state=0, n_jobs=None, backend=None,
                engine="auto", device="cpu", dtype="float64", torch_threads="auto", tuning=None, step_weights=None,
                predict_every="auto", groups=None, costs=None, clusters=None, verbose=True):
    """Run methods x budgets x new models x seeds, given a history and the new models apart.

    Parameters
    ----------
    history : array-like of shape (n_history, N)
        Earlier models' outcomes (NaN = not observed), the only data fitting and tuning see.
    new : array-like of shape (n_new, N)
        Complete outcomes of the models to evaluate.
    budgets : sequence of int
        Numbers of queries (at least 2, distinct).
    seeds : int or sequence of int, default=3
        Repeats per (method, budget, model): a count or explicit seeds.
    methods : sequence of str, default=("faq", "uniform-fpc", "ht-uniform")
        Names in :data:`METHODS`; :func:`summarize`'s ESS columns need the baselines among them.
    factor_model : None, dict or estimator
        The default factor model (a dict sets some of its parameters), or an estimator, cloned and fitted
        unless already fitted.
    budget_fractions, new_rows : sequence or None
        Fractions of the bank the budgets stand for (``None``: ``budgets / N``), and the new models' row
        labels (``None``: ``0 .. n_new - 1``).
    alpha : float, default=0.05
        Significance level of the intervals.
    random_state : int, default=0
        Root of every run's seed.
    n_jobs, backend : int, str or None
        Workers and backend of :class:`joblib.Parallel`; results do not depend on them.
    engine : {"auto", "batched", "sequential"}, default="auto"
        :func:`faqstats.batched.simulate`, or ``"sequential"``: the estimator, run after run.
    device, dtype : str
        Torch device and precision of the batched engine.
    torch_threads : int, None or "auto", default="auto"
        Torch threads per worker; ``"auto"`` is 1 when ``n_jobs`` is not 1.
    tuning, step_weights : dict or None
        Keyword arguments of :func:`~faqstats.experiments.tune_policy` ("faq-tuned") and of
        :func:`~faqstats.learn_step_weights` (learned weights, "auto").
    predict_every : int or "auto", default="auto"
        The predictions' refresh schedule; ``"auto"``: :func:`faqstats.configure.default_predict_every`.
    groups, costs, clusters : array-like of shape (N,) or None, default=None
        Per question, as in ``PAIEstimator.fit``: a group label (every run also estimates each group's
        accuracy), a positive cost (the records gain ``cost_spent``), a cluster id (``budgets`` count draws).
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
    >>> runs.records.shape, runs.factor_model is None  # the baseline needs no factor model
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
    methods = check_methods(methods)
    seeds = _check_seeds(seeds)
    check_scalar(random_state, "random_state", kind=numbers.Integral, low=0)
    history = check_history(history, name="history")
    new = np.ascontiguousarray(check_history(new, name="new"), dtype=np.float64)
    if np.isnan(new).any() or new.shape[1] != history.shape[1]:
        raise ValueError(f"new must be complete (no NaN) with the history's {history.shape[1]} questions.")
    sizes = np.asarray(budgets, dtype=np.int64).ravel()
    clusters = None if clusters is None else np.asarray(clusters)
    units, what = _n_units(clusters, new.shape[1]), "queries" if clusters is None else "cluster draws"
    if sizes.size == 0 or sizes.min() < 2 or sizes.max() > units or np.unique(sizes).size != sizes.size:
        raise ValueError(f"budgets must be distinct numbers of {what} in [2, {units}], got {sizes.tolist()}.")
    fractions = sizes / new.shape[1] if budget_fractions is None else np.asarray(budget_fractions, dtype=float)
    rows = np.arange(new.shape[0]) if new_rows is None else np.asarray(new_rows)
    truths = new.mean(axis=1)
    if groups is not None:
        groups = np.asarray(groups)
        encode_groups(groups, new.shape[1])  # checked here, not in every worker
    if costs is not None:
        costs = np.array(check_costs(costs, new.shape[1]))
    sweep = _Sweep(new, truths, rows, random_state, alpha, engine, device, dtype, torch_threads, int(predict_every),
                   groups, costs, clusters)

    fitted, fit_seconds = None, 0.0
    if any(method_spec(m).predictor == "factor" for m in methods):
        fitted, fit_seconds = fit_factor_model(factor_model, history, verbose)
    others = {kind: PREDICTORS[kind](random_state).fit(history) for kind in {predictor_kind(m) for m in methods}
              if kind is not None}
    # resolved here: workers need no registry
    specs, tuning_results, weight_results, configurations = prepare_methods(
        methods, sizes, history, fitted, others, alpha, random_state, tuning, step_weights, verbose,
        sweep.predict_every)
    for m in methods:  # the ceilings: each new model's predictor fitted to all its answers
        if method_spec(m).ceiling:
            oracles = OraclePredictors(oracle_predictor(others.get(predictor_kind(m), fitted), new))
            specs.update({(m, int(b)): (oracles, specs[(m, int(b))][1], None) for b in sizes})
    if groups is not None or costs is not None:
        _check_group_methods(specs, "groups" if costs is None else "costs" if groups is None else "groups and costs")
    if clusters is not None:
        _check_group_methods(specs, "clusters")
    # one task per (method, budget) and group of seeds: the batched engine runs a group in lockstep
    seed_groups = _seed_groups(seeds, n_jobs, len(methods) * len(sizes))
    chunks = [(m, f, b, g) for m in methods for f, b in zip(fractions, sizes) for g in seed_groups]
    tasks = (delayed(_run_chunk)(m, *specs[(m, int(b))], f, b, g, sweep) for m, f, b, g in chunks)
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


def _n_units(clusters, n_questions):
    """What a budget counts: the questions, or the clusters (checked here, once)."""
    return n_questions if clusters is None else encode_clusters(np.asarray(clusters), n_questions)[1].size


def _check_group_methods(specs, what):
    """Refuse by name the methods that cannot take groups, costs or clusters (nature's order, the field)."""
    for (name, _), (_, sampler, _) in specs.items():
        if isinstance(sampler, FieldMethod) or not isinstance(sampler, Sampler):
            raise ValueError(f"method {name!r} cannot take {what}: its design is not a sequential policy over the "
                             "bank (nature's order or the field's); leave it out of methods.")


def run_experiment(matrix, *, history_fraction=0.75, split_seed=0, order=None, complete_rows=False, n_full_obs=None,
                   p_obs=None, max_models=None, budgets=DEFAULT_BUDGETS, **options):
    """Split a response matrix, then run methods x budgets x new models x seeds on it.

    Parameters
    ----------
    matrix : array-like of shape (n_models, n_questions)
        0/1 outcomes, NaN for not observed.
    history_fraction, split_seed, order, complete_rows, n_full_obs, p_obs, max_models
        The split and the history's missingness: see :func:`split_matrix`.
    budgets : sequence of float in (0, 1], default=2.5%, 5%, ..., 25%
        Fractions of the bank (with ``clusters``: of the clusters), see :func:`budget_sizes`.
    **options
        :func:`run_methods`' keyword arguments but ``budget_fractions``, ``new_rows``.

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
    fractions, sizes = budget_sizes(budgets, _n_units(options.get("clusters"), new.shape[1]))
    runs = run_methods(history, new, sizes, budget_fractions=fractions, new_rows=new_rows, **options)
    settings = _RUN_DEFAULTS | options
    return ExperimentResult(
        **vars(runs), history_shape=tuple(history.shape), history_observed=float(np.mean(~np.isnan(history))),
        new_rows=np.asarray(new_rows), budgets=fractions, elapsed=time.perf_counter() - start,
        config=dict(**split, seeds=_check_seeds(settings["seeds"]),
                    methods=check_methods(settings["methods"]),
                    **{k: settings[k] for k in ("alpha", "random_state", "engine", "device", "dtype")},
                    predict_every=(default_predict_every(new.shape[1]) if settings["predict_every"] == "auto"
                                   else int(settings["predict_every"]))),
    )


#: :func:`run_methods`' keyword arguments and their defaults.
_RUN_DEFAULTS = {name: p.default for name, p in inspect.signature(run_methods).parameters.items()
                 if p.kind is p.KEYWORD_ONLY}
