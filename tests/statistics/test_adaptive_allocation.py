"""The adaptive leaderboard design by seeded Monte Carlo (slow): joint coverage of its anytime-valid intervals at the
data-dependent stop, and the share of runs that name the true best model."""

import numpy as np
import pytest

import faqstats as fq
from faqstats.leaderboard import LeaderboardEstimator

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]


def test_joint_coverage_at_the_best_identified_stop_and_the_best_named():
    bank = fq.make_synthetic_bank(n_models=150, n_questions=300, n_new=60, random_state=2)
    fm = fq.LogisticFactorModel(n_components=3, max_iter=150, random_state=0).fit(bank.history)
    Z = bank.new_outcomes
    theta, N, K, runs = Z.mean(axis=1), Z.shape[1], 5, 200
    rng = np.random.default_rng(0)
    cover, correct, totals, far_share = [], [], [], []
    while len(cover) < runs:
        idx = rng.choice(Z.shape[0], K, replace=False)
        th = theta[idx]
        top = np.sort(th)[::-1]
        if top[0] - top[1] < 0.05:  # one model leads by a clear margin
            continue
        board = LeaderboardEstimator(fm, budget=K * N, design="adaptive", stop="best",
                                     random_state=len(cover)).fit(Z[idx])
        ci = board.result_.conf_int()
        cover.append(np.all((ci.lower.to_numpy() <= th) & (th <= ci.upper.to_numpy())))
        correct.append(board.result_.may_be_best() == [str(int(np.argmax(th)))])
        totals.append(board.n_queries_.sum())
        worst = np.argsort(th)[:2]  # the two least accurate models get a small share of the queries
        far_share.append(board.n_queries_[worst].sum() / board.n_queries_.sum())
    # 200 runs: a binomial standard error of 0.015 at 0.95; the sequences are conservative, so a one-sided band
    assert np.mean(cover) >= 0.93, np.mean(cover)
    assert np.mean(correct) >= 0.93, np.mean(correct)
    assert np.median(totals) < K * N / 2, np.median(totals)  # stops well before asking everything
    assert np.median(far_share) < 2 / 5 * 0.75, np.median(far_share)  # below their even share (2 of 5 models)
