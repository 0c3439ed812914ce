"""A history that grows: twelve new models evaluated in sequence, each joining the history afterwards.

Starting from 16 complete rows of openllm_v1 (random, seeded), models 1..12 are evaluated one after
another at a 5% budget with the Gaussian-process surrogate fitted on the history as it stands and the
default policy (``HybridSampler``). After its evaluation, model k joins the history as a partial row:
the answers of its first run (what ``faqstats history add`` appends), NaN elsewhere. The "static" arm
evaluates the same models with the 16-model history only. Each model's ESS against the FPC sample
mean is ``Var_FPC / MSE`` over 200 seeded runs (batched engine); 4 random sequences.

Usage: ``python docs/results/growing_history/run.py PATH/TO/openllm_v1.npz`` (writes ``growing_history.csv``
beside this script).
"""

import sys
from pathlib import Path

import numpy as np
import pandas as pd

import faqstats as fq
from faqstats.batched import simulate

HERE = Path(__file__).parent
N_START, N_NEW, SEQUENCES, RUNS, FRACTION = 16, 12, 4, 200, 0.05


def evaluate(history, z, budget, seed):
    """``(ESS, coverage, the asked answers of the first run)`` of one model with a predictor fitted on ``history``."""
    gp = fq.GaussianProcessSurrogate(random_state=0).fit(history)
    gens = [np.random.default_rng([seed, r]) for r in range(RUNS)]
    runs = simulate(z[None, :], gens, predictor=gp, sampler=fq.HybridSampler(), budget=budget, rows=np.zeros(RUNS, int))
    first = fq.PAIEstimator(gp, fq.HybridSampler(), budget, random_state=np.random.default_rng([seed, 0])).fit(z)
    N, theta = z.size, z.mean()
    var_fpc = z.var(ddof=1) * (1 - budget / N) / budget
    mse = float(np.mean((runs.estimate - theta) ** 2))
    covered = float(np.mean((runs.low <= theta) & (theta <= runs.high)))
    return var_fpc / mse, covered, first.queries_


def main(path):
    data = np.load(path, allow_pickle=False)
    Z = data["outcomes"].astype(float)
    Z[Z < 0] = np.nan
    Z = Z[~np.isnan(Z).any(axis=1)]
    budget = int(round(FRACTION * Z.shape[1]))
    rows = []
    for s in range(SEQUENCES):
        pick = np.random.default_rng(s).choice(Z.shape[0], N_START + N_NEW, replace=False)
        start, new = Z[pick[:N_START]], Z[pick[N_START:]]
        grown = start.copy()
        for k, z in enumerate(new, start=1):
            ess_g, cov_g, asked = evaluate(grown, z, budget, seed=1000 * s + k)
            ess_s, cov_s, _ = evaluate(start, z, budget, seed=1000 * s + k)
            rows.append((s, k, grown.shape[0], ess_g, cov_g, ess_s, cov_s))
            partial = np.full(z.size, np.nan)  # the new row: its first run's answers only
            partial[asked["question"]] = asked["outcome"]
            grown = np.vstack([grown, partial])
            print(rows[-1], flush=True)
    out = pd.DataFrame(rows, columns=["sequence", "k", "history_rows", "ess_grown", "coverage_grown", "ess_static",
                                      "coverage_static"])
    out.to_csv(HERE / "growing_history.csv", index=False)
    table = out.groupby("k")[["ess_grown", "ess_static", "coverage_grown", "coverage_static"]].mean()
    print(table.round(3).to_string())


if __name__ == "__main__":
    main(sys.argv[1])
