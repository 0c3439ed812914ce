"""A predictor written outside faqstats (a ``faqstats.Predictor`` with only ``fit`` and ``posterior``) runs
everywhere a predictor is taken: the estimator, the paired estimator, the batched engine (the same draws),
step weights, self-configuration; with its save pair also sessions and model files. The registry refuses a
name clash; a predictor without the save pair is refused with an error saying what to add."""

import json
import warnings

import numpy as np
import pytest
from sklearn.base import clone

import faqstats as fq
from faqstats.batched import simulate
from faqstats.io import array_sha256
from faqstats.predictor import predictor_class, register_predictor
from tests.exactness.test_unbiasedness import assert_exact_with_predictor


class MeansPosterior:
    """Per-question history means; every answer moves all predictions toward it (clipped)."""

    def __init__(self, means, step):
        self.predictions = np.array(means, dtype=float)
        self.step = step

    def update(self, question, outcome):
        shift = self.step * (outcome - self.predictions[question])
        self.predictions = np.clip(self.predictions + shift, 0.02, 0.98)
        self.predictions[question] = outcome


class HistoryMeans(fq.Predictor):
    """The tiny predictor of this module: only fit and posterior."""

    def __init__(self, step=0.2):
        self.step = step

    def fit(self, X, y=None):
        X = np.asarray(X, dtype=float)
        self.means_ = np.clip(np.nan_to_num(np.nanmean(X, axis=0), nan=0.5), 0.05, 0.95)
        self.n_features_in_ = X.shape[1]
        return self

    def posterior(self, dtype="float64", predict_every=1):
        return MeansPosterior(self.means_, self.step)


@register_predictor(name="test-saved-history-means")
class SavedHistoryMeans(HistoryMeans):
    """The same with the save pair."""

    def get_arrays(self):
        return {"means": self.means_}, {"version": 1}

    @classmethod
    def from_arrays(cls, arrays, params):
        if params.get("version") != 1:
            raise ValueError("unknown version")
        model = cls()
        model.means_ = np.asarray(arrays["means"], dtype=float)
        model.n_features_in_ = model.means_.size
        return model


@register_predictor(name="test-entries-logits")
class EntriesLogits(HistoryMeans):
    """The same saved through the fuller entries the built-ins use: its means as logits, within the value bound."""

    def fit(self, X, y=None):
        super().fit(X)
        self.logits_ = np.log(self.means_ / (1.0 - self.means_))
        return self

    def get_entries(self, saver):
        fields = {"estimator": "test-entries-logits", "params": saver.json(self.get_params(), "params"),
                  "n_questions": self.n_features_in_}
        return fields, {"logits": saver.float(self, "logits_", bound=1)}

    @classmethod
    def from_entries(cls, entries, fields):
        model = cls()
        entries.set_params(model, fields["params"])
        model.logits_ = entries.float("logits", (entries.n_questions,), bound=1)
        model.means_ = 1.0 / (1.0 + np.exp(-model.logits_))
        return model


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=50, n_questions=40, n_new=3, n_components=2, random_state=0)


@pytest.fixture(scope="module")
def means(bank):
    return HistoryMeans().fit(bank.history)


def test_pai_with_the_custom_predictor_is_exactly_unbiased_by_enumeration():
    assert_exact_with_predictor(lambda trial, H: HistoryMeans(step=0.1 * (trial % 4)).fit(H), trials=6)


@pytest.mark.parametrize("sampler", [fq.HybridSampler(), fq.NeymanSampler(replace=True),
                                     fq.BernoulliAIPW(score="neyman")], ids=["hybrid", "neyman-replace", "stream"])
def test_estimator_and_batched_engine_make_the_same_draws(bank, means, sampler):
    rows = [0, 1, 2, 0]
    runs = simulate(bank.new_outcomes, [np.random.default_rng(s) for s in range(4)], predictor=means,
                    sampler=sampler, budget=12, rows=rows)
    for s, r in enumerate(rows):
        est = fq.PAIEstimator(predictor=means, sampler=sampler, budget=12,
                              random_state=np.random.default_rng(s)).fit(bank.new_outcomes[r])
        assert abs(runs.estimate[s] - est.estimate_) < 1e-10 and abs(runs.std_error[s] - est.std_error_) < 1e-10
    # the posterior moved: the predictions after the run are not the history means
    assert est.predictor is means and est.factor_model is means


def test_paired_estimator_step_weights_and_configuration_take_it(bank, means):
    z = bank.new_outcomes
    paired = fq.PairedPAIEstimator(predictor=means, budget=12, random_state=0).fit(z[0], z[1])
    assert -1 <= paired.conf_int()[0] <= paired.estimate_ <= paired.conf_int()[1] <= 1
    sw = fq.learn_step_weights(bank.history, predictor=HistoryMeans(), budget=10, n_runs=30, random_state=0)
    assert sw.weights.shape == (10,) and np.all(np.isfinite(sw.weights)) and isinstance(sw.predictor, HistoryMeans)
    cfg = fq.configure_from_history(bank.history, 10, candidates={"means": HistoryMeans()},
                                    policies={"hybrid": fq.HybridSampler()}, n_runs=30, random_state=0)
    assert list(cfg.table["candidate"]) == ["means"]
    assert cfg.estimator.fit(z[0]).n_queries_ == 10


def test_a_session_with_the_save_pair_resumes_with_the_estimators_draws(bank, tmp_path):
    model = SavedHistoryMeans().fit(bank.history)
    z = bank.new_outcomes[1]
    est = fq.PAIEstimator(predictor=model, budget=9, batch_size=2, random_state=3).fit(z)
    session = fq.EvaluationSession.create(tmp_path / "s", predictor=model, budget=9, batch_size=2, random_state=3)
    ids, _ = session.next_questions()
    session.record(ids, [z[i] for i in ids])
    session = fq.EvaluationSession.load(tmp_path / "s")  # resumed: the predictor read back by its registered name
    assert isinstance(session.predictor, SavedHistoryMeans)
    np.testing.assert_array_equal(session.predictor.means_, model.means_)
    while not session.done:
        ids, _ = session.next_questions()
        session.record(ids, [z[i] for i in ids])
    assert session.result() == est.result_
    loaded = fq.load_factor_model(fq.save_factor_model(model, tmp_path / "means"))
    assert type(loaded) is SavedHistoryMeans and loaded.metadata_["estimator"] == "test-saved-history-means"
    np.testing.assert_array_equal(loaded.means_, model.means_)


def test_without_the_save_pair_sessions_and_files_say_what_to_add(means, tmp_path):
    with pytest.raises(TypeError, match="define get_arrays.*from_arrays"):
        fq.save_factor_model(means, tmp_path / "m")
    with pytest.raises(TypeError, match="needs a predictor it can save.*get_arrays"):
        fq.EvaluationSession.create(tmp_path / "s", means, budget=5)
    assert not (tmp_path / "s").exists() and not (tmp_path / "m.npz").exists()

    class Unregistered(SavedHistoryMeans):
        pass

    with pytest.raises(TypeError, match="register its class with faqstats.register_predictor"):
        fq.save_factor_model(Unregistered().fit(np.eye(3)), tmp_path / "m")


def test_an_edited_saved_predictor_is_refused(bank, tmp_path):
    path = fq.save_factor_model(SavedHistoryMeans().fit(bank.history), tmp_path / "means")
    with np.load(path) as data:
        entries = {k: data[k] for k in data.files}
    entries["arrays.means"] = entries["arrays.means"] * 0.5
    np.savez(path, **entries)
    with pytest.raises(ValueError, match="'arrays.means' differs from the SHA-256"):
        fq.load_factor_model(path)


def test_entries_of_your_own_are_saved_as_the_built_ins_are_inside_a_stack_and_bounded(bank, tmp_path):
    parts = [("logits", EntriesLogits(step=0.3)), ("pair", SavedHistoryMeans())]
    stack = fq.StackedPredictor(parts, n_paths=5).fit(bank.history)
    path = fq.save_factor_model(stack, tmp_path / "stack")
    loaded = fq.load_factor_model(path)
    part = loaded.estimators_[0]
    assert type(part) is EntriesLogits and part.step == 0.3 and type(loaded.estimators_[1]) is SavedHistoryMeans
    np.testing.assert_allclose(part.means_, stack.estimators_[0].means_, rtol=1e-12)
    with np.load(path) as data:
        entries = {k: data[k] for k in data.files}
    assert {"component0.logits", "component1.arrays.means"} <= set(entries)
    far = EntriesLogits().fit(bank.history)
    far.logits_[0] = 2e6  # beyond the value bound: refused on save, and on load when edited in by hand
    with pytest.raises(ValueError, match=r"Refusing to save: logits_ has values beyond \+-1e\+06"):
        fq.save_factor_model(far, tmp_path / "far")
    entries["component0.logits"][0] = 2e6
    meta = json.loads(entries["metadata_json"].tobytes())
    meta["array_sha256"] = {k: array_sha256(v) for k, v in entries.items() if k != "metadata_json"}
    entries["metadata_json"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(path, **entries)
    with pytest.raises(ValueError, match=r"stack\.npz: 'component0.logits' has 1 value\(s\) beyond \+-1e\+06"):
        fq.load_factor_model(path)


def test_the_registry_refuses_a_name_clash_and_finds_classes_by_name():
    assert predictor_class("test-saved-history-means") is SavedHistoryMeans
    assert register_predictor(SavedHistoryMeans, name="test-saved-history-means") is SavedHistoryMeans  # again: fine
    with pytest.raises(ValueError, match="'LogisticFactorModel' is taken by faqstats.factor_model"):
        register_predictor(HistoryMeans, name="LogisticFactorModel")
    with pytest.raises(ValueError, match="already registered as 'test-saved-history-means'"):
        register_predictor(SavedHistoryMeans, name="another-name")
    with pytest.raises(ValueError, match="no predictor is registered as 'nothing'"):
        predictor_class("nothing")
    with pytest.raises(TypeError, match="needs fit and posterior"):
        register_predictor(dict, name="test-not-a-predictor")


def test_factor_model_keyword_still_works_with_a_future_warning(bank, means):
    z = bank.new_outcomes[0]
    with pytest.warns(FutureWarning, match="factor_model= is renamed predictor="):
        old = fq.PAIEstimator(factor_model=means, budget=8, random_state=0)
    assert old.fit(z).estimate_ == fq.PAIEstimator(means, budget=8, random_state=0).fit(z).estimate_
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        copy = clone(old)  # scikit-learn's clone and get_params: no warning
        assert "factor_model" not in copy.get_params() and isinstance(copy.predictor, HistoryMeans)
    with pytest.warns(FutureWarning):
        runs = simulate(bank.new_outcomes, [np.random.default_rng(0)], factor_model=means, budget=8)
    assert abs(runs.estimate[0] - old.estimate_) < 1e-10
    with pytest.warns(FutureWarning):
        assert old.set_params(factor_model=None).predictor is None
    with pytest.raises(TypeError, match="pass predictor= only"):
        fq.PAIEstimator(means, factor_model=means)
    with pytest.raises(TypeError, match="unexpected keyword"):
        fq.PAIEstimator(means, predicter=means)


def test_the_default_score_is_the_held_out_log_likelihood(bank):
    class Fixed(HistoryMeans):  # predictions that no answer moves: the score is a plain log-likelihood
        def posterior(self, dtype="float64", predict_every=1):
            return fq.posterior.FixedPredictions(self.means_)

    model = Fixed().fit(bank.history)
    Z = bank.new_outcomes
    seen = np.random.default_rng(0).random(Z.shape) < 0.5  # the learned half (seed 0: no random_state)
    p = np.broadcast_to(model.means_, Z.shape)[~seen]
    expected = np.mean(Z[~seen] * np.log(p) + (1 - Z[~seen]) * np.log1p(-p))
    assert model.score(Z) == pytest.approx(expected, rel=1e-12)


def test_a_stack_with_a_component_of_your_own_runs_batched_and_saves(bank, tmp_path):
    stack = fq.StackedPredictor([("means", SavedHistoryMeans()), ("mixture", fq.HistoryMixture())],
                                n_paths=10).fit(bank.history)
    runs = simulate(bank.new_outcomes, [np.random.default_rng(s) for s in range(2)], predictor=stack, budget=10)
    for s in range(2):
        est = fq.PAIEstimator(stack, budget=10, random_state=np.random.default_rng(s)).fit(bank.new_outcomes[s])
        assert abs(runs.estimate[s] - est.estimate_) < 1e-10
    loaded = fq.load_factor_model(fq.save_factor_model(stack, tmp_path / "stack"))
    assert isinstance(loaded.estimators_[0], SavedHistoryMeans)
    np.testing.assert_array_equal(loaded.posterior().predictions, stack.posterior().predictions)


def test_a_saved_configuration_of_your_own_predictor_starts_a_session(bank, tmp_path):
    cfg = fq.configure_from_history(bank.history, 8, candidates={"means": SavedHistoryMeans(step=0.3)},
                                    policies={"hybrid": fq.HybridSampler()}, n_runs=20, random_state=0)
    assert cfg.choice == "means"  # (seeded) it beats the sample mean on this bank
    path = fq.save_configuration(cfg, tmp_path / "cfg")
    session = fq.EvaluationSession.from_configuration(path, random_state=1)
    assert isinstance(session.predictor, SavedHistoryMeans) and session.predictor.step == 0.3
