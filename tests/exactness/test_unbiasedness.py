"""Exact statistics by enumerating every sampling path on tiny banks.

For a bank of N <= 4 questions and a budget of n <= 3 queries we walk the whole tree
of (question, answer) paths a policy can produce, with each branch weighted by its
sampling probability, and check to 1e-12:

* unbiasedness:            E[theta_hat] == theta;
* martingale property:     E[phi_t - theta | F_{t-1}] == 0 at every node;
* exact variance estimate: E[V_hat] == Var(theta_hat) for the default estimator;

with and without replacement, for batches of 1-3 draws per round, for 0/1 outcomes and
for graded outcomes in [0, 1] (the identities never use that outcomes are binary).

The walk drives the estimator's own run objects (``start_loop(estimator).run``: ``law``,
``record``, ``end_round``), so it tests the arithmetic users get, not a re-implementation.
"""

import copy
import itertools

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.base import BaseEstimator

import faqstats as fq
from faqstats._engine import StreamRun
from faqstats.estimator import martingale_variance, weighted_martingale
from faqstats.loop_setup import new_loop
from faqstats.sampling import within_round

TOL = 1e-12


def start_loop(estimator, n_questions=None, **options):
    """A fresh query loop of ``estimator``: :func:`faqstats.loop_setup.new_loop` for a
    ``PAIEstimator``; a paired estimator (or a test's wrapper) makes its own (``new_loop``)."""
    own = getattr(estimator, "new_loop", None)
    return own(n_questions, **options) if own is not None else new_loop(estimator, n_questions, **options)


# ---------------------------------------------------------------- strategies
#: graded outcomes: rubric scores on a grid, and fractions in [0, 1] to 9 decimals (real scores
#: are never as small as 1e-135, where the t quantile's kurtosis estimate underflows)
graded_outcomes = st.one_of(
    st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]), st.floats(0.0, 1.0).map(lambda x: round(x, 9))
)


@st.composite
def banks(draw, min_n=1, max_n=4, graded=False):
    n = draw(st.integers(min_n, max_n))
    values = graded_outcomes if graded else st.integers(0, 1)
    z = np.array(draw(st.lists(values, min_size=n, max_size=n)), dtype=float)
    k = draw(st.integers(1, 2))
    coord = st.floats(-3, 3, allow_nan=False, allow_subnormal=False)
    V = np.array(draw(st.lists(st.lists(coord, min_size=k, max_size=k), min_size=n, max_size=n)))
    mean = np.array(draw(st.lists(st.floats(-2, 2), min_size=k, max_size=k)))
    A = np.array(draw(st.lists(st.lists(st.floats(-1, 1), min_size=k, max_size=k), min_size=k, max_size=k)))
    cov = A @ A.T + 0.1 * np.eye(k)
    return z, fq.LogisticFactorModel.from_factors(V, mean, cov)


taus = st.floats(0.01, 1.0)
unit = st.floats(0.0, 1.0)


class UncertaintyFirst(fq.Sampler):
    """A user's policy, defined by its scores alone: prefer predictions near 1/2."""

    def scores(self, state):
        return 1.0 - np.abs(2.0 * np.asarray(state.predictions) - 1.0)


@st.composite
def sequential_samplers(draw, replace):
    kind = draw(st.sampled_from(["uniform", "neyman", "active", "hybrid", "hybrid-default", "custom"]))
    if kind == "custom":
        return UncertaintyFirst(tau=draw(taus), replace=replace)
    if kind == "hybrid-default":  # rho = gamma = 0, beta0 = 1: the raw oracle scores
        return fq.HybridSampler(tau=draw(taus), replace=replace)
    if kind == "uniform":
        return fq.UniformSampler(replace=replace)
    if kind == "neyman":
        return fq.NeymanSampler(tau=draw(taus), replace=replace)
    if kind == "active":
        return fq.ActiveLearningSampler(tau=draw(taus), replace=replace)
    return fq.HybridSampler(tau=draw(taus), beta0=draw(unit), rho=draw(unit), gamma=draw(unit), replace=replace)


# ---------------------------------------------------------------- enumeration
def enumerate_sequential(estimator, z, groups=None):
    """Leaves ``(probability, increments)`` of every path; asserts the martingale property.

    Rounds of ``estimator.batch_size`` draws share the round's policy (``run.law()``, the
    law every draw is made from); inside a round each draw is a node of the tree
    (successive draws without replacement), and the posterior moves only when the round
    ends, as in ``PAIEstimator.fit``. With ``groups`` or a weighted ``estimand`` the leaves
    hold the estimands' ``(n, 1 + G)`` increments (``EstimandTracker``), whose conditional
    means are checked against the headline and every group's accuracy at each node.
    """
    run = start_loop(estimator, z.size, groups=groups).run
    theta = z.mean()
    targets = None
    stratified = run.tracker is not None and run.tracker.stratified
    if run.tracker is not None:
        tr = run.tracker
        targets = np.r_[tr.weights @ z, [] if tr.codes is None else np.bincount(tr.codes, z) / tr.sizes]
    leaves = []

    def walk(run, prob, phis):
        if len(phis) == estimator.budget:
            leaf = run.tracker.strata if stratified else run.tracker.increments() if targets is not None else None
            leaves.append((prob, np.array(phis) if leaf is None else leaf))
            return
        size = min(estimator.batch_size, estimator.budget - len(phis))
        q_round = run.law()
        assert abs(q_round.sum() - 1.0) < 1e-12 and (q_round >= 0).all()
        draw(run, prob, phis, q_round, size, [])

    def draw(run, prob, phis, q_round, left, drawn):
        if left == 0:
            run.end_round(drawn, z[drawn])
            walk(run, prob, phis)
            return
        q = within_round(q_round, run.available, run.replace)
        if stratified:  # the draw's group, fixed in advance (as SequentialRun.round_of does)
            q = run.tracker.restrict(q, run.available, len(phis))
        conditional_mean = 0.0
        estimands_mean = 0.0
        for j in np.flatnonzero(q > 0):
            child = copy.deepcopy(run)
            phi = child.record(int(j), float(q[j]), float(z[j]))
            conditional_mean += q[j] * phi
            if stratified:  # the drawn group's increment (the group is fixed in advance)
                g, phi_g = child.tracker.strata[-1]
                estimands_mean = estimands_mean + q[j] * phi_g
            elif targets is not None:
                estimands_mean = estimands_mean + q[j] * child.tracker.increments()[-1]
            draw(child, prob * q[j], phis + [phi], q_round, left - 1, drawn + [int(j)])
        if stratified:  # E[phi^g_t | F_{t-1}] = theta_g for the scheduled group g (the bank-wide phi is not used)
            assert abs(estimands_mean - targets[1 + g]) < TOL, (estimands_mean, targets[1 + g])
            return
        # martingale property: E[phi_t - theta | F_{t-1}] = 0 at this node
        assert abs(conditional_mean - theta) < TOL, (conditional_mean, theta)
        if targets is not None:  # and for every estimand
            np.testing.assert_allclose(estimands_mean, targets, atol=TOL)

    walk(run, 1.0, [])
    return leaves


def enumerate_stream(estimator, z):
    """Leaves ``(probability, estimate, variance estimate)`` of a nature's-order AIPW run."""
    run = start_loop(estimator, z.size).run
    leaves = []

    def walk(run, prob):
        if run.done:
            leaves.append((prob, np.mean(run.terms), np.sum(run.variance_terms) / z.size**2))
            return
        pi = run.inclusion_probability()
        assert 0 < pi <= 1
        for labelled, p_branch in ((True, pi), (False, 1.0 - pi)):
            if p_branch == 0:
                continue
            child = copy.deepcopy(run)
            if labelled:
                item = child.item
                child.record(item, pi, float(z[item]))
                child.end_round([item], [float(z[item])])
            else:
                child.skip()
            walk(child, prob * p_branch)

    walk(run, 1.0)
    return leaves


def moments_sequential(leaves):
    p = np.array([w for w, _ in leaves])
    est = np.array([phis.mean() for _, phis in leaves])
    vhat = np.array([martingale_variance(phis) for _, phis in leaves])
    assert abs(p.sum() - 1.0) < 1e-12
    mean = p @ est
    return mean, p @ (est - mean) ** 2, p @ vhat


def assert_exact_with_predictor(fit_predictor, sampler=fq.HybridSampler, *, seed=0, trials=10, graded_history=False):
    """Enumerate PAI whose predictions come from ``fit_predictor(trial, history)`` fitted on random
    tiny histories (0/1 or graded answers, with and without replacement, batches of 1-2): the mean
    and the expected variance estimate must equal theta and the true variance exactly."""
    rng = np.random.default_rng(seed)
    for trial in range(trials):
        n = int(rng.integers(2, 5))
        if graded_history:
            history = np.round(rng.random((6, n)), 1)
        else:
            history = (rng.random((6, n)) < 0.6).astype(float)
            history[0], history[1] = 1.0, 0.0  # no constant column
        predictor = fit_predictor(trial, history)
        z = rng.integers(0, 2, n).astype(float) if trial % 2 else np.round(rng.random(n), 2)
        replace = bool(trial % 3 == 0)
        est = fq.PAIEstimator(predictor, sampler(tau=float(rng.uniform(0.05, 1)), replace=replace),
                              budget=3 if replace else min(3, n), batch_size=int(rng.integers(1, 3)))
        mean, var, e_vhat = moments_sequential(enumerate_sequential(est, z))
        assert abs(mean - z.mean()) < TOL and abs(e_vhat - var) < TOL, (trial, predictor)


# ---------------------------------------------------------------- tests
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(data=st.data(), replace=st.booleans())
def test_weighted_increments_unbiased_and_variance_exact(data, replace):
    """Fixed step weights: sum lambda_t phi_t is exactly unbiased and weighted_martingale's
    variance estimate exactly unbiased for its variance (every sampler, batches, graded too)."""
    z, fm = data.draw(banks(min_n=3 if not replace else 1, graded=data.draw(st.booleans())))
    sampler = data.draw(sequential_samplers(replace))
    # three steps; each normalised weight below 1/2 (the variance estimate needs it)
    w = np.array(data.draw(st.lists(st.floats(1.0, 1.9), min_size=3, max_size=3)))
    est = fq.PAIEstimator(fm, sampler, budget=3, batch_size=data.draw(st.integers(1, 3)), step_weights=w)
    leaves = enumerate_sequential(est, z)
    p = np.array([prob for prob, _ in leaves])
    moments = np.array([weighted_martingale(phis, w)[:2] for _, phis in leaves])
    mean = p @ moments[:, 0]
    assert abs(mean - z.mean()) < TOL
    assert abs(p @ moments[:, 1] - p @ (moments[:, 0] - mean) ** 2) < TOL


def test_weighted_enumeration_detects_a_wrong_variance_divisor():
    """The exact-variance check above can fail: the unweighted divisor n (n - 1) applied to
    weighted residuals is biased, and the enumeration sees it."""
    V = np.array([[1.0], [-0.5], [0.3]])
    fm = fq.LogisticFactorModel.from_factors(V, np.zeros(1), np.eye(1))
    z = np.array([1.0, 0.0, 1.0])
    w = np.array([1.0, 1.5, 1.9])
    est = fq.PAIEstimator(fm, fq.HybridSampler(tau=0.3), budget=3, step_weights=w)
    leaves = enumerate_sequential(est, z)
    p = np.array([prob for prob, _ in leaves])
    lam = w / w.sum()
    est_ = np.array([phis @ lam for _, phis in leaves])
    naive = np.array([np.sum(lam**2 * (phis - phis @ lam) ** 2) * 3 / 2 for _, phis in leaves])
    var = p @ (est_ - p @ est_) ** 2
    assert abs(p @ naive - var) > 1e-6


@SETTINGS
@given(data=st.data(), replace=st.booleans())
def test_pai_unbiased_and_variance_exact_for_every_sequential_sampler_and_batch_size(data, replace):
    z, fm = data.draw(banks(min_n=2 if not replace else 1))
    sampler = data.draw(sequential_samplers(replace))
    budget = data.draw(st.integers(2, min(3, z.size) if not replace else 3))
    batch_size = data.draw(st.integers(1, 3))
    est = fq.PAIEstimator(fm, sampler, budget=budget, batch_size=batch_size)
    mean, var, e_vhat = moments_sequential(enumerate_sequential(est, z))
    assert abs(mean - z.mean()) < TOL
    assert abs(e_vhat - var) < TOL


@SETTINGS
@given(data=st.data())
def test_bernoulli_aipw_unbiased_and_design_variance_exact(data):
    z, fm = data.draw(banks(min_n=2))
    sampler = fq.BernoulliAIPW(
        score=data.draw(st.sampled_from(["uniform", "neyman", "min"])),
        tau=data.draw(taus),
        order="natural",
        pi_floor=data.draw(st.floats(0.01, 1.0)),
    )
    use_factors = data.draw(st.booleans())
    budget = data.draw(st.integers(2, min(3, z.size)))
    est = fq.PAIEstimator(fm if use_factors else None, sampler, budget=budget)
    run = start_loop(est, z.size).run
    assert isinstance(run, StreamRun)
    leaves = enumerate_stream(est, z)
    p = np.array([w for w, _, _ in leaves])
    theta_hat = np.array([t for _, t, _ in leaves])
    vhat = np.array([v for _, _, v in leaves])
    mean = p @ theta_hat
    assert abs(p.sum() - 1) < 1e-12
    assert abs(mean - z.mean()) < TOL
    assert abs(p @ vhat - p @ (theta_hat - mean) ** 2) < TOL


@SETTINGS
@given(z=st.lists(st.integers(0, 1), min_size=2, max_size=4), data=st.data())
def test_sample_mean_fpc_is_unbiased_with_exact_variance(z, data):
    """Uniform without replacement, no factor model: the classical FPC sample mean.

    Every ordered sample is equally likely; on each, the estimator reports the sample
    mean and ``(1 - n/N) s^2 / n``, which we read back from ``fit`` with a scripted
    callable-free replay of the path.
    """
    z = np.array(z, dtype=float)
    N, n = z.size, data.draw(st.integers(2, min(3, z.size)))
    leaves = enumerate_sequential(fq.PAIEstimator(None, fq.UniformSampler(replace=False), budget=n), z)
    assert np.allclose([w for w, _ in leaves], 1 / len(leaves))  # uniform over ordered samples
    estimates, variances = [], []
    for path in itertools.permutations(range(N), n):
        est = fq.PAIEstimator(None, fq.UniformSampler(replace=False), budget=n, random_state=_ScriptedRng(path, N))
        est.fit(z)
        assert list(est.queries_["question"]) == list(path)
        estimates.append(est.estimate_)
        variances.append(est.std_error_**2)
    estimates, variances = np.array(estimates), np.array(variances)
    assert est.result_.method == "sample_mean"
    assert abs(estimates.mean() - z.mean()) < TOL
    assert abs(variances.mean() - estimates.var()) < TOL


class _ScriptedRng(np.random.Generator):
    """A Generator whose uniforms make a uniform draw without replacement from ``n``
    questions follow ``path`` (to replay one branch through ``fit``): the inverse CDF
    gives the r-th askable question (in index order) the interval [r, r + 1) / |R|, so
    ``u`` is its midpoint."""

    def __init__(self, path, n):
        super().__init__(np.random.PCG64(0))
        self._path, self._askable = list(path), list(range(n))

    def random(self, *args, **kwargs):
        j = self._path.pop(0)
        u = (self._askable.index(j) + 0.5) / len(self._askable)
        self._askable.remove(j)
        return u


def test_enumeration_detects_a_biased_increment():
    """Guard against a test that cannot fail: the naive without-replacement increment
    (the paper's ad-hoc variant: restricted q, with-replacement phi) is biased here."""
    z = np.array([1.0, 0.0, 0.0])
    fm = fq.LogisticFactorModel.from_factors(np.array([[2.0], [-1.0], [0.5]]), np.array([1.0]), np.eye(1))
    est = fq.PAIEstimator(fm, fq.NeymanSampler(tau=0.2, replace=False), budget=2)
    run = start_loop(est, 3).run
    run.replace = True  # phi as with replacement, q restricted to the unasked questions
    run_available = run.available

    sampler = run.sampler
    total = 0.0

    def walk(run, prob, phis):
        nonlocal total
        if len(phis) == 2:
            total += prob * np.mean(phis)
            return
        st_ = run.state()
        st_ = fq.PolicyState(**{**st_.__dict__, "available": run.available.copy(), "asked": None})
        q = sampler.probabilities(st_)
        for j in np.flatnonzero(q > 0):
            child = copy.deepcopy(run)
            phi = child.record(int(j), float(q[j]), float(z[j]))
            child.end_round([int(j)], [float(z[j])])
            child.available[j] = False
            walk(child, prob * q[j], phis + [phi])

    assert run_available.all()
    walk(run, 1.0, [])
    assert abs(total - z.mean()) > 1e-3


# ---------------------------------------------------------------- graded outcomes in [0, 1]
GRADED_SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@GRADED_SETTINGS
@given(data=st.data(), replace=st.booleans())
def test_graded_outcomes_pai_unbiased_and_variance_exact(data, replace):
    """Rubric scores / pass@k fractions: E[theta_hat] = theta and E[V_hat] = Var(theta_hat)
    exactly, for every sequential sampler, with and without replacement, batches of 1-3;
    the factor posterior is updated with the graded answers (fractional Laplace step)."""
    z, fm = data.draw(banks(min_n=2 if not replace else 1, graded=True))
    sampler = data.draw(sequential_samplers(replace))
    budget = data.draw(st.integers(2, min(3, z.size) if not replace else 3))
    batch_size = data.draw(st.integers(1, 3))
    est = fq.PAIEstimator(fm, sampler, budget=budget, batch_size=batch_size)
    mean, var, e_vhat = moments_sequential(enumerate_sequential(est, z))
    assert abs(mean - z.mean()) < TOL
    assert abs(e_vhat - var) < TOL


@GRADED_SETTINGS
@given(data=st.data())
def test_graded_outcomes_bernoulli_aipw_unbiased_and_design_variance_exact(data):
    z, fm = data.draw(banks(min_n=2, graded=True))
    sampler = fq.BernoulliAIPW(
        score=data.draw(st.sampled_from(["uniform", "neyman", "min"])),
        tau=data.draw(taus),
        order="natural",
        pi_floor=data.draw(st.floats(0.01, 1.0)),
    )
    budget = data.draw(st.integers(2, min(3, z.size)))
    est = fq.PAIEstimator(fm if data.draw(st.booleans()) else None, sampler, budget=budget)
    leaves = enumerate_stream(est, z)
    p = np.array([w for w, _, _ in leaves])
    theta_hat = np.array([t for _, t, _ in leaves])
    vhat = np.array([v for _, _, v in leaves])
    mean = p @ theta_hat
    assert abs(mean - z.mean()) < TOL
    assert abs(p @ vhat - p @ (theta_hat - mean) ** 2) < TOL


@GRADED_SETTINGS
@given(z=st.lists(graded_outcomes, min_size=2, max_size=4), data=st.data())
def test_graded_outcomes_sample_mean_fpc_unbiased_with_exact_variance(z, data):
    """The FPC sample mean of graded scores, replayed through ``fit`` on every ordered sample."""
    z = np.array(z, dtype=float)
    N, n = z.size, data.draw(st.integers(2, min(3, z.size)))
    estimates, variances = [], []
    for path in itertools.permutations(range(N), n):
        est = fq.PAIEstimator(None, fq.UniformSampler(replace=False), budget=n, random_state=_ScriptedRng(path, N))
        est.fit(z)
        estimates.append(est.estimate_)
        variances.append(est.std_error_**2)
    estimates, variances = np.array(estimates), np.array(variances)
    assert est.result_.method == "sample_mean"
    assert abs(estimates.mean() - z.mean()) < TOL
    assert abs(variances.mean() - estimates.var()) < TOL


def test_graded_enumeration_detects_a_biased_increment():
    """The graded checks can fail: the with-replacement increment under a without-replacement
    policy is biased on a graded bank too (same walk as above, scores 0.9 / 0.2 / 0.4)."""
    z = np.array([0.9, 0.2, 0.4])
    fm = fq.LogisticFactorModel.from_factors(np.array([[2.0], [-1.0], [0.5]]), np.array([1.0]), np.eye(1))
    est = fq.PAIEstimator(fm, fq.NeymanSampler(tau=0.2, replace=True), budget=2)
    run = start_loop(est, 3).run
    sampler = run.sampler
    total = 0.0

    def walk(run, prob, phis):
        nonlocal total
        if len(phis) == 2:
            total += prob * np.mean(phis)
            return
        state = fq.PolicyState(**{**run.state().__dict__, "available": run.available.copy(), "asked": None})
        q = sampler.probabilities(state)
        for j in np.flatnonzero(q > 0):
            child = copy.deepcopy(run)
            phi = child.record(int(j), float(q[j]), float(z[j]))
            child.end_round([int(j)], [float(z[j])])
            child.available[j] = False  # restrict the next draw, keep the with-replacement phi
            walk(child, prob * q[j], phis + [phi])

    walk(run, 1.0, [])
    assert abs(total - z.mean()) > 1e-3


# ---------------------------------------------------------------- the design-unbiased floor
class _KnownProbabilities(BaseEstimator):
    """A predictor told the answers' true probabilities; it has nothing to learn."""

    def __init__(self, pi=None):
        self.pi = pi

    def fit(self, X=None, y=None):
        self.pi_ = np.asarray(self.pi, dtype=float)
        self.n_features_in_ = self.pi_.size
        return self

    def posterior(self, dtype="float64", predict_every=1):
        from faqstats.posterior import FixedPredictions

        return FixedPredictions(self.pi_)


def test_pai_told_the_true_probabilities_meets_the_design_floor_and_not_less():
    """docs/statistics.md, "What no predictor can buy": answers z_j ~ Bernoulli(pi_j), PAI with p = pi and
    the hybrid law q = tau / N + (1 - tau) sigma / sum(sigma) (with replacement, n draws) has expected
    squared error (sum sigma^2 / q - sum sigma^2) / (n N^2), by enumeration of the answers and of every
    path; it is never below the Godambe-Joshi bound ((sum sigma)^2 / n - sum sigma^2) / N^2 and comes
    nearest at tau -> 0 (q ~ sigma, the Neyman law)."""
    pi = np.array([0.1, 0.35, 0.6, 0.9, 0.97])
    N, n = pi.size, 2
    sigma = np.sqrt(pi * (1 - pi))
    floor = (sigma.sum() ** 2 / n - np.sum(sigma**2)) / N**2
    mses = []
    for tau in (1e-6, 0.3, 1.0):
        est = fq.PAIEstimator(_KnownProbabilities(pi).fit(), fq.HybridSampler(tau=tau, replace=True), budget=n)
        mse = 0.0
        for y in itertools.product([0.0, 1.0], repeat=N):
            y = np.array(y)
            p_y = np.prod(np.where(y == 1, pi, 1 - pi))
            mse += p_y * sum(p * (phis.mean() - y.mean()) ** 2 for p, phis in enumerate_sequential(est, y))
        q = tau / N + (1 - tau) * sigma / sigma.sum()
        assert abs(mse - (np.sum(sigma**2 / q) - np.sum(sigma**2)) / (n * N**2)) < TOL
        assert mse >= floor
        mses.append(mse)
    assert mses[0] < mses[1] < mses[2]  # the Neyman law is best, uniform worst
    # nearest at the Neyman law: it exceeds the floor only by the with-replacement term sum sigma^2 (1 - 1/n) / N^2
    assert abs(mses[0] - floor - np.sum(sigma**2) * (1 - 1 / n) / N**2) < 1e-6
