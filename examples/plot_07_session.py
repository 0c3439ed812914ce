"""
Evaluating a Python callable with a resumable session
=====================================================

In a live evaluation the outcomes come from a function that asks the model and grades its
answer. :class:`faqstats.EvaluationSession` keeps the evaluation's state in a directory,
written atomically after every answer, and :func:`faqstats.evaluate` asks the chosen
questions in parallel with retries. An interruption loses nothing: the loaded session
draws exactly the questions an uninterrupted run would have drawn. (The tutorial
"Evaluating a Python callable" has the command-line flow too.)
"""

import itertools
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt

import faqstats as fq

bank = fq.make_synthetic_bank(n_models=80, n_questions=200, random_state=0)
question_ids = [f"item{j}" for j in range(200)]
fm = fq.LogisticFactorModel(n_components=4, regularization=0.01, max_iter=200, random_state=0).fit(bank.history)

workdir = Path(tempfile.mkdtemp())
fq.save_factor_model(fm, workdir / "model.npz", question_ids=question_ids)

truth = dict(zip(question_ids, bank.new_outcomes[0].tolist()))


def ask(ids):
    """Stand-in for 'send each question to the model and grade the reply'."""
    return [truth[qid] for qid in ids]


# %%
# An uninterrupted run.

session = fq.EvaluationSession.create(workdir / "a", workdir / "model.npz", budget=40, batch_size=8,
                                      confidence_sequence=True, random_state=0)
result = fq.evaluate(ask, session, concurrency=4, progress=False)
print(result.summary())

# %%
# The same evaluation, interrupted on the 15th call ("the API key expired"), then loaded
# from its directory and finished: the same questions, the same estimate and interval.

calls = itertools.count(1)


def flaky_ask(ids):
    if next(calls) == 15:
        raise RuntimeError("the API key expired")
    return ask(ids)


session = fq.EvaluationSession.create(workdir / "b", workdir / "model.npz", budget=40, batch_size=8,
                                      confidence_sequence=True, random_state=0)
try:
    fq.evaluate(flaky_ask, session, concurrency=4, progress=False)
except RuntimeError as exc:
    print("interrupted:", exc)

resumed = fq.EvaluationSession.load(workdir / "b")
print(resumed.status()["n_answers"], "answers kept on disk")
assert fq.evaluate(ask, resumed, progress=False) == result
print("resumed run == uninterrupted run")

fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
resumed.plot(ax=ax)
ax.axhline(bank.new_accuracy[0], color="k", ls="--", lw=1, label="true accuracy")
ax.legend(loc="lower right")
