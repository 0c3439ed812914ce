"""
A leaderboard of five models: simultaneous intervals, rank intervals and the best
==================================================================================

"Which of these models is best, and by how much?" is a question about all of them at once.
Five separate 95% intervals cover all five accuracies together only about
:math:`0.95^5 = 0.77` of the time. :class:`faqstats.LeaderboardEstimator` evaluates the
models from one budget (``budget`` counts the queries over all of them) and its result holds
for all of them at once: every accuracy and every pairwise difference with simultaneous
intervals, each model's interval of ranks, and the set of models that may be best. Why it is
valid: the user guide, "Many models at once".
"""

import matplotlib.pyplot as plt
import numpy as np

import faqstats as fq

bank = fq.make_synthetic_bank(n_models=150, n_questions=400, random_state=0)
fm = fq.LogisticFactorModel(n_components=4, regularization=0.01, max_iter=300, random_state=0).fit(bank.history)
names = ["alpha", "bravo", "charlie", "delta", "echo"]
outcomes = bank.new_outcomes[:5]
truth = dict(zip(names, outcomes.mean(axis=1)))

# 300 queries in all: 60 of the 400 questions for each model, each model its own PAI run
board = fq.LeaderboardEstimator(fm, budget=300, random_state=0).fit(outcomes, names=names)
# design="shared" asks every model the same questions, so that what related models have in common
# cancels in their differences:
# board = fq.LeaderboardEstimator(fm, budget=300, design="shared", random_state=0).fit(outcomes, names=names)
result = board.result_
print(result.summary())
print("true accuracies:", {name: round(float(acc), 3) for name, acc in truth.items()})

# %%
# Every pairwise difference with intervals that hold for all ten at once. A difference whose
# interval excludes 0 orders its two models; the rank intervals collect those orderings: a
# model's best rank is 1 + the number of models surely better, its worst is 5 - the number
# surely worse.

print(result.differences().round(3))
print(result.rank_intervals())
print("may be best:", result.may_be_best())

# %%
# The leaderboard, most accurate on top, with the simultaneous 95% intervals and the rank
# intervals in the labels; the true accuracies are marked in black.

fig, ax = plt.subplots(figsize=(7, 3.2), layout="constrained")
result.plot(ax=ax)
order = result.to_frame().index[::-1]  # the plot's rows, bottom to top
ax.plot([truth[name] for name in order], np.arange(len(order)), "k|", ms=14, mew=2, label="true accuracy")
ax.legend(loc="lower right", fontsize=8)
ax.set_title("five models, 300 queries in all")
plt.show()

# %%
# Why simultaneous: over 400 seeded evaluations of the same five models, how often do all five
# intervals cover their models' accuracies at once? The per-model 95% intervals
# (``conf_int(simultaneous=False)``) are narrower, but at least one of the five misses in about
# a fifth of the runs; the simultaneous ones are built to miss in about 5% (with 400 runs the
# Monte Carlo standard error of a share near 0.95 is 0.011).

theta = outcomes.mean(axis=1)
all_covered = {"per-model 95%": [], "simultaneous 95%": []}
for seed in range(400):
    res = fq.LeaderboardEstimator(fm, budget=300, random_state=seed).fit(outcomes, names=names).result_
    for label, simultaneous in (("per-model 95%", False), ("simultaneous 95%", True)):
        ci = res.conf_int(simultaneous=simultaneous)
        all_covered[label].append(bool(np.all((ci["lower"] <= theta) & (theta <= ci["upper"]))))
for label, hits in all_covered.items():
    print(f"{label} intervals covered all five accuracies in {np.mean(hits):.0%} of 400 runs")
