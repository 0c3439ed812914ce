"""Self-configuration from the history (issues 16 and 18): the choice is made on validation
models held out of the history, falls back to the sample mean when no predictor helps, and the
returned estimator is what the report says."""

import numpy as np
import pytest

import faqstats as fq
from faqstats.configure import configure_from_history


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=160, n_questions=100, n_components=3, random_state=0)


class Contrarian(fq.GaussianProcessSurrogate):
    """Predicts the opposite of the history's question means and never learns (a useless predictor)."""

    def fit(self, X, y=None):
        super().fit(X)
        self.question_means_ = 1.0 - self.question_means_
        self.noise_ = self.noise_ * 1e9
        return self


def test_a_predictor_that_helps_is_chosen_and_refitted_on_the_whole_history(bank):
    cfg = configure_from_history(bank.history, 25, n_runs=200, random_state=0)
    assert set(cfg.table["candidate"]) == {"factor", "gp"} and cfg.choice in ("factor", "gp")
    assert cfg.predicted_ess == cfg.table["predicted_ess"].max() > 1
    est = cfg.estimator
    assert est.step_weights is not None and est.step_weights.shape == (25,)
    assert est.factor_model.n_features_in_ == 100 and "Chosen:" in str(cfg)
    # refitted on the whole history, not the training part of the split
    again = type(est.factor_model)(**est.factor_model.get_params()).fit(bank.history)
    np.testing.assert_allclose(est.factor_model.question_factors_, again.question_factors_)
    assert est.set_params(random_state=0).fit(bank.new_outcomes[0]).n_queries_ == 25


def test_no_helpful_predictor_falls_back_to_the_sample_mean(bank):
    cfg = configure_from_history(bank.history, 25, candidates={"contrarian": Contrarian()}, n_runs=200)
    assert cfg.choice == "sample-mean" and cfg.predicted_ess == 1.0
    assert cfg.table["predicted_ess"].iloc[0] < 1
    est = cfg.estimator.set_params(random_state=0).fit(bank.new_outcomes[0])
    assert est.result_.method == "sample_mean" and "sample mean is used" in str(cfg).replace("\n", " ")


def test_tiny_history_gets_the_safe_choice_with_a_message():
    H = np.array([[1, 0, 1, 0, 1], [0, 1, 1, 0, 0], [1, 1, np.nan, 0, 1]], dtype=float)
    with pytest.warns(RuntimeWarning, match="no predictor can be validated"):
        cfg = configure_from_history(H, 3)
    assert cfg.choice == "sample-mean" and cfg.table.empty
    with pytest.raises(ValueError, match="budget"):
        configure_from_history(H, 9)
