"""The leaderboard's joint guarantees, by seeded Monte Carlo on a synthetic bank (slow)."""

import numpy as np
import pytest
from scipy.stats import rankdata

import faqstats as fq
from faqstats.leaderboard import LeaderboardEstimator

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]


def test_joint_coverage_of_accuracies_differences_and_ranks_with_a_negative_control():
    bank = fq.make_synthetic_bank(n_models=150, n_questions=200, n_new=40, random_state=1)
    fm = fq.LogisticFactorModel(n_components=3, max_iter=150, random_state=0).fit(bank.history)
    Z, K, runs = bank.new_outcomes, 5, 240
    theta = Z.mean(axis=1)
    rng = np.random.default_rng(0)
    hits = {"accuracies": [], "differences": [], "ranks": [], "per-model 95%": []}
    for rep in range(runs):
        idx = rng.choice(Z.shape[0], K, replace=False)
        th = theta[idx]
        r = LeaderboardEstimator(fm, budget=K * 25, random_state=rep).fit(Z[idx]).result_
        ci, single = r.conf_int(), r.conf_int(simultaneous=False)
        hits["accuracies"].append(np.all((ci.lower <= th) & (th <= ci.upper)))
        hits["per-model 95%"].append(np.all((single.lower <= th) & (th <= single.upper)))
        d = r.differences()
        true_d = np.array([th[i] - th[j] for i in range(K) for j in range(i + 1, K)])
        hits["differences"].append(np.all((d.lower <= true_d) & (true_d <= d.upper)))
        ranks, true_rank = r.rank_intervals(), rankdata(-th, method="min")
        hits["ranks"].append(np.all((ranks.best.to_numpy() <= true_rank) & (true_rank <= ranks.worst.to_numpy())))
    cover = {k: float(np.mean(v)) for k, v in hits.items()}
    # 240 runs: a binomial standard error of 0.014 at 0.95; the band is about +-2.5 of them
    assert 0.915 <= cover["accuracies"] <= 0.985, cover
    assert 0.915 <= cover["differences"] <= 0.985, cover
    assert cover["ranks"] >= 0.93, cover
    assert cover["per-model 95%"] <= 0.86, cover  # five separate 95% intervals cover jointly about 0.77
