"""Self-configuration from the history: which predictor, which weights, and what to expect.

:func:`configure_from_history` chooses between PAI's predictors and the sample mean by
cross-fitting on the history alone (docs/results.md, "self-configuration").
"""

from __future__ import annotations

import numbers
import time
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.base import clone

from ._progress import progress_bar
from ._validation import check_history, check_scalar, check_seed
from .estimator import PAIEstimator
from .factor_model import LogisticFactorModel
from .results import table_summary
from .sampling import HybridSampler, UniformSampler
from .step_weights import learn_step_weights, validation_split
from .surrogate import GaussianProcessSurrogate

__all__ = ["Configuration", "configure_from_history", "default_candidates", "default_predict_every"]

#: questions per prediction refresh interval step of :func:`default_predict_every`
PREDICT_EVERY_QUESTIONS = 2048


def default_predict_every(n_questions):
    """The predictions' refresh schedule (``PAIEstimator(predict_every=...)``) chosen for a bank of
    ``n_questions`` by :func:`configure_from_history` and the experiments: every answer up to
    4,095 questions, then every ``N // 2048``-th (so a refresh costs about what 2,048 questions'
    predictions cost per answer; 40 at N = 82,756). Exactly unbiased whatever the schedule; the
    efficiency it costs is measured in docs/performance.md, "Scale targets (issue 16)".

    >>> default_predict_every(693), default_predict_every(12032), default_predict_every(100000)
    (1, 5, 48)
    """
    return max(1, int(n_questions) // PREDICT_EVERY_QUESTIONS)


def default_candidates(n_models, random_state=0):
    """The predictors tried by default: ``{"factor": LogisticFactorModel, "gp": GaussianProcessSurrogate}``
    (the factor rank capped by the number of history models)."""
    rank = int(max(1, min(16, n_models - 1)))
    return {"factor": LogisticFactorModel(n_components=rank, random_state=random_state),
            "gp": GaussianProcessSurrogate(random_state=random_state)}


@dataclass(frozen=True)
class Configuration:
    """What :func:`configure_from_history` chose, and why.

    Attributes
    ----------
    estimator : PAIEstimator
        Ready to ``fit(outcomes)`` a new model: the chosen predictor refitted on the whole
        history with its learned increment weights, or the FPC sample mean.
    choice : str
        The chosen candidate's name, or ``"sample-mean"``.
    table : pandas.DataFrame
        One row per candidate: ``candidate``, ``predicted_ess`` (validation variance of the FPC
        sample mean / the candidate's), ``variance_ratio`` (as in
        :class:`~faqstats.step_weights.StepWeights`), ``fit_seconds`` and ``validation_seconds``.
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
        items = {"Budget:": self.budget, "Chosen:": self.choice,
                 "Predicted ESS vs FPC mean:": f"{self.predicted_ess:.2f}",
                 "Validation models / runs:": f"{self.n_validation} / {self.n_runs}",
                 "Predictions refreshed every:": f"{self.predict_every} answer(s)",
                 "Seconds:": f"{self.seconds:.1f}"}
        notes = ["ESS: validation variance of the FPC sample mean / that of the candidate's weighted PAI estimate."]
        if self.choice == "sample-mean":
            notes.append("No predictor beat the sample mean on the validation models: the sample mean is used.")
        return table_summary("faqstats configuration from the history", items=items, table=self.table, index=False,
                             notes=notes)

    def __str__(self):
        return str(self.summary())


def _sample_mean(budget):
    """The FPC sample mean: PAI without a predictor, sampling uniformly without replacement."""
    return PAIEstimator(None, UniformSampler(replace=False), budget=budget)


def _cached_fit(cache, key, candidate, data):
    if key not in cache:
        cache[key] = clone(candidate).fit(data)
    return cache[key]


def _fpc_variance(Z, budget):
    """Mean variance of the sample mean of ``budget`` of the N outcomes, without replacement, over rows of ``Z``."""
    N = Z.shape[1]
    return float(np.mean((1.0 - budget / N) * Z.var(axis=1, ddof=1) / budget))


def configure_from_history(history, budget, *, candidates=None, validation_fraction=0.25, n_runs=None,
                           predict_every="auto", random_state=0, verbose=False, cache=None):
    """Choose the predictor and increment weights for ``budget`` queries from the history alone.

    Parameters
    ----------
    history : array-like of shape (n_models, N)
        Earlier models' outcomes in [0, 1], NaN for not observed.
    budget : int
        Queries the new model will be asked (at least 3, at most N).
    candidates : dict or None
        ``{name: unfitted estimator with posterior()}``; ``None`` is :func:`default_candidates`.
    validation_fraction : float in (0, 1), default=0.25
        Share of the complete history rows held out as validation models.
    n_runs : int or None, default=None
        Validation runs per candidate; ``None``: :func:`~faqstats.step_weights.default_runs`
        (2,000 on small banks, down to 200 on large ones).
    predict_every : int or "auto", default="auto"
        The predictions' refresh schedule of the validation runs and of the returned estimator;
        ``"auto"``: :func:`default_predict_every` (every answer on banks of up to 4,095 questions).
    random_state : int, default=0
        Seeds the split, the fits and the runs.
    verbose : bool, default=False
        A progress bar over the candidates.
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
    >>> cfg.choice in ("factor", "gp", "sample-mean"), cfg.estimator.budget
    (True, 20)
    >>> est = cfg.estimator.fit(bank.new_outcomes[0])
    """
    start = time.perf_counter()
    H = check_history(history, name="history")
    random_state = check_seed(random_state)
    budget = int(check_scalar(budget, "budget", kind=numbers.Integral, low=3, high=H.shape[1]))
    if predict_every == "auto":
        predict_every = default_predict_every(H.shape[1])
    predict_every = int(check_scalar(predict_every, "predict_every", kind=numbers.Integral, low=1))
    if candidates is None:
        candidates = default_candidates(H.shape[0], random_state)
    if not candidates:
        raise ValueError("candidates must name at least one predictor.")
    try:
        train, Z = validation_split(H, validation_fraction, random_state)
    except ValueError as exc:  # too few complete rows to validate anything on: the safe choice
        warnings.warn(f"configure_from_history: the sample mean, since no predictor can be validated ({exc})",
                      RuntimeWarning, stacklevel=2)
        table = pd.DataFrame(columns=["candidate", "predicted_ess", "variance_ratio", "fit_seconds",
                                      "validation_seconds"])
        seconds = time.perf_counter() - start
        return Configuration(_sample_mean(budget), "sample-mean", table, budget, 0, 0, seconds, predict_every)
    var_fpc = _fpc_variance(Z, budget)
    sampler = HybridSampler()
    rows, fitted = [], {}
    bar = progress_bar(len(candidates), "candidates", verbose)
    cache = {} if cache is None else cache
    for name, candidate in candidates.items():
        t0 = time.perf_counter()
        model = _cached_fit(cache, ("train", name), candidate, train)
        t1 = time.perf_counter()
        sw = learn_step_weights(H, None, budget=budget, sampler=sampler, validation_fraction=validation_fraction,
                                n_runs=n_runs, random_state=random_state, fitted_factor_model=model,
                                predict_every=predict_every, cache=cache)
        lam = sw.weights / sw.weights.sum()
        var = float(np.sum(lam**2 * sw.step_variance))  # the martingale's: increments are uncorrelated
        rows.append({"candidate": name, "predicted_ess": var_fpc / var if var > 0 else np.inf,
                     "variance_ratio": sw.variance_ratio, "fit_seconds": t1 - t0,
                     "validation_seconds": time.perf_counter() - t1})
        fitted[name] = sw
        bar.update(1)
    bar.close()
    table = pd.DataFrame(rows)
    best = table.loc[table["predicted_ess"].idxmax()]
    if best["predicted_ess"] > 1.0:
        choice = str(best["candidate"])
        model = _cached_fit(cache, ("whole", choice), candidates[choice], H)
        estimator = PAIEstimator(model, HybridSampler(), budget=budget, step_weights=fitted[choice].weights,
                                 predict_every=predict_every)
    else:
        choice, estimator = "sample-mean", _sample_mean(budget)
    seconds = time.perf_counter() - start
    return Configuration(estimator, choice, table, budget, sw.n_validation, sw.n_runs, seconds, predict_every)
