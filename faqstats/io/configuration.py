"""What :func:`~faqstats.configure_from_history` chose, in a factor model file (format version 2): the chosen
predictor (none for the sample mean), the choice as its metadata's ``configuration`` and the step weights."""

import numpy as np
import pandas as pd

from ..configure import Configuration
from ..design import check_estimator
from ..estimator import PAIEstimator
from .checks import json_safe
from .models import load_model_file, save_predictor
from .npz import npz_path
from .samplers import sampler_from_spec, sampler_spec

__all__ = ["save_configuration", "load_configuration", "configuration_from"]


def save_configuration(configuration, path, *, question_ids=None, reader=None):
    """Write what :func:`~faqstats.configure_from_history` chose to one ``.npz`` file, without pickle.

    The predictor (none for the sample mean), the policy, step weights, budget, refresh schedule,
    predicted ESS and validation table; :func:`load_configuration` gives back an estimator that
    runs exactly as the configured one.

    Parameters
    ----------
    configuration : Configuration
        What :func:`~faqstats.configure_from_history` returned.
    path : str or os.PathLike
        Destination (``".npz"`` appended when missing).
    question_ids : sequence of str, optional
        The bank's unique ids, in the history's column order.
    reader : dict, optional
        How the history was read from harness output (:func:`~faqstats.io.check_reader_options`).

    Returns
    -------
    pathlib.Path
        The file written.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=120, n_questions=80, n_components=2, random_state=0)
    >>> cfg = fq.configure_from_history(bank.history, 20, n_runs=100, random_state=0)
    >>> save_configuration(cfg, pathlib.Path(tempfile.mkdtemp()) / "cfg").name
    'cfg.npz'
    """
    est, table, notes = configuration.estimator, configuration.table, []
    doc = {"choice": str(configuration.choice), "budget": int(est.budget), "predict_every": int(est.predict_every),
           "policy": sampler_spec(est.sampler), "predicted_ess": json_safe(configuration.predicted_ess, "predicted_ess",
                                                                           notes),
           "n_validation": int(configuration.n_validation), "n_runs": int(configuration.n_runs),
           "seconds": float(configuration.seconds), "configured_budget": int(configuration.budget),
           "table": {"columns": [str(c) for c in table.columns],
                     "rows": json_safe(table.to_numpy(dtype=object).tolist(), "table", notes)}, "notes": notes}
    weights = None
    if est.step_weights is not None:
        weights = np.asarray(est.step_weights, dtype=np.float64)[: doc["budget"]]
        if weights.shape != (doc["budget"],) or not np.all(np.isfinite(weights)) or np.any(weights <= 0):
            raise ValueError(f"Refusing to save: the step weights must be {doc['budget']} finite positive numbers.")
    n_questions = None
    if est.factor_model is None:
        if question_ids is None:
            raise ValueError("question_ids are needed to save a configuration without a predictor (the sample mean).")
        n_questions = len(list(question_ids))
    return save_predictor(est.factor_model, path, question_ids=question_ids, reader=reader,
                          configuration=(doc, weights), n_questions=n_questions)


def load_configuration(path):
    """Read a file written by :func:`save_configuration`: the :class:`~faqstats.configure.Configuration`.

    Parameters
    ----------
    path : str or os.PathLike
        The file, named as for :func:`save_configuration`.

    Returns
    -------
    Configuration
        Its ``estimator`` (unfitted, ``random_state=None``: set it) makes exactly the draws and the
        estimate of the one :func:`~faqstats.configure_from_history` returned, for the same seed.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=120, n_questions=80, n_components=2, random_state=0)
    >>> cfg = fq.configure_from_history(bank.history, 20, n_runs=100, random_state=0)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     est = load_configuration(save_configuration(cfg, pathlib.Path(tmp) / "cfg")).estimator
    >>> z = bank.new_outcomes[0]
    >>> est.set_params(random_state=0).fit(z).result_ == cfg.estimator.set_params(random_state=0).fit(z).result_
    True
    """
    model, meta, _ = load_model_file(path)
    return configuration_from(model, meta, npz_path(path))


def configuration_from(model, meta, path):
    """The :class:`~faqstats.configure.Configuration` of a file :func:`load_model_file` loaded (``path`` for errors)."""
    config = meta.get("configuration")
    if config is None:
        raise ValueError(f"{path} holds a predictor without a configuration: it was saved with save_factor_model "
                         "(faqstats fit-history without --budget).")
    try:
        sampler = sampler_from_spec(config["policy"])
        table = pd.DataFrame(config["table"]["rows"], columns=config["table"]["columns"])
        est = PAIEstimator(model, sampler, budget=int(config["budget"]), step_weights=config["step_weights"],
                           predict_every=int(config["predict_every"]))
        check_estimator(est, meta["n_questions"])
        return Configuration(est, str(config["choice"]), table, int(config["configured_budget"]),
                             int(config["n_validation"]), int(config["n_runs"]), float(config["seconds"]),
                             int(config["predict_every"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: the saved configuration is not valid ({exc}).") from exc
