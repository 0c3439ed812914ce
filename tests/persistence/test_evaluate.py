"""evaluate(): a thread pool drives a session; transient failures are retried, fatal ones keep the answers."""

import threading

import pytest
from numpy.testing import assert_array_equal

import faqstats as fq
from faqstats.evaluate import evaluate
from faqstats.session import EvaluationSession

N = 80


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=60, n_questions=N, n_new=3, n_components=3, random_state=1)


def _answer(z):
    return lambda ids: [float(z[i]) for i in ids]


@pytest.mark.parametrize("chunk_size", [1, 2])
def test_concurrency_does_not_change_the_result(bank, fm, chunk_size):
    z = bank.new_outcomes[0]
    results = {}
    for concurrency in (1, 4):
        s = EvaluationSession(fm, budget=24, batch_size=6, random_state=3)
        result = evaluate(_answer(z), s, concurrency=concurrency, chunk_size=chunk_size, progress=False)
        results[concurrency] = (result, s)
    (r1, s1), (r4, s4) = results[1], results[4]
    assert r1 == r4 and s1.done and s4.done
    assert_array_equal(s1.queries(), s4.queries())
    est = fq.PAIEstimator(fm, fq.HybridSampler(), budget=24, batch_size=6, random_state=3).fit(z)
    assert r1 == est.result_


def test_calls_run_in_parallel_and_answers_arrive_out_of_order(bank, fm):
    """Each call of a round waits until all of them have started: only a pool of 4 gets through."""
    z = bank.new_outcomes[1]
    barrier = threading.Barrier(4, timeout=30)
    order = []

    def fn(ids):
        barrier.wait()  # all four calls of the round are running at once
        order.append(ids[0])
        return [float(z[i]) for i in ids]

    s = EvaluationSession(fm, budget=12, batch_size=4, random_state=8)
    result = evaluate(fn, s, concurrency=4, progress=False)
    assert result.n_queries == 12 and len(order) == 12


def test_transient_errors_are_retried(bank, fm):
    z = bank.new_outcomes[2]
    attempts = {}
    lock = threading.Lock()

    def flaky(ids):
        with lock:
            attempts[ids[0]] = attempts.get(ids[0], 0) + 1
            n = attempts[ids[0]]
        if n <= 2 and ids[0] % 3 == 0:  # every third question fails twice first
            raise (TimeoutError if n == 1 else ConnectionError)("try again")
        return [float(z[i]) for i in ids]

    delays = []
    s = EvaluationSession(fm, budget=15, batch_size=5, random_state=0)
    result = evaluate(flaky, s, concurrency=3, backoff=lambda r: delays.append(r) or 0.0, progress=False)
    assert result == fq.PAIEstimator(fm, fq.HybridSampler(), budget=15, batch_size=5, random_state=0).fit(z).result_
    retried = [q for q, n in attempts.items() if n > 1]
    assert retried and all(attempts[q] == 3 for q in retried)
    assert sorted(delays) == sorted([0, 1] * len(retried))  # exponential back-off indices per call


class Fatal(Exception):
    pass


def test_fatal_error_propagates_and_recorded_answers_survive(tmp_path, bank, fm):
    z = bank.new_outcomes[0]
    calls = []

    def fn(ids):
        calls.append(ids[0])
        if len(calls) == 7:
            raise Fatal("the grader crashed")
        return [float(z[i]) for i in ids]

    s = EvaluationSession.create(tmp_path, fm, budget=12, batch_size=1, random_state=5)
    with pytest.raises(Fatal, match="grader crashed") as info:
        evaluate(fn, s, concurrency=2, progress=False)
    assert any("6 answer(s) recorded" in note and "EvaluationSession.load" in note for note in info.value.__notes__)
    resumed = EvaluationSession.load(tmp_path)
    assert resumed.n_answers == 6 and resumed.pending.ids == [calls[-1]]  # the failed question is re-served
    result = evaluate(_answer(z), resumed, progress=False)
    assert result == fq.PAIEstimator(fm, fq.HybridSampler(), budget=12, random_state=5).fit(z).result_


def test_other_calls_of_the_round_are_recorded_when_one_fails(bank, fm):
    z = bank.new_outcomes[1]
    s = EvaluationSession(fm, budget=8, batch_size=4, random_state=2)
    first = s.next_questions().ids
    bad = first[1]
    barrier = threading.Barrier(4, timeout=30)

    def fn(ids):
        barrier.wait()  # all four calls are running when one fails: the others finish and are kept
        if ids[0] == bad:
            raise Fatal("no")
        return [float(z[i]) for i in ids]

    with pytest.raises(Fatal):
        evaluate(fn, s, concurrency=4, progress=False)
    assert s.n_answers == 3 and s.pending.ids == [bad]


def test_transient_errors_give_up_after_max_retries(bank, fm):
    calls = []

    def down(ids):
        calls.append(ids)
        raise ConnectionError("service down")

    s = EvaluationSession(fm, budget=5, random_state=0)
    with pytest.raises(ConnectionError) as info:
        evaluate(down, s, max_retries=2, backoff=0.0, progress=False)
    assert len(calls) == 3 and any("after 3 attempts" in note for note in info.value.__notes__)
    assert s.n_answers == 0


def test_invalid_outcomes_from_fn_stop_the_evaluation(bank, fm):
    s = EvaluationSession(fm, budget=5, random_state=0)
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        evaluate(lambda ids: [2.0] * len(ids), s, progress=False)
    with pytest.raises(ValueError, match="one outcome per question"):
        evaluate(lambda ids: [1.0, 0.0], s, progress=False)
    assert s.n_answers == 0


def test_progress_bar_and_bad_arguments(bank, fm, capsys):
    z = bank.new_outcomes[0]
    s = EvaluationSession(fm, budget=6, random_state=0)
    evaluate(_answer(z), s, progress=True)
    assert "6/6" in capsys.readouterr().err
    with pytest.raises(TypeError, match="fn must be callable"):
        evaluate(None, s)
    with pytest.raises(TypeError, match="EvaluationSession"):
        evaluate(_answer(z), object())
    with pytest.raises(ValueError, match="concurrency"):
        evaluate(_answer(z), s, concurrency=0)
    with pytest.raises(TypeError, match="transient"):
        evaluate(_answer(z), s, transient=("TimeoutError",))


def test_keyboard_interrupt_stops_at_once_and_keeps_the_answers(bank, fm):
    z = bank.new_outcomes[0]
    calls = []

    def fn(ids):
        calls.append(ids[0])
        if len(calls) == 4:
            raise KeyboardInterrupt
        return [float(z[i]) for i in ids]

    s = EvaluationSession(fm, budget=10, random_state=0)
    with pytest.raises(KeyboardInterrupt) as info:
        evaluate(fn, s, progress=False)
    assert s.n_answers == 3 and s.pending.ids == [calls[-1]]
    assert any("3 answer(s) recorded" in note for note in info.value.__notes__)
