"""docs/results.md, "The item response predictor and the randomised Bayesian-quadrature policy":
PAI with the GP surrogate or a 2PL, the default policy or the randomised BQ one, default weights,
on openllm_v1 (complete rows, split seed 0, 120 test models x 4 seeds), through the batched engine.

    python docs/results/predictors/compare_policies.py   # needs openllm_v1.npz in the data folder beside the repository
"""
import time
from pathlib import Path

import numpy as np

import faqstats as fq
from faqstats.batched import simulate
from faqstats.experiments import split_matrix
M, _ = fq.load_response_matrix(str(Path(__file__).resolve().parents[4] / "shared" / "data" / "openllm_v1.npz"))
H, new, _ = split_matrix(M, complete_rows=True, split_seed=0)
print(H.shape, new.shape, flush=True)
rng = np.random.default_rng(0)
rows_all = rng.choice(new.shape[0], size=min(120, new.shape[0]), replace=False)
Z = new[rows_all]
N = Z.shape[1]
seeds = 4
rows = np.repeat(np.arange(Z.shape[0]), seeds)
truth = Z.mean(1)[rows]
preds = {"gp": fq.GaussianProcessSurrogate(random_state=0).fit(H), "irt": fq.ItemResponseModel().fit(H)}
for budget_frac in (0.05, 0.1, 0.25):
    b = int(round(budget_frac * N))
    # uniform-FPC variance (exact) per model
    fpc = np.mean((1 - b / N) * Z.var(1, ddof=1) / b)
    for name, pr in preds.items():
        for sname, smp in (("hybrid", fq.HybridSampler()), ("vr", fq.VarianceReductionSampler()), ("vr-tau.25", fq.VarianceReductionSampler(tau=0.25))):
            t = time.time()
            gens = [np.random.default_rng(1000 * i + 7) for i in range(len(rows))]
            r = simulate(Z, gens, predictor=pr, sampler=smp, budget=b, rows=rows)
            mse = np.mean((r.estimate - truth) ** 2)
            cov = np.mean((r.low <= truth) & (truth <= r.high))
            print(f"{budget_frac:.2f} {name:4s} {sname:10s} ESS {fpc/mse:5.2f} cov {cov:.3f} rmse {np.sqrt(mse):.4f} ({time.time()-t:.0f}s)", flush=True)
