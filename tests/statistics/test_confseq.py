"""Anytime-valid confidence sequences and stopping on width."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import faqstats as fq
from faqstats.confseq import BettingConfidenceSequence


@pytest.mark.slow
def test_running_coverage_on_bounded_iid_sequences():
    """Ville: P(theta ever excluded) <= alpha. 300 seeded Bernoulli(0.3) streams of 300 steps;
    tolerance: the miss rate must stay below alpha = 0.10 plus 3 binomial SEs (0.152)."""
    rng = np.random.default_rng(0)
    misses = 0
    for _ in range(300):
        cs = BettingConfidenceSequence(alpha=0.10, grid_size=501)
        ever_missed = False
        for x in rng.binomial(1, 0.3, size=300):
            cs.update(float(x), 0.0, 1.0)
            low, high = cs.interval()
            ever_missed |= not (low <= 0.3 <= high)
        misses += ever_missed
    assert misses / 300 <= 0.152


def test_sequence_shrinks_and_is_nested():
    cs = BettingConfidenceSequence()
    rng = np.random.default_rng(1)
    widths, last = [], (0.0, 1.0)
    for x in rng.binomial(1, 0.6, size=500):
        cs.update(float(x), 0.0, 1.0)
        low, high = cs.interval()
        assert last[0] <= low + 1e-12 and high <= last[1] + 1e-12  # running intersection
        last = (low, high)
        widths.append(high - low)
    assert widths[-1] < 0.25 and widths[-1] < widths[50]


def test_out_of_range_increment_is_refused():
    with pytest.raises(ValueError, match="outside its announced range"):
        BettingConfidenceSequence().update(2.0, 0.0, 1.0)


@settings(max_examples=60, deadline=None)
@given(
    z=st.lists(st.integers(0, 1), min_size=6, max_size=12),
    tau=st.floats(0.05, 1.0),
    replace=st.booleans(),
    batch=st.integers(1, 3),
    seed=st.integers(0, 1000),
)
def test_every_increment_lies_in_its_announced_range(z, tau, replace, batch, seed):
    """The ranges are what make the sequence valid; ``update`` raises if one is violated."""
    z = np.array(z, dtype=float)
    rng = np.random.default_rng(seed)
    fm = fq.LogisticFactorModel.from_factors(rng.normal(size=(z.size, 2)), rng.normal(size=2), np.eye(2))
    est = fq.PAIEstimator(
        fm, fq.HybridSampler(tau=tau, replace=replace), budget=5, batch_size=batch, confidence_sequence=True,
        random_state=seed,
    ).fit(z)
    assert est.confidence_sequence_.shape[1] == 3


@pytest.fixture(scope="module")
def setting():
    bank = fq.make_synthetic_bank(n_models=150, n_questions=300, n_new=8, random_state=2)
    fm = fq.LogisticFactorModel.from_factors(bank.question_factors, model_factors=bank.model_factors)
    return bank, fm


def test_stop_when_width_stops_early_and_reports_the_anytime_interval(setting):
    bank, fm = setting
    est = fq.PAIEstimator(fm, budget=300, stop_when_width=0.25, batch_size=5, random_state=0).fit(bank.new_outcomes[0])
    assert est.stop_reason_ == "width"
    assert est.n_queries_ < 300
    low, high = est.confint()
    assert high - low <= 0.25
    assert (low, high) == tuple(est.confidence_sequence_[-1, 1:])
    assert "anytime" in str(est.summary())
    with pytest.raises(ValueError, match="data-dependent"):
        est.confint(alpha=0.1)
    with pytest.raises(ValueError, match="BernoulliAIPW"):
        fq.PAIEstimator(fm, fq.BernoulliAIPW(), budget=20, stop_when_width=0.2).fit(bank.new_outcomes[0])


@pytest.mark.slow
def test_confidence_sequence_running_coverage_on_synthetic_bank(setting):
    """8 models x 25 seeds, 150 queries, batches of 10: theta inside the sequence at every
    round in at least 95% of runs (anytime validity); measured 1.00."""
    bank, fm = setting
    ok = []
    for i in range(8):
        for seed in range(25):
            est = fq.PAIEstimator(fm, budget=150, batch_size=10, confidence_sequence=True, random_state=seed)
            cs = est.fit(bank.new_outcomes[i]).confidence_sequence_
            theta = bank.new_accuracy[i]
            ok.append(np.all((cs[:, 1] <= theta) & (theta <= cs[:, 2])))
    assert np.mean(ok) >= 0.95


def test_log_capital_paths_match_the_sequence_on_its_grid():
    from faqstats.confseq import BettingConfidenceSequence, log_capital_paths

    rng = np.random.default_rng(5)
    x = rng.normal(0.4, 0.3, size=60).clip(-1, 2)
    lo, hi = np.full(60, -1.0), np.full(60, 2.0)
    cs = BettingConfidenceSequence(alpha=0.1, grid_size=101, truncation=0.9, horizon=60)
    for xi, a, b in zip(x, lo, hi):
        cs.update(xi, a, b)
    grid = cs.grid
    paths = log_capital_paths(np.tile(x, (grid.size, 1)), np.tile(lo, (grid.size, 1)), np.tile(hi, (grid.size, 1)),
                              grid, alpha=0.1, truncation=0.9, horizon=60)
    alive = (paths < np.log(10)).all(axis=1)
    np.testing.assert_array_equal(alive, cs.alive)
    assert 0 < alive.sum() < grid.size  # the check is not vacuous
