"""Many independent runs of one configured cell, to pin down its coverage (docs/results.md, "Banks of other shapes").

``faqstats experiment`` reconfigures ``auto`` from the history at every call and runs every method;
to measure one cell's coverage to +-0.003 this script configures once, with the one candidate that
``auto`` chose there (so the configuration, step weights included, is the experiment's), then runs
the batched engine over every test model with fresh seeds (``[start + s, model]``, disjoint from the
experiment's). It prints the coverage with its binomial and model-clustered standard errors and the
ratio of the mean squared error to the mean reported variance (1 when the variance estimate is unbiased).

    python coverage_runs.py banks/large.npz --candidate gp-16 --budget 400 --seeds 100 --start 2000
    python coverage_runs.py banks/thin.npz --history-fraction 0.4 --complete-rows \
        --candidate gp-shrink-0.8 --budget 150 --seeds 200 --start 5000
"""

import argparse
import time

import numpy as np

from faqstats import load_response_matrix
from faqstats.batched import simulate
from faqstats.configure import configure_from_history, default_candidates
from faqstats.experiments import split_matrix


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bank", help=".npz with an 'outcomes' matrix (-1 missing), as faqstats experiment reads it")
    ap.add_argument("--history-fraction", type=float, default=0.75)
    ap.add_argument("--complete-rows", action="store_true")
    ap.add_argument("--candidate", required=True, help="a name of faqstats.configure.default_candidates")
    ap.add_argument("--budget", type=int, required=True, help="queries")
    ap.add_argument("--seeds", type=int, default=100, help="runs per test model")
    ap.add_argument("--start", type=int, default=1000, help="first seed")
    args = ap.parse_args()

    m, _ = load_response_matrix(args.bank)
    history, new, _ = split_matrix(m, history_fraction=args.history_fraction, split_seed=0,
                                   complete_rows=args.complete_rows)
    t0 = time.time()
    candidates = default_candidates(history.shape[0], random_state=0, n_questions=history.shape[1])
    cfg = configure_from_history(history, args.budget, candidates={args.candidate: candidates[args.candidate]},
                                 random_state=0)
    est = cfg.estimator
    n_new = new.shape[0]
    rows = np.repeat(np.arange(n_new), args.seeds)
    generators = [np.random.default_rng([args.start + s, r]) for r in range(n_new) for s in range(args.seeds)]
    runs = simulate(new, generators, predictor=est.factor_model, sampler=est.sampler, budget=args.budget,
                    rows=rows, step_weights=est.step_weights, predict_every=cfg.predict_every)
    truth = new.mean(axis=1)[rows]
    err = runs.estimate - truth
    covered = (runs.low <= truth) & (truth <= runs.high)
    per_model = np.array([covered[rows == r].mean() for r in range(n_new)])
    cov = covered.mean()
    print(f"{args.bank}: {cfg.choice}, budget {args.budget}, {covered.size} runs: coverage {cov:.4f} "
          f"(binomial se {np.sqrt(cov * (1 - cov) / covered.size):.4f}, "
          f"model-clustered se {per_model.std(ddof=1) / np.sqrt(n_new):.4f}); "
          f"E[err^2] / E[se^2] {np.mean(err**2) / np.mean(runs.std_error**2):.3f}; "
          f"RMSE {np.sqrt(np.mean(err**2)):.4f}; {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
