"""Drive an :class:`~faqstats.session.EvaluationSession` with a user function, in parallel, with retries."""

import concurrent.futures as cf
import numbers
import time

import numpy as np

from ._progress import progress_bar
from ._validation import check_scalar
from .session import EvaluationSession

__all__ = ["evaluate"]


def evaluate(fn, session, *, concurrency=8, chunk_size=1, transient=(TimeoutError, ConnectionError), max_retries=5,
             backoff=1.0, max_backoff=60.0, progress=True):
    """Ask ``fn`` the session's questions until the budget is spent or the interval is narrow enough.

    Each round is split into calls ``fn(ids)`` of ``chunk_size`` questions on ``concurrency`` threads;
    answers are recorded as each call returns (an interruption loses only the calls in flight). Use a
    ``batch_size`` of at least ``concurrency`` (docs/tutorials/python_callable.md).

    Parameters
    ----------
    fn : callable
        ``fn(ids) -> outcomes``, one in [0, 1] per id; called from worker threads, must be safe to retry.
    session : EvaluationSession
    concurrency : int, default=8
        Worker threads.
    chunk_size : int, default=1
        Questions per call of ``fn``.
    transient : tuple of exception types, default=(TimeoutError, ConnectionError)
        Failures worth retrying.
    max_retries : int, default=5
    backoff : float or callable, default=1.0
        Seconds before retry ``r``: ``min(max_backoff, backoff * 2**r)``, or ``backoff(r)``.
    max_backoff : float, default=60.0
    progress : bool, default=True
        Show a progress bar.

    Returns
    -------
    AccuracyResult

    Raises
    ------
    Exception
        The first failure of ``fn``, once the running calls' answers are recorded.

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=40, n_questions=60, n_components=3, random_state=0)
    >>> fm = fq.LogisticFactorModel.from_factors(bank.question_factors, model_factors=bank.model_factors)
    >>> session = fq.EvaluationSession(fm, budget=12, batch_size=4, random_state=0)
    >>> result = evaluate(lambda ids: bank.new_outcomes[0][ids], session, concurrency=4, progress=False)
    >>> result.n_queries, session.done
    (12, True)
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable (question ids -> outcomes), got {type(fn).__name__}.")
    if not isinstance(session, EvaluationSession):
        raise TypeError(f"session must be an EvaluationSession, got {type(session).__name__}.")
    check_scalar(concurrency, "concurrency", kind=numbers.Integral, low=1)
    check_scalar(chunk_size, "chunk_size", kind=numbers.Integral, low=1)
    check_scalar(max_retries, "max_retries", kind=numbers.Integral, low=0)
    check_scalar(max_backoff, "max_backoff", low=0.0)
    if not callable(backoff):
        check_scalar(backoff, "backoff", low=0.0)
    transient = tuple(transient)
    if not all(isinstance(t, type) and issubclass(t, BaseException) for t in transient):
        raise TypeError(f"transient must be a tuple of exception types, got {transient!r}.")

    def delay(attempt):
        return float(backoff(attempt)) if callable(backoff) else min(max_backoff, backoff * 2.0**attempt)

    bar = progress_bar(session.budget, "evaluating", progress, initial=session.n_draws, unit="draw", leave=True)
    pool = cf.ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="faqstats-evaluate")
    wait = True
    try:
        while not session.done:
            ids, _ = session.next_questions()
            chunks = [ids[i : i + chunk_size] for i in range(0, len(ids), chunk_size)]
            futures = {pool.submit(_call, fn, chunk, transient, max_retries, delay): chunk for chunk in chunks}
            _collect(futures, session, bar)
    except BaseException as exc:
        # on Ctrl-C (not an error of fn) return at once rather than waiting for the calls in flight
        wait = isinstance(exc, Exception)
        raise
    finally:
        pool.shutdown(wait=wait, cancel_futures=True)
        bar.close()
    return session.result()


def _call(fn, ids, transient, max_retries, delay):
    """``fn(ids)`` as a float array of one outcome per id, retried on transient failures."""
    for attempt in range(max_retries + 1):
        try:
            got = fn(list(ids))
            break
        except transient as exc:
            if attempt == max_retries:
                exc.add_note(f"faqstats: gave up on questions {ids} after {attempt + 1} attempts.")
                raise
            time.sleep(delay(attempt))
    got = np.atleast_1d(np.asarray(got, dtype=float))
    if got.shape != (len(ids),):
        raise ValueError(f"fn must return one outcome per question id; asked for {len(ids)}, got shape {got.shape}.")
    return got


def _collect(futures, session, bar):
    """Record each call's answers as it completes; on a failure, keep the others', then raise."""
    failure = None
    try:
        for future in cf.as_completed(futures):
            if future.cancelled():
                continue
            try:
                outcomes = future.result()
                # recorded even after another call failed: answers already paid for are kept
                before = session.n_draws
                session.record(futures[future], outcomes)
                bar.update(session.n_draws - before)
            except Exception as exc:  # noqa: BLE001 - re-raised below, after the others finish
                if failure is None:
                    failure = exc
                    for other in futures:
                        other.cancel()  # calls not started yet; running ones finish and are recorded
        if failure is not None:
            raise failure
    except BaseException as exc:  # also KeyboardInterrupt: stop waiting, keep what is recorded
        for other in futures:
            other.cancel()
        where = ("the session object holds them; evaluate(fn, session) resumes" if session.directory is None
                 else f"EvaluationSession.load({str(session.directory)!r}) resumes it")
        exc.add_note(f"faqstats: {session.n_answers} answer(s) recorded in the session before the failure; {where}.")
        raise
