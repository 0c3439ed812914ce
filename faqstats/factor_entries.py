"""The low-rank form saved: the entries of a :class:`~faqstats.LogisticFactorModel` and of a
:class:`~faqstats.GaussianProcessSurrogate` (their ``get_entries`` and ``from_entries``).

Arrays ``question_factors`` (n, k), ``prior_mean`` (k,), ``prior_cov`` (k, k) symmetric positive
semi-definite, ``observed_questions`` bool (n,), ``model_factors`` (n_models, k) when fitted on a
history, a surrogate's ``question_means`` and ``noise`` (n,), all within the value bound
(the covariance within its square); metadata ``n_components`` (k). In the file that
:func:`~faqstats.save_factor_model` writes (format version 1) also ``loss_curve`` and the
metadata ``n_models``, ``fitted_device`` and ``cv`` (null; a CV model's record).
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

__all__ = ["best_estimator", "cv_entries", "low_rank_entries", "read_factor_model", "read_low_rank"]


def low_rank_entries(self, saver):
    """The entries it is saved as: ``(fields, arrays)`` of the low-rank form (the module docstring).

    Parameters
    ----------
    saver : object
    """
    model = self  # a LogisticFactorModel's or GaussianProcessSurrogate's method
    check_is_fitted(model, "question_factors_")
    V = saver.float(model, "question_factors_", bound=1)
    if V.ndim != 2 or V.shape[0] < 1 or V.shape[1] < 1:
        raise ValueError(f"Refusing to save: question_factors_ must be a non-empty 2-D array, got shape {V.shape}.")
    arrays = {"question_factors": V, "prior_mean": saver.float(model, "prior_mean_", bound=1),
              "prior_cov": saver.float(model, "prior_cov_", bound=2),
              "observed_questions": np.asarray(model.observed_questions_, dtype=bool)}
    for key in ("model_factors", *(("loss_curve",) if saver.first_format else ()), "question_means", "noise"):
        if getattr(model, key + "_", None) is not None:
            arrays[key] = saver.float(model, key + "_", bound=None if key == "loss_curve" else 1)
    fields = {"estimator": type(model).__name__, "params": saver.json(model.get_params(deep=False), "params"),
              "n_questions": int(V.shape[0]), "n_components": int(V.shape[1])}
    if saver.first_format:  # save_factor_model's file: format version 1, as older faqstats read it
        n_models = int(arrays["model_factors"].shape[0]) if "model_factors" in arrays else None
        fields |= {"format_version": 1, "n_models": n_models, "cv": None,
                   "fitted_device": saver.json(getattr(model, "device_", None), "device_")}
    return fields, arrays


def read_low_rank(model, entries, fields, extra=()):
    """``model`` (unfitted) fitted with the stored parameters and arrays, every one checked (``extra``: the
    names of further arrays of shape (n,) it needs, a surrogate's means and noise)."""
    k, n = fields.get("n_components"), entries.n_questions
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise entries.error(f"metadata{entries.where} 'n_components' must be a positive integer, got {k!r}.")
    entries.require("question_factors", "prior_mean", "prior_cov", "observed_questions")
    fitted = {"question_factors": entries.float("question_factors", (n, k), bound=1),
              "prior_mean": entries.float("prior_mean", (k,), bound=1),
              "prior_cov": entries.float("prior_cov", (k, k), bound=2)}
    cov, key = fitted["prior_cov"], entries.key("prior_cov")
    if not np.allclose(cov, cov.T):
        raise entries.error(f"{key!r} is not symmetric.")
    eig = np.linalg.eigvalsh(0.5 * (cov + cov.T))
    if eig.min() < -1e-10 * max(1.0, float(np.abs(eig).max())):
        raise entries.error(f"{key!r} is not positive semi-definite (eigenvalue {eig.min():.3g}).")
    observed = entries.array("observed_questions")
    if observed.dtype != np.bool_ or observed.shape != (n,):
        raise entries.error(f"{entries.key('observed_questions')!r} must be bool of shape ({n},), got "
                            f"{observed.dtype} {observed.shape}.")
    fitted["observed_questions"] = observed
    entries.require(*extra)
    fitted |= {name: entries.float(name, (n,), bound=1) for name in extra}
    fitted["model_factors"] = entries.float("model_factors", (None, k), bound=1) if "model_factors" in entries else None
    params = dict(fields["params"])
    if "alpha" in params and "regularization" not in params:  # files written before faqstats renamed it
        params["regularization"] = params.pop("alpha")
    entries.set_params(model, params)
    for name, value in fitted.items():
        setattr(model, name + "_", value)
    if entries.format_version == 1 and "loss_curve" in entries:
        model.loss_curve_ = entries.float("loss_curve", (None,))
        model.n_iter_ = int(model.loss_curve_.size)
    return model


def read_factor_model(cls, entries, fields):
    """The fitted factor model its stored entries hold, every one checked.

    Parameters
    ----------
    entries : object
    fields : dict
    """
    model = read_low_rank(cls(), entries, fields)
    if model.n_components != fields["n_components"]:
        raise entries.error(f"params n_components={model.n_components} but the factors have "
                            f"{fields['n_components']} components.")
    return model


def cv_entries(self, saver):
    """The entries it is saved as: its best estimator's, and in :func:`~faqstats.save_factor_model`'s file
    (format version 1) its name and the CV record (metadata ``cv``, arrays ``cv_results.<name>``).

    Parameters
    ----------
    saver : object
    """
    check_is_fitted(self, "best_estimator_")
    if not saver.first_format:
        return self.best_estimator_.get_entries(saver)
    cv = {"params": saver.json(self.get_params(deep=False), "cv.params"),
          "best_params": saver.json(self.best_params_, "cv.best_params"),
          "best_index": saver.json(getattr(self, "best_index_", None), "cv.best_index")}
    fields, arrays = self.best_estimator_.get_entries(saver)
    arrays |= {"cv_results." + name: np.asarray(values) for name, values in self.cv_results_.items()}
    return fields | {"estimator": type(self).__name__, "cv": cv}, arrays


def best_estimator(self):
    """The predictor it is saved (and loaded back) as: its ``best_estimator_`` (unfitted: itself)."""
    return getattr(self, "best_estimator_", self)
