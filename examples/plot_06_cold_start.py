"""
Cold start: a new bank without history
======================================

A new bank has no history, but its questions resemble those of an old bank that has one.
:func:`faqstats.cold_start_factor_model` gives each new question the weighted average of
the factors of its nearest old questions, by cosine similarity of embeddings (e.g. of the
question texts), and the new model's prior from the old bank. The estimate is unbiased
whatever the transferred factors; informative ones narrow the interval, useless ones cost
little because the uniform floor ``tau`` bounds the inverse-probability weights.

Here the embeddings are the planted question factors of a synthetic bank seen through
noise (informative) or pure noise (useless).
"""

import matplotlib.pyplot as plt
import numpy as np

import faqstats as fq
from faqstats.batched import simulate

bank = fq.make_synthetic_bank(n_models=150, n_questions=400, random_state=0)
old, new = np.arange(250), np.arange(250, 400)  # the history covers only the old questions
source = fq.LogisticFactorModel(n_components=4, regularization=0.01, max_iter=300, random_state=0)
source.fit(bank.history[:, old])

rng = np.random.default_rng(0)
project = rng.normal(size=(bank.question_factors.shape[1], 16))
informative = bank.question_factors @ project + 0.5 * rng.normal(size=(400, 16))
useless = rng.normal(size=(400, 16))

outcomes = bank.new_outcomes[:, new]
truth = outcomes.mean(axis=1)
rows = np.repeat(np.arange(len(outcomes)), 5)
designs = {
    "uniform sample mean": dict(predictor=None, sampler=fq.UniformSampler(replace=False)),
    "cold start, random embeddings": dict(
        predictor=fq.cold_start_factor_model(source, useless[old], useless[new]), sampler=fq.HybridSampler()),
    "cold start, informative embeddings": dict(
        predictor=fq.cold_start_factor_model(source, informative[old], informative[new]), sampler=fq.HybridSampler()),
}
fig, ax = plt.subplots(figsize=(7, 3.5), layout="constrained")
variance = {}
for k, (name, kwargs) in enumerate(designs.items()):
    runs = simulate(outcomes, [np.random.default_rng(s) for s in range(rows.size)], rows=rows, budget=25, **kwargs)
    variance[name] = np.mean(runs.std_error**2)
    covered = np.mean((runs.low <= truth[rows]) & (truth[rows] <= runs.high))
    ax.hist(runs.high - runs.low, bins=20, alpha=0.5, label=name, color=f"C{k}")
    print(f"{name:36s} coverage {covered:.2f}, ESS {variance['uniform sample mean'] / variance[name]:.2f}")
ax.set_xlabel("width of the 95% interval, 25 queries of 150 new questions")
ax.set_ylabel("runs")
ax.legend()
