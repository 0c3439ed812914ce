"""The model-based estimate's arithmetic and its calibration rule, exactly.

The conformal quantile's finite-sample guarantee is checked by enumerating every position of an
exchangeable new score among the calibration scores; the estimate against a direct computation;
the design-based side against ``PAIEstimator`` run on the same draws.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import faqstats as fq
from faqstats.model_based import conformal_quantile, unasked_total_variance
from faqstats.posterior import FixedPredictions


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 60), alpha=st.floats(0.01, 0.5))
def test_conformal_quantile_covers_an_exchangeable_new_score_at_least_one_minus_alpha(n, alpha):
    # n + 1 distinct exchangeable scores: the new one is each of them with probability 1 / (n + 1)
    scores = np.arange(n + 1, dtype=float)
    covered = sum(scores[i] <= conformal_quantile(np.delete(scores, i), alpha) for i in range(n + 1))
    k = math.ceil((n + 1) * (1 - alpha))
    assert covered / (n + 1) == (min(k, n + 1)) / (n + 1)  # exactly k of the n + 1 positions (all when k > n)
    assert covered / (n + 1) >= 1 - alpha - 1e-12  # (up to the rounding of 1 - alpha)
    if k <= n:
        assert covered / (n + 1) < 1 - alpha + 1 / (n + 1)  # and not more than one position beyond


def test_conformal_quantile_is_infinite_when_the_level_needs_more_scores():
    assert conformal_quantile(np.ones(18), 0.05) == math.inf
    assert conformal_quantile(np.ones(19), 0.05) == 1.0


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=50, n_questions=40, n_new=2, n_components=2, random_state=1)


@pytest.fixture(scope="module")
def calibrated(bank):
    return fq.ModelBasedEstimator.from_history(bank.history, budget=6, n_folds=5, random_state=0, verbose=False)


def test_estimate_is_asked_answers_plus_the_posterior_means_of_the_rest(bank, calibrated):
    z = bank.new_outcomes[0]
    single = fq.ModelBasedEstimator.from_history(bank.history, budget=6, n_folds=5, random_state=0, verbose=False,
                                                 predictor=fq.GaussianProcessSurrogate(noise_floor=0.1))
    est = single.set_params(random_state=3).fit(z)
    post = single.predictor_.posterior()
    asked = []
    for q, y in zip(est.queries_["question"], est.queries_["outcome"]):
        post.update(int(q), float(y))
        asked.append(int(q))
    unasked = np.setdiff1d(np.arange(z.size), asked)
    expected = (z[asked].sum() + np.asarray(post.predictions)[unasked].sum()) / z.size
    assert est.estimate_ == pytest.approx(expected, abs=1e-12)
    mask = np.zeros(z.size, bool)
    mask[unasked] = True
    assert est.scale_ == pytest.approx(math.sqrt(unasked_total_variance(post, mask)) / z.size, rel=1e-12)
    # the default averages two predictors: the average posterior's plug-in, the components' scales averaged
    est = calibrated.set_params(random_state=3).fit(z)
    post = calibrated.predictor_.posterior()
    for q, y in zip(est.queries_["question"], est.queries_["outcome"]):
        post.update(int(q), float(y))
    asked = est.queries_["question"]
    unasked = np.setdiff1d(np.arange(z.size), asked)
    expected = (z[np.unique(asked)].sum() + np.asarray(post.predictions)[unasked].sum()) / z.size
    assert est.estimate_ == pytest.approx(expected, abs=1e-12)
    weights = calibrated.predictor_.weights_
    assert est.estimate_ == pytest.approx(weights @ est.component_estimates_, abs=1e-12)


def test_design_based_side_is_pai_on_the_same_draws(bank, calibrated):
    z = bank.new_outcomes[1]
    est = calibrated.set_params(random_state=5).fit(z)
    pai = fq.PAIEstimator(calibrated.policy_predictor_, calibrated.sampler_, calibrated.budget, random_state=5).fit(z)
    assert est.result_.design_based == pai.result_
    np.testing.assert_array_equal(est.queries_, pai.queries_)


def test_a_census_is_the_exact_accuracy_with_zero_scale(bank):
    H = bank.history
    means = np.nanmean(H, axis=0)

    class Means(fq.Predictor):
        def fit(self, X, y=None):
            self.n_features_in_ = X.shape[1]
            return self

        def posterior(self, dtype="float64", predict_every=1):
            return FixedPredictions(means)

    z = bank.new_outcomes[0]
    est = fq.ModelBasedEstimator(Means(), fq.UniformSampler(), budget=z.size, n_folds=2, max_calibration_models=4,
                                 random_state=0, verbose=False).calibrate(H).fit(z)
    assert est.estimate_ == pytest.approx(z.mean(), abs=1e-15) and est.scale_ == 0.0


def test_unasked_total_variance_of_a_gaussian_process_is_its_exact_variance():
    V = np.array([[1.0, 0.0], [0.5, 1.0], [0.0, 2.0]])
    cov = np.array([[0.3, 0.1], [0.1, 0.2]])
    noise = np.array([0.1, 0.2, 0.3])
    post = fq.posterior.GaussianPosterior(V, np.zeros(2), cov, np.full(3, 0.5), noise)
    unasked = np.array([True, False, True])
    S = V[unasked].sum(0)  # the sum of the unasked outcomes is linear in u plus independent noise
    assert unasked_total_variance(post, unasked) == pytest.approx(S @ cov @ S + noise[unasked].sum(), rel=1e-12)


def test_a_policy_predictor_draws_and_the_predictor_estimates(bank):
    # the draws and PAI's side are the policy predictor's run; the estimate is the other predictor's posterior
    # after the same answers (no extra randomness: equal to recomputing both by hand)
    est = fq.ModelBasedEstimator(fq.ItemResponseModel(model="rasch"), budget=6,
                                 policy_predictor=fq.GaussianProcessSurrogate(n_components=4), n_folds=5,
                                 random_state=0, verbose=False).calibrate(bank.history)
    assert est.policy_predictor_ is not est.predictor_
    z = bank.new_outcomes[0]
    est.set_params(random_state=2).fit(z)
    pai = fq.PAIEstimator(est.policy_predictor_, est.sampler_, est.budget, random_state=2).fit(z)
    np.testing.assert_array_equal(est.queries_, pai.queries_)
    assert est.result_.design_based == pai.result_
    post = est.predictor_.posterior()
    for q, y in zip(pai.queries_["question"], pai.queries_["outcome"]):
        post.update(int(q), float(y))
    asked = np.zeros(z.size, bool)
    asked[pai.queries_["question"]] = True
    expected = (z[asked].sum() + np.asarray(post.predictions)[~asked].sum()) / z.size
    assert est.estimate_ == pytest.approx(expected, abs=1e-12)
    same = fq.ModelBasedEstimator(fq.GaussianProcessSurrogate(n_components=4), budget=6, policy_predictor="same",
                                  n_folds=5, random_state=0, verbose=False).calibrate(bank.history)
    assert same.policy_predictor_ is same.predictor_
    default = fq.ModelBasedEstimator(budget=6, n_folds=5, random_state=0, verbose=False).calibrate(bank.history)
    parts = default.predictor_.predictors_  # the default: the surrogate's draws, the average's estimate
    assert type(default.policy_predictor_) is type(parts[0]) is fq.GaussianProcessSurrogate
    with pytest.raises(ValueError, match="'same' needs a predictor"):
        fq.ModelBasedEstimator(budget=6, policy_predictor="same", verbose=False).calibrate(bank.history)


def test_the_budget_report_is_each_budgets_calibration_report(bank):
    params = dict(max_calibration_models=8, n_folds=2, random_state=0, verbose=False)
    report = fq.ModelBasedEstimator.budget_report(bank.history, [3, 6], alpha=0.1, **params)
    for b in (3, 6):
        alone = fq.ModelBasedEstimator.from_history(bank.history, b, **params).calibration_report(0.1)
        assert report.loc[b].equals(alone)
    assert not report.loc[3].equals(report.loc[6])  # the budget reaches every run
    with pytest.raises(ValueError, match="at least one budget"):
        fq.ModelBasedEstimator.budget_report(bank.history, [], **params)


def test_the_budget_report_fits_each_folds_predictors_once_for_every_budget(bank, monkeypatch):
    # a fit does not depend on the budget: three budgets cost the fits of one (and give the same reports, above)
    calls = []
    fit = fq.GaussianProcessSurrogate.fit
    monkeypatch.setattr(fq.GaussianProcessSurrogate, "fit", lambda self, *a, **k: calls.append(1) or fit(self, *a, **k))
    params = dict(max_calibration_models=8, n_folds=2, random_state=0, verbose=False)
    fq.ModelBasedEstimator.from_history(bank.history, 3, **params)
    one = len(calls)
    fq.ModelBasedEstimator.budget_report(bank.history, [3, 6, 9], **params)
    assert one > 0 and len(calls) == 2 * one


def test_fold_fits_serve_other_budgets_of_the_same_calibration_only(bank):
    params = dict(max_calibration_models=8, n_folds=2, random_state=0, verbose=False)
    shared = {}
    for b in (3, 6):  # shared fits give the calibration a fresh one gives
        got = fq.ModelBasedEstimator(budget=b, **params).calibrate(bank.history, fold_fits=shared)
        alone = fq.ModelBasedEstimator(budget=b, **params).calibrate(bank.history)
        assert got.calibration_.equals(alone.calibration_)
    with pytest.raises(ValueError, match="another history or other parameters"):
        fq.ModelBasedEstimator(budget=3, **params).calibrate(bank.history[1:], fold_fits=shared)
    with pytest.raises(ValueError, match="another history or other parameters"):
        fq.ModelBasedEstimator(budget=3, check_level=0.2, **params).calibrate(bank.history, fold_fits=shared)
    with pytest.raises(TypeError, match="fold_fits must be a dict"):
        fq.ModelBasedEstimator(budget=3, **params).calibrate(bank.history, fold_fits=[])
