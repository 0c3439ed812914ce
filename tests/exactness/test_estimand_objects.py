"""Estimands are objects (faqstats.estimands.Estimand): strings and arrays still work and give the
same numbers; each owns its weights, inference, strata shares and census; one written here runs."""

import json
import math

import numpy as np
import pytest

import faqstats as fq
from faqstats.estimands import BankMean, Estimand, MacroAverage, WeightedAverage, as_estimand
from tests.exactness.test_unbiasedness import TOL, enumerate_sequential


class FirstHalf(Estimand):
    """The accuracy on the bank's first half (a linear estimand written outside faqstats)."""

    def question_weights(self, codes, n_questions):
        w = (np.arange(n_questions) < n_questions // 2).astype(float)
        return w / w.sum()


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=60, n_questions=40, n_components=2, n_new=2, random_state=0)


@pytest.fixture(scope="module")
def fm(bank):
    return fq.LogisticFactorModel(n_components=2, max_iter=100, random_state=0).fit(bank.history)


GROUPS = np.repeat(["a", "b", "c"], [10, 12, 18])


def test_strings_and_arrays_name_the_built_in_estimands():
    assert as_estimand("micro") == BankMean() and as_estimand("macro") == MacroAverage()
    assert as_estimand([1.0, 3.0]) == WeightedAverage([0.25, 0.75]) != WeightedAverage([0.5, 0.5])
    assert as_estimand(MacroAverage()) == MacroAverage() != BankMean()
    assert BankMean().is_bank_mean and not MacroAverage().is_bank_mean
    assert FirstHalf() == FirstHalf() != BankMean()
    with pytest.raises(ValueError, match="estimand must be 'micro', 'macro'"):
        as_estimand("median")
    with pytest.raises(ValueError, match="pass groups="):
        MacroAverage().question_weights(None, 4)
    with pytest.raises(ValueError, match="one weight per question"):
        WeightedAverage([1.0, 2.0]).question_weights(None, 3)
    with pytest.raises(ValueError, match="stratify is for"):
        WeightedAverage([1.0, 2.0]).strata_shares(np.array([1, 1]), 2)


@pytest.mark.parametrize("stratify", [False, True])
def test_objects_give_the_strings_numbers(bank, fm, stratify):
    z = bank.new_outcomes[0]
    pairs = [("micro", BankMean()), ("macro", MacroAverage())]
    if not stratify:
        w = np.linspace(0.5, 2.0, 40)
        pairs.append((w, WeightedAverage(w)))
    for given, obj in pairs:
        a = fq.PAIEstimator(fm, budget=20, estimand=given, stratify=stratify, random_state=4).fit(z, groups=GROUPS)
        b = fq.PAIEstimator(fm, budget=20, estimand=obj, stratify=stratify, random_state=4).fit(z, groups=GROUPS)
        assert a.result_ == b.result_
        assert a.result_.method == (obj.stratified_method if stratify else obj.method)
        assert a.group_results_.to_frame().equals(b.group_results_.to_frame())


def test_a_census_reports_each_estimands_exact_value(bank, fm):
    z = bank.new_outcomes[1].astype(float) * np.tile([1.0, 0.1, 1 / 3, 0.7], 10)
    codes = np.unique(GROUPS, return_inverse=True)[1]
    macro = math.fsum(math.fsum(z[codes == g]) / np.count_nonzero(codes == g) for g in range(3)) / 3
    w = np.linspace(0.5, 2.0, 40)
    for estimand, exact, stratify in ((MacroAverage(), macro, False), (MacroAverage(), macro, True),
                                      ("micro", math.fsum(z) / 40, True),
                                      (WeightedAverage(w), math.fsum(w / w.sum() * z), False)):
        est = fq.PAIEstimator(fm, budget=40, estimand=estimand, stratify=stratify, random_state=0).fit(z, groups=GROUPS)
        assert est.result_.estimate == exact and est.result_.std_error == 0
        low, high = est.conf_int()
        assert low <= exact <= high


def test_an_estimand_written_outside_faqstats_is_exactly_unbiased():
    """A linear estimand of its own weights: its increments are a martingale (enumerated on a tiny
    bank), and the estimator reports its weighted inference."""
    V = np.array([[1.2], [-0.7], [0.3], [2.0], [-1.5]])
    fm = fq.LogisticFactorModel.from_factors(V, np.zeros(1), np.eye(1))
    z = np.array([1.0, 0.0, 0.5, 1.0, 0.25])
    est = fq.PAIEstimator(fm, fq.HybridSampler(tau=0.5), budget=3, estimand=FirstHalf())
    leaves = enumerate_sequential(est, z)  # asserts every estimand's increments are martingale differences
    p = np.array([prob for prob, _ in leaves])
    heads = np.array([phis[:, 0].mean() for _, phis in leaves])
    assert abs(p @ heads - z[:2].mean()) < TOL
    result = fq.PAIEstimator(fm, budget=4, estimand=FirstHalf(), random_state=0).fit(z).result_
    assert result.method == "pai-weighted" and np.isfinite(result.std_error)
    census = fq.PAIEstimator(fm, budget=5, estimand=FirstHalf(), random_state=0).fit(z).result_
    assert census.estimate == math.fsum(z[:2] * 0.5) and census.std_error == 0


def test_sessions_store_estimands_as_before(tmp_path, bank, fm):
    z = bank.new_outcomes[0]
    ids = [f"q{j}" for j in range(40)]
    w = np.linspace(0.5, 2.0, 40)
    for i, (estimand, stored) in enumerate(((MacroAverage(), "macro"), (WeightedAverage(w), w.tolist()))):
        s = fq.EvaluationSession.create(tmp_path / str(i), fm, ids, budget=12, groups=GROUPS, estimand=estimand,
                                        random_state=0)
        assert json.loads((tmp_path / str(i) / "session.json").read_text())["config"]["estimand"] == stored
        while not s.done:
            got, _ = s.next_questions()
            s = fq.EvaluationSession.load(tmp_path / str(i))
            s.record(got, [float(z[int(q[1:])]) for q in got])
        est = fq.PAIEstimator(fm, budget=12, estimand=estimand, random_state=0).fit(z, groups=GROUPS)
        assert s.result() == est.result_
    with pytest.raises(ValueError, match="a session stores its estimand"):
        fq.EvaluationSession(fm, ids, budget=12, estimand=FirstHalf(), random_state=0)
