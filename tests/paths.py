"""Where the tests find the repository, the fixture files and the real data.

A module asks for them by name (``from tests.paths import DATA``) instead of counting ``parents`` from
its own place in the tree, so a module can move between groups without its paths changing.
"""

from pathlib import Path

#: The repository root (README.md, docs/, .ci/).
REPO = Path(__file__).resolve().parents[1]
#: The fixture files: harness runs written by the real lm-eval and inspect-ai (tests/data/make_harness_fixtures.py).
DATA = REPO / "tests" / "data"
#: The real leaderboard data beside the repository (openllm_v1.npz); tests that need it skip where it is absent.
SHARED_DATA = REPO.parent / "shared" / "data"
