"""Self-configuration from the history: the estimator :mod:`faqstats.selection` chose, with its report."""

from dataclasses import dataclass

import pandas as pd

from .estimator import PAIEstimator
from .results import table_summary
from .selection import (POLICY_MARGIN, PREDICT_EVERY_QUESTIONS, STACK_MAX_CELLS, THIN_HISTORY, default_candidates,
                        default_policies, default_predict_every, select_configuration)

__all__ = ["Configuration", "configure_from_history", "default_candidates", "default_policies", "default_predict_every",
           "POLICY_MARGIN", "PREDICT_EVERY_QUESTIONS", "STACK_MAX_CELLS", "THIN_HISTORY"]


@dataclass(frozen=True)
class Configuration:
    """What :func:`configure_from_history` chose, and why: the ``estimator`` ready to ``fit`` (its predictor refitted
    on the whole history), the ``choice`` (a ``table`` row's label, or ``"sample-mean"``) and the ``table`` of every
    (predictor, policy) validated with its ``predicted_ess`` against the FPC sample mean."""

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
        """The choice's predicted ESS against the FPC sample mean (1 for the sample mean)."""
        rows = self.table[self.table["candidate"] == self.choice]
        return 1.0 if rows.empty else float(rows["predicted_ess"].iloc[0])

    def summary(self):
        """The choice and the validation results as a statsmodels summary table."""
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

    Every predictor is validated with the default policy, the others with the best predictor; the largest
    validation ESS against the FPC sample mean wins (another policy by a margin of :data:`POLICY_MARGIN`).

    Parameters
    ----------
    history : array-like of shape (n_models, N)
        Earlier models' outcomes in [0, 1], NaN for not observed.
    budget : int
        Queries the new model will be asked.
    candidates : dict or None
        ``{name: unfitted predictor}``; ``None`` is :func:`default_candidates`.
    policies : dict or None
        ``{name: unfitted Sampler}``, the default first; ``None`` is :func:`default_policies`.
    validation_fraction : float in (0, 1), default=0.25
        Share of the complete history rows held out as validation models.
    n_runs : int or None, default=None
        Validation runs per candidate (``None``: sized to the bank and budget, in two rounds).
    predict_every : int or "auto", default="auto"
        Of the validation runs and the estimator; ``"auto"``: :func:`default_predict_every`.
    random_state : int, default=0
        Seeds the split, the fits and the runs.
    verbose : bool, default=True
        A progress bar over the validations, shown after two seconds.
    cache : dict or None
        Fits and validation runs, shared by calls for several budgets (the largest first).

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
    """
    s = select_configuration(history, budget, candidates=candidates, policies=policies,
                             validation_fraction=validation_fraction, n_runs=n_runs, predict_every=predict_every,
                             random_state=random_state, verbose=verbose, cache=cache)
    return Configuration(PAIEstimator(**s.params), *s[1:])
