"""The confidence sequences' other bets (aGRAPA, a mixture) and the one-sided anytime tests: their capital is a
martingale at the true mean (exact expectation by enumeration, with a wrong mean as the negative control); Holm's
step-down against its closure."""

from itertools import combinations, product

import numpy as np
import pytest

from faqstats.confseq import BETS, BettingConfidenceSequences, OneSidedTests, holm

# a three-point increment law on [0, 1] with mean 0.4 (a grid point of the 2001-point grid)
VALUES, PROBS = np.array([0.0, 0.5, 1.0]), np.array([0.45, 0.3, 0.25])
MEAN = float(VALUES @ PROBS)


def _log_capital(cs):
    """The sequence's log capital over its grid (every candidate, none rejected at the tiny level used)."""
    if cs.bet == "mixture":
        return np.logaddexp.reduce(cs.log_bets, axis=-1) - np.log(cs.log_bets.shape[-1])
    if cs.bet == "agrapa":
        return cs.log_plus
    return np.logaddexp(cs.log_plus, cs.log_minus) - np.log(2.0)


def _expected_capital(bet, columns, n=4):
    """``E[K_n(m)]`` at the grid's ``columns``, by enumerating the ``3^n`` paths (ranges [0, 1] announced)."""
    total = 0.0
    for path in product(range(VALUES.size), repeat=n):
        cs = BettingConfidenceSequences(1, alpha=1e-12, truncation=0.9, horizon=10, bet=bet)
        for i in path:
            cs.update([VALUES[i]], [0.0], [1.0])
        assert cs.alive[0, columns].all()  # (not rejected: their capital moved at every step)
        total = total + np.prod(PROBS[list(path)]) * np.exp(_log_capital(cs)[0, columns])
    return total


@pytest.mark.parametrize("bet", BETS)
def test_every_bet_is_a_martingale_at_the_true_mean_and_grows_elsewhere(bet):
    cs = BettingConfidenceSequences(1, bet=bet)
    at = int(np.argmin(np.abs(cs.grid - MEAN)))
    assert cs.grid[at] == pytest.approx(MEAN, abs=1e-12)
    wrong = int(np.argmin(np.abs(cs.grid - (MEAN + 0.15))))
    expected = _expected_capital(bet, [at, wrong, at - 300])
    assert expected[0] == pytest.approx(1.0, abs=1e-9)
    # negative control: a wrong candidate's capital is not a martingale (it grows on average)
    assert expected[1] > 1.05 and expected[2] > 1.05, expected


@pytest.mark.parametrize("bet", ["agrapa", "mixture"])
def test_other_bets_cover_and_shrink(bet):
    rng = np.random.default_rng(1)
    misses, widths = 0, []
    for _ in range(40):
        cs = BettingConfidenceSequences(1, alpha=0.1, truncation=0.9, bet=bet)
        covered = True
        for x in rng.choice(VALUES, size=150, p=PROBS):
            cs.update([x], [0.0], [1.0])
            low, high = cs.interval()
            covered &= bool(low[0] <= MEAN <= high[0])
        misses += not covered
        widths.append(high[0] - low[0])
    assert misses <= 8 and np.median(widths) < 0.45, (misses, np.median(widths))  # alpha = 0.1; not vacuous


def test_an_unknown_bet_is_refused():
    with pytest.raises(ValueError, match="bet must be one of"):
        BettingConfidenceSequences(2, bet="kelly")
    with pytest.raises(ValueError, match="bet must be"):
        OneSidedTests(2, 0.5, bet="mixture")


@pytest.mark.parametrize("bet", ["plug-in", "agrapa"])
def test_one_sided_capital_is_a_supermartingale_under_its_null_only(bet):
    # E[K^+_n] at m: 1 when m is the mean, < 1 when the mean is below m (the null 'mean <= m'), > 1 above
    def expected(m, n=4):
        plus = minus = 0.0
        for path in product(range(VALUES.size), repeat=n):
            t = OneSidedTests(1, m, alpha=0.05, truncation=0.9, horizon=10, bet=bet)
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


def test_one_sided_p_values_are_the_running_maxima():
    t = OneSidedTests(2, [0.2, 0.8], alpha=0.05, truncation=0.9)
    seen = np.zeros(2)
    for x in [0.9, 0.1, 0.9, 0.9, 0.0, 0.9]:
        t.update([x, x], [0.0, 0.0], [1.0, 1.0])
        seen = np.maximum(seen, t.log_plus)
    p_above, p_below = t.p_values()
    assert np.allclose(p_above, np.exp(-seen)) and np.all(p_below <= 1.0) and p_above[0] < p_above[1]


def _closed_bonferroni(p, alpha):
    """The closure of Bonferroni's local tests: reject H_i when every intersection holding it is rejected."""
    m = len(p)
    rejected = []
    for i in range(m):
        subsets = [s for r in range(1, m + 1) for s in combinations(range(m), r) if i in s]
        rejected.append(all(min(p[j] for j in s) <= alpha / len(s) for s in subsets))
    return np.array(rejected)


def test_holm_is_the_closure_of_bonferroni():
    rng = np.random.default_rng(0)
    n_some = 0
    for _ in range(300):
        p = rng.uniform(0, 0.08, size=5) ** rng.uniform(0.5, 2)
        got = holm(p, 0.05)
        assert got.tolist() == _closed_bonferroni(p, 0.05).tolist(), p
        n_some += 0 < got.sum() < 5
    assert n_some > 50  # (partial rejections, where step-down and the closure could disagree, were exercised)
    # negative control: Bonferroni alone is not the closure (it rejects less)
    p = np.array([0.004, 0.02, 0.03, 0.9])
    assert holm(p, 0.05).sum() == 1 and (p <= 0.05 / 4).sum() == 1
    assert holm(np.array([0.004, 0.015, 0.02]), 0.05).tolist() == [True, True, True]
