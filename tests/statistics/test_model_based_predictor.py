"""The ability factor model: its fit's score equations, and a new model above the history moving its estimate."""

import numpy as np
import pytest
from scipy.special import expit

import faqstats as fq
from faqstats.model_based import ModelBasedEstimator
from faqstats.model_based_predictor import AbilityFactorModel


def _two_pl_bank(seed=0, n_models=40, n_questions=150, new_ability=3.0):
    """A 2PL bank: history abilities in [-2, 0.5], one new model at ``new_ability`` (far above them)."""
    rng = np.random.default_rng(seed)
    c, a = rng.normal(0.0, 1.5, n_questions), rng.uniform(0.5, 1.5, n_questions)
    theta = rng.uniform(-2.0, 0.5, n_models)
    H = (rng.random((n_models, n_questions)) < expit(a * theta[:, None] + c)).astype(float)
    z = (rng.random(n_questions) < expit(a * new_ability + c)).astype(float)
    return H, z


def test_fit_solves_the_ability_score_equations():
    # at the penalised optimum d/d theta_i = 0: sum_j (z_ij - p_ij) = ability_regularization * theta_i, so each
    # history model's predicted total equals its observed total up to that (small) penalty
    H, _ = _two_pl_bank(seed=1, n_models=30, n_questions=60)
    H[0, :5] = np.nan  # a missing cell is left out of its row's equation
    fm = AbilityFactorModel(n_components=2, ability_regularization=0.01).fit(H)
    P = fm.predict_proba(fm.model_factors_)
    seen = ~np.isnan(H)
    residual = np.where(seen, H - P, 0.0).sum(axis=1)
    np.testing.assert_allclose(residual, 0.01 * fm.abilities_, atol=2e-3)
    assert fm.prior_cov_.shape == (4, 4) and fm.prior_cov_[1, 1] == 0.0 and fm.prior_mean_[1] == 1.0
    np.testing.assert_array_equal(fm.question_factors_[:, 0], 1.0)  # the ability's unit loading


def test_rank_zero_is_the_rasch_model():
    H, _ = _two_pl_bank(seed=2, n_models=25, n_questions=40)
    fm = AbilityFactorModel(n_components=0).fit(H)
    assert fm.question_factors_.shape == (40, 2)
    logits = fm.model_factors_ @ fm.question_factors_.T
    np.testing.assert_allclose(logits, fm.abilities_[:, None] + fm.intercepts_, atol=1e-12)


def test_a_model_far_above_the_history_gets_an_estimate_above_the_history_best():
    H, z = _two_pl_bank()
    best = H.mean(axis=1).max()
    assert z.mean() > best + 0.2  # the setting: a frontier model
    estimates = {}
    for name, predictor in [("ability", AbilityFactorModel(n_components=2)), ("gp", fq.GaussianProcessSurrogate(noise_floor=0.1))]:
        est = ModelBasedEstimator(predictor=predictor, budget=30, n_folds=4, random_state=0, verbose=False)
        est.calibrate(H)
        estimates[name] = np.array([est.set_params(random_state=s).fit(z).estimate_ for s in range(5)])
    assert (estimates["ability"] > best).all()
    # negative control: the surrogate's estimate stays near the history (what the ability term fixes)
    assert estimates["gp"].mean() < best + 0.03 < estimates["ability"].mean()


def test_refuses_bad_parameters():
    H, _ = _two_pl_bank(seed=3, n_models=10, n_questions=20)
    with pytest.raises(ValueError, match="regularization"):
        AbilityFactorModel(regularization=0.0).fit(H)
    with pytest.raises(TypeError, match="n_components"):
        AbilityFactorModel(n_components=1.5).fit(H)
    with pytest.raises(ValueError, match="at least 2 history models"):
        AbilityFactorModel().fit(H[:1])


def test_runs_in_pai():
    bank = fq.make_synthetic_bank(n_models=40, n_questions=50, n_components=2, random_state=0)
    fm = AbilityFactorModel(n_components=2).fit(bank.history)
    assert fq.PAIEstimator(fm, budget=12, random_state=0).fit(bank.new_outcomes[0]).n_queries_ == 12


def test_it_is_saved_as_its_factor_model_and_runs_the_same_after_loading(tmp_path):
    bank = fq.make_synthetic_bank(n_models=40, n_questions=30, n_new=1, n_components=2, random_state=0)
    afm = AbilityFactorModel(n_components=1).fit(bank.history)
    fq.save_factor_model(afm, tmp_path / "afm.npz")
    back = fq.load_factor_model(tmp_path / "afm.npz")
    assert isinstance(back, fq.LogisticFactorModel)
    np.testing.assert_array_equal(back.question_factors_, afm.question_factors_)
    z = bank.new_outcomes[0]
    direct = fq.PAIEstimator(afm, budget=10, random_state=0).fit(z)
    assert fq.PAIEstimator(back, budget=10, random_state=0).fit(z).estimate_ == direct.estimate_
    # a session stores it as that factor model: created, answered, reloaded, the estimator's numbers
    ids = [f"q{j}" for j in range(30)]
    session = fq.EvaluationSession.create(tmp_path / "session", afm, ids, budget=10, random_state=0)
    while not session.done:
        asked = session.next_questions().ids
        session.record(asked, [float(z[ids.index(i)]) for i in asked])
    assert fq.EvaluationSession.load(tmp_path / "session").result().estimate == direct.estimate_
