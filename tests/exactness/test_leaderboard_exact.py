"""The leaderboard's shared design, exactly: every draw path on tiny banks.

The walk drives the estimator's own :class:`~faqstats.shared_draws.SharedRun` (K sequential runs on one
common law) on banks of N = 3 or 4 questions with K = 2 and 3 models, T = 2 or 3 draws (batches of 1 and 2),
with and without replacement, and checks to 1e-12: every model's increment has conditional mean theta_k at
every node, E[theta_hat] = theta, E[differences] = differences and E[C_hat] = Cov(theta_hat), the whole matrix.
Without replacement the identities hold too: the increments are Des Raj's (martingale differences) and the
weights of pai_inference are fixed in advance (T = 3 uses them), so the bilinear covariance is as exact as
each model's variance; a census (T = N) reports every theta_k with a zero covariance.
Negative controls: each model recording its own law's probability instead of the common one is biased, and
dropping the cross terms misses the estimates' covariance.
"""

import copy
import itertools

import numpy as np
import pytest
from scipy import stats

import faqstats as fq
from faqstats._inference import pai_inference
from faqstats.leaderboard import LeaderboardEstimator
from faqstats.shared_draws import SharedRun, new_shared_loop, shared_inference, shared_results
from faqstats.sampling import within_round

TOL = 1e-12

#: three models' graded and binary outcomes on four questions: correlated, so the covariance has cross terms
BANK = np.array([[1.0, 0.0, 1.0, 0.75],
                 [1.0, 0.25, 0.0, 1.0],
                 [0.0, 1.0, 0.5, 1.0]])


def tiny_factor_model(n, seed=0):
    """A fixed 2-factor model on ``n`` questions with spread-out predictions."""
    rng = np.random.default_rng(seed)
    return fq.LogisticFactorModel.from_factors(rng.normal(scale=1.5, size=(n, 2)), np.array([0.3, -0.2]),
                                               np.array([[1.0, 0.3], [0.3, 0.8]]))


def board_for(Z, replace, draws, batch_size=1, predictor="factor", tau=0.3):
    fm = tiny_factor_model(Z.shape[1]) if predictor == "factor" else None
    sampler = fq.HybridSampler(tau=tau, replace=replace) if fm is not None else fq.UniformSampler(replace=replace)
    return LeaderboardEstimator(fm, sampler, budget=draws * Z.shape[0], design="shared", batch_size=batch_size)


def enumerate_shared(board, Z, own_law=False):
    """Leaves ``(probability, run)`` of every draw path; asserts the martingale property of every model's
    increment at every node. ``own_law``: the negative control, each model records its own law's probability."""
    K, N = Z.shape
    run = new_shared_loop(board, N, K).run
    theta = Z.mean(axis=1)
    leaves = []

    def walk(run, prob):
        if run.done:
            leaves.append((prob, run))
            return
        law = run.law()
        assert abs(law.sum() - 1) < 1e-12 and (law >= 0).all()
        own = [r.law() for r in run.runs]
        np.testing.assert_allclose(law, np.mean(own, axis=0), rtol=0, atol=1e-15)
        draw(run, prob, law, own, run.round_size(board.batch_size), [], [])

    def draw(run, prob, law, own, left, drawn, answers):
        if left == 0:
            run.end_round(drawn, answers)
            walk(run, prob)
            return
        q = within_round(law, run.available, run.replace)
        m = np.zeros(K)
        for j in np.flatnonzero(q > 0):
            child = copy.deepcopy(run)
            if own_law:  # each model's own law, renormalised within the round as the common one is
                p = np.array([within_round(o, run.available, run.replace)[j] for o in own])
                phi = np.array([r.record(j, pk, z) for r, pk, z in zip(child.runs, p, Z[:, j])])
            else:
                phi = child.record(int(j), float(q[j]), Z[:, j])
            m += q[j] * phi
            draw(child, prob * q[j], law, own, left - 1, drawn + [int(j)], answers + [Z[:, j]])
        if not own_law:
            np.testing.assert_allclose(m, theta, rtol=0, atol=TOL)

    walk(run, 1.0)
    assert abs(sum(p for p, _ in leaves) - 1) < 1e-12
    return leaves


def moments(board, leaves, names):
    """``(E[theta_hat], Cov(theta_hat), E[C_hat], leaves' results)`` over enumerated leaves."""
    p = np.array([w for w, _ in leaves])
    results = [shared_results(board, run, names) for _, run in leaves]
    est = np.array([r.estimate for r in results])
    mean = p @ est
    cov = np.einsum("l,li,lj->ij", p, est - mean, est - mean)
    e_c = np.einsum("l,lij->ij", p, np.array([r.cov for r in results]))
    return mean, cov, e_c, results


CASES = [  # (models, questions, draws, batch size, replace)
    (2, 3, 2, 1, True), (2, 4, 2, 1, False), (3, 4, 2, 1, True), (3, 4, 2, 1, False), (3, 3, 2, 2, False),
    (3, 4, 2, 2, True), (2, 4, 3, 1, False), (2, 3, 3, 1, True), (3, 3, 3, 1, True),
]


@pytest.mark.parametrize("K, N, T, batch_size, replace", CASES)
def test_shared_design_estimates_differences_and_covariance_exact(K, N, T, batch_size, replace):
    Z = BANK[:K, :N]
    board = board_for(Z, replace, T, batch_size)
    names = [str(k) for k in range(K)]
    leaves = enumerate_shared(board, Z)
    mean, cov, e_c, results = moments(board, leaves, names)
    theta = Z.mean(axis=1)
    np.testing.assert_allclose(mean, theta, rtol=0, atol=TOL)
    np.testing.assert_allclose(e_c, cov, rtol=0, atol=TOL)  # every entry: the cross terms too
    assert np.abs(cov - np.diag(np.diag(cov))).max() > 1e-4  # the cross terms matter here
    p = np.array([w for w, _ in leaves])
    pairs = list(itertools.combinations(range(K), 2))
    diffs = np.array([[r.estimate[i] - r.estimate[j] for i, j in pairs] for r in results])
    true = np.array([theta[i] - theta[j] for i, j in pairs])
    np.testing.assert_allclose(p @ diffs, true, rtol=0, atol=TOL)
    for (_, run), r in zip(leaves, results):  # each model's variance is its own pai_inference's
        table = run.table()
        assert len(table) == T and (table["probability"] > 0).all()
        own = pai_inference(table["increment"].T, n_questions=None if replace else N)[1]
        np.testing.assert_allclose(np.diag(r.cov), own, rtol=1e-12, atol=1e-15)
        assert np.linalg.eigvalsh(r.cov).min() >= -1e-15


def test_census_reports_every_model_exactly_with_zero_covariance():
    Z = BANK[:, :3]
    board = board_for(Z, False, 3)
    _, _, _, results = moments(board, enumerate_shared(board, Z), list("abc"))
    for r in results:
        np.testing.assert_array_equal(r.estimate, Z.mean(axis=1))
        assert not r.cov.any()


@pytest.mark.parametrize("replace", [False, True])
def test_sample_means_and_their_finite_population_covariance_exact(replace):
    """No predictor and uniform draws: the sample means (FPC covariance without replacement) or the PAI
    increments with zero predictions (with replacement), each exactly unbiased with an exact covariance."""
    Z = BANK[:, :4]
    board = board_for(Z, replace, 2, predictor=None)
    mean, cov, e_c, results = moments(board, enumerate_shared(board, Z), list("abc"))
    np.testing.assert_allclose(mean, Z.mean(axis=1), rtol=0, atol=TOL)
    np.testing.assert_allclose(e_c, cov, rtol=0, atol=TOL)
    if not replace:  # the plain sample means
        for (_, run), r in zip(enumerate_shared(board, Z), results):
            np.testing.assert_allclose(r.estimate, run.table()["outcome"].mean(axis=0), rtol=0, atol=1e-15)


def test_negative_controls_own_laws_are_biased_and_a_diagonal_misses_the_covariance():
    Z = BANK[:, :4]
    board = board_for(Z, True, 2)
    biased = enumerate_shared(board, Z, own_law=True)
    p = np.array([w for w, _ in biased])
    est = np.array([[pai_inference(r.table()["increment"])[0] for r in run.runs] for _, run in biased])
    assert np.abs(p @ est - Z.mean(axis=1)).max() > 1e-4  # 5e-4 here, 1e8 times the tolerance
    mean, cov, e_c, _ = moments(board, enumerate_shared(board, Z), list("abc"))
    diagonal_only = np.diag(np.diag(e_c))
    assert np.abs(diagonal_only - cov).max() > 1e-4  # what an estimator without the cross terms gets wrong


def test_shared_inference_polarises_pai_inference():
    rng = np.random.default_rng(0)
    phi = rng.random((7, 3))
    for n in (None, 20):  # with replacement (martingale) and without (weighted martingale)
        est, cov, df, pair_df = shared_inference(phi, n_questions=n)
        for a, b in itertools.combinations(range(3), 2):
            v = pai_inference(phi[:, a] - phi[:, b], n_questions=n)[1]
            assert abs(cov[a, a] + cov[b, b] - 2 * cov[a, b] - v) < 1e-15
            assert pair_df[a, b] == pair_df[b, a] == pai_inference(phi[:, a] - phi[:, b], n_questions=n)[2]
        assert df.shape == (3,) and (np.diag(pair_df) == df).all()


def test_fit_reports_its_own_draws():
    """``fit`` runs the same run: its result is shared_inference of its queries_, q_t is the mean of the
    models' laws, and an outcomes callable gives what the array gives."""
    fm = tiny_factor_model(120)
    Z = (np.random.default_rng(0).random((3, 120)) < fm.posterior().predictions).astype(float)
    board = LeaderboardEstimator(fm, fq.HybridSampler(tau=0.3), budget=60, design="shared", batch_size=3,
                                 random_state=1).fit(Z, names=list("xyz"))
    q = board.queries_
    assert len(q) == 20 and board.estimators_ is None and board.n_queries_.tolist() == [20] * 3
    assert np.unique(q["question"]).size == 20  # without replacement
    np.testing.assert_array_equal(q["outcome"], Z[:, q["question"]].T)
    est, cov, df, pair_df = shared_inference(q["increment"], n_questions=120)
    np.testing.assert_allclose(board.estimate_, est, rtol=0, atol=0)
    np.testing.assert_allclose(board.result_.cov, cov, rtol=1e-13, atol=0)
    np.testing.assert_array_equal(board.result_.pair_df, pair_df)  # each difference's interval: its own df
    d = board.result_.differences(simultaneous=False)
    half = stats.t.ppf(0.975, pair_df[0, 1]) * d.loc[("x", "y"), "std_error"]
    assert abs(d.loc[("x", "y"), "upper"] - d.loc[("x", "y"), "estimate"] - half) < 1e-12
    calls = LeaderboardEstimator(fm, fq.HybridSampler(tau=0.3), budget=60, design="shared", batch_size=3,
                                 random_state=1).fit([lambda j, z=z: z[j] for z in Z])
    np.testing.assert_array_equal(calls.queries_, board.queries_)
    assert board.result_.names == ("x", "y", "z")


def test_a_run_replays_its_draws():
    Z = BANK[:, :4]
    board = board_for(Z, False, 3)
    run = new_shared_loop(board, 4, 3).run
    rng = np.random.default_rng(0)
    rounds = []
    while not run.done:
        draws = run.draw_round(rng, 1)
        rounds.append([(j, p) for j, p, _ in draws])
        for j, p, _ in draws:
            run.record(j, p, Z[:, j])
        run.end_round([d[0] for d in draws], [Z[:, d[0]] for d in draws])
    replay = new_shared_loop(board, 4, 3).run
    for draws in rounds:
        for j, p, _ in replay.replay_round(draws):
            replay.record(j, p, Z[:, j])
        replay.end_round([d[0] for d in draws], [Z[:, d[0]] for d in draws])
    np.testing.assert_array_equal(replay.table(), run.table())
    fresh = new_shared_loop(board, 4, 3).run
    with pytest.raises(ValueError, match="policy now gives"):
        fresh.replay_round([(rounds[0][0][0], rounds[0][0][1] / 2)])
    with pytest.raises(ValueError, match="one outcome per model"):
        fresh.record(0, 0.25, [1.0, 0.0])
    assert isinstance(fresh, SharedRun)
