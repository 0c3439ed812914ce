"""The inspect-ai tasks of the harness fixtures.

Used by ``make_harness_fixtures.py`` and, copied as ``my_tasks.py``, by the real
``inspect eval`` runs of ``tests/surfaces/test_tutorials_harness.py`` (inspect finds tasks only where
they are defined, so they live in a file of their own). ``tests/data`` must be on
``sys.path``.
"""

import re

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import CORRECT, INCORRECT, PARTIAL, Score, Target, accuracy, match, scorer
from inspect_ai.solver import TaskState, generate

from make_harness_fixtures import ARITH, WORDS

# sample ids that a selector or a question id could garble: a slash, glob characters,
# a space, leading zeros next to the integer they would parse as
ODD_IDS = ["a/b", "x*y", "two words", "007", 7, "[1]", "q?", "50%"]
# questions of their own: the mock model draws afresh when it sees a question again
ODD = [(50 + 3 * i, 1 + 5 * i) for i in range(len(ODD_IDS))]


@scorer(metrics=[accuracy()])
def partial():
    """C for the answer, P when off by one, I otherwise."""

    async def score(state: TaskState, target: Target) -> Score:
        found = re.findall(r"-?\d+", state.output.completion)
        if not found:
            return Score(value=INCORRECT, answer="")
        diff = abs(int(found[-1]) - int(target.text))
        value = CORRECT if diff == 0 else PARTIAL if diff == 1 else INCORRECT
        return Score(value=value, answer=found[-1])

    return score


@task
def arith():
    samples = [
        Sample(id=i, input=f"What is {a} + {b}? Reply with the number.", target=str(a + b))
        for i, (a, b) in enumerate(ARITH[:8], start=1)
    ]
    return Task(dataset=MemoryDataset(samples, name="arith"), solver=generate(), scorer=[match(), partial()])


@task
def words():
    samples = [
        Sample(id=f"w-{w}", input=f"How many letters are in the word '{w}'? Reply with the number.", target=str(len(w)))
        for w in WORDS[:6]
    ]
    return Task(dataset=MemoryDataset(samples, name="words"), solver=generate(), scorer=match())


@task
def odd():
    samples = [
        Sample(id=sid, input=f"What is {a} + {b}? Reply with the number.", target=str(a + b))
        for sid, (a, b) in zip(ODD_IDS, ODD)
    ]
    return Task(dataset=MemoryDataset(samples, name="odd"), solver=generate(), scorer=match())
