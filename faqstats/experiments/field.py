"""The unguaranteed field as experiment methods, side by side with PAI (docs/results.md): their base
:class:`FieldMethod`, ProEval's Bayesian quadrature and the model-based estimate (the IRT ones: field_irt.py).

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
from ..model_based import ModelBasedEstimator
from .records import RECORD_COLUMNS, method_key

__all__ = ["FieldMethod", "FieldRun", "ModelBased", "ProEvalBQ", "normal_interval"]


@dataclass(frozen=True)
class FieldRun:
    """One :class:`FieldMethod` run on one new model: the estimate, the method's own std_error and interval (NaN
    where it has none), and the queried questions in query order.
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
    """Base of the field's methods: :meth:`fit` on the history, then :meth:`run` on a new model.

    Subclasses implement ``_fit(H)``, ``_run(y, budget, seed, alpha)`` and maybe ``_design_key``.
    """

    def check_params(self):
        """Check the parameters (a ValueError names the bad one); subclasses add theirs."""

    def fit(self, history, y=None):
        """Check the parameters and fit on the history (0/1, NaN = not observed)."""
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
        """Query ``budget`` distinct questions of a new model's complete 0/1 ``outcomes`` and estimate its accuracy.

        ``alpha``: the level of the method's own interval; ``random_state`` seeds the design, the same for every model.
        """
        y = self._check_run(outcomes, budget, alpha)
        return self._run(y, int(budget), check_seed(random_state), float(alpha))

    def _design_key(self, seed):
        """What a design depends on: the seed, or a constant for a method without randomness."""
        return seed

    def run_records(self, name, fraction, budget, seeds, new, truths, rows, random_state, alpha):
        """:func:`~faqstats.experiments.run_methods`' records of one budget and some ``seeds`` (each one design,
        shared by the new models); ``covered`` is NaN where the method gives no interval.
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
    """``estimate -+ z_{1-alpha/2} * sd``: the normal ``1 - alpha`` interval the field reports."""
    z = stats.norm.ppf(1 - alpha / 2)
    return estimate - z * sd, estimate + z * sd


class ModelBased(FieldMethod):
    """The model-based estimate: :class:`~faqstats.ModelBasedEstimator`, calibrated per budget on the history."""

    def __init__(self, max_calibration_models=200, random_state=0):
        self.max_calibration_models = max_calibration_models
        self.random_state = random_state

    def check_params(self):
        check_scalar(self.max_calibration_models, "max_calibration_models", kind=numbers.Integral, low=1)

    def _fit(self, H):
        self.history_ = H
        self.estimators_ = {}

    def _run(self, y, budget, seed, alpha):
        if budget not in self.estimators_:  # the history alone: the split's held-out history models
            self.estimators_[budget] = ModelBasedEstimator(
                budget=budget, max_calibration_models=self.max_calibration_models,
                random_state=self.random_state, verbose=False).calibrate(self.history_)
        est = self.estimators_[budget].set_params(random_state=seed).fit(y)
        low, high = est.conf_int(alpha)
        queried = est.queries_["question"]
        return FieldRun(est.estimate_, est.scale_, low, high, queried)


class ProEvalBQ(FieldMethod):
    """ProEval's Bayesian-quadrature sampler (``BQPriorSampler``, https://github.com/google-deepmind/proeval).

    A GP over the questions, its prior from the history's complete rows (at most ``max_history``, subsampled by
    seed), ProEval's variance-reduction plan; a normal interval from the accuracy's posterior sd. Needs
    ``faqstats[field]``.
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
