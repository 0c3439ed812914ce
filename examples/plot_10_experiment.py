"""
Reproducing a results table with ``run_experiment``
===================================================

The tables of the "results" page come from :func:`faqstats.experiments.run_experiment`
(the ``faqstats experiment`` command): split a models x questions matrix into a history
and new models, fit the factor model on the history, run named methods at several
budgets on every new model for several seeds, and return tidy records, one row per
(method, budget, model, seed). :func:`faqstats.experiments.summarize` turns them into
the table: coverage with its Monte Carlo standard error, mean width, RMSE and the
effective sample size against the FPC sample mean.

Here, small: a synthetic bank's 220 models x 300 questions, 3 seeds, three budgets and
three methods: ``faq-equal`` (the default policy, ``HybridSampler()``, with the plain mean
of the increments), ``uniform-fpc`` (the honest baseline) and ``ht-uniform`` (the seed
paper's Bernoulli-sampling baseline). The results page's ``faq`` also learns increment
weights from the history by cross-fitting, which takes minutes rather than seconds. On
real data the same call takes ``load_response_matrix("openllm_v1.npz")``.
"""

import matplotlib.pyplot as plt
import numpy as np

import faqstats as fq
from faqstats.experiments import format_summary, run_experiment, summarize

bank = fq.make_synthetic_bank(n_models=200, n_questions=300, random_state=0)
matrix = np.vstack([bank.history, bank.new_outcomes])

out = run_experiment(
    matrix,
    history_fraction=0.8,
    budgets=[0.05, 0.1, 0.25],
    seeds=3,
    methods=["faq-equal", "uniform-fpc", "ht-uniform"],
    factor_model=fq.LogisticFactorModel(n_components=4, regularization=0.01, max_iter=300, random_state=0),
    random_state=0,
    n_jobs=1,
    verbose=False,
)
print(out.records.head())
table = summarize(out.records)
print(format_summary(table))
print(f"{out.elapsed:.1f} s, history {out.history_shape}")

# %%
# The ESS and coverage figures of the results page, drawn on ``Axes``.

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6), layout="constrained")
for method, rows in table.groupby("method", sort=False):
    ax1.plot(rows["budget"], rows["ess_fpc"], "o-", label=method)
    ax2.errorbar(rows["budget"], rows["coverage"], yerr=2 * rows["coverage_se"], fmt="o-", capsize=3, label=method)
ax1.set_xlabel("queries (of 300)")
ax1.set_ylabel("ESS against the FPC sample mean")
ax1.legend()
ax2.axhline(0.95, color="grey", ls="--", lw=1)
ax2.set_xlabel("queries (of 300)")
ax2.set_ylabel("coverage of the 95% interval (+/- 2 se)")
