"""Scale work of issue 16: kept scores in the batched engine, shared validation runs, automatic settings.

The batched engine keeps a policy's scores between prediction refreshes when they follow the
predictions (``UniformSampler``, ``NeymanSampler``, plain ``HybridSampler``); it must still ask
the estimator's questions. Step weights for several budgets may come from the runs of the largest
one (the first ``b`` increments of a run are those of a run of ``b`` queries).
"""

import numpy as np
import pytest

import faqstats as fq
from faqstats.batched import simulate
from faqstats.configure import default_predict_every
from faqstats.step_weights import default_runs, learn_step_weights


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=60, n_questions=300, n_components=2, random_state=1)


@pytest.fixture(scope="module")
def fm(bank):
    return fq.LogisticFactorModel(n_components=2, max_iter=60, random_state=0).fit(bank.history)


@pytest.mark.parametrize("sampler, every", [(fq.UniformSampler(), 3), (fq.UniformSampler(replace=True), 2),
                                            (fq.NeymanSampler(), 2), (fq.HybridSampler(), 5),
                                            (fq.HybridSampler(replace=True), 4), (fq.HybridSampler(), 1)],
                         ids=["uniform", "uniform-replace", "neyman", "hybrid", "hybrid-replace", "hybrid-r1"])
def test_kept_scores_ask_the_estimators_questions(bank, fm, sampler, every):
    rows = [0, 1, 2, 0, 1]
    runs = simulate(bank.new_outcomes, [np.random.default_rng(s) for s in range(5)], predictor=fm,
                    sampler=sampler, budget=60, rows=rows, predict_every=every, step_weights=np.linspace(1, 2, 60))
    for s, r in enumerate(rows):
        est = fq.PAIEstimator(fm, sampler, budget=60, random_state=np.random.default_rng(s), predict_every=every,
                              step_weights=np.linspace(1, 2, 60)).fit(bank.new_outcomes[r])
        assert abs(runs.estimate[s] - est.estimate_) < 1e-10 and abs(runs.std_error[s] - est.std_error_) < 1e-10
        assert runs.n_queries[s] == est.n_queries_


def test_chunks_and_kept_scores_do_not_change_the_runs(bank, fm):
    gens = lambda: [np.random.default_rng(s) for s in range(7)]  # noqa: E731
    kw = dict(predictor=fm, budget=40, rows=np.arange(7) % 3, predict_every=4)
    one = simulate(bank.new_outcomes, gens(), **kw)
    small = simulate(bank.new_outcomes, gens(), max_elements=2 * 300, **kw)
    np.testing.assert_allclose(one.estimate, small.estimate, rtol=1e-12, atol=0)  # (up to BLAS rounding by shape)
    ranges = simulate(bank.new_outcomes, gens(), keep_increments=True, **kw)  # the generic path: ranges
    bare = simulate(bank.new_outcomes, gens(), keep_increments=True, keep_ranges=False, **kw)
    assert bare.increment_ranges is None and ranges.increment_ranges.shape == (7, 40, 2)
    np.testing.assert_allclose(bare.increments, ranges.increments, atol=1e-12)


def test_validation_runs_of_the_largest_budget_serve_the_smaller_ones(bank):
    unfitted = fq.LogisticFactorModel(n_components=2, max_iter=60, random_state=0)
    cache = {}
    big = learn_step_weights(bank.history, unfitted, budget=40, n_runs=60, random_state=0, cache=cache)
    small = learn_step_weights(bank.history, None, budget=15, n_runs=60, random_state=0, cache=cache,
                               fitted_factor_model=big.factor_model)
    np.testing.assert_array_equal(small.step_variance, big.step_variance[:15])
    # a policy whose law depends on the budget is run again
    al = fq.HybridSampler(rho=0.5)
    b40 = learn_step_weights(bank.history, None, budget=40, sampler=al, n_runs=60, random_state=0, cache=cache,
                             fitted_factor_model=big.factor_model)
    b15 = learn_step_weights(bank.history, None, budget=15, sampler=al, n_runs=60, random_state=0, cache=cache,
                             fitted_factor_model=big.factor_model)
    assert not np.array_equal(b15.step_variance, b40.step_variance[:15])


def test_automatic_settings_follow_the_bank():
    assert default_runs(693, 173) == 2000 and default_runs(82756, 8276) == 200
    assert default_predict_every(693) == default_predict_every(4095) == 1
    assert default_predict_every(82756) == 40


def test_from_history_uses_the_schedule_of_its_validation_runs():
    bank = fq.make_synthetic_bank(n_models=40, n_questions=4200, n_components=2, random_state=0)
    cfg = fq.configure_from_history(bank.history, 40, n_runs=20, random_state=0)
    assert cfg.predict_every == 2
    if cfg.choice != "sample-mean":
        assert cfg.estimator.predict_every == 2
