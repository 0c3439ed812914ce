"""A session's answers read by a model-based estimate: the session's own design (predictor, policy, budget, rounds)
run on held-out history models calibrates the interval, and the session's PAI result is the check."""

import sys
import warnings

import numpy as np
import pandas as pd
from sklearn.base import clone

from .._validation import check_alpha
from ..model_based import PAI_RUN_PARAMS, ModelBasedEstimator, min_calibration_runs

__all__ = ["model_based_estimator", "model_based_leaderboard", "session_design"]

# the design options a model-based run does not take (its calibration could not replay them)
_UNSUPPORTED = {"stop_when_width": None, "estimand": "micro", "stratify": False, "budget_cost": None,
                "min_group_share": 0.0}


def model_based_estimator(session, history, **params):
    """A :class:`~faqstats.ModelBasedEstimator` with ``session``'s design, calibrated on ``history`` and fitted to
    the session's answers.

    Every calibration run asks a held-out history model questions exactly as the session asked its model
    (the session's predictor, refitted without that model; its sampler, budget, batch size, refresh schedule and
    step weights), so the calibrated interval covers as it does for :meth:`ModelBasedEstimator.fit`:
    marginally, when the session's model is like the history's. The session's own PAI result is the check.

    Parameters
    ----------
    session : EvaluationSession
        A finished session (every draw of its budget answered) with a predictor, without groups, costs,
        clusters or a width stop.
    history : array-like of shape (n_models, N)
        The history the session's predictor was fitted on (NaN where not observed), its columns the session's
        questions.
    **params
        Other :class:`~faqstats.ModelBasedEstimator` parameters (``predictor``: the estimate's, default the average
        of the GP surrogate and an ability model on the session's draws; ``check_level``, ``checks``,
        ``max_calibration_models``, ``n_folds``, ``random_state``, ``verbose``).

    Returns
    -------
    ModelBasedEstimator

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=30, n_questions=40, n_components=2, random_state=0)
    >>> fm = fq.LogisticFactorModel(n_components=2, max_iter=60, random_state=0, verbose=False).fit(bank.history)
    >>> session = fq.EvaluationSession(fm, budget=8, random_state=0)
    >>> z = bank.new_outcomes[0]
    >>> while not session.done:
    ...     ids, _ = session.next_questions()
    ...     session.record(ids, [z[i] for i in ids])
    >>> est = session.model_based(bank.history, max_calibration_models=20, n_folds=2, random_state=0, verbose=False)
    >>> est.result_.design_based == session.result()
    True
    """
    est = session_design(session, history, **params).calibrate(history)
    return est.fit_queries(session.queries(), session.result())


def session_design(session, history, **params):
    """The unfitted :class:`~faqstats.ModelBasedEstimator` whose runs replay ``session``'s design.

    Parameters
    ----------
    session : EvaluationSession
        A finished session with a predictor and a plain design (refused otherwise, as
        :func:`model_based_estimator` says).
    history : array-like of shape (n_models, N)
        The history to calibrate on (only its shape is checked here).
    **params
        Other :class:`~faqstats.ModelBasedEstimator` parameters.

    Returns
    -------
    ModelBasedEstimator

    Examples
    --------
    >>> import faqstats as fq
    >>> fm = fq.LogisticFactorModel.from_factors(np.eye(4)[:, :2], model_factors=np.eye(2))
    >>> session = fq.EvaluationSession(fm, budget=2, random_state=0)
    >>> while not session.done:
    ...     ids, _ = session.next_questions()
    ...     session.record(ids, [1.0] * len(ids))
    >>> est = session_design(session, np.ones((3, 4)))
    >>> est.budget, type(est.sampler).__name__, est.pai_params["batch_size"]
    (2, 'HybridSampler', 1)
    """
    for name in ("sampler", "budget", "policy_predictor", "pai_params"):
        if name in params:
            raise TypeError(f"{name} is the session's own; a model-based estimate of a session takes its design.")
    if session.predictor is None:
        raise ValueError("A model-based estimate needs a session with a predictor (its policy); this one is the "
                         "sample mean's.")
    if not session.done or session.stop_reason != "budget":
        raise ValueError(f"The session has {session.n_draws} of its {session.budget} draws answered: the calibration "
                         "runs the whole design, so the model-based estimate needs the finished session.")
    if any(getattr(session, name) is not None for name in ("groups", "costs", "clusters")):
        raise ValueError("A model-based estimate of a session with groups, costs or clusters is not supported: "
                         "its calibration runs the plain design.")
    design = session.estimator().get_params(deep=False)
    changed = [name for name, default in _UNSUPPORTED.items() if design[name] != default]
    if changed:
        raise ValueError(f"A model-based estimate of a session with {', '.join(changed)} is not supported: its "
                         "calibration runs the plain design.")
    width = np.shape(history)[1] if np.ndim(history) == 2 else None
    if width != session.n_questions:
        raise ValueError(f"history must be a models x questions matrix with the session's {session.n_questions} "
                         f"questions as columns, got shape {np.shape(history)}.")
    pai_params = {name: design[name] for name in PAI_RUN_PARAMS}
    return ModelBasedEstimator(sampler=clone(session.sampler), budget=session.budget,
                               policy_predictor=clone(session.predictor), pai_params=pai_params, **params)


def model_based_leaderboard(sessions, history, alpha=0.05, **params):
    """Every finished session's model-based estimate, with intervals that hold for all models at once.

    One calibration per distinct design (the sessions of a leaderboard share theirs, up to a budget that differs
    by one); each model's conformal interval is taken at ``alpha / K`` (Bonferroni), so all ``K`` cover at once
    with probability at least ``1 - alpha`` when every model is like the history's. Each row keeps the
    design-based estimate, its interval (also at ``alpha / K``) and the check. A level of ``alpha / K`` needs
    ``ceil(K / alpha) - 1`` calibration runs (:func:`~faqstats.model_based.min_calibration_runs`; 199 for ten
    models at 0.05); with fewer the model-based intervals are [0, 1], the recommended ones are the design-based
    intervals, and a warning says so.

    Parameters
    ----------
    sessions : dict of str to EvaluationSession
        The models' finished sessions, by name.
    history : array-like of shape (n_models, N)
        The history the sessions' predictor was fitted on.
    alpha : float in (0, 1), default=0.05
        One minus the joint level.
    **params
        Other :class:`~faqstats.ModelBasedEstimator` parameters, as for :func:`model_based_estimator`.

    Returns
    -------
    pandas.DataFrame
        Indexed by model: ``estimate``, ``lower``, ``upper`` (model-based), ``design_based``, ``design_lower``,
        ``design_upper``, ``flagged``, and the ``recommended_lower``, ``recommended_upper`` (the design-based
        interval where the check flags the model).
    """
    alpha = check_alpha(alpha)
    level = alpha / len(sessions)
    calibrated, rows = {}, []
    for name, session in sessions.items():
        est = session_design(session, history, **params)
        with np.printoptions(threshold=sys.maxsize):  # every step weight in the key, not an ellipsis
            key = repr(sorted(est.get_params(deep=False).items(), key=lambda kv: kv[0]))
        if key not in calibrated:  # the calibration runs depend on the design only
            calibrated[key] = est.calibrate(history)
        result = calibrated[key].fit_queries(session.queries(), session.result()).result_
        low, high = result.conf_int(level)
        d_low, d_high = result.design_based.conf_int(level)
        rec_low, rec_high = result.recommended_interval(level)
        rows.append((name, result.estimate, low, high, result.design_based.estimate, d_low, d_high, result.flagged,
                     rec_low, rec_high))
    few = min(len(est.calibration_) for est in calibrated.values())
    if few < min_calibration_runs(level):  # each interval at alpha / K needs more runs than one at alpha
        warnings.warn(f"{len(sessions)} models at a joint level of {1 - alpha:g} take each interval at {level:.3g}, "
                      f"which needs {min_calibration_runs(level)} calibration runs; the history gave {few}: the "
                      "model-based intervals are [0, 1] and the recommended ones are the design-based intervals.",
                      UserWarning, stacklevel=3)
    columns = ["model", "estimate", "lower", "upper", "design_based", "design_lower", "design_upper", "flagged",
               "recommended_lower", "recommended_upper"]
    return pd.DataFrame(rows, columns=columns).set_index("model")
