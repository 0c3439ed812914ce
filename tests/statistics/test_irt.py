"""The item response predictor (issue 18): it recovers a planted 2PL, its posterior is the factor
posterior with the ability's intercept known, PAI with it is exactly unbiased, and every path takes it."""

import numpy as np
import pytest
from scipy.special import expit
from sklearn.base import clone

import faqstats as fq
from faqstats.batched import simulate
from tests.exactness.test_unbiasedness import assert_exact_with_predictor


def _planted(n_models=300, n_questions=200, missing=0.3, seed=0):
    rng = np.random.default_rng(seed)
    theta, a, b = rng.normal(size=n_models), rng.lognormal(0, 0.3, n_questions), rng.normal(size=n_questions)
    H = (rng.random((n_models, n_questions)) < expit(a * (theta[:, None] - b))).astype(float)
    H[rng.random(H.shape) < missing] = np.nan
    return H, theta, a, b


@pytest.fixture(scope="module")
def planted():
    return _planted()


def test_recovers_a_planted_2pl_with_missing_cells(planted):
    H, theta, a, b = planted
    irt = fq.ItemResponseModel().fit(H)
    assert np.corrcoef(irt.abilities_, theta)[0, 1] > 0.95
    assert np.corrcoef(irt.difficulty_, b)[0, 1] > 0.9 and np.mean(np.abs(irt.difficulty_ - b)) < 0.3
    assert np.corrcoef(irt.discrimination_, a)[0, 1] > 0.6
    assert abs(irt.abilities_.mean()) < 1e-9 and abs(irt.abilities_.std(ddof=1) - 1) < 1e-9  # the IRT scale
    assert irt.n_iter_ < irt.max_iter  # converged
    # held-out answers: the 2PL predicts them about as well as the planted truth does
    rng = np.random.default_rng(5)
    t_new = rng.normal(size=20)
    Z = (rng.random((20, H.shape[1])) < expit(a * (t_new[:, None] - b))).astype(float)
    assert irt.score(Z) > fq.ItemResponseModel(model="rasch").fit(H).score(Z) - 0.01
    assert irt.score(Z) > -0.6


def test_rasch_has_one_discrimination_and_the_factor_model_view_agrees(planted):
    H = planted[0]
    rasch = fq.ItemResponseModel(model="rasch").fit(H)
    np.testing.assert_array_equal(rasch.discrimination_, 1.0)
    irt = fq.ItemResponseModel().fit(H)
    fm = irt.as_factor_model()
    np.testing.assert_allclose(fm.posterior().predictions, irt.posterior().predictions, atol=1e-12)
    np.testing.assert_allclose(irt.predict_proba(irt.abilities_[:3]),
                               expit(irt.abilities_[:3, None] * irt.discrimination_ + irt.intercepts_), atol=1e-12)


def test_posterior_learns_the_ability_and_keeps_the_intercept_coordinate_fixed(planted):
    irt = fq.ItemResponseModel().fit(planted[0])
    post = irt.posterior()
    np.testing.assert_allclose(post.predictions, irt.predict_proba(0.0), atol=1e-12)
    for j in range(40):  # a strong model answers everything right: its ability rises
        post.update(j, 1.0)
        assert post.mean[1] == 1.0 and post.cov[1, 1] == 0.0 and post.cov[0, 1] == 0.0
        assert np.linalg.eigvalsh(post.cov).min() >= 0
    assert post.mean[0] > 1.0 and post.cov[0, 0] < irt.prior_cov_[0, 0]


def test_pai_with_irt_predictions_is_exactly_unbiased_with_exact_variance_by_enumeration():
    assert_exact_with_predictor(lambda trial, H: fq.ItemResponseModel(model="rasch" if trial % 4 == 0 else "2pl").fit(H))


@pytest.mark.parametrize("sampler", [fq.HybridSampler(), fq.ActiveLearningSampler(), fq.NeymanSampler(replace=True)],
                         ids=["hybrid", "active", "neyman-replace"])
def test_estimator_and_batched_engine_agree(planted, sampler):
    irt = fq.ItemResponseModel().fit(planted[0])
    outcomes = np.nan_to_num(_planted(n_models=3, seed=9, missing=0.0)[0])
    rows = [0, 1, 2, 0]
    runs = simulate(outcomes, [np.random.default_rng(s) for s in range(4)], predictor=irt, sampler=sampler,
                    budget=25, rows=rows)
    for s, r in enumerate(rows):
        est = fq.PAIEstimator(irt, sampler, budget=25, random_state=np.random.default_rng(s)).fit(outcomes[r])
        assert abs(runs.estimate[s] - est.estimate_) < 1e-10 and abs(runs.std_error[s] - est.std_error_) < 1e-10


def test_session_paired_estimator_and_step_weights_take_it(tmp_path, planted):
    H = planted[0]
    irt = fq.ItemResponseModel().fit(H)
    z = np.nan_to_num(_planted(n_models=2, seed=4, missing=0.0)[0])
    paired = fq.PairedPAIEstimator(irt, budget=20, random_state=0).fit(z[0], z[1])
    assert -1 <= paired.conf_int()[0] <= paired.estimate_ <= paired.conf_int()[1] <= 1
    complete = np.nan_to_num(_planted(n_models=40, seed=7, missing=0.0)[0])
    sw = fq.learn_step_weights(complete, fq.ItemResponseModel(), budget=15, n_runs=50, random_state=0)
    assert sw.weights.shape == (15,) and np.all(np.isfinite(sw.weights))
    # saved as its factor-model view: the same draws and result; a session takes it and resumes exactly
    loaded = fq.load_factor_model(fq.save_factor_model(irt, tmp_path / "irt"))
    expected = fq.PAIEstimator(irt, budget=12, batch_size=3, random_state=1).fit(z[0]).result_
    assert fq.PAIEstimator(loaded, budget=12, batch_size=3, random_state=1).fit(z[0]).result_.estimate == \
        expected.estimate
    session = fq.EvaluationSession.create(tmp_path / "s", irt, budget=12, batch_size=3, random_state=1)
    ids, _ = session.next_questions()
    session.record(ids, [z[0][i] for i in ids])
    resumed = fq.EvaluationSession.load(tmp_path / "s")
    while not resumed.done:
        ids, _ = resumed.next_questions()
        resumed.record(ids, [z[0][i] for i in ids])
    assert resumed.result().estimate == expected.estimate


def test_sklearn_conventions_and_bad_input(planted):
    H = planted[0][:50]
    irt = fq.ItemResponseModel(max_iter=30)
    params = irt.get_params()
    assert irt.fit(H) is irt and irt.get_params() == params and irt.n_features_in_ == H.shape[1]
    assert clone(irt).get_params() == params
    assert irt.transform(H[:4]).shape == (4, 1)
    np.testing.assert_allclose(irt.transform(np.full((1, H.shape[1]), np.nan)), 0.0)  # no answer: the prior mean
    with pytest.raises(ValueError, match="model must be"):
        fq.ItemResponseModel(model="3pl").fit(H)
    with pytest.raises(ValueError, match="regularization"):
        fq.ItemResponseModel(regularization=0).fit(H)
    with pytest.raises(ValueError, match="at least 2 history models"):
        fq.ItemResponseModel().fit(H[:1])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        fq.ItemResponseModel().fit(H * 2)
    with pytest.raises(ValueError, match="features"):
        irt.transform(H[:, :5])


def test_experiment_methods_irt_and_irt_equal():
    from faqstats.experiments import run_methods

    bank = fq.make_synthetic_bank(n_models=80, n_questions=60, n_new=3, n_components=2, random_state=1)
    runs = run_methods(bank.history, bank.new_outcomes, [12], seeds=2, methods=["irt", "irt-equal", "gp-equal"],
                       step_weights={"n_runs": 40}, verbose=False)
    assert np.isfinite(runs.records["estimate"]).all() and set(runs.records["method"]) == {"irt", "irt-equal", "gp-equal"}
    assert ("irt", 12) in runs.step_weights and isinstance(runs.surrogate, fq.GaussianProcessSurrogate)
    assert runs.records["covered"].mean() > 0.5  # 18 runs: a sanity floor, the coverage tests are elsewhere
