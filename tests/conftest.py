"""Fixtures shared by several test modules."""

import pytest


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
