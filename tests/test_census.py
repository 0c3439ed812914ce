"""Asking the whole bank gives the exact answer (issue 19, point 8).

Without replacement the last of N draws takes the one question left with q = 1, so its
Des Raj increment is theta itself on every path (enumerated below); with the budget fixed
at N the census estimate is that increment, with variance 0, in every path of the package.
"""

import numpy as np
import pytest

import faqstats as fq
from faqstats.batched import simulate
from test_unbiasedness import enumerate_sequential


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=60, n_questions=30, n_components=2, random_state=0)


@pytest.fixture(scope="module")
def fm(bank):
    return fq.LogisticFactorModel(n_components=2, max_iter=100, random_state=0).fit(bank.history)


def test_last_increment_of_a_census_is_theta_on_every_path():
    rng = np.random.default_rng(0)
    for trial in range(8):
        n, k = int(rng.integers(2, 5)), int(rng.integers(1, 3))
        fm = fq.LogisticFactorModel.from_factors(rng.normal(size=(n, k)) * 2, rng.normal(size=k), np.eye(k))
        z = rng.integers(0, 2, n).astype(float) if trial % 2 else np.round(rng.random(n), 2)
        est = fq.PAIEstimator(fm, fq.HybridSampler(tau=float(rng.uniform(0.05, 1))), budget=n,
                              batch_size=int(rng.integers(1, 3)))
        leaves = enumerate_sequential(est, z)
        assert len(leaves) > 1
        for _, phis in leaves:
            assert abs(phis[-1] - z.mean()) < 1e-12


def test_census_is_exact_with_zero_width_in_every_path(bank, fm):
    z = bank.new_outcomes[0]
    theta = z.mean()
    est = fq.PAIEstimator(fm, budget=30, random_state=3).fit(z)
    assert abs(est.estimate_ - theta) < 1e-12 and est.std_error_ == 0 and est.result_.variance_method == "census"
    low, high = est.conf_int()
    assert abs(low - theta) < 1e-12 and abs(high - theta) < 1e-12
    # one draw short of the bank: the usual interval
    assert fq.PAIEstimator(fm, budget=29, random_state=3).fit(z).std_error_ > 0
    runs = simulate(bank.new_outcomes, [np.random.default_rng(s) for s in range(4)], factor_model=fm, budget=30)
    np.testing.assert_allclose(runs.estimate, bank.new_outcomes[:4].mean(1), atol=1e-12)
    assert (runs.std_error == 0).all()
    session = fq.EvaluationSession(fm, budget=30, batch_size=7, random_state=0)
    while not session.done:
        ids, _ = session.next_questions()
        session.record(ids, [z[i] for i in ids])
    assert abs(session.result().estimate - theta) < 1e-12 and session.result().std_error == 0
    delta = theta - bank.new_outcomes[1].mean()
    for kwargs in ({}, {"design": "shared"}):
        paired = fq.PairedPAIEstimator(fm, budget=30, random_state=0, **kwargs).fit(z, bank.new_outcomes[1])
        assert abs(paired.estimate_ - delta) < 1e-12 and paired.std_error_ == 0
    ref = fq.PairedPAIEstimator(fm, budget=30, random_state=0).fit(z, reference=bank.new_outcomes[1])
    assert abs(ref.estimate_ - delta) < 1e-12 and ref.std_error_ == 0
    # with replacement N draws are no census
    assert fq.PAIEstimator(fm, fq.HybridSampler(replace=True), budget=30, random_state=0).fit(z).std_error_ > 0
