"""The randomised Bayesian-quadrature policy (issue 18): its score is the variance of the unasked
total that an answer removes, PAI with it is exactly unbiased, and the batched engine draws the same."""

import numpy as np
import pytest

import faqstats as fq
from faqstats.batched import simulate
from faqstats.posterior import GaussianPosterior
from faqstats.sampling import variance_reduction_scores
from tests.exactness.test_unbiasedness import assert_exact_with_predictor


def test_gaussian_process_score_is_the_exact_variance_reduction_of_the_unasked_total():
    """Against the dense covariance of z = m + V u + e: Var(S) - Var(S | z_j) = Cov(S, z_j)^2 / Var(z_j)."""
    rng = np.random.default_rng(0)
    N, k = 9, 3
    V, noise = rng.normal(size=(N, k)) * 0.3, rng.uniform(0.05, 0.2, N)
    post = GaussianPosterior(V, np.zeros(k), np.eye(k), rng.uniform(0.2, 0.8, N), noise)
    for j in (2, 5):
        post.update(j, 1.0)
    available = np.ones(N, bool)
    available[[2, 5]] = False
    C = V @ post.cov @ V.T + np.diag(noise)  # the outcomes' covariance given the answers
    a = available.astype(float)
    removed = (C @ a) ** 2 / np.diag(C)
    s = variance_reduction_scores(post.predictions, V, post.cov, available, post.quadratic_forms(), noise)
    np.testing.assert_allclose(s[available] ** 2, removed[available], rtol=1e-12)


def test_logistic_score_is_the_oracle_score_once_the_posterior_is_certain():
    p = np.array([0.1, 0.5, 0.8, 1.0])
    s = variance_reduction_scores(p, np.ones((4, 2)), np.zeros((2, 2)), np.ones(4, bool), np.zeros(4))
    np.testing.assert_allclose(s, np.sqrt(p * (1 - p)), atol=1e-15)


def test_pai_with_the_policy_is_exactly_unbiased_with_exact_variance_by_enumeration():
    predictors = [lambda: fq.GaussianProcessSurrogate(n_components=2), fq.ItemResponseModel,
                  lambda: fq.LogisticFactorModel(n_components=2, max_iter=50, random_state=0)]
    assert_exact_with_predictor(lambda trial, H: predictors[trial % 3]().fit(H), fq.VarianceReductionSampler,
                                seed=1, trials=9)


@pytest.mark.parametrize("kind", ["gp", "factor"])
def test_estimator_and_batched_engine_agree(kind):
    bank = fq.make_synthetic_bank(n_models=60, n_questions=120, n_new=3, n_components=3, random_state=2)
    predictor = (fq.GaussianProcessSurrogate(n_components=5) if kind == "gp"
                 else fq.LogisticFactorModel(n_components=3, max_iter=100, random_state=0)).fit(bank.history)
    sampler = fq.VarianceReductionSampler()
    rows = [0, 1, 2, 0]
    runs = simulate(bank.new_outcomes, [np.random.default_rng(s) for s in range(4)], predictor=predictor,
                    sampler=sampler, budget=20, rows=rows)
    for s, r in enumerate(rows):
        est = fq.PAIEstimator(predictor, sampler, budget=20, random_state=np.random.default_rng(s))
        est.fit(bank.new_outcomes[r])
        assert abs(runs.estimate[s] - est.estimate_) < 1e-10 and abs(runs.std_error[s] - est.std_error_) < 1e-10


def test_needs_a_predictor_with_factors():
    with pytest.raises(ValueError, match="needs a fitted factor_model"):
        fq.PAIEstimator(None, fq.VarianceReductionSampler(), budget=3).fit(np.array([0, 1, 1, 0.0]))
