"""EvaluationSession: equivalence with PAIEstimator, exact resume, refusals, crash safety.

Every bank is a small planted one (80 questions) with its true factors as the factor
model (``from_factors``: no fitting), so the whole file runs in a few seconds.
"""

import json
import os
import signal
import time

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import faqstats as fq
from faqstats import session as session_module
from faqstats.session import EvaluationSession, NextQuestions

N = 80


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=60, n_questions=N, n_new=4, n_components=3, random_state=0)


@pytest.fixture(scope="module")
def ids():
    return [f"q{j:03d}" for j in range(N)]


def _drive(session, z, rng=None, split=False):
    """Answer every round from ``z`` (indexed by position); optionally in shuffled, split calls."""
    asked = []
    while not session.done:
        qids, probs = session.next_questions()
        assert len(qids) == len(probs)
        if not qids:  # with replacement, the last draws may all repeat answered questions
            assert session.done
            break
        asked.append(list(qids))
        order = np.arange(len(qids)) if rng is None else rng.permutation(len(qids))
        pieces = [order[:1], order[1:]] if split and len(order) > 1 else [order]
        for piece in pieces:
            session.record([qids[k] for k in piece], [float(z[session._index_of(qids[k])]) for k in piece])
    return asked


SAMPLERS = {
    "hybrid": lambda: fq.HybridSampler(),
    "hybrid-al-replace": lambda: fq.HybridSampler(tau=0.2, rho=0.5, gamma=0.3, replace=True),
    "uniform": lambda: fq.UniformSampler(),
    "neyman-replace": lambda: fq.NeymanSampler(tau=0.3, replace=True),
    "active": lambda: fq.ActiveLearningSampler(tau=0.5),
}


# ------------------------------------------------------------------ equivalence with PAIEstimator
@pytest.mark.parametrize("batch_size", [1, 3])
@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_session_equals_estimator(bank, fm, ids, name, batch_size):
    z = bank.new_outcomes[1]
    est = fq.PAIEstimator(fm, SAMPLERS[name](), budget=20, batch_size=batch_size, random_state=5).fit(z)
    s = EvaluationSession(fm, ids, sampler=SAMPLERS[name](), budget=20, batch_size=batch_size, random_state=5)
    _drive(s, z)
    assert_array_equal(s.queries(), est.queries_)
    assert s.result() == est.result_
    assert s.result().conf_int() == est.conf_int()
    assert s.stop_reason == "budget" and s.n_queries == est.n_queries_


@pytest.mark.parametrize("batch_size", [1, 3])
@pytest.mark.parametrize("replace", [False, True])
def test_session_equals_estimator_with_stop_when_width(bank, fm, ids, batch_size, replace):
    z = bank.new_outcomes[0]
    make = lambda: fq.HybridSampler(tau=0.5, rho=0.3, replace=replace)  # noqa: E731
    est = fq.PAIEstimator(fm, make(), budget=40, batch_size=batch_size, stop_when_width=0.5, random_state=1).fit(z)
    s = EvaluationSession(
        fm, ids, sampler=make(), budget=40, batch_size=batch_size, stop_when_width=0.5, random_state=1
    )
    _drive(s, z)
    assert est.stop_reason_ == s.stop_reason == "width"
    assert_array_equal(s.queries(), est.queries_)
    assert_array_equal(s.confidence_sequence(), est.confidence_sequence_)
    assert s.result() == est.result_
    assert s.result().conf_int() == est.conf_int() == s.result().anytime_interval
    assert s.next_questions() == NextQuestions([], [])


@pytest.mark.parametrize("batch_size", [1, 3])
def test_session_with_step_weights_equals_estimator_and_resumes(tmp_path, bank, fm, ids, batch_size):
    z = bank.new_outcomes[1]
    w = np.geomspace(1, 4, 20)
    est = fq.PAIEstimator(fm, budget=20, batch_size=batch_size, step_weights=w, random_state=5).fit(z)
    s = EvaluationSession.create(tmp_path / "s", fm, ids, budget=20, batch_size=batch_size, step_weights=w,
                                 random_state=5)
    while not s.done:
        qids, _ = s.next_questions()
        s = EvaluationSession.load(tmp_path / "s")  # the weights come back from the JSON state
        s.record(qids, [float(z[int(q[1:])]) for q in qids])
        assert s.trajectory().shape[0] == s.n_draws - 1  # early prefixes fall back to the plain mean
    assert s.result() == est.result_
    assert s.result().variance_method == "weighted martingale"
    stored = json.loads((tmp_path / "s" / "session.json").read_text())["config"]["step_weights"]
    np.testing.assert_array_equal(stored, w)
    with pytest.raises(ValueError, match="at least budget"):
        EvaluationSession(fm, ids, budget=20, step_weights=w[:10])


def test_answer_order_and_split_calls_do_not_matter(bank, fm, ids):
    z = bank.new_outcomes[2]
    a = EvaluationSession(fm, ids, budget=24, batch_size=4, confidence_sequence=True, random_state=3)
    b = EvaluationSession(fm, ids, budget=24, batch_size=4, confidence_sequence=True, random_state=3)
    assert _drive(a, z) == _drive(b, z, rng=np.random.default_rng(0), split=True)
    assert_array_equal(a.queries(), b.queries())
    assert a.result() == b.result()


def test_integer_ids_and_default_ids(bank, fm):
    z = bank.new_outcomes[0]
    s = EvaluationSession(fm, budget=10, random_state=0)  # ids default to 0..N-1
    assert s.question_ids == list(range(N))
    qids, _ = s.next_questions()
    assert isinstance(qids[0], int)
    s.record([np.int64(qids[0])], [z[qids[0]]])  # numpy integers are ids too
    assert s.n_queries == 1


def test_graded_outcomes_follow_the_estimator(bank, fm, ids):
    z = bank.new_outcomes[0] * 0.75 + 0.125  # graded scores strictly between 0 and 1
    s = EvaluationSession(fm, ids, budget=12, batch_size=2, random_state=0)
    _drive(s, z)
    est = fq.PAIEstimator(fm, fq.HybridSampler(), budget=12, batch_size=2, random_state=0).fit(z)
    assert s.result() == est.result_


def test_result_and_status_while_running(bank, fm, ids):
    z = bank.new_outcomes[0]
    s = EvaluationSession(fm, ids, budget=10, batch_size=2, random_state=0)
    st = s.status()
    assert st["n_draws"] == 0 and st["estimate"] is None and st["pending"] == [] and not st["done"]
    with pytest.raises(ValueError, match="at least two"):
        s.result()
    qids, _ = s.next_questions()
    assert s.status()["pending"] == qids
    s.record(qids, [z[int(q[1:])] for q in qids])
    res = s.result()
    assert res.stop_reason is None and res.n_queries == 2
    st = json.loads(json.dumps(s.status()))
    assert st["conf_int"] == list(res.conf_int()) and st["estimate"] == res.estimate
    _drive(s, z)
    traj = s.trajectory()
    assert traj.shape == (9, 4) and traj[-1, 1] == s.result().estimate
    assert tuple(traj[-1, 2:]) == s.result().conf_int()
    assert "10/10 draws" in repr(s)


def test_pending_round_is_served_again_and_n_only_sizes_new_rounds(fm, ids):
    s = EvaluationSession(fm, ids, budget=10, batch_size=2, random_state=0)
    first = s.next_questions(n=4)
    assert len(first.ids) == 4 and s.next_questions() == first == s.next_questions(n=1)
    s.record(first.ids[2], 1)
    assert s.next_questions().ids == [first.ids[k] for k in (0, 1, 3)]
    assert s.n_draws == 0  # the third draw waits for the first two
    s.record(first.ids[:2], [0, 1])
    assert s.n_draws == 3
    with pytest.raises(ValueError, match="not a positive integer|positive integer"):
        s.next_questions(n=0)


# ------------------------------------------------------------------ persistence and exact resume
@pytest.mark.parametrize("replace", [False, True])
def test_resume_after_save_and_load_at_every_step(tmp_path, bank, fm, ids, replace):
    z = bank.new_outcomes[3]
    make = lambda: fq.HybridSampler(tau=0.3, rho=0.4, replace=replace)  # noqa: E731
    kwargs = dict(budget=15, batch_size=3, stop_when_width=0.3, random_state=11)
    ref = EvaluationSession(fm, ids, sampler=make(), **kwargs)
    ref_rounds = _drive(ref, z, rng=np.random.default_rng(1), split=True)

    EvaluationSession.create(tmp_path / "s", fm, ids, sampler=make(), **kwargs)
    rounds, rng = [], np.random.default_rng(1)
    while not EvaluationSession.load(tmp_path / "s").done:
        qids, _ = EvaluationSession.load(tmp_path / "s").next_questions()
        assert EvaluationSession.load(tmp_path / "s").next_questions().ids == qids  # saved as pending
        rounds.append(list(qids))
        for k in rng.permutation(len(qids)):  # one answer per process lifetime
            s = EvaluationSession.load(tmp_path / "s")
            s.record(qids[k], float(z[int(qids[k][1:])]))
    s = EvaluationSession.load(tmp_path / "s")
    assert rounds == ref_rounds
    assert_array_equal(s.queries(), ref.queries())
    assert s.result() == ref.result()
    est = fq.PAIEstimator(fm, make(), budget=15, batch_size=3, stop_when_width=0.3, random_state=11).fit(z)
    assert s.result() == est.result_


def test_files_are_json_and_npz_without_pickle(tmp_path, fm, ids):
    s = EvaluationSession.create(tmp_path, fm, ids, budget=6, random_state=0)
    s.next_questions()
    state = json.loads((tmp_path / "session.json").read_text())
    assert state["format"] == "faqstats.session" and state["format_version"] == 1
    assert state["config"]["sampler"] == {"class": "HybridSampler", "module": "faqstats.sampling",
                                          "params": fq.HybridSampler().get_params()}
    assert state["question_ids_sha256"] == fq.io.question_ids_sha256(ids)
    assert len(state["draws"]) == 1 and state["answers"] == [] and state["revision"] == 2
    with np.load(tmp_path / "factor_model.npz", allow_pickle=False) as data:
        assert data["question_ids"].tolist() == ids
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*.tmp"))


def test_model_metadata_is_the_model_files(tmp_path, fm, ids):
    assert EvaluationSession(fm, ids, budget=4, random_state=0).model_metadata is None  # in memory: no file
    s = EvaluationSession.create(tmp_path / "s", fm, ids, budget=4, random_state=0)
    meta = s.model_metadata
    assert meta["format"] == "faqstats.factor_model" and meta["question_ids_sha256"] == fq.io.question_ids_sha256(ids)
    assert EvaluationSession.load(tmp_path / "s").model_metadata == meta
    mean = EvaluationSession.create(tmp_path / "m", None, ids, sampler=fq.UniformSampler(replace=False), budget=4,
                                    random_state=0)
    assert mean.model_metadata["estimator"] is None and mean.model_metadata["n_questions"] == len(ids)


def test_a_session_without_checksums_is_refused_unless_allowed(tmp_path, bank, fm, ids):
    z = bank.new_outcomes[0]
    s = EvaluationSession.create(tmp_path / "s", fm, ids, budget=6, batch_size=2, random_state=0)
    got, _ = s.next_questions()
    s.record(got, [float(z[int(q[1:])]) for q in got])
    path = tmp_path / "s" / "session.json"
    state = json.loads(path.read_text())
    del state["checksums"]  # every other hash intact
    path.write_text(json.dumps(state))
    before = {p.name: p.read_bytes() for p in (tmp_path / "s").iterdir()}
    with pytest.raises(ValueError, match=r"session\.json: the session has no 'checksums'"):
        EvaluationSession.load(tmp_path / "s")
    assert {p.name: p.read_bytes() for p in (tmp_path / "s").iterdir()} == before  # nothing on disk changed
    old = EvaluationSession.load(tmp_path / "s", allow_unchecked=True)  # a session older than the checksums
    assert old.n_draws == s.n_draws and old.status() == s.status()
    got, _ = old.next_questions()  # the next save writes the checksums: it loads as usual again
    assert "checksums" in json.loads(path.read_text())
    assert EvaluationSession.load(tmp_path / "s").pending.ids == got


def test_create_from_a_saved_model_path(tmp_path, bank, fm, ids):
    path = fq.save_factor_model(fm, tmp_path / "fm.npz", question_ids=ids)
    s = EvaluationSession.create(tmp_path / "s", path, budget=8, random_state=2)
    assert s.question_ids == ids
    z = bank.new_outcomes[0]
    _drive(s, z)
    assert s.result() == fq.PAIEstimator(fm, fq.HybridSampler(), budget=8, random_state=2).fit(z).result_
    with pytest.raises(ValueError, match="different order"):
        EvaluationSession(path, ids[::-1])
    with pytest.raises(FileExistsError, match="already holds"):
        EvaluationSession.create(tmp_path / "s", fm, ids)


def _files(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def test_refusals_leave_the_files_byte_identical(tmp_path, bank, fm, ids):
    z = bank.new_outcomes[0]
    s = EvaluationSession.create(tmp_path, fm, ids, budget=10, batch_size=3, random_state=0)
    qids, _ = s.next_questions()
    s.record(qids[0], z[int(qids[0][1:])])
    before = _files(tmp_path)
    other = next(q for q in ids if q not in qids)
    bad_calls = [
        ([other], [1], "not pending"),
        (["nope"], [1], "not a question of the bank"),
        ([qids[0]], [1], "already recorded"),
        ([qids[1], qids[1]], [1, 1], "twice"),
        ([qids[1]], [1.5], r"in \[0, 1\]"),
        ([qids[1]], [-0.1], r"in \[0, 1\]"),
        ([qids[1]], [float("nan")], r"in \[0, 1\]"),
        ([qids[1]], ["yes"], "must be a number"),
        ([qids[1], qids[2]], [1], "same length"),
        ([qids[1], other], [1, 0], "not pending"),  # all or nothing: qids[1] is not recorded either
    ]
    for call_ids, values, match in bad_calls:
        with pytest.raises(ValueError, match=match):
            s.record(call_ids, values)
        assert _files(tmp_path) == before
    assert s.n_answers == 1
    s.record(qids[1:], [z[int(q[1:])] for q in qids[1:]])  # still usable
    assert s.n_draws == 3


def test_a_changed_bank_or_model_file_is_refused(tmp_path, fm, ids):
    EvaluationSession.create(tmp_path, fm, ids, budget=6, random_state=0).next_questions()
    before = _files(tmp_path)
    other_ids = ids[:-1] + ["other"]
    fq.save_factor_model(fm, tmp_path / "factor_model.npz", question_ids=other_ids)
    with pytest.raises(ValueError, match="different banks"):
        EvaluationSession.load(tmp_path)
    V = fm.question_factors_.copy()
    V[0, 0] += 1.0
    changed = fq.LogisticFactorModel.from_factors(V, fm.prior_mean_, fm.prior_cov_)
    fq.save_factor_model(changed, tmp_path / "factor_model.npz", question_ids=ids)
    with pytest.raises(ValueError, match="not the factor model this session started with"):
        EvaluationSession.load(tmp_path)
    (tmp_path / "factor_model.npz").write_bytes(before["factor_model.npz"])
    EvaluationSession.load(tmp_path)
    assert _files(tmp_path) == before


def test_newer_format_version_is_refused(tmp_path, fm, ids):
    EvaluationSession.create(tmp_path, fm, ids, budget=6, random_state=0)
    state = json.loads((tmp_path / "session.json").read_text())
    state["format_version"] = 2
    (tmp_path / "session.json").write_text(json.dumps(state))
    with pytest.raises(ValueError, match="newer faqstats.*upgrade"):
        EvaluationSession.load(tmp_path)
    (tmp_path / "session.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ValueError, match="not a faqstats session"):
        EvaluationSession.load(tmp_path)
    with pytest.raises(FileNotFoundError, match="No faqstats session"):
        EvaluationSession.load(tmp_path / "missing")


def test_tampered_draws_are_detected(tmp_path, fm, ids):
    s = EvaluationSession.create(tmp_path, fm, ids, budget=6, random_state=0)
    s.next_questions()
    state = json.loads((tmp_path / "session.json").read_text())
    state["draws"][0][1] *= 1.5
    (tmp_path / "session.json").write_text(json.dumps(state))
    with pytest.raises(ValueError, match="draws differ from the checksums"):
        EvaluationSession.load(tmp_path)
    # a forger who also rewrites the checksums is still caught: the draw is replayed against the policy
    from faqstats.io import session_checksums

    state["checksums"] = session_checksums(state)
    (tmp_path / "session.json").write_text(json.dumps(state))
    with pytest.raises(ValueError, match="does not match the factor model or sampler"):
        EvaluationSession.load(tmp_path)


class MySampler(fq.NeymanSampler):
    """A user-defined policy: stored by name, passed again on load."""


def test_custom_sampler_must_be_passed_to_load(tmp_path, bank, fm, ids):
    s = EvaluationSession.create(tmp_path, fm, ids, sampler=MySampler(tau=0.4), budget=6, random_state=0)
    s.next_questions()
    with pytest.raises(ValueError, match="pass an instance"):
        EvaluationSession.load(tmp_path)
    with pytest.raises(ValueError, match="is not the session's"):
        EvaluationSession.load(tmp_path, sampler=MySampler(tau=0.3))
    s = EvaluationSession.load(tmp_path, sampler=MySampler(tau=0.4))
    _drive(s, bank.new_outcomes[0])
    est = fq.PAIEstimator(fm, MySampler(tau=0.4), budget=6, random_state=0).fit(bank.new_outcomes[0])
    assert s.result() == est.result_


def test_two_writers_on_one_session_are_refused(tmp_path, fm, ids):
    EvaluationSession.create(tmp_path, fm, ids, budget=6, batch_size=2, random_state=0).next_questions()
    a, b = EvaluationSession.load(tmp_path), EvaluationSession.load(tmp_path)
    qids, _ = a.next_questions()
    a.record(qids[0], 1)
    before = _files(tmp_path)
    with pytest.raises(RuntimeError, match="changed by another process"):
        b.record(qids[1], 0)
    assert _files(tmp_path) == before
    assert b.n_answers == 0  # b is left as it was loaded


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(budget=1), ValueError, "budget"),
        (dict(budget=500), ValueError, "exceeds"),
        (dict(batch_size=0), ValueError, "batch_size"),
        (dict(alpha=1.5), ValueError, "alpha"),
        (dict(stop_when_width=2.0), ValueError, "stop_when_width"),
        (dict(random_state=-1), ValueError, "random_state"),
        (dict(random_state=np.random.default_rng(0)), TypeError, "random_state"),
        (dict(sampler=fq.BernoulliAIPW()), ValueError, "sequential"),
        (dict(sampler="hybrid"), TypeError, "Sampler"),
    ],
)
def test_bad_parameters_are_named(fm, ids, kwargs, error, match):
    with pytest.raises(error, match=match):
        EvaluationSession(fm, ids, **kwargs)


def test_bad_question_ids_are_named(fm, ids):
    with pytest.raises(ValueError, match="unique"):
        EvaluationSession(fm, ids[:-1] + ids[:1])
    with pytest.raises(ValueError, match="80 questions"):
        EvaluationSession(fm, ids[:-1])
    with pytest.raises(TypeError, match="all strings or all integers"):
        EvaluationSession(fm, ids[:-1] + [3])
    with pytest.raises(TypeError, match="factor_model"):
        EvaluationSession("not a model".split(), ids)


def test_random_state_none_draws_a_stored_seed(tmp_path, fm, ids):
    s = EvaluationSession.create(tmp_path, fm, ids, budget=5, random_state=None)
    assert isinstance(s.random_state, int) and EvaluationSession.load(tmp_path).random_state == s.random_state


# ------------------------------------------------------------------ crash safety: SIGKILL at random points
def _child(directory, z, seed, log_path, hook, count):
    """Drive the session from ``directory``; SIGKILL ourselves at the ``count``-th call of ``hook``."""
    calls = [0]

    def kill_point():
        calls[0] += 1
        if calls[0] == count:
            os.kill(os.getpid(), signal.SIGKILL)

    if hook in ("replace", "fsync"):  # inside the atomic write: before the rename, or before the temp file is complete
        original = getattr(os, hook)

        def patched(*args, **kwargs):
            kill_point()
            return original(*args, **kwargs)

        setattr(os, hook, patched)
    s = EvaluationSession.load(directory)
    rng = np.random.default_rng(seed)
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    while not s.done:
        qids, _ = s.next_questions()
        for k in rng.permutation(len(qids)):
            j = int(qids[k][1:])
            s.record([qids[k]], [float(z[j])])
            os.write(log, f"{qids[k]} {z[j]}\n".encode())  # unbuffered: what returned is logged
            if hook == "after-record":
                kill_point()


def _wait(pid, seconds=120):
    """``waitpid`` with a guard against a hung child (not a timing assertion)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.005)
    os.kill(pid, signal.SIGKILL)  # pragma: no cover
    os.waitpid(pid, 0)  # pragma: no cover
    pytest.fail("the child process hung")  # pragma: no cover


def _run_child(*args):
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            _child(*args)
            code = 0
        finally:
            os._exit(code)
    return _wait(pid)


@pytest.mark.parametrize("replace", [False, True])
def test_sigkill_at_random_points_loses_nothing(tmp_path, bank, fm, ids, replace):
    z = bank.new_outcomes[2]
    sampler = lambda: fq.HybridSampler(tau=0.3, replace=replace)  # noqa: E731
    kwargs = dict(budget=18, batch_size=3, random_state=4)
    EvaluationSession.create(tmp_path / "s", fm, ids, sampler=sampler(), **kwargs)
    log = tmp_path / "answers.log"
    plan = np.random.default_rng(2024 + replace)
    kills = 0
    for attempt in range(12):
        hook = ["replace", "fsync", "after-record", "replace"][attempt % 4]
        status = _run_child(tmp_path / "s", z, attempt, log, hook, int(plan.integers(1, 6)))
        if os.WIFSIGNALED(status):
            assert os.WTERMSIG(status) == signal.SIGKILL
            kills += 1
            s = EvaluationSession.load(tmp_path / "s")  # every kill leaves a loadable session
            logged = [line.split() for line in log.read_text().splitlines()]
            for qid, value in logged:  # no answer that record() returned is lost
                assert s._rounds.answers[s._index_of(qid)] == float(value)
        else:
            assert os.WEXITSTATUS(status) == 0
            break
    assert kills >= 3
    s = EvaluationSession.load(tmp_path / "s")
    assert s.done
    est = fq.PAIEstimator(fm, sampler(), **kwargs).fit(z)
    assert_array_equal(s.queries(), est.queries_)
    assert s.result() == est.result_
    assert not list((tmp_path / "s").glob(".*.tmp"))  # temp files of killed writes are removed by the next write


def test_sigkill_from_outside_while_running(tmp_path, bank, fm, ids):
    """A kill from another process lands wherever the child happens to be; resume until done."""
    z = bank.new_outcomes[1]
    kwargs = dict(budget=24, batch_size=2, random_state=9)
    EvaluationSession.create(tmp_path / "s", fm, ids, **kwargs)
    log = tmp_path / "answers.log"
    plan = np.random.default_rng(7)
    for attempt in range(20):
        n_logged = len(log.read_text().splitlines()) if log.exists() else 0
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                _child(tmp_path / "s", z, attempt, log, "none", 0)
            finally:
                os._exit(0)
        target = n_logged + int(plan.integers(1, 5))
        deadline = time.monotonic() + 120  # a guard against a hung child, not a timing assertion
        while time.monotonic() < deadline:
            if os.waitpid(pid, os.WNOHANG) != (0, 0):
                break
            if log.exists() and len(log.read_text().splitlines()) >= target:
                os.kill(pid, signal.SIGKILL)
                _wait(pid)
                break
            time.sleep(0.002)
        else:  # pragma: no cover
            os.kill(pid, signal.SIGKILL)
            _wait(pid)
            pytest.fail("the child process did not progress")
        s = EvaluationSession.load(tmp_path / "s")
        for qid, value in (line.split() for line in log.read_text().splitlines()):
            assert s._rounds.answers[s._index_of(qid)] == float(value)
        if s.done:
            break
    assert s.done
    est = fq.PAIEstimator(fm, fq.HybridSampler(), **kwargs).fit(z)
    assert_array_equal(s.queries(), est.queries_)
    assert s.result() == est.result_


@pytest.mark.parametrize("sampler", [fq.HybridSampler(), fq.NeymanSampler(tau=0.2)], ids=repr)
def test_confident_predictions_reload(tmp_path, sampler):
    """Logits of 15-40 (p within 1e-7 of 1, where sqrt(p (1 - p)) from p loses precision):
    the replay on load checks each stored probability against the same scores the draw used."""
    V = np.linspace(15, 40, 300)[:, None]
    fm = fq.LogisticFactorModel.from_factors(V, prior_mean=np.ones(1), prior_cov=np.eye(1) * 1e-4)
    s = EvaluationSession.create(tmp_path / "s", fm, [f"q{j}" for j in range(300)], sampler=sampler, budget=20,
                                 random_state=1)
    for _ in range(5):
        ids, _ = s.next_questions()
        s.record(ids, [1.0] * len(ids))
    again = EvaluationSession.load(tmp_path / "s")
    assert again.result().estimate == s.result().estimate
