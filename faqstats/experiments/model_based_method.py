"""The model-based estimate (:class:`~faqstats.ModelBasedEstimator`) as an experiment method, calibrated
per budget on the history alone."""

import numbers

from .._validation import check_scalar
from ..model_based import ModelBasedEstimator
from .field import FieldMethod, FieldRun

__all__ = ["ModelBased"]


class ModelBased(FieldMethod):
    """:class:`~faqstats.ModelBasedEstimator` with its defaults, calibrated per budget on the history.

    Parameters
    ----------
    max_calibration_models : int, default=200
        As in :class:`~faqstats.ModelBasedEstimator`.
    random_state : int, default=0
        Seeds the calibration (the folds and the held-out runs).

    Attributes
    ----------
    estimators_ : dict
        ``budget -> calibrated ModelBasedEstimator``, filled as budgets are run.

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=40, n_new=1, n_components=2, random_state=0)
    >>> method = ModelBased(max_calibration_models=30).fit(bank.history)
    >>> run = method.run(bank.new_outcomes[0], budget=8, random_state=1)
    >>> run.n_queries, bool(run.low <= run.estimate <= run.high), sorted(method.estimators_)
    (8, True, [8])
    """

    def __init__(self, max_calibration_models=200, random_state=0):
        self.max_calibration_models = max_calibration_models
        self.random_state = random_state

    def check_params(self):
        check_scalar(self.max_calibration_models, "max_calibration_models", kind=numbers.Integral, low=1)

    def _fit(self, H):
        self.history_ = H
        self.estimators_ = {}

    def _run(self, y, budget, seed, alpha):
        if budget not in self.estimators_:  # the history alone: the split's held-out history models
            self.estimators_[budget] = ModelBasedEstimator(
                budget=budget, max_calibration_models=self.max_calibration_models,
                random_state=self.random_state, verbose=False).calibrate(self.history_)
        est = self.estimators_[budget].set_params(random_state=seed).fit(y)
        low, high = est.conf_int(alpha)
        queried = est.queries_["question"]
        return FieldRun(est.estimate_, est.scale_, low, high, queried)
