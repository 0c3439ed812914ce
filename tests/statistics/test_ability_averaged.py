"""AveragedPredictor: its posterior averages its components' on the same answers, and in ModelBasedEstimator its
estimate and scale are the weighted averages of the components' on the same draws."""

import numpy as np
import pytest

import faqstats as fq
from faqstats.model_based import ModelBasedEstimator
from faqstats.model_based_predictor import AbilityFactorModel, AveragedPredictor


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=30, n_questions=40, n_new=2, n_components=2, random_state=0)


def _estimator(predictor):
    gp = fq.GaussianProcessSurrogate(noise_floor=0.1, random_state=0)
    return ModelBasedEstimator(predictor=predictor, policy_predictor=gp, budget=8, n_folds=3,
                               max_calibration_models=12, random_state=0, verbose=False)


def test_posterior_is_the_weighted_average_after_the_same_answers(bank):
    gp, afm = fq.GaussianProcessSurrogate(random_state=0), AbilityFactorModel(n_components=1)
    avg = AveragedPredictor([gp, afm], weights=[3.0, 1.0]).fit(bank.history)
    post, parts = avg.posterior(), [p.fit(bank.history).posterior() for p in (gp, afm)]
    for j, y in [(0, 1.0), (5, 0.0), (7, 1.0)]:
        post.update(j, y)
        for p in parts:
            p.update(j, y)
    np.testing.assert_allclose(post.predictions, 0.75 * parts[0].predictions + 0.25 * parts[1].predictions,
                               atol=1e-12)
    np.testing.assert_array_equal(avg.weights_, [0.75, 0.25])


def test_model_based_estimate_is_the_average_of_the_components_on_the_same_draws(bank):
    gp, afm = fq.GaussianProcessSurrogate(noise_floor=0.1, random_state=0), AbilityFactorModel(n_components=1)
    z = bank.new_outcomes[1]
    single = [_estimator(p).calibrate(bank.history).fit(z) for p in (gp, afm)]
    both = _estimator(AveragedPredictor([gp, afm])).calibrate(bank.history).fit(z)
    assert single[0].estimate_ != single[1].estimate_  # the setting: the components disagree
    assert both.estimate_ == pytest.approx(0.5 * (single[0].estimate_ + single[1].estimate_), abs=1e-12)
    assert both.scale_ == pytest.approx(0.5 * (single[0].scale_ + single[1].scale_), abs=1e-12)
    # weight one on a component is that component, interval included
    first = _estimator(AveragedPredictor([afm, gp], weights=[1.0, 0.0])).calibrate(bank.history).fit(z)
    assert first.estimate_ == single[1].estimate_ and first.conf_int() == single[1].conf_int()


def test_refuses_bad_components_and_weights(bank):
    with pytest.raises(TypeError, match="non-empty list of predictors"):
        AveragedPredictor([]).fit(bank.history)
    with pytest.raises(ValueError, match="2 non-negative numbers"):
        AveragedPredictor([AbilityFactorModel(), AbilityFactorModel()], weights=[1.0, -1.0]).fit(bank.history)
    with pytest.raises(ValueError, match="2 non-negative numbers"):
        AveragedPredictor([AbilityFactorModel(), AbilityFactorModel()], weights=[1.0]).fit(bank.history)
