"""LeaderboardSession: finished sessions give LeaderboardEstimator's leaderboard to the last digit; resumes
exactly across reloads and SIGKILLs; refuses what it cannot hold (duplicate or unknown names, a budget too
small, an unfinished leaderboard's result).

A planted 80-question bank with its true factors as the predictor (no fitting): the file runs in seconds.
"""

import json
import os
import signal
import time

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_array_equal

import faqstats as fq
from faqstats.session import EvaluationSession, LeaderboardSession

N = 80
NAMES = ["alpha", "beta/2", "gamma"]  # a name with a slash: its folder is made safe


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=60, n_questions=N, n_new=4, n_components=3, random_state=0)


@pytest.fixture(scope="module")
def ids():
    return [f"q{j:03d}" for j in range(N)]


def _answer_round(session, z):
    """Ask model's next round and record it from ``z``; the number of answers recorded."""
    qids, _ = session.next_questions()
    if qids:
        session.record(qids, [float(z[int(q[1:])]) for q in qids])
    return len(qids)


def _drive(board, outcomes):
    for name, z in zip(board.names, outcomes):
        s = board.session(name)
        while not s.done:
            _answer_round(s, z)


def assert_same_leaderboard(got, expected, tables=False):
    """Every field of two JointResults exactly (its tables are functions of them; ``tables``: check them too)."""
    assert got.names == expected.names and got.simultaneous_method == expected.simultaneous_method
    for field in ("estimate", "cov", "n_queries", "df"):
        assert_array_equal(getattr(got, field), getattr(expected, field))
    if tables:  # each table costs a seeded max-t Monte Carlo
        pd.testing.assert_frame_equal(got.to_frame(), expected.to_frame(), check_exact=True)
        pd.testing.assert_frame_equal(got.differences(), expected.differences(), check_exact=True)


# ------------------------------------------------------------------ equality with LeaderboardEstimator
@pytest.mark.parametrize("make_sampler, simultaneous", [
    (lambda: None, "max-t"),
    (lambda: fq.HybridSampler(tau=0.3, rho=0.4, replace=True), "bonferroni"),
    (lambda: fq.UniformSampler(), "max-t"),
], ids=["default", "hybrid-replace", "uniform"])
def test_finished_sessions_give_the_estimators_leaderboard(tmp_path, bank, fm, ids, make_sampler, simultaneous):
    outcomes = bank.new_outcomes[:3]
    board = LeaderboardSession.create(tmp_path / "b", fm, NAMES, 13, ids, sampler=make_sampler(),
                                      simultaneous=simultaneous, random_state=11)
    assert board.budgets.tolist() == [5, 4, 4] and board.budget == 13
    _drive(board, outcomes)
    est = fq.LeaderboardEstimator(fm, make_sampler(), 13, simultaneous=simultaneous, random_state=11)
    est.fit(outcomes, names=NAMES)
    assert board.done and board.unfinished == []
    for name, fitted in zip(NAMES, est.estimators_):
        assert_array_equal(board.session(name).queries(), fitted.queries_)
    assert_same_leaderboard(board.result(), est.result_, tables=make_sampler() is None)
    assert_same_leaderboard(LeaderboardSession.load(tmp_path / "b").result(), est.result_)


def test_a_different_seed_gives_other_draws(tmp_path, bank, fm, ids):
    """The negative control: the equality above is not one that any seed passes."""
    outcomes = bank.new_outcomes[:3]
    board = LeaderboardSession.create(tmp_path / "b", fm, NAMES, 12, ids, random_state=3)
    _drive(board, outcomes)
    other = fq.LeaderboardEstimator(fm, budget=12, random_state=4).fit(outcomes, names=NAMES)
    assert not np.array_equal(board.result().estimate, other.result_.estimate)
    same = fq.LeaderboardEstimator(fm, budget=12, random_state=3).fit(outcomes, names=NAMES)
    assert_same_leaderboard(board.result(), same.result_)


def test_step_weights_and_predict_every_are_the_estimators(tmp_path, bank, fm, ids):
    outcomes, weights = bank.new_outcomes[:3], np.linspace(1.0, 3.0, 5)
    board = LeaderboardSession.create(tmp_path / "b", fm, NAMES, 13, ids, step_weights=weights, predict_every=2,
                                      random_state=11)
    _drive(board, outcomes)
    est = fq.LeaderboardEstimator(fm, budget=13, step_weights=weights, predict_every=2, random_state=11)
    assert_same_leaderboard(LeaderboardSession.load(tmp_path / "b").result(), est.fit(outcomes, names=NAMES).result_)


def test_batched_rounds_are_the_estimators_with_that_batch_size(tmp_path, bank, fm, ids):
    outcomes = bank.new_outcomes[1:4]
    board = LeaderboardSession.create(tmp_path / "b", fm, NAMES, 18, ids, batch_size=4, random_state=2)
    _drive(board, outcomes)
    generators = np.random.default_rng(2).spawn(3)
    for name, z, b, g in zip(NAMES, outcomes, board.budgets, generators):
        est = fq.PAIEstimator(fm, fq.HybridSampler(), int(b), batch_size=4, random_state=g).fit(z)
        assert_array_equal(board.session(name).queries(), est.queries_)
        assert board.session(name).result() == est.result_


# ------------------------------------------------------------------ resuming
def test_resume_round_by_round_in_any_order(tmp_path, bank, fm, ids):
    """Reload after every round, the models taken in turn: nothing is lost or drawn twice."""
    outcomes = bank.new_outcomes[:3]
    LeaderboardSession.create(tmp_path / "b", fm, NAMES, 18, ids, batch_size=2, random_state=5)
    rounds = 0
    while True:
        board = LeaderboardSession.load(tmp_path / "b")
        if board.done:
            break
        name = board.unfinished[rounds % len(board.unfinished)]
        s = board.session(name)
        qids, _ = s.next_questions()
        if rounds % 3 == 0 and len(qids) > 1:  # half a round, then a reload: the rest is still pending
            s.record(qids[:1], [float(outcomes[NAMES.index(name)][int(qids[0][1:])])])
            s = LeaderboardSession.load(tmp_path / "b").session(name)
            assert s.pending.ids == qids[1:]
        _answer_round(s, outcomes[NAMES.index(name)])
        rounds += 1
    assert rounds >= 9
    est = fq.LeaderboardEstimator(fm, budget=18, random_state=5).fit(outcomes, names=NAMES)
    with pytest.raises(AssertionError):  # batch_size=2: not the estimator's draws (it asks one at a time)
        assert_same_leaderboard(board.result(), est.result_)
    for name, z, b, g in zip(NAMES, outcomes, board.budgets, np.random.default_rng(5).spawn(3)):
        one = fq.PAIEstimator(fm, fq.HybridSampler(), int(b), batch_size=2, random_state=g).fit(z)
        assert board.session(name).result() == one.result_


def test_status_result_and_partial_leaderboard(tmp_path, bank, fm, ids):
    outcomes = bank.new_outcomes[:3]
    board = LeaderboardSession.create(tmp_path / "b", fm, NAMES, 15, ids, random_state=0)
    st = board.status()
    json.dumps(st)
    assert st["leaderboard"] is None and st["partial"] and st["unfinished"] == NAMES and st["n_draws"] == 0
    assert [m["budget"] for m in st["models"]] == [5, 5, 5]
    with pytest.raises(ValueError, match=r"not finished: model\(s\) 'alpha', 'beta/2', 'gamma' still have"):
        board.result()
    with pytest.raises(ValueError, match="at least two recorded answers of every model; 'alpha', 'beta/2', 'gamma'"):
        board.result(partial=True)
    for name, z in zip(NAMES, outcomes):
        for _ in range(2):
            _answer_round(board.session(name), z)
    st = board.status()
    json.dumps(st)
    assert st["partial"] and st["n_draws"] == 6 and st["leaderboard"] is not None
    rows = st["leaderboard"]["rows"]
    assert sorted(r["model"] for r in rows) == sorted(NAMES)
    assert [r["estimate"] for r in rows] == sorted((r["estimate"] for r in rows), reverse=True)
    partial = board.result(partial=True)
    assert st["leaderboard"]["may_be_best"] == partial.may_be_best()
    assert partial.n_queries.tolist() == [2, 2, 2]
    _drive(board, outcomes)
    st = LeaderboardSession.load(tmp_path / "b").status()
    assert st["done"] and not st["partial"] and st["unfinished"] == [] and st["n_draws"] == 15
    assert "3 models, 15/15 draws, done" in repr(board)


# ------------------------------------------------------------------ refusals
def test_refusals_name_what_is_wrong(tmp_path, fm, ids):
    with pytest.raises(ValueError, match="'a' is given twice"):
        LeaderboardSession.create(tmp_path / "d", fm, ["a", "b", "a"], 12, ids)
    with pytest.raises(ValueError, match="at least 2 models"):
        LeaderboardSession.create(tmp_path / "d", fm, ["a"], 12, ids)
    with pytest.raises(ValueError, match="non-blank strings"):
        LeaderboardSession.create(tmp_path / "d", fm, ["a", " "], 12, ids)
    with pytest.raises(TypeError, match="sequence of model names"):
        LeaderboardSession.create(tmp_path / "d", fm, "ab", 12, ids)
    with pytest.raises(ValueError, match=r"budget=5 is too small for 3 models: .* at least 6"):
        LeaderboardSession.create(tmp_path / "d", fm, ["a", "b", "c"], 5, ids)
    with pytest.raises(ValueError, match="simultaneous must be"):
        LeaderboardSession.create(tmp_path / "d", fm, ["a", "b"], 12, ids, simultaneous="holm")
    assert not (tmp_path / "d").exists()  # nothing written on a refusal
    board = LeaderboardSession.create(tmp_path / "d", fm, ["a", "b"], 12, ids, random_state=1)
    with pytest.raises(ValueError, match="unknown model 'c': the leaderboard's models are 'a', 'b'"):
        board.session("c")
    with pytest.raises(FileExistsError, match="already holds a faqstats session; resume it with LeaderboardSession"):
        LeaderboardSession.create(tmp_path / "d", fm, ["a", "b"], 12, ids)
    EvaluationSession.create(tmp_path / "one", fm, ids, budget=4)
    with pytest.raises(FileNotFoundError, match="holds a one-model session"):
        LeaderboardSession.load(tmp_path / "one")
    with pytest.raises(FileNotFoundError, match="No faqstats leaderboard session"):
        LeaderboardSession.load(tmp_path / "nowhere")


def test_a_changed_manifest_or_model_session_is_refused(tmp_path, bank, fm, ids):
    LeaderboardSession.create(tmp_path / "d", fm, ["a", "b"], 12, ids, random_state=1)
    manifest = tmp_path / "d" / "leaderboard.json"
    doc = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**doc, "budgets": [7, 5]}))
    with pytest.raises(ValueError, match="not the one leaderboard.json describes"):
        LeaderboardSession.load(tmp_path / "d")
    manifest.write_text(json.dumps({**doc, "folders": ["../x", doc["folders"][1]]}))
    with pytest.raises(ValueError, match="not a valid leaderboard manifest"):
        LeaderboardSession.load(tmp_path / "d")
    manifest.write_text(json.dumps(doc))
    other = fq.LogisticFactorModel.from_factors(bank.question_factors * 1.5, model_factors=bank.model_factors)
    folder = tmp_path / "d" / doc["folders"][1]
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()
    b = EvaluationSession.create(folder, other, ids, budget=6, random_state=1)
    assert b.budget == 6
    with pytest.raises(ValueError, match="another predictor than 'a'"):
        LeaderboardSession.load(tmp_path / "d")


# ------------------------------------------------------------------ crash safety: SIGKILL at random points
def _child(directory, outcomes, seed, log_path, hook, count):
    """Drive the leaderboard in ``directory`` model by model; SIGKILL ourselves at the ``count``-th ``hook``."""
    calls = [0]

    def kill_point():
        calls[0] += 1
        if calls[0] == count:
            os.kill(os.getpid(), signal.SIGKILL)

    if hook in ("replace", "fsync"):  # inside an atomic write
        original = getattr(os, hook)

        def patched(*args, **kwargs):
            kill_point()
            return original(*args, **kwargs)

        setattr(os, hook, patched)
    board = LeaderboardSession.load(directory)
    rng = np.random.default_rng(seed)
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    for name in rng.permutation(board.unfinished):
        s = board.session(str(name))
        z = outcomes[list(board.names).index(str(name))]
        while not s.done:
            qids, _ = s.next_questions()
            for k in rng.permutation(len(qids)):
                s.record([qids[k]], [float(z[int(qids[k][1:])])])
                os.write(log, f"{name} {qids[k]} {z[int(qids[k][1:])]}\n".encode())  # what returned is logged
                if hook == "after-record":
                    kill_point()


def _run_child(*args):
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            _child(*args)
            code = 0
        finally:
            os._exit(code)
    deadline = time.monotonic() + 120  # a guard against a hung child, not a timing assertion
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.005)
    os.kill(pid, signal.SIGKILL)  # pragma: no cover
    os.waitpid(pid, 0)  # pragma: no cover
    pytest.fail("the child process hung")  # pragma: no cover


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_sigkill_mid_round_loses_nothing(tmp_path, bank, fm, ids):
    outcomes = bank.new_outcomes[:3]
    LeaderboardSession.create(tmp_path / "b", fm, NAMES, 21, ids, batch_size=3, random_state=8)
    log = tmp_path / "answers.log"
    plan = np.random.default_rng(99)
    kills = 0
    for attempt in range(16):
        hook = ["replace", "fsync", "after-record", "after-record"][attempt % 4]
        status = _run_child(tmp_path / "b", outcomes, attempt, log, hook, int(plan.integers(1, 6)))
        if os.WIFSIGNALED(status):
            assert os.WTERMSIG(status) == signal.SIGKILL
            kills += 1
            board = LeaderboardSession.load(tmp_path / "b")  # every kill leaves a loadable leaderboard
            for name, qid, value in (line.split() for line in log.read_text().splitlines()):
                s = board.session(name)
                assert s._rounds.answers[s._index_of(qid)] == float(value)
        else:
            assert os.WEXITSTATUS(status) == 0
            break
    assert kills >= 3
    board = LeaderboardSession.load(tmp_path / "b")
    assert board.done
    assert [board.session(name).n_draws for name in NAMES] == board.budgets.tolist() == [7, 7, 7]
    for name, z, b, g in zip(NAMES, outcomes, board.budgets, np.random.default_rng(8).spawn(3)):
        one = fq.PAIEstimator(fm, fq.HybridSampler(), int(b), batch_size=3, random_state=g).fit(z)
        assert_array_equal(board.session(name).queries(), one.queries_)
    assert not list((tmp_path / "b").rglob(".*.tmp"))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_sigkill_while_creating_leaves_no_leaderboard_and_says_so(tmp_path, fm, ids):
    """Killed before the manifest is written: no leaderboard, and creating again says what is there."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        original = os.replace
        calls = [0]

        def patched(*args, **kwargs):
            calls[0] += 1
            if calls[0] == 3:  # the second model's first write
                os.kill(os.getpid(), signal.SIGKILL)
            return original(*args, **kwargs)

        os.replace = patched
        try:
            LeaderboardSession.create(tmp_path / "b", fm, ["a", "b"], 8, ids, random_state=0)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status)
    with pytest.raises(FileNotFoundError, match="No faqstats leaderboard session"):
        LeaderboardSession.load(tmp_path / "b")
    with pytest.raises(FileExistsError, match="but no leaderboard.json: a leaderboard whose creation was interrupted"):
        LeaderboardSession.create(tmp_path / "b", fm, ["a", "b"], 8, ids, random_state=0)


def test_a_sample_mean_leaderboard_gives_the_estimators_exact_intervals(tmp_path, ids):
    # no predictor: each model's sample mean; a model right on every question drawn gets the exact interval
    strong = np.ones(N)
    strong[:2] = 0
    mid = (np.random.default_rng(0).random(N) < 0.6).astype(float)
    board = LeaderboardSession.create(tmp_path / "m", None, ["strong", "mid"], 40, ids, sampler=fq.UniformSampler(),
                                      random_state=3)
    _drive(board, [strong, mid])
    est = fq.LeaderboardEstimator(None, fq.UniformSampler(), 40, random_state=3).fit([strong, mid],
                                                                                     names=["strong", "mid"])
    r = board.result()
    assert r.sample_means == est.result_.sample_means == fq.joint.SampleMeans(N, shared=False)
    assert_same_leaderboard(r, est.result_, tables=True)
    assert r.cov[0, 0] == 0 and 0.5 < r.conf_int().loc["strong", "lower"] < 1.0
