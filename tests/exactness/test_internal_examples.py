"""Internal helpers' behaviour that their docstring examples showed (the docstrings are now one-liners)."""

import numpy as np

from faqstats.model_based import prequential_residual, unasked_total_variance
from faqstats.posterior import FixedPredictions


def test_prequential_residual_is_the_standardised_sum_of_surprises():
    q = np.array([(1.0, 0.5), (1.0, 0.5)], dtype=[("outcome", float), ("prediction", float)])
    assert round(prequential_residual(q), 4) == 1.4142


def test_unasked_total_variance_without_factors_is_the_bernoulli_variance():
    post = FixedPredictions(np.array([0.5, 0.9, 0.2]))
    assert round(unasked_total_variance(post, np.array([True, True, False])), 6) == 0.34
