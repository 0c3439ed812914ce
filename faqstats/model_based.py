"""A model-based estimate (asked outcomes plus unasked predictions, over ``N``) with an interval calibrated
on held-out history models (conformal, valid if the model is like the history's), checked against PAI's
design-based estimate from the same draws (docs/statistics.md, "What no predictor can buy").
"""

import hashlib
import math
import numbers
import sys
import warnings

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.base import BaseEstimator, clone
from sklearn.utils.validation import check_is_fitted

from ._progress import progress_bar
from ._validation import check_generator, check_scalar, validate_history
from .estimator import PAIEstimator
from .predictor import engine_posterior
from .model_based_predictor import AbilityFactorModel, AveragedPredictor
from .model_based_result import (CHECKS, ModelBasedResult, component_spread, conformal_quantile, min_calibration_runs,
                                 prequential_residual)
from .sampling import Sampler, VarianceReductionSampler
from .surrogate import GaussianProcessSurrogate

#: the PAIEstimator parameters a model-based run may take beyond its policy, sampler and budget
PAI_RUN_PARAMS = ("batch_size", "predict_every", "step_weights", "interval", "dtype")

__all__ = ["CHECKS", "PAI_RUN_PARAMS", "ModelBasedEstimator", "ModelBasedResult", "component_spread",
           "conformal_quantile", "min_calibration_runs", "prequential_residual", "unasked_total_variance"]


def unasked_total_variance(posterior, unasked):
    """The ``posterior``'s variance of the sum of the ``unasked`` outcomes, ``g' Sigma g + sum_j e_j``.

    Linearised as :func:`~faqstats.sampling.variance_reduction_scores`: ``g = sum_j w_j v_j`` with link slope
    ``w_j`` and own variance ``e_j`` (``p_j (1 - p_j)`` both; with a GP's ``noise``: 1 and ``noise_j``).

    Parameters
    ----------
    posterior : object
        A posterior (``predictions``; ``question_factors``, ``cov`` and ``noise`` where it has them).
    unasked : ndarray of bool, shape (N,)
        The questions whose outcomes are summed.

    Returns
    -------
    float

    Examples
    --------
    >>> from faqstats.posterior import FixedPredictions
    >>> unasked_total_variance(FixedPredictions(np.array([0.5, 0.9, 0.1])), np.array([True, False, True]))
    0.34
    """
    p = np.asarray(posterior.predictions, dtype=float)[unasked]
    noise = getattr(posterior, "noise", None)
    w = p * (1.0 - p) if noise is None else np.ones_like(p)
    e = p * (1.0 - p) if noise is None else np.asarray(noise, dtype=float)[unasked]
    V, cov = getattr(posterior, "question_factors", None), getattr(posterior, "cov", None)
    total = float(e.sum())
    if V is not None and cov is not None:
        g = w @ np.asarray(V, dtype=float)[unasked]
        total += float(g @ np.asarray(cov, dtype=float) @ g)
    return max(total, 0.0)


def _procedure(predictor, policy_predictor, sampler, budget, outcomes, seed, pai_params):
    """One run on ``outcomes``, drawn by ``policy_predictor``'s policy, estimated by ``predictor``'s posterior:
    ``(model-based estimate, its standard deviation, the components' (estimate, sd) rows, PAI's fitted estimator)``."""
    pai = PAIEstimator(policy_predictor, clone(sampler), budget, random_state=seed, **pai_params).fit(outcomes)
    return (*_model_based(predictor, pai.queries_, pai.bank_size()), pai)


def _model_based(predictor, queries, n):
    """``(estimate, its standard deviation, components)``: the asked answers plus ``predictor``'s posterior means for
    the rest after it learned the answers in draw order, over ``n``; an averaged predictor's is the weighted average
    of its components' (``components``: their ``(estimate, sd)`` rows; an empty array for a single predictor)."""
    parts, weights = getattr(predictor, "predictors_", None), getattr(predictor, "weights_", None)
    if parts is not None and weights is not None:
        each = np.array([_model_based(part, queries, n)[:2] for part in parts])
        return float(weights @ each[:, 0]), float(weights @ each[:, 1]), each
    post = engine_posterior(predictor.posterior(), n)
    asked = np.zeros(n, dtype=bool)
    answers = np.zeros(n)
    for question, outcome in zip(queries["question"], queries["outcome"]):
        post.update(int(question), float(outcome))  # in draw order, as the loop's predictor learned them
        asked[question], answers[question] = True, outcome
    prediction = np.asarray(post.predictions, dtype=float)
    total = math.fsum(answers[asked].tolist()) + math.fsum(prediction[~asked].tolist())
    return total / n, math.sqrt(unasked_total_variance(post, ~asked)) / n, np.empty((0, 2))


def _fitted_pair(fits, held_out, H, predictor, policy):
    """``(predictor, policy predictor)`` fitted on the rows of ``H`` other than ``held_out``, from ``fits`` when
    there (keyed by the held-out rows), else fitted now and stored there."""
    key = tuple(int(i) for i in held_out)
    if key not in fits:
        train = H if not key else H[np.setdiff1d(np.arange(H.shape[0]), held_out)]
        fitted = clone(predictor).fit(train)
        fits[key] = (fitted, fitted if policy is predictor else clone(policy).fit(train))
    return fits[key]


def _disagreement(estimate, pai_result):
    """``|model-based - PAI| / PAI's standard error`` (``inf`` when they differ with a zero error)."""
    gap = abs(estimate - pai_result.estimate)
    if pai_result.std_error > 0:
        return gap / pai_result.std_error
    return 0.0 if gap == 0 else math.inf


class ModelBasedEstimator(BaseEstimator):
    """Model-based accuracy estimate with a history-calibrated interval, checked by PAI.

    :meth:`calibrate` runs the whole procedure on held-out (cross-fitted) complete history rows;
    :meth:`fit` runs it on the new model. The policy's uniform floor gives PAI's estimate from the same draws.

    Parameters
    ----------
    predictor : Predictor or None, default=None
        An unfitted predictor (cloned for every fold); ``None``: the average of the surrogate and an ability
        model, ``AveragedPredictor([GaussianProcessSurrogate(noise_floor=0.1), AbilityFactorModel(n_components=1,
        prior_scale=4.0)])``, whose ability moves the mean prediction with the answers, so a model better than
        every history model is less underestimated. ``GaussianProcessSurrogate(noise_floor=0.1)`` alone was the
        default before (as accurate on models like the history's, further off on better ones).
    sampler : Sampler or None, default=None
        The policy; ``None``: ``VarianceReductionSampler(tau=0.35, power=8)``.
    budget : int, default=20
        Questions asked of each model.
    policy_predictor : Predictor, "same" or None, default=None
        The predictor whose posterior drives the policy and PAI's increments (cloned for every fold);
        ``None``: ``predictor`` (with the default predictor, its surrogate); ``"same"``: ``predictor``.
    n_folds : int or "auto", default="auto"
        Folds of the cross-fitted calibration; ``"auto"``: leave-one-out up to 50 calibration models, else 10.
    max_calibration_models : int, default=200
        At most this many held-out history models are run (a seeded subset of the complete rows).
    check_level : float in (0, 1), default=0.1
        A model like the history's is flagged by any check with probability at most this: every check compares
        a statistic of the run with the calibration runs' at ``check_level / len(checks)`` (conformal, Bonferroni).
    checks : "auto" or sequence of str, default="auto"
        The checks (names of :data:`~faqstats.model_based.CHECKS`): ``"disagreement"`` (with PAI),
        ``"residual"`` (the answers against the predictions), ``"components"`` (the spread of an
        :class:`~faqstats.model_based_predictor.AveragedPredictor`'s component estimates), ``"above"`` and
        ``"below"`` (the estimate beyond the calibration models' estimates: a model leading or trailing the
        history). ``"auto"``: disagreement and residual. More checks each get a smaller share of the level:
        on frontier splits of two real banks, adding components and above flagged more runs but not more of
        the runs whose interval missed (docs/statistics.md).
    pai_params : dict or None, default=None
        Further :class:`~faqstats.PAIEstimator` parameters of every run (``batch_size``, ``predict_every``,
        ``step_weights``, ``interval``, ``dtype``): the design of a session this estimator calibrates
        (:meth:`EvaluationSession.model_based <faqstats.EvaluationSession.model_based>`).
    random_state : int, Generator or None, default=None
        Seeds the folds and every run.
    verbose : bool, default=True
        A progress bar over the calibration runs.

    Attributes
    ----------
    predictor_ : Predictor
        The predictor fitted on the whole history (the one the new model's estimate uses).
    policy_predictor_ : Predictor
        The same for the policy and PAI (``predictor_`` itself when they are the same).
    sampler_ : Sampler
        The policy of every run.
    calibration_ : pandas.DataFrame
        One row per calibration run (truth, both estimates, score, disagreement, residual).
    result_ : ModelBasedResult
        After :meth:`fit`.
    estimate_ : float
        After :meth:`fit`: the model-based estimate.

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=80, n_components=2, random_state=0)
    >>> est = ModelBasedEstimator.from_history(bank.history, budget=10, random_state=0, verbose=False)
    >>> est.fit(bank.new_outcomes[0]).result_.design_based.n_queries
    10
    >>> low, high = est.conf_int()
    >>> bool(low <= est.estimate_ <= high)
    True
    """

    def __init__(self, predictor=None, sampler=None, budget=20, *, policy_predictor=None, n_folds="auto",
                 max_calibration_models=200, check_level=0.1, checks="auto", pai_params=None, random_state=None,
                 verbose=True):
        self.predictor = predictor
        self.sampler = sampler
        self.budget = budget
        self.policy_predictor = policy_predictor
        self.n_folds = n_folds
        self.max_calibration_models = max_calibration_models
        self.check_level = check_level
        self.checks = checks
        self.pai_params = pai_params
        self.random_state = random_state
        self.verbose = verbose

    @classmethod
    def from_history(cls, history, budget, **params):
        """A calibrated estimator: ``cls(budget=budget, **params).calibrate(history)``.

        Parameters
        ----------
        history : array-like of shape (n_models, N)
            Earlier models' outcomes in [0, 1], NaN where not observed.
        budget : int
            Questions asked of each model.
        **params
            The other parameters of the class.

        Returns
        -------
        ModelBasedEstimator
        """
        return cls(budget=budget, **params).calibrate(history)

    @classmethod
    def budget_report(cls, history, budgets, alpha=0.05, **params):
        """The validated error of both estimates at each budget, with the guarantee each carries: the choice
        between them, made on the history before any new model is asked.

        Parameters
        ----------
        history : array-like of shape (n_models, N)
            Earlier models' outcomes in [0, 1], NaN where not observed.
        budgets : sequence of int
            Questions asked of each model.
        alpha : float in (0, 1), default=0.05
        **params
            The other parameters of the class.

        Returns
        -------
        pandas.DataFrame
            :meth:`calibration_report`'s rows for every budget, indexed by budget and method.

        Examples
        --------
        >>> import faqstats as fq
        >>> bank = fq.make_synthetic_bank(n_models=30, n_questions=40, n_components=2, random_state=0)
        >>> report = ModelBasedEstimator.budget_report(bank.history, [4, 8], max_calibration_models=20, n_folds=2,
        ...                                            random_state=0, verbose=False)
        >>> report.index.names, report.shape
        (FrozenList(['budget', 'method']), (4, 4))
        """
        budgets = [check_scalar(b, "budget", kind=numbers.Integral, low=1) for b in budgets]
        if not budgets:
            raise ValueError("budgets must name at least one budget.")
        fits = {}  # the folds' predictors, fitted once for every budget
        reports = {b: cls(budget=b, **params).calibrate(history, fold_fits=fits).calibration_report(alpha)
                   for b in budgets}
        return pd.concat(reports, names=["budget"])

    def _parts(self):
        # defaults chosen on calibration runs of real banks: a noise floor of 0.1 keeps the surrogate from trusting
        # single answers too much; a floor of 0.35 keeps PAI's check about as precise as the uniform sample mean
        # the default estimate averages the surrogate with an ability that follows the answers past the history's
        # best, on the surrogate's draws (measured on random and frontier splits of two real banks: statistics.md)
        predictor, policy = self.predictor, self.policy_predictor
        same = isinstance(policy, str) and policy == "same"
        if predictor is None:
            if same:
                raise ValueError("policy_predictor='same' needs a predictor: the default averages two, on the draws "
                                 "of its surrogate (policy_predictor=None).")
            surrogate = GaussianProcessSurrogate(noise_floor=0.1, random_state=0)
            predictor = AveragedPredictor([surrogate, AbilityFactorModel(n_components=1, prior_scale=4.0)])
            policy = surrogate if policy is None else policy
        if policy is None or same:
            policy = predictor
        elif not callable(getattr(policy, "fit", None)):
            raise TypeError(f"policy_predictor must be a predictor, 'same' or None, got {self.policy_predictor!r}.")
        sampler = VarianceReductionSampler(tau=0.35, power=8.0) if self.sampler is None else self.sampler
        if not isinstance(sampler, Sampler):
            raise TypeError(f"sampler must be a sequential faqstats Sampler, got {type(sampler).__name__}.")
        if not (isinstance(self.n_folds, str) and self.n_folds == "auto"):
            check_scalar(self.n_folds, "n_folds", kind=numbers.Integral, low=2)
        check_scalar(self.max_calibration_models, "max_calibration_models", kind=numbers.Integral, low=1)
        check_scalar(self.check_level, "check_level", low=0.0, high=1.0, closed="neither")
        pai_params = {} if self.pai_params is None else dict(self.pai_params)
        unknown = sorted(set(pai_params) - set(PAI_RUN_PARAMS))
        if unknown:
            raise ValueError(f"pai_params takes {list(PAI_RUN_PARAMS)}, got {unknown}.")
        return predictor, policy, sampler, pai_params

    def _checks(self, predictor):
        """The checks' names, validated (``"auto"`` resolved for ``predictor``)."""
        averaged = isinstance(predictor, AveragedPredictor) and len(predictor.predictors) >= 2
        if isinstance(self.checks, str) and self.checks == "auto":
            return ("disagreement", "residual")
        names = tuple(self.checks) if isinstance(self.checks, (list, tuple)) else None
        if not names or any(not isinstance(n, str) or n not in CHECKS for n in names) or len(set(names)) < len(names):
            raise ValueError(f"checks must be 'auto' or distinct names among {list(CHECKS)}, got {self.checks!r}.")
        if "components" in names and not averaged:
            raise ValueError("the 'components' check needs an AveragedPredictor of at least two predictors, got "
                             f"{type(predictor).__name__}.")
        return names

    def calibrate(self, history, *, fold_fits=None):
        """Fit the predictor on ``history`` and run the procedure on its held-out complete rows.

        Parameters
        ----------
        history : array-like of shape (n_models, N)
            Earlier models' outcomes in [0, 1], NaN where not observed; complete rows are calibration models.
        fold_fits : dict or None, default=None
            An empty dict, then the same dict for the calibrations of other budgets on the same history with the
            same parameters: the folds' predictors are fitted once and reused (a fit depends on its training rows,
            not on the budget), as :meth:`budget_report` does. A dict filled for another history or other
            parameters is refused.

        Returns
        -------
        self
        """
        if fold_fits is not None and not isinstance(fold_fits, dict):
            raise TypeError(f"fold_fits must be a dict or None, got {type(fold_fits).__name__}.")
        predictor, policy, sampler, pai_params = self._parts()
        checks = self._checks(predictor)
        H = validate_history(self, history, reset=True, allow_empty_rows=True)
        fits = {} if fold_fits is None else fold_fits
        if fold_fits is not None:  # shared: what the fits depend on must match (not the budget or the runs' seed)
            with np.printoptions(threshold=sys.maxsize):  # whole reprs: sklearn and numpy abbreviate
                params = clone(self).set_params(budget=1, random_state=None, verbose=False).__repr__(N_CHAR_MAX=10**9)
            made_for = (H.shape, hashlib.sha256(np.ascontiguousarray(H).tobytes()).hexdigest(), params)
            if fits.setdefault("made for", made_for) != made_for:
                raise ValueError("fold_fits holds predictors fitted for another history or other parameters; pass an "
                                 "empty dict for this calibration.")
        rng = check_generator(self.random_state)
        complete = np.flatnonzero(~np.isnan(H).any(axis=1))
        if complete.size < 2:
            raise ValueError("calibration needs at least 2 complete history rows (every question observed, so that "
                             f"their accuracy is known); the history has {complete.size}.")
        chosen = np.sort(rng.choice(complete, min(complete.size, self.max_calibration_models), replace=False))
        n_folds = (chosen.size if chosen.size <= 50 else 10) if isinstance(self.n_folds, str) else self.n_folds
        if chosen.size < n_folds:
            raise ValueError(f"n_folds={n_folds} but the history has {chosen.size} complete rows to calibrate on.")
        folds = np.array_split(rng.permutation(chosen), n_folds)
        rows = []
        with progress_bar(chosen.size, "calibrating", self.verbose) as bar:
            for fold in folds:
                fitted, fitted_policy = _fitted_pair(fits, np.sort(fold), H, predictor, policy)
                for i in fold:
                    z = H[i]
                    estimate, scale, parts, pai = _procedure(fitted, fitted_policy, sampler, self.budget, z, rng,
                                                             pai_params)
                    truth = float(np.mean(z))
                    rows.append((int(i), truth, estimate, scale, pai.estimate_, pai.std_error_,
                                 abs(estimate - truth) / scale if scale > 0 else math.inf,
                                 _disagreement(estimate, pai.result_), prequential_residual(pai.queries_),
                                 component_spread(parts[:, 0], scale), *parts[:, 0], *parts[:, 1]))
                    bar.update(1)
        k = len(rows[0]) - 10
        self.calibration_ = pd.DataFrame(rows, columns=["row", "truth", "estimate", "scale", "pai_estimate",
                                                        "pai_std_error", "score", "disagreement", "residual", "spread",
                                                        *(f"estimate_{c}" for c in range(k // 2)),
                                                        *(f"scale_{c}" for c in range(k // 2))])
        level = self.check_level / len(checks)
        needed, needed_checks = min_calibration_runs(0.05), min_calibration_runs(level)
        if chosen.size < max(needed, needed_checks):  # said now, not only in each summary
            warnings.warn(f"{chosen.size} calibration runs (the history's complete rows, at most "
                          f"max_calibration_models): a 95% calibrated interval needs at least {needed} runs and a "
                          f"check at level {level:.3g} needs {needed_checks}; below that the interval is [0, 1] and "
                          "the checks cannot fire, and the design-based interval is the one to use.", UserWarning,
                          stacklevel=2)
        self.predictor_, self.policy_predictor_ = _fitted_pair(fits, np.empty(0, dtype=int), H, predictor, policy)
        self.sampler_ = sampler
        self.n_features_in_ = H.shape[1]
        return self

    def calibration_report(self, alpha=0.05):
        """The validated error of both estimates on the calibration runs, with the guarantee each carries.

        Parameters
        ----------
        alpha : float in (0, 1), default=0.05

        Returns
        -------
        pandas.DataFrame
            By method: RMSE, mean width and (leave-one-out) coverage of the held-out runs, and the guarantee.
        """
        check_is_fitted(self, "calibration_")
        c = self.calibration_
        err = c["estimate"] - c["truth"]
        scores = c["score"].to_numpy()
        q = np.array([conformal_quantile(np.delete(scores, i), alpha) for i in range(scores.size)])
        z = stats.norm.ppf(1 - alpha / 2)
        pai_half = z * c["pai_std_error"]
        return pd.DataFrame({
            "rmse": [float(np.sqrt(np.mean(err**2))), float(np.sqrt(np.mean((c["pai_estimate"] - c["truth"]) ** 2)))],
            "mean width": [float(np.mean(2 * q * c["scale"])), float(np.mean(2 * pai_half))],
            "coverage": [float(np.mean(scores <= q)),
                         float(np.mean(np.abs(c["pai_estimate"] - c["truth"]) <= pai_half))],
            "guarantee": ["if the model is like the history's", "every model"],
        }, index=pd.Index(["model-based", "design-based (PAI)"], name="method"))

    def fit(self, outcomes, y=None):
        """Run the procedure on the new model's ``outcomes`` (an array or a callable, as for PAIEstimator).

        Parameters
        ----------
        outcomes : array-like of shape (N,) or callable
            As in :meth:`PAIEstimator.fit`.
        y : None
            Ignored.

        Returns
        -------
        self
        """
        check_is_fitted(self, "calibration_")
        pai_params = self._parts()[3]
        estimate, scale, parts, pai = _procedure(self.predictor_, self.policy_predictor_, self.sampler_, self.budget,
                                                 outcomes, check_generator(self.random_state), pai_params)
        return self._set_result(estimate, scale, parts, pai.queries_, pai.result_)

    def fit_queries(self, queries, design_based):
        """The result of a run made elsewhere with this estimator's design (a session's answers).

        The calibration holds only if the draws were made as :meth:`fit` makes them: the same policy predictor,
        sampler, budget and ``pai_params`` (:meth:`EvaluationSession.model_based
        <faqstats.EvaluationSession.model_based>` checks a session's).

        Parameters
        ----------
        queries : pandas.DataFrame or structured ndarray
            The run's draws in order, with ``question``, ``outcome`` and ``prediction`` (as
            :attr:`PAIEstimator.queries_`).
        design_based : AccuracyResult
            PAI's result of the same run.

        Returns
        -------
        self
        """
        check_is_fitted(self, "calibration_")
        estimate, scale, parts = _model_based(self.predictor_, queries, self.n_features_in_)
        return self._set_result(estimate, scale, parts, queries, design_based)

    def _set_result(self, estimate, scale, parts, queries, design_based):
        self.queries_ = queries
        self.estimate_, self.scale_, self.component_estimates_ = estimate, scale, parts[:, 0].copy()
        c = self.calibration_
        self.result_ = ModelBasedResult(estimate, scale, c["score"].to_numpy(), design_based,
                                        _disagreement(estimate, design_based), c["disagreement"].to_numpy(),
                                        prequential_residual(queries), c["residual"].to_numpy(), self.check_level,
                                        spread=component_spread(parts[:, 0], scale),
                                        spread_scores=c["spread"].to_numpy(),
                                        calibration_estimates=c["estimate"].to_numpy(),
                                        checks=self._checks(self.predictor))
        return self

    def conf_int(self, alpha=0.05):
        """The calibrated model-based interval (:meth:`ModelBasedResult.conf_int`).

        Parameters
        ----------
        alpha : float in (0, 1), default=0.05

        Returns
        -------
        low : float
        high : float
        """
        check_is_fitted(self, "result_")
        return self.result_.conf_int(alpha)

    confint = conf_int

    def summary(self, alpha=0.05):
        """:meth:`ModelBasedResult.summary` of the last fit.

        Parameters
        ----------
        alpha : float in (0, 1), default=0.05

        Returns
        -------
        statsmodels.iolib.summary2.Summary
        """
        check_is_fitted(self, "result_")
        return self.result_.summary(alpha)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags
