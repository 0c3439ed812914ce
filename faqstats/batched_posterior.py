"""Many runs' posteriors in lockstep (torch): what :mod:`faqstats.posterior` is for one run, for
:func:`faqstats.batched.simulate` (:func:`batched_posterior` picks a fitted predictor's form)."""

import numpy as np
import torch

from .posterior import QuadraticForms, laplace_step, oracle_scores
from .predictor import engine_posterior

__all__ = ["BatchedPosterior", "RunsSideBySide", "batched_posterior"]

_DTYPE_NAMES = {torch.float64: "float64", torch.float32: "float32"}


class BatchedPosterior:
    """Low-rank posteriors (a ``FactorPosterior`` each) of ``R`` runs from factors ``V`` and prior ``mean0, cov0``
    (``None``: fixed zero predictions); ``offsets, noise``: a Gaussian process's (identity link).
    """

    def __init__(self, V, mean0, cov0, R, N, dtype, device, offsets=None, noise=None, predict_every=1):
        self.question_factors = V
        # answers each run learned since its predictions were computed
        self.predict_every, self._unpredicted = predict_every, np.zeros(R, dtype=np.int64)
        self.offsets, self.noise = offsets, noise  # a Gaussian process (identity link) when set
        if V is None:
            self.mean = self.cov = None
            self.predictions = torch.zeros(R, N, dtype=dtype, device=device)
            self.refreshes, self.scores = 0, None
            return
        self.mean = mean0.expand(R, -1).clone()
        self.cov = cov0.expand(R, -1, -1).clone()
        # on a schedule, the logistic form computes its oracle scores with its predictions, as FactorPosterior does
        self.scores = torch.empty(R, N, dtype=dtype, device=device) if predict_every > 1 and noise is None else None
        self.predictions = self._predict(self.mean)
        self.refreshes = 0  # times all runs' predictions were recomputed in lockstep (caches key on it)
        self._forms = QuadraticForms(V)

    def _predict(self, mean, out=None):
        if self.scores is not None and mean.shape[0] == self.scores.shape[0]:
            # sigmoid(x) = 1 / (1 + h^2) with h = exp(-x / 2), and sqrt(p (1 - p)) = h p: FactorPosterior's
            h = torch.mm(mean * -0.5, self.question_factors.T, out=self.scores).clamp_(max=709.0).exp_()
            p = torch.addcmul(h.new_ones(()), h, h, out=out).reciprocal_()
            h.mul_(p)
            return p
        logits = torch.mm(mean, self.question_factors.T, out=out)
        if self.noise is None:
            return logits.sigmoid_()
        return logits.add_(self.offsets).clamp_(0.0, 1.0)  # GaussianPosterior's predictions

    @property
    def oracle_scores(self):
        """``sqrt(p (1 - p))`` of every run, a new tensor."""
        return oracle_scores(self.predictions)

    def quadratic_forms(self):
        if self.question_factors is None:
            raise ValueError("no factor model: no quadratic forms.")
        return self._forms.get(self.cov)

    def update(self, idx, questions, outcomes):
        """One Laplace step for the runs ``idx`` (all runs when None)."""
        V = self.question_factors
        if V is None:
            return
        gaussian = {} if self.noise is None else {"offset": self.offsets[questions], "noise": self.noise[questions]}
        if idx is None:
            self.mean, self.cov, Sv, c = laplace_step(self.mean, self.cov, V[questions], outcomes, **gaussian)
            self._forms.updated(Sv, c)
            self._unpredicted += 1
            if self._unpredicted[0] == self.predict_every:  # all runs in step
                self._predict(self.mean, out=self.predictions)  # in place: the old ones are not needed
                self._unpredicted[:] = 0
                self.refreshes += 1
            return
        mean, cov, _, _ = laplace_step(self.mean[idx], self.cov[idx], V[questions], outcomes, **gaussian)
        self.mean[idx], self.cov[idx] = mean, cov
        self._forms.drop()  # the forms follow all runs or none
        if self.predict_every > 1:  # only the runs whose schedule is due (a host copy of idx, so not by default)
            runs = idx.cpu().numpy()
            self._unpredicted[runs] += 1
            due = self._unpredicted[runs] == self.predict_every
            self._unpredicted[runs[due]] = 0
            idx = idx[torch.as_tensor(due, device=idx.device)]
        self.scores = None  # only some runs move: their scores as the engine computes them
        self.predictions[idx] = self._predict(self.mean[idx])
        self.refreshes += 1


def batched_posterior(model, runs, n_questions, dtype, device, predict_every=1):
    """The posteriors of ``runs`` runs in lockstep: the predictor's own ``batched_posterior``, else the low-rank
    form's, zero predictions for ``None``, or one-run posteriors side by side (:class:`RunsSideBySide`).
    """
    if model is not None and hasattr(model, "batched_posterior"):
        return model.batched_posterior(runs, n_questions, dtype, device, predict_every)
    if model is None:
        return BatchedPosterior(None, None, None, runs, n_questions, dtype, device)
    if getattr(model, "question_factors_", None) is None or getattr(model, "prior_cov_", None) is None:
        posteriors = [model.posterior(dtype=_DTYPE_NAMES.get(dtype, "float64"), predict_every=predict_every)
                      for _ in range(runs)]
        return RunsSideBySide(posteriors, n_questions, dtype, device)
    t = lambda a: torch.tensor(np.array(a, dtype=float), dtype=dtype, device=device)  # noqa: E731
    cov0 = t(model.prior_cov_)
    gaussian = getattr(model, "noise_", None) is not None
    return BatchedPosterior(t(model.question_factors_), t(model.prior_mean_), 0.5 * (cov0 + cov0.T), runs,
                             n_questions, dtype, device, t(model.question_means_) if gaussian else None,
                             t(model.noise_) if gaussian else None, predict_every)


class RunsSideBySide:
    """The one-run ``posteriors`` (each at its prior) of ``R`` runs driven side by side, for a predictor written
    for one run.
    """

    question_factors = mean = cov = noise = scores = None
    oracle_scores = BatchedPosterior.oracle_scores

    def __init__(self, posteriors, n_questions, dtype, device):
        self.runs = [engine_posterior(p, n_questions) for p in posteriors]
        self.dtype, self.device = dtype, device
        self.predictions = torch.empty(len(self.runs), n_questions, dtype=dtype, device=device)
        for r in range(len(self.runs)):
            self._copy(r)
        self.refreshes = 0

    def _copy(self, r):  # a writable host copy first: the predictions are read-only
        self.predictions[r] = torch.as_tensor(np.array(self.runs[r].predictions), dtype=self.dtype,
                                              device=self.device)

    def quadratic_forms(self):
        raise ValueError("a predictor driven run by run has no question factors: no quadratic forms.")

    def update(self, idx, questions, outcomes):
        """Runs ``idx`` (all when None) learn their answers ``outcomes`` to ``questions``."""
        runs = range(len(self.runs)) if idx is None else idx.cpu().tolist()
        for r, question, outcome in zip(runs, questions.cpu().tolist(), outcomes.cpu().tolist()):
            self.runs[r].update(int(question), float(outcome))
            self._copy(r)
        self.refreshes += 1
