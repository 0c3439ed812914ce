"""The runs of ``faqstats experiment --seeds 100 --methods auto uniform-fpc`` on openllm_v1, in seed chunks.

``faqstats experiment`` writes nothing until every run is done; this script makes exactly its runs
(the same configurations, from ``configure_from_history`` with ``random_state=0``, largest budget
first with a shared cache, and the same generators ``[0, method_key(method), budget, model, seed]``;
checked against the CLI's records to 1e-15), one file per budget and seed, so that several processes
can share the seeds and a stopped run loses nothing:

    python seed_chunks.py config OUT                # the three configurations (about 4 min)
    python seed_chunks.py run OUT 0 50 & python seed_chunks.py run OUT 50 100 &
    python seed_chunks.py summary OUT               # summary.csv, the CLI's summary of these records

Data: openllm_v1.npz (``FAQSTATS_DATA``, else the data folder beside the repository), complete rows, 75% history, split seed 0.
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
from faqstats.experiments import split_matrix, summarize, write_csv
from faqstats.experiments.records import method_key
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
                        r = simulate(new, gens, predictor=est.factor_model, sampler=est.sampler, budget=b,
                                     step_weights=est.step_weights, predict_every=est.predict_every, rows=np.arange(n))
                    else:
                        r = simulate(new, gens, sampler=UniformSampler(replace=False), budget=b, rows=np.arange(n))
                    runs[name] = np.stack([r.estimate, r.std_error, r.low, r.high])
                np.savez(out / f"runs_{b}_{seed}.npz", auto=runs["auto"], uniform=runs["uniform-fpc"], truth=truth)
                print(b, seed, f"{time.time() - t0:.1f} s", flush=True)
    elif mode == "summary":  # the CLI's records, then its summary (faqstats.experiments.summarize)
        records = []
        for fraction, b in zip(FRACTIONS, budgets):
            for f in sorted(out.glob(f"runs_{b}_*.npz")):
                seed, d = int(f.stem.rsplit("_", 1)[1]), np.load(f)
                for name, key in (("auto", "auto"), ("uniform-fpc", "uniform")):
                    est, se, low, high = d[key]
                    records.append(pd.DataFrame({
                        "method": name, "budget_fraction": fraction, "budget": b, "model": np.arange(est.size),
                        "seed": seed, "truth": d["truth"], "estimate": est, "std_error": se, "low": low,
                        "high": high, "covered": (low <= d["truth"]) & (d["truth"] <= high), "n_queries": b}))
        table = summarize(pd.concat(records, ignore_index=True))
        write_csv(table, out / "summary.csv")
        print(table.to_string(index=False))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:] or ["help"])
