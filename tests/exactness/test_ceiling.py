"""The ceiling diagnostic (issue 16): oracle predictions fixed before the first draw, and the
``ceiling_share`` column of the experiments' summary.

The ceiling's predictor reads all of the new model's answers, but only to fix its predictions
before any draw: conditionally on the model's outcomes they are constants, so PAI with them is
an ordinary fixed-predictor design (exactly unbiased, its variance estimate too), checked here
by walking every sampling path of tiny banks.
"""

import copy

import numpy as np
import pandas as pd
import pytest
from tests.exactness.test_unbiasedness import TOL, enumerate_sequential, moments_sequential, start_loop

import faqstats as fq
from faqstats.experiments import format_summary, run_methods, summarize
from faqstats.experiments.methods import CEILING_METHODS, METHODS, oracle_predictor
from faqstats.experiments.records import RECORD_COLUMNS


def _tiny_predictor(kind, history, seed):
    if kind == "factor":
        return fq.LogisticFactorModel(n_components=1, max_iter=30, random_state=seed).fit(history)
    return fq.GaussianProcessSurrogate(n_components=2).fit(history)


def _walk_laws(estimator, z):
    """Every node's law of a one-draw-per-round run (depth first)."""
    laws = []

    def walk(run, depth):
        q = run.law()
        laws.append(q.copy())
        if depth == estimator.budget:
            return
        for j in np.flatnonzero(q > 0):
            child = copy.deepcopy(run)
            child.record(int(j), float(q[j]), float(z[j]))
            child.end_round([int(j)], [float(z[j])])
            walk(child, depth + 1)

    walk(start_loop(estimator, z.size).run, 0)
    return laws


@pytest.mark.parametrize("kind", ["factor", "gp"])
def test_ceiling_is_exactly_unbiased_with_its_predictions_fixed_before_the_first_draw(kind):
    rng = np.random.default_rng(3)
    for trial in range(6):
        n = int(rng.integers(2, 5))
        history = (rng.random((10, n)) < rng.random(n)).astype(float)
        predictor = _tiny_predictor(kind, history, trial)
        z = rng.integers(0, 2, n).astype(float)
        if z.min() == z.max():  # a constant bank has nothing to estimate; make it informative
            z[0] = 1.0 - z[0]
        _, sampler = METHODS["ceiling-gp" if kind == "gp" else "ceiling"](None)
        est = fq.PAIEstimator(oracle_predictor(predictor, z), sampler, budget=3)
        mean, var, e_vhat = moments_sequential(enumerate_sequential(est, z))
        assert abs(mean - z.mean()) < TOL and abs(e_vhat - var) < TOL
        # the law never moves: the predictions were fixed before the first draw
        laws = _walk_laws(est, z)
        assert len(laws) > 1 + n  # the walk went below the root
        for q in laws[1:]:
            np.testing.assert_array_equal(q, laws[0])


def test_enumeration_sees_a_predictor_that_peeks_at_the_draw():
    """The check above can fail: predictions that learn an answer would move the law."""
    rng = np.random.default_rng(0)
    history = (rng.random((10, 3)) < 0.5).astype(float)
    fm = fq.LogisticFactorModel(n_components=1, max_iter=30, random_state=0).fit(history)
    est = fq.PAIEstimator(fm, fq.NeymanSampler(tau=0.5, replace=True), budget=2)  # the ordinary posterior
    laws = _walk_laws(est, np.array([1.0, 0.0, 1.0]))
    assert any(not np.array_equal(q, laws[0]) for q in laws[1:])


@pytest.mark.parametrize("kind", ["factor", "gp"])
def test_oracle_predictions_are_the_models_own_fit(kind):
    bank = fq.make_synthetic_bank(n_models=80, n_questions=60, n_new=2, n_components=2, random_state=0)
    predictor = _tiny_predictor(kind, bank.history, 0)
    z = bank.new_outcomes[1]
    oracle = oracle_predictor(predictor, z)
    u = predictor.transform(z[None])[0]
    if kind == "factor":
        expected = predictor.predict_proba(u)
    else:
        expected = np.clip(predictor.question_means_ + predictor.question_factors_ @ u, 0.0, 1.0)
    np.testing.assert_allclose(oracle.posterior().predictions, expected, atol=1e-12)
    # the history's predictor is left as it was
    assert np.array_equal(predictor.prior_cov_, np.eye(predictor.prior_cov_.shape[0])) or kind == "factor"
    assert not np.array_equal(predictor.prior_mean_, oracle.prior_mean_)
    # several rows at once: one transform, each row still its own fit
    both = oracle_predictor(predictor, bank.new_outcomes)
    assert len(both) == 2
    np.testing.assert_allclose(both[1].prior_mean_, oracle.prior_mean_, atol=1e-5)
    with pytest.raises(ValueError, match="all of the new model's outcomes"):
        oracle_predictor(predictor, np.where(np.arange(60) == 0, np.nan, z))


def _records(variances):
    """Records of one run per (method, budget) with the given variances (the ESS uses only those)."""
    rows = [(m, b / 100, b, 0, 0, 0, 0.5, 0.5, np.sqrt(v), 0.4, 0.6, True, b) for (m, b), v in variances.items()]
    return pd.DataFrame(rows, columns=RECORD_COLUMNS)


def test_ceiling_share_is_the_ess_over_the_ceilings_at_the_same_budget():
    records = _records({("auto", 10): 0.5, ("auto", 20): 0.2, ("ceiling", 10): 0.25, ("uniform-fpc", 10): 1.0,
                        ("uniform-fpc", 20): 0.6})
    s = summarize(records).set_index(["method", "budget"])
    # ESS vs FPC: auto 2.0 at 10, 3.0 at 20; ceiling 4.0 at 10, not run at 20
    assert s.loc[("auto", 10), "ceiling_share"] == pytest.approx(2.0 / 4.0)
    assert s.loc[("uniform-fpc", 10), "ceiling_share"] == pytest.approx(1.0 / 4.0)
    assert s.loc[("ceiling", 10), "ceiling_share"] == pytest.approx(1.0)
    assert np.isnan(s.loc[("auto", 20), "ceiling_share"]) and np.isnan(s.loc[("uniform-fpc", 20), "ceiling_share"])
    # without the ceiling, or without the FPC baseline, the column is NaN
    assert summarize(records[records["method"] != "ceiling"])["ceiling_share"].isna().all()
    assert summarize(records[records["method"] != "uniform-fpc"])["ceiling_share"].isna().all()
    # another ceiling can be named
    other = records.replace({"method": {"ceiling": "ceiling-gp"}})
    s_gp = summarize(other, ceiling_method="ceiling-gp").set_index(["method", "budget"])
    assert s_gp.loc[("auto", 10), "ceiling_share"] == pytest.approx(0.5)
    shown = format_summary(summarize(records), markdown=True)
    assert "share of ceiling" in shown.splitlines()[0] and "| 0.50 |" in shown
    assert "share of ceiling" not in format_summary(summarize(records[records["method"] != "ceiling"]))


def test_ceiling_runs_agree_across_engines_and_beat_the_sample_mean():
    bank = fq.make_synthetic_bank(n_models=150, n_questions=100, n_new=6, n_components=2, random_state=1)
    fm = fq.LogisticFactorModel(n_components=2, solver="newton", regularization=3.0, random_state=0)
    kw = dict(seeds=2, factor_model=fm, verbose=False, methods=list(CEILING_METHODS))
    batched = run_methods(bank.history, bank.new_outcomes, [10], **kw).records
    sequential = run_methods(bank.history, bank.new_outcomes, [10], engine="sequential", **kw).records
    np.testing.assert_allclose(batched["estimate"], sequential["estimate"], atol=1e-10)
    np.testing.assert_allclose(batched["std_error"], sequential["std_error"], atol=1e-10)
    # seeded Monte Carlo against the closed form: with fixed predictions p and the fixed law q of
    # Neyman tau 0.5, the n increments are iid with variance sum_j r_j^2 / (N^2 q_j) - mean(r)^2,
    # r = z - p; the FPC sample mean's variance is (1 - n / N) S^2 / n
    n, N = 20, bank.new_outcomes.shape[1]
    runs = run_methods(bank.history, bank.new_outcomes, [n], seeds=60, factor_model=fm, verbose=False,
                       methods=["ceiling", "uniform-fpc"])
    fitted = runs.factor_model
    var_ceiling, var_fpc = [], []
    for z in bank.new_outcomes:
        p = oracle_predictor(fitted, z).posterior().predictions
        s = np.sqrt(p * (1 - p))
        q = 0.5 / N + 0.5 * s / s.sum()
        r = z - p
        var_ceiling.append((np.sum(r**2 / q) / N**2 - r.mean() ** 2) / n)
        var_fpc.append((1 - n / N) * z.var(ddof=1) / n)
    expected = np.mean(var_fpc) / np.mean(var_ceiling)
    assert expected > 1.15  # the oracle predictions are informative here (1.26)
    s = runs.summary().set_index("method")
    # 360 runs: the mean variance estimates carry a few percent of MC error
    assert s.loc["ceiling", "ess_fpc"] == pytest.approx(expected, rel=0.15)
    assert s.loc["ceiling", "ceiling_share"] == pytest.approx(1.0)
    assert 0.88 <= s.loc["ceiling", "coverage"] <= 1.0
