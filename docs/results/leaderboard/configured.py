"""The leaderboard of docs/results.md with the default configuration, on openllm_v1's usual split.

Usage (from the repository root; the data folder in $FAQSTATS_DATA)::

    python docs/results/leaderboard/configured.py [GROUPS]

Each model's run is configured from the history as ``PAIEstimator.from_history`` configures one run of the
per-model budget (the predictor, the policy and the step weights): the independent design of
``LeaderboardEstimator.from_history``. The runs are simulated with ``faqstats.batched.simulate`` (the same runs as
``PAIEstimator``'s), grouped as ``faqstats experiment --leaderboard K`` groups them (half K neighbours in accuracy,
half K at random), and read through ``JointResults`` as the estimator reads them: joint coverage of the accuracies,
the differences and the ranks, and the mean width of the difference intervals against K FPC sample means with
Bonferroni on the same groups. Writes ``configured.csv`` beside this script. (``faqstats experiment --leaderboard
5 10 --configure`` runs the same design model by model, more slowly.)
"""
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

import faqstats as fq
from itertools import combinations

from scipy.stats import rankdata

from faqstats.batched import simulate
from faqstats.experiments import split_matrix
from faqstats.joint import JointResults


def draw_groups(truths, K, n_groups, rng):
    """As the leaderboard experiment draws them: half K consecutive in accuracy order, half K at random."""
    order = np.argsort(truths, kind="stable")
    n_close = (n_groups + 1) // 2
    groups = [order[s:s + K] for s in rng.integers(0, truths.size - K + 1, size=n_close)]
    groups += [np.sort(rng.choice(truths.size, K, replace=False)) for _ in range(n_groups - n_close)]
    return np.array(groups), ["close"] * n_close + ["far"] * (n_groups - n_close)


G = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
OUT = Path(__file__).with_name("configured.csv")
m, _ = fq.load_response_matrix(Path(os.environ.get("FAQSTATS_DATA", "data")) / "openllm_v1.npz")
H, new, rows_ = split_matrix(m, complete_rows=True, split_seed=0)
theta = new.mean(1)
out = []
cache = {}
for b in (69, 35):
    t = time.time()
    cfg = fq.configure_from_history(H, b, random_state=0, cache=cache, verbose=False)
    est = cfg.estimator
    print("b", b, "configured in", round(time.time() - t), "s:", type(est.factor_model).__name__,
          type(est.sampler).__name__, flush=True)
    for K in (5, 10):
        groups, kinds = draw_groups(theta, K, G, np.random.default_rng([99, K]))
        rows = groups.ravel()
        t = time.time()
        r = simulate(new, [np.random.default_rng([11, K, b, i]) for i in range(rows.size)], predictor=est.factor_model,
                     sampler=est.sampler, budget=b, rows=rows, step_weights=est.step_weights,
                     predict_every=est.predict_every)
        u = simulate(new, [np.random.default_rng([12, K, b, i]) for i in range(rows.size)],
                     sampler=fq.UniformSampler(replace=False), budget=b, rows=rows)
        print(" K", K, "simulated in", round(time.time() - t), "s", flush=True)
        recs = []
        for g in range(G):
            sl = slice(g * K, (g + 1) * K)
            th = theta[groups[g]]
            true_d = np.array([th[i] - th[j] for i, j in combinations(range(K), 2)])
            top, bottom = rankdata(-th, method="min"), rankdata(-th, method="max")
            rec = {"kind": kinds[g]}
            for name, runs, how in (("auto", r, "max-t"), ("base", u, "bonferroni")):
                df = np.where(np.isfinite(runs.df[sl]), runs.df[sl], np.inf)
                jr = JointResults(runs.estimate[sl], np.diag(runs.std_error[sl] ** 2), tuple(map(str, range(K))),
                                  np.full(K, b), how, df)
                ci, dd, ri = jr.conf_int(), jr.differences(), jr.rank_intervals()
                rec[f"{name}_acc"] = bool(np.all((ci.lower <= th) & (th <= ci.upper)))
                rec[f"{name}_dif"] = bool(np.all((dd.lower <= true_d) & (true_d <= dd.upper)))
                rec[f"{name}_rank"] = bool(np.all((ri.best.to_numpy() <= bottom) & (top <= ri.worst.to_numpy())))
                rec[f"{name}_w"] = float(np.mean(dd.upper - dd.lower))
                if name == "auto":
                    c1 = jr.conf_int(simultaneous=False)
                    rec["naive_acc"] = bool(np.all((c1.lower <= th) & (th <= c1.upper)))
            recs.append(rec)
        R = pd.DataFrame(recs)
        row = {"K": K, "b": b, "groups": G, **R.drop(columns="kind").mean().to_dict()}
        row["width_ratio"] = row["auto_w"] / row["base_w"]
        out.append(row)
        print(json.dumps(row), flush=True)
        pd.DataFrame(out).to_csv(OUT, index=False)
print(pd.DataFrame(out).round(4).to_string())
