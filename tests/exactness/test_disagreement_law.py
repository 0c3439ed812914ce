"""The elimination design's disagreement law: every increment (each model's and each pair's difference) exactly
unbiased under it by enumeration on a tiny bank, within its announced range; a negative control; the run uses it."""

from itertools import combinations

import numpy as np
import pytest

import faqstats as fq
import faqstats.pairwise_elimination as pe
from faqstats._engine import SequentialRun
from faqstats.pairwise_elimination import difference_range, disagreement_law
from faqstats.posterior import FixedPredictions

Z = np.array([[1, 0, 1, 1, 0], [0, 0, 1, 1, 1], [1, 1, 0, 0, 0]], dtype=float)
P = np.array([[0.9, 0.2, 0.6, 0.7, 0.1], [0.3, 0.1, 0.8, 0.6, 0.5], [0.6, 0.3, 0.5, 0.2, 0.4]])


def _runs(first):
    """Three uniform runs on the bank with ``first`` asked of all (the elimination's first round)."""
    runs = [SequentialRun(fq.UniformSampler(), FixedPredictions(p), 5, 5) for p in P]
    for k, run in enumerate(runs):
        run.record(first, 0.2, Z[k, first])
    return runs


def _law(runs, active, mix):
    law = np.mean([runs[k].law() for k in active], axis=0)
    estimates = [runs[k].base() / 5 for k in active]
    return disagreement_law(law / law.sum(), P[active], estimates, mix)


@pytest.mark.parametrize("mix", [0.25, 0.5, 0.75])
def test_every_increment_is_exactly_unbiased_under_the_disagreement_law(mix):
    theta = Z.mean(axis=1)
    for first in range(5):
        for active in ([0, 1, 2], [0, 2], [1, 2]):
            runs = _runs(first)
            law = _law(runs, active, mix)
            uniform = runs[0].law()
            assert law[first] == 0 and law.sum() == pytest.approx(1.0)
            assert np.all(law[uniform > 0] >= (1 - mix) * uniform[uniform > 0] - 1e-15)  # positive where asked
            assert not np.allclose(law, uniform)  # (a real tilt)
            for k in active:
                expected = sum(law[j] * _runs(first)[k].record(j, law[j], Z[k, j]) for j in np.flatnonzero(law))
                assert expected == pytest.approx(theta[k], abs=1e-12)
            for a, b in combinations(active, 2):
                low, high = difference_range(runs[a].base(), runs[b].base(), P[a], P[b], law, 5)
                expected, seen = 0.0, []
                for j in np.flatnonzero(law > 0):
                    ra, rb = _runs(first)[a], _runs(first)[b]
                    expected += law[j] * (ra.record(j, law[j], Z[a, j]) - rb.record(j, law[j], Z[b, j]))
                    for za in (0.0, 1.0):
                        for zb in (0.0, 1.0):
                            ra, rb = _runs(first)[a], _runs(first)[b]
                            seen.append(ra.record(j, law[j], za) - rb.record(j, law[j], zb))
                assert expected == pytest.approx(theta[a] - theta[b], abs=1e-12)
                assert low - 1e-12 <= min(seen) and max(seen) <= high + 1e-12


def test_a_wrong_probability_is_caught_by_the_enumeration():
    # negative control: drawing from the disagreement law but dividing by the uniform probability is biased
    runs = _runs(0)
    law = _law(runs, [0, 1], 0.5)
    uniform = runs[0].law()
    expected = 0.0
    for j in np.flatnonzero(law):
        ra, rb = _runs(0)[0], _runs(0)[1]
        expected += law[j] * (ra.record(j, uniform[j], Z[0, j]) - rb.record(j, uniform[j], Z[1, j]))
    assert abs(expected - (Z[0].mean() - Z[1].mean())) > 1e-3


def test_the_leaders_and_the_limits():
    law = np.array([0.0, 0.25, 0.25, 0.25, 0.25])
    Q = np.array([[0.9, 0.9, 0.1, 0.5, 0.5], [0.9, 0.1, 0.1, 0.5, 0.9], [0.1, 0.1, 0.9, 0.1, 0.9]])
    # leaders 0 and 1 (estimates): the score is their discordance on the support, model 2 plays no part
    q = disagreement_law(law, Q, np.array([0.7, 0.6, 0.1]), 0.5)
    score = np.array([0.0, 0.82, 0.18, 0.5, 0.5])
    assert q == pytest.approx(0.5 * law + 0.5 * score / score.sum())
    assert disagreement_law(law, Q, np.array([0.7, 0.6, 0.1]), 0.0) is law
    assert disagreement_law(law, Q[:1], np.array([0.7]), 0.5) is law  # one model: nothing to compare
    same = np.zeros((2, 5))  # predicted certain agreement everywhere: no score, the policies' law
    assert disagreement_law(law, same, np.array([0.5, 0.4]), 0.5) is law
    with pytest.raises(ValueError, match="mix"):
        disagreement_law(law, Q, np.array([0.7, 0.6, 0.1]), 1.0)


def test_the_run_draws_from_the_disagreement_law_and_records_its_probabilities(monkeypatch):
    laws = []

    def spy(*args):
        laws.append(disagreement_law(*args))
        return laws[-1]

    monkeypatch.setattr(pe, "DISAGREEMENT_MIX", 0.5)
    monkeypatch.setattr(pe, "disagreement_law", spy)
    rng = np.random.default_rng(0)
    Zb = (rng.random((3, 60)) < np.array([[0.8], [0.6], [0.3]])).astype(float)
    Pb = np.clip(Zb * 0.6 + 0.2 + 0.1 * rng.random((3, 60)), 0, 1)
    board = fq.LeaderboardEstimator(None, fq.UniformSampler(), 180, design="adaptive", stop="best", random_state=0)
    runs = []

    class Spy(pe._Board):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            for run, p in zip(self.runs, Pb):
                run.predictor = FixedPredictions(p)
            runs.append(self)

    monkeypatch.setattr(pe, "_Board", Spy)
    board.fit(Zb)
    table = runs[0].runs[0].table()
    assert len(laws) == len(table) > 1
    probabilities = [law[q] for law, q in zip(laws, table["question"])]
    assert table["probability"] == pytest.approx(probabilities, rel=1e-12)
    assert not np.allclose(probabilities, [1 / (60 - t) for t in range(len(table))])  # not the uniform law
