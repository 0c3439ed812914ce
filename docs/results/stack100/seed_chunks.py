"""The runs of ``faqstats experiment --seeds 100 --methods auto uniform-fpc`` on openllm_v1, in seed chunks.

``faqstats experiment`` writes nothing until every run is done; this script makes exactly its runs
(the same configurations, from ``configure_from_history`` with ``random_state=0``, largest budget
first with a shared cache, and the same generators ``[0, method_key(method), budget, model, seed]``;
checked against the CLI's records to 1e-15), one file per budget and seed, so that several processes
can share the seeds and a stopped run loses nothing:

    python seed_chunks.py config OUT                # the three configurations (about 4 min)
    python seed_chunks.py run OUT 0 50 & python seed_chunks.py run OUT 50 100 &
    python seed_chunks.py summary OUT               # summary.csv, as the CLI's columns

Data: ``../shared/data/openllm_v1.npz`` (or ``FAQSTATS_DATA``), complete rows, 75% history, split seed 0.
"""

import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from faqstats import UniformSampler, load_response_matrix
from faqstats.batched import simulate
from faqstats.configure import configure_from_history
from faqstats.experiments.runner import method_key, split_matrix
from faqstats.io import load_configuration, save_configuration

FRACTIONS = (0.25, 0.1, 0.05)  # largest first: its validation runs serve the smaller budgets


def bank():
    path = os.environ.get("FAQSTATS_DATA", Path(__file__).resolve().parents[4] / "shared" / "data" / "openllm_v1.npz")
    m, _ = load_response_matrix(path)
    history, new, _ = split_matrix(m, history_fraction=0.75, split_seed=0, complete_rows=True)
    return history, new


def main(argv):
    mode, out = argv[0], Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    history, new = bank()
    budgets = [int(round(f * history.shape[1])) for f in FRACTIONS]
    if mode == "config":
        cache = {}
        for b in budgets:
            cfg = configure_from_history(history, b, random_state=0, cache=cache)
            save_configuration(cfg, out / f"configuration_{b}.npz")
            print(b, cfg.choice, flush=True)
    elif mode == "run":
        start, stop = int(argv[2]), int(argv[3])
        n, truth = new.shape[0], new.mean(axis=1)
        for b in budgets:
            est = load_configuration(out / f"configuration_{b}.npz").estimator
            for seed in range(start, stop):
                t0, runs = time.time(), {}
                for name in ("auto", "uniform-fpc"):
                    gens = [np.random.default_rng([0, method_key(name), b, i, seed]) for i in range(n)]
                    if name == "auto":
                        r = simulate(new, gens, factor_model=est.factor_model, sampler=est.sampler, budget=b,
                                     step_weights=est.step_weights, predict_every=est.predict_every, rows=np.arange(n))
                    else:
                        r = simulate(new, gens, sampler=UniformSampler(replace=False), budget=b, rows=np.arange(n))
                    runs[name] = np.stack([r.estimate, r.std_error, r.low, r.high])
                np.savez(out / f"runs_{b}_{seed}.npz", auto=runs["auto"], uniform=runs["uniform-fpc"], truth=truth)
                print(b, seed, f"{time.time() - t0:.1f} s", flush=True)
    elif mode == "summary":
        rows = []
        for b in budgets:
            files = sorted(out.glob(f"runs_{b}_*.npz"))
            if not files:
                continue
            data = [np.load(f) for f in files]
            truth = np.concatenate([d["truth"] for d in data])
            var = {}
            for name, key in (("auto", "auto"), ("uniform-fpc", "uniform")):
                est, se, low, high = np.concatenate([d[key] for d in data], axis=1)
                covered = (low <= truth) & (truth <= high)
                var[name] = np.mean(se**2)
                rows.append({"method": name, "budget": b, "seeds": len(files), "n_runs": truth.size,
                             "coverage": covered.mean(), "coverage_se": np.sqrt(covered.mean() * (1 - covered.mean()) / truth.size),
                             "mean_width": np.mean(high - low), "rmse": np.sqrt(np.mean((est - truth) ** 2)),
                             "bias": np.mean(est - truth), "mean_variance": var[name]})
            for r in rows[-2:]:
                r["ess_fpc"] = var["uniform-fpc"] / r["mean_variance"]
        table = pd.DataFrame(rows)
        table.to_csv(out / "summary.csv", index=False)
        print(table.to_string(index=False))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:] or ["help"])
