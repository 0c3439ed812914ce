"""The ability factor model's group abilities: one group is the single ability, the fit's score equations per group,
and a new model strong in one group and weak in another followed per group (which a single ability cannot)."""

import numpy as np
import pytest
from scipy.special import expit

import faqstats as fq
from faqstats.model_based_predictor import AbilityFactorModel


def _two_group_bank(seed=0, n_models=40, per_group=40, new=(2.0, -2.0)):
    """Rasch bank with two groups of questions and independent group abilities; one new model at ``new``."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(["a", "b"], per_group)
    c = rng.normal(0.0, 1.0, 2 * per_group)
    onehot = (groups[:, None] == np.array(["a", "b"])).astype(float)
    theta = rng.normal(0.0, 1.0, (n_models, 2))
    H = (rng.random((n_models, 2 * per_group)) < expit(theta @ onehot.T + c)).astype(float)
    z = (rng.random(2 * per_group) < expit(np.asarray(new) @ onehot.T + c)).astype(float)
    return H, z, groups


def _predicted_group_means(model, z, groups):
    """The posterior's mean prediction per group after every answer of ``z``."""
    post = model.posterior()
    for j, y in enumerate(z):
        post.update(j, float(y))
    p = np.asarray(post.predictions)
    return np.array([p[groups == g].mean() for g in ("a", "b")])


def test_one_group_is_the_single_ability():
    H, _, groups = _two_group_bank(seed=1, n_models=20, per_group=15)
    single = AbilityFactorModel(n_components=2).fit(H)
    one = AbilityFactorModel(n_components=2, groups=["x"] * H.shape[1]).fit(H)
    for name in ("question_factors_", "model_factors_", "prior_mean_", "prior_cov_", "abilities_"):
        np.testing.assert_array_equal(getattr(one, name), getattr(single, name))
    assert one.group_abilities_.shape == (20, 1) and one.groups_.tolist() == ["x"]


def test_group_factors_shapes_and_score_equations():
    H, _, groups = _two_group_bank(seed=2, n_models=30, per_group=25)
    H[0, :4] = np.nan
    fm = AbilityFactorModel(n_components=1, groups=groups, ability_regularization=0.01, group_regularization=2.0)
    fm.fit(H)
    assert fm.question_factors_.shape == (50, 4) and fm.model_factors_.shape == (30, 4)
    np.testing.assert_array_equal(fm.question_factors_[:, :2], (groups[:, None] == ["a", "b"]).astype(float))
    assert fm.prior_mean_[2] == 1.0 and np.all(fm.prior_cov_[2] == 0.0) and np.all(fm.prior_cov_[:, 2] == 0.0)
    np.testing.assert_array_equal(fm.model_factors_[:, :2], fm.group_abilities_)
    # at the penalised optimum: per model, the residuals of a group sum to group_regularization * d_ig, and all
    # residuals to ability_regularization * theta_i
    R = np.where(np.isnan(H), 0.0, H - fm.predict_proba(fm.model_factors_))
    deviations = fm.group_abilities_ - fm.abilities_[:, None]
    for g, label in enumerate(["a", "b"]):
        np.testing.assert_allclose(R[:, groups == label].sum(1), 2.0 * deviations[:, g], atol=3e-3)
    np.testing.assert_allclose(R.sum(1), 0.01 * fm.abilities_, atol=3e-3)


def test_a_model_strong_in_one_group_and_weak_in_the_other_is_followed_per_group():
    H, z, groups = _two_group_bank(seed=3)
    with_groups = _predicted_group_means(AbilityFactorModel(n_components=0, groups=groups).fit(H), z, groups)
    single = _predicted_group_means(AbilityFactorModel(n_components=0).fit(H), z, groups)
    observed = np.array([z[groups == g].mean() for g in "ab"])
    assert observed[0] - observed[1] > 0.4  # the setting: far apart
    # the group abilities follow each group's answers; one ability predicts the two groups' average level
    np.testing.assert_allclose(with_groups, observed, atol=0.08)
    assert np.abs(single - observed).min() > 0.25


def test_refuses_groups_of_the_wrong_length():
    H, _, groups = _two_group_bank(seed=4, n_models=10, per_group=10)
    with pytest.raises(ValueError, match="one label per question"):
        AbilityFactorModel(groups=groups[:-1]).fit(H)
    with pytest.raises(ValueError, match="group_regularization"):
        AbilityFactorModel(groups=groups, group_regularization=0.0).fit(H)


def test_group_model_is_saved_as_its_factor_model(tmp_path):
    H, z, groups = _two_group_bank(seed=5, n_models=25, per_group=15)
    fm = AbilityFactorModel(n_components=1, groups=groups).fit(H)
    fq.save_factor_model(fm, tmp_path / "afm.npz")
    back = fq.load_factor_model(tmp_path / "afm.npz")
    np.testing.assert_array_equal(back.question_factors_, fm.question_factors_)
    direct = fq.PAIEstimator(fm, budget=10, random_state=0).fit(z)
    assert fq.PAIEstimator(back, budget=10, random_state=0).fit(z).estimate_ == direct.estimate_
