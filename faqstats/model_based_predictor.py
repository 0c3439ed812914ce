"""A logistic factor model with a free ability on unit loadings, ``logit p_ij = theta_i + c_j + u_i . v_j``: a new
model's ability moves its predicted accuracy with its answers (and past the history's best), as the Rasch model's;
and the weighted average of several predictors' predictions, each conditioned on the same answers."""

import numbers

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from ._validation import check_generator, check_scalar, validate_history
from .factor_model import FactorModelView
from .predictor import LowRankPredictor, Predictor, register_predictor

__all__ = ["AbilityFactorModel", "AveragedPredictor"]


class AbilityFactorModel(FactorModelView, LowRankPredictor):
    """Rasch model plus low-rank logistic interactions, fitted on a history by penalised maximum likelihood.

    ``H[i, j] ~ Bernoulli(sigmoid(theta_i + c_j + u_i . v_j))`` on the observed cells, with penalties
    ``theta ~ N(0, 1 / ability_regularization)``, ``c_j ~ N(0, 1 / regularization)`` and
    ``regularization * (|u_i|^2 + |v_j|^2) / 2`` (L-BFGS). A new model's factor is ``(theta, 1, u)`` with the
    question factors ``(1, c_j, v_j)``: its prior is the history's mean and covariance of ``(theta, u)`` (the ability's
    variance times ``prior_scale``). The ability's loading is one on every question, so the posterior moves the
    mean prediction with the answers (the Rasch score equation) while ``u`` carries what the history's
    correlations say about single questions.

    Parameters
    ----------
    n_components : int, default=4
        Rank ``k`` of the interactions (0: the Rasch model).
    regularization : float > 0, default=1.0
        Penalty on the interaction factors and the question intercepts.
    ability_regularization : float > 0, default=0.01
        Penalty on the abilities (weak: the history's ability spread is learned, not imposed).
    prior_scale : float > 0, default=1.0
        Factor on the new model's prior variance of the ability.
    max_iter : int, default=500
        L-BFGS iterations.
    random_state : int, Generator or None, default=0
        Seeds the interactions' starting values.

    Attributes
    ----------
    abilities_ : ndarray of shape (n_models,)
    intercepts_ : ndarray of shape (N,)
        The question intercepts ``c_j``.
    question_factors_ : ndarray of shape (N, k + 2)
        ``(1, c_j, v_j)``.
    model_factors_ : ndarray of shape (n_models, k + 2)
        ``(theta_i, 1, u_i)``.
    prior_mean_, prior_cov_ : ndarray of shape (k + 2,), (k + 2, k + 2)
        The new model's prior (the intercept's coordinate fixed at 1).
    n_iter_, n_features_in_ : int

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=50, n_components=2, random_state=0)
    >>> fm = AbilityFactorModel(n_components=2).fit(bank.history)
    >>> fm.question_factors_.shape, float(fm.prior_cov_[1, 1])
    ((50, 4), 0.0)
    """

    def __init__(self, n_components=4, regularization=1.0, ability_regularization=0.01, prior_scale=1.0,
                 max_iter=500, random_state=0):
        self.n_components = n_components
        self.regularization = regularization
        self.ability_regularization = ability_regularization
        self.prior_scale = prior_scale
        self.max_iter = max_iter
        self.random_state = random_state

    def _check_params(self):
        check_scalar(self.n_components, "n_components", kind=numbers.Integral, low=0)
        check_scalar(self.regularization, "regularization", low=0.0, closed="neither")
        check_scalar(self.ability_regularization, "ability_regularization", low=0.0, closed="neither")
        check_scalar(self.prior_scale, "prior_scale", low=0.0, closed="neither")
        check_scalar(self.max_iter, "max_iter", kind=numbers.Integral, low=1)

    def fit(self, X, y=None):
        """Fit abilities, question intercepts and interactions on a history.

        Parameters
        ----------
        X : array-like of shape (n_models, N)
            Outcomes in [0, 1], NaN where not observed.
        y : None
            Ignored.

        Returns
        -------
        AbilityFactorModel
        """
        self._check_params()
        H = validate_history(self, X, reset=True)
        n_models, n = H.shape
        if n_models < 2:
            raise ValueError(f"An ability factor model needs at least 2 history models, got {n_models}.")
        observed = ~np.isnan(H)
        Y, W = np.where(observed, H, 0.0), observed.astype(float)
        k, lam, lam_theta = int(self.n_components), float(self.regularization), float(self.ability_regularization)
        row = np.clip((Y.sum(1) + 0.5) / (W.sum(1) + 1.0), 0.02, 0.98)
        col = np.clip((Y.sum(0) + 0.5) / (W.sum(0) + 1.0), 0.02, 0.98)
        theta0 = np.log(row / (1 - row))
        theta0 -= theta0.mean()
        rng = check_generator(self.random_state)
        start = np.concatenate([theta0, np.log(col / (1 - col)), 0.1 * rng.standard_normal((n_models + n) * k)])

        def unpack(x):
            theta, c = x[:n_models], x[n_models:n_models + n]
            U = x[n_models + n:n_models + n + n_models * k].reshape(n_models, k)
            return theta, c, U, x[n_models + n + n_models * k:].reshape(n, k)

        def objective(x):
            theta, c, U, V = unpack(x)
            logits = theta[:, None] + c + U @ V.T
            loss = np.sum(W * (np.logaddexp(0.0, logits) - Y * logits))
            loss += 0.5 * (lam_theta * theta @ theta + lam * (c @ c + np.sum(U**2) + np.sum(V**2)))
            R = W * (expit(logits) - Y)
            grad = np.concatenate([R.sum(1) + lam_theta * theta, R.sum(0) + lam * c, (R @ V + lam * U).ravel(),
                                   (R.T @ U + lam * V).ravel()])
            return loss, grad

        with threadpool_limits(1, user_api="blas"):  # small products: threads only add contention
            result = minimize(objective, start, jac=True, method="L-BFGS-B", options={"maxiter": int(self.max_iter)})
        theta, c, U, V = unpack(result.x)
        P = expit(theta[:, None] + c + U @ V.T)
        posterior_var = 1.0 / ((W * P * (1 - P)).sum(1) + lam_theta)  # each ability's Laplace variance
        F = np.column_stack([theta, U])  # the new model's prior: the history's (theta, u), jointly
        cov = np.cov(F, rowvar=False, ddof=1).reshape(k + 1, k + 1)
        cov[0, 0] += posterior_var.mean()
        scale = np.ones(k + 1)
        scale[0] = np.sqrt(float(self.prior_scale))
        cov = 0.5 * (cov + cov.T) * np.outer(scale, scale) + np.eye(k + 1) * 1e-8 * max(np.trace(cov) / (k + 1), 1e-12)
        self.abilities_, self.intercepts_ = theta, c
        self.question_factors_ = np.column_stack([np.ones(n), c, V])
        self.model_factors_ = np.column_stack([theta, np.ones(n_models), U])
        self.prior_mean_ = np.concatenate([[theta.mean(), 1.0], U.mean(0)])
        full = np.zeros((k + 2, k + 2))
        keep = np.r_[0, 2:k + 2]
        full[np.ix_(keep, keep)] = cov
        self.prior_cov_ = full
        self.observed_questions_ = observed.any(axis=0)
        self.n_iter_ = int(result.nit)
        return self

    def predict_proba(self, model_factors):
        """P(correct) of every question for the model factor(s) ``(theta, 1, u)``.

        Parameters
        ----------
        model_factors : array-like of shape (k + 2,) or (m, k + 2)

        Returns
        -------
        ndarray of shape (N,) or (m, N)
        """
        check_is_fitted(self, "question_factors_")
        return expit(np.asarray(model_factors, dtype=float) @ self.question_factors_.T)


register_predictor(AbilityFactorModel)


class AveragedPredictor(Predictor):
    """The weighted average of several predictors' predictions, each conditioned on the same answers.

    In :class:`~faqstats.ModelBasedEstimator` its estimate is the weighted average of the components' model-based
    estimates on the same draws, with standard deviation the weighted average of theirs. Averaging predictors
    whose errors differ (a Gaussian process surrogate, whose mean stays near the history's, and an ability model,
    whose mean follows the answers) can lower the error of either alone, and the bias of the surrogate alone for
    a model better than the history's.

    Parameters
    ----------
    predictors : list of Predictor
        Unfitted predictors (cloned in :meth:`fit`).
    weights : array-like of shape (len(predictors),) or None, default=None
        Non-negative weights, normalised to sum to one; ``None``: equal weights.

    Attributes
    ----------
    predictors_ : list of Predictor
        The fitted components.
    weights_ : ndarray of shape (len(predictors),)
        The normalised weights.
    n_features_in_ : int

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=40, n_questions=30, n_components=2, random_state=0)
    >>> avg = AveragedPredictor([fq.GaussianProcessSurrogate(), AbilityFactorModel(n_components=1)]).fit(bank.history)
    >>> post = avg.posterior()
    >>> post.update(0, 1.0)
    >>> post.predictions.shape, avg.weights_.tolist()
    ((30,), [0.5, 0.5])

    A model-based estimate averaging the surrogate and an ability model, on the surrogate's draws:

    >>> gp = fq.GaussianProcessSurrogate(noise_floor=0.1)
    >>> avg = AveragedPredictor([gp, AbilityFactorModel(n_components=1, prior_scale=4.0)])
    >>> est = fq.ModelBasedEstimator(predictor=avg, policy_predictor=gp, budget=8, n_folds=3,
    ...                              max_calibration_models=20, random_state=0, verbose=False)
    >>> est.calibrate(bank.history).fit(bank.new_outcomes[0]).result_.design_based.n_queries
    8
    """

    def __init__(self, predictors, weights=None):
        self.predictors = predictors
        self.weights = weights

    def fit(self, X, y=None):
        """Fit every component on the history.

        Parameters
        ----------
        X : array-like of shape (n_models, N)
            Outcomes in [0, 1], NaN where not observed.
        y : None
            Ignored.

        Returns
        -------
        AveragedPredictor
        """
        parts = list(self.predictors) if isinstance(self.predictors, (list, tuple)) else None
        if not parts or not all(callable(getattr(p, "fit", None)) for p in parts):
            raise TypeError(f"predictors must be a non-empty list of predictors, got {self.predictors!r}.")
        w = np.ones(len(parts)) if self.weights is None else np.asarray(self.weights, dtype=float)
        if w.shape != (len(parts),) or not np.all(np.isfinite(w)) or w.min() < 0 or w.sum() <= 0:
            raise ValueError(f"weights must be {len(parts)} non-negative numbers, not all zero, got {self.weights!r}.")
        self.predictors_ = [clone(p).fit(X) for p in parts]
        self.weights_ = w / w.sum()
        self.n_features_in_ = self.predictors_[0].n_features_in_
        return self

    def posterior(self, dtype="float64", predict_every=1):
        """A new model's posterior: every component's, updated together, predicting their weighted average.

        Parameters
        ----------
        dtype : {"float64", "float32"}, default="float64"
        predict_every : int, default=1

        Returns
        -------
        AveragedPosterior
        """
        check_is_fitted(self, "predictors_")
        return AveragedPosterior([p.posterior(dtype=dtype, predict_every=predict_every) for p in self.predictors_],
                                 self.weights_)


class AveragedPosterior:
    """The components' posteriors updated with the same answers; ``predictions`` their weighted average.

    Parameters
    ----------
    components : list of posterior
    weights : ndarray of shape (len(components),)

    Examples
    --------
    >>> from faqstats.posterior import FixedPredictions
    >>> post = AveragedPosterior([FixedPredictions(np.array([0.2, 0.4])), FixedPredictions(np.array([0.6, 0.8]))],
    ...                          np.array([0.5, 0.5]))
    >>> post.predictions.tolist()
    [0.4, 0.6000000000000001]
    """

    def __init__(self, components, weights):
        self.components, self.weights = list(components), np.asarray(weights, dtype=float)
        self._average()

    def _average(self):
        """Recompute the weighted average of the components' predictions."""
        parts = [w * np.asarray(c.predictions, dtype=float) for w, c in zip(self.weights, self.components)]
        self.predictions = sum(parts)

    def update(self, question, outcome):
        """Condition every component on ``outcome`` at ``question``.

        Parameters
        ----------
        question : int
        outcome : float
        """
        for c in self.components:
            c.update(question, outcome)
        self._average()
