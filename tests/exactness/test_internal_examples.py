"""Internal helpers' behaviour that their docstring examples showed (the docstrings are now one-liners)."""

import numpy as np

from faqstats._inference import census_mean, fpc_mean
from faqstats.estimands import WeightedAverage, as_estimand, group_census_means, stratified_allocation
from faqstats.model_based import prequential_residual, unasked_total_variance
from faqstats.posterior import FixedPredictions


def test_prequential_residual_is_the_standardised_sum_of_surprises():
    q = np.array([(1.0, 0.5), (1.0, 0.5)], dtype=[("outcome", float), ("prediction", float)])
    assert round(prequential_residual(q), 4) == 1.4142


def test_unasked_total_variance_without_factors_is_the_bernoulli_variance():
    post = FixedPredictions(np.array([0.5, 0.9, 0.2]))
    assert round(unasked_total_variance(post, np.array([True, True, False])), 6) == 0.34


def test_census_mean_is_correctly_rounded_and_fpc_mean_has_the_fpc_variance():
    assert census_mean([0.7, 0.1, 0.1, 0.1], 4) == 0.25  # np.mean gives 0.24999999999999997
    assert fpc_mean([1.0, 0.0, 1.0, 1.0], 8) == (0.75, 0.03125)


def test_group_census_means_and_weighted_estimand_equality():
    means = group_census_means(np.array([0.7, 0.1, 0.1, 0.1, 1.0]), np.array([0, 0, 0, 0, 1]), 2)
    assert means.tolist() == [0.25, 1.0]
    assert as_estimand([1, 1, 2, 0]) == WeightedAverage([0.25, 0.25, 0.5, 0.0])


def test_stratified_allocation_proportional_with_a_floor_and_an_even_share():
    assert stratified_allocation(np.array([10, 30, 60]), 20).tolist() == [2, 6, 12]
    assert stratified_allocation(np.array([10, 30, 60]), 20, min_group_share=0.6).tolist() == [5, 6, 9]


def test_default_candidates_and_policies():
    from faqstats.configure import default_candidates, default_policies

    assert list(default_candidates(1846, n_questions=693)) == ["factor", "gp", "gp-16", "gp-64", "stack"]
    assert list(default_candidates(16)) == ["factor", "gp", "gp-shrink-0.5", "gp-shrink-0.8"]
    assert repr(default_policies()) == ("{'hybrid': HybridSampler(), 'tau-0.25': HybridSampler(tau=0.25), "
                                        "'tau-1': HybridSampler(tau=1.0)}")


def test_markdown_table_right_aligns_numbers():
    import pandas as pd

    from faqstats.results import markdown_table

    table = markdown_table(pd.DataFrame({"method": ["faq"], "coverage": [0.95]}))
    assert table == "| method | coverage |\n|---|---:|\n| faq | 0.9500 |"


def test_isotonic_step_weights():
    from faqstats.step_weights import inverse_variance_weights

    w, v = inverse_variance_weights([4.0, 3.0, 3.5, 1.0])
    assert v.tolist() == [4.0, 3.25, 3.25, 1.0] and bool(np.all(np.diff(w) >= 0))
