"""Item response theory as a PAI predictor: the 2PL and Rasch models, rank-2 logistic factor models with
``u = (theta, 1)``, ``v_j = (a_j, c_j)`` and prior covariance ``diag(var theta, 0)``."""

import numbers

import numpy as np
from scipy.special import expit
from sklearn.base import TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ._validation import check_scalar, validate_history
from .factor_model import FactorModelView, held_out_logit_score
from .predictor import LowRankPredictor, register_predictor

__all__ = ["ItemResponseModel"]

#: the largest Newton step of one parameter in one sweep (logits): damping far from the optimum
_MAX_STEP = 2.0


class ItemResponseModel(FactorModelView, TransformerMixin, LowRankPredictor):
    """Two-parameter logistic (2PL) or Rasch model of a partially observed outcome matrix.

    Fits ``H[i, j] ~ Bernoulli(sigmoid(a_j theta_i + c_j))`` on the observed cells (joint MAP under ``theta_i ~
    N(0, 1)``, ``a_j ~ N(1, 1 / regularization)``, ``c_j ~ N(0, 1 / regularization)``) by alternating Newton
    sweeps, then centres the abilities (2PL: to standard deviation 1 too).

    Parameters
    ----------
    model : {"2pl", "rasch"}, default="2pl"
        ``"rasch"`` fixes every discrimination ``a_j`` to 1.
    regularization : float > 0, default=0.1
        Prior precision of ``a_j - 1`` and of ``c_j``.
    max_iter : int, default=200
    tol : float, default=1e-7
        Stop when a sweep lowers the objective by less than ``tol`` (relative).
    prior_scale : float > 0, default=1.0
        Factor on the new model's prior variance of the ability.
    random_state : int, Generator or None, default=None
        Seeds the split of each row's cells in :meth:`score`.

    Attributes
    ----------
    discrimination_, intercepts_, difficulty_ : ndarray of shape (N,)
        ``a_j``, ``c_j`` and ``b_j = -c_j / a_j``.
    abilities_ : ndarray of shape (n_models,)
    question_factors_, model_factors_ : ndarray of shape (N, 2), (n_models, 2)
        ``(a_j, c_j)`` and ``(theta_i, 1)``.
    prior_mean_, prior_cov_ : ndarray of shape (2,), (2, 2)
        ``(0, 1)`` and ``diag(prior_scale * var theta, 0)`` (spread plus mean posterior variance).
    observed_questions_ : ndarray of bool, shape (N,)
        The others get the median ``a`` and mean ``c``.
    n_iter_, n_features_in_ : int

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=100, n_questions=60, n_components=2, random_state=0)
    >>> irt = fq.ItemResponseModel().fit(bank.history)
    >>> irt.question_factors_.shape, float(irt.prior_cov_[1, 1])
    ((60, 2), 0.0)
    >>> fq.PAIEstimator(irt, budget=15, random_state=0).fit(bank.new_outcomes[0]).n_queries_
    15
    """

    def __init__(self, model="2pl", regularization=0.1, max_iter=200, tol=1e-7, prior_scale=1.0, random_state=None):
        self.model = model
        self.regularization = regularization
        self.max_iter = max_iter
        self.tol = tol
        self.prior_scale = prior_scale
        self.random_state = random_state

    def _check_params(self):
        if self.model not in ("2pl", "rasch"):
            raise ValueError(f"model must be '2pl' or 'rasch', got {self.model!r}.")
        check_scalar(self.regularization, "regularization", low=0.0, closed="neither")
        check_scalar(self.max_iter, "max_iter", kind=numbers.Integral, low=1)
        check_scalar(self.tol, "tol", low=0.0)
        check_scalar(self.prior_scale, "prior_scale", low=0.0, closed="neither")

    def fit(self, X, y=None):
        """Fit the item parameters and the history models' abilities.

        Parameters
        ----------
        X : array-like of shape (n_models, n_questions)
        y : None

        Returns
        -------
        ItemResponseModel
        """
        self._check_params()
        H = validate_history(self, X, reset=True)
        if H.shape[0] < 2:
            raise ValueError(f"An item response model needs at least 2 history models, got {H.shape[0]}.")
        M = ~np.isnan(H)
        Y = np.where(M, H, 0.0)
        lam = float(self.regularization)
        two_pl = self.model == "2pl"

        # start: abilities from the rows' standardised logits, intercepts from the columns'
        row = np.clip(Y.sum(1) / np.maximum(M.sum(1), 1), 0.02, 0.98)
        theta = np.log(row / (1 - row))
        theta = (theta - theta.mean()) / (theta.std() + 1e-12)
        col = np.clip((Y.sum(0) + 0.5) / (M.sum(0) + 1.0), 0.02, 0.98)
        a, c = np.ones(H.shape[1]), np.log(col / (1 - col))

        def objective(theta, a, c):
            logits = theta[:, None] * a + c
            # cross-entropy of the observed cells, log-space: log(1 + e^x) - y x
            loss = np.sum(M * (np.logaddexp(0.0, logits) - Y * logits))
            return loss + 0.5 * (np.sum(theta**2) + lam * (np.sum((a - 1) ** 2) * two_pl + np.sum(c**2)))

        previous = objective(theta, a, c)
        for n_iter in range(1, int(self.max_iter) + 1):
            P = expit(theta[:, None] * a + c)
            R, W = M * (Y - P), M * P * (1 - P)
            g_c, h_cc = R.sum(0) - lam * c, W.sum(0) + lam
            if two_pl:  # a 2 x 2 Newton step per question, in closed form
                g_a, h_aa, h_ac = R.T @ theta - lam * (a - 1), W.T @ theta**2 + lam, W.T @ theta
                det = h_aa * h_cc - h_ac**2
                a = a + np.clip((h_cc * g_a - h_ac * g_c) / det, -_MAX_STEP, _MAX_STEP)
                c = c + np.clip((h_aa * g_c - h_ac * g_a) / det, -_MAX_STEP, _MAX_STEP)
            else:
                c = c + np.clip(g_c / h_cc, -_MAX_STEP, _MAX_STEP)
            P = expit(theta[:, None] * a + c)
            R, W = M * (Y - P), M * P * (1 - P)
            theta = theta + np.clip((R @ a - theta) / (W @ a**2 + 1.0), -_MAX_STEP, _MAX_STEP)
            current = objective(theta, a, c)
            if not np.isfinite(current):
                raise FloatingPointError("The item response fit diverged; raise regularization.")
            if previous - current <= self.tol * max(abs(previous), 1.0):
                break
            previous = current

        # the usual IRT scale (abilities centred, unit spread): the logits, hence predictions, are unchanged
        P = expit(theta[:, None] * a + c)
        posterior_var = 1.0 / ((M * P * (1 - P)) @ a**2 + 1.0)  # each ability's Laplace variance
        centre, scale = theta.mean(), max(float(theta.std(ddof=1)), 1e-6) if two_pl else 1.0  # Rasch: a = 1
        theta, c, a = (theta - centre) / scale, c + a * centre, a * scale
        # a new model's ability: total variance = the abilities' spread plus their uncertainty
        spread = float(np.var(theta, ddof=1) + posterior_var.mean() / scale**2)
        observed = M.any(axis=0)
        if observed.any() and not observed.all():
            a[~observed], c[~observed] = np.median(a[observed]), c[observed].mean()
        self.discrimination_, self.intercepts_, self.abilities_ = a, c, theta
        with np.errstate(divide="ignore"):
            self.difficulty_ = -c / a
        self.question_factors_ = np.column_stack([a, c])
        self.model_factors_ = np.column_stack([theta, np.ones_like(theta)])
        self.prior_mean_, self.prior_cov_ = np.array([0.0, 1.0]), np.diag([self.prior_scale * spread, 0.0])
        self.observed_questions_, self.n_iter_ = observed, n_iter
        return self

    def transform(self, X):
        """Abilities of new models (rows of ``X``) with the item parameters frozen (MAP).

        Parameters
        ----------
        X : array-like of shape (n_rows, n_questions)

        Returns
        -------
        ndarray of shape (n_rows, 1)
        """
        check_is_fitted(self, "question_factors_")
        H = validate_history(self, X, reset=False, allow_empty_rows=True)
        return self._abilities(H)[:, None]

    def _abilities(self, H):
        M = ~np.isnan(H)
        Y = np.where(M, H, 0.0)
        a, c = self.question_factors_.T
        mu, var = self.prior_mean_[0], self.prior_cov_[0, 0]
        theta = np.full(H.shape[0], mu)
        for _ in range(100):  # Newton on a concave objective per row: converges in a few steps
            P = expit(theta[:, None] * a + c)
            step = (M * (Y - P)) @ a - (theta - mu) / var
            theta = theta + np.clip(step / ((M * P * (1 - P)) @ a**2 + 1.0 / var), -_MAX_STEP, _MAX_STEP)
            if np.max(np.abs(step), initial=0.0) < 1e-10:
                break
        return theta

    def predict_proba(self, abilities):
        """P(correct) for every question given ability (abilities) ``theta``.

        Parameters
        ----------
        abilities : float or array-like of shape (m,)

        Returns
        -------
        ndarray of shape (n_questions,) or (m, n_questions)
        """
        check_is_fitted(self, "question_factors_")
        return expit(self._logits(np.asarray(abilities, dtype=float)))

    def _logits(self, theta):
        return theta[..., None] * self.question_factors_[:, 0] + self.question_factors_[:, 1]

    def score(self, X, y=None):
        """Held-out mean log-likelihood on new models, as :meth:`LogisticFactorModel.score`.

        Parameters
        ----------
        X : array-like of shape (n_rows, n_questions)
        y : None

        Returns
        -------
        float
        """
        return held_out_logit_score(self, X, lambda C: self._logits(self._abilities(C)))


register_predictor(ItemResponseModel)
