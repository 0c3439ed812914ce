"""The synthetic banks of docs/results.md, "Banks of other shapes": python make_banks.py OUTDIR.

Each bank stacks the history and the new models of :func:`faqstats.make_synthetic_bank` into one
``outcomes`` matrix (int8, -1 never occurs: complete), as ``faqstats experiment --data`` reads it;
the experiment then splits it at random (history thinness and sparsity come from its options).
"""

import sys
from pathlib import Path

import numpy as np

import faqstats as fq

BANKS = {
    # name: (models, questions, rank)
    "large": (300, 8000, 6),  # large N: 8,000 questions
    "thin": (40, 3000, 4),  # run with 16 history models
    "sparse": (1200, 1500, 8),  # run with the history 85% missing
}



def draw_bank(name):
    """The :class:`faqstats.SyntheticBank` behind ``name`` (seeded by its position in ``BANKS``)."""
    n, N, k = BANKS[name]
    return fq.make_synthetic_bank(n_models=n, n_questions=N, n_new=0, n_components=k,
                                  random_state=100 + list(BANKS).index(name))


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out.mkdir(parents=True, exist_ok=True)
    for name in BANKS:
        bank = draw_bank(name)
        np.savez_compressed(out / f"{name}.npz", outcomes=bank.history.astype(np.int8))
        print(name, bank.history.shape, f"mean accuracy {bank.history.mean():.3f}")
