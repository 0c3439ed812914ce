"""The live step's fast paths against the generic code they replace (issue 7).

The oracle-score policy's fused ``probabilities``, the in-place renormalisation of a
round of one draw and ``draw_question`` (inverse CDF without ``Generator.choice``'s
copies) give the generic numbers bit for bit. The two-level draw ``oracle_draw`` (no
``q``, no length-N cumulative sum) and the posterior's exp-based predictions sum in
another order: they must ask the same questions with the same probabilities up to
rounding, and never an unaskable one.
"""

import sys

import numpy as np
import pytest

import faqstats as fq
from faqstats import estimator as est_mod
from faqstats import sampling
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
    assert fq.HybridSampler(rho=0.5)._oracle_normalisations(1, 10) == 0
    assert fq.HybridSampler(gamma=0.5)._oracle_normalisations(1, 10) == 0  # beta_1 < 1
    assert fq.HybridSampler()._oracle_normalisations(1, 10) == 2
    assert Custom()._oracle_normalisations(1, 10) == 0


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
def test_estimator_runs_match_the_generic_loop(fitted, monkeypatch, sampler):
    """Fast draws (oracle_draw) and the generic loop (probabilities, choice): same
    questions, probabilities and estimates up to rounding."""
    fm, Z = fitted

    def fit(seed):
        e = fq.PAIEstimator(fm, sampler, budget=120, random_state=seed).fit(Z[seed % len(Z)])
        return e.queries_, e.estimate_, e.std_error_

    fast = [fit(s) for s in range(4)]
    monkeypatch.setattr(type(sampler), "_oracle_normalisations", Sampler._oracle_normalisations)
    monkeypatch.setattr(est_mod, "draw_question", lambda rng, q: int(rng.choice(q.size, p=q)))
    monkeypatch.setattr(est_mod, "within_round", lambda q, a, r, own=False: q if r else np.where(a, q, 0.0) / np.where(a, q, 0.0).sum())
    for (qa, ea, sa), (qb, eb, sb) in zip(fast, [fit(s) for s in range(4)]):
        np.testing.assert_array_equal(qa["question"], qb["question"])
        np.testing.assert_allclose(qa["probability"], qb["probability"], rtol=1e-12)
        np.testing.assert_allclose([ea, sa], [eb, sb], rtol=1e-11)


class _FixedUniform:
    """A stand-in generator whose ``random()`` returns the given values in turn."""

    def __init__(self, *values):
        self.values = list(values)

    def random(self):
        return self.values.pop(0)


def _generic_q(p, asked, tau):
    avail = np.ones(p.size, bool)
    avail[asked] = False
    return fq.NeymanSampler(tau=tau).probabilities(PolicyState(p, avail, 1, 2))


def test_oracle_draw_is_choice_up_to_rounding():
    """The same question as ``Generator.choice(p=q)`` from the same generator, and ``q_j``
    to rounding, on random banks (several blocks, partial blocks, asked questions,
    scores exactly 0)."""
    rng = np.random.default_rng(5)
    for trial in range(300):
        n = int(rng.integers(1, 1500))
        p = 1.0 / (1.0 + np.exp(-rng.normal(size=n) * rng.uniform(0.1, 20)))
        if trial % 4 == 0:
            p[rng.random(n) < 0.3] = 1.0  # oracle score 0, still askable
        asked = rng.choice(n, size=int(rng.integers(0, n)), replace=False) if trial % 3 else np.empty(0, np.intp)
        tau = float(rng.uniform(0.01, 1.0))
        q = _generic_q(p, asked, tau)
        seed = int(rng.integers(2**32))
        a, b = np.random.default_rng(seed), np.random.default_rng(seed)
        for _ in range(5):
            j, q_j = sampling.oracle_draw(sampling.oracle_scores(p), asked, tau, a)
            assert j == int(b.choice(n, p=q)), trial
            assert q_j == pytest.approx(q[j], rel=1e-12)
        assert a.random() == b.random()  # one uniform per draw, as choice


def test_oracle_draw_never_asks_an_unaskable_question_at_the_edges():
    n = 3 * sampling.DRAW_BLOCK + 5
    p = np.full(n, 0.3)
    last = np.nextafter(1.0, 0.0)
    # the last blocks fully asked, u next to 1: rounding may pass the end of the cdf
    asked = np.arange(sampling.DRAW_BLOCK + 7, n)
    for u in (0.0, 0.5, last):
        for scores in (sampling.oracle_scores(p), np.zeros(n)):  # all scores 0: uniform
            j, q_j = sampling.oracle_draw(scores, asked, 0.5, _FixedUniform(u))
            assert j not in set(asked.tolist()) and q_j == pytest.approx(1 / (n - asked.size))
    j, _ = sampling.oracle_draw(sampling.oracle_scores(p), asked, 0.5, _FixedUniform(last))
    assert j == asked[0] - 1  # the last askable question
    # one askable question left, anywhere
    for keep in (0, n // 2, n - 1):
        asked = np.delete(np.arange(n), keep)
        assert sampling.oracle_draw(sampling.oracle_scores(p), asked, 0.5, _FixedUniform(last)) == (keep, 1.0)


def test_oracle_draw_leaves_nan_scores_to_the_generic_path():
    p = np.array([0.2, np.nan, 0.7])
    rng = np.random.default_rng(0)
    assert sampling.oracle_draw(sampling.oracle_scores(p), np.empty(0, np.intp), 0.5, rng) is None
    assert rng.random() == np.random.default_rng(0).random()  # untouched


def test_posterior_predictions_and_oracle_scores():
    """exp-based sigmoid and ``sqrt(p (1 - p)) = h p`` against scipy and the exact
    ``1 / (2 cosh(x / 2))``, including logits that overflow ``exp``."""
    from scipy.special import expit

    rng = np.random.default_rng(0)
    V = np.vstack([rng.normal(size=(500, 3)) * 5, np.diag([800.0, -800.0, -2000.0]), [[1450.0, 0, 0]]])
    post = est_mod._FactorPosterior(V, np.ones(3), np.eye(3))
    x = V @ np.ones(3)
    np.testing.assert_allclose(post.predictions, expit(x), rtol=1e-14, atol=0)
    with np.errstate(over="ignore"):
        exact = 0.5 / np.cosh(x / 2)  # below 1e-150 past |x| = 700, where p rounds to 0 or 1
    np.testing.assert_allclose(post.oracle_scores, exact, rtol=1e-13, atol=1e-150)
    assert np.isfinite(post.oracle_scores).all() and np.isfinite(post.predictions).all()
    assert not post.oracle_scores.flags.writeable


@pytest.mark.parametrize("sampler", [fq.HybridSampler(), fq.NeymanSampler()], ids=repr)
@pytest.mark.parametrize("logit", [-3000.0, 1450.0, 5000.0])
def test_extreme_logits_without_warnings(recwarn, sampler, logit):
    """Logits whose exp overflows or whose score is subnormal: finite, on-policy draws."""
    V = np.vstack([np.ones((40, 1)), [[logit]]])
    fm = fq.LogisticFactorModel.from_factors(V, prior_mean=np.ones(1), prior_cov=np.eye(1) * 1e-12)
    e = fq.PAIEstimator(fm, sampler, budget=10, random_state=0).fit(np.ones(41))
    assert np.isfinite(e.estimate_) and np.isfinite(e.std_error_)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
    # the recorded probabilities are the policy's, as the generic path computes it
    run = e.new_run()
    for question, probability, outcome in e.queries_[["question", "probability", "outcome"]]:
        q = sampler.probabilities(run.state())
        assert probability == pytest.approx(q[question], rel=1e-12)
        run.record(int(question), float(probability), float(outcome))


def test_oracle_draw_with_subnormal_and_cancelling_scores(recwarn):
    """A subnormal total (scale (1 - tau) / total would overflow) and askable scores far
    below the asked ones (the sum less the asked ones cancels): exact probabilities."""
    cases = [
        (np.array([1e-310, 0.0, 0.0]), np.empty(0, np.intp)),
        (np.array([3e-320, 3e-320, 3e-320, 0.0]), np.empty(0, np.intp)),
        (np.array([1e300, 1e-300, 2e-300, 0.0]), np.array([0])),
        (np.array([0.4, 1e-17, 3e-17, 0.4]), np.array([0, 3])),
    ]
    for scores, asked in cases:
        tau = 0.3
        avail = np.ones(scores.size, bool)
        avail[asked] = False
        s = np.where(avail, scores, 0.0)
        want = tau * avail / avail.sum() + (1 - tau) * (s / s.sum())  # s / sum first: exact for subnormals
        q, cdf = sampling.oracle_masses(scores, asked, tau)
        np.testing.assert_allclose(q / cdf[-1], want, rtol=1e-12, atol=0)
        for seed in range(20):
            j, q_j = sampling.oracle_draw(scores, asked, tau, np.random.default_rng(seed))
            assert avail[j] and q_j == pytest.approx(want[j], rel=1e-12)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_posterior_covariance_stays_exactly_symmetric(fitted):
    fm, Z = fitted
    cov = fm.prior_cov_.copy()
    cov[0, 1] += 1e-9  # not symmetric as given: symmetrised once
    post = est_mod._FactorPosterior(fm.question_factors_, fm.prior_mean_, cov)
    for j in range(60):
        post.update(j, float(Z[0, j]))
        assert np.array_equal(post.cov, post.cov.T)
    assert np.linalg.eigvalsh(post.cov).min() > 0


def test_a_subclass_overriding_probabilities_is_not_bypassed(fitted):
    class Uniformised(fq.HybridSampler):
        def probabilities(self, state):
            return state.available / state.available.sum()

    fm, Z = fitted
    e = fq.PAIEstimator(fm, Uniformised(), budget=30, random_state=0).fit(Z[0])
    n = fm.question_factors_.shape[0]
    np.testing.assert_allclose(e.queries_["probability"], 1.0 / (n - np.arange(30)), rtol=1e-12)
