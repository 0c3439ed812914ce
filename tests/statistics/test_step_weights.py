"""Weighted increments: the estimator option, the batched engine, and weights learned from the history.

Exact unbiasedness of the weighted estimate and its variance estimate is checked by
enumeration in test_unbiasedness.py; here: the arithmetic, the checks, agreement
between the engines, and a seeded Monte Carlo check that learned weights lower the
variance where the increments' variance falls.
"""

import warnings

import numpy as np
import pytest

import faqstats as fq
from faqstats.batched import simulate
from faqstats.estimator import martingale_variance, weighted_martingale
from faqstats.experiments import run_experiment
from faqstats.step_weights import StepWeights, inverse_variance_weights, learn_step_weights, validation_split


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=160, n_questions=150, n_components=3, random_state=3)


@pytest.fixture(scope="module")
def fm(bank):
    return fq.LogisticFactorModel(n_components=3, max_iter=300, random_state=0).fit(bank.history)


# ---------------------------------------------------------------- the arithmetic
def test_equal_weights_are_the_plain_mean_and_martingale_variance():
    phi = np.random.default_rng(0).random((4, 9))
    est, var, resid = weighted_martingale(phi, np.full(12, 3.0))
    np.testing.assert_allclose(est, phi.mean(1), rtol=1e-14)
    np.testing.assert_allclose(var, [martingale_variance(r) for r in phi], rtol=1e-12)
    np.testing.assert_allclose(resid, phi - phi.mean(1, keepdims=True), rtol=1e-12)


def test_weights_shift_the_estimate_towards_heavier_steps():
    phi = np.array([0.0, 0.0, 1.0, 1.0])
    est, _, _ = weighted_martingale(phi, [1, 1, 2, 2])
    assert est == pytest.approx(4 / 6)


@pytest.mark.parametrize(
    "weights, match",
    [([1.0, 1.0], "at least 3"), ([1.0, 0.0, 1.0], "positive"), ([1.0, np.nan, 1.0], "positive"),
     ([1.0, 1.0, 10.0], "below 1/2"), ([[1.0, 1.0, 1.0]], "1-D")],
)
def test_weighted_martingale_refuses_bad_weights(weights, match):
    with pytest.raises(ValueError, match=match):
        weighted_martingale(np.array([0.1, 0.5, 0.9]), weights)


def test_inverse_variance_weights_rise_when_variance_falls_and_stay_flat_otherwise():
    w, smooth = inverse_variance_weights(np.linspace(4, 1, 30))
    assert np.all(np.diff(w) > 0) and w.mean() == pytest.approx(1.0)
    assert w[-1] / w[0] == pytest.approx(4.0)
    # a rising variance would ask for weight on early steps: the decreasing fit refuses, weights are equal
    w, smooth = inverse_variance_weights(np.linspace(1, 4, 30))
    np.testing.assert_allclose(w, 1.0)
    # a zero-variance step cannot take all the weight
    w, _ = inverse_variance_weights(np.r_[np.ones(10), 0.0])
    assert np.isfinite(w).all() and w.max() / w.min() <= 1e3 + 1e-9
    with pytest.raises(ValueError, match="non-negative"):
        inverse_variance_weights([1.0, -1.0])


# ---------------------------------------------------------------- the estimator and the engine
def test_estimator_reports_the_weighted_estimate(bank, fm):
    w = np.linspace(1, 2, 30)
    est = fq.PAIEstimator(fm, budget=30, random_state=0, step_weights=w).fit(bank.new_outcomes[0])
    plain = fq.PAIEstimator(fm, budget=30, random_state=0).fit(bank.new_outcomes[0])
    # same draws, weighted differently
    np.testing.assert_array_equal(est.queries_["question"], plain.queries_["question"])
    e, v, resid = weighted_martingale(est.queries_["increment"], w)
    assert est.estimate_ == pytest.approx(e, abs=1e-15) and est.std_error_ == pytest.approx(np.sqrt(v), abs=1e-15)
    assert est.result_.variance_method == "weighted martingale"
    lam = w / w.sum()  # robust df, capped by Kish's effective number of increments minus 1
    assert est.result_.df == pytest.approx(min(fq._inference.effective_df(resid), 1 / np.sum(lam**2) - 1))
    # equal weights: the plain mean and martingale variance
    eq = fq.PAIEstimator(fm, budget=30, random_state=0, step_weights=np.ones(30)).fit(bank.new_outcomes[0])
    phi = plain.queries_["increment"]
    assert eq.estimate_ == pytest.approx(phi.mean(), abs=1e-14)
    assert eq.std_error_ == pytest.approx(np.sqrt(fq.martingale_variance(phi)), rel=1e-12)
    assert eq.result_.df == pytest.approx(fq._inference.effective_df(phi), rel=1e-12)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(step_weights=np.ones(5)), "at least budget=10"),
        (dict(step_weights=-np.ones(10)), "positive"),
        (dict(step_weights=np.ones(10), sampler=fq.BernoulliAIPW()), "BernoulliAIPW"),
        (dict(step_weights=np.ones(10), sampler=fq.HybridSampler(replace=True), variance="paper"), "martingale"),
    ],
)
def test_estimator_refuses_bad_step_weights(bank, fm, kwargs, match):
    with pytest.raises(ValueError, match=match):
        fq.PAIEstimator(fm, budget=10, **kwargs).fit(bank.new_outcomes[0])


def test_step_weights_do_not_apply_to_the_sample_mean(bank):
    with pytest.raises(ValueError, match="sample mean"):
        fq.PAIEstimator(None, fq.UniformSampler(), budget=10, step_weights=np.ones(10)).fit(bank.new_outcomes[0])


@pytest.mark.parametrize("sampler", [fq.HybridSampler(), fq.HybridSampler(tau=0.1, rho=0.5, replace=True)])
def test_batched_engine_matches_the_estimator_with_weights(bank, fm, sampler):
    w = np.geomspace(1, 3, 20)
    seeds = [[5, r] for r in range(6)]
    runs = simulate(bank.new_outcomes, [np.random.default_rng(s) for s in seeds], predictor=fm, sampler=sampler,
                    budget=20, rows=np.arange(6), step_weights=w)
    for r, s in enumerate(seeds):
        est = fq.PAIEstimator(fm, sampler, budget=20, step_weights=w,
                              random_state=np.random.default_rng(s)).fit(bank.new_outcomes[r])
        assert runs.estimate[r] == pytest.approx(est.estimate_, abs=1e-11)
        assert runs.std_error[r] == pytest.approx(est.std_error_, abs=1e-11)
        assert (runs.low[r], runs.high[r]) == pytest.approx(est.conf_int(), abs=1e-10)


# ---------------------------------------------------------------- learning them
def test_learn_step_weights_cross_fits_on_the_history(bank):
    unfitted = fq.LogisticFactorModel(n_components=3, max_iter=300, random_state=0)
    out = {b: learn_step_weights(bank.history, unfitted, budget=b, n_runs=200, random_state=0) for b in (10, 40)}
    assert set(out) == {10, 40}
    sw = out[40]
    assert isinstance(sw, StepWeights)
    assert sw.weights.shape == sw.step_variance.shape == sw.smoothed_variance.shape == (40,)
    assert sw.weights.mean() == pytest.approx(1.0) and np.all(np.diff(sw.weights) >= 0)
    train, val = validation_split(bank.history)
    assert sw.n_validation == val.shape[0] and train.shape[0] + val.shape[0] == bank.history.shape[0]
    assert sw.n_runs >= 200
    # the history teaches the posterior: later increments are less variable, weights rise
    assert sw.weights[-1] > 1.2 * sw.weights[0] and sw.variance_ratio < 1.0


@pytest.mark.slow
def test_learned_weights_lower_the_variance_on_new_models(bank, fm):
    """Seeded Monte Carlo on the synthetic bank: 2,000 runs, the same draws weighted two ways.

    The weighted estimator's mean squared error must be below the equal-weights one (the
    gain predicted from the validation curve is about variance_ratio); a 2% margin is
    left for Monte Carlo noise in the MSE ratio (its paired standard error here is
    about 0.5%)."""
    unfitted = fq.LogisticFactorModel(n_components=3, max_iter=300, random_state=0)
    sw = learn_step_weights(bank.history, unfitted, budget=40, n_runs=400)
    Z = bank.new_outcomes
    rows = np.arange(2000) % Z.shape[0]
    truth = Z.mean(1)[rows]
    mse = {}
    for name, w in (("equal", np.ones(40)), ("learned", sw.weights)):
        gens = [np.random.default_rng([11, r]) for r in range(rows.size)]
        runs = simulate(Z, gens, predictor=fm, budget=40, rows=rows, step_weights=w)
        mse[name] = np.mean((runs.estimate - truth) ** 2)
        cover = np.mean((runs.low <= truth) & (truth <= runs.high))
        assert cover >= 0.93, (name, cover)
    assert mse["learned"] < 0.98 * mse["equal"], mse


def test_learn_step_weights_needs_complete_history_rows(bank):
    H = bank.history.copy()
    H[:, 0] = np.nan
    H[:2, 0] = 1.0
    with pytest.raises(ValueError, match="complete rows"):
        learn_step_weights(H, fq.LogisticFactorModel(n_components=2, max_iter=50), budget=10)


def test_experiment_learns_weights_for_faq_and_falls_back_with_a_warning(bank):
    M = np.vstack([bank.history, bank.new_outcomes])
    fmspec = dict(n_components=3, max_iter=200)
    res = run_experiment(M, budgets=[0.1], seeds=1, methods=["faq", "faq-equal", "uniform-fpc"],
                         factor_model=fmspec, max_models=20, verbose=False, step_weights={"n_runs": 100})
    assert set(res.step_weights) == {("faq", 15)}
    r = res.records
    faq, eq = r[r["method"] == "faq"], r[r["method"] == "faq-equal"]
    assert not np.allclose(faq["estimate"], eq["estimate"])  # same policy, weighted differently
    # a history without complete rows cannot cross-fit: equal weights, with a warning
    M2 = M.copy()
    M2[: bank.history.shape[0] - 1, 0] = np.nan
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = run_experiment(M2, budgets=[0.1], seeds=1, methods=["faq"], factor_model=fmspec, max_models=5,
                             history_fraction=0.1, verbose=False)
    assert res.step_weights == {}
    assert any("the default increment weights" in str(w.message) for w in caught)
