"""Logistic factor model of a models x questions outcome history: ``logit P(correct) = u_i . v_j``
(paper Section 3.1); the history's ``u_i`` give the new model's prior, refined after each answer."""

import numbers

import numpy as np
from scipy.special import expit
from sklearn.base import TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ._progress import progress_bar
from ._validation import check_generator, check_scalar, observed_halves, validate_history
from .posterior import laplace_update
from .predictor import LowRankPredictor, register_predictor

__all__ = ["FactorModelView", "LogisticFactorModel", "LogisticFactorModelCV", "laplace_update", "log_loss_on_cells"]

_SOLVERS = ("adamw", "newton")
# Cap on Newton steps per row with V frozen (transform): each converges in well under 20.
_NEWTON_ROW_MAX_ITER = 100


def low_rank_entries(self, saver):  # the get_entries method of LogisticFactorModel and GaussianProcessSurrogate
    """The entries it is saved as, its low-rank form (docs/architecture.md, "Adding a predictor").

    Parameters
    ----------
    saver : object
    """
    check_is_fitted(self, "question_factors_")
    V = saver.float(self, "question_factors_", bound=1)
    if V.ndim != 2 or V.shape[0] < 1 or V.shape[1] < 1:
        raise ValueError(f"Refusing to save: question_factors_ must be a non-empty 2-D array, got shape {V.shape}.")
    arrays = {"question_factors": V, "prior_mean": saver.float(self, "prior_mean_", bound=1),
              "prior_cov": saver.float(self, "prior_cov_", bound=2),
              "observed_questions": np.asarray(self.observed_questions_, dtype=bool)}
    for key in ("model_factors", *(("loss_curve",) if saver.first_format else ()), "question_means", "noise"):
        if getattr(self, key + "_", None) is not None:
            arrays[key] = saver.float(self, key + "_", bound=None if key == "loss_curve" else 1)
    fields = {"estimator": type(self).__name__, "params": saver.json(self.get_params(deep=False), "params"),
              "n_questions": int(V.shape[0]), "n_components": int(V.shape[1])}
    if saver.first_format:  # save_factor_model's file: format version 1, as older faqstats read it
        n_models = int(arrays["model_factors"].shape[0]) if "model_factors" in arrays else None
        fields |= {"format_version": 1, "n_models": n_models, "cv": None,
                   "fitted_device": saver.json(getattr(self, "device_", None), "device_")}
    return fields, arrays


def read_low_rank(model, entries, fields, extra=()):
    """``model`` (unfitted) fitted with the stored parameters and arrays, every one checked (``extra``: the
    names of further arrays of shape (n,) it needs, a surrogate's means and noise)."""
    k, n = fields.get("n_components"), entries.n_questions
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise entries.error(f"metadata{entries.where} 'n_components' must be a positive integer, got {k!r}.")
    entries.require("question_factors", "prior_mean", "prior_cov", "observed_questions")
    fitted = {"question_factors": entries.float("question_factors", (n, k), bound=1),
              "prior_mean": entries.float("prior_mean", (k,), bound=1),
              "prior_cov": entries.float("prior_cov", (k, k), bound=2)}
    cov, key = fitted["prior_cov"], entries.key("prior_cov")
    if not np.allclose(cov, cov.T):
        raise entries.error(f"{key!r} is not symmetric.")
    eig = np.linalg.eigvalsh(0.5 * (cov + cov.T))
    if eig.min() < -1e-10 * max(1.0, float(np.abs(eig).max())):
        raise entries.error(f"{key!r} is not positive semi-definite (eigenvalue {eig.min():.3g}).")
    observed = entries.array("observed_questions")
    if observed.dtype != np.bool_ or observed.shape != (n,):
        raise entries.error(f"{entries.key('observed_questions')!r} must be bool of shape ({n},), got "
                            f"{observed.dtype} {observed.shape}.")
    fitted["observed_questions"] = observed
    entries.require(*extra)
    fitted |= {name: entries.float(name, (n,), bound=1) for name in extra}
    fitted["model_factors"] = entries.float("model_factors", (None, k), bound=1) if "model_factors" in entries else None
    params = dict(fields["params"])
    if "alpha" in params and "regularization" not in params:  # files written before faqstats renamed it
        params["regularization"] = params.pop("alpha")
    entries.set_params(model, params)
    for name, value in fitted.items():
        setattr(model, name + "_", value)
    if entries.format_version == 1 and "loss_curve" in entries:
        model.loss_curve_ = entries.float("loss_curve", (None,))
        model.n_iter_ = int(model.loss_curve_.size)
    return model


class LogisticFactorModel(TransformerMixin, LowRankPredictor):
    """Low-rank logistic model of a partially observed 0/1 outcome matrix.

    Fits ``H[i, j] ~ Bernoulli(sigmoid(u_i . v_j))`` on the observed cells by ``max_iter`` AdamW steps (the
    paper's) or by alternating damped Newton on the L2-penalised cross-entropy (much faster on large banks).

    Parameters
    ----------
    n_components : int, default=16
    regularization : float, default=0.1
        AdamW's decoupled weight decay, or Newton's prior precision of every factor entry (> 0; 1-10 suits).
    learning_rate : float, default=1e-2
        AdamW only.
    max_iter : int, default=2000
        AdamW steps, or the most Newton sweeps.
    solver : {"adamw", "newton"}, default="adamw"
    tol : float, default=1e-4
        Newton only: stop when a sweep lowers the objective by less than ``tol`` (relative).
    device : {"auto", "cpu", "cuda", "cuda:N", "mps"}, default="auto"
    dtype : {"float32", "float64"}, default="float32"
        Precision of the optimisation.
    random_state : int, Generator or None, default=None
    verbose : bool, default=False
    prior_scale : float > 0, default=1.0
        Factor on the new model's prior covariance (docs/statistics.md, "Default policy").

    Attributes
    ----------
    model_factors_, question_factors_ : ndarray of shape (n_models, k), (n_questions, k)
        A question never observed gets the mean of the observed ones' factors.
    observed_questions_ : ndarray of bool, shape (n_questions,)
    prior_mean_, prior_cov_ : ndarray of shape (k,), (k, k)
        Mean and covariance (plus a tiny ridge, times ``prior_scale``) of ``model_factors_``.
    loss_curve_ : ndarray of shape (``n_iter_``,)
        Mean cross-entropy over observed cells per AdamW step or Newton sweep.
    n_iter_, device_, n_features_in_, feature_names_in_

    References
    ----------
    S. Wu, Y. Nair and E. J. Candès, "Efficient Evaluation of LLM Performance with Statistical Guarantees".

    Examples
    --------
    >>> from faqstats import LogisticFactorModel, make_synthetic_bank
    >>> bank = make_synthetic_bank(n_models=60, n_questions=80, n_components=3, random_state=0)
    >>> fm = LogisticFactorModel(n_components=3, solver="newton", regularization=3.0, random_state=0)
    >>> fm.fit(bank.history).question_factors_.shape, fm.predict_proba(fm.prior_mean_).shape
    ((80, 3), (80,))
    """

    def __init__(self, n_components=16, regularization=0.1, learning_rate=1e-2, max_iter=2000, solver="adamw",
                 tol=1e-4, device="auto", dtype="float32", random_state=None, verbose=False, prior_scale=1.0):
        self.n_components = n_components
        self.regularization = regularization
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.solver = solver
        self.tol = tol
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose
        self.prior_scale = prior_scale

    @classmethod
    def from_factors(cls, question_factors, prior_mean=None, prior_cov=None, model_factors=None):
        """A fitted model from known factors: ``model_factors`` (their mean and covariance: the prior) or the prior.

        Parameters
        ----------
        question_factors : array-like of shape (n_questions, k)
        prior_mean : array-like of shape (k,), optional
        prior_cov : array-like of shape (k, k), optional
        model_factors : array-like of shape (n_models, k), optional

        Returns
        -------
        LogisticFactorModel

        Examples
        --------
        >>> import numpy as np
        >>> fm = LogisticFactorModel.from_factors(np.eye(3)[:, :2], np.zeros(2), np.eye(2))
        >>> fm.predict_proba(np.array([1.0, -1.0])).round(3)
        array([0.731, 0.269, 0.5  ])
        """
        V = np.asarray(question_factors, dtype=float)
        if V.ndim != 2:
            raise ValueError(f"question_factors must be 2-D (questions x components), got shape {V.shape}.")
        k = V.shape[1]
        if model_factors is not None:
            U = np.asarray(model_factors, dtype=float)
            if U.ndim != 2 or U.shape[1] != k:
                raise ValueError(f"model_factors must have shape (n_models, {k}), got {U.shape}.")
            mean, cov = _gaussian_prior(U)
        elif prior_mean is None or prior_cov is None:
            raise ValueError("Give model_factors, or both prior_mean and prior_cov.")
        else:
            U = None
            mean = np.asarray(prior_mean, dtype=float).reshape(-1)
            cov = np.asarray(prior_cov, dtype=float)
            if mean.shape != (k,) or cov.shape != (k, k):
                raise ValueError(f"prior_mean must have shape ({k},) and prior_cov ({k}, {k}).")
            if not np.allclose(cov, cov.T) or np.linalg.eigvalsh(0.5 * (cov + cov.T)).min() < 0:
                raise ValueError("prior_cov must be symmetric positive semi-definite.")
        if not (np.isfinite(V).all() and np.isfinite(mean).all() and np.isfinite(cov).all()):
            raise ValueError("Factors must be finite.")
        fm = cls(n_components=k)
        fm.question_factors_, fm.model_factors_, fm.prior_mean_, fm.prior_cov_ = V, U, mean, 0.5 * (cov + cov.T)
        fm.observed_questions_, fm.n_features_in_ = np.ones(V.shape[0], dtype=bool), V.shape[0]
        return fm

    get_entries = low_rank_entries

    @classmethod
    def from_entries(cls, entries, fields):
        """The fitted factor model its stored entries hold, every one checked.

        Parameters
        ----------
        entries : object
        fields : dict
        """
        model = read_low_rank(cls(), entries, fields)
        if model.n_components != fields["n_components"]:
            raise entries.error(f"params n_components={model.n_components} but the factors have "
                                f"{fields['n_components']} components.")
        return model

    def check_params(self):
        check_scalar(self.n_components, "n_components", kind=numbers.Integral, low=1)
        check_scalar(self.regularization, "regularization", low=0.0)
        check_scalar(self.learning_rate, "learning_rate", low=0.0, closed="neither")
        check_scalar(self.max_iter, "max_iter", kind=numbers.Integral, low=1)
        check_scalar(self.tol, "tol", low=0.0)
        check_scalar(self.prior_scale, "prior_scale", low=0.0, closed="right")
        if self.solver not in _SOLVERS:
            raise ValueError(f"solver must be one of {list(_SOLVERS)}, got {self.solver!r}.")
        if self.solver == "newton" and not self.regularization > 0:
            raise ValueError("solver='newton' needs regularization > 0 (the prior precision that keeps every Newton "
                             f"system positive definite), got regularization={self.regularization!r}.")
        if not isinstance(self.device, str):
            raise TypeError(f"device must be a string, got {type(self.device).__name__}.")

    def _solve(self, H, device, question_factors=None, init_model_factors=None):
        """The one solver behind fit and transform (V frozen when given)."""
        from . import _torch_backend as backend  # torch is imported only when fitting
        frozen = question_factors is not None
        newton = self.solver == "newton"
        max_iter = min(int(self.max_iter), _NEWTON_ROW_MAX_ITER) if newton and frozen else int(self.max_iter)
        bar = progress_bar(max_iter, "fitting factors", self.verbose)
        # one integer seed for torch; transform starts from the prior mean: nothing random
        seed = 0 if frozen else int(check_generator(self.random_state).integers(2**31 - 1))
        common = dict(n_components=question_factors.shape[1] if frozen else self.n_components,
                      regularization=float(self.regularization), max_iter=max_iter, device=device, dtype=self.dtype,
                      seed=seed, question_factors=question_factors, init_model_factors=init_model_factors,
                      progress=lambda step: bar.update(1))
        try:
            if newton:
                return backend.fit_factors_newton(H, tol=float(self.tol), **common)
            return backend.fit_factors(H, learning_rate=float(self.learning_rate), **common)
        finally:
            bar.close()

    def fit(self, X, y=None):
        """Fit model and question factors on the observed cells of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_models, n_questions)
            Outcomes in [0, 1], NaN where not observed; no empty rows.
        y : None

        Returns
        -------
        LogisticFactorModel
        """
        from . import _torch_backend as backend
        self.check_params()
        H = validate_history(self, X, reset=True)
        self.device_ = backend.resolve_device(self.device)
        self.model_factors_, V, self.loss_curve_ = self._solve(H, self.device_)
        observed = ~np.isnan(H).all(axis=0)
        if observed.any() and not observed.all():
            V[~observed] = V[observed].mean(axis=0)
        self.question_factors_, self.observed_questions_ = V, observed
        self.prior_mean_, self.prior_cov_ = _gaussian_prior(self.model_factors_)
        self.prior_cov_ = self.prior_cov_ * self.prior_scale
        self.n_iter_ = len(self.loss_curve_)
        return self

    def fit_transform(self, X, y=None):
        """Fit and return ``model_factors_``.

        Parameters
        ----------
        X : array-like of shape (n_models, n_questions)
        y : None

        Returns
        -------
        ndarray of shape (n_models, n_components)
        """
        return self.fit(X).model_factors_

    def transform(self, X):
        """Factors of new models (rows of ``X``, each from ``prior_mean_``) with the question factors frozen.

        Parameters
        ----------
        X : array-like of shape (n_rows, n_questions)

        Returns
        -------
        ndarray of shape (n_rows, n_components)
        """
        check_is_fitted(self, "question_factors_")
        return self._transform(validate_history(self, X, reset=False, allow_empty_rows=True))

    def _transform(self, H):
        from . import _torch_backend as backend
        U = np.tile(self.prior_mean_, (H.shape[0], 1))
        has_data = ~np.isnan(H).all(axis=1)
        if has_data.any():
            device = getattr(self, "device_", None) or backend.resolve_device(self.device)
            U[has_data], _, _ = self._solve(H[has_data], device, question_factors=self.question_factors_,
                                            init_model_factors=self.prior_mean_)
        return U

    def predict_proba(self, model_factors):
        """P(correct) for every question given model factor(s) ``u``.

        Parameters
        ----------
        model_factors : array-like of shape (k,) or (m, k)

        Returns
        -------
        ndarray of shape (n_questions,) or (m, n_questions)
        """
        check_is_fitted(self, "question_factors_")
        u = np.asarray(model_factors, dtype=float)
        if u.shape[-1] != self.question_factors_.shape[1]:
            raise ValueError(f"model factors have {u.shape[-1]} components, the factor model has "
                             f"{self.question_factors_.shape[1]}.")
        return expit(u @ self.question_factors_.T)

    def score(self, X, y=None):
        """Held-out mean log-likelihood on new models: a seeded half of each row's cells fits its factor, the rest
        is scored.

        Parameters
        ----------
        X : array-like of shape (n_rows, n_questions)
        y : None

        Returns
        -------
        float
        """
        return held_out_logit_score(self, X, lambda C: self._transform(C) @ self.question_factors_.T)


class FactorModelView:
    """For a predictor that is a logistic factor model in other coordinates (an IRT model, the ability factor
    model): saved, and loaded back, as the fitted :class:`LogisticFactorModel` it equals."""

    def as_factor_model(self):
        """The equivalent fitted :class:`~faqstats.LogisticFactorModel` (same predictions and posterior).

        Returns
        -------
        LogisticFactorModel
        """
        check_is_fitted(self, "question_factors_")
        fm = LogisticFactorModel.from_factors(self.question_factors_, self.prior_mean_, self.prior_cov_)
        fm.model_factors_ = self.model_factors_
        fm.observed_questions_ = self.observed_questions_
        return fm

    def get_entries(self, saver):
        """The entries it is saved as: those of :meth:`as_factor_model`, loaded back as that.

        Parameters
        ----------
        saver : object
        """
        return self.as_factor_model().get_entries(saver)

    def saved_predictor(self):
        """The predictor it is saved (and loaded back) as: :meth:`as_factor_model` (unfitted: itself)."""
        return self.as_factor_model() if hasattr(self, "question_factors_") else self


def _gaussian_prior(U):
    k = U.shape[1]
    mean = U.mean(axis=0)
    cov = np.cov(U, rowvar=False, ddof=1).reshape(k, k) if U.shape[0] > 1 else np.eye(k)
    cov = 0.5 * (cov + cov.T)
    # A tiny relative ridge keeps the prior positive definite when models are few.
    cov += np.eye(k) * 1e-8 * max(np.trace(cov) / k, 1e-12)
    return mean, cov


def held_out_logit_score(model, X, logits):
    """``score`` of a logistic predictor: minus the log-loss on the held-out half of each row's cells of
    ``logits`` (a function of the rows with only their conditioning half kept)."""
    check_is_fitted(model, "question_factors_")
    H, fit_half, test_half = observed_halves(model, X)
    return -log_loss_on_cells(H, logits(np.where(fit_half, H, np.nan)), test_half)


def log_loss_on_cells(H, logits, cells):
    """Mean Bernoulli log-loss of ``logits`` against ``H`` on the boolean mask ``cells``."""
    y, x = H[cells], logits[cells]
    if y.size == 0:
        raise ValueError("No held-out observed cells to score.")
    # log(1 + exp(-|x|)) form: stable in log-space for large |logits|
    loss = np.maximum(x, 0) - x * y + np.log1p(np.exp(-np.abs(x)))
    return float(loss.mean())


class LogisticFactorModelCV(TransformerMixin, LowRankPredictor):  # its posterior: the best estimator's
    """Choose ``(n_components, regularization)`` by K-fold cross-validation over observed cells.

    The one-standard-error rule (paper Section 4) picks the simplest candidate (fewest components, then largest
    ``regularization``) within one standard error of the best, refitted on all of ``H``.

    Parameters
    ----------
    n_components_grid : sequence of int, default=(4, 8, 16, 32)
    regularization_grid : sequence of float, default=(1e-3, 1e-2, 1e-1, 1.0)
    cv : int, default=5
        Number of cell folds.
    scoring : {"log_loss", "accuracy"}, default="log_loss"
    one_standard_error : bool, default=True
        Apply the 1-SE rule (else: the best mean score).
    learning_rate, max_iter, solver, tol, device, dtype, random_state, verbose
        As in :class:`LogisticFactorModel`.

    Attributes
    ----------
    cv_results_ : dict of ndarrays
        ``n_components``, ``regularization``, ``mean_score``, ``std_error`` and ``fold_scores``.
    best_params_ : dict
    best_estimator_ : LogisticFactorModel
        Refitted on all of ``H``; its fitted attributes show here too.

    Examples
    --------
    >>> from faqstats import LogisticFactorModelCV, make_synthetic_bank
    >>> bank = make_synthetic_bank(n_models=40, n_questions=50, n_components=2, random_state=0)
    >>> cv = LogisticFactorModelCV(n_components_grid=(1, 2), regularization_grid=(0.01,), cv=3,
    ...                            max_iter=200, random_state=0).fit(bank.history)
    >>> sorted(cv.best_params_)
    ['n_components', 'regularization']
    """

    def __init__(self, n_components_grid=(4, 8, 16, 32), regularization_grid=(1e-3, 1e-2, 1e-1, 1.0), cv=5,
                 scoring="log_loss", one_standard_error=True, learning_rate=1e-2, max_iter=2000, solver="adamw",
                 tol=1e-4, device="auto", dtype="float32", random_state=None, verbose=False):
        self.n_components_grid = n_components_grid
        self.regularization_grid = regularization_grid
        self.cv = cv
        self.scoring = scoring
        self.one_standard_error = one_standard_error
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.solver = solver
        self.tol = tol
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    def _model(self, k, regularization, seed):
        shared = ("learning_rate", "max_iter", "solver", "tol", "device", "dtype")
        return LogisticFactorModel(n_components=int(k), regularization=float(regularization), random_state=seed,
                                   **{name: getattr(self, name) for name in shared})

    def fit(self, X, y=None):
        check_scalar(self.cv, "cv", kind=numbers.Integral, low=2)
        if self.scoring not in ("log_loss", "accuracy"):
            raise ValueError(f"scoring must be 'log_loss' or 'accuracy', got {self.scoring!r}.")
        H = validate_history(self, X, reset=True)  # sets n_features_in_; scikit-learn's input messages
        ks = [check_scalar(k, "n_components_grid entries", kind=numbers.Integral, low=1)
              for k in self.n_components_grid]
        regs = [check_scalar(a, "regularization_grid entries", low=0.0) for a in self.regularization_grid]
        if not ks or not regs:
            raise ValueError("n_components_grid and regularization_grid must be non-empty.")
        rng = check_generator(self.random_state)
        seed = int(rng.integers(2**31 - 1))
        rows, cols = np.nonzero(~np.isnan(H))
        if rows.size < self.cv:
            raise ValueError(f"Only {rows.size} observed cells: too few for {self.cv}-fold cross-validation.")
        fold = rng.permutation(np.arange(rows.size) % self.cv)

        candidates = [(k, a) for k in ks for a in regs]
        scores = np.empty((len(candidates), self.cv))
        bar = progress_bar(len(candidates) * self.cv, "cross-validating", self.verbose)
        for f in range(self.cv):
            held = np.zeros(H.shape, dtype=bool)
            held[rows[fold == f], cols[fold == f]] = True
            H_train = np.where(held, np.nan, H)
            keep = ~np.isnan(H_train).all(axis=1)  # a row whose cells all fell in the fold
            for c, (k, a) in enumerate(candidates):
                m = self._model(k, a, seed).fit(H_train[keep])
                logits = np.full(H.shape, 0.0)
                logits[keep] = m.model_factors_ @ m.question_factors_.T
                scores[c, f] = _cv_score(H, logits, held & keep[:, None], self.scoring)
                bar.update(1)
        bar.close()

        mean = scores.mean(axis=1)
        se = scores.std(axis=1, ddof=1) / np.sqrt(self.cv)
        best = int(np.argmax(mean))
        if self.one_standard_error:
            ok = np.flatnonzero(mean >= mean[best] - se[best])
            # simplest: fewest components, then strongest regularisation
            chosen = min(ok, key=lambda c: (candidates[c][0], -candidates[c][1]))
        else:
            chosen = best
        self.cv_results_ = {"n_components": np.array([c[0] for c in candidates]),
                            "regularization": np.array([c[1] for c in candidates], dtype=float),
                            "mean_score": mean, "std_error": se, "fold_scores": scores}
        k, a = candidates[chosen]
        self.best_index_ = chosen
        self.best_params_ = {"n_components": int(k), "regularization": float(a)}
        self.best_estimator_ = self._model(k, a, seed).fit(H)
        return self

    def get_entries(self, saver):
        """The entries it is saved as: its best estimator's (:func:`~faqstats.save_factor_model`: and the CV record).

        Parameters
        ----------
        saver : object
        """
        check_is_fitted(self, "best_estimator_")
        if not saver.first_format:
            return self.best_estimator_.get_entries(saver)
        cv = {"params": saver.json(self.get_params(deep=False), "cv.params"),
              "best_params": saver.json(self.best_params_, "cv.best_params"),
              "best_index": saver.json(getattr(self, "best_index_", None), "cv.best_index")}
        fields, arrays = self.best_estimator_.get_entries(saver)
        arrays |= {"cv_results." + name: np.asarray(values) for name, values in self.cv_results_.items()}
        return fields | {"estimator": type(self).__name__, "cv": cv}, arrays

    def saved_predictor(self):
        """The predictor it is saved (and loaded back) as: its ``best_estimator_`` (unfitted: itself)."""
        return getattr(self, "best_estimator_", self)

    from_entries = LogisticFactorModel.from_entries  # a file of format version 1 gives back its best estimator

    def __getattr__(self, name):
        # Expose the refitted model's learned attributes (question_factors_, ...)
        if name.endswith("_") and not name.startswith("__") and "best_estimator_" in self.__dict__:
            return getattr(self.__dict__["best_estimator_"], name)
        raise AttributeError(name)

    def transform(self, X):
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.transform(X)

    def predict_proba(self, model_factors):
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict_proba(model_factors)


def _cv_score(H, logits, cells, scoring):
    if scoring == "log_loss":
        return -log_loss_on_cells(H, logits, cells)
    return float(np.mean((logits[cells] > 0) == (H[cells] > 0.5)))


register_predictor(LogisticFactorModel)
register_predictor(LogisticFactorModelCV)
