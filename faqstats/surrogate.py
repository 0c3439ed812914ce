"""A Gaussian-process surrogate: the history's question means and low-rank covariance, conditioned on a new
model's answers so far, predict the rest."""

import numbers

import numpy as np
from sklearn.base import TransformerMixin
from sklearn.utils.extmath import randomized_svd
from sklearn.utils.validation import check_is_fitted

from ._validation import check_generator, check_scalar, validate_history
from .factor_model import low_rank_entries, read_low_rank
from .predictor import LowRankPredictor, register_predictor

__all__ = ["GaussianProcessSurrogate"]


class GaussianProcessSurrogate(TransformerMixin, LowRankPredictor):
    """Empirical-covariance Gaussian process on the history's responses, in low-rank form.

    The covariance is ``V V' + diag(noise)``, ``V`` the top ``k`` principal directions of the centred history
    (missing cells filled by iterated low-rank imputation).

    Parameters
    ----------
    n_components : int, default=32
        Rank ``k`` of the low-rank part (at most ``min(n_models, N) - 1``).
    shrinkage : float in [0, 1), default=0.0
        Shrinks the low-rank part to ``(1 - shrinkage) V V'``, the rest moving to ``noise``.
    noise_floor : float, default=1e-3
        Smallest residual variance of a question.
    prior_count : float, default=1.0
        The question means are shrunk to the overall mean by this many pseudo-models.
    n_iter : int, default=10
        Imputation rounds when the history has missing cells.
    random_state : int, Generator or None, default=0

    Attributes
    ----------
    question_means_, noise_, observed_questions_ : ndarray of shape (N,)
    question_factors_ : ndarray of shape (N, k)
        The loadings ``V``.
    prior_mean_, prior_cov_ : ndarray of shape (k,), (k, k)
        Zero and the identity.
    explained_variance_ratio_ : float
    n_features_in_ : int

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=80, n_questions=200, n_components=3, random_state=0)
    >>> gp = GaussianProcessSurrogate(n_components=8).fit(bank.history)
    >>> gp.question_factors_.shape, gp.noise_.shape
    ((200, 8), (200,))
    """

    def __init__(self, n_components=32, shrinkage=0.0, noise_floor=1e-3, prior_count=1.0, n_iter=10,
                 random_state=0):
        self.n_components = n_components
        self.shrinkage = shrinkage
        self.noise_floor = noise_floor
        self.prior_count = prior_count
        self.n_iter = n_iter
        self.random_state = random_state

    def check_params(self):
        """Raise if a parameter is out of range (what :func:`~faqstats.load_factor_model` checks too)."""
        check_scalar(self.n_components, "n_components", kind=numbers.Integral, low=1)
        check_scalar(self.shrinkage, "shrinkage", low=0.0, high=1.0, closed="left")
        check_scalar(self.noise_floor, "noise_floor", low=0.0, closed="neither")
        check_scalar(self.prior_count, "prior_count", low=0.0)
        check_scalar(self.n_iter, "n_iter", kind=numbers.Integral, low=1)

    def fit(self, X, y=None):
        """Fit the prior mean and low-rank covariance on a history.

        Parameters
        ----------
        X : array-like of shape (n_models, N)
        y : None

        Returns
        -------
        GaussianProcessSurrogate
        """
        self.check_params()
        H = validate_history(self, X, reset=True)
        M, N = H.shape
        if M < 2:
            raise ValueError(f"The history needs at least 2 models to estimate a covariance, got {M}.")
        observed = ~np.isnan(H)
        counts = observed.sum(0)
        overall = float(np.nanmean(H))
        means = (np.where(observed, H, 0.0).sum(0) + self.prior_count * overall) / (counts + self.prior_count)
        X = np.where(observed, H - means, 0.0)
        k = min(int(self.n_components), M - 1, N)
        seed = int(check_generator(self.random_state).integers(2**31 - 1))
        for _ in range(int(self.n_iter) if not observed.all() else 1):
            U, S, Vt = randomized_svd(X, k, random_state=seed)
            if observed.all():
                break
            X = np.where(observed, X, (U * S) @ Vt)  # hard-impute: missing cells from the low-rank fit
        loadings = Vt.T * (S * np.sqrt((1.0 - self.shrinkage) / M))
        variance = (X**2).mean(0)
        self.question_means_, self.observed_questions_, self.question_factors_ = means, counts > 0, loadings
        self.noise_ = np.maximum(variance - (loadings**2).sum(1), self.noise_floor)
        self.prior_mean_, self.prior_cov_ = np.zeros(k), np.eye(k)
        total = float(variance.sum())
        self.explained_variance_ratio_ = float((loadings**2).sum() / total) if total > 0 else 0.0
        return self

    get_entries = low_rank_entries  # the low-rank form, with its means and noise

    @classmethod
    def from_entries(cls, entries, fields):
        """The fitted surrogate its stored entries hold, every one checked.

        Parameters
        ----------
        entries : object
        fields : dict
        """
        model = read_low_rank(cls(), entries, fields, extra=("question_means", "noise"))
        if model.noise_.min() <= 0:
            raise entries.error(f"{entries.key('noise')!r} must be positive.")
        return model

    def transform(self, X):
        """Posterior mean of each row's latent ``u`` given its observed cells.

        Parameters
        ----------
        X : array-like of shape (n_rows, N)

        Returns
        -------
        ndarray of shape (n_rows, k)
        """
        check_is_fitted(self, "question_factors_")
        H = validate_history(self, X, reset=False, allow_empty_rows=True)
        return np.stack([self._latent(row) for row in H]) if H.shape[0] else np.empty((0, self.prior_mean_.size))

    def _latent(self, row):
        seen = ~np.isnan(row)
        V, w = self.question_factors_[seen], 1.0 / self.noise_[seen]
        precision = np.eye(V.shape[1]) + (V.T * w) @ V
        return np.linalg.solve(precision, (V.T * w) @ (row[seen] - self.question_means_[seen]))

    def predict(self, X):
        """Predicted outcome of every question for each row of ``X``, given its observed cells.

        Parameters
        ----------
        X : array-like of shape (n_rows, N)

        Returns
        -------
        ndarray of shape (n_rows, N)
            Clipped to [0, 1].
        """
        U = self.transform(X)  # checks it is fitted first
        return np.clip(self.question_means_ + U @ self.question_factors_.T, 0.0, 1.0)


register_predictor(GaussianProcessSurrogate)
