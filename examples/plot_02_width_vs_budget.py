"""
Interval width against the query budget
=======================================

How much narrower FAQ's interval is than the uniform sample mean's, budget by budget. The
runs go through :func:`faqstats.batched.simulate`, which makes exactly the draws
:class:`faqstats.PAIEstimator` makes for the same generators, for all runs at once.

The *effective sample size* (ESS) is the ratio of the sample mean's variance to FAQ's:
FAQ with ``n`` queries is as precise as the sample mean with ``ESS * n``.
"""

import matplotlib.pyplot as plt
import numpy as np

import faqstats as fq
from faqstats.batched import simulate

bank = fq.make_synthetic_bank(n_models=150, n_questions=400, random_state=0)
fm = fq.LogisticFactorModel(n_components=4, regularization=0.01, max_iter=300, random_state=0).fit(bank.history)

budgets = [10, 20, 40, 80, 160]
seeds = 5
rows = np.repeat(np.arange(len(bank.new_outcomes)), seeds)  # every new model, 5 runs each
methods = {
    "FAQ + PAI": dict(predictor=fm, sampler=fq.HybridSampler()),
    "uniform sample mean (FPC)": dict(predictor=None, sampler=fq.UniformSampler(replace=False)),
}
width = {name: [] for name in methods}
variance = {name: [] for name in methods}
coverage = {name: [] for name in methods}
truth = bank.new_accuracy[rows]
for budget in budgets:
    for name, kwargs in methods.items():
        gens = [np.random.default_rng(s) for s in range(len(rows))]
        runs = simulate(bank.new_outcomes, gens, budget=budget, rows=rows, **kwargs)
        width[name].append(np.mean(runs.high - runs.low))
        variance[name].append(np.mean(runs.std_error**2))
        coverage[name].append(np.mean((runs.low <= truth) & (truth <= runs.high)))

ess = np.array(variance["uniform sample mean (FPC)"]) / np.array(variance["FAQ + PAI"])
for b, e, c in zip(budgets, ess, coverage["FAQ + PAI"]):
    print(f"{b:4d} queries: ESS {e:.2f}, FAQ coverage {c:.2f}")

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.8), layout="constrained")
for name in methods:
    ax1.plot(budgets, width[name], "o-", label=name)
ax1.set_xscale("log")
ax1.set_xticks(budgets, [str(b) for b in budgets])
ax1.set_xlabel("queries (of 400)")
ax1.set_ylabel("mean width of the 95% interval")
ax1.legend()
ax2.plot(budgets, ess, "o-", color="C0")
ax2.axhline(1, color="grey", lw=1, ls="--")
ax2.set_xscale("log")
ax2.set_xticks(budgets, [str(b) for b in budgets])
ax2.set_xlabel("queries (of 400)")
ax2.set_ylabel("ESS against the sample mean")
fig.suptitle(f"{len(rows)} runs per budget ({len(bank.new_outcomes)} new models x {seeds} seeds)")
