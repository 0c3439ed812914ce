"""The one-sided anytime tests behind the adaptive leaderboard's best-wealth stop: each half of the hedged capital is
a supermartingale under its null and grows otherwise (exact expectations by enumeration), and each step returns its
log factors."""

from itertools import product

import numpy as np
import pytest

from faqstats.confseq import OneSidedTests

# a three-point increment law on [0, 1] with mean 0.4
VALUES, PROBS = np.array([0.0, 0.5, 1.0]), np.array([0.45, 0.3, 0.25])
MEAN = float(VALUES @ PROBS)


def test_one_sided_capital_is_a_supermartingale_under_its_null_only():
    # E[K^+_n] at m: 1 when m is the mean, < 1 when the mean is below m (the null 'mean <= m'), > 1 above
    def expected(m, n=4):
        plus = minus = 0.0
        for path in product(range(VALUES.size), repeat=n):
            t = OneSidedTests(1, m, alpha=0.05, truncation=0.9, horizon=10)
            for i in path:
                t.update([VALUES[i]], [0.0], [1.0])
            w = np.prod(PROBS[list(path)])
            plus, minus = plus + w * np.exp(t.log_plus[0]), minus + w * np.exp(t.log_minus[0])
        return plus, minus

    plus, minus = expected(MEAN)
    assert plus == pytest.approx(1.0, abs=1e-12) and minus == pytest.approx(1.0, abs=1e-12)
    plus, minus = expected(MEAN + 0.1)  # 'mean <= m' true: K^+ a strict supermartingale; K^- grows
    assert plus < 1.0 and minus > 1.02
    plus, minus = expected(MEAN - 0.1)
    assert plus > 1.02 and minus < 1.0


def test_update_returns_the_steps_log_factors_of_the_runs_it_moves():
    t = OneSidedTests(3, [0.2, 0.8, 0.5], alpha=0.05, truncation=0.9)
    total = np.zeros((2, 3))
    for x, runs in [(0.9, [0, 1]), (0.1, [1, 2]), (0.9, [0, 2]), (0.0, [0, 1, 2])]:
        plus, minus = t.update([x] * len(runs), [0.0] * len(runs), [1.0] * len(runs), runs=runs)
        total[0, runs] += plus
        total[1, runs] += minus
    assert np.allclose(total, [t.log_plus, t.log_minus], rtol=0, atol=1e-12) and t.n.tolist() == [3, 3, 3]
    assert total[0, 0] > 0 > total[1, 0]  # mean above m = 0.2: the bet on 'above' won, the bet on 'below' lost
