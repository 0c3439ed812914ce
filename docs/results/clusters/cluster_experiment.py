"""Clusters: PAI over clusters against the cluster sample mean (docs/results.md, "Clusters").

Usage, from the repository root (``PYTHONPATH=.``)::

    python docs/results/clusters/cluster_experiment.py openllm 100 3 0.1
    python docs/results/clusters/cluster_experiment.py synthetic 40 8 0.1

openllm: openllm_v1 (``FAQSTATS_DATA``, else the data folder beside the repository), complete rows, ``split_matrix(complete_rows=True,
split_seed=0)``, k = 16, regularization 0.1, consecutive items in clusters of 4 (174 clusters, the
last of 1 item); synthetic: the correlated-cluster bank of ``tests/exactness/test_clusters.py`` (40
clusters of 8, a model-specific logit effect of sd 2.5 per cluster) with a fitted k = 2 factor
model on its 120 history models. Budget: ``frac`` of the clusters, cluster draws. Designs:

* ``cluster mean (exact)``: uniform cluster draws without replacement, ``(C/N) mean Y_c``; its
  variance ``(C/N)^2 (1 - n/C) S_Y^2 / n`` is exact (no simulation): the ESS baseline;
* ``cluster mean``: the same design simulated through ``PAIEstimator(None, UniformSampler())``
  (its coverage), and ``naive``: the same draws read as a simple random sample of questions;
* ``PAI clusters``: ``PAIEstimator(fm, HybridSampler()).fit(z, clusters=)`` (cluster score
  root-sum-square, the default), and ``PAI clusters (sum)``: the cluster score summed;
* ``PAI questions``: question-level PAI asking as many questions as the cluster design
  (what drawing whole clusters costs against drawing questions; its own ESS baseline is the
  question-level FPC mean at that many questions).

Writes ``clusters_<bank>_<models>x<seeds>_<frac>.json`` (and, for openllm, the fitted factor model
``openllm_v1_split0_k16.npz``, reused when present) in the working directory and prints the table of
docs/results.md.
"""

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

import faqstats as fq
from faqstats._inference import fpc_mean, wald_interval

ROOT = Path(__file__).resolve().parents[3]  # the repository
sys.path.insert(0, str(ROOT / "tests"))
bank, n_models, n_seeds, frac = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
t0 = time.time()
if bank == "openllm":
    from faqstats.experiments import split_matrix

    M, meta = fq.load_response_matrix(os.environ.get("FAQSTATS_DATA", ROOT.parent / "shared/data/openllm_v1.npz"))
    history, new, rows = split_matrix(M, complete_rows=True, split_seed=0)
    cache = Path("openllm_v1_split0_k16.npz")  # the fitted model, reused by later runs in this directory
    if cache.exists():
        fm = fq.load_factor_model(cache)
    else:
        fm = fq.LogisticFactorModel(n_components=16, regularization=0.1, max_iter=2000, random_state=0).fit(history)
        fq.save_factor_model(fm, cache)
    clusters = np.arange(M.shape[1]) // 4
else:
    from test_clusters import correlated_cluster_bank

    outcomes, clusters, _ = correlated_cluster_bank()
    new = outcomes[120:]
    fm = fq.LogisticFactorModel(n_components=2, max_iter=300, random_state=0).fit(outcomes[:120])
print("fit", round(time.time() - t0, 1), "new models", new.shape, flush=True)
N = clusters.size
C = int(clusters.max()) + 1
sizes = np.bincount(clusters)
n = max(2, int(round(frac * C)))
pick = np.random.default_rng(0).choice(new.shape[0], size=min(n_models, new.shape[0]), replace=False)
runs = {k: [] for k in ("cluster mean", "naive", "PAI clusters", "PAI clusters (sum)", "PAI questions")}
exact = []
for i, r in enumerate(pick):
    z = new[r].astype(float)
    theta = z.mean()
    Y = np.bincount(clusters, z)
    exact.append((C / N) ** 2 * (1 - n / C) * Y.var(ddof=1) / n)
    for s in range(n_seeds):
        seed = 1000 * s + int(r)
        u = fq.PAIEstimator(None, fq.UniformSampler(), budget=n, random_state=seed).fit(z, clusters=clusters)
        lo, hi = u.conf_int()
        runs["cluster mean"].append((i, u.estimate_ - theta, u.std_error_**2, lo <= theta <= hi, hi - lo, u.n_queries_))
        asked = np.isin(clusters, u.queries_["cluster"])
        m, v = fpc_mean(z[asked], N)
        lo, hi = wald_interval(m, np.sqrt(v), df=asked.sum() - 1)
        runs["naive"].append((i, m - theta, v, lo <= theta <= hi, hi - lo, int(asked.sum())))
        for name, score in (("PAI clusters", "root-sum-square"), ("PAI clusters (sum)", "sum")):
            est = fq.PAIEstimator(fm, fq.HybridSampler(), budget=n, random_state=seed, cluster_score=score)
            est.fit(z, clusters=clusters)
            lo, hi = est.conf_int()
            runs[name].append((i, est.estimate_ - theta, est.std_error_**2, lo <= theta <= hi, hi - lo, est.n_queries_))
        k = int(round(n * N / C))  # as many questions as the cluster design asks on average
        est = fq.PAIEstimator(fm, fq.HybridSampler(), budget=k, random_state=seed).fit(z)
        lo, hi = est.conf_int()
        runs["PAI questions"].append((i, est.estimate_ - theta, est.std_error_**2, lo <= theta <= hi, hi - lo, k,
                                      (1 - k / N) * z.var(ddof=1) / k))
    if i % 10 == 9:
        print(i + 1, round(time.time() - t0, 1), flush=True)
out = {"bank": bank, "N": N, "C": C, "n": n, "exact": exact, "runs": runs}
with open(f"clusters_{bank}_{n_models}x{n_seeds}_{frac}.json", "w") as fh:
    json.dump(out, fh, default=float)

# the table: coverage, mean width, ESS = baseline variance / mean variance estimate (MSE-based in brackets)
base = np.array(exact)
print(f"\n{bank}: N={N}, {C} clusters, {n} cluster draws ({frac:.0%}), {len(pick)} models x {n_seeds} seeds "
      f"= {len(pick) * n_seeds} runs\n")
print("| design | questions asked | 95% coverage | mean width | ESS vs cluster mean (MSE-based) |")
print("|---|---:|---:|---:|---:|")
print(f"| cluster mean (exact) | {n * N / C:.1f} | | | 1 |")
for name, rows_ in runs.items():
    a = np.array([row[:6] for row in rows_], dtype=float)
    i = a[:, 0].astype(int)
    if name == "PAI questions":
        qbase = np.array([row[6] for row in rows_])
        ess = f"{qbase.mean() / a[:, 2].mean():.2f} ({qbase.mean() / np.mean(a[:, 1] ** 2):.2f}) vs question FPC mean"
    else:
        b = base[i]
        ess = f"{b.mean() / a[:, 2].mean():.2f} ({b.mean() / np.mean(a[:, 1] ** 2):.2f})"
    print(f"| {name} | {a[:, 5].mean():.1f} | {a[:, 3].mean():.3f} | {a[:, 4].mean():.4f} | {ess} |")
print("\ndone", round(time.time() - t0, 1))
