"""Stacked predictors and the history mixture (issue 18): PAI with them is exactly unbiased, the
estimator and the batched engine make the same draws, every path that takes a predictor takes them
(paired estimator, step weights, self-configuration), and what cannot take them says so."""

import numpy as np
import pytest
from sklearn.base import clone

import faqstats as fq
from faqstats.batched import simulate
from faqstats.configure import configure_from_history
from faqstats.posterior import FixedPredictions
from faqstats.stacking import STACK_STEPS, StackedPosterior
from tests.exactness.test_unbiasedness import assert_exact_with_predictor


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=90, n_questions=80, n_new=3, n_components=3, random_state=0)


@pytest.fixture(scope="module")
def stack(bank):
    return fq.StackedPredictor(n_paths=60).fit(bank.history)


def test_pai_with_a_stack_is_exactly_unbiased_with_exact_variance_by_enumeration():
    def fit(trial, H):
        parts = [("gp", fq.GaussianProcessSurrogate(n_components=2)), ("mixture", fq.HistoryMixture())]
        if trial % 3 == 0:
            parts.append(("irt", fq.ItemResponseModel(model="rasch")))
        return fq.StackedPredictor(parts, n_paths=8, random_state=trial).fit(H)

    assert_exact_with_predictor(fit, trials=6)


def test_pai_with_the_history_mixture_is_exactly_unbiased_by_enumeration():
    assert_exact_with_predictor(lambda trial, H: fq.HistoryMixture(smoothing=0.1 + 0.1 * (trial % 3)).fit(H),
                                trials=6, graded_history=True)


def test_weights_are_convex_by_answer_count_and_the_posterior_combines_its_components(bank, stack):
    assert stack.steps_[0] == 0 and set(stack.steps_) <= set(STACK_STEPS)
    assert np.all(stack.weights_ >= 0) and np.allclose(stack.weights_.sum(1), 1.0)
    # the stack's validation error is never above the best component's in a range (it may pick it alone)
    assert np.all(stack.validation_mse_[:, -1] <= stack.validation_mse_[:, :-1].min(1) + 1e-9)
    post, parts = stack.posterior(), [est.posterior() for est in stack.estimators_]
    z = bank.new_outcomes[0]
    for n, j in enumerate(range(30)):
        w = stack.weights_at(n)
        np.testing.assert_allclose(post.predictions, sum(wk * p.predictions for wk, p in zip(w, parts)), atol=1e-12)
        post.update(j, z[j])
        for p in parts:
            p.update(j, z[j])
    assert post.n_answers == 30
    # on a schedule: the predictions move only after every third answer
    slow = stack.posterior(predict_every=3)
    before = slow.predictions
    slow.update(0, 1.0)
    slow.update(1, 0.0)
    assert slow.predictions is before
    slow.update(2, 1.0)
    assert slow.predictions is not before


def test_the_history_mixture_learns_which_models_the_new_one_is_like():
    H = np.array([[1, 1, 1, 1, 0, 0.0], [0, 0, 0, 0, 1, 1], [1, 0, 1, 0, 1, 0]] * 5)
    mix = fq.HistoryMixture(smoothing=0.1, temperature=1.0).fit(H)
    post = mix.posterior()
    for j in range(3):  # answers like the first kind of model
        post.update(j, H[0, j])
    assert post.predictions[3] > 0.8 and post.predictions[4] < 0.2
    np.testing.assert_allclose(mix.predict(np.array([[1, 1, 1, np.nan, np.nan, np.nan]]))[0], post.predictions,
                               atol=1e-12)
    assert mix.score(H) > np.log(0.5)  # better than a coin's log-likelihood
    means = fq.HistoryMixture(smoothing=0.1, target="means").fit(H)  # smoothed toward the question means
    np.testing.assert_allclose(means.profiles_, 0.9 * H + 0.1 * means.question_means_, atol=1e-9)
    assert np.all((mix.profiles_ > 0) & (mix.profiles_ < 1))


@pytest.mark.parametrize("predict_every", [1, 4])
@pytest.mark.parametrize("sampler", [fq.HybridSampler(), fq.NeymanSampler(replace=True),
                                     fq.UniformSampler(replace=False)], ids=["hybrid", "neyman-replace", "uniform"])
def test_estimator_and_batched_engine_agree(bank, stack, sampler, predict_every):
    outcomes, rows = bank.new_outcomes, [0, 1, 2, 0]
    weights = np.linspace(1, 2, 20)
    for model in (stack, fq.HistoryMixture().fit(bank.history)):
        runs = simulate(outcomes, [np.random.default_rng(s) for s in range(4)], predictor=model, sampler=sampler,
                        budget=20, rows=rows, predict_every=predict_every, step_weights=weights, keep_increments=True)
        for s, r in enumerate(rows):
            est = fq.PAIEstimator(model, sampler, budget=20, random_state=np.random.default_rng(s),
                                  predict_every=predict_every, step_weights=weights).fit(outcomes[r])
            assert abs(runs.estimate[s] - est.estimate_) < 1e-10 and abs(runs.std_error[s] - est.std_error_) < 1e-10
            np.testing.assert_allclose(runs.increments[s], est.queries_["increment"], atol=1e-10)


def test_the_stream_design_takes_a_stack(bank, stack):
    sampler = fq.BernoulliAIPW(score="neyman")
    runs = simulate(bank.new_outcomes, [np.random.default_rng(s) for s in range(3)], predictor=stack,
                    sampler=sampler, budget=20)
    for s in range(3):
        est = fq.PAIEstimator(stack, sampler, budget=20, random_state=np.random.default_rng(s)).fit(
            bank.new_outcomes[s])
        assert abs(runs.estimate[s] - est.estimate_) < 1e-10


def test_paired_estimator_step_weights_and_configuration_take_it(bank, stack):
    z = bank.new_outcomes
    paired = fq.PairedPAIEstimator(stack, budget=20, random_state=0).fit(z[0], z[1])
    assert -1 <= paired.conf_int()[0] <= paired.estimate_ <= paired.conf_int()[1] <= 1
    sw = fq.learn_step_weights(bank.history, fq.StackedPredictor(n_paths=30), budget=15, n_runs=40, random_state=0)
    assert sw.weights.shape == (15,) and np.all(np.isfinite(sw.weights))
    candidates = {"gp": fq.GaussianProcessSurrogate(n_components=4), "stack": fq.StackedPredictor(n_paths=30),
                  "stack-2": fq.StackedPredictor(n_paths=31)}
    cfg = configure_from_history(bank.history, 15, candidates=candidates, policies={"hybrid": fq.HybridSampler()},
                                 n_runs=40, random_state=0)
    assert set(cfg.table["candidate"]) == {"gp", "stack", "stack-2"}  # two stacks are never merged as one fit
    assert cfg.estimator.fit(z[0]).n_queries_ == 15


def test_clear_errors(bank, stack, tmp_path):
    with pytest.raises(ValueError, match="not fitted"):  # saved and sessions take them (issue 18), fitted
        fq.EvaluationSession.create(tmp_path / "session", fq.StackedPredictor(), budget=10)
    with pytest.raises(ValueError, match="needs a fitted predictor with question factors"):
        fq.PAIEstimator(stack, fq.VarianceReductionSampler(), budget=10, random_state=0).fit(bank.new_outcomes[0])
    with pytest.raises(ValueError, match="needs a fitted factor model"):
        fq.PAIEstimator(stack, fq.ActiveLearningSampler(), budget=10, random_state=0).fit(bank.new_outcomes[0])
    with pytest.raises(ValueError, match="name, estimator"):
        fq.StackedPredictor([fq.HistoryMixture()]).fit(bank.history)
    with pytest.raises(TypeError, match="no posterior"):
        fq.StackedPredictor([("pca", __import__("sklearn.decomposition").decomposition.PCA())]).fit(bank.history)
    with pytest.raises(ValueError, match="complete history rows"):
        H = bank.history[:4].copy()
        H[:, 0] = np.nan
        fq.StackedPredictor().fit(H)
    with pytest.raises(ValueError, match="smoothing"):
        fq.HistoryMixture(smoothing=0).fit(bank.history)
    with pytest.raises(ValueError, match="target must be"):
        fq.HistoryMixture(target="pca").fit(bank.history)
    with pytest.raises(ValueError, match="temperature"):
        fq.HistoryMixture(temperature=-1).fit(bank.history)
    with pytest.raises(ValueError, match="one entry per question"):
        fq.PAIEstimator(stack, budget=5).fit(np.ones(7))
    with pytest.raises(ValueError, match="one row per step"):
        StackedPosterior([FixedPredictions([0.5])], [1], np.ones((1, 1)))


def test_sklearn_conventions(bank):
    stack = fq.StackedPredictor(n_paths=20)
    params = stack.get_params()
    assert stack.fit(bank.history) is stack and stack.get_params() == params
    assert clone(stack).get_params() == params and stack.n_features_in_ == bank.history.shape[1]
    again = fq.StackedPredictor(n_paths=20).fit(bank.history)  # deterministic given random_state
    np.testing.assert_array_equal(again.weights_, stack.weights_)
    mix = fq.HistoryMixture()
    assert clone(mix).get_params() == mix.get_params()
    assert mix.fit(bank.history).transform(bank.history[:3]).shape == (3, bank.history.shape[0])


def test_experiment_methods_stack_and_stack_equal():
    from faqstats.experiments import run_methods

    bank = fq.make_synthetic_bank(n_models=80, n_questions=60, n_new=3, n_components=2, random_state=1)
    runs = run_methods(bank.history, bank.new_outcomes, [12], seeds=2, methods=["stack", "stack-equal"],
                       step_weights={"n_runs": 40}, verbose=False)
    assert np.isfinite(runs.records["estimate"]).all() and set(runs.records["method"]) == {"stack", "stack-equal"}
    assert ("stack", 12) in runs.step_weights and ("stack-equal", 12) not in runs.step_weights
