"""The unguaranteed field as experiment methods, side by side with PAI (docs/results.md): their base
:class:`FieldMethod` and ProEval's Bayesian quadrature (the IRT methods are in field_irt.py).

A design is fixed before the new model answers, so it is drawn per seed and shared by every new model:
:meth:`FieldMethod.run`'s ``random_state`` is ``np.random.default_rng([random_state, method_key(method), seed])``'s
first integer.
"""

import numbers
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.base import BaseEstimator

from .._validation import check_alpha, check_history, check_scalar, check_seed
from .records import RECORD_COLUMNS, method_key

__all__ = ["FieldMethod", "FieldRun", "ProEvalBQ", "normal_interval"]


@dataclass(frozen=True)
class FieldRun:
    """One run of a :class:`FieldMethod` on one new model.

    Attributes
    ----------
    estimate : float
        The accuracy estimate.
    std_error, low, high : float
        The method's own standard error and ``1 - alpha`` interval (NaN when it has none).
    queried : ndarray of int
        The queried questions, in query order.

    Examples
    --------
    >>> FieldRun(0.5, np.nan, np.nan, np.nan, np.array([3, 1])).n_queries
    2
    """

    estimate: float
    std_error: float
    low: float
    high: float
    queried: np.ndarray

    @property
    def n_queries(self):
        """Number of questions queried."""
        return int(np.size(self.queried))


class FieldMethod(BaseEstimator):
    """Base of the field's methods: fit on the history, then :meth:`run` on a new model.

    Subclasses implement ``_fit(H)``, ``_run(y, budget, seed, alpha)`` and maybe ``_design_key``.

    Examples
    --------
    >>> import faqstats as fq
    >>> from faqstats.experiments.field_irt import IRTFisher
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_new=1, n_components=2, random_state=0)
    >>> IRTFisher().fit(bank.history).run(bank.new_outcomes[0], budget=8).n_queries
    8
    """

    def check_params(self):
        """Check the parameters (a ValueError names the bad one); subclasses add theirs."""

    def fit(self, history, y=None):
        """Fit the method on the history.

        Parameters
        ----------
        history : array-like of shape (n_models, n_questions)
            0/1 outcomes, NaN = not observed.
        y : None
            Ignored.

        Returns
        -------
        self
        """
        self.check_params()
        H = check_history(history, name="history", allow_graded=False)
        self.n_features_in_ = H.shape[1]
        self._fit(H)
        self._designs = {}  # seed -> the method's design, shared by every new model of that seed
        return self

    def _check_run(self, outcomes, budget, alpha):
        if not hasattr(self, "n_features_in_"):
            raise ValueError(f"This {type(self).__name__} is not fitted yet; call fit(history) first.")
        y = np.asarray(outcomes, dtype=float)
        if y.shape != (self.n_features_in_,):
            raise ValueError(f"outcomes must be a vector of the history's {self.n_features_in_} questions, "
                             f"got shape {y.shape}.")
        if not np.isin(y, (0.0, 1.0)).all():
            raise ValueError("outcomes must be complete 0/1 values (the runs query them).")
        check_scalar(budget, "budget", kind=numbers.Integral, low=1, high=self.n_features_in_)
        check_alpha(alpha)
        return y

    def run(self, outcomes, budget, *, alpha=0.05, random_state=None):
        """Query ``budget`` distinct questions of a new model and estimate its accuracy.

        Parameters
        ----------
        outcomes : array-like of shape (n_questions,)
            The new model's complete 0/1 outcomes; only the queried ones are read.
        budget : int
            Number of questions to query.
        alpha : float, default=0.05
            Level of the method's own interval, where it has one.
        random_state : int, Generator or None
            Seeds the design; the same seed gives the same design for every model.

        Returns
        -------
        FieldRun
        """
        y = self._check_run(outcomes, budget, alpha)
        return self._run(y, int(budget), check_seed(random_state), float(alpha))

    def _design_key(self, seed):
        """What a design depends on: the seed, or a constant for a method without randomness."""
        return seed

    def run_records(self, name, fraction, budget, seeds, new, truths, rows, random_state, alpha):
        """The records of :func:`~faqstats.experiments.run_methods` for one budget and some seeds.

        Parameters
        ----------
        name, fraction, budget : str, float, int
            The method's name, the budget as a fraction of the bank and in queries.
        seeds : sequence of int
            The seeds: each draws one design, shared by every new model.
        new, truths, rows : ndarray
            The new models' complete outcomes, their accuracies and their row labels.
        random_state, alpha : int, float
            Root of the designs' seeds and level of the method's own intervals.

        Returns
        -------
        pandas.DataFrame
            One row per (seed, new model); ``covered`` is NaN where the method gives no interval.

        Examples
        --------
        >>> import faqstats as fq
        >>> from faqstats.experiments.field_irt import IRTFisher
        >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_new=2, n_components=2, random_state=0)
        >>> records = IRTFisher().fit(bank.history).run_records(
        ...     "irt-fisher", 0.2, 8, [0, 1], bank.new_outcomes, bank.new_accuracy, np.arange(2), 0, 0.05)
        >>> records[["model", "seed", "n_queries"]].values.tolist()
        [[0, 0, 8], [1, 0, 8], [0, 1, 8], [1, 1, 8]]
        """
        key = method_key(name)
        n = new.shape[0]
        seeds = [int(s) for s in np.atleast_1d(seeds)]
        columns = np.empty((5, len(seeds) * n))
        memo = {}  # a deterministic design gives the same run for every seed: run it once per model
        for s, seed in enumerate(seeds):
            design_seed = int(np.random.default_rng([random_state, key, seed]).integers(2**31 - 1))
            for i in range(n):
                cache = (self._design_key(design_seed), i)
                if cache not in memo:
                    memo[cache] = self.run(new[i], int(budget), alpha=alpha, random_state=design_seed)
                r = memo[cache]
                columns[:, s * n + i] = (r.estimate, r.std_error, r.low, r.high, r.n_queries)
        estimate, std_error, low, high, n_queries = columns
        truth = np.tile(truths, len(seeds))
        covered = (low <= truth) & (truth <= high)
        if np.isnan(low).any():  # no interval: coverage is undefined (NaN), not 0
            covered = np.where(np.isnan(low) | np.isnan(high), np.nan, covered.astype(float))
        return pd.DataFrame({
            "method": name, "budget_fraction": float(fraction), "budget": int(budget),
            "model": np.tile(np.arange(n), len(seeds)), "row": np.tile(rows, len(seeds)),
            "seed": np.repeat(seeds, n), "truth": truth, "estimate": estimate, "std_error": std_error,
            "low": low, "high": high, "covered": covered,
            "n_queries": n_queries.astype(np.int64),
        }, columns=RECORD_COLUMNS)


def normal_interval(estimate, sd, alpha):
    """``estimate -+ z_{1-alpha/2} * sd``: the normal ``1 - alpha`` interval the field reports.

    Parameters
    ----------
    estimate, sd : float
        The estimate and its standard deviation.
    alpha : float
        Significance level.

    Returns
    -------
    low, high : float

    Examples
    --------
    >>> [round(float(bound), 4) for bound in normal_interval(0.5, 0.1, 0.05)]
    [0.304, 0.696]
    """
    z = stats.norm.ppf(1 - alpha / 2)
    return estimate - z * sd, estimate + z * sd


class ProEvalBQ(FieldMethod):
    """ProEval's Bayesian-quadrature sampler (``BQPriorSampler``), with ProEval's own code.

    A Gaussian process over the questions, prior mean and covariance from the history's complete
    rows (at most ``max_history``, subsampled by seed), with ProEval's variance-reduction plan; the
    interval is the normal one of the posterior sd of the accuracy. Needs ``pip install faqstats[field]``.

    Parameters
    ----------
    noise_variance : float, default=0.3
        ProEval's GP observation noise.
    n_init : int, default=0
        ProEval's random initial queries before the acquisition.
    max_history : int, default=300
        At most this many history models as GP features.

    Attributes
    ----------
    history_ : ndarray of shape (n_complete, n_questions)
        The history's complete rows.
    n_features_in_ : int
        Number of questions.

    References
    ----------
    Google DeepMind, "ProEval: active evaluation with Bayesian quadrature" (2026),
    https://github.com/google-deepmind/proeval.

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_new=1, n_components=2, random_state=0)
    >>> ProEvalBQ().fit(bank.history).run(bank.new_outcomes[0], budget=8).n_queries  # doctest: +SKIP
    8
    """

    def __init__(self, noise_variance=0.3, n_init=0, max_history=300):
        self.noise_variance = noise_variance
        self.n_init = n_init
        self.max_history = max_history

    def check_params(self):
        check_scalar(self.noise_variance, "noise_variance", low=0.0, closed="neither")
        check_scalar(self.n_init, "n_init", kind=numbers.Integral, low=0)
        check_scalar(self.max_history, "max_history", kind=numbers.Integral, low=2)

    @staticmethod
    def _sampler_class():  # ProEval's, imported when needed
        try:
            from proeval.sampler import BQPriorSampler
        except ImportError as exc:
            raise ImportError("the 'proeval' method needs ProEval: pip install 'faqstats[field]' "
                              "(proeval==0.1.1).") from exc
        return BQPriorSampler

    def _fit(self, H):
        self._sampler_class()  # fail now, not in a worker
        complete = H[~np.isnan(H).any(axis=1)]
        if complete.shape[0] < 2:
            raise ValueError(f"ProEval needs at least 2 complete history rows, the history has {complete.shape[0]}.")
        self.history_ = complete

    def _design_key(self, seed):
        subsampled = self.history_.shape[0] > self.max_history
        return seed if subsampled or self.n_init > 0 else 0

    def _plan(self, budget, seed):
        """ProEval's plan for ``seed`` (a larger budget's greedy plan starts with a smaller one's)."""
        key = self._design_key(seed)
        cached = self._designs.get(key)
        if cached is None or len(cached.indices) < budget:
            sources = self.history_
            if sources.shape[0] > self.max_history:
                rng = np.random.default_rng(seed)
                sources = sources[np.sort(rng.choice(sources.shape[0], self.max_history, replace=False))]
            sampler = self._sampler_class()(noise_variance=self.noise_variance, n_init=self.n_init)
            cached = sampler.plan(sources.T, budget, seed=seed)  # ProEval: (items, source models)
            self._designs[key] = cached
        return cached

    def _run(self, y, budget, seed, alpha):
        plan = self._plan(budget, seed)
        idx = list(plan.indices[:budget])
        mean, integral_var = _proeval_posterior(self._sampler_class().get_posterior, plan, idx, y[idx])
        estimate = float(np.mean(mean))
        sd = float(np.sqrt(max(integral_var[0], 0.0)))
        return FieldRun(estimate, sd, *normal_interval(estimate, sd, alpha), np.asarray(idx))


def _proeval_posterior(get_posterior, plan, idx, answers):
    """ProEval's posterior after a plan's first ``len(idx)`` queries: the mean at every question, the variance of
    their mean. It reads the plan's private GP inputs: ``SamplingPlan.estimate`` needs the whole plan's answers."""
    test_x, u, noise_variance = plan._test_x, plan._prior_mean, plan._noise_variance
    mu_x = np.mean(test_x, axis=1, keepdims=True)
    mean, _ = get_posterior(test_x[:, idx], answers, test_x, noise_variance, idx, u)
    _, integral_var = get_posterior(test_x[:, idx], answers, mu_x, noise_variance, idx, u)
    return mean, integral_var
