"""What a session takes, checked (its predictor, the bank's ids, per-question values as a sequence in the bank's
order or a mapping by question id, the outcomes), and its parameters as ``session.json`` stores them."""

import math
import numbers
import os
from collections.abc import Mapping

import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from ..estimands import as_estimand
from ..estimator import PAIEstimator
from ..intervals import interval_rule_name
from ..io import check_question_ids, json_safe, load_factor_model, sampler_spec, unsaved_reason
from ..sampling import check_costs

__all__ = ["bank_ids", "check_outcome", "check_question_clusters", "n_questions_of", "per_question",
           "session_config", "session_estimator", "session_predictor", "shown"]

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
    """A new session's ``config`` (plain JSON): the parameters of ``estimator`` (a PAIEstimator), the session's
    own, and the per-question values over the bank's ``ids``."""
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
    """The :class:`~faqstats.PAIEstimator` a session's ``config`` describes (its parameters checked by its loop)."""
    alpha = config["alpha"]
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be a float in (0, 1), got {alpha!r}.")
    if not isinstance(config["confidence_sequence"], (bool, np.bool_)):
        raise TypeError(f"confidence_sequence must be True or False, got {config['confidence_sequence']!r}.")
    track_cs = bool(config["confidence_sequence"]) or config["stop_when_width"] is not None
    params = {name: config[name] for name in (*_ALWAYS, "interval")}
    params |= {name: config[name] for name in _UNLESS_DEFAULT if name in config}
    return PAIEstimator(predictor, sampler, confidence_sequence=float(alpha) if track_cs else False, **params)


def session_predictor(factor_model):
    """The predictor a session computes with and saves: loaded from a path; one saved as another as that."""
    if isinstance(factor_model, (str, os.PathLike)):
        factor_model = load_factor_model(factor_model)
    saved = getattr(factor_model, "saved_predictor", None)  # what its file gives back (unfitted: itself)
    return factor_model if saved is None else saved()


def n_questions_of(fm, question_ids):
    """The bank size of a predictor (checked: one a session can save), or of ``question_ids`` without one."""
    if fm is None:
        if question_ids is None:
            raise ValueError("a session without a predictor (the sample mean) needs question_ids.")
        return len(question_ids)
    if not (callable(getattr(fm, "fit", None)) and callable(getattr(fm, "posterior", None))):
        raise TypeError("predictor (factor_model) must be a fitted predictor (a built-in one or a faqstats.Predictor), "
                        f"or the path of a saved one, or None, got {type(fm).__name__}.")
    reason = unsaved_reason(fm)  # a session is saved (and resumed) with its predictor
    if reason is not None:
        raise TypeError(f"a session needs a predictor it can save: {reason}")
    try:
        check_is_fitted(fm)
    except NotFittedError:
        raise ValueError("predictor is not fitted: fit it (or load a saved one) first.") from None
    return fm.question_factors_.shape[0] if hasattr(fm, "question_factors_") else fm.n_features_in_


def check_outcome(value, qid):
    """``value`` as a float in [0, 1] (1 correct, 0 wrong), the error naming question ``qid``."""
    if isinstance(value, (str, bytes)):  # "1" or "yes": parse it where it was read, not here
        raise ValueError(f"outcome for question id {qid!r} must be a number in [0, 1], got the string {value!r}.")
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"outcome for question id {qid!r} must be a number in [0, 1], got {value!r}.") from None
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"outcome for question id {qid!r} must be in [0, 1] (1 correct, 0 wrong), got {value!r}.")
    return value


def per_question(values, ids, name):
    """``values`` in the bank's question order: a mapping ``{question id: value}`` must cover every question
    (keys matched as strings; others ignored); a sequence is returned as it is."""
    if not isinstance(values, Mapping):
        if isinstance(values, (str, bytes)):
            raise TypeError(f"{name} must be a sequence with one entry per question or a mapping "
                            "{question id: value}, not a string.")
        return values
    given = {}
    for key, value in values.items():
        text = str(key)
        if text in given:
            raise ValueError(f"{name}: question id {text!r} appears more than once.")
        given[text] = value
    text_ids = [str(q) for q in ids]
    missing = [q for q in text_ids if q not in given]
    if missing:
        raise ValueError(f"{name} has no entry for {len(missing)} of the bank's {len(ids)} question ids: "
                         f"{shown(missing)}.")
    return [given[q] for q in text_ids]  # (ids of other questions are ignored: a table of a larger bank)


def shown(ids):
    """The first five of ``ids`` for an error message."""
    return ", ".join(map(repr, ids[:5])) + (" ..." if len(ids) > 5 else "")


def check_question_clusters(clusters, ids):
    """``clusters`` (in the bank's order) as a list of ids, all str or all int; a bad one named by its question id."""
    values = list(clusters.tolist() if isinstance(clusters, np.ndarray) else clusters)
    if len(values) != len(ids):
        raise ValueError(f"clusters must hold one cluster id per question ({len(ids)}), got {len(values)}.")
    out = []
    for qid, value in zip(ids, values):
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, (str, numbers.Integral)):
            raise ValueError(f"clusters: question id {qid!r} has cluster {value!r}; cluster ids must be "
                             "strings or integers (every question needs one).")
        out.append(value if isinstance(value, str) else int(value))
    if len({type(v) for v in out}) > 1:
        raise ValueError("clusters must be all strings or all integers (not a mix).")
    return out


def bank_ids(question_ids, fm, n_questions):
    """The bank's ids as a list (str or int) and their type name; checked against the model's ids."""
    stored = getattr(fm, "question_ids_", None)
    if stored is None and getattr(fm, "feature_names_in_", None) is not None:
        stored = [str(q) for q in fm.feature_names_in_]
    if question_ids is None:
        question_ids = list(stored) if stored is not None else list(range(n_questions))
    if isinstance(question_ids, (str, bytes)):
        raise TypeError("question_ids must be a sequence of ids, not a single string.")
    ids = list(question_ids.tolist() if isinstance(question_ids, np.ndarray) else question_ids)
    if all(isinstance(q, str) for q in ids):
        id_type = "str"
    elif all(isinstance(q, numbers.Integral) and not isinstance(q, (bool, np.bool_)) for q in ids):
        id_type, ids = "int", [int(q) for q in ids]
    else:
        odd = [q for q in ids if not isinstance(q, (str, numbers.Integral)) or isinstance(q, (bool, np.bool_))]
        bad = odd[0] if odd else next(q for q in ids if not isinstance(q, type(ids[0])))
        raise TypeError(f"question_ids must be all strings or all integers; got {bad!r} ({type(bad).__name__}).")
    if len(ids) != n_questions:
        raise ValueError(f"question_ids has {len(ids)} entries, the factor model has {n_questions} questions.")
    text = [str(q) for q in ids]
    if len(set(text)) != len(text):
        dup = next(q for q in text if text.count(q) > 1)
        raise ValueError(f"question_ids must be unique; {dup!r} appears more than once.")
    if stored is not None:
        check_question_ids(fm, text)
    return ids, id_type
