"""Fixtures shared by the refusal tests (damaged files, damaged harness output, hostile input)."""

import pytest

from tests.paths import DATA


@pytest.fixture(scope="session", autouse=True)
def inspect_ai_log_read_once():
    """Read one inspect log with inspect-ai before the first refusal test, where inspect-ai is installed.

    inspect-ai's first log read in a process raises the recursion limit (1000 to 3000), and Hypothesis
    warns when a test changes it. This folder's Hypothesis tests read logs with inspect-ai, and it runs
    before surfaces/, whose harness tests used to make that first read; reading here keeps it out of them.
    """
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        return
    read_eval_log(str(next((DATA / "inspect" / "history").glob("*.eval"))))
