"""Sampling policies: valid distributions, the uniform floor, the paper's formulas."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import faqstats as fq
from faqstats.factor_model import laplace_update
from faqstats.sampling import PolicyState, active_learning_scores


def make_state(n=30, k=3, step=1, budget=10, seed=0, available=None):
    rng = np.random.default_rng(seed)
    V = rng.normal(size=(n, k))
    mean = rng.normal(size=k)
    A = rng.normal(size=(k, k))
    cov = A @ A.T + 0.1 * np.eye(k)
    p = 1 / (1 + np.exp(-V @ mean))
    avail = np.ones(n, bool) if available is None else available
    return PolicyState(p, avail, step, budget, V, mean, cov)


SAMPLERS = [
    fq.UniformSampler(),
    fq.NeymanSampler(tau=0.1),
    fq.ActiveLearningSampler(tau=0.1),
    fq.HybridSampler(tau=0.1, beta0=0.7, rho=0.5, gamma=0.5),
]


@pytest.mark.parametrize("sampler", SAMPLERS, ids=lambda s: type(s).__name__)
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), step=st.integers(1, 10), drop=st.integers(0, 29))
def test_probabilities_are_a_distribution_with_uniform_floor(sampler, seed, step, drop):
    avail = np.ones(30, bool)
    avail[np.random.default_rng(seed).permutation(30)[:drop]] = False
    state = make_state(seed=seed, step=step, available=avail)
    q = sampler.probabilities(state)
    assert q.shape == (30,)
    assert np.isclose(q.sum(), 1.0, atol=1e-12)
    assert np.all(q[~avail] == 0)
    assert np.all(q[avail] >= sampler.tau / avail.sum() - 1e-15)


def test_hybrid_without_active_learning_is_tau_mixed_neyman():
    state = make_state(step=3)
    q_h = fq.HybridSampler(tau=0.2, beta0=1.0, rho=0.0, gamma=0.0).probabilities(state)
    q_n = fq.NeymanSampler(tau=0.2).probabilities(state)
    np.testing.assert_allclose(q_h, q_n, atol=1e-15)
    s = np.sqrt(state.predictions * (1 - state.predictions))
    np.testing.assert_allclose(q_n, 0.2 / 30 + 0.8 * s / s.sum(), atol=1e-15)


def test_hybrid_beta_zero_is_uniform_and_alpha_one_is_active_learning():
    state = make_state(step=1, budget=10)
    np.testing.assert_allclose(fq.HybridSampler(beta0=0.0).probabilities(state), np.full(30, 1 / 30))
    # rho=1 at step 1 of 10: alpha_t = 0.9; rho large and step small -> mostly active learning
    h = fq.HybridSampler(tau=0.3, rho=1.0)
    assert h.schedule(1, 10) == (pytest.approx(0.9), 1.0)
    assert h.schedule(10, 10)[0] == 0.0
    assert fq.HybridSampler(beta0=0.5, gamma=0.5).schedule(1, 10) == (0.0, pytest.approx(0.1))
    d = active_learning_scores(state.predictions, state.question_factors, state.posterior_cov)
    s = np.sqrt(state.predictions * (1 - state.predictions))
    mix = 0.1 * s / s.sum() + 0.9 * d / d.sum()
    np.testing.assert_allclose(h.probabilities(state), 0.3 / 30 + 0.7 * mix / mix.sum(), atol=1e-14)


def test_active_learning_score_is_the_delta_method_variance_reduction():
    """d(j) * N^-2 ... equals g' (S - S') g computed naively with the Laplace update."""
    state = make_state(n=12, k=3, seed=3)
    V, S, p = state.question_factors, state.posterior_cov, state.predictions
    w = p * (1 - p)
    g = (w[:, None] * V).mean(axis=0)  # gradient of theta(u) = mean sigmoid(u.v)
    naive = []
    for j in range(12):
        _, S_new = laplace_update(state.posterior_mean, S, V[j], 0.0)  # cov' does not depend on z
        naive.append(g @ (S - S_new) @ g)
    # the naive difference S - S' loses digits by cancellation on tiny scores: absolute floor
    np.testing.assert_allclose(active_learning_scores(p, V, S), naive, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize(
    "kwargs, match",
    [({"tau": 0.0}, "tau"), ({"tau": 1.5}, "tau"), ({"rho": -0.1}, "rho"), ({"beta0": 2}, "beta0"), ({"gamma": "a"}, "gamma")],
)
def test_bad_hybrid_parameters_are_named(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        fq.HybridSampler(**kwargs).check_params()


def test_bernoulli_aipw_spends_the_budget_in_expectation():
    bank = fq.make_synthetic_bank(n_models=50, n_questions=300, n_new=3, random_state=1)
    fm = fq.LogisticFactorModel.from_factors(bank.question_factors, model_factors=bank.model_factors)
    labels = []
    for seed in range(60):
        est = fq.PAIEstimator(fm, fq.BernoulliAIPW(score="neyman", tau=0.3), budget=40, random_state=seed)
        est.fit(bank.new_outcomes[seed % 3])
        labels.append(est.n_queries_)
    assert abs(np.mean(labels) - 40) < 3  # budget-stabilised: tracks the budget closely
    assert np.std(labels) < 6


def test_bernoulli_aipw_probability_rules():
    state = make_state(n=10)
    s = fq.BernoulliAIPW(score="min", tau=0.5, pi_floor=0.1)
    m = np.minimum(state.predictions, 1 - state.predictions)
    np.testing.assert_allclose(s.item_scores(state.predictions), m)
    pi = s.inclusion_probability(m[0], m.mean(), 0, 10, state.budget, 10)
    assert pi == pytest.approx(min(1, (10 / 10) * (0.5 * m[0] / m.mean() + 0.5)))
    # budget spent: falls to the floor, never to zero (unbiasedness needs pi > 0)
    assert s.inclusion_probability(m[0], m.mean(), 10, 10, state.budget, 10) == pytest.approx(0.1 * 10 / 10)
    with pytest.raises(ValueError, match="score"):
        fq.BernoulliAIPW(score="bad").check_params()
