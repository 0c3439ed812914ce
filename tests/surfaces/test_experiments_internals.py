"""The experiments' internal helpers (methods.py, field.py): what their docstring examples showed."""

import numpy as np

import faqstats as fq
from faqstats.experiments.field import FieldRun, ModelBased, normal_interval
from faqstats.experiments.methods import (MethodSpec, OraclePredictors, build_method, check_methods, fit_factor_model,
                                         method_spec, predictor_kind, prepare_methods)
from faqstats.sampling import UniformSampler


def test_method_names():
    # samplers compare by their repr, as the docstring examples did
    spec = MethodSpec("uniform-fpc", UniformSampler, predictor=None)
    assert repr(spec("a factor model")) == "(None, UniformSampler())"
    assert repr(build_method("aipw-min:tau=0.05", None)) == "(None, BernoulliAIPW(score='min', tau=0.05))"
    assert method_spec("aipw-min:tau=0.05").weights == "default"
    assert (predictor_kind("gp-equal"), predictor_kind("faq")) == ("gp", None)
    assert check_methods("faq") == ["faq"]


def test_fitting_helpers():
    bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_components=2, random_state=0)
    fm, _ = fit_factor_model({"n_components": 2, "max_iter": 50}, bank.history, False)
    assert fm.question_factors_.shape == (40, 2)
    assert fit_factor_model(fm, bank.history, False) == (fm, 0.0)  # already fitted: as is
    specs = prepare_methods(["uniform-fpc"], [8], bank.history, None, {}, 0.05, 0, None, None, False)[0]
    assert repr(specs) == "{('uniform-fpc', 8): (None, UniformSampler(), None)}"
    assert OraclePredictors(["model 0's", "model 1's"]).predictors[1] == "model 1's"


def test_field_helpers():
    assert [round(float(bound), 4) for bound in normal_interval(0.5, 0.1, 0.05)] == [0.304, 0.696]
    assert FieldRun(0.5, np.nan, np.nan, np.nan, np.array([3, 1])).n_queries == 2
    bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_new=1, n_components=2, random_state=0)
    method = ModelBased(max_calibration_models=30).fit(bank.history)
    run = method.run(bank.new_outcomes[0], budget=8, random_state=1)
    assert run.n_queries == 8 and run.low <= run.estimate <= run.high and sorted(method.estimators_) == [8]
    method.run(bank.new_outcomes[0], budget=12, random_state=1)  # another budget: the same folds' fits
    alone = fq.ModelBasedEstimator(budget=12, max_calibration_models=30, random_state=0, verbose=False)
    assert method.estimators_[12].calibration_.equals(alone.calibrate(bank.history).calibration_)
    assert method.estimators_[12].predictor_ is method.estimators_[8].predictor_
