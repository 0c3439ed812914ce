"""scikit-learn's estimator checks on every faqstats estimator, predictor and sampler.

Every predictor (the built-in ones and a minimal :class:`faqstats.Predictor` subclass), both
estimators and every sampler go through ``sklearn.utils.estimator_checks``: the predictors and the
estimators through :func:`~sklearn.utils.estimator_checks.parametrize_with_checks`, the samplers
(which have no ``fit``) through the API checks that need none. A check that cannot apply is an
expected failure with its reason in :func:`expected_failures`, and fails the run when it passes or
fails for another reason (so the map stays true). Two reasons recur:

* the checks feed continuous features (Gaussian or uniform, shifted to be non-negative), while a
  predictor's input is outcomes in [0, 1] with NaN for "not observed": ``fit`` refuses them;
* the estimators' ``fit`` takes one model's outcomes (shape (N,), or a callable), not a 2-D ``X``.

What those checks would have tested is tested below on valid outcomes, for every estimator:
:func:`test_predictor_conventions_on_outcomes` and :func:`test_estimator_conventions_on_outcomes`.
LogisticFactorModel's own checks stay in tests/test_factor_model.py.
"""

import numbers
import pickle
import re

import numpy as np
import pytest
from joblib import hash as joblib_hash
from numpy.testing import assert_array_equal
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils import estimator_checks as sk_checks
from sklearn.utils.estimator_checks import parametrize_with_checks
from sklearn.utils.validation import check_is_fitted, validate_data

import faqstats as fq
from faqstats.posterior import FixedPredictions
from faqstats.sampling import (
    ActiveLearningSampler,
    BernoulliAIPW,
    CostWeightedSampler,
    HybridSampler,
    NeymanSampler,
    Sampler,
    StreamSampler,
    UniformSampler,
    VarianceReductionSampler,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny problems (conftest.py)


class QuestionMeans(fq.Predictor):
    """The smallest predictor: every question's observed mean (``prior`` where none); answers move nothing."""

    def __init__(self, prior=0.5):
        self.prior = prior

    def fit(self, X, y=None):
        H = validate_data(self, X, dtype=np.float64, ensure_all_finite="allow-nan")
        if np.any(H < 0):
            raise ValueError("Negative values in data passed to X: outcomes must be in [0, 1].")
        if np.any(H > 1):
            raise ValueError("X must be in [0, 1] (NaN for not observed).")
        observed = ~np.isnan(H)
        counts = observed.sum(axis=0)
        totals = np.where(observed, H, 0.0).sum(axis=0)
        self.means_ = np.where(counts > 0, totals / np.maximum(counts, 1), self.prior)
        return self

    def posterior(self, dtype="float64", predict_every=1):
        check_is_fitted(self, "means_")
        return FixedPredictions(self.means_)


def _predictors():
    """One small instance of every predictor (fast settings; random_state fixed where there is one)."""
    return [
        QuestionMeans(),
        fq.LogisticFactorModelCV(n_components_grid=(1, 2), regularization_grid=(0.1,), cv=2, max_iter=20,
                                 device="cpu", random_state=0),
        fq.GaussianProcessSurrogate(n_components=2, n_iter=3, random_state=0),
        fq.ItemResponseModel(max_iter=20, random_state=0),
        fq.ItemResponseModel(model="rasch", max_iter=20, random_state=0),
        fq.HistoryMixture(n_components=2, random_state=0),
        fq.HistoryMixture(target="means", random_state=0),
        fq.StackedPredictor(n_paths=8, random_state=0),
    ]


def _estimators():
    return [fq.PAIEstimator(budget=3, random_state=0), fq.PairedPAIEstimator(budget=3, random_state=0)]


def _samplers():
    return [Sampler(), UniformSampler(), NeymanSampler(), ActiveLearningSampler(), VarianceReductionSampler(),
            HybridSampler(tau=0.3, beta0=0.5, rho=0.1, gamma=0.2),
            CostWeightedSampler(NeymanSampler(), costs=[1.0, 2.0, 4.0]), StreamSampler(), BernoulliAIPW()]


# ------------------------------------------------------------------ why a check cannot apply
_CONTINUOUS_X = (
    "feeds continuous X (Gaussian/uniform features, shifted to be non-negative), but a predictor's input is "
    "outcomes in [0, 1] with NaN for not observed, so fit refuses it; tested on outcomes in "
    "test_predictor_conventions_on_outcomes."
)
_ONE_MODEL = (
    "feeds a 2-D X, but the estimator's fit takes one model's outcomes (shape (N,), in [0, 1], or a callable "
    "answering question indices), so fit refuses it; tested on outcomes in test_estimator_conventions_on_outcomes."
)
#: what the refusal says (matched against the error and the errors it chains): the reason is the stated one
_OUT_OF_RANGE = r"must be in \[0, 1\]"
_NOT_ONE_MODEL = r"1-D array|must be in \[0, 1\]|numeric outcomes in \[0, 1\]|exceeds the 0 questions"

#: checks that fit a predictor on continuous X (every predictor)
_PREDICTOR_CONTINUOUS = [
    "check_estimators_overwrite_params", "check_dont_overwrite_parameters", "check_estimators_fit_returns_self",
    "check_readonly_memmap_input", "check_n_features_in_after_fitting", "check_estimators_dtypes",
    "check_pipeline_consistency", "check_estimators_pickle", "check_f_contiguous_array_estimator",
    "check_methods_sample_order_invariance", "check_methods_subset_invariance", "check_dict_unchanged",
    "check_fit_idempotent", "check_fit_check_is_fitted", "check_n_features_in", "check_fit2d_predict1d",
    "check_fit2d_1sample", "check_fit2d_1feature",
]
#: the transformer checks (predictors with transform: new models' factors, abilities or weights)
_TRANSFORMER_CONTINUOUS = [
    "check_transformer_data_not_an_array", "check_transformer_general", "check_transformer_preserve_dtypes",
]
#: checks that give the estimators (whose fit takes one model's outcomes) a 2-D X
_ESTIMATOR_2D = _PREDICTOR_CONTINUOUS + [
    "check_fit_score_takes_y", "check_complex_data", "check_dtype_object", "check_estimators_empty_data_messages",
    "check_estimator_sparse_tag", "check_estimator_sparse_array", "check_estimator_sparse_matrix",
    "check_positive_only_tag_during_fit",
]
_DEPRECATED_KEYWORD = (
    "passes every name of the signature as a keyword, **deprecated included; **deprecated takes only "
    "factor_model= (predictor's old name, with a FutureWarning) and refuses any other keyword.",
    r"unexpected keyword argument\(s\) \['deprecated'\]",
)


def expected_failures(estimator):
    """``{check name: (reason, pattern of the refusal)}`` of the checks that cannot apply to ``estimator``."""
    if isinstance(estimator, (fq.PAIEstimator, fq.PairedPAIEstimator)):
        failures = {name: (_ONE_MODEL, _NOT_ONE_MODEL) for name in _ESTIMATOR_2D}
        failures["check_do_not_raise_errors_in_init_or_set_params"] = _DEPRECATED_KEYWORD
        return failures
    failures = {name: (_CONTINUOUS_X, _OUT_OF_RANGE) for name in _PREDICTOR_CONTINUOUS}
    if hasattr(estimator, "transform"):
        failures.update({name: (_CONTINUOUS_X, _OUT_OF_RANGE) for name in _TRANSFORMER_CONTINUOUS})
        if "max_iter" in estimator.get_params():  # the fits that iterate report n_iter_
            failures["check_transformer_n_iter"] = (_CONTINUOUS_X, _OUT_OF_RANGE)
    return failures


def _messages(exc):
    """The messages of ``exc`` and of the errors it chains."""
    seen = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return " | ".join(f"{type(e).__name__}: {e}" for e in seen)


def _check_name(check):
    return getattr(check, "func", check).__name__


@parametrize_with_checks(_predictors() + _estimators())
def test_sklearn_compatible(estimator, check):
    """Every check passes, or fails as its entry in :func:`expected_failures` says (reason and refusal).

    The expected failures are applied here, not through ``expected_failed_checks``, for two reasons:
    the refusal is matched (a check failing for another reason fails the test), and pytest does not
    format the long tracebacks of scikit-learn's checks for the expected ones (seconds each).
    """
    expected = expected_failures(estimator).get(_check_name(check))
    if expected is None:
        check(estimator)
        return
    reason, refusal = expected
    try:
        check(estimator)
    except Exception as exc:  # (the check's own AssertionError included)
        message = _messages(exc)
    else:
        pytest.fail(f"{_check_name(check)} passes: drop it from expected_failures ({reason})")
    assert re.search(refusal, message), f"failed for another reason than '{reason}': {message}"
    pytest.xfail(reason)


# ------------------------------------------------------------------ samplers: the API checks without fit
_API_CHECKS = [
    sk_checks.check_estimator_cloneable, sk_checks.check_estimator_tags_renamed, sk_checks.check_valid_tag_types,
    sk_checks.check_estimator_repr, sk_checks.check_no_attributes_set_in_init,
    sk_checks.check_do_not_raise_errors_in_init_or_set_params, sk_checks.check_mixin_order,
    sk_checks.check_get_params_invariance, sk_checks.check_set_params,
    sk_checks.check_parameters_default_constructible,
]


@pytest.mark.parametrize("check", _API_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("sampler", _samplers(), ids=repr)
def test_sampler_api(sampler, check):
    """A sampler has no fit; the checks of parameters, cloning and repr apply to every one."""
    check(type(sampler).__name__, sampler)


# ------------------------------------------------------------------ what the marked checks test, on outcomes
def _history(seed=0):
    """30 models x 12 questions of 0/1 outcomes, a fifth of the first 10 rows' cells not observed."""
    H = fq.make_synthetic_bank(n_models=30, n_questions=12, n_new=1, n_components=2, random_state=seed).history
    hidden = np.random.default_rng(seed).random(H.shape) < 0.2
    hidden[10:] = False  # complete rows too: StackedPredictor learns its weights on them
    hidden[:, 0] = False  # no row left empty
    return np.where(hidden, np.nan, H)


def _fitted_state(est):
    """The public fitted attributes, for comparing two fits (numbers as arrays, the rest by joblib's hash)."""
    return {k: v if isinstance(v, (np.ndarray, numbers.Number)) else joblib_hash(v)
            for k, v in vars(est).items() if k.endswith("_") and not k.startswith("_")}


def _assert_numpy(name, value):
    """A fitted attribute holds numpy arrays, not torch tensors or lists of numbers."""
    assert not type(value).__module__.startswith("torch"), f"{name} is a {type(value).__name__}, not numpy"
    assert not (isinstance(value, list) and value and all(isinstance(v, numbers.Number) for v in value)), (
        f"{name} is a list of numbers, not an ndarray")
    if isinstance(value, dict):
        for key, item in value.items():
            _assert_numpy(f"{name}[{key!r}]", item)


def _predictions_after(est, answers):
    post = est.posterior()
    for question, outcome in answers:
        post.update(question, outcome)
    return np.array(post.predictions, dtype=float)


@pytest.mark.parametrize("predictor", _predictors(), ids=repr)
def test_predictor_conventions_on_outcomes(predictor):
    """The marked checks' conventions on a valid history: fit returns self and leaves its parameters and
    input alone, sets only ``_``-suffixed numpy attributes with ``n_features_in_``, refits (and clones,
    and unpickles) to the same predictions with a fixed ``random_state``, and reading it changes nothing."""
    H = _history()
    given = H.copy()
    given.flags.writeable = False  # a read-only input is read, never written
    est = clone(predictor)
    with pytest.raises(NotFittedError):
        est.posterior()
    params, before = joblib_hash(est.get_params()), set(vars(est))
    assert est.fit(given) is est
    assert_array_equal(given, H)
    assert joblib_hash(est.get_params()) == params, "fit changed a parameter"
    added = set(vars(est)) - before
    public = sorted(k for k in added if not (k.endswith("_") or k.startswith("_")))
    assert not public, f"fit set attributes that are neither fitted (name_) nor private (_name): {public}"
    assert est.n_features_in_ == H.shape[1]
    for name in added:
        _assert_numpy(name, getattr(est, name))
    check_is_fitted(est)

    answers = [(1, 1.0), (4, 0.0), (7, 1.0)]
    predictions = _predictions_after(est, answers)
    assert predictions.shape == (H.shape[1],) and np.all((predictions >= 0) & (predictions <= 1))
    state = joblib_hash(vars(est))
    score = est.score(H)
    if hasattr(est, "transform"):
        rows = est.transform(H)
        np.testing.assert_allclose(est.transform(H[:7]), rows[:7], rtol=1e-6, atol=1e-9)  # row by row
    assert np.isfinite(score)
    assert joblib_hash(vars(est)) == state, "posterior, score or transform changed the fitted predictor"

    fitted = _fitted_state(est)
    assert_array_equal(_predictions_after(est.fit(H), answers), predictions)  # refitting: same predictions
    assert_array_equal(_predictions_after(clone(predictor).fit(H), answers), predictions)
    for name, value in _fitted_state(est).items():
        assert_array_equal(value, fitted[name], err_msg=name)
    restored = pickle.loads(pickle.dumps(est))
    assert_array_equal(_predictions_after(restored, answers), predictions)
    assert restored.score(H) == score


@pytest.mark.parametrize("predictor", [None, "question-means"])
@pytest.mark.parametrize("kind", [fq.PAIEstimator, fq.PairedPAIEstimator], ids=lambda k: k.__name__)
def test_estimator_conventions_on_outcomes(kind, predictor):
    """The marked checks' conventions on one model's outcomes: fit returns self and leaves its parameters
    (the fitted predictor included) and its input alone, sets only ``_``-suffixed attributes, and a copy,
    a refit and an unpickled copy give the same estimate with a fixed ``random_state``."""
    H = _history()
    model = None if predictor is None else QuestionMeans().fit(H)
    z = fq.make_synthetic_bank(n_models=30, n_questions=12, n_new=2, n_components=2, random_state=0).new_outcomes
    given = [z[0].copy(), z[1].copy()]
    for outcomes in given:
        outcomes.flags.writeable = False
    args = given if kind is fq.PairedPAIEstimator else given[:1]
    sampler = UniformSampler() if model is None else None  # (the default policy needs a predictor)
    est = kind(model, sampler, budget=4, random_state=3)
    with pytest.raises(NotFittedError):
        est.conf_int()
    params, before = joblib_hash(est.get_params()), set(vars(est))
    assert est.fit(*args) is est
    assert joblib_hash(est.get_params()) == params, "fit changed a parameter (or the predictor)"
    assert_array_equal(given[0], z[0])
    added = set(vars(est)) - before
    public = sorted(k for k in added if not (k.endswith("_") or k.startswith("_")))
    assert not public, f"fit set attributes that are neither fitted (name_) nor private (_name): {public}"
    check_is_fitted(est)
    assert 0 < est.n_queries_ <= 8
    first = (est.estimate_, joblib_hash(est.queries_))
    assert (est.fit(*args).estimate_, joblib_hash(est.queries_)) == first
    again = kind(**est.get_params(deep=False)).fit(*args)  # (clone would unfit the predictor)
    assert (again.estimate_, joblib_hash(again.queries_)) == first
    restored = pickle.loads(pickle.dumps(est))
    assert restored.estimate_ == est.estimate_ and restored.conf_int() == est.conf_int()
