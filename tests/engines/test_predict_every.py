"""Predictions refreshed on a schedule (``predict_every``, issue 16): still exactly unbiased.

The posterior learns every answer; only its predictions (the O(N k) pass) are recomputed after
every ``predict_every``-th answer. They stay functions of earlier answers, so the increments
keep their conditional mean (checked at every node of the enumerated tree) and the variance
estimator stays exactly unbiased.
"""

import numpy as np
import pytest
from tests.exactness.test_unbiasedness import TOL, enumerate_sequential, moments_sequential

import faqstats as fq
from faqstats.batched import simulate
from faqstats.posterior import FactorPosterior


def test_predictions_move_only_on_schedule():
    rng = np.random.default_rng(0)
    V = rng.normal(size=(6, 2))
    every, fresh = FactorPosterior(V, np.zeros(2), np.eye(2), predict_every=3), FactorPosterior(V, np.zeros(2), np.eye(2))
    start = every.predictions
    for t, (j, z) in enumerate([(0, 1.0), (1, 0.0), (2, 1.0), (3, 1.0)], start=1):
        every.update(j, z)
        fresh.update(j, z)
        np.testing.assert_array_equal(every.mean, fresh.mean)  # the posterior learns every answer
        expected = fresh.predictions if t == 3 else start if t < 3 else every.predictions
        np.testing.assert_array_equal(every.predictions, expected)
    assert not np.array_equal(every.predictions, fresh.predictions)  # the 4th answer is not in yet


@pytest.mark.parametrize("predictor", ["factor", "gp"])
def test_pai_with_stale_predictions_is_exactly_unbiased_by_enumeration(predictor):
    rng = np.random.default_rng(1)
    for trial in range(8):
        n = int(rng.integers(2, 5))
        history = (rng.random((8, n)) < rng.random(n)).astype(float)
        if predictor == "factor":
            fm = fq.LogisticFactorModel(n_components=1, max_iter=30, random_state=trial).fit(history)
        else:
            fm = fq.GaussianProcessSurrogate(n_components=2).fit(history)
        z = rng.integers(0, 2, n).astype(float)
        replace = bool(trial % 3 == 0)
        sampler = (fq.ActiveLearningSampler if trial % 2 else fq.HybridSampler)(replace=replace)
        est = fq.PAIEstimator(fm, sampler, budget=3 if replace else min(3, n), batch_size=int(rng.integers(1, 3)),
                              predict_every=int(rng.integers(2, 4)))
        mean, var, e_vhat = moments_sequential(enumerate_sequential(est, z))
        assert abs(mean - z.mean()) < TOL and abs(e_vhat - var) < TOL


@pytest.mark.parametrize("sampler", [fq.HybridSampler(), fq.ActiveLearningSampler(),
                                     fq.HybridSampler(replace=True), fq.BernoulliAIPW(score="neyman")],
                         ids=["hybrid", "active", "hybrid-replace", "aipw"])
def test_estimator_and_batched_engine_agree(sampler):
    bank = fq.make_synthetic_bank(n_models=60, n_questions=120, n_components=2, random_state=0)
    fm = fq.LogisticFactorModel(n_components=2, max_iter=60, random_state=0).fit(bank.history)
    rows = [0, 1, 2, 0]
    runs = simulate(bank.new_outcomes, [np.random.default_rng(s) for s in range(4)], predictor=fm,
                    sampler=sampler, budget=20, rows=rows, predict_every=4)
    every_answer = simulate(bank.new_outcomes, [np.random.default_rng(s) for s in range(4)], predictor=fm,
                            sampler=sampler, budget=20, rows=rows)
    assert not np.array_equal(runs.estimate, every_answer.estimate)  # the schedule is in effect
    for s, r in enumerate(rows):
        est = fq.PAIEstimator(fm, sampler, budget=20, random_state=np.random.default_rng(s),
                              predict_every=4).fit(bank.new_outcomes[r])
        assert abs(runs.estimate[s] - est.estimate_) < 1e-10 and abs(runs.std_error[s] - est.std_error_) < 1e-10


@pytest.mark.parametrize("bad, error", [(0, ValueError), (1.5, TypeError), (True, TypeError)])
def test_bad_schedule_is_refused(bad, error):
    bank = fq.make_synthetic_bank(n_models=20, n_questions=15, n_components=2, random_state=0)
    fm = fq.LogisticFactorModel(n_components=1, max_iter=20, random_state=0).fit(bank.history)
    with pytest.raises(error, match="predict_every"):
        fq.PAIEstimator(fm, budget=5, predict_every=bad).fit(bank.new_outcomes[0])
