"""
Early stopping with a confidence sequence
=========================================

A fixed-budget interval is valid only if the budget was fixed in advance: looking at it
after every answer and stopping when it looks narrow enough breaks its guarantee. With
``confidence_sequence=True``, :class:`faqstats.PAIEstimator` also tracks an anytime-valid
confidence sequence (hedged betting, Waudby-Smith and Ramdas), which contains the true
accuracy at every step at once with probability at least 95%; ``stop_when_width=w`` stops
as soon as it is ``w`` wide and reports it, valid at that data-dependent time.
"""

import matplotlib.pyplot as plt
import numpy as np

import faqstats as fq

bank = fq.make_synthetic_bank(n_models=150, n_questions=400, random_state=0)
fm = fq.LogisticFactorModel(n_components=4, regularization=0.01, max_iter=300, random_state=0).fit(bank.history)
z, theta = bank.new_outcomes[2], bank.new_accuracy[2]

est = fq.PAIEstimator(fm, fq.HybridSampler(), budget=300, batch_size=5, stop_when_width=0.2, random_state=0).fit(z)
print(est.result_.summary())
low, high = est.confint()
print(f"stopped on {est.stop_reason_!r} after {est.n_queries_} queries: [{low:.3f}, {high:.3f}], truth {theta:.3f}")

# the whole path: the same draws run to the maximum budget
full = fq.PAIEstimator(fm, fq.HybridSampler(), budget=300, batch_size=5, confidence_sequence=True, random_state=0).fit(z)
cs = full.confidence_sequence_  # (queries so far, low, high) after each round

fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
ax.fill_between(cs[:, 0], cs[:, 1], cs[:, 2], alpha=0.3, step="post", label="confidence sequence (anytime-valid)")
increments = full.queries_["increment"]
running = np.cumsum(increments) / np.arange(1, increments.size + 1)
ax.plot(np.arange(1, increments.size + 1), running, lw=1, label="running estimate")
ax.axhline(theta, color="k", ls="--", lw=1, label="true accuracy")
ax.axvline(est.n_queries_, color="C3", lw=1, label="stop_when_width=0.2")
ax.set_xlabel("queries")
ax.set_ylabel("accuracy")
ax.set_ylim(0, 1)
ax.legend(loc="lower right")
