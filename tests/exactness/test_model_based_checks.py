"""The model-based result's checks, exactly: each fires on a model exchangeable with the calibration models with
probability at most its share of ``check_level`` (every position of the new statistic among the calibration runs'
enumerated), the shares add up to ``check_level``, a model far above the history is flagged, and bad ``checks``
are refused by name."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import faqstats as fq
from faqstats.model_based import CHECKS, component_spread
from faqstats.model_based_predictor import AbilityFactorModel, AveragedPredictor
from faqstats.model_based_result import ModelBasedResult, conformal_quantile, min_calibration_runs

PAI = fq.AccuracyResult(estimate=0.5, std_error=0.1, n_queries=10, n_questions=100, method="pai",
                        variance_method="martingale")


def _result(values, i, check, checks, level):
    """A result whose ``check`` statistic is ``values[i]`` and whose calibration runs hold the other values; the
    other checks' statistics sit in the middle of their calibration runs'."""
    new, rest = values[i], np.delete(values, i)
    n = rest.size
    middle = np.linspace(-1.0, 1.0, n)
    fields = dict(estimate=0.0, scale=1.0, calibration_scores=np.ones(n), design_based=PAI, disagreement=0.0,
                  disagreement_scores=np.abs(middle), residual=0.0, residual_scores=middle, check_level=level,
                  spread=0.0, spread_scores=np.abs(middle), calibration_estimates=middle, checks=checks)
    if check == "disagreement":
        fields.update(disagreement=new, disagreement_scores=rest)
    elif check == "residual":
        fields.update(residual=new, residual_scores=rest)
    elif check == "components":
        fields.update(spread=new, spread_scores=rest)
    else:
        sign = 1.0 if check == "above" else -1.0
        fields.update(estimate=sign * new, calibration_estimates=sign * rest)
    return ModelBasedResult(**fields)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(5, 80), level=st.floats(0.02, 0.5), check=st.sampled_from(sorted(CHECKS)),
       m=st.integers(1, 5))
def test_each_check_fires_on_an_exchangeable_model_with_probability_at_most_its_share(n, level, check, m):
    # n + 1 distinct exchangeable statistics: the new run's is each of them with probability 1 / (n + 1)
    others = [c for c in sorted(CHECKS) if c != check][: m - 1]
    checks = (check, *others)
    values = np.arange(n + 1, dtype=float)
    results = [_result(values, i, check, checks, level) for i in range(n + 1)]
    fired = [r.check_table().loc[check, "fired"] for r in results]
    share = level / len(checks)
    k = math.ceil((n + 1) * (1 - share))
    assert sum(fired) == max(n + 1 - k, 0)  # exactly the positions above the conformal quantile
    assert sum(fired) / (n + 1) <= share + 1e-12
    assert sum(fired) / (n + 1) >= share - 1 / (n + 1) - 1e-12  # and not a whole position short of it
    # the other checks' statistics sit mid-range and never fire: the flag is this check's alone
    assert [r.fired_checks == (check,) for r in results] == fired


def test_the_shares_add_up_to_check_level_and_ties_do_not_fire():
    r = _result(np.zeros(40), 0, "above", ("disagreement", "residual", "components", "above"), 0.1)
    table = r.check_table()
    assert table["level"].sum() == pytest.approx(0.1) and table["level"].nunique() == 1
    assert not r.flagged  # the new estimate equals every calibration estimate: its rank is not beyond them


def test_too_few_calibration_runs_for_the_share_never_fire():
    # 4 checks at 0.1: 0.025 each needs 39 calibration runs; with 20 the threshold is infinite
    r = _result(np.arange(21.0), 20, "above", ("disagreement", "residual", "components", "above"), 0.1)
    assert math.isinf(r.check_table().loc["above", "threshold"]) and not r.flagged


@settings(max_examples=60, deadline=None)
@given(alpha=st.floats(0.001, 0.999))
def test_min_calibration_runs_is_the_fewest_with_a_finite_quantile(alpha):
    n = min_calibration_runs(alpha)
    assert math.isfinite(conformal_quantile(np.ones(n), alpha))
    assert n == 1 or math.isinf(conformal_quantile(np.ones(n - 1), alpha))


def test_too_few_calibration_runs_for_an_interval_recommend_the_design_based_one():
    def result(n):
        return ModelBasedResult(0.52, 0.02, np.linspace(0.1, 3.0, n), PAI, 0.2, np.linspace(0, 2, n), -0.5,
                                np.linspace(-2, 2, n), 0.1)

    few, enough = result(18), result(19)  # 95% needs 19 runs
    assert not few.calibrated(0.05) and few.conf_int(0.05) == (0.0, 1.0)
    assert few.recommended_interval(0.05) == PAI.conf_int(0.05) and not few.flagged
    text = str(few.summary(0.05))
    assert "TOO FEW CALIBRATION RUNS: 18" in text and "at least 19" in text and "checks cannot fire" in text
    assert enough.calibrated(0.05) and enough.recommended_interval(0.05) == enough.conf_int(0.05)
    assert enough.conf_int(0.05) != (0.0, 1.0) and "TOO FEW" not in str(enough.summary(0.05))
    assert few.calibrated(0.1) and few.recommended_interval(0.1) == few.conf_int(0.1)  # 90% needs only 9


def test_the_summary_says_which_check_fired():
    r = ModelBasedResult(0.9, 0.02, np.linspace(0.1, 3.0, 40), PAI, 0.2, np.linspace(0, 2, 40), -0.5,
                         np.linspace(-2, 2, 40), 0.1, calibration_estimates=np.linspace(0.3, 0.7, 40),
                         checks=("disagreement", "residual", "above"))
    assert r.fired_checks == ("above",) and r.recommended_interval() == PAI.conf_int()
    text = str(r.summary())
    assert "CHECK" in text and "above 0.90 > 0.70" in text
    quiet = ModelBasedResult(0.5, 0.02, np.linspace(0.1, 3.0, 40), PAI, 0.2, np.linspace(0, 2, 40), -0.5,
                             np.linspace(-2, 2, 40), 0.1, calibration_estimates=np.linspace(0.3, 0.7, 40),
                             checks=("disagreement", "residual", "above"))
    assert quiet.fired_checks == () and "CHECK" not in str(quiet.summary())


def test_component_spread():
    assert component_spread([0.25, 0.75, 0.5], 0.25) == 2.0
    assert math.isnan(component_spread([0.3], 0.1)) and component_spread([0.3, 0.3], 0.0) == 0.0
    assert component_spread([0.3, 0.4], 0.0) == math.inf


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=44, n_questions=40, n_new=1, n_components=2, random_state=3)


@pytest.fixture(scope="module")
def averaged(bank):
    gp = fq.GaussianProcessSurrogate(noise_floor=0.1, random_state=0)
    avg = AveragedPredictor([gp, AbilityFactorModel(n_components=1, prior_scale=4.0)])
    return fq.ModelBasedEstimator(predictor=avg, policy_predictor=gp, budget=10, n_folds=4, check_level=0.2,
                                  checks=("disagreement", "residual", "components", "above"), random_state=0,
                                  verbose=False).calibrate(bank.history)


def test_calibration_records_the_components_and_their_spread(averaged):
    c = averaged.calibration_
    assert c.shape[0] == 44
    np.testing.assert_allclose(c["spread"], np.abs(c["estimate_1"] - c["estimate_0"]) / c["scale"], rtol=1e-12)
    np.testing.assert_allclose(c["estimate"], 0.5 * (c["estimate_0"] + c["estimate_1"]), atol=1e-12)
    assert fq.ModelBasedEstimator(predictor=averaged.predictor)._checks(averaged.predictor) == ("disagreement",
                                                                                                 "residual")


def test_a_model_far_above_the_history_is_flagged_and_one_from_it_mostly_not(bank, averaged):
    # negative control: a model answering every question right sits above every calibration model
    r = averaged.set_params(random_state=0).fit(np.ones(bank.history.shape[1])).result_
    assert r.flagged and "above" in r.fired_checks
    assert r.recommended_interval() == r.design_based.conf_int()
    # a new model from the history's generator (exchangeable with the calibration models) at a few seeds
    flags = [averaged.set_params(random_state=s).fit(bank.new_outcomes[0]).result_.flagged for s in range(4)]
    assert sum(flags) <= 1


def test_bad_checks_are_refused_by_name(bank):
    H = bank.history
    for checks in ("all", [], ["above", "above"], ["sideways"], [3]):
        with pytest.raises(ValueError, match="checks must be 'auto' or distinct names"):
            fq.ModelBasedEstimator(budget=3, checks=checks, n_folds=2, verbose=False).calibrate(H)
    with pytest.raises(ValueError, match="'components' check needs an AveragedPredictor"):
        fq.ModelBasedEstimator(fq.GaussianProcessSurrogate(), budget=3, checks=["components"], n_folds=2,
                               verbose=False).calibrate(H)
    est = fq.ModelBasedEstimator(budget=4, checks=["below"], n_folds=2, max_calibration_models=6, random_state=0,
                                 verbose=False).calibrate(H).fit(bank.new_outcomes[0])
    assert est.result_.checks == ("below",) and est.result_.check_table().index.tolist() == ["below"]
