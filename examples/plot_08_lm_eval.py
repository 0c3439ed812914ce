"""
lm-evaluation-harness: history in, ``--samples`` out
====================================================

The loop of the lm-eval tutorial on the real harness output bundled with the tests
(``tests/data/lm_eval``: lm-eval 0.4.13 with a mock model on two tiny tasks, five
earlier models and one new one). The history is read from the runs' ``--log_samples``
files with :func:`faqstats.integrations.read_lm_eval_samples`. Each round's chosen
documents become the ``--samples`` JSON (:func:`faqstats.integrations.write_lm_eval_samples_arg`);
instead of starting lm-eval, this example reads the new model's scores for those
documents from its finished run with :func:`faqstats.integrations.read_lm_eval_outcomes`,
which is what the tutorial's ``ask`` does with the round's output.

The bank is tiny (20 documents), so the point is the plumbing, not the precision.
"""

import json
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import faqstats as fq
from faqstats.integrations import read_lm_eval_outcomes, read_lm_eval_samples, write_lm_eval_samples_arg

try:
    DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "lm_eval"
except NameError:  # run interactively from examples/
    DATA = Path("..").resolve() / "tests" / "data" / "lm_eval"

metric = {"faq_arith": "acc", "faq_count": "exact_match"}
filter = {"faq_arith": "none", "faq_count": "flexible-extract"}
H, models, question_ids = read_lm_eval_samples(DATA / "history", metric=metric, filter=filter)
print(H.shape, models, f"{np.isnan(H).mean():.0%} missing")

fm = fq.LogisticFactorModel(n_components=2, max_iter=100, random_state=0).fit(H)

# %%
# Ask the new model only the chosen documents.

new_run = DATA / "new_model"
out = Path(tempfile.mkdtemp())
rounds = []


def ask(indices):
    """One lm-eval round: the --samples file, then the scores of the documents asked."""
    ids = [question_ids[i] for i in indices]
    samples = write_lm_eval_samples_arg(ids, out / f"round-{len(rounds)}.json")
    rounds.append(samples)
    # in a real evaluation: lm_eval ... --samples out/round-k.json --log_samples --output_path ...
    return read_lm_eval_outcomes(new_run, ids, metric=metric, filter=filter)


est = fq.PAIEstimator(fm, fq.HybridSampler(), budget=8, batch_size=4, random_state=0).fit(ask)
print("--samples of each round:", json.dumps(rounds))
print(est.result_.summary())

truth, _, _ = read_lm_eval_samples(new_run, metric=metric, filter=filter)
theta = float(np.nanmean(truth))
print(f"the new model's accuracy over all {len(question_ids)} documents: {theta:.3f}")

# %%
# The estimate is unbiased: over many seeds its mean is the accuracy over the bank.

estimates = [fq.PAIEstimator(fm, fq.HybridSampler(), budget=8, batch_size=4, random_state=s).fit(truth[0]).estimate_
             for s in range(200)]

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained", width_ratios=[3, 2])
im = ax1.imshow(np.ma.masked_invalid(H), cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
ax1.set_yticks(range(len(models)), models)
ax1.set_xticks(range(len(question_ids)), question_ids, rotation=90, fontsize=7)
ax1.set_title("history (blank: not run)")
fig.colorbar(im, ax=ax1, label="score")
ax2.hist(estimates, bins=15, color="C0", alpha=0.7)
ax2.axvline(theta, color="k", ls="--", label="accuracy over the bank")
ax2.axvline(np.mean(estimates), color="C3", label="mean estimate, 200 seeds")
ax2.set_xlabel("estimate from 8 of 20 documents")
ax2.legend(fontsize=8)
