"""
Comparing two models: paired queries
====================================

"Is the new checkpoint better?" is a question about the *difference* of two accuracies.
:class:`faqstats.PairedPAIEstimator` asks both models a question at every step, each from
its own policy, with the two draws coupled so that they share a question as often as
possible; what the two models have in common then cancels in the differenced increments.
The estimate of ``theta_A - theta_B`` stays exactly unbiased, with an exactly unbiased
variance estimate.

Here model B answers like model A except on 20% of the questions (a new version of A),
and the paired interval is compared with the difference of two independent evaluations
that spend the same number of answers.
"""

import matplotlib.pyplot as plt
import numpy as np

import faqstats as fq

bank = fq.make_synthetic_bank(n_models=150, n_questions=400, random_state=0)
fm = fq.LogisticFactorModel(n_components=4, regularization=0.01, max_iter=300, random_state=0).fit(bank.history)

rng = np.random.default_rng(1)
z_a = bank.new_outcomes[0]
z_b = z_a.copy()
flip = rng.random(z_a.size) < 0.2
z_b[flip] = bank.new_outcomes[1][flip]  # B differs from A on about 20% of the questions
delta = z_a.mean() - z_b.mean()
print(f"true difference {delta:+.3f}")

paired = fq.PairedPAIEstimator(fm, fq.HybridSampler(), budget=40, random_state=0).fit(z_a, z_b)
print(paired.result_.summary())

# %%
# Many runs: the paired design against two independent evaluations of 40 queries each
# (the same 80 answers). The standard error of the independent difference is
# ``sqrt(se_A**2 + se_B**2)``.

std_errors = {"paired (coupled)": [], "two independent runs": []}
covered = []
for seed in range(20):
    res = fq.PairedPAIEstimator(fm, fq.HybridSampler(), budget=40, random_state=seed).fit(z_a, z_b).result_
    lo, hi = res.conf_int()
    covered.append(lo <= delta <= hi)
    std_errors["paired (coupled)"].append(res.std_error)
    a = fq.PAIEstimator(fm, fq.HybridSampler(), budget=40, random_state=1000 + seed).fit(z_a).result_
    b = fq.PAIEstimator(fm, fq.HybridSampler(), budget=40, random_state=2000 + seed).fit(z_b).result_
    std_errors["two independent runs"].append(np.hypot(a.std_error, b.std_error))

ratio = np.mean(np.square(std_errors["paired (coupled)"])) / np.mean(np.square(std_errors["two independent runs"]))
print(f"variance, paired / independent: {ratio:.2f}; paired interval covered the truth in {np.mean(covered):.0%} of runs")

fig, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
ax.boxplot(list(std_errors.values()), tick_labels=list(std_errors), orientation="horizontal")
ax.set_xlabel("standard error of the estimated difference")
ax.set_title("B = A with 20% of answers redrawn; 80 answers each way")
