"""The one draw and the policies' law against plain reference code (issues 7 and 13).

Every draw, in every loop, is ``draw_from(sampler.probabilities(state))``: a two-level
inverse CDF (no length-N cumulative sum) from the tau-mixture the base class computes
in one pass. These tests check it against ``Generator.choice`` and the textbook formula
``tau / |R| + (1 - tau) s / sum s`` (same questions with the same probabilities up to
rounding, never an unaskable one, one uniform per draw), that whatever a subclass
overrides its draws follow its own law, and that the estimator asks what a plain
reference loop (scipy's expit, ``choice``) asks.
"""

import numpy as np
import pytest
from scipy.special import expit

import faqstats as fq
from faqstats import sampling
from faqstats.loop_setup import new_loop
from faqstats.posterior import FactorPosterior
from faqstats.sampling import PolicyState, draw_from, mixture


def _textbook(scores, available, tau):
    """``q = tau / |R| + (1 - tau) s / sum_R s`` over the askable questions, written plainly."""
    s = np.where(available, scores, 0.0)
    uniform = available / available.sum()
    return uniform if not s.sum() > 0 else tau * uniform + (1 - tau) * s / s.sum()


def _random_state(rng, trial):
    n = int(rng.integers(1, 2000))
    p = 1.0 / (1.0 + np.exp(-rng.normal(size=n) * rng.uniform(0.1, 30)))
    if trial % 7 == 0:
        p[rng.random(n) < 0.3] = rng.choice([0.0, 1.0])
    if trial % 13 == 0:
        p[:] = rng.choice([0.0, 1.0])  # every oracle score zero
    if trial % 17 == 0:
        p[rng.integers(n)] = rng.choice([-0.5, 1.5, np.inf, -np.inf])  # score 0, no error
    avail = rng.random(n) < rng.uniform(0.05, 1.0) if trial % 3 else np.ones(n, bool)
    avail[rng.integers(n)] = True
    budget = int(rng.integers(2, 50))
    return PolicyState(p, avail, int(rng.integers(1, budget + 1)), budget)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_mixture_is_the_textbook_law():
    rng = np.random.default_rng(0)
    for trial in range(600):
        state = _random_state(rng, trial)
        tau = float(rng.uniform(0.01, 1.0))
        for sampler in (fq.HybridSampler(tau=tau), fq.HybridSampler(tau=1.0, replace=True),
                        fq.HybridSampler(gamma=0.5), fq.NeymanSampler(tau=tau), fq.UniformSampler()):
            q = sampler.probabilities(state)
            want = _textbook(np.asarray(sampler.scores(state)), state.available, sampler.tau)
            np.testing.assert_allclose(q, want, rtol=1e-12, atol=1e-300)
            assert (q[~state.available] == 0).all()


def test_nan_scores_at_askable_questions_are_an_error():
    p = np.array([0.2, np.nan, 0.7])
    rng = np.random.default_rng(0)
    state = PolicyState(p, np.ones(3, bool), 1, 2)
    with pytest.raises(FloatingPointError, match="non-finite"):
        fq.NeymanSampler().draw(state, rng)
    assert rng.random() == np.random.default_rng(0).random()  # nothing drawn
    # a NaN score of a question already asked is never used
    asked = PolicyState(p, np.array([True, False, True]), 1, 2)
    assert fq.NeymanSampler().probabilities(asked)[1] == 0


def test_a_subclass_overriding_scores_follows_its_own_law():
    class Custom(fq.NeymanSampler):
        def scores(self, state):
            return np.ones_like(state.predictions)

    state = PolicyState(np.array([0.1, 0.5, 0.9]), np.ones(3, bool), 1, 10)
    np.testing.assert_array_equal(Custom(tau=0.5).probabilities(state), np.full(3, 1 / 3))
    assert fq.NeymanSampler.batched and not Custom.batched  # numpy-only scores in the batched engine


def test_draw_from_is_choice_up_to_rounding_and_uses_one_uniform():
    """The same question as ``Generator.choice(p=q)`` from the same generator, and ``q_j``
    to rounding, on random laws (several blocks, partial blocks, plateaus, tiny masses)."""
    rng = np.random.default_rng(1)
    for trial in range(400):
        n = int(rng.integers(1, 3000))
        q = rng.random(n) ** rng.uniform(0.2, 8)
        q[rng.random(n) < rng.uniform(0, 0.9)] = 0.0  # plateaus in the cdf
        q[rng.integers(n)] += 1e-3
        if trial % 5 == 0:
            q[: n // 2] = 1e-300
        q /= q.sum()
        seed = int(rng.integers(2**32))
        a, b = np.random.default_rng(seed), np.random.default_rng(seed)
        for _ in range(5):
            j, q_j = draw_from(q, a)
            assert j == int(b.choice(n, p=q)), trial
            assert q_j == pytest.approx(q[j], rel=1e-12)
        assert a.random() == b.random()  # one uniform per draw, as choice


class _FixedUniform:
    """A stand-in generator whose ``random()`` returns the given values in turn."""

    def __init__(self, *values):
        self.values = list(values)

    def random(self):
        return self.values.pop(0)


def test_draw_never_asks_an_unaskable_question_at_the_edges():
    n = 3 * sampling.DRAW_BLOCK + 5
    p = np.full(n, 0.3)
    last = np.nextafter(1.0, 0.0)
    # the last blocks fully asked, u next to 1: rounding may pass the end of the cdf
    asked = np.arange(sampling.DRAW_BLOCK + 7, n)
    for u in (0.0, 0.5, last):
        for scores in (sampling.oracle_scores(p), np.zeros(n)):  # all scores 0: uniform
            j, q_j = draw_from(mixture(scores, 0.5, asked), _FixedUniform(u))
            assert j not in set(asked.tolist()) and q_j == pytest.approx(1 / (n - asked.size))
    j, _ = draw_from(mixture(sampling.oracle_scores(p), 0.5, asked), _FixedUniform(last))
    assert j == asked[0] - 1  # the last askable question
    # one askable question left, anywhere
    for keep in (0, n // 2, n - 1):
        asked = np.delete(np.arange(n), keep)
        assert draw_from(mixture(sampling.oracle_scores(p), 0.5, asked), _FixedUniform(last)) == (keep, 1.0)


def test_mixture_with_subnormal_and_cancelling_scores(recwarn):
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
        q = mixture(scores, tau, asked)
        np.testing.assert_allclose(q, want, rtol=1e-12, atol=0)
        for seed in range(20):
            j, q_j = draw_from(q, np.random.default_rng(seed))
            assert avail[j] and q_j == pytest.approx(want[j], rel=1e-12)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_the_loop_refuses_a_law_that_is_no_distribution():
    class Broken(fq.UniformSampler):
        def probabilities(self, state):
            q = state.available / state.available.sum()
            q[0] = -0.1
            return q

    est = fq.PAIEstimator(None, Broken(), budget=3, random_state=0)
    with pytest.raises(FloatingPointError, match="not a probability distribution"):
        est.fit(np.ones(10))

    class Asks(fq.UniformSampler):
        def probabilities(self, state):
            return np.full(state.available.size, 1.0 / state.available.size)  # ignores what was asked

    with pytest.raises(RuntimeError, match="cannot be asked"):
        fq.PAIEstimator(None, Asks(), budget=3, random_state=0).fit(np.ones(10))


@pytest.fixture(scope="module")
def fitted():
    bank = fq.make_synthetic_bank(n_models=60, n_questions=250, n_components=3, random_state=2)
    fm = fq.LogisticFactorModel(n_components=3, max_iter=200, random_state=0).fit(bank.history)
    return fm, bank.new_outcomes


def _reference_loop(fm, sampler, z, budget, seed):
    """The estimator's loop written plainly: expit predictions, textbook law, ``choice``."""
    rng = np.random.default_rng(seed)
    V, mean, cov = fm.question_factors_, fm.prior_mean_.copy(), fm.prior_cov_.copy()
    avail = np.ones(V.shape[0], bool)
    questions, probabilities = [], []
    for t in range(budget):
        p = expit(V @ mean)
        state = PolicyState(p, avail.copy(), t + 1, budget, V, mean, cov)
        q = _textbook(np.asarray(sampler.scores(state)), avail, sampler.tau)
        j = int(rng.choice(q.size, p=q))
        questions.append(j)
        probabilities.append(q[j])
        if not sampler.replace:
            avail[j] = False
        mean, cov = fq.laplace_update(mean, cov, V[j], z[j])
    return questions, probabilities


@pytest.mark.parametrize("sampler", [fq.HybridSampler(), fq.HybridSampler(replace=True, tau=0.05),
                                     fq.NeymanSampler(tau=0.2), fq.HybridSampler(rho=0.3)],
                         ids=lambda s: repr(s))
def test_estimator_runs_match_a_plain_reference_loop(fitted, sampler):
    """The estimator (exp-based predictions, one-pass mixture, two-level draw) asks the
    questions of the plain loop, with the same probabilities up to rounding."""
    fm, Z = fitted
    for seed in range(4):
        z = Z[seed % len(Z)]
        e = fq.PAIEstimator(fm, sampler, budget=120, random_state=seed).fit(z)
        questions, probabilities = _reference_loop(fm, sampler, z, 120, seed)
        np.testing.assert_array_equal(e.queries_["question"], questions)
        np.testing.assert_allclose(e.queries_["probability"], probabilities, rtol=1e-10)


def test_posterior_predictions_and_oracle_scores():
    """exp-based sigmoid and ``sqrt(p (1 - p)) = h p`` against scipy and the exact
    ``1 / (2 cosh(x / 2))``, including logits that overflow ``exp``."""
    rng = np.random.default_rng(0)
    V = np.vstack([rng.normal(size=(500, 3)) * 5, np.diag([800.0, -800.0, -2000.0]), [[1450.0, 0, 0]]])
    post = FactorPosterior(V, np.ones(3), np.eye(3))
    x = V @ np.ones(3)
    np.testing.assert_allclose(post.predictions, expit(x), rtol=1e-14, atol=0)
    with np.errstate(over="ignore"):
        exact = 0.5 / np.cosh(x / 2)  # below 1e-150 past |x| = 700, where p rounds to 0 or 1
    np.testing.assert_allclose(post.oracle_scores, exact, rtol=1e-13, atol=1e-150)
    assert np.isfinite(post.oracle_scores).all() and np.isfinite(post.predictions).all()
    assert not post.oracle_scores.flags.writeable and not post.predictions.flags.writeable


@pytest.mark.parametrize("sampler", [fq.HybridSampler(), fq.NeymanSampler()], ids=repr)
@pytest.mark.parametrize("logit", [-3000.0, 1450.0, 5000.0])
def test_extreme_logits_without_warnings(recwarn, sampler, logit):
    """Logits whose exp overflows or whose score is subnormal: finite, on-policy draws."""
    V = np.vstack([np.ones((40, 1)), [[logit]]])
    fm = fq.LogisticFactorModel.from_factors(V, prior_mean=np.ones(1), prior_cov=np.eye(1) * 1e-12)
    e = fq.PAIEstimator(fm, sampler, budget=10, random_state=0).fit(np.ones(41))
    assert np.isfinite(e.estimate_) and np.isfinite(e.std_error_)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
    # the recorded probabilities are the policy's, replayed through the run
    run = new_loop(e).run
    for question, probability, outcome in e.queries_[["question", "probability", "outcome"]]:
        q = run.law()
        assert probability == pytest.approx(q[question], rel=1e-12)
        run.record(int(question), float(probability), float(outcome))
        run.end_round([int(question)], [float(outcome)])


def test_posterior_covariance_stays_exactly_symmetric(fitted):
    fm, Z = fitted
    cov = fm.prior_cov_.copy()
    cov[0, 1] += 1e-9  # not symmetric as given: symmetrised once
    post = FactorPosterior(fm.question_factors_, fm.prior_mean_, cov)
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


def test_negative_scores_of_a_custom_policy_are_refused():
    class Negative(fq.Sampler):
        needs_factor_model = False

        def scores(self, state):
            return state.predictions - 0.5  # all negative without predictions

    assert Negative.checks_law and not fq.HybridSampler.checks_law
    with pytest.raises(FloatingPointError, match="negative"):
        fq.PAIEstimator(None, Negative(), budget=3, random_state=0).fit(np.ones(10))
