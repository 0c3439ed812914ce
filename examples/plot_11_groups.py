"""
Per-group accuracies and the macro average from one set of queries
===================================================================

Benchmarks are reported by subtask (MMLU's subjects, a suite's tasks) and their headline is
often the *macro* average, the mean of the subtasks' accuracies. ``fit(z, groups=...)`` gives
every group's estimate and interval from the same draws, exactly unbiased;
``estimand="macro"`` makes the headline the macro average; ``min_group_share`` keeps a share
of the draws spread evenly over the groups so that a small group is not left with a useless
interval. Why it is valid: the user guide, "Groups and weighted estimands".
"""

import matplotlib.pyplot as plt
import numpy as np

import faqstats as fq

bank = fq.make_synthetic_bank(n_models=150, n_questions=400, random_state=0)
fm = fq.LogisticFactorModel(n_components=4, regularization=0.01, max_iter=300, random_state=0).fit(bank.history)
groups = np.repeat(["algebra", "biology", "chemistry", "history"], [40, 80, 120, 160])
z = bank.new_outcomes[0]

est = fq.PAIEstimator(fm, budget=80, estimand="macro", min_group_share=0.3, random_state=0).fit(z, groups=groups)
print(est.result_.summary())
table = est.group_results_.to_frame()
table["truth"] = [z[groups == g].mean() for g in table.index]
print(table.round(3))

# %%
# Each group's 95% interval, and the Bonferroni intervals that hold for all four at once.

joint = est.group_results_.conf_int(simultaneous=True)
y = np.arange(len(table))
fig, ax = plt.subplots(figsize=(7, 3.5), layout="constrained")
ax.hlines(y + 0.12, joint["lower"], joint["upper"], color="0.6", lw=6, label="simultaneous 95%")
ax.errorbar(table["estimate"], y + 0.12, xerr=[table["estimate"] - table["lower"], table["upper"] - table["estimate"]],
            fmt="o", color="C0", capsize=3, label="each group's 95%")
ax.plot(table["truth"], y - 0.12, "k|", ms=14, mew=2, label="true accuracy")
ax.set_yticks(y, [f"{g} ({n} asked of {N})" for g, n, N in zip(table.index, table["n_asked"], table["n_questions"])])
ax.axvline(table["truth"].mean(), color="C3", ls=":", label="true macro average")
ax.set_xlabel("accuracy, 80 queries of 400")
ax.legend(loc="lower left", fontsize=8)
plt.show()
