"""
Quickstart: an estimate and its interval against the sample mean
=================================================================

A synthetic bank (:func:`faqstats.make_synthetic_bank`) stands in for a benchmark: a
history of 150 earlier models' 0/1 outcomes on 400 questions, and 20 new models whose
accuracy we want from 40 questions each. We fit the factor model once on the history,
then estimate each new model's accuracy two ways:

* FAQ: :class:`faqstats.HybridSampler` chooses the questions from the factor model's
  predictions and :class:`faqstats.PAIEstimator` corrects for that choice;
* the honest baseline: a uniform sample of 40 questions without replacement and its
  mean, with the finite-population correction.

Both intervals are valid; FAQ's are narrower because the history predicts the answers.
"""

import matplotlib.pyplot as plt
import numpy as np

import faqstats as fq

bank = fq.make_synthetic_bank(n_models=150, n_questions=400, random_state=0)
fm = fq.LogisticFactorModel(n_components=4, regularization=0.01, max_iter=500, random_state=0)
fm.fit(bank.history)

# %%
# One new model
# -------------
# ``fit`` takes the model's outcomes (or a function from question indices to outcomes:
# only the chosen questions are ever read).

z = bank.new_outcomes[0]
est = fq.PAIEstimator(predictor=fm, sampler=fq.HybridSampler(tau=0.5, replace=False), budget=40, random_state=0)
est.fit(z)
low, high = est.confint(alpha=0.05)
print(f"FAQ:          {est.estimate_:.3f}  95% CI [{low:.3f}, {high:.3f}]  truth {bank.new_accuracy[0]:.3f}")
print(est.summary())

baseline = fq.PAIEstimator(sampler=fq.UniformSampler(replace=False), budget=40, random_state=0).fit(z)
low, high = baseline.confint()
print(f"sample mean:  {baseline.estimate_:.3f}  95% CI [{low:.3f}, {high:.3f}]")

# %%
# Every new model
# ---------------

faq, uniform = [], []
for i, z in enumerate(bank.new_outcomes):
    faq.append(fq.PAIEstimator(fm, fq.HybridSampler(), budget=40, random_state=i).fit(z).result_)
    uniform.append(fq.PAIEstimator(sampler=fq.UniformSampler(replace=False), budget=40, random_state=i).fit(z).result_)

order = np.argsort(bank.new_accuracy)
x = np.arange(len(order))
fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
for offset, results, label in [(-0.15, uniform, "uniform sample mean (FPC)"), (0.15, faq, "FAQ + PAI")]:
    est = np.array([results[i].estimate for i in order])
    ci = np.array([results[i].conf_int() for i in order])
    ax.errorbar(x + offset, est, yerr=[est - ci[:, 0], ci[:, 1] - est], fmt="o", ms=4, capsize=2, label=label)
ax.plot(x, bank.new_accuracy[order], "k_", ms=12, mew=2, label="true accuracy")
ax.set_xlabel("new model (sorted by true accuracy)")
ax.set_ylabel("accuracy, 95% interval")
ax.set_title("40 queries of 400")
ax.legend(loc="upper left")

width_faq = np.mean([np.diff(r.conf_int())[0] for r in faq])
width_uniform = np.mean([np.diff(r.conf_int())[0] for r in uniform])
print(f"mean width: FAQ {width_faq:.3f}, sample mean {width_uniform:.3f}")
