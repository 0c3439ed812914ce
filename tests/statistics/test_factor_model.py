"""Tests for :mod:`faqstats.factor_model`: the logistic factor model, its CV and the
online Laplace update (paper Section 3.1, Appendix A.1-A.2).

Statistical claims are checked as statistics, against planted truths: the held-out
log-loss of a fit is compared with the log-loss of the true probabilities, and the
tolerances are stated next to the expected size of the estimation error. Every
fitting test uses a fixed seed, small banks and few AdamW steps.
"""

import itertools
import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from joblib import hash as joblib_hash
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import expit
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.utils.estimator_checks import parametrize_with_checks

import faqstats._torch_backend as backend
import faqstats.factor_model as factor_model
from faqstats import LogisticFactorModel, LogisticFactorModelCV, laplace_update, make_synthetic_bank
from faqstats.factor_model import log_loss_on_cells


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny problems (conftest.py)


def _model(**params):
    """A model that fits the planted banks below well in a few hundred steps."""
    defaults = dict(n_components=3, regularization=0.3, learning_rate=0.05, max_iter=300, device="cpu", random_state=0)
    return LogisticFactorModel(**{**defaults, **params})


def _small_history(n_models=30, n_questions=20, missing_rate=0.3, seed=0):
    return make_synthetic_bank(
        n_models=n_models, n_questions=n_questions, n_new=2, n_components=2, missing_rate=missing_rate, random_state=seed
    ).history


# ------------------------------------------------------------ scikit-learn checks
_CONTINUOUS_X = (
    "feeds continuous X (Gaussian/uniform features), but the model's input is outcomes in [0, 1] "
    "with NaN for not observed, so fit refuses it ('X must be in [0, 1]'); "
)
_PREDICT_PROBA = (
    " It would also call predict_proba(X), while predict_proba takes model factors of "
    "shape (k,) or (m, k) (the public API), not outcome rows."
)
_EXPECTED_FAILED_CHECKS = {
    "check_estimators_overwrite_params": _CONTINUOUS_X + "see test_factor_model_fit_conventions_on_binary_data.",
    "check_dont_overwrite_parameters": _CONTINUOUS_X + "see test_factor_model_fit_conventions_on_binary_data.",
    "check_estimators_fit_returns_self": _CONTINUOUS_X + "see test_factor_model_fit_conventions_on_binary_data.",
    "check_fit_idempotent": _CONTINUOUS_X + "see test_factor_model_fit_conventions_on_binary_data.",
    "check_fit_check_is_fitted": _CONTINUOUS_X + "see test_factor_model_fit_conventions_on_binary_data.",
    "check_n_features_in": _CONTINUOUS_X + "see test_factor_model_fit_conventions_on_binary_data.",
    "check_transformer_n_iter": _CONTINUOUS_X + "n_iter_ is checked in test_factor_model_fit_conventions_on_binary_data.",
    "check_pipeline_consistency": _CONTINUOUS_X + "see test_factor_model_fit_conventions_on_binary_data.",
    "check_readonly_memmap_input": _CONTINUOUS_X + "see test_factor_model_accepts_array_likes_and_dtypes.",
    "check_f_contiguous_array_estimator": _CONTINUOUS_X + "see test_factor_model_accepts_array_likes_and_dtypes.",
    "check_transformer_data_not_an_array": _CONTINUOUS_X + "see test_factor_model_accepts_array_likes_and_dtypes.",
    "check_transformer_preserve_dtypes": _CONTINUOUS_X + "see test_factor_model_accepts_array_likes_and_dtypes.",
    "check_estimators_dtypes": _CONTINUOUS_X + "see test_factor_model_accepts_array_likes_and_dtypes." + _PREDICT_PROBA,
    "check_estimators_pickle": _CONTINUOUS_X + "see test_factor_model_pickle_and_read_only_methods." + _PREDICT_PROBA,
    "check_dict_unchanged": _CONTINUOUS_X + "see test_factor_model_pickle_and_read_only_methods." + _PREDICT_PROBA,
    "check_methods_subset_invariance": _CONTINUOUS_X + "see test_factor_model_transform_rows_are_independent."
    + _PREDICT_PROBA,
    "check_methods_sample_order_invariance": _CONTINUOUS_X
    + "see test_factor_model_transform_rows_are_independent."
    + _PREDICT_PROBA,
    "check_n_features_in_after_fitting": _CONTINUOUS_X + "see test_factor_model_transform_rejects_bad_input."
    + _PREDICT_PROBA,
    "check_fit2d_predict1d": _CONTINUOUS_X + "transform(1-D) is refused in test_factor_model_transform_rejects_bad_input."
    " It would also expect predict_proba(1-D X) to raise, while predict_proba(u) with a 1-D u is the documented "
    "call for one model's factor.",
    "check_fit2d_1sample": _CONTINUOUS_X + "see test_factor_model_fits_one_model_or_one_question.",
    "check_fit2d_1feature": _CONTINUOUS_X + "see test_factor_model_fits_one_model_or_one_question.",
    "check_transformer_general": _CONTINUOUS_X
    + "and it also requires fit_transform(X) == transform(X) to 1e-2 after 50 steps: fit_transform returns the "
    "jointly fitted model_factors_, transform refits rows with V frozen from prior_mean_; they agree only near "
    "convergence (checked in test_factor_model_transform_recovers_new_models).",
}


def _expected_failed_checks(estimator):
    return _EXPECTED_FAILED_CHECKS


@parametrize_with_checks(
    [
        LogisticFactorModel(n_components=2, max_iter=50, random_state=0),
        LogisticFactorModel(n_components=2, max_iter=20, solver="newton", random_state=0),
    ],
    expected_failed_checks=_expected_failed_checks,
)
def test_factor_model_sklearn_compatible(estimator, check):
    check(estimator)


def test_factor_model_fit_conventions_on_binary_data():
    """What the continuous-X checks above test, on valid (binary) histories."""
    H = _small_history()
    fm = _model(max_iter=40)
    params = fm.get_params()
    assert fm.fit(H) is fm  # fit returns self
    assert fm.get_params() == params  # parameters are never rewritten ("auto" device included)
    assert fm.device_ == "cpu" and fm.n_iter_ == 40 and fm.loss_curve_.shape == (40,)
    assert fm.loss_curve_[-1] < fm.loss_curve_[0]
    assert fm.n_features_in_ == H.shape[1] and fm.model_factors_.shape == (H.shape[0], 3)
    assert fm.score(H, y=np.zeros(len(H))) == fm.score(H)  # y is ignored

    again = clone(fm).fit(H).fit(H)  # idempotent, and reproducible from random_state
    assert_array_equal(again.model_factors_, fm.model_factors_)
    assert_array_equal(again.question_factors_, fm.question_factors_)
    assert_array_equal(clone(fm).fit_transform(H), fm.model_factors_)

    with pytest.raises(NotFittedError):
        _model().transform(H)
    assert LogisticFactorModel(device="auto").get_params()["device"] == "auto"


@pytest.mark.parametrize(
    "convert",
    [
        pytest.param(lambda H: H.tolist(), id="nested-list"),
        pytest.param(lambda H: H.astype(np.float32), id="float32"),
        pytest.param(lambda H: np.asfortranarray(H), id="fortran-order"),
        pytest.param(lambda H: H.astype(object), id="object-dtype"),
        pytest.param(lambda H: np.require(H, requirements="C").copy().view(), id="view"),
    ],
)
def test_factor_model_accepts_array_likes_and_dtypes(convert):
    H = _small_history()
    ref = _model(max_iter=30).fit(H)
    got = _model(max_iter=30).fit(convert(H))
    assert_array_equal(got.model_factors_, ref.model_factors_)
    assert got.model_factors_.dtype == np.float64
    assert_array_equal(got.transform(convert(H)), ref.transform(H))


def test_factor_model_accepts_integer_boolean_read_only_and_pandas_input(tmp_path):
    H = _small_history(missing_rate=0.0)
    ref = _model(max_iter=30).fit(H)
    np.save(tmp_path / "H.npy", H)
    memmap = np.load(tmp_path / "H.npy", mmap_mode="r")
    for X in (H.astype(np.int8), H.astype(bool), memmap):
        assert_array_equal(_model(max_iter=30).fit(X).model_factors_, ref.model_factors_)

    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(_small_history(), columns=[f"q{j}" for j in range(20)]).astype("Float64")  # pd.NA cells
    fm = _model(max_iter=30).fit(df)
    assert list(fm.feature_names_in_) == list(df.columns)
    assert fm.transform(df).shape == (30, 3)
    with pytest.raises(ValueError, match="feature names"):
        fm.transform(df[df.columns[::-1]])


def test_factor_model_pickle_and_read_only_methods():
    H = _small_history()
    fm = _model(max_iter=30).fit(H)
    before = joblib_hash(vars(fm))
    U = fm.transform(H[:5])
    fm.score(H)
    fm.predict_proba(U)
    assert joblib_hash(vars(fm)) == before  # transform/score/predict_proba change nothing

    restored = pickle.loads(pickle.dumps(fm))
    assert_array_equal(restored.transform(H[:5]), U)
    assert_array_equal(restored.predict_proba(U), fm.predict_proba(U))


def test_factor_model_fits_one_model_or_one_question():
    one_model = _model(max_iter=20).fit(np.array([[1.0, 0.0, np.nan, 1.0]]))
    assert_allclose(one_model.prior_cov_, np.eye(3), rtol=1e-6)  # identity prior: no spread to estimate
    one_question = _model(max_iter=20).fit(np.array([[1.0], [0.0], [1.0]]))
    assert one_question.question_factors_.shape == (1, 3)


# ------------------------------------------------------------ planted structure
@pytest.fixture(scope="module")
def planted():
    """A planted rank-3 bank (400 models x 300 questions) with 20% of cells held out,
    and the default-ish fit on the rest (about 1 s)."""
    bank = make_synthetic_bank(n_models=400, n_questions=300, n_new=20, n_components=3, random_state=0)
    held = np.random.default_rng(10).random(bank.history.shape) < 0.2
    train = np.where(held, np.nan, bank.history)
    return bank, held, train, _model().fit(train)


def _held_out_losses(bank, held, logits):
    """(fitted, truth, constant) mean log-losses on the held-out cells."""
    H = bank.history
    rate = np.nanmean(np.where(held, np.nan, H))
    truth = bank.model_factors @ bank.question_factors.T
    return (
        log_loss_on_cells(H, logits, held),
        log_loss_on_cells(H, truth, held),
        log_loss_on_cells(H, np.full(H.shape, np.log(rate / (1 - rate))), held),
    )


def test_factor_model_recovers_planted_structure(planted):
    """Held-out log-loss within 5% of that of the true probabilities.

    The excess of a fitted logistic factor over the truth is about k/(2 n) per factor
    (n observations behind it): 3/(2*240) + 3/(2*320) ~ 0.011, i.e. ~3% of the
    truth's 0.40 log-loss. A constant predictor is ~0.29 worse than the truth; the
    fit must close at least 90% of that gap.
    """
    bank, held, _, fm = planted
    fitted, truth, constant = _held_out_losses(bank, held, fm.model_factors_ @ fm.question_factors_.T)
    assert fitted <= 1.05 * truth, (fitted, truth)
    assert fitted - truth <= 0.1 * (constant - truth), (fitted, truth, constant)


def test_planted_structure_criterion_rejects_a_wrong_rank(planted):
    """Guard: the 5% criterion above is not vacuous; a rank-1 fit (no intercept
    direction) of the same rank-3 bank fails it."""
    bank, held, train, _ = planted
    fm = _model(n_components=1).fit(train)
    fitted, truth, _ = _held_out_losses(bank, held, fm.model_factors_ @ fm.question_factors_.T)
    assert fitted > 1.05 * truth


def test_factor_model_transform_recovers_new_models(planted):
    """With V frozen, half of a new model's 300 answers pin down its factor.

    The held-out log-loss on the other half is within 10% of the truth's (expected
    excess k/(2*150) ~ 0.01 ~ 3%, plus the error of the frozen V), and the predicted
    probabilities are far closer to the truth than the prior mean's (the new models
    are shifted towards higher ability, so the prior alone is off).
    """
    bank, _, train, fm = planted
    Z = bank.new_outcomes.astype(float)
    seen = np.random.default_rng(1).random(Z.shape) < 0.5
    U = fm.transform(np.where(seen, Z, np.nan))
    truth = bank.new_model_factors @ bank.question_factors.T
    fitted_loss = log_loss_on_cells(Z, U @ fm.question_factors_.T, ~seen)
    true_loss = log_loss_on_cells(Z, truth, ~seen)
    assert fitted_loss <= 1.10 * true_loss, (fitted_loss, true_loss)

    error = np.abs(fm.predict_proba(U) - expit(truth)).mean()
    prior_error = np.abs(fm.predict_proba(fm.prior_mean_) - expit(truth)).mean()
    assert error < 0.06 and error < prior_error / 3, (error, prior_error)

    # The same solver with V frozen reproduces the jointly fitted training factors
    # (only up to convergence: mean probability gap below 0.02).
    refit = fm.transform(train[:100])
    gap = np.abs(fm.predict_proba(refit) - fm.predict_proba(fm.model_factors_[:100])).mean()
    assert gap < 0.02, gap

    # Rows with nothing observed get the prior mean, exactly.
    empty = np.full((2, Z.shape[1]), np.nan)
    assert_array_equal(fm.transform(empty), np.tile(fm.prior_mean_, (2, 1)))


def test_factor_model_transform_rows_are_independent():
    """A row's factor does not depend on the other rows of the batch nor on their
    order (float64: equal to 1e-10), and transform is deterministic."""
    H = _small_history(missing_rate=0.5)
    fm = _model(max_iter=60, dtype="float64", random_state=None).fit(H)
    new = _small_history(n_models=8, missing_rate=0.5, seed=1)
    new[3] = np.nan
    U = fm.transform(new)
    assert_allclose(fm.transform(new[::-1])[::-1], U, rtol=0, atol=1e-10)
    assert_allclose(np.vstack([fm.transform(row[None]) for row in new]), U, rtol=0, atol=1e-10)
    assert_allclose(fm.transform(new[2:5]), U[2:5], rtol=0, atol=1e-10)
    assert_array_equal(fm.transform(new), U)


@pytest.mark.parametrize("frozen", [False, True], ids=["fit", "transform"])
def test_factor_model_dense_and_sparse_losses_agree(monkeypatch, frozen):
    """The gathered (sparse) loss is the same function as the masked dense one."""
    H = _small_history(missing_rate=0.5)

    def run(min_fraction):
        monkeypatch.setattr(backend, "_DENSE_MIN_FRACTION", min_fraction)
        fm = _model(max_iter=40, dtype="float64").fit(H)
        return fm.transform(H) if frozen else fm.model_factors_

    assert_allclose(run(0.0), run(1.01), rtol=0, atol=1e-8)  # always dense vs always sparse


def test_factor_model_never_observed_question():
    """A question nobody answered is not an error: it gets the mean observed question
    factor (the "average question") and is flagged in observed_questions_."""
    H = _small_history(n_models=40, n_questions=25)
    H[:, 7] = np.nan
    fm = _model(max_iter=50).fit(H)
    expected = np.ones(25, dtype=bool)
    expected[7] = False
    assert_array_equal(fm.observed_questions_, expected)
    V = fm.question_factors_
    assert_allclose(V[7], V[expected].mean(axis=0), rtol=1e-12)
    assert_allclose(fm.predict_proba(fm.model_factors_)[:, 7], expit(fm.model_factors_ @ V[expected].mean(axis=0)))
    assert np.isfinite(fm.transform(H)).all()


def test_factor_model_prior_is_the_model_factors_gaussian(planted):
    fm = planted[3]
    U = fm.model_factors_
    assert_allclose(fm.prior_mean_, U.mean(axis=0), rtol=0, atol=1e-12)
    assert_array_equal(fm.prior_cov_, fm.prior_cov_.T)
    assert np.linalg.eigvalsh(fm.prior_cov_).min() > 0
    assert_allclose(fm.prior_cov_, np.cov(U, rowvar=False), rtol=1e-6)  # ddof=1, plus a 1e-8 relative ridge


def test_factor_model_prior_cov_positive_definite_with_degenerate_models():
    """Two identical models: their sample covariance is 0, the ridge keeps it PD."""
    fm = _model(max_iter=30).fit(np.array([[1.0, 0.0, 1.0], [1.0, 0.0, 1.0]]))
    assert np.linalg.eigvalsh(fm.prior_cov_).min() > 0


# ------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "X, error, match",
    [
        ([[1, 1.5], [0, 1]], ValueError, r"must be in \[0, 1\]"),
        ([[1, 2], [0, 1]], ValueError, r"must be in \[0, 1\]"),
        ([[1, -1], [0, 1]], ValueError, "Negative values in data passed to X"),
        ([[1, 0], [np.nan, np.nan]], ValueError, r"no observed outcome \(all NaN\): rows 1"),
        ([1, 0, 1], ValueError, "Expected 2D array"),
        ([[1, np.inf], [0, 1]], ValueError, "infinity"),
        ([[1, "a"], [0, 1]], ValueError, "could not convert"),
        (np.empty((0, 3)), ValueError, "minimum of 1 is required"),
    ],
    ids=["one-and-a-half", "two", "negative", "empty-row", "1-D", "inf", "string", "no-rows"],
)
def test_factor_model_rejects_bad_history(X, error, match):
    with pytest.raises(error, match=match):
        _model(max_iter=2).fit(X)


@pytest.mark.parametrize(
    "params, error, match",
    [
        (dict(n_components=2.0), TypeError, "n_components must be an integer"),
        (dict(n_components=0), ValueError, r"n_components must be in \[1, inf\]"),
        (dict(regularization=-0.1), ValueError, r"regularization must be in \[0.0, inf\]"),
        (dict(regularization=np.nan), ValueError, "regularization must be finite"),
        (dict(learning_rate=0.0), ValueError, "learning_rate"),
        (dict(max_iter=0), ValueError, "max_iter"),
        (dict(dtype="float16"), ValueError, "dtype must be one of"),
        (dict(device="tpu"), ValueError, "device must be"),
        (dict(device=0), TypeError, "device must be a string"),
        (dict(random_state="seed"), TypeError, "random_state"),
    ],
)
def test_factor_model_rejects_bad_parameters(params, error, match):
    with pytest.raises(error, match=match):
        _model(**{"max_iter": 2, **params}).fit(np.eye(3))


def test_factor_model_transform_rejects_bad_input():
    fm = _model(max_iter=5).fit(np.eye(4))
    with pytest.raises(ValueError, match="X has 3 features, but LogisticFactorModel is expecting 4"):
        fm.transform(np.eye(3))
    with pytest.raises(ValueError, match="X has 3 features"):
        fm.score(np.eye(3))
    with pytest.raises(ValueError, match="Expected 2D array"):
        fm.transform(np.ones(4))
    with pytest.raises(ValueError, match=r"must be in \[0, 1\]"):
        fm.transform(np.full((1, 4), 1.5))
    with pytest.raises(ValueError, match="model factors have 2 components, the factor model has 3"):
        fm.predict_proba(np.zeros(2))


# ------------------------------------------------------------ Laplace update
def _direct_posterior(mean, cov, v, z):
    """Naive reference (paper Appendix A.2 before Sherman-Morrison): precision form."""
    p = expit(mean @ v)
    new_cov = np.linalg.inv(np.linalg.inv(cov) + p * (1 - p) * np.outer(v, v))
    return mean + new_cov @ v * (z - p), new_cov


_coord = st.floats(-3, 3, allow_nan=False, allow_subnormal=False)


@st.composite
def gaussian_and_answers(draw, max_steps=1):
    """A N(mean, cov) factor posterior (cov = A A^T + 0.1 I) and answered questions."""
    k = draw(st.integers(1, 4))
    vec = st.lists(_coord, min_size=k, max_size=k).map(np.array)
    A = np.array(draw(st.lists(vec, min_size=k, max_size=k)))
    cov = A @ A.T + 0.1 * np.eye(k)
    steps = draw(st.lists(st.tuples(vec, st.integers(0, 1)), min_size=1, max_size=max_steps))
    return draw(vec), cov, steps


@settings(max_examples=200, deadline=None)
@given(gaussian_and_answers())
def test_laplace_update_matches_direct_formula(case):
    mean, cov, [(v, z)] = case
    new_mean, new_cov = laplace_update(mean, cov, v, z)
    ref_mean, ref_cov = _direct_posterior(mean, cov, v, z)
    assert_allclose(new_cov, ref_cov, rtol=1e-10, atol=1e-10)
    p = expit(mean @ v)
    assert_allclose(new_mean, mean + new_cov @ v * (z - p), rtol=1e-10, atol=1e-10)  # Eq. 10 as written
    assert_allclose(new_mean, ref_mean, rtol=1e-10, atol=1e-10)
    # The posterior variance along v shrinks, exactly as v'Sv / (1 + w v'Sv).
    s, w = v @ cov @ v, p * (1 - p)
    assert v @ new_cov @ v <= s
    assert_allclose(v @ new_cov @ v, s / (1 + w * s), rtol=1e-9, atol=1e-12)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gaussian_and_answers(max_steps=60))
def test_laplace_update_keeps_covariance_symmetric_psd(case):
    mean, cov, steps = case
    scale = np.linalg.eigvalsh(cov).max()
    for v, z in steps:
        new_mean, new_cov = laplace_update(mean, cov, v, z)
        assert_array_equal(new_cov, new_cov.T)
        assert np.linalg.eigvalsh(new_cov).min() >= -1e-12 * scale
        # each answer removes information-free variance only: cov' <= cov (Loewner order)
        assert np.linalg.eigvalsh(cov - new_cov).min() >= -1e-12 * scale
        assert np.isfinite(new_mean).all()
        mean, cov = new_mean, new_cov


def test_laplace_update_reference_is_able_to_fail():
    """Guard: the direct formula separates right from wrong; the paper's update with
    the sign of (z - p) flipped is rejected."""
    mean, cov, v = np.array([0.3, -0.2]), np.array([[1.0, 0.3], [0.3, 0.5]]), np.array([1.0, 2.0])
    good_mean, _ = laplace_update(mean, cov, v, 1)
    ref_mean, _ = _direct_posterior(mean, cov, v, 1)
    wrong_mean = mean - (good_mean - mean)
    assert_allclose(good_mean, ref_mean, rtol=1e-12)
    assert not np.allclose(wrong_mean, ref_mean)
    assert good_mean @ v > mean @ v  # a correct answer raises the predicted logit


# ------------------------------------------------------------ precision
def test_factor_model_float32_float64_consistent():
    """Both precisions start from the same draws (made in float64), so they fit the same
    function: probabilities agree to 1e-3 (measured ~1e-6) after 200 steps."""
    bank = make_synthetic_bank(n_models=60, n_questions=50, n_components=3, missing_rate=0.3, random_state=2)
    fits = {dt: _model(max_iter=200, dtype=dt).fit(bank.history) for dt in ("float32", "float64")}
    p32, p64 = (fits[dt].predict_proba(fits[dt].model_factors_) for dt in ("float32", "float64"))
    assert_allclose(p32, p64, rtol=0, atol=1e-3)
    Z = bank.new_outcomes.astype(float)
    t32, t64 = (fits[dt].predict_proba(fits[dt].transform(Z)) for dt in ("float32", "float64"))
    assert_allclose(t32, t64, rtol=0, atol=1e-3)
    assert all(fm.question_factors_.dtype == np.float64 for fm in fits.values())


# ------------------------------------------------------------ cross-validation
@pytest.fixture(scope="module")
def tiny_cv():
    bank = make_synthetic_bank(n_models=40, n_questions=50, n_components=2, missing_rate=0.2, random_state=0)
    cv = LogisticFactorModelCV(
        n_components_grid=(1, 2, 4), regularization_grid=(0.01, 0.3), cv=3, max_iter=100, learning_rate=0.05,
        device="cpu", random_state=0,
    )
    return bank, cv.fit(bank.history)


def _one_se_choice(results):
    """Naive 1-SE rule: simplest (fewest components, then largest alpha) candidate whose
    mean score is within one standard error of the best mean score."""
    mean, se = results["mean_score"], results["std_error"]
    best = int(np.argmax(mean))
    ok = [c for c in range(len(mean)) if mean[c] >= mean[best] - se[best]]
    return min(ok, key=lambda c: (results["n_components"][c], -results["regularization"][c]))


def test_factor_model_cv_results_and_one_se_rule(tiny_cv):
    bank, cv = tiny_cv
    res = cv.cv_results_
    grid = list(itertools.product((1, 2, 4), (0.01, 0.3)))
    assert_array_equal(res["n_components"], [k for k, _ in grid])
    assert_array_equal(res["regularization"], [a for _, a in grid])
    assert res["fold_scores"].shape == (6, 3) and np.isfinite(res["fold_scores"]).all()
    assert (res["fold_scores"] < 0).all()  # negative log-losses
    assert_allclose(res["mean_score"], res["fold_scores"].mean(axis=1))
    assert_allclose(res["std_error"], res["fold_scores"].std(axis=1, ddof=1) / np.sqrt(3))

    chosen = cv.best_index_
    assert chosen == _one_se_choice(res)
    assert res["mean_score"][chosen] >= res["mean_score"].max() - res["std_error"][np.argmax(res["mean_score"])]
    assert cv.best_params_ == {"n_components": int(res["n_components"][chosen]), "regularization": float(res["regularization"][chosen])}

    best = cv.best_estimator_
    assert (best.n_components, best.regularization) == (cv.best_params_["n_components"], cv.best_params_["regularization"])
    assert best.model_factors_.shape == (40, best.n_components)  # refitted on all rows
    assert cv.question_factors_ is best.question_factors_
    assert cv.prior_cov_ is best.prior_cov_ and cv.n_features_in_ == 50
    assert_array_equal(cv.transform(bank.history[:3]), best.transform(bank.history[:3]))
    with pytest.raises(AttributeError):
        cv.not_an_attribute_


def test_factor_model_cv_one_se_rule_on_planted_scores(monkeypatch):
    """The selection logic on designed fold scores, where the 1-SE choice differs from
    the best mean and the alpha tie-break matters."""
    designed = np.array([
        [-0.70, -0.71, -0.69],  # (1, 0.01)  far worse
        [-0.60, -0.62, -0.58],  # (1, 0.1)   worse than best - 1 SE
        [-0.50, -0.52, -0.48],  # (2, 0.01)  within 1 SE
        [-0.505, -0.525, -0.485],  # (2, 0.1) within 1 SE, simpler (stronger decay): chosen
        [-0.45, -0.55, -0.35],  # (4, 0.01)  best mean -0.45, SE 0.0577
        [-0.47, -0.50, -0.44],  # (4, 0.1)
    ])
    calls = []

    def fake_score(H, logits, cells, scoring):  # called fold by fold, candidate by candidate
        i = len(calls)
        calls.append(i)
        return designed[i % 6, i // 6]

    monkeypatch.setattr(factor_model, "_cv_score", fake_score)
    H = _small_history(n_models=12, n_questions=8)
    kw = dict(n_components_grid=(1, 2, 4), regularization_grid=(0.01, 0.1), cv=3, max_iter=2, device="cpu", random_state=0)
    cv = LogisticFactorModelCV(**kw).fit(H)
    assert_array_equal(cv.cv_results_["fold_scores"], designed)
    assert cv.best_index_ == 3 and cv.best_params_ == {"n_components": 2, "regularization": 0.1}
    calls.clear()
    assert LogisticFactorModelCV(**kw, one_standard_error=False).fit(H).best_index_ == 4


@pytest.mark.parametrize(
    "params, error, match",
    [
        (dict(cv=1), ValueError, r"cv must be in \[2, inf\]"),
        (dict(cv=2.5), TypeError, "cv must be an integer"),
        (dict(scoring="auc"), ValueError, "scoring must be 'log_loss' or 'accuracy'"),
        (dict(n_components_grid=()), ValueError, "must be non-empty"),
        (dict(n_components_grid=(0, 2)), ValueError, "n_components_grid entries"),
        (dict(regularization_grid=(-1.0,)), ValueError, "regularization_grid entries"),
        (dict(cv=50), ValueError, "too few for 50-fold"),
    ],
)
def test_factor_model_cv_rejects_bad_parameters(params, error, match):
    H = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, np.nan]])
    with pytest.raises(error, match=match):
        LogisticFactorModelCV(**{"max_iter": 2, "device": "cpu", **params}).fit(H)


def test_factor_model_cv_unfitted_has_no_learned_attributes():
    with pytest.raises(AttributeError):
        LogisticFactorModelCV().question_factors_
    with pytest.raises(NotFittedError):
        LogisticFactorModelCV().transform(np.eye(2))


def test_factor_model_grid_search_prefers_planted_rank():
    """GridSearchCV over rows (KFold) scores by held-out log-likelihood on new models.

    Rank 1 has no intercept direction, so on a planted rank-3 bank it is clearly worse:
    the measured gap is ~0.09 nats per cell against a fold spread of ~0.01.
    """
    bank = make_synthetic_bank(n_models=120, n_questions=150, n_components=3, random_state=0)
    search = GridSearchCV(_model(n_components=1), {"n_components": [1, 3]}, cv=KFold(3)).fit(bank.history)
    scores = search.cv_results_["mean_test_score"]
    assert np.isfinite(search.cv_results_["split0_test_score"]).all() and (scores < 0).all()
    assert search.best_params_ == {"n_components": 3}
    assert scores[1] - scores[0] > 0.03, scores
    assert search.best_estimator_.question_factors_.shape == (150, 3)


# ------------------------------------------------------------ Newton solver
def _newton(**params):
    """The alternating-Newton solver; regularization=3 is its recommended prior precision."""
    defaults = dict(n_components=3, regularization=3.0, solver="newton", device="cpu", random_state=0)
    return LogisticFactorModel(**{**defaults, **params})


def _objective_gradients(H, U, V, alpha):
    """Gradients of sum_observed BCE(u_i . v_j, H_ij) + (alpha/2)(|U|^2 + |V|^2), in numpy."""
    observed = ~np.isnan(H)
    R = np.where(observed, expit(U @ V.T) - np.nan_to_num(H), 0.0)
    return R @ V + alpha * U, R.T @ U + alpha * V


def test_newton_matches_reference_held_out_log_loss(planted):
    """On the planted bank the Newton fit predicts held-out cells as well as the
    reference AdamW fit: its held-out log-loss is at most 0.5% above the reference's
    (measured: 0.4142 against 0.4149, i.e. 0.2% better) and within 5% of the truth's."""
    bank, held, train, reference = planted
    ref_loss, truth, _ = _held_out_losses(bank, held, reference.model_factors_ @ reference.question_factors_.T)
    fm = _newton().fit(train)
    newton_loss, _, _ = _held_out_losses(bank, held, fm.model_factors_ @ fm.question_factors_.T)
    assert newton_loss <= 1.005 * ref_loss, (newton_loss, ref_loss)
    assert newton_loss <= 1.05 * truth, (newton_loss, truth)
    assert fm.n_iter_ < fm.max_iter  # stopped on tol, not on the cap


def test_newton_minimises_the_stated_objective():
    """At convergence (float64, tiny tol) the gradient of the stated MAP objective is
    zero: sum BCE + (alpha/2)(|U|^2 + |V|^2), relative to the objective's scale."""
    H = _small_history(missing_rate=0.3)
    fm = _newton(n_components=2, regularization=1.0, dtype="float64", tol=1e-12, max_iter=500).fit(H)
    gU, gV = _objective_gradients(H, fm.model_factors_, fm.question_factors_, 1.0)
    assert max(np.abs(gU).max(), np.abs(gV).max()) < 1e-4
    # the objective never increased from sweep to sweep (per-row backtracking)
    assert np.isfinite(fm.loss_curve_).all() and fm.loss_curve_[-1] < fm.loss_curve_[0]


def test_newton_fit_conventions():
    H = _small_history()
    fm = _newton(max_iter=3, tol=0.0)
    params = fm.get_params()
    assert fm.fit(H) is fm and fm.get_params() == params
    assert fm.n_iter_ == 3 and fm.loss_curve_.shape == (3,)
    again = clone(fm).fit(H)
    assert_array_equal(again.model_factors_, fm.model_factors_)  # reproducible from random_state
    assert_array_equal(again.question_factors_, fm.question_factors_)
    assert fm.model_factors_.dtype == np.float64 and fm.question_factors_.shape == (20, 3)
    converged = _newton(verbose=True).fit(H)  # the progress bar runs too
    assert 1 <= converged.n_iter_ < converged.max_iter and converged.loss_curve_.shape == (converged.n_iter_,)


def test_newton_transform_solves_each_row_on_its_own():
    """transform minimises each row's sum BCE + (alpha/2)|u|^2 (the fit's row
    subproblem) to convergence: zero gradient, independent of the batch (1e-10), and
    equal to the jointly fitted factors when refitting the training rows."""
    H = _small_history(missing_rate=0.5)
    fm = _newton(n_components=2, regularization=1.0, dtype="float64", tol=1e-12, max_iter=500).fit(H)
    new = _small_history(n_models=8, missing_rate=0.5, seed=1)
    new[3] = np.nan
    U = fm.transform(new)
    gU, _ = _objective_gradients(new[[i for i in range(8) if i != 3]], np.delete(U, 3, 0), fm.question_factors_, 1.0)
    assert np.abs(gU).max() < 1e-8
    assert_array_equal(U[3], fm.prior_mean_)
    assert_allclose(fm.transform(new[::-1])[::-1], U, rtol=0, atol=1e-10)
    assert_allclose(np.vstack([fm.transform(row[None]) for row in new]), U, rtol=0, atol=1e-10)
    assert_allclose(fm.transform(H), fm.model_factors_, rtol=0, atol=1e-5)


@pytest.mark.parametrize("frozen", [False, True], ids=["fit", "transform"])
def test_newton_dense_and_sparse_cells_agree(monkeypatch, frozen):
    """The gathered-cell Newton step is the same computation as the dense one."""
    H = _small_history(missing_rate=0.5)

    def run(min_fraction):
        monkeypatch.setattr(backend, "_DENSE_MIN_FRACTION", min_fraction)
        fm = _newton(max_iter=8, tol=0.0, dtype="float64").fit(H)
        return fm.transform(H) if frozen else fm.model_factors_

    assert_allclose(run(0.0), run(1.01), rtol=0, atol=1e-8)  # always dense vs always sparse


def test_newton_float32_float64_consistent():
    """Same draws, same steps: float32 and float64 fit the same probabilities (1e-3)."""
    bank = make_synthetic_bank(n_models=60, n_questions=50, n_components=3, missing_rate=0.3, random_state=2)
    fits = {dt: _newton(dtype=dt).fit(bank.history) for dt in ("float32", "float64")}
    p32, p64 = (fits[dt].predict_proba(fits[dt].model_factors_) for dt in ("float32", "float64"))
    assert_allclose(p32, p64, rtol=0, atol=1e-3)
    Z = bank.new_outcomes.astype(float)
    t32, t64 = (fits[dt].predict_proba(fits[dt].transform(Z)) for dt in ("float32", "float64"))
    assert_allclose(t32, t64, rtol=0, atol=1e-3)


def test_newton_very_sparse_history_never_allocates_dense_blocks():
    """A 99.9%-missing history (1500 x 4000, 6000 observed cells, k=16) goes through the
    gathered-cell path: memory is O(observed cells + (models + questions) k^2). The
    largest torch allocation is the batch of question Hessians (4000 x 16 x 16 float64,
    8.2 MB), below one dense models x questions float32 matrix (24 MB) and far below
    the 384 MB of models x questions x k."""
    from torch.profiler import ProfilerActivity, profile

    rng = np.random.default_rng(0)
    M, N, k = 1500, 4000, 16
    H = np.full((M, N), np.nan)
    rows, cols = rng.integers(0, M, 6000), rng.integers(0, N, 6000)
    H[rows, cols] = rng.random(6000) < 0.6
    H[np.arange(M), rng.integers(0, N, M)] = 1.0  # every model observed at least once
    assert np.isnan(H).mean() > 0.998
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fm = _newton(n_components=k, max_iter=3, tol=0.0).fit(H)
    largest = max(event.cpu_memory_usage for event in prof.events())
    assert 0 < largest <= 8 * max(M, N) * k * k + 64 * 1024, largest  # bytes: Hessians (N, k, k) float64
    assert largest < 4 * M * N
    assert np.isfinite(fm.model_factors_).all() and np.isfinite(fm.question_factors_).all()
    assert fm.transform(H[:50]).shape == (50, k)


@pytest.mark.parametrize(
    "params, error, match",
    [
        (dict(solver="lbfgs"), ValueError, r"solver must be one of \['adamw', 'newton'\]"),
        (dict(solver="newton", regularization=0.0), ValueError, "needs regularization > 0"),
        (dict(tol=-1e-3), ValueError, r"tol must be in \[0.0, inf\]"),
    ],
)
def test_factor_model_rejects_bad_solver_parameters(params, error, match):
    with pytest.raises(error, match=match):
        _model(**{"max_iter": 2, **params}).fit(np.eye(3))


def test_factor_model_cv_passes_the_solver_on():
    bank = make_synthetic_bank(n_models=40, n_questions=50, n_components=2, missing_rate=0.2, random_state=0)
    cv = LogisticFactorModelCV(
        n_components_grid=(1, 2), regularization_grid=(1.0,), cv=2, solver="newton", device="cpu", random_state=0
    ).fit(bank.history)
    assert cv.best_estimator_.solver == "newton" and cv.best_estimator_.n_iter_ < cv.max_iter
    assert np.isfinite(cv.cv_results_["fold_scores"]).all()


def test_prior_scale_scales_the_prior_covariance_and_survives_save_load(tmp_path):
    import faqstats as fq

    bank = fq.make_synthetic_bank(n_models=50, n_questions=40, n_components=2, random_state=0)
    base = fq.LogisticFactorModel(n_components=2, max_iter=50, random_state=0).fit(bank.history)
    half = fq.LogisticFactorModel(n_components=2, max_iter=50, random_state=0, prior_scale=0.5).fit(bank.history)
    np.testing.assert_allclose(half.prior_cov_, 0.5 * base.prior_cov_, rtol=1e-12)
    np.testing.assert_array_equal(half.question_factors_, base.question_factors_)
    back = fq.load_factor_model(fq.save_factor_model(half, tmp_path / "m.npz"))
    assert back.prior_scale == 0.5
    np.testing.assert_array_equal(back.prior_cov_, half.prior_cov_)
    with pytest.raises(ValueError, match="prior_scale"):
        fq.LogisticFactorModel(prior_scale=0.0).fit(bank.history)
