"""Every predictor in every path (issues 16 and 18): stacks and history mixtures saved and loaded
without pickle, checked on load; sessions with them; configurations from the history saved whole
(``save_configuration``, ``faqstats fit-history --budget``) and run exactly as
``PAIEstimator.from_history`` by a session reloaded between rounds."""

import json
import zipfile

import numpy as np
import pytest

import faqstats as fq
from faqstats.cli import main
from faqstats.io import array_sha256, load_model_file
from faqstats.session import EvaluationSession

N = 60
IDS = [f"q{j}" for j in range(N)]


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny problems (conftest.py)


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=110, n_questions=N, n_new=2, n_components=3, random_state=0)


@pytest.fixture(scope="module")
def stack(bank):
    parts = [("gp", fq.GaussianProcessSurrogate(n_components=4)), ("mix", fq.HistoryMixture(smoothing=0.4)),
             ("irt", fq.ItemResponseModel(model="rasch")),
             ("inner", fq.StackedPredictor([("gp", fq.GaussianProcessSurrogate(n_components=2)),
                                            ("mix", fq.HistoryMixture(target="means"))], n_paths=10))]
    return fq.StackedPredictor(parts, n_paths=20, random_state=1).fit(bank.history)


def _answers(post, z, order):
    rows = [post.predictions.copy()]
    for j in order:
        post.update(j, z[j])
        rows.append(post.predictions.copy())
    return np.array(rows)


@pytest.mark.parametrize("kind", ["stack", "default-stack", "mixture"])
def test_round_trip_gives_identical_predictions_and_runs(kind, bank, stack, tmp_path):
    model = {"stack": stack, "default-stack": fq.StackedPredictor(n_paths=20).fit(bank.history),
             "mixture": fq.HistoryMixture(temperature=0.7).fit(bank.history)}[kind]
    path = fq.save_factor_model(model, tmp_path / "model", question_ids=IDS)
    loaded = fq.load_factor_model(path)
    assert type(loaded) is type(model) and loaded.question_ids_ == IDS
    assert loaded.metadata_["format_version"] == 2 and loaded.metadata_["estimator"] == type(model).__name__
    z, order = bank.new_outcomes[0], np.random.default_rng(0).permutation(N)[:25]
    np.testing.assert_array_equal(_answers(loaded.posterior(), z, order), _answers(model.posterior(), z, order))
    for seed in (0, 1):
        a = fq.PAIEstimator(model, fq.HybridSampler(tau=0.25), budget=20, random_state=seed).fit(z)
        b = fq.PAIEstimator(loaded, fq.HybridSampler(tau=0.25), budget=20, random_state=seed).fit(z)
        assert a.result_ == b.result_
        np.testing.assert_array_equal(a.queries_["question"], b.queries_["question"])
    if kind == "stack":  # the parameters come back too: a loaded stack refits like the saved one
        assert [name for name, _ in loaded.estimators] == ["gp", "mix", "irt", "inner"]
        assert loaded.get_params()["n_paths"] == 20 and loaded.weights_.tolist() == model.weights_.tolist()
    # saving what was loaded writes the same arrays (a session saves its model again)
    again = load_model_file(fq.save_factor_model(loaded, tmp_path / "again", question_ids=IDS))[1]
    assert again["array_sha256"] == loaded.metadata_["array_sha256"]


def test_a_session_with_a_stack_equals_the_estimator_and_resumes(bank, stack, tmp_path):
    z = bank.new_outcomes[1]
    est = fq.PAIEstimator(stack, fq.HybridSampler(), budget=18, batch_size=3, predict_every=2, random_state=4).fit(z)
    EvaluationSession.create(tmp_path / "s", stack, IDS, budget=18, batch_size=3, predict_every=2, random_state=4)
    while not (session := EvaluationSession.load(tmp_path / "s")).done:
        ids, _ = session.next_questions()
        session = EvaluationSession.load(tmp_path / "s")  # a new process between draw and answer
        session.record(ids, [z[int(q[1:])] for q in ids])
    assert isinstance(session.factor_model, fq.StackedPredictor)
    assert session.result() == est.result_
    np.testing.assert_array_equal(session.queries()["question"], est.queries_["question"])
    mixture = fq.HistoryMixture().fit(bank.history)  # a mixture, in memory
    session = EvaluationSession(mixture, IDS, budget=10, random_state=0)
    while not session.done:
        ids, _ = session.next_questions()
        session.record(ids, [z[int(q[1:])] for q in ids])
    assert session.result() == fq.PAIEstimator(mixture, budget=10, random_state=0).fit(z).result_


# ---------------------------------------------------------------- damage and hand edits
def _arrays(path):
    with np.load(path, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def _rewrite(path, rehash=False, **changes):
    arrays = _arrays(path) | changes
    meta = json.loads(arrays.pop("metadata_json").tobytes())
    if rehash:  # a careful hand edit: the hashes made to match
        meta["array_sha256"] = {key: array_sha256(arr) for key, arr in arrays.items()}
    arrays["metadata_json"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(path, **arrays)


def _edit_metadata(path, edit):
    arrays = _arrays(path)
    meta = json.loads(arrays["metadata_json"].tobytes())
    edit(meta)
    arrays["metadata_json"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(path, **arrays)


@pytest.fixture
def stack_file(stack, tmp_path):
    return fq.save_factor_model(stack, tmp_path / "stack.npz", question_ids=IDS)


def test_damaged_and_edited_stack_files_are_refused_naming_the_file(stack_file):
    arrays = _arrays(stack_file)
    w = arrays["component1.profiles"].copy()
    w[0, 0] = 0.5
    _rewrite(stack_file, **{"component1.profiles": w})
    with pytest.raises(ValueError, match=r"stack\.npz: entry 'component1.profiles' differs from the SHA-256"):
        fq.load_factor_model(stack_file)


@pytest.mark.parametrize("key, value, match", [
    ("component1.profiles", lambda a: np.where(a > 0.5, 1.0, a), r"'component1.profiles' must .* in \(0, 1\)"),
    ("component1.profiles", lambda a: a[:, :-1], r"'component1.profiles' has shape .* expected \(n, 60\)"),
    ("component0.noise", lambda a: -a, r"'component0.noise' must be positive"),
    ("component0.prior_cov", lambda a: a + np.triu(np.ones_like(a), 1), "'component0.prior_cov' is not symmetric"),
    ("weights", lambda a: a * 2, "must be convex weights"),
    ("steps", lambda a: a[::-1].copy(), "increasing integers starting at 0"),
    ("component3.component1.question_means", lambda a: a + np.nan, "non-finite"),
    ("component3.weights", lambda a: a.astype(np.float32)[:, :1], r"has shape .* expected"),
])
def test_hand_edited_entries_are_refused_even_with_matching_hashes(stack_file, key, value, match):
    _rewrite(stack_file, rehash=True, **{key: value(_arrays(stack_file)[key])})
    with pytest.raises(ValueError, match=match):
        fq.load_factor_model(stack_file)


def test_edited_metadata_and_truncated_files_are_refused(stack_file, tmp_path):
    _edit_metadata(stack_file, lambda m: m["components"][1]["params"].update(temperature=-1.0))
    with pytest.raises(ValueError, match=r"stack\.npz: invalid estimator parameters .*temperature"):
        fq.load_factor_model(stack_file)
    _edit_metadata(stack_file, lambda m: m.update(format_version=3))
    with pytest.raises(ValueError, match=r"newer faqstats \(format version 3 > 2\)"):
        fq.load_factor_model(stack_file)
    _edit_metadata(stack_file, lambda m: m.update(format_version=2, components=m["components"][:2]))
    with pytest.raises(ValueError, match="'weights' has shape"):
        fq.load_factor_model(stack_file)
    data = (tmp_path / "stack.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"cut\.npz"):
        fq.load_factor_model(tmp_path / "cut.npz")
    with zipfile.ZipFile(stack_file) as z:  # never pickle: an object array is refused
        assert all(not name.endswith(".pkl") for name in z.namelist())


# ---------------------------------------------------------------- configurations
@pytest.fixture(scope="module")
def configured(bank, tmp_path_factory):
    cfg = fq.configure_from_history(bank.history, 15, n_runs=60, random_state=2)
    path = fq.save_configuration(cfg, tmp_path_factory.mktemp("cfg") / "cfg", question_ids=IDS)
    return cfg, path


def _run_session(directory, z, reload=True):
    session = EvaluationSession.load(directory)
    while not session.done:
        ids, _ = session.next_questions()
        if reload:
            session = EvaluationSession.load(directory)
        session.record(ids, [z[int(str(q)[1:])] for q in ids])
        if reload:
            session = EvaluationSession.load(directory)
    return session


def test_a_saved_configuration_runs_exactly_as_from_history(bank, configured, tmp_path):
    cfg, path = configured
    loaded = fq.load_configuration(path)
    assert (loaded.choice, loaded.budget, loaded.predict_every) == (cfg.choice, 15, cfg.predict_every)
    assert loaded.table["candidate"].tolist() == cfg.table["candidate"].tolist()
    np.testing.assert_allclose(loaded.table["predicted_ess"], cfg.table["predicted_ess"])
    assert loaded.predicted_ess == cfg.predicted_ess
    assert repr(loaded.estimator.sampler) == repr(cfg.estimator.sampler)
    np.testing.assert_array_equal(loaded.estimator.step_weights, cfg.estimator.step_weights)
    z = bank.new_outcomes[0]
    for seed in (0, 5):
        ref = fq.PAIEstimator.from_history(bank.history, 15, n_runs=60, random_state=2)
        ref.set_params(random_state=seed, batch_size=2)
        ref.fit(z)
        loaded = fq.load_configuration(path).estimator.set_params(random_state=seed, batch_size=2)
        assert loaded.fit(z).result_ == ref.result_
        EvaluationSession.from_configuration(path, directory=tmp_path / f"s{seed}", batch_size=2, random_state=seed)
        session = _run_session(tmp_path / f"s{seed}", z)
        assert session.result() == ref.result_ and session.question_ids == IDS
        np.testing.assert_array_equal(session.queries()["question"], ref.queries_["question"])


def test_configuration_sessions_refuse_what_would_change_the_choice(configured, tmp_path):
    _, path = configured
    with pytest.raises(TypeError, match="sampler come"):
        EvaluationSession.from_configuration(path, sampler=fq.HybridSampler())
    with pytest.raises(ValueError, match="exceeds the configured budget 15"):
        EvaluationSession.from_configuration(path, budget=16)
    assert EvaluationSession.from_configuration(path, budget=10, random_state=0).budget == 10
    with pytest.raises(ValueError, match="without a configuration"):
        fq.load_configuration(fq.save_factor_model(fq.HistoryMixture().fit(np.eye(3)), tmp_path / "m"))


def test_edited_configurations_are_refused(configured, tmp_path):
    _, path = configured
    copy = tmp_path / "copy.npz"
    copy.write_bytes(path.read_bytes())
    _edit_metadata(copy, lambda m: m["configuration"]["policy"]["params"].update(tau=0.9))
    with pytest.raises(ValueError, match=r"copy\.npz: the saved configuration does not match its checksum"):
        fq.load_configuration(copy)
    copy.write_bytes(path.read_bytes())
    arrays = _arrays(copy)
    if "configuration.step_weights" in arrays:
        _rewrite(copy, rehash=True, **{"configuration.step_weights": -arrays["configuration.step_weights"]})
        with pytest.raises(ValueError, match="'configuration.step_weights' must be positive"):
            fq.load_configuration(copy)


def test_the_sample_mean_choice_is_saved_and_run(bank, tmp_path):
    H = bank.history.copy()
    H[np.arange(H.shape[0]), np.arange(H.shape[0]) % N] = np.nan  # no complete row: nothing to validate on
    with pytest.warns(RuntimeWarning, match="sample mean"):
        cfg = fq.configure_from_history(H, 12, random_state=0)
    assert cfg.choice == "sample-mean"
    with pytest.raises(ValueError, match="question_ids are needed"):
        fq.save_configuration(cfg, tmp_path / "none")
    path = fq.save_configuration(cfg, tmp_path / "mean", question_ids=IDS)
    with pytest.raises(ValueError, match="holds no predictor"):
        fq.load_factor_model(path)
    z = bank.new_outcomes[1]
    with pytest.warns(RuntimeWarning):
        ref = fq.PAIEstimator.from_history(H, 12, random_state=7).fit(z)
    EvaluationSession.from_configuration(path, directory=tmp_path / "s", batch_size=5, random_state=7)
    session = _run_session(tmp_path / "s", z)
    assert session.factor_model is None and session.result() == ref.result_
    assert session.status()["sampler"]["class"] == "UniformSampler"


# ---------------------------------------------------------------- the command line
def _cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_fit_history_budget_saves_the_configuration_and_sessions_run_it(bank, tmp_path, capsys):
    history = tmp_path / "history.npz"
    np.savez(history, outcomes=np.where(np.isnan(bank.history), -1, bank.history).astype(np.int8), items=np.array(IDS))
    code, out, err = _cli(capsys, "fit-history", "--data", history, "--budget", 0.25, "--runs", 60, "--seed", 2,
                          "--out", tmp_path / "cfg", "--quiet")
    assert code == 0, err
    assert "faqstats configuration from the history" in out and "Chose " in out
    assert (tmp_path / "cfg.validation.csv").read_text().startswith("candidate,predictor,policy,predicted_ess")
    cfg = fq.load_configuration(tmp_path / "cfg.npz")
    assert cfg.budget == 15 and cfg.estimator.factor_model.question_ids_ == IDS
    z = bank.new_outcomes[0]
    ref = fq.PAIEstimator.from_history(bank.history, 15, n_runs=60, random_state=2).set_params(batch_size=3).fit(z)
    code, out, err = _cli(capsys, "session", "new", tmp_path / "s", "--model", tmp_path / "cfg.npz", "--seed", 2,
                          "--batch-size", 3)
    assert code == 0, err
    while True:
        code, out, err = _cli(capsys, "session", "next", tmp_path / "s", "--json")
        ids = json.loads(out)["ids"]
        if not ids:
            break
        pairs = [str(v) for q in ids for v in (q, int(z[int(q[1:])]))]
        assert _cli(capsys, "session", "record", tmp_path / "s", *pairs)[0] == 0
    assert EvaluationSession.load(tmp_path / "s").result() == ref.result_
    # what would change the configured estimator is refused, clearly
    code, _, err = _cli(capsys, "session", "new", tmp_path / "t", "--model", tmp_path / "cfg.npz", "--tau", 0.3)
    assert code == 2 and "holds a configuration" in err and "--tau" in err
    code, _, err = _cli(capsys, "fit-history", "--data", history, "--budget", 10, "--n-components", 3,
                        "--out", tmp_path / "x")
    assert code == 2 and "--n-components" in err and "--budget configures" in err
    code, _, err = _cli(capsys, "fit-history", "--data", history, "--budget", 2, "--out", tmp_path / "x")
    assert code == 2 and "3 to 60" in err


def test_fit_history_budget_option_parsing(capsys):
    with pytest.raises(SystemExit):
        main(["fit-history", "--data", "x.npz", "--out", "y", "--budget", "1.5"])
    assert "fraction in (0, 1)" in capsys.readouterr().err


def test_session_new_takes_a_saved_stack_and_sessions_store_predict_every(bank, stack_file, tmp_path, capsys):
    code, out, err = _cli(capsys, "session", "new", tmp_path / "s", "--model", stack_file, "--budget", 8, "--seed", 1,
                          "--json")
    assert code == 0, err
    session = EvaluationSession.load(tmp_path / "s")
    assert isinstance(session.factor_model, fq.StackedPredictor) and session.question_ids == IDS
    z = bank.new_outcomes[0]
    session = _run_session(tmp_path / "s", z)
    est = fq.PAIEstimator(fq.load_factor_model(stack_file), fq.HybridSampler(), budget=8, random_state=1).fit(z)
    assert session.result() == est.result_
    fm = fq.LogisticFactorModel.from_factors(bank.question_factors, model_factors=bank.model_factors)
    EvaluationSession.create(tmp_path / "p", fm, IDS, budget=12, predict_every=4, random_state=0)
    assert json.loads((tmp_path / "p" / "session.json").read_text())["config"]["predict_every"] == 4
    est = fq.PAIEstimator(fm, budget=12, predict_every=4, random_state=0).fit(z)
    assert _run_session(tmp_path / "p", z).result() == est.result_
    with pytest.raises(ValueError, match="needs question_ids"):
        EvaluationSession(None, sampler=fq.UniformSampler(replace=False), budget=5)
