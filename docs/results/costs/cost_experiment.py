"""Cost budgets on openllm_v1: PAI with costs vs the uniform sample mean per unit cost."""
import json, os, sys, time
from pathlib import Path
import numpy as np
import faqstats as fq
from faqstats.experiments import split_matrix

# assumed tokens per item (prompt with the leaderboard's few-shot context + completion, output
# tokens counted 4x): the data has no prompt lengths
TOKENS = {"arc": 1300, "gsm8k": 1500, "mmlu": 600, "truthfulqa": 400, "winogrande": 200}
n_models, n_seeds, frac = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
jitter = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
# the response matrix: FAQSTATS_DATA, else the data folder beside the repository
DATA = os.environ.get("FAQSTATS_DATA", Path(__file__).resolve().parents[4] / "shared" / "data" / "openllm_v1.npz")
M, meta = fq.load_response_matrix(DATA)
history, new, rows = split_matrix(M, complete_rows=True, split_seed=0)
groups = np.asarray(meta["groups"])
costs = np.array([TOKENS[g] for g in groups], dtype=float)
# within-benchmark spread of prompt lengths (sensitivity run): a fixed lognormal factor, mean 1
costs *= np.exp(jitter * np.random.default_rng(1).standard_normal(costs.size) - jitter**2 / 2)
N = costs.size
t0 = time.time()
fm = fq.LogisticFactorModel(n_components=16, regularization=0.1, max_iter=2000, random_state=0).fit(history)
print("fit", time.time() - t0, "history", history.shape, "new", new.shape, flush=True)
C = frac * costs.sum()
n_u = int(C // costs.mean())
pick = np.random.default_rng(0).choice(new.shape[0], size=min(n_models, new.shape[0]), replace=False)
out = {"uniform_exact": [], "pai": [], "pai_costs": [], "theta": [], "n_u": n_u, "C": C, "N": N,
       "tokens": TOKENS}
for i, r in enumerate(pick):
    z = new[r].astype(float)
    theta = z.mean()
    S2 = z.var(ddof=1)
    out["theta"].append(theta)
    out["uniform_exact"].append(((1 - n_u / N) * S2 / n_u, n_u * costs.mean()))
    for name, kw, fitkw in (("pai", {"budget": n_u}, {"costs": costs}),
                            ("pai_costs", {"budget_cost": C}, {"costs": costs})):
        for s in range(n_seeds):
            est = fq.PAIEstimator(fm, fq.HybridSampler(), random_state=1000 * s + int(r), **kw).fit(z, **fitkw) \
                if name == "pai_costs" else \
                fq.PAIEstimator(fm, fq.HybridSampler(), random_state=1000 * s + int(r), **kw).fit(z)
            lo, hi = est.confint()
            spent = float(costs[np.unique(est.queries_["question"])].sum())
            out[name].append((i, s, est.estimate_ - theta, float(lo <= theta <= hi), spent, len(est.queries_)))
    if i % 10 == 9:
        print(i + 1, time.time() - t0, flush=True)
with open(f"cost_{n_models}x{n_seeds}_{frac}_j{jitter}.json", "w") as fh:  # in the working directory
    json.dump(out, fh)
print("done", time.time() - t0)
