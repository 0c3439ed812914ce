"""Fixtures shared by several test modules, and the Hypothesis profile of CI."""

import os

import pytest
from hypothesis import settings

# CI draws the same examples on every run (a submission lands on a reproducible verdict); anywhere
# else each run draws afresh and so keeps searching (HYPOTHESIS_PROFILE=ci reproduces CI's draws).
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI") or os.environ.get("HYPOTHESIS_PROFILE") == "ci":
    settings.load_profile("ci")


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch intra-op thread for a module of tiny problems, restored afterwards: on a loaded 2-core
    runner extra threads only add contention (a 300-step fit went from 0.3 s to 20 s). A module asks
    for it with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
