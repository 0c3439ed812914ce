"""The model-based estimator as statistics: calibration on the history alone, coverage, the check."""

import numpy as np
import pytest

import faqstats as fq
from faqstats.experiments import run_methods
from faqstats.model_based import ModelBasedEstimator


def test_the_experiment_calibrates_on_the_split_history_alone(monkeypatch):
    bank = fq.make_synthetic_bank(n_models=40, n_questions=30, n_new=3, n_components=2, random_state=0)
    seen = []
    calibrate = ModelBasedEstimator.calibrate

    def spy(self, history):
        seen.append(np.array(history, dtype=float))
        return calibrate(self, history)

    monkeypatch.setattr(ModelBasedEstimator, "calibrate", spy)
    runs = run_methods(bank.history, bank.new_outcomes, [4, 8], seeds=2, methods=["model-based"], verbose=False)
    assert len(seen) == 2  # one calibration per budget, shared by every new model and seed
    for H in seen:
        np.testing.assert_array_equal(H, bank.history)
        for z in bank.new_outcomes:  # no new model's row reached it
            assert not (H == z).all(axis=1).any()
    assert runs.records["covered"].notna().all() and len(runs.records) == 2 * 2 * 3


def test_calibration_models_are_complete_history_rows():
    bank = fq.make_synthetic_bank(n_models=40, n_questions=30, n_components=2, random_state=1)
    H = bank.history.copy()
    H[:10, 0] = np.nan  # ten incomplete rows: their accuracy is unknown
    est = ModelBasedEstimator(budget=5, n_folds=3, random_state=0, verbose=False).calibrate(H)
    complete = set(np.flatnonzero(~np.isnan(H).any(axis=1)).tolist())
    assert set(est.calibration_["row"].tolist()) <= complete
    report = est.calibration_report()
    assert list(report.index) == ["model-based", "design-based (PAI)"]
    assert report["guarantee"].tolist() == ["if the model is like the history's", "every model"]


@pytest.mark.slow
def test_calibrated_intervals_cover_exchangeable_new_models():
    """Seeded Monte Carlo: 40 random history/new splits of an 80-model synthetic bank, 4 new
    models each, 2 seeds: marginal coverage of the calibrated 90% interval within [0.84, 0.97]
    (320 runs, correlated within a split: about 2.5 standard errors of a binomial 0.9 plus
    the conformal rule's slack of one calibration point in 40)."""
    bank = fq.make_synthetic_bank(n_models=84, n_questions=60, n_new=0, n_components=2, random_state=7)
    M = bank.history
    M = M[~np.isnan(M).any(axis=1)]
    covered = []
    for split in range(40):
        perm = np.random.default_rng(split).permutation(M.shape[0])
        est = ModelBasedEstimator(budget=6, n_folds=10, random_state=split, verbose=False).calibrate(M[perm[4:]])
        for i in perm[:4]:
            for seed in range(2):
                low, high = est.set_params(random_state=seed).fit(M[i]).conf_int(0.1)
                covered.append(low <= M[i].mean() <= high)
    assert 0.84 <= np.mean(covered) <= 0.97
