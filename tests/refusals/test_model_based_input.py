"""The model-based estimator refuses what it cannot calibrate or run, by name, and warns when its calibration is too
small to give an interval."""

import warnings

import numpy as np
import pytest

import faqstats as fq


@pytest.fixture(scope="module")
def history():
    return fq.make_synthetic_bank(n_models=20, n_questions=15, n_components=2, random_state=0).history


def test_too_few_complete_rows(history):
    H = history.copy()
    H[1:, 0] = np.nan
    with pytest.raises(ValueError, match="at least 2 complete history rows"):
        fq.ModelBasedEstimator(budget=3, verbose=False).calibrate(H)
    with pytest.raises(ValueError, match="n_folds=30"):
        fq.ModelBasedEstimator(budget=3, n_folds=30, verbose=False).calibrate(history)


def test_bad_parameters(history):
    with pytest.raises(TypeError, match="sequential faqstats Sampler"):
        fq.ModelBasedEstimator(sampler=fq.BernoulliAIPW(), budget=3, verbose=False).calibrate(history)
    with pytest.raises(ValueError, match="check_level"):
        fq.ModelBasedEstimator(budget=3, check_level=1.5, verbose=False).calibrate(history)
    with pytest.raises(ValueError, match="power must be"):
        fq.ModelBasedEstimator(sampler=fq.VarianceReductionSampler(power=0.5), budget=3, n_folds=2,
                               verbose=False).calibrate(history)


def test_fit_before_calibrate(history):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        fq.ModelBasedEstimator(budget=3).fit(history[0])


def test_bad_policy_predictor(history):
    with pytest.raises(TypeError, match="policy_predictor must be a predictor"):
        fq.ModelBasedEstimator(budget=3, policy_predictor="other", n_folds=2, verbose=False).calibrate(history)


def test_a_calibration_too_small_for_an_interval_warns(history):
    with pytest.warns(UserWarning, match="18 calibration runs.*needs at least 19 runs.*level 0.05 needs 19"):
        est = fq.ModelBasedEstimator(budget=3, verbose=False).calibrate(history[:18])
    assert est.fit(history[19]).conf_int(0.05) == (0.0, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fq.ModelBasedEstimator(budget=3, verbose=False).calibrate(history[:19])
    with pytest.warns(UserWarning, match="a check at level 0.0333 needs 29"):  # three checks share 0.1
        fq.ModelBasedEstimator(budget=3, checks=("disagreement", "residual", "above"),
                               verbose=False).calibrate(history)
