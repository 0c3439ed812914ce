"""A policy written by a user runs unchanged through every path (issue 13).

``UncertaintyFirst`` defines only ``scores``. It runs through ``PAIEstimator``,
``EvaluationSession``, ``PairedPAIEstimator(sampler=...)``, ``faqstats.batched.simulate``
(run by run from its numpy scores, since it does not declare torch scores) and
``learn_step_weights`` / ``tune_policy``, with the same draws in the estimator, the session and the
batched engine (float64), and it is exactly unbiased with an exactly unbiased variance
estimate (enumeration).
"""

import numpy as np
import pytest

import faqstats as fq
from faqstats.batched import simulate
from tests.exactness.test_unbiasedness import TOL, UncertaintyFirst, enumerate_sequential, moments_sequential


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=80, n_questions=150, n_components=3, random_state=3)


@pytest.fixture(scope="module")
def fm(bank):
    return fq.LogisticFactorModel(n_components=3, max_iter=200, random_state=0).fit(bank.history)


def test_a_custom_policy_is_not_taken_for_a_builtin_kernel():
    assert not UncertaintyFirst.batched and fq.HybridSampler.batched


@pytest.mark.parametrize("replace", [False, True])
def test_estimator_session_and_batched_engine_make_the_same_draws(bank, fm, replace):
    sampler = UncertaintyFirst(tau=0.3, replace=replace)
    Z = bank.new_outcomes
    seeds = [[11, r] for r in range(4)]
    runs = simulate(Z, [np.random.default_rng(s) for s in seeds], predictor=fm, sampler=sampler, budget=30,
                    rows=np.arange(4), keep_increments=True)
    for r, seed in enumerate(seeds):
        est = fq.PAIEstimator(fm, sampler, budget=30, random_state=np.random.default_rng(seed)).fit(Z[r])
        # the engine's increments are the estimator's: the same questions, probabilities and answers
        np.testing.assert_allclose(runs.increments[r], est.queries_["increment"], rtol=0, atol=1e-10)
        assert runs.n_queries[r] == est.n_queries_
        assert runs.estimate[r] == pytest.approx(est.estimate_, abs=1e-10)
        session = fq.EvaluationSession(fm, sampler=sampler, budget=30, batch_size=3, random_state=r)
        while not session.done:
            ids, _ = session.next_questions()
            session.record(ids, [float(Z[r][i]) for i in ids])
        batched_est = fq.PAIEstimator(fm, sampler, budget=30, batch_size=3, random_state=r).fit(Z[r])
        np.testing.assert_array_equal(session.queries(), batched_est.queries_)
        assert session.result() == batched_est.result_


def test_a_saved_session_with_a_custom_policy_resumes(tmp_path, bank, fm):
    sampler = UncertaintyFirst(tau=0.4)
    z = bank.new_outcomes[0]
    s = fq.EvaluationSession.create(tmp_path / "s", fm, sampler=sampler, budget=8, batch_size=2, random_state=5)
    s.next_questions()
    with pytest.raises(ValueError, match="not one of faqstats.sampling"):
        fq.EvaluationSession.load(tmp_path / "s")
    while not s.done:
        s = fq.EvaluationSession.load(tmp_path / "s", sampler=UncertaintyFirst(tau=0.4))
        ids, _ = s.next_questions()
        s.record(ids, [float(z[i]) for i in ids])
    want = fq.PAIEstimator(fm, sampler, budget=8, batch_size=2, random_state=5).fit(z)
    assert s.result() == want.result_


@pytest.mark.parametrize("design", ["coupled", "shared"])
def test_paired_estimator_takes_the_policy(bank, fm, design):
    z_a, z_b = bank.new_outcomes[0], bank.new_outcomes[1]
    est = fq.PairedPAIEstimator(fm, UncertaintyFirst(tau=0.3), budget=25, design=design, random_state=0)
    est.fit(z_a, z_b)
    assert est.result_.method == ("coupled" if design == "coupled" else "paired")
    low, high = est.conf_int()
    assert -1 <= low <= est.estimate_ <= high <= 1
    if design == "coupled":  # each model's first law is the policy's own for that model
        run = est.new_loop().run
        q_a, q_b = run.law()
        np.testing.assert_allclose(q_a, UncertaintyFirst(tau=0.3).probabilities(run.a.state()), rtol=1e-12)
        np.testing.assert_allclose(q_b, q_a, rtol=1e-12)  # the same prior: the same first law


def test_step_weights_are_learned_for_the_policy(bank):
    unfitted = fq.LogisticFactorModel(n_components=3, max_iter=200, random_state=0)
    sw = fq.learn_step_weights(bank.history, unfitted, budget=20, sampler=UncertaintyFirst(), n_runs=120,
                               random_state=0)
    assert sw.weights.shape == (20,) and np.all(np.isfinite(sw.weights)) and sw.weights.mean() == pytest.approx(1)


def test_the_policy_is_tuned_on_validation_models(bank):
    from faqstats.experiments import tune_policy

    unfitted = fq.LogisticFactorModel(n_components=3, max_iter=200, random_state=0)
    res = tune_policy(bank.history, unfitted, budget=15, sampler=UncertaintyFirst(replace=True),
                      grid={"tau": (0.1, 0.5, 0.9)}, seeds=2, random_state=0)
    assert res.table["tau"].tolist() == [0.1, 0.5, 0.9] and res.table["coverage"].between(0, 1).all()
    tuned = res.sampler()
    assert isinstance(tuned, UncertaintyFirst) and tuned.replace and tuned.tau == res.best_params["tau"]
    with pytest.raises(ValueError, match="tau"):
        tune_policy(bank.history, unfitted, budget=15, sampler=UncertaintyFirst(), grid={"tau": (7.0,)})


def test_custom_policy_exactly_unbiased_with_exact_variance_by_enumeration():
    rng = np.random.default_rng(0)
    for trial in range(12):
        n, k = int(rng.integers(2, 5)), int(rng.integers(1, 3))
        fm = fq.LogisticFactorModel.from_factors(rng.normal(size=(n, k)) * 2, rng.normal(size=k), np.eye(k))
        z = rng.integers(0, 2, n).astype(float) if trial % 2 else np.round(rng.random(n), 2)
        replace = bool(trial % 3 == 0)
        est = fq.PAIEstimator(fm, UncertaintyFirst(tau=float(rng.uniform(0.05, 1)), replace=replace),
                              budget=min(3, n) if not replace else 3, batch_size=int(rng.integers(1, 3)))
        mean, var, e_vhat = moments_sequential(enumerate_sequential(est, z))
        assert abs(mean - z.mean()) < TOL and abs(e_vhat - var) < TOL
