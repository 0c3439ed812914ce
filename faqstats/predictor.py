"""Predictors that plug in (docs/architecture.md, "Adding a predictor"): the base class, the posterior protocol's
defaults and the registry by name."""

import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ._validation import observed_halves
from .posterior import FactorPosterior, GaussianPosterior, PosteriorBase, read_only

__all__ = ["LowRankPredictor", "Predictor", "engine_posterior", "held_out_log_likelihood", "predictor_class",
           "predictor_name", "register_predictor", "registered_predictors", "resolve_predictor_keyword", "saving_error"]

_REGISTRY = {}  # name -> class


class Predictor(BaseEstimator):
    """Base class of the predictors: a scikit-learn estimator with ``fit`` and ``posterior``
    (docs/architecture.md, "Adding a predictor").

    Examples
    --------
    >>> import numpy as np
    >>> import faqstats as fq
    >>> class QuestionMeans(fq.Predictor):
    ...     def fit(self, X, y=None):
    ...         self.means_ = np.nan_to_num(np.nanmean(X, axis=0), nan=0.5)
    ...         self.n_features_in_ = self.means_.size
    ...         return self
    ...     def posterior(self, dtype="float64", predict_every=1):
    ...         return fq.posterior.FixedPredictions(self.means_)
    >>> bank = fq.make_synthetic_bank(n_models=40, n_questions=30, n_components=2, random_state=0)
    >>> est = fq.PAIEstimator(predictor=QuestionMeans().fit(bank.history), budget=10, random_state=0)
    >>> est.fit(bank.new_outcomes[0]).n_queries_
    10
    """

    def fit(self, X, y=None):
        """Learn from a history; a subclass sets ``n_features_in_`` (the bank size) and returns ``self``.

        Parameters
        ----------
        X : array-like of shape (n_models, N)
        y : None

        Returns
        -------
        Predictor
        """
        raise NotImplementedError(f"{type(self).__name__} must define fit(X, y=None).")

    def posterior(self, dtype="float64", predict_every=1):
        """A new model's posterior at its prior: ``predictions`` of shape (N,) and ``update(question, outcome)``.

        Parameters
        ----------
        dtype : {"float64", "float32"}, default="float64"
        predict_every : int, default=1
            Recompute the predictions after every ``predict_every``-th answer only (ignoring it is valid).

        Returns
        -------
        object
        """
        raise NotImplementedError(f"{type(self).__name__} must define posterior(dtype='float64', predict_every=1).")

    def score(self, X, y=None):
        """:func:`held_out_log_likelihood` through ``predict(X)`` if any, else a fresh posterior per row.

        Parameters
        ----------
        X : array-like of shape (n_rows, N)
        y : None

        Returns
        -------
        float
        """
        check_is_fitted(self)
        if callable(getattr(self, "predict", None)):
            return held_out_log_likelihood(self, X, self.predict)

        def predict(conditioning):  # each row's answers learned by a fresh posterior, in column order
            rows = []
            for row in conditioning:
                post = engine_posterior(self.posterior(), conditioning.shape[1])
                for j in np.flatnonzero(~np.isnan(row)):
                    post.update(int(j), float(row[j]))
                rows.append(np.array(post.predictions, dtype=float))
            return np.array(rows).reshape(conditioning.shape)

        return held_out_log_likelihood(self, X, predict)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # NaN marks a cell that was not observed
        tags.input_tags.positive_only = True  # outcomes are in [0, 1]
        return tags


class LowRankPredictor(Predictor):
    """A predictor of the low-rank form: ``question_factors_``, ``prior_mean_``, ``prior_cov_`` and, for the
    identity link, ``question_means_`` and ``noise_`` (what :mod:`faqstats.batched_posterior` runs too)."""

    def posterior(self, dtype="float64", predict_every=1):
        """A new model's :class:`~faqstats.posterior.FactorPosterior` at the prior (identity link: the Gaussian one),
        its predictions in ``dtype`` ("float64" or "float32"), refreshed after every ``predict_every``-th answer."""
        check_is_fitted(self, "question_factors_")
        if getattr(self, "noise_", None) is None:
            return FactorPosterior(self.question_factors_, self.prior_mean_, self.prior_cov_, dtype=dtype,
                                   predict_every=predict_every)
        return GaussianPosterior(self.question_factors_, self.prior_mean_, self.prior_cov_, self.question_means_,
                                 self.noise_, dtype=dtype, predict_every=predict_every)


def held_out_log_likelihood(predictor, X, predict):
    """What ``score`` means on every predictor: the mean held-out log-likelihood of observed cells (0.0 if none).

    Each row's observed cells split in two seeded halves (seed: the int ``random_state``, else 0): ``predict``
    maps the first (NaN elsewhere) to predictions, clipped to ``[1e-6, 1 - 1e-6]``, scored on the second.
    """
    H, fit_half, test_half = observed_halves(predictor, X)
    z = H[test_half]
    if not z.size:
        return 0.0
    p = np.clip(predict(np.where(fit_half, H, np.nan))[test_half], 1e-6, 1 - 1e-6)
    return float(np.mean(z * np.log(p) + (1.0 - z) * np.log1p(-p)))


def register_predictor(predictor_cls=None, name=None):
    """Register a predictor class by name, for saving and loading it (and naming it in configurations).

    Parameters
    ----------
    predictor_cls : type or None
        The class (with ``fit`` and ``posterior``); ``None``: return a decorator.
    name : str or None, default=None
        The name files store (``None``: the class's name).

    Returns
    -------
    type
        ``predictor_cls``.

    Examples
    --------
    >>> register_predictor(dict, name="LogisticFactorModel")
    Traceback (most recent call last):
    ...
    ValueError: the predictor name 'LogisticFactorModel' is taken by faqstats.factor_model.LogisticFactorModel; ...
    """
    if predictor_cls is None:
        return lambda c: register_predictor(c, name)
    name = predictor_cls.__name__ if name is None else name
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, got {name!r}.")
    held = _REGISTRY.get(name)
    if held is not None and held is not predictor_cls:
        raise ValueError(f"the predictor name {name!r} is taken by {held.__module__}.{held.__qualname__}; "
                         f"register {predictor_cls.__name__} under another name.")
    if not isinstance(predictor_cls, type) or not (callable(getattr(predictor_cls, "fit", None))
                                                   and callable(getattr(predictor_cls, "posterior", None))):
        raise TypeError(f"a predictor class needs fit and posterior methods; {predictor_cls!r} lacks them.")
    other = next((n for n, c in _REGISTRY.items() if c is predictor_cls and n != name), None)
    if other is not None:
        raise ValueError(f"{predictor_cls.__name__} is already registered as {other!r}; one name per class.")
    _REGISTRY[name] = predictor_cls
    return predictor_cls


def predictor_class(name):
    """The predictor class registered as ``name`` (``ValueError`` naming the registered ones otherwise).

    Parameters
    ----------
    name : str

    Returns
    -------
    type

    Examples
    --------
    >>> predictor_class("HistoryMixture").__name__
    'HistoryMixture'
    """
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(f"no predictor is registered as {name!r}; registered: {sorted(_REGISTRY)}.") from None


def predictor_name(model):
    """The name ``model``'s class (or the class ``model``) is registered under, or None."""
    cls = model if isinstance(model, type) else type(model)
    return next((name for name, c in _REGISTRY.items() if c is cls), None)


def registered_predictors():
    """``{name: class}`` of every registered predictor (a copy)."""
    return dict(_REGISTRY)


def saving_error(model):
    """Why ``model`` cannot be saved through the registry (a message), or None when it can."""
    kind = type(model).__name__
    if callable(getattr(model, "get_entries", None)):  # a built-in's layout
        return None
    missing = [m for m in ("get_arrays", "from_arrays") if not callable(getattr(model, m, None))]
    if missing:
        return (f"{kind} cannot be saved: a predictor is saved through its save pair; define "
                "get_arrays(self) -> (dict of arrays, dict of JSON params) and the classmethod "
                "from_arrays(cls, arrays, params), and register the class with faqstats.register_predictor.")
    if predictor_name(model) is None:
        return f"{kind} cannot be saved: register its class with faqstats.register_predictor first."
    return None


def resolve_predictor_keyword(predictor, deprecated, owner, unset=None):
    """The predictor given as ``predictor=`` or as the deprecated ``factor_model=`` (the only key ``deprecated``,
    the other keyword arguments, may hold); ``owner`` names the caller in messages, ``unset`` is "not given"."""
    extra = set(deprecated) - {"factor_model"}
    if extra:
        raise TypeError(f"{owner} got unexpected keyword argument(s) {sorted(extra)}.")
    if "factor_model" not in deprecated:
        return predictor
    if predictor is not unset:
        raise TypeError(f"{owner}: pass predictor= only (factor_model= is its old name).")
    warnings.warn(f"{owner}: factor_model= is renamed predictor=; factor_model= will be removed.", FutureWarning,
                  stacklevel=3)
    return deprecated["factor_model"]


class _EngineDefaults(PosteriorBase):
    """A posterior written to the protocol's minimum, with what the engine reads besides: a read-only
    copy of the predictions after every update, their oracle scores and a policy view."""

    def __init__(self, posterior, n_questions):
        self.posterior, self.n_questions = posterior, n_questions
        self._snapshot()

    def _snapshot(self):
        p = np.array(self.posterior.predictions, dtype=float)
        if p.shape != (self.n_questions,) or not np.all(np.isfinite(p)):
            raise ValueError(f"{type(self.posterior).__name__}.predictions must be a finite array of shape "
                             f"({self.n_questions},), got shape {p.shape}.")
        self.predictions, self._scores = read_only(p), None

    def update(self, question, outcome):
        self.posterior.update(question, outcome)
        self._snapshot()

    question_factors = property(lambda self: getattr(self.posterior, "question_factors", None))
    mean = property(lambda self: getattr(self.posterior, "mean", None))
    cov = property(lambda self: getattr(self.posterior, "cov", None))
    noise = property(lambda self: getattr(self.posterior, "noise", None))

    def quadratic_forms(self):
        raise ValueError(f"{type(self.posterior).__name__} has no question factors: no quadratic forms.")


def engine_posterior(posterior, n_questions):
    """``posterior`` as the engine reads it: itself when complete, else wrapped with the protocol's defaults."""
    missing = [m for m in ("predictions", "update") if not hasattr(posterior, m)]
    if missing or not callable(posterior.update):
        raise TypeError(f"a posterior needs predictions (an array of shape (N,)) and update(question, outcome); "
                        f"{type(posterior).__name__} lacks {missing or ['a callable update']}.")
    if hasattr(posterior, "view") and hasattr(posterior, "oracle_scores"):
        return posterior
    return _EngineDefaults(posterior, n_questions)
