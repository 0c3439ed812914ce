"""The live step's fast paths give the generic code's numbers bit for bit (issue 7).

The oracle-score policy's fused ``probabilities``, the in-place renormalisation of a
round of one draw and ``draw_question`` (inverse CDF without ``Generator.choice``'s
copies) must not change any ``q``, draw or estimate; each is compared with the generic
path it replaces.
"""

import sys

import numpy as np
import pytest

import faqstats as fq
from faqstats import estimator as est_mod
from faqstats.estimator import draw_question
from faqstats.sampling import PolicyState, Sampler


def _generic(sampler, state):
    """``sampler.probabilities`` through the generic path (scores, normalise, mix)."""
    cls = type(sampler)
    fused = cls._oracle_normalisations
    cls._oracle_normalisations = Sampler._oracle_normalisations
    try:
        return sampler.probabilities(state)
    except Exception as exc:  # the generic path's error, to compare with the fused one's
        return repr(exc)
    finally:
        cls._oracle_normalisations = fused


def _fused(sampler, state):
    try:
        return sampler.probabilities(state)
    except Exception as exc:
        return repr(exc)


def _random_state(rng, trial):
    n = int(rng.integers(1, 2000))
    p = 1.0 / (1.0 + np.exp(-rng.normal(size=n) * rng.uniform(0.1, 30)))
    if trial % 7 == 0:
        p[rng.random(n) < 0.3] = rng.choice([0.0, 1.0])
    if trial % 11 == 0:
        p[rng.integers(n)] = np.nan
    if trial % 13 == 0:
        p[:] = rng.choice([0.0, 1.0])  # every oracle score zero
    if trial % 17 == 0:
        p[rng.integers(n)] = rng.choice([-0.5, 1.5, np.inf, -np.inf])
    avail = rng.random(n) < rng.uniform(0.05, 1.0) if trial % 3 else np.ones(n, bool)
    avail[rng.integers(n)] = True
    budget = int(rng.integers(2, 50))
    return PolicyState(p, avail, int(rng.integers(1, budget + 1)), budget)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_fused_oracle_probabilities_equal_the_generic_path_bit_for_bit():
    rng = np.random.default_rng(0)
    for trial in range(600):
        state = _random_state(rng, trial)
        tau = float(rng.uniform(0.01, 1.0))
        for sampler in (fq.HybridSampler(tau=tau), fq.HybridSampler(tau=1.0, replace=True),
                        fq.HybridSampler(gamma=0.5), fq.NeymanSampler(tau=tau)):
            a, b = _fused(sampler, state), _generic(sampler, state)
            assert type(a) is type(b)
            if isinstance(a, str):
                assert a == b
            else:
                assert a.tobytes() == b.tobytes(), (trial, sampler)


def test_fused_path_only_for_the_oracle_score():
    class Custom(fq.NeymanSampler):
        def scores(self, state):
            return np.ones_like(state.predictions)

    state = PolicyState(np.array([0.1, 0.5, 0.9]), np.ones(3, bool), 1, 10)
    np.testing.assert_array_equal(Custom(tau=0.5).probabilities(state), np.full(3, 1 / 3))
    assert fq.HybridSampler(rho=0.5)._oracle_normalisations(state) == 0
    assert fq.HybridSampler(gamma=0.5)._oracle_normalisations(state) == 0  # beta_1 < 1
    assert fq.HybridSampler()._oracle_normalisations(state) == 2


@pytest.mark.parametrize("torch_loaded", [False, True])
def test_draw_question_consumes_the_generator_like_choice(monkeypatch, torch_loaded):
    if torch_loaded:
        pytest.importorskip("torch")
    else:
        monkeypatch.setitem(sys.modules, "torch", None)
    rng = np.random.default_rng(1)
    a, b = np.random.default_rng(7), np.random.default_rng(7)
    for trial in range(400):
        n = int(rng.integers(1, 3000))
        q = rng.random(n) ** rng.uniform(0.2, 8)
        q[rng.random(n) < rng.uniform(0, 0.9)] = 0.0  # plateaus in the cdf
        q[rng.integers(n)] += 1e-3
        if trial % 5 == 0:
            q[: n // 2] = 1e-300
        q /= q.sum()
        for _ in range(5):
            assert draw_question(b, q) == int(a.choice(n, p=q))
    assert a.random() == b.random()


def test_draw_question_leaves_bad_distributions_to_choice():
    for q in (np.array([0.5, 0.6]), np.array([0.5, np.nan]), np.array([1.5, -0.5])):
        with pytest.raises(ValueError):
            draw_question(np.random.default_rng(0), q)
    # a float32 q, or one off by more than 1e-9, goes through choice unchanged
    q = np.array([0.25, 0.75], dtype=np.float32)
    assert draw_question(np.random.default_rng(3), q) == int(np.random.default_rng(3).choice(2, p=q))


@pytest.fixture(scope="module")
def fitted():
    bank = fq.make_synthetic_bank(n_models=60, n_questions=250, n_components=3, random_state=2)
    fm = fq.LogisticFactorModel(n_components=3, max_iter=200, random_state=0).fit(bank.history)
    return fm, bank.new_outcomes


@pytest.mark.parametrize("sampler", [fq.HybridSampler(), fq.HybridSampler(replace=True, tau=0.05),
                                     fq.NeymanSampler(tau=0.2), fq.HybridSampler(rho=0.3)],
                         ids=lambda s: repr(s))
def test_estimator_runs_equal_the_generic_loop_bit_for_bit(fitted, monkeypatch, sampler):
    fm, Z = fitted

    def fit(seed):
        e = fq.PAIEstimator(fm, sampler, budget=120, random_state=seed).fit(Z[seed % len(Z)])
        return e.queries_.tobytes(), e.estimate_, e.std_error_

    fast = [fit(s) for s in range(4)]
    monkeypatch.setattr(type(sampler), "_oracle_normalisations", Sampler._oracle_normalisations)
    monkeypatch.setattr(est_mod, "draw_question", lambda rng, q: int(rng.choice(q.size, p=q)))
    monkeypatch.setattr(est_mod, "within_round", lambda q, a, r, own=False: q if r else np.where(a, q, 0.0) / np.where(a, q, 0.0).sum())
    assert [fit(s) for s in range(4)] == fast
