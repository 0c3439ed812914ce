"""The factor posterior's cached quadratic forms v_j' Sigma v_j (active-learning score).

The posterior keeps ``quad_j = v_j' Sigma v_j`` up to date with one O(N k) rank-one
downdate per answer instead of recomputing ``einsum(V @ Sigma, V)`` (O(N k^2)) every
round. These tests check the cache against the recomputation after many updates
(also with ill-conditioned priors and without the periodic refresh), that it is lazy
(policies that never use the score never build it), that it survives ``deepcopy`` and
that the estimator asks exactly the same questions as with scores from scratch.
"""

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import faqstats as fq
import faqstats.posterior as posterior_module
from faqstats._engine import SequentialRun
from faqstats.posterior import FactorPosterior
from faqstats.sampling import PolicyState, active_learning_scores, quadratic_forms_from_scratch


def make_problem(seed, n=200, k=6, log10_cond=0.0, scale=1.0, aligned=0):
    """Question factors and a prior with condition number 10**log10_cond; ``aligned``
    questions point along the prior's least-variance direction."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(k, k)))
    cov = (Q * np.logspace(-log10_cond, 0, k)) @ Q.T * 2.0
    V = rng.normal(size=(n, k)) * scale
    V[:aligned] = Q[:, 0] * rng.normal(size=(aligned, 1)) * 3
    mean = rng.normal(size=k) * 0.3
    return rng, V, mean, cov


def assert_matches_scratch(post, rtol=1e-10):
    """Cache == einsum(V @ cov, V), elementwise to ``rtol``; an absolute floor far below
    ``||cov|| ||v_j||^2`` covers rows along directions where cov is at its rounding floor
    (there the recomputation itself has no correct digits)."""
    q = post.quadratic_forms()
    V = post.question_factors
    ref = quadratic_forms_from_scratch(V, post.cov)
    floor = 1e-13 * np.linalg.norm(post.cov, 2) * np.einsum("jk,jk->j", V, V)
    np.testing.assert_array_less(np.abs(q - ref), rtol * np.abs(ref) + floor)


def answer(post, rng, j=None):
    j = int(rng.integers(post.question_factors.shape[0])) if j is None else j
    post.update(j, float(rng.random() < post.predictions[j]))
    return j


@pytest.mark.parametrize("refresh_every", [None, 10**9], ids=["default-refresh", "never-refresh"])
@pytest.mark.parametrize(
    "log10_cond, scale, aligned", [(0, 1.0, 0), (8, 1.0, 0), (12, 3.0, 0), (12, 1.0, 40)], ids=str
)
def test_cache_matches_recomputation_after_many_updates(refresh_every, log10_cond, scale, aligned):
    rng, V, mean, cov = make_problem(0, log10_cond=log10_cond, scale=scale, aligned=aligned)
    post = FactorPosterior(V, mean, cov, refresh_every=refresh_every)
    post.quadratic_forms()
    for t in range(600):
        answer(post, rng)
        if t % 7 == 0 or t > 580:
            assert_matches_scratch(post)
    assert post.quadratic_forms().dtype == np.float64
    with pytest.raises(ValueError, match="read-only"):
        post.quadratic_forms()[0] = 0.0
    np.testing.assert_array_equal(post.cov, post.cov.T)


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    k=st.integers(1, 8),
    log10_cond=st.floats(0, 12),
    scale=st.floats(0.1, 4),
    n_updates=st.integers(1, 300),
    ask_every=st.integers(1, 5),
)
def test_cache_matches_recomputation_property(seed, k, log10_cond, scale, n_updates, ask_every):
    rng, V, mean, cov = make_problem(seed, n=60, k=k, log10_cond=log10_cond, scale=scale, aligned=5)
    post = FactorPosterior(V, mean, cov, refresh_every=int(rng.integers(1, 400)))
    post.quadratic_forms()
    for t in range(n_updates):
        answer(post, rng)
        if t % ask_every == 0:  # several queued updates are applied at once in between
            assert_matches_scratch(post)
    assert_matches_scratch(post)


def test_queued_updates_equal_one_by_one_and_refresh_resets():
    rng, V, mean, cov = make_problem(1, n=300, k=16)
    one, batched = FactorPosterior(V, mean, cov), FactorPosterior(V, mean, cov, refresh_every=7)
    one.quadratic_forms()
    batched.quadratic_forms()
    for since in (3, 6, 0):  # the third batch would make 9 > 7 incremental updates: recomputed
        js = [answer(one, rng) for _ in range(3)]
        one.quadratic_forms()
        for j in js:
            batched.update(j, float(one.question_factors[j] @ one.mean > 0))  # any outcome: the forms do not depend on it
        assert len(batched._forms.queued) == 3
        np.testing.assert_allclose(batched.quadratic_forms(), one.quadratic_forms(), rtol=1e-12)
        assert batched._forms.queued == [] and batched._forms.since_refresh == since


def test_cache_is_lazy_and_dropped_when_no_longer_used(monkeypatch):
    calls = []
    real = posterior_module.quadratic_forms_from_scratch
    monkeypatch.setattr(posterior_module, "quadratic_forms_from_scratch", lambda *a: calls.append(1) or real(*a))
    rng, V, mean, cov = make_problem(2, n=100, k=8)
    z = (rng.random(100) < 0.6).astype(float)

    def drive(sampler, steps):
        run = SequentialRun(sampler, FactorPosterior(V, mean, cov), 100, steps)
        for _ in range(steps):
            q = run.law()
            j = int(rng.choice(q.size, p=q))
            run.record(j, float(q[j]), z[j])
            run.end_round([j], [z[j]])
        return run.predictor

    for sampler in (fq.NeymanSampler(), fq.HybridSampler(rho=0.0), fq.UniformSampler()):
        post = drive(sampler, 30)
        assert post._forms.forms is None and post._forms.queued == [] and not calls
    # active learning: one recomputation, then O(N k) updates
    post = drive(fq.ActiveLearningSampler(replace=True), 40)
    assert len(calls) == 1 and post._forms.forms is not None
    # hybrid with rho=0.5: the score is used for 15 of 30 rounds, then the cache is dropped
    calls.clear()
    post = drive(fq.HybridSampler(rho=0.5, replace=True), 30)
    assert len(calls) == 1 and post._forms.forms is None and post._forms.queued == []


def test_state_held_across_an_update_does_not_see_the_new_cache():
    rng, V, mean, cov = make_problem(3, n=50, k=4)
    run = SequentialRun(fq.ActiveLearningSampler(replace=True), FactorPosterior(V, mean, cov), 50, 10)
    old = run.state()
    old.quadratic_forms()
    run.record(7, 0.1, 1.0)
    run.end_round([7], [1.0])
    np.testing.assert_allclose(old.quadratic_forms(), quadratic_forms_from_scratch(V, old.posterior_cov), rtol=1e-12)
    new = run.state()
    assert new.quadratic_forms() is run.predictor.quadratic_forms()
    np.testing.assert_allclose(new.quadratic_forms(), quadratic_forms_from_scratch(V, new.posterior_cov), rtol=1e-12)
    # a hand-built state (no posterior) computes from scratch
    bare = PolicyState(**{**new.__dict__, "posterior": None})
    np.testing.assert_allclose(bare.quadratic_forms(), new.quadratic_forms(), rtol=1e-12)


def test_deepcopied_runs_stay_self_consistent():
    rng, V, mean, cov = make_problem(4, n=80, k=5)
    run = SequentialRun(fq.ActiveLearningSampler(), FactorPosterior(V, mean, cov), 80, 20)
    run.state().quadratic_forms()

    def answer(r, j, z):
        r.record(j, 0.1, z)
        r.end_round([j], [z])

    answer(run, 3, 1.0)  # one queued update
    twin = copy.deepcopy(run)
    answer(run, 5, 0.0)
    answer(twin, 6, 1.0)
    answer(twin, 9, 1.0)
    for r in (run, twin):
        assert r.state().quadratic_forms() is r.predictor.quadratic_forms()
        assert_matches_scratch(r.predictor)
    assert not np.allclose(run.predictor.quadratic_forms(), twin.predictor.quadratic_forms())


def test_scores_with_cached_forms_equal_the_paper_formula():
    rng, V, mean, cov = make_problem(5, n=120, k=7, log10_cond=6)
    p = 1 / (1 + np.exp(-V @ mean))
    w = p * (1 - p)
    SV = V @ cov  # the paper's O(N k^2) formulation
    g = (w[:, None] * V).mean(axis=0)
    paper = w * (SV @ g) ** 2 / (1 + w * np.einsum("jk,jk->j", SV, V))
    np.testing.assert_allclose(active_learning_scores(p, V, cov), paper, rtol=1e-10)
    quad = quadratic_forms_from_scratch(V, cov)
    np.testing.assert_allclose(active_learning_scores(p, V, cov, quadratic_forms=quad), paper, rtol=1e-10)


@pytest.mark.parametrize(
    "sampler, batch_size",
    [
        (fq.ActiveLearningSampler(tau=0.2), 1),
        (fq.HybridSampler(tau=0.1, rho=0.7, gamma=0.3, replace=True), 1),
        (fq.HybridSampler(tau=0.3, rho=1.0), 4),
    ],
    ids=["active", "hybrid-replace", "hybrid-batch"],
)
def test_estimator_asks_the_same_questions_as_with_scores_from_scratch(sampler, batch_size, monkeypatch):
    bank = fq.make_synthetic_bank(n_models=60, n_questions=250, n_components=4, random_state=0)
    fm = fq.LogisticFactorModel.from_factors(bank.question_factors, model_factors=bank.model_factors)
    z = bank.new_outcomes[0]

    def fit():
        return fq.PAIEstimator(fm, sampler, budget=60, batch_size=batch_size, random_state=3).fit(z).queries_

    cached = fit()
    monkeypatch.setattr(PolicyState, "quadratic_forms", lambda s: quadratic_forms_from_scratch(s.question_factors, s.posterior_cov))
    scratch = fit()
    np.testing.assert_array_equal(cached["question"], scratch["question"])
    for name in ("probability", "increment", "prediction"):
        np.testing.assert_allclose(cached[name], scratch[name], rtol=1e-10)
