"""The smallest RMSE any design-unbiased estimator can reach on the synthetic banks: python design_bound.py.

The banks of ``make_banks.py`` are drawn from known probabilities ``p_ij = expit(u_i' v_j)``. Given them
(more than any method knows), the answers ``y_ij`` are independent Bernoulli(p_ij), and for an estimator
of the bank's accuracy that is unbiased under a sampling design fixed in advance, with inclusion
probabilities ``pi_j`` summing to ``n``, the Godambe-Joshi bound says

    E (theta_hat - theta)^2 >= (1 / N^2) sum_j sigma_j^2 (1 / pi_j - 1),   sigma_j^2 = p_j (1 - p_j),

smallest at ``pi_j`` proportional to ``sigma_j``: ``((sum_j sigma_j)^2 / n - sum_j sigma_j^2) / N^2``.
PAI with the true probabilities as predictions and the law ``q_j ~ sigma_j`` has nothing left to learn
from the answers (the residuals of other questions are independent of them) and nearly reaches it (with
replacement its variance is ``((sum_j sigma_j)^2 - sum_j sigma_j^2) / (n N^2)``). A
model-based estimate (ProEval's posterior mean) is not bound by it: with the true ``p`` its error is the
unasked answers' noise alone, ``sum_{j unasked} sigma_j^2 / N^2``. The script prints the bound per bank
and budget, averaged over the test models of the experiments' splits (docs/results.md, "ProEval on
banks of other shapes").
"""

import numpy as np
from scipy.special import expit

from make_banks import BANKS, draw_bank  # beside this script

from faqstats.experiments import split_matrix

# the experiments' split options and budgets (queries)
SPLITS = {"large": ({}, (200, 400, 800)),
          "thin": (dict(history_fraction=0.4, complete_rows=True), (75, 150, 300)),
          "sparse": (dict(p_obs=0.15, n_full_obs=30, max_models=100), (75, 150, 375))}

if __name__ == "__main__":
    print("bank    budget  design-unbiased bound (RMSE)  model-based with true p (RMSE)")
    for name in BANKS:
        bank = draw_bank(name)
        N = bank.history.shape[1]
        options, budgets = SPLITS[name]
        _, new, rows = split_matrix(bank.history.astype(float), split_seed=0, **options)
        P = expit(bank.model_factors[rows] @ bank.question_factors.T)
        sigma = np.sqrt(P * (1 - P))
        for n in budgets:
            bound = (sigma.sum(1) ** 2 / n - (sigma**2).sum(1)) / N**2
            model_based = (sigma**2).sum(1) * (1 - n / N) / N**2
            print(f"{name:7s} {n:6d}  {np.sqrt(bound.mean()):28.4f}  {np.sqrt(model_based.mean()):30.4f}")
