"""Self-configuration from the history: which predictor, which weights, and what to expect.

:func:`configure_from_history` chooses between PAI's predictors and the sample mean by
cross-fitting on the history alone (docs/results.md, "self-configuration"): the choice is
:func:`faqstats.selection.select_configuration`'s, and :class:`Configuration` holds the estimator
it chose with the report.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .estimator import PAIEstimator
from .results import table_summary
from .selection import (
    POLICY_MARGIN,
    PREDICT_EVERY_QUESTIONS,
    STACK_MAX_CELLS,
    THIN_HISTORY,
    default_candidates,
    default_policies,
    default_predict_every,
    select_configuration,
)

__all__ = ["Configuration", "configure_from_history", "default_candidates", "default_policies",
           "default_predict_every"]

# the choice's constants, importable from here as before
__all__ += ["POLICY_MARGIN", "PREDICT_EVERY_QUESTIONS", "STACK_MAX_CELLS", "THIN_HISTORY"]


@dataclass(frozen=True)
class Configuration:
    """What :func:`configure_from_history` chose, and why.

    Attributes
    ----------
    estimator : PAIEstimator
        Ready to ``fit(outcomes)`` a new model: the chosen predictor refitted on the whole
        history with its learned increment weights, or the FPC sample mean.
    choice : str
        The chosen candidate's label (a row of ``table``), or ``"sample-mean"``.
    table : pandas.DataFrame
        One row per (predictor, policy) validated: ``candidate`` (the label: the predictor's
        name, with ``"/policy"`` when the policy is not the default), ``predictor``,
        ``policy``, ``predicted_ess`` (validation variance of the FPC sample mean / the
        candidate's), ``variance_ratio`` (as in :class:`~faqstats.step_weights.StepWeights`),
        ``runs`` (the validation runs behind the row: fewer than the others' for a candidate left
        at the first round), ``fit_seconds`` and ``validation_seconds``.
    budget, n_validation, n_runs : int
    seconds : float
    predict_every : int
        The predictions' refresh schedule of the validation runs and of ``estimator``.
    """

    estimator: PAIEstimator
    choice: str
    table: pd.DataFrame
    budget: int
    n_validation: int
    n_runs: int
    seconds: float
    predict_every: int = 1

    @property
    def predicted_ess(self):
        """The chosen configuration's predicted ESS against the FPC sample mean (1 for the sample mean)."""
        rows = self.table[self.table["candidate"] == self.choice]
        return 1.0 if rows.empty else float(rows["predicted_ess"].iloc[0])

    def summary(self):
        """The choice and the candidates' validation results as a statsmodels summary table."""
        items = {"Budget:": self.budget, "Chosen (predictor/policy):": self.choice,
                 "Predicted ESS vs FPC mean:": f"{self.predicted_ess:.2f}",
                 "Validation models / runs:": f"{self.n_validation} / {self.n_runs}",
                 "Predictions refreshed every:": f"{self.predict_every} answer(s)",
                 "Seconds:": f"{self.seconds:.1f}"}
        notes = ["ESS: validation variance of the FPC sample mean / that of the candidate's weighted PAI estimate.",
                 "Every predictor is validated with the default policy; the other policies with the best predictor."]
        runs = self.table["runs"] if "runs" in self.table else None
        if runs is not None and runs.nunique() > 1:
            notes.append("Rows with fewer runs stayed at the first round: clearly worse than the best there.")
        if self.choice == "sample-mean":
            notes.append("No predictor beat the sample mean on the validation models: the sample mean is used.")
        return table_summary("faqstats configuration from the history", items=items, table=self.table, index=False,
                             notes=notes)

    def __str__(self):
        return str(self.summary())


def configure_from_history(history, budget, *, candidates=None, policies=None, validation_fraction=0.25,
                           n_runs=None, predict_every="auto", random_state=0, verbose=True, cache=None):
    """Choose the predictor, the policy and the increment weights for ``budget`` queries from the history alone.

    Every predictor is validated with the first (default) policy; the other policies with the
    predictor that did best. The (predictor, policy) with the largest validation ESS against
    the FPC sample mean wins, or the sample mean itself when none beats it; another policy than
    the default must beat the default's ESS with the same predictor by :data:`POLICY_MARGIN`
    (3%: a smaller tau makes heavier-tailed increments, and the best of several noisy
    validation figures is optimistic).

    Parameters
    ----------
    history : array-like of shape (n_models, N)
        Earlier models' outcomes in [0, 1], NaN for not observed.
    budget : int
        Queries the new model will be asked (at least 3, at most N).
    candidates : dict or None
        ``{name: unfitted estimator with posterior()}``; ``None`` is :func:`default_candidates`.
        A candidate whose fit on the training part equals an earlier one's (e.g. a rank the
        history cannot support) is validated once.
    policies : dict or None
        ``{name: unfitted Sampler}``, the default first; ``None`` is :func:`default_policies`.
        Their laws should not depend on the budget (as ``HybridSampler``'s with ``rho = gamma = 0``)
        for ``cache`` to share runs across budgets.
    validation_fraction : float in (0, 1), default=0.25
        Share of the complete history rows held out as validation models.
    n_runs : int or None, default=None
        Validation runs per candidate, every candidate validated in full. ``None``: sized to
        the bank and the budget (:func:`~faqstats.step_weights.default_runs`, at most
        :data:`~faqstats.selection.MAX_SELECTION_RUNS`, 100 from 1,000 queries on), in two
        rounds: every candidate with a quarter of them, then the full runs for the best and
        those not clearly worse (two standard errors, paired over the validation models; at
        most two), and another policy only if not clearly short of its margin. At most
        :data:`~faqstats.selection.MAX_VALIDATION_MODELS` validation models; a history of more
        than :data:`~faqstats.selection.MAX_HISTORY_MODELS` models is validated on a seeded
        subsample of them (the choice is refitted on them all).
    predict_every : int or "auto", default="auto"
        The predictions' refresh schedule of the validation runs and of the returned estimator;
        ``"auto"``: :func:`default_predict_every` (every answer on banks of up to 4,095 questions).
    random_state : int, default=0
        Seeds the split, the fits and the runs.
    verbose : bool, default=True
        A progress bar over the validations, shown once the configuration has taken two seconds
        (``False``: none).
    cache : dict or None
        Filled with the candidates' fits and validation runs; pass the same dict to configure
        several budgets with one set of fits (same history, candidates, split and seed), the
        largest budget first: its validation runs then serve the smaller budgets too.

    Returns
    -------
    Configuration

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=120, n_questions=80, n_components=2, random_state=0)
    >>> cfg = configure_from_history(bank.history, 20, n_runs=100, random_state=0)
    >>> cfg.choice in [*cfg.table["candidate"], "sample-mean"], cfg.estimator.budget
    (True, 20)
    >>> cfg.table.columns.tolist()[:3]
    ['candidate', 'predictor', 'policy']
    >>> est = cfg.estimator.fit(bank.new_outcomes[0])
    """
    chosen = select_configuration(history, budget, candidates=candidates, policies=policies,
                                  validation_fraction=validation_fraction, n_runs=n_runs,
                                  predict_every=predict_every, random_state=random_state, verbose=verbose,
                                  cache=cache)
    return Configuration(PAIEstimator(**chosen.params), chosen.choice, chosen.table, chosen.budget,
                         chosen.n_validation, chosen.n_runs, chosen.seconds, chosen.predict_every)
