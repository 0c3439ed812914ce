"""Tests for :mod:`faqstats.io`: safe (pickle-free, atomic) save and load of factor models.

Every fit is tiny (a 30 x 25 synthetic bank, 100 AdamW steps) and seeded; the fitted
models are shared by the module.
"""

import hashlib
import json
import os
import zipfile

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import faqstats
from faqstats import (
    LogisticFactorModel,
    LogisticFactorModelCV,
    PAIEstimator,
    load_factor_model,
    make_synthetic_bank,
    save_factor_model,
)
from faqstats.io import check_question_ids, question_ids_sha256

ARRAYS = ("question_factors_", "prior_mean_", "prior_cov_", "observed_questions_", "model_factors_", "loss_curve_")


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny problems (conftest.py)


@pytest.fixture(scope="module")
def bank():
    return make_synthetic_bank(n_models=30, n_questions=25, n_new=2, n_components=2, missing_rate=0.2, random_state=0)


@pytest.fixture(scope="module")
def fitted(bank):
    return LogisticFactorModel(n_components=2, regularization=0.1, learning_rate=0.05, max_iter=100, device="cpu", random_state=0).fit(
        bank.history
    )


@pytest.fixture(scope="module")
def fitted_cv(bank):
    return LogisticFactorModelCV(
        n_components_grid=(1, 2), regularization_grid=(0.1,), cv=2, learning_rate=0.05, max_iter=60, device="cpu", random_state=0
    ).fit(bank.history)


def _ids(n):
    return [f"q{j:03d}" for j in range(n)]


def _assert_same_model(loaded, original):
    for attr in ARRAYS:
        want = getattr(original, attr, None)
        got = getattr(loaded, attr, None)
        if want is None:
            assert got is None, attr
        else:
            assert got.dtype == np.asarray(want).dtype, attr
            assert_array_equal(got, want, err_msg=attr)
    rng = np.random.default_rng(1)
    u = np.vstack([original.prior_mean_, rng.normal(size=(5, original.question_factors_.shape[1]))])
    assert_array_equal(loaded.predict_proba(u), original.predict_proba(u))


def _rewrite(path, drop=(), **entries):
    """Copy of the archive at ``path`` with entries dropped or replaced (a tampered file)."""
    with np.load(path, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files if key not in drop}
    arrays.update(entries)
    np.savez(path, **arrays)


def _metadata(path):
    with np.load(path, allow_pickle=False) as data:
        return json.loads(data["metadata_json"].tobytes().decode("utf-8"))


def _with_metadata(path, **changes):
    meta = {**_metadata(path), **changes}
    _rewrite(path, metadata_json=np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8))


# ----------------------------------------------------------------- round trips
def test_io_round_trip_fitted_model(fitted, bank, tmp_path):
    path = save_factor_model(fitted, tmp_path / "fm.npz", question_ids=_ids(25))
    loaded = load_factor_model(path)
    _assert_same_model(loaded, fitted)
    assert loaded.get_params() == fitted.get_params()
    assert loaded.n_iter_ == fitted.n_iter_ == 100
    assert loaded.n_features_in_ == 25
    assert loaded.question_ids_ == _ids(25)
    # the loaded model also refits new models the same way (same solver, same params)
    assert_array_equal(loaded.transform(bank.history[:3]), fitted.transform(bank.history[:3]))


def test_io_metadata_fields(fitted, tmp_path):
    path = save_factor_model(fitted, tmp_path / "fm.npz", question_ids=_ids(25))
    meta = load_factor_model(path).metadata_
    assert meta["format"] == "faqstats.factor_model"
    assert meta["format_version"] == 1
    assert meta["faqstats_version"] == faqstats.__version__
    assert meta["numpy_version"] == np.__version__
    assert meta["estimator"] == "LogisticFactorModel"
    assert meta["params"] == fitted.get_params()
    assert (meta["n_questions"], meta["n_components"], meta["n_models"]) == (25, 2, 30)
    assert meta["fitted_device"] == "cpu"
    text = json.dumps(_ids(25), separators=(",", ":"))
    assert meta["question_ids_sha256"] == hashlib.sha256(text.encode()).hexdigest() == question_ids_sha256(_ids(25))
    assert meta["created_utc"].endswith("+00:00")
    assert meta["cv"] is None and meta["notes"] == []


def test_io_round_trip_cv_model(fitted_cv, tmp_path):
    path = save_factor_model(fitted_cv, tmp_path / "cv.npz")
    loaded = load_factor_model(path)
    assert type(loaded) is LogisticFactorModel
    _assert_same_model(loaded, fitted_cv.best_estimator_)
    assert loaded.get_params() == fitted_cv.best_estimator_.get_params()
    cv = loaded.metadata_["cv"]
    assert loaded.metadata_["estimator"] == "LogisticFactorModelCV"
    assert cv["best_params"] == fitted_cv.best_params_
    assert cv["best_index"] == fitted_cv.best_index_
    assert cv["params"]["n_components_grid"] == [1, 2]
    assert sorted(cv["cv_results"]) == sorted(fitted_cv.cv_results_)
    for name, values in fitted_cv.cv_results_.items():
        assert_array_equal(cv["cv_results"][name], values, err_msg=name)


def test_io_round_trip_from_factors(tmp_path):
    rng = np.random.default_rng(0)
    V = rng.normal(size=(7, 3))
    cov = np.cov(rng.normal(size=(20, 3)), rowvar=False)
    prior_only = LogisticFactorModel.from_factors(V, np.full(3, 0.25), cov)
    with_models = LogisticFactorModel.from_factors(V, model_factors=rng.normal(size=(5, 3)))
    for name, fm in [("prior", prior_only), ("models", with_models)]:
        loaded = load_factor_model(save_factor_model(fm, tmp_path / name))
        _assert_same_model(loaded, fm)
        assert loaded.get_params() == fm.get_params()
        assert not hasattr(loaded, "loss_curve_") and not hasattr(loaded, "n_iter_")
        assert loaded.question_ids_ is None
    assert load_factor_model(tmp_path / "prior").model_factors_ is None


def test_io_loaded_model_gives_identical_queries(fitted, bank, tmp_path):
    loaded = load_factor_model(save_factor_model(fitted, tmp_path / "fm"))
    z = bank.new_outcomes[0]
    runs = [
        PAIEstimator(fm, faqstats.HybridSampler(tau=0.25), budget=10, random_state=3).fit(z) for fm in (fitted, loaded)
    ]
    a, b = (run.queries_ for run in runs)
    assert a.dtype == b.dtype and a.shape == b.shape
    for field in a.dtype.names:
        assert_array_equal(a[field], b[field], err_msg=field)
    assert runs[0].estimate_ == runs[1].estimate_
    assert runs[0].std_error_ == runs[1].std_error_


def test_io_dataframe_feature_names_round_trip(bank, tmp_path):
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame(bank.history, columns=_ids(25))
    fm = LogisticFactorModel(n_components=2, max_iter=20, device="cpu", random_state=0).fit(X)
    loaded = load_factor_model(save_factor_model(fm, tmp_path / "fm"))
    assert_array_equal(loaded.feature_names_in_, fm.feature_names_in_)
    assert loaded.question_ids_ == _ids(25)  # question_ids default to the column names
    check_question_ids(loaded, _ids(25))


def test_io_random_state_generator_stored_as_null(bank, tmp_path):
    fm = LogisticFactorModel(n_components=2, max_iter=5, device="cpu", random_state=np.random.default_rng(0))
    fm.fit(bank.history)
    loaded = load_factor_model(save_factor_model(fm, tmp_path / "fm"))
    assert loaded.random_state is None
    assert loaded.metadata_["params"]["random_state"] is None
    assert any("random_state" in note and "Generator" in note for note in loaded.metadata_["notes"])


# ----------------------------------------------------------------- paths
@pytest.mark.parametrize("as_str", [False, True])
def test_io_npz_suffix_like_numpy(fitted, tmp_path, as_str):
    target = str(tmp_path / "fm") if as_str else tmp_path / "fm"
    path = save_factor_model(fitted, target)
    assert path == tmp_path / "fm.npz" and path.exists()
    assert sorted(os.listdir(tmp_path)) == ["fm.npz"]
    np.savez(tmp_path / "numpy_would", x=np.zeros(1))
    assert (tmp_path / "numpy_would.npz").exists()  # the rule we mirror
    for name in (target, tmp_path / "fm.npz", str(tmp_path / "fm.npz")):
        assert_array_equal(load_factor_model(name).question_factors_, fitted.question_factors_)
    assert save_factor_model(fitted, tmp_path / "fm.npz") == tmp_path / "fm.npz"  # no doubled suffix


# ----------------------------------------------------------------- no pickle
def test_io_file_has_no_pickled_object(fitted_cv, tmp_path):
    path = save_factor_model(fitted_cv, tmp_path / "cv", question_ids=_ids(25))
    with np.load(path, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}  # would raise on an object array
    assert not [key for key, arr in arrays.items() if arr.dtype.hasobject]
    expected = {"metadata_json", "question_factors", "prior_mean", "prior_cov", "observed_questions"}
    expected |= {"model_factors", "loss_curve", "question_ids"} | {f"cv_results.{k}" for k in fitted_cv.cv_results_}
    assert set(arrays) == expected
    assert arrays["metadata_json"].dtype == np.uint8
    with zipfile.ZipFile(path) as zf:
        assert all(name.endswith(".npy") for name in zf.namelist())


def test_io_refuses_object_array(fitted, tmp_path):
    path = save_factor_model(fitted, tmp_path / "fm")
    with np.load(path, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    arrays["question_factors"] = arrays["question_factors"].astype(object)
    np.savez(path, allow_pickle=True, **arrays)
    with pytest.raises(ValueError, match="'question_factors' cannot be read without pickle"):
        load_factor_model(path)


def test_io_refuses_non_npz_file(tmp_path):
    (tmp_path / "junk.npz").write_bytes(b"not a zip at all")
    with pytest.raises(ValueError, match="not a readable .npz archive"):
        load_factor_model(tmp_path / "junk.npz")
    np.save(tmp_path / "single.npz", np.zeros(2))  # a .npy under an .npz name
    (tmp_path / "single.npz.npy").rename(tmp_path / "single.npz")
    with pytest.raises(ValueError, match="not an .npz archive"):
        load_factor_model(tmp_path / "single.npz")


# ----------------------------------------------------------------- versions and tampering
def test_io_refuses_newer_format_version(fitted, tmp_path):
    path = save_factor_model(fitted, tmp_path / "fm")
    _with_metadata(path, format_version=3)
    with pytest.raises(ValueError, match=r"written by a newer faqstats \(format version 3 > 2\); upgrade faqstats"):
        load_factor_model(path)


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"format": "something.else"}, "format is 'something.else'"),
        ({"format_version": 0}, "format_version must be a positive integer"),
        ({"format_version": "1"}, "format_version must be a positive integer"),
        ({"n_components": 3}, "'question_factors' has shape"),
        ({"params": {"n_components": 2, "alpha": -1.0}}, "invalid estimator parameters"),
        ({"params": {"n_components": 5}}, "n_components=5 but the factors have 2"),
        ({"question_ids_sha256": "0" * 64}, "do not match their SHA-256"),
    ],
)
def test_io_refuses_bad_metadata(fitted, tmp_path, changes, match):
    path = save_factor_model(fitted, tmp_path / "fm", question_ids=_ids(25))
    _with_metadata(path, **changes)
    with pytest.raises(ValueError, match=match):
        load_factor_model(path)


def _nan_factors(fm):
    V = fm.question_factors_.copy()
    V[3, 1] = np.nan
    return V


@pytest.mark.parametrize(
    "tamper, match",
    [
        (lambda fm: {"drop": ("question_factors",)}, r"required entry \['question_factors'\] missing"),
        (lambda fm: {"drop": ("prior_cov", "prior_mean")}, r"entries \['prior_mean', 'prior_cov'\] missing"),
        (lambda fm: {"drop": ("metadata_json",)}, "'metadata_json' is missing"),
        (lambda fm: {"drop": ("question_ids",)}, "'question_ids' is missing"),
        (lambda fm: {"question_factors": _nan_factors(fm)}, "'question_factors' has 1 non-finite"),
        (lambda fm: {"prior_cov": np.full((2, 2), np.inf)}, "'prior_cov' has 4 non-finite"),
        (lambda fm: {"question_factors": fm.question_factors_[:-1]}, r"shape \(24, 2\), expected \(25, 2\)"),
        (lambda fm: {"question_factors": fm.question_factors_.T}, r"shape \(2, 25\), expected \(25, 2\)"),
        (lambda fm: {"prior_mean": np.zeros(3)}, r"'prior_mean' has shape \(3,\), expected \(2,\)"),
        (lambda fm: {"prior_cov": np.zeros((2, 3))}, "'prior_cov' has shape"),
        (lambda fm: {"prior_cov": np.array([[1.0, 0.5], [0.0, 1.0]])}, "'prior_cov' is not symmetric"),
        (lambda fm: {"model_factors": np.zeros((4, 3))}, r"'model_factors' has shape \(4, 3\), expected \(n, 2\)"),
        (lambda fm: {"loss_curve": np.full(3, np.nan)}, "'loss_curve' has 3 non-finite"),
        (lambda fm: {"observed_questions": np.ones(25)}, "'observed_questions' must be bool"),
        (lambda fm: {"question_factors": fm.question_factors_.astype(int)}, "must be a float array"),
        (lambda fm: {"question_ids": np.array(_ids(25)[::-1])}, "do not match their SHA-256"),
        (lambda fm: {"metadata_json": np.frombuffer(b"{not json", dtype=np.uint8)}, "not valid UTF-8 JSON"),
    ],
)
def test_io_refuses_tampered_file(fitted, tmp_path, tamper, match):
    path = save_factor_model(fitted, tmp_path / "fm", question_ids=_ids(25))
    load_factor_model(path)  # intact before tampering
    _rewrite(path, **tamper(fitted))
    with pytest.raises(ValueError, match=match):
        load_factor_model(path)


# ----------------------------------------------------------------- saving refuses
def test_io_save_refuses_unfitted_and_non_finite(tmp_path):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        save_factor_model(LogisticFactorModel(), tmp_path / "fm")
    with pytest.raises(NotFittedError):
        save_factor_model(LogisticFactorModelCV(), tmp_path / "fm")
    with pytest.raises(TypeError, match="must be a LogisticFactorModel"):
        save_factor_model(object(), tmp_path / "fm")
    fm = LogisticFactorModel.from_factors(np.eye(2), np.zeros(2), np.eye(2))
    fm.question_factors_ = np.array([[np.nan, 0.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match="question_factors_ has non-finite"):
        save_factor_model(fm, tmp_path / "fm")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "ids, error, match",
    [
        (["a", "b"], ValueError, "has 2 entries, the model has 3"),
        (["a", "b", "a"], ValueError, "'a' appears more than once"),
        (["a", "b", 3], TypeError, "must be strings"),
        ("abc", TypeError, "not a single str"),
        (["a", "b", "c\x00"], ValueError, "NUL"),
    ],
)
def test_io_save_refuses_bad_question_ids(tmp_path, ids, error, match):
    fm = LogisticFactorModel.from_factors(np.ones((3, 2)), np.zeros(2), np.eye(2))
    with pytest.raises(error, match=match):
        save_factor_model(fm, tmp_path / "fm", question_ids=ids)


# ----------------------------------------------------------------- atomic write
def test_io_atomic_write_keeps_old_file_when_replace_fails(fitted, tmp_path, monkeypatch):
    path = save_factor_model(fitted, tmp_path / "fm")
    before = path.read_bytes()
    other = LogisticFactorModel.from_factors(np.ones((4, 2)), np.zeros(2), np.eye(2))

    def failing_replace(src, dst):
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk on fire"):
        save_factor_model(other, path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["fm.npz"]  # no temp file left behind
    monkeypatch.undo()
    _assert_same_model(load_factor_model(path), fitted)


def test_io_atomic_write_keeps_old_file_when_writing_fails(fitted, tmp_path, monkeypatch):
    path = save_factor_model(fitted, tmp_path / "fm")
    before = path.read_bytes()
    calls = []

    def failing_fsync(fd):
        calls.append(fd)
        raise OSError("fsync failed")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="fsync failed"):
        save_factor_model(fitted, path, question_ids=_ids(25))
    assert calls, "the data must be fsync-ed before the rename"
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["fm.npz"]


def test_io_atomic_write_new_file_leaves_nothing_on_failure(fitted, tmp_path, monkeypatch):
    monkeypatch.setattr(os, "replace", lambda src, dst: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        save_factor_model(fitted, tmp_path / "fm")
    assert os.listdir(tmp_path) == []


# ----------------------------------------------------------------- question ids
def test_io_check_question_ids(fitted, tmp_path):
    loaded = load_factor_model(save_factor_model(fitted, tmp_path / "fm", question_ids=_ids(25)))
    check_question_ids(loaded, _ids(25))
    check_question_ids(loaded, tuple(_ids(25)))
    with pytest.raises(ValueError, match="different order .*index 0: 'q001' != 'q000'"):
        check_question_ids(loaded, [_ids(25)[1], _ids(25)[0], *_ids(25)[2:]])
    with pytest.raises(ValueError, match="not the model's .*index 24: 'other' != 'q024'"):
        check_question_ids(loaded, [*_ids(25)[:-1], "other"])
    with pytest.raises(ValueError, match="24 question ids given, the model has 25"):
        check_question_ids(loaded, _ids(24))
    bare = load_factor_model(save_factor_model(fitted, tmp_path / "bare"))
    with pytest.raises(ValueError, match="carries no question ids"):
        check_question_ids(bare, _ids(25))


def test_io_question_ids_hash_depends_on_order():
    assert question_ids_sha256(["a", "b"]) != question_ids_sha256(["b", "a"])
    assert question_ids_sha256(["a,b"]) != question_ids_sha256(["a", "b"])


# ----------------------------------------------------------------- missing checksums (issue "Trust what is on disk")
def _without(path, drop_key, where=None):
    """Rewrite the metadata of ``path`` without ``drop_key`` (in ``where``), every other hash intact."""
    meta = _metadata(path)
    (meta if where is None else meta[where]).pop(drop_key)
    _rewrite(path, metadata_json=np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8))
    return path.read_bytes()


def test_io_a_model_without_its_array_hashes_is_refused_unless_allowed(fitted, tmp_path):
    path = save_factor_model(fitted, tmp_path / "fm", question_ids=_ids(25))
    before = _without(path, "array_sha256")
    with pytest.raises(ValueError, match=r"fm\.npz: metadata has no 'array_sha256'"):
        load_factor_model(path)
    assert path.read_bytes() == before  # reading changed nothing
    _assert_same_model(load_factor_model(path, allow_unchecked=True), fitted)  # a file older than the hashes
    # format version 2 (and configurations) never existed without them: refused even when allowed
    mixture = faqstats.HistoryMixture().fit(make_synthetic_bank(n_models=20, n_questions=10, random_state=0).history)
    path = save_factor_model(mixture, tmp_path / "mix", question_ids=_ids(10))
    _without(path, "array_sha256")
    with pytest.raises(ValueError, match=r"mix\.npz: metadata has no 'array_sha256'"):
        load_factor_model(path, allow_unchecked=True)


def test_io_a_configuration_or_step_weights_without_their_checksum_are_refused(tmp_path):
    bank = make_synthetic_bank(n_models=60, n_questions=30, n_components=2, random_state=0)
    cfg = faqstats.configure_from_history(bank.history, 10, n_runs=20, random_state=0)
    path = faqstats.save_configuration(cfg, tmp_path / "cfg", question_ids=_ids(30))
    before = _without(path, "sha256", where="configuration")
    with pytest.raises(ValueError, match=r"cfg\.npz: the saved configuration has no 'sha256'"):
        faqstats.load_configuration(path)
    assert path.read_bytes() == before
    sw = faqstats.StepWeights(np.ones(3), np.ones(3), np.ones(3), 10, 100, 1.0, 0.5)
    path = faqstats.save_step_weights(sw, tmp_path / "w.json")
    doc = json.loads(path.read_text())
    del doc["sha256"]
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"w\.json: step-weights file has no 'sha256'"):
        faqstats.load_step_weights(path)
    assert json.loads(path.read_text()) == doc
