"""The Gaussian-process surrogate (issue 18): exact conditioning, exact unbiasedness of PAI
with its predictions, the same draws in every path, and a fit that copes with missing cells."""

import numpy as np
import pytest

import faqstats as fq
from faqstats.batched import simulate
from faqstats.posterior import GaussianPosterior
from tests.exactness.test_unbiasedness import assert_exact_with_predictor


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=80, n_questions=150, n_components=3, random_state=3)


@pytest.fixture(scope="module")
def gp(bank):
    H = bank.history.copy()
    H[np.random.default_rng(0).random(H.shape) < 0.3] = np.nan  # a history with missing cells
    return fq.GaussianProcessSurrogate(n_components=6).fit(H)


def test_sequential_steps_are_exact_gaussian_conditioning():
    """Answer by answer, the predictions equal the closed form of a GP with covariance K + diag(noise),
    K = V V' (an outcome's own residual is independent of every other question's)."""
    rng = np.random.default_rng(1)
    N, k = 12, 3
    V, m, noise = rng.normal(size=(N, k)) * 0.2, rng.uniform(0.2, 0.8, N), rng.uniform(0.01, 0.1, N)
    post = GaussianPosterior(V, np.zeros(k), np.eye(k), m, noise)
    K = V @ V.T
    asked, z = [], []
    for j in (4, 0, 7, 2):
        post.update(j, float(j % 2))
        asked.append(j)
        z.append(float(j % 2))
        S = K[np.ix_(asked, asked)] + np.diag(noise[asked])
        mean = m + K[:, asked] @ np.linalg.solve(S, np.array(z) - m[asked])
        np.testing.assert_allclose(post.predictions, np.clip(mean, 0, 1), atol=1e-12)
        cov = K - K[:, asked] @ np.linalg.solve(S, K[asked, :])
        np.testing.assert_allclose(post.predictive_variance(), np.diag(cov) + noise, atol=1e-12)
    assert np.allclose(post.cov, post.cov.T) and np.linalg.eigvalsh(post.cov).min() >= 0


def test_pai_with_gp_predictions_is_exactly_unbiased_with_exact_variance_by_enumeration():
    assert_exact_with_predictor(lambda trial, H: fq.GaussianProcessSurrogate(n_components=2).fit(H),
                                graded_history=True)


@pytest.mark.parametrize("sampler", [fq.HybridSampler(), fq.ActiveLearningSampler(),
                                     fq.HybridSampler(tau=0.05, replace=True), fq.BernoulliAIPW(score="neyman")],
                         ids=["hybrid", "active", "hybrid-replace", "aipw"])
def test_estimator_and_batched_engine_agree(bank, gp, sampler):
    rows = [0, 1, 2, 0]
    runs = simulate(bank.new_outcomes, [np.random.default_rng(s) for s in range(4)], predictor=gp,
                    sampler=sampler, budget=25, rows=rows)
    for s, r in enumerate(rows):
        est = fq.PAIEstimator(gp, sampler, budget=25, random_state=np.random.default_rng(s)).fit(bank.new_outcomes[r])
        assert abs(runs.estimate[s] - est.estimate_) < 1e-10 and abs(runs.std_error[s] - est.std_error_) < 1e-10


def test_session_and_paired_estimator_take_the_surrogate(bank, gp):
    z = bank.new_outcomes[0]
    session = fq.EvaluationSession(gp, budget=12, batch_size=3, random_state=0)
    while not session.done:
        ids, _ = session.next_questions()
        session.record(ids, [z[i] for i in ids])
    est = fq.PAIEstimator(gp, budget=12, batch_size=3, random_state=0).fit(z)
    assert session.result() == est.result_
    paired = fq.PairedPAIEstimator(gp, budget=20, random_state=0).fit(z, bank.new_outcomes[1])
    assert -1 <= paired.conf_int()[0] <= paired.estimate_ <= paired.conf_int()[1] <= 1


def test_fit_with_missing_cells_is_finite_and_predicts_held_out_answers(bank, gp):
    assert np.isfinite(gp.question_factors_).all() and (gp.noise_ >= gp.noise_floor).all()
    assert 0 < gp.explained_variance_ratio_ < 1
    # conditioning on half of a new model's answers predicts the other half better than the prior means
    z = bank.new_outcomes[:5].copy()
    half = np.random.default_rng(0).random(z.shape) < 0.5
    P = gp.predict(np.where(half, z, np.nan))
    prior = np.broadcast_to(gp.question_means_, z.shape)
    assert np.mean((P - z)[~half] ** 2) < np.mean((prior - z)[~half] ** 2)
    assert gp.score(bank.new_outcomes) > np.log(0.5)  # better than a coin's log-likelihood


def test_thin_history_and_bad_parameters():
    H = np.array([[1, 0, 1, np.nan], [0, 0, 1, 1]], dtype=float)
    gp = fq.GaussianProcessSurrogate(n_components=5).fit(H)
    assert gp.question_factors_.shape == (4, 1)  # rank at most n_models - 1
    with pytest.raises(ValueError, match="at least 2 models"):
        fq.GaussianProcessSurrogate().fit(H[:1])
    with pytest.raises(ValueError, match="shrinkage"):
        fq.GaussianProcessSurrogate(shrinkage=1.0).fit(H)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        fq.GaussianProcessSurrogate().fit(H * 2)


def test_saved_surrogate_round_trips_and_a_saved_session_resumes(tmp_path, bank, gp):
    path = fq.save_factor_model(gp, tmp_path / "gp", question_ids=[f"q{j}" for j in range(150)])
    loaded = fq.load_factor_model(path)
    assert isinstance(loaded, fq.GaussianProcessSurrogate) and loaded.get_params() == gp.get_params()
    z = bank.new_outcomes[2]
    assert fq.PAIEstimator(loaded, budget=15, random_state=1).fit(z).result_ == \
        fq.PAIEstimator(gp, budget=15, random_state=1).fit(z).result_
    session = fq.EvaluationSession.create(tmp_path / "s", gp, budget=10, batch_size=2, random_state=0)
    ids, _ = session.next_questions()
    session.record(ids, [z[i] for i in ids])
    resumed = fq.EvaluationSession.load(tmp_path / "s")
    while not resumed.done:
        ids, _ = resumed.next_questions()
        resumed.record(ids, [z[i] for i in ids])
    assert resumed.result() == fq.PAIEstimator(gp, budget=10, batch_size=2, random_state=0).fit(z).result_
