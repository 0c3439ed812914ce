"""
inspect-ai: eval logs in, ``--sample-id`` out
=============================================

The loop of the inspect-ai tutorial on the real eval logs bundled with the tests
(``tests/data/inspect``: inspect-ai 0.3.285 with ``mockllm`` models on two tiny tasks).
:func:`faqstats.integrations.read_inspect_logs` reads every log under a directory into a
models x samples matrix; one earlier model ran with two epochs, so some of its scores are
0.5 and are thresholded for the factor model. The chosen samples of a round become one
``--sample-id`` value (:func:`faqstats.integrations.inspect_sample_id_arg`); instead of
running ``inspect eval``, this example reads the new model's scores for those samples
from its finished logs with :func:`faqstats.integrations.read_inspect_outcomes`.
"""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import faqstats as fq
from faqstats.integrations import inspect_sample_id_arg, read_inspect_logs, read_inspect_outcomes

try:
    DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "inspect"
except NameError:  # run interactively from examples/
    DATA = Path("..").resolve() / "tests" / "data" / "inspect"

H, models, question_ids = read_inspect_logs(DATA / "history", scorer="match")
print(H.shape, models, f"{np.isnan(H).mean():.0%} missing")
H01 = np.where(np.isnan(H), np.nan, H >= 0.5)
fm = fq.LogisticFactorModel(n_components=2, max_iter=100, random_state=0).fit(H01)

selectors = []


def ask(indices):
    """One inspect round: the --sample-id value, then the scores of the samples asked."""
    ids = [question_ids[i] for i in indices]
    selectors.append(inspect_sample_id_arg(ids))
    # in a real evaluation: inspect eval my_tasks.py --sample-id <value> --log-dir <round dir>
    return read_inspect_outcomes(DATA / "new_model", ids, scorer="match")


est = fq.PAIEstimator(fm, fq.HybridSampler(), budget=6, batch_size=3, random_state=0).fit(ask)
for k, value in enumerate(selectors):
    print(f"round {k}: --sample-id {value!r}")
print(est.result_.summary())

truth, _, _ = read_inspect_logs(DATA / "new_model", scorer="match")
theta = float(truth.mean())
low, high = est.confint()

# %%
# Which samples were asked, and the estimate against the mean score over all samples.

asked = np.isin(np.arange(len(question_ids)), est.queries_["question"])
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.4), layout="constrained", width_ratios=[3, 1])
ax1.bar(np.arange(len(question_ids)), truth[0], color=np.where(asked, "C1", "C7"))
ax1.set_xticks(range(len(question_ids)), question_ids, rotation=90, fontsize=8)
ax1.set_ylabel("new model's score")
ax1.set_title("orange: asked (6 of 14)")
ax2.vlines(0, low, high, lw=3, label="95% CI")  # clipped to [0, 1]; the estimate never is
ax2.plot(0, est.estimate_, "o", color="C0", label="estimate")
ax2.axhline(theta, color="k", ls="--", label="mean score, all samples")
ax2.set_xticks([])
ax2.set_ylim(0, max(1.05, est.estimate_ + 0.05))
ax2.legend(fontsize=8, loc="lower center")
