"""A session's parameters as ``session.json`` stores them (its ``config``), and the estimator they make."""

import numbers

import numpy as np

from ..estimands import as_estimand
from ..estimator import PAIEstimator
from ..intervals import interval_rule_name
from ..io import json_safe, sampler_spec
from ..sampling import check_costs
from .questions import check_question_clusters, per_question

__all__ = ["session_config", "session_estimator"]

# PAIEstimator parameters stored under their own names: these always...
_ALWAYS = ("budget", "batch_size", "stop_when_width")
# ...these only when not the default (a session that does not use them reads as older ones did), as stored
_UNLESS_DEFAULT = {
    "step_weights": (lambda v: v is None, lambda v: [float(x) for x in np.asarray(v, dtype=float).ravel()]),
    "dtype": (lambda v: v == "float64", None),
    "predict_every": (lambda v: isinstance(v, numbers.Integral) and v == 1, None),
    "estimand": (lambda v: as_estimand(v).is_bank_mean, lambda v: as_estimand(v).stored()),
    "min_group_share": (lambda v: not v, None),
    "stratify": (lambda v: not v, bool),
    "budget_cost": (lambda v: v is None, None),
}
_ORDER = ("step_weights", "dtype", "predict_every", "groups", "estimand", "min_group_share", "stratify", "costs",
          "budget_cost", "clusters")  # of the optional entries, as sessions have always written them


def session_config(estimator, ids, *, alpha, confidence_sequence, random_state, groups, costs, clusters):
    """A new session's ``config`` (plain JSON): ``estimator``'s parameters, the session's, the per-question values.

    Parameters
    ----------
    estimator : PAIEstimator
        Holds the session's policy and estimator parameters.
    ids : list of str or int
        The bank's ids.
    alpha, confidence_sequence, random_state, groups, costs, clusters
        As :class:`~faqstats.EvaluationSession` takes them.

    Returns
    -------
    dict
    """
    if random_state is None:
        random_state = int(np.random.SeedSequence().entropy)
    if isinstance(random_state, bool) or not isinstance(random_state, numbers.Integral):
        raise TypeError(f"random_state must be an int seed (or None for a fresh one), got "
                        f"{type(random_state).__name__}; a session stores its seed to resume exactly.")
    if random_state < 0:
        raise ValueError(f"random_state must be a non-negative int seed, got {random_state}.")
    params = estimator.get_params(deep=False)
    config = {"sampler": sampler_spec(params["sampler"]), **{name: params[name] for name in _ALWAYS}, "alpha": alpha,
              "confidence_sequence": confidence_sequence, "interval": interval_rule_name(params["interval"]),
              "random_state": int(random_state)}
    optional = {name: params[name] if stored is None else stored(params[name])
                for name, (is_default, stored) in _UNLESS_DEFAULT.items() if not is_default(params[name])}
    if groups is not None:
        optional["groups"] = np.asarray(per_question(groups, ids, "groups")).tolist()
    if costs is not None:
        optional["costs"] = check_costs(per_question(costs, ids, "costs"), len(ids), ids).tolist()
    if clusters is not None:
        optional["clusters"] = check_question_clusters(per_question(clusters, ids, "clusters"), ids)
    config |= {name: optional[name] for name in _ORDER if name in optional}
    notes = []
    config = json_safe(config, "config", notes)  # numpy scalars -> plain JSON types
    if notes:
        raise ValueError(f"session parameters must be storable as JSON: {notes[0]}")
    return config


def session_estimator(predictor, sampler, config):
    """The :class:`~faqstats.PAIEstimator` a session's ``config`` describes (its parameters checked by its loop).

    Parameters
    ----------
    predictor : fitted predictor or None
    sampler : Sampler
    config : dict
        As :func:`session_config` made it.

    Returns
    -------
    PAIEstimator
    """
    alpha = config["alpha"]
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be a float in (0, 1), got {alpha!r}.")
    if not isinstance(config["confidence_sequence"], (bool, np.bool_)):
        raise TypeError(f"confidence_sequence must be True or False, got {config['confidence_sequence']!r}.")
    track_cs = bool(config["confidence_sequence"]) or config["stop_when_width"] is not None
    params = {name: config[name] for name in (*_ALWAYS, "interval")}
    params |= {name: config[name] for name in _UNLESS_DEFAULT if name in config}
    return PAIEstimator(predictor, sampler, confidence_sequence=float(alpha) if track_cs else False, **params)

