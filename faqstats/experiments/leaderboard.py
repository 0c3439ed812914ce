"""The leaderboard experiment: groups of K test models (close in accuracy, or far apart) evaluated at once by
:class:`~faqstats.LeaderboardEstimator`, scored by joint coverage of accuracies, differences and ranks, against K
independent FPC sample means with Bonferroni at the same queries and against naive per-model 95% intervals.
Group-run ``g`` of (K, budget, design) draws from ``np.random.default_rng([random_state, K, budget, g, key])``.
"""

import numbers
import time
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd
from scipy.stats import rankdata
from sklearn.base import clone

from .._progress import progress_bar
from .._validation import check_alpha, check_history, check_scalar
from ..configure import configure_from_history
from ..joint import ranks_from_better, surely_better
from ..leaderboard import LeaderboardEstimator
from ..results import markdown_table, table_summary
from ..sampling import UniformSampler
from .methods import fit_factor_model
from .records import method_key
from .sweep import budget_sizes

__all__ = ["LEADERBOARD_DESIGNS", "LEADERBOARD_METHODS", "LEADERBOARD_RECORD_COLUMNS", "LEADERBOARD_SUMMARY_COLUMNS",
           "LeaderboardExperiment", "format_leaderboard_summary", "run_leaderboard_experiment",
           "summarize_leaderboard"]

#: The designs :class:`~faqstats.LeaderboardEstimator` takes (passed through as given).
LEADERBOARD_DESIGNS = ("independent", "shared", "adaptive")
#: The methods of every group-run: the estimator's simultaneous intervals, the same estimates with naive per-model
#: intervals, and K independent FPC sample means with Bonferroni over the accuracies and over the differences.
LEADERBOARD_METHODS = ("faqstats", "naive", "fpc-bonferroni")
#: The columns of :attr:`LeaderboardExperiment.records`, one row per (K, budget, design, method, group-run).
LEADERBOARD_RECORD_COLUMNS = (
    "K", "budget_fraction", "budget", "design", "method", "group", "kind", "models", "true_spread", "n_queries",
    "acc_covered", "diff_covered", "rank_covered", "best_identified", "best_in_set", "n_may_be_best", "acc_width",
    "diff_width", "rank_width")
#: The columns of :func:`summarize_leaderboard`'s table (``kind`` only when asked by kind).
LEADERBOARD_SUMMARY_COLUMNS = (
    "K", "budget_fraction", "budget", "design", "method", "n_runs", "mean_queries", "acc_coverage", "diff_coverage",
    "rank_coverage", "coverage_se", "best_identified", "best_in_set", "may_be_best_size", "acc_width", "diff_width",
    "rank_width", "diff_width_ratio")
_BASELINE = "fpc-bonferroni"


@dataclass(frozen=True)
class LeaderboardExperiment:
    """What :func:`run_leaderboard_experiment` returns.

    Attributes
    ----------
    records : pandas.DataFrame
        One row per (K, budget, design, method, group-run), columns :data:`LEADERBOARD_RECORD_COLUMNS`.
    summary : pandas.DataFrame
        :func:`summarize_leaderboard` of the records: one row per (K, budget, design, method).
    factor_model : fitted predictor
        The predictor every run shared.
    fit_seconds : float
        Seconds fitting it took (0 when it came fitted).
    config : dict
        The experiment's settings (JSON-ready).

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=120, n_new=8, n_components=2, random_state=0)
    >>> fm = fq.LogisticFactorModel(n_components=2, max_iter=50, random_state=0).fit(bank.history)
    >>> out = run_leaderboard_experiment(bank.new_outcomes, fm, 3, budgets=[0.1], n_groups=2, verbose=False)
    >>> out.summary["method"].tolist()
    ['faqstats', 'naive', 'fpc-bonferroni']
    """

    records: pd.DataFrame
    summary: pd.DataFrame
    factor_model: object
    fit_seconds: float = 0.0
    config: dict = field(default_factory=dict)


def _draw_groups(truths, K, n_groups, rng):
    """``n_groups`` groups of ``K`` rows: the first half "close" (consecutive in accuracy order from a random start),
    the rest "far" (``K`` at random); returns the groups and their kinds."""
    order = np.argsort(truths, kind="stable")
    n_close = (n_groups + 1) // 2
    groups = [order[s:s + K] for s in rng.integers(0, truths.size - K + 1, size=n_close)]
    groups += [np.sort(rng.choice(truths.size, K, replace=False)) for _ in range(n_groups - n_close)]
    return np.array(groups, dtype=np.int64).reshape(n_groups, K), ["close"] * n_close + ["far"] * (n_groups - n_close)


def _score(result, truth, alpha, simultaneous):
    """One group-run's joint coverages, the may-be-best set and the mean widths of a :class:`JointResults`."""
    K = truth.size
    acc = result.conf_int(alpha, simultaneous=simultaneous)
    diffs = result.differences(alpha, simultaneous=simultaneous)
    true_diff = np.array([truth[i] - truth[j] for i, j in combinations(range(K), 2)])
    best, worst = ranks_from_better(surely_better(diffs))
    top, bottom = rankdata(-truth, method="min"), rankdata(-truth, method="max")  # ties: any tied rank counts
    may_be_best = best == 1
    return {
        "n_queries": int(np.sum(result.n_queries)),
        "acc_covered": bool(np.all((acc["lower"].to_numpy() <= truth) & (truth <= acc["upper"].to_numpy()))),
        "diff_covered": bool(np.all((diffs["lower"].to_numpy() <= true_diff)
                                    & (true_diff <= diffs["upper"].to_numpy()))),
        "rank_covered": bool(np.all((best <= bottom) & (top <= worst))),
        "best_identified": bool(may_be_best.sum() == 1 and top[may_be_best][0] == 1),
        "best_in_set": bool(np.any(may_be_best & (top == 1))),
        "n_may_be_best": int(may_be_best.sum()),
        "acc_width": float(np.mean(acc["upper"].to_numpy() - acc["lower"].to_numpy())),
        "diff_width": float(np.mean(diffs["upper"].to_numpy() - diffs["lower"].to_numpy())),
        "rank_width": float(np.mean(worst - best + 1)),
    }


def _check_Ks(K, n_models):
    """The group sizes as a list of ints in ``[2, n_models]``."""
    Ks = [K] if isinstance(K, numbers.Integral) or not np.iterable(K) else list(K)
    if not Ks or not all(isinstance(k, numbers.Integral) and not isinstance(k, bool) for k in Ks):
        raise TypeError(f"K must be an int or a non-empty sequence of ints, got {K!r}.")
    bad = [int(k) for k in Ks if not 2 <= k <= n_models]
    if bad:
        raise ValueError(f"K (models per group) must be in [2, {n_models}] (the test models), got {bad}.")
    return [int(k) for k in Ks]


def _predictor(history_or_predictor, factor_model, n_questions, verbose):
    """The shared predictor and its fit's seconds: a history (array-like) is fitted, a predictor used as is."""
    given = history_or_predictor
    if isinstance(given, (np.ndarray, list, tuple, pd.DataFrame)):
        history = check_history(given, name="history")
        if history.shape[1] != n_questions:
            raise ValueError(f"the history has {history.shape[1]} questions, the outcomes {n_questions}.")
        return fit_factor_model(factor_model, history, verbose)
    if given is None or not hasattr(given, "predict_proba"):
        raise TypeError("history_or_predictor must be a history matrix (models x questions, NaN = not observed) or "
                        f"a fitted predictor, got {type(given).__name__}.")
    return given, 0.0


def run_leaderboard_experiment(outcomes, history_or_predictor, K, budgets=(0.05, 0.10), n_groups=100,
                               design="independent", *, sampler=None, factor_model=None, configure=False,
                               alpha=0.05, random_state=0, verbose=True):
    """Evaluate groups of K test models at once, and score the joint intervals against the honest baseline.

    For every K, ``n_groups`` groups are drawn from the test models, half "close" (K consecutive
    models in accuracy order, from a random start) and half "far" (K at random); the same groups
    serve every budget and design. Each group-run fits :class:`~faqstats.LeaderboardEstimator` with
    ``K x`` the per-model budget and the design, and records (as ``"faqstats"``) whether its
    simultaneous intervals cover all K accuracies, all ``K (K - 1) / 2`` differences and every
    true rank, whether the may-be-best set is the true best alone, and the mean widths; the same
    estimates with per-model 95% intervals (``"naive"``); and K FPC sample means at the same
    per-model budget with Bonferroni over the accuracies and over the differences
    (``"fpc-bonferroni"``, recorded with design ``"independent"``).

    Parameters
    ----------
    outcomes : array-like of shape (n_test, N)
        The test models' complete 0/1 outcomes.
    history_or_predictor : array-like of shape (n_history, N), or fitted predictor
        The history (a factor model is fitted to it, as ``factor_model`` says) or a fitted predictor.
    K : int or sequence of int
        Models per group, each in ``[2, n_test]``.
    budgets : sequence of float in (0, 1], default=(0.05, 0.10)
        Queries per model on average as fractions of the bank (see :func:`budget_sizes`).
    n_groups : int, default=100
        Group-runs per (K, budget, design).
    design : str or sequence of str, default="independent"
        The estimator's ``design`` (among :data:`LEADERBOARD_DESIGNS`), passed through.
    sampler : Sampler or None, default=None
        The estimator's policy (``None``: its default).
    factor_model : None, dict or estimator, default=None
        With a history: the factor model to fit (as in :func:`run_methods`).
    configure : bool, default=False
        With a history: each model's run configured from it as :meth:`PAIEstimator.from_history
        <faqstats.PAIEstimator.from_history>` configures one run of the per-model budget (the predictor, the
        policy and, in the independent design, the step weights), instead of one fitted factor model.
    alpha : float in (0, 1), default=0.05
        One minus the joint level (and the naive intervals' per-model level).
    random_state : int, default=0
        Root of every group's and run's seed.
    verbose : bool, default=True
        Progress bars.

    Returns
    -------
    LeaderboardExperiment

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=120, n_new=8, n_components=2, random_state=0)
    >>> out = run_leaderboard_experiment(bank.new_outcomes, bank.history, [2, 3], budgets=[0.1], n_groups=2,
    ...                                  factor_model={"n_components": 2, "max_iter": 50}, verbose=False)
    >>> out.records.shape[0], out.summary.shape[0]  # 2 K x 3 methods x 2 groups; 2 K x 3 methods
    (12, 6)
    """
    start = time.perf_counter()
    new = np.asarray(check_history(outcomes, name="outcomes"), dtype=float)
    if np.isnan(new).any():
        raise ValueError("outcomes must be complete (no NaN): the truths are the test models' accuracies.")
    Ks = _check_Ks(K, new.shape[0])
    check_scalar(n_groups, "n_groups", kind=numbers.Integral, low=1)
    check_scalar(random_state, "random_state", kind=numbers.Integral, low=0)
    alpha = check_alpha(alpha)
    designs = [design] if isinstance(design, str) else list(design)
    if not designs or len(set(designs)) != len(designs):
        raise ValueError(f"design must be a design name or a sequence of distinct ones, got {design!r}.")
    fractions, sizes = budget_sizes(budgets, new.shape[1])
    if configure:
        if sampler is not None or factor_model is not None:
            raise ValueError("configure=True chooses the predictor and policy from the history: give neither sampler "
                             "nor factor_model.")
        history = check_history(history_or_predictor, name="history")  # (a fitted predictor cannot be configured)
        started, cache = time.perf_counter(), {}
        configured = {int(b): configure_from_history(history, int(b), random_state=random_state, cache=cache,
                                                     verbose=verbose).estimator for b in sorted(sizes, reverse=True)}
        predictor, fit_seconds = None, time.perf_counter() - started
    else:
        predictor, fit_seconds = _predictor(history_or_predictor, factor_model, new.shape[1], verbose)
        configured = {}
    truths = new.mean(axis=1)
    rows = []
    bar = progress_bar(len(Ks) * sizes.size * n_groups * (len(designs) + 1), "group-runs", verbose, unit="run")
    for k in Ks:
        groups, kinds = _draw_groups(truths, k, n_groups, np.random.default_rng([random_state, k]))
        for f, b in zip(fractions, sizes):
            for d in [*designs, None]:  # None: the baseline
                for g, (members, kind) in enumerate(zip(groups, kinds)):
                    seed = np.random.default_rng([random_state, k, int(b), g, method_key(d or _BASELINE)])
                    truth = truths[members]
                    base = {"K": k, "budget_fraction": float(f), "budget": int(b), "design": d or "independent",
                            "group": g, "kind": kind, "models": " ".join(map(str, members)),
                            "true_spread": float(np.ptp(truth))}
                    if d is None:
                        board = LeaderboardEstimator(None, UniformSampler(replace=False), k * int(b),
                                                     simultaneous="bonferroni", random_state=seed).fit(new[members])
                        rows.append({**base, "method": _BASELINE, **_score(board.result_, truth, alpha, True)})
                    else:
                        board = LeaderboardEstimator(predictor, None if sampler is None else clone(sampler),
                                                     k * int(b), design=d, alpha=alpha, random_state=seed)
                        if configured:  # one model's configuration for its budget (step weights: its own runs)
                            one = configured[int(b)]
                            board.set_params(predictor=one.factor_model, sampler=clone(one.sampler))
                            if d == "independent":
                                board.set_params(step_weights=one.step_weights, predict_every=one.predict_every)
                        board.fit(new[members])
                        rows.append({**base, "method": "faqstats", **_score(board.result_, truth, alpha, True)})
                        rows.append({**base, "method": "naive", **_score(board.result_, truth, alpha, False)})
                    bar.update(1)
    bar.close()
    records = pd.DataFrame(rows, columns=LEADERBOARD_RECORD_COLUMNS)
    config = {"K": Ks, "budgets": fractions.tolist(), "queries_per_model": sizes.tolist(), "n_groups": int(n_groups),
              "designs": designs, "configure": bool(configure), "alpha": alpha, "random_state": int(random_state),
              "n_test": int(new.shape[0]), "n_questions": int(new.shape[1]), "fit_seconds": float(fit_seconds),
              "elapsed": time.perf_counter() - start}
    return LeaderboardExperiment(records, summarize_leaderboard(records), predictor, float(fit_seconds), config)


def summarize_leaderboard(records, by_kind=False):
    """One row per (K, budget, design, method): joint coverages, identification of the best and mean widths.

    Parameters
    ----------
    records : pandas.DataFrame
        :attr:`LeaderboardExperiment.records` (or a selection of its rows).
    by_kind : bool, default=False
        Also split by the groups' kind (``"close"``, ``"far"``): a ``kind`` column after ``method``.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`LEADERBOARD_SUMMARY_COLUMNS`: ``coverage_se`` is the binomial standard error
        of a coverage of 0.95 over the runs; ``diff_width_ratio`` the mean width of the difference
        intervals over the baseline's at the same K and budget (NaN where it did not run).

    Examples
    --------
    >>> records = pd.DataFrame({"K": 2, "budget_fraction": 0.1, "budget": 10, "design": "independent",
    ...     "method": ["faqstats", "fpc-bonferroni"], "group": 0, "kind": "far", "models": "0 1", "true_spread": 0.1,
    ...     "n_queries": 20, "acc_covered": True, "diff_covered": True, "rank_covered": True, "best_identified": False,
    ...     "best_in_set": True, "n_may_be_best": 2, "acc_width": 0.2, "diff_width": [0.3, 0.4], "rank_width": 2.0})
    >>> summarize_leaderboard(records)["diff_width_ratio"].round(3).tolist()
    [0.75, 1.0]
    """
    r = pd.DataFrame(records)
    keys = ["K", "budget_fraction", "budget", "design", "method"] + (["kind"] if by_kind else [])
    table = r.groupby(keys, sort=False).agg(
        n_runs=("group", "size"), mean_queries=("n_queries", "mean"), acc_coverage=("acc_covered", "mean"),
        diff_coverage=("diff_covered", "mean"), rank_coverage=("rank_covered", "mean"),
        best_identified=("best_identified", "mean"), best_in_set=("best_in_set", "mean"),
        may_be_best_size=("n_may_be_best", "mean"), acc_width=("acc_width", "mean"),
        diff_width=("diff_width", "mean"), rank_width=("rank_width", "mean")).reset_index()
    table["coverage_se"] = np.sqrt(0.95 * 0.05 / table["n_runs"])
    cell = ["K", "budget"] + (["kind"] if by_kind else [])
    baseline = table[table["method"] == _BASELINE].set_index(cell)["diff_width"]
    table["diff_width_ratio"] = [row.diff_width / baseline.get(tuple(getattr(row, c) for c in cell), np.nan)
                                 for row in table.itertuples()]
    table = table.sort_values(["K", "budget"] + (["kind"] if by_kind else []), kind="stable").reset_index(drop=True)
    columns = list(LEADERBOARD_SUMMARY_COLUMNS)
    if by_kind:
        columns.insert(columns.index("method") + 1, "kind")
    return table[columns]


def format_leaderboard_summary(summary, markdown=False):
    """The leaderboard summary as text (a statsmodels summary's) or as a Markdown table.

    Parameters
    ----------
    summary : pandas.DataFrame
        What :func:`summarize_leaderboard` returns.
    markdown : bool, default=False
        A Markdown table instead of text.

    Returns
    -------
    str

    Examples
    --------
    >>> s = pd.DataFrame({"K": [5], "budget_fraction": [0.05], "budget": [35], "design": ["independent"],
    ...     "method": ["faqstats"], "n_runs": [1000], "mean_queries": [175.0], "acc_coverage": [0.948],
    ...     "diff_coverage": [0.952], "rank_coverage": [0.998], "coverage_se": [0.007], "best_identified": [0.3],
    ...     "best_in_set": [0.99], "may_be_best_size": [2.9], "acc_width": [0.3], "diff_width": [0.42],
    ...     "rank_width": [2.5], "diff_width_ratio": [0.68]})
    >>> print(format_leaderboard_summary(s, markdown=True).splitlines()[2][:62])
    | 5 | 5.0% | 35 | independent | faqstats | 1000 | 0.948 | 0.95
    """
    s = pd.DataFrame(summary)
    shown = pd.DataFrame({"K": s["K"].astype(str), "budget": [f"{100 * f:.1f}%" for f in s["budget_fraction"]],
                          "queries/model": s["budget"].astype(str), "design": s["design"], "method": s["method"]})
    if "kind" in s:
        shown["kind"] = s["kind"]
    columns = {"runs": ("n_runs", "{}"), "joint acc": ("acc_coverage", "{:.3f}"),
               "joint diffs": ("diff_coverage", "{:.3f}"), "ranks": ("rank_coverage", "{:.3f}"),
               "+/- se": ("coverage_se", "{:.3f}"), "best named": ("best_identified", "{:.3f}"),
               "may-be-best": ("may_be_best_size", "{:.2f}"), "acc width": ("acc_width", "{:.3f}"),
               "diff width": ("diff_width", "{:.3f}"), "width ratio": ("diff_width_ratio", "{:.2f}")}
    for name, (col, fmt) in columns.items():
        shown[name] = [fmt.format(v) for v in s[col]]
    if markdown:
        return markdown_table(shown)
    notes = ["joint acc / joint diffs: all K accuracies / all K(K-1)/2 differences covered at once; ranks: every "
             "true rank in its rank interval; best named: the may-be-best set is the true best alone.",
             "width ratio: mean width of the difference intervals over fpc-bonferroni's (K FPC sample means, "
             "Bonferroni) at the same queries."]
    return str(table_summary("Leaderboard experiment", table=shown, index=False, notes=notes))
