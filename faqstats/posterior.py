"""Posteriors: what a new model's answers so far say about every question's outcome (docs/architecture.md,
"Adding a predictor"). The Laplace step and the quadratic-form cache serve one run (numpy) and many (torch)."""

import numbers

import numpy as np

from ._validation import check_scalar
from ._backend import column, dot, is_torch, matvec, namespace, sigmoid

__all__ = ["BatchedPosteriorBase", "FactorPosterior", "FixedPredictions", "GaussianPosterior", "PosteriorBase",
           "PosteriorView", "QuadraticForms", "check_posterior_options", "laplace_step", "laplace_update",
           "oracle_scores", "quadratic_forms_from_scratch"]

#: Incremental downdates of the quadratic forms between two recomputations from scratch.
REFRESH_EVERY = 256
#: Elements of the (runs, N, k) product formed at once when recomputing batched forms.
_SCRATCH_ELEMENTS = 2**20


def laplace_step(mean, cov, v, z, *, offset=None, noise=None):
    """One online Laplace (Sherman-Morrison) update of Gaussian factor posteriors -> ``mean', cov', Sv, c``.

    Formulas: docs/statistics.md, "The factor model and its online update"; with ``noise`` and ``offset`` the link
    is the identity. One posterior or many (leading run axis, numpy or torch); ``Sv = cov v`` and ``c`` let
    :class:`QuadraticForms` downdate."""
    if noise is None:
        p = sigmoid(dot(mean, v))
        w = p * (1.0 - p)
        gradient = z - p
    else:
        w = 1.0 / noise
        gradient = (z - offset - dot(mean, v)) * w
    Sv = matvec(cov, v)
    denom = 1.0 + w * dot(v, Sv)
    c = w / denom
    u = Sv * column(c**0.5)
    new_cov = cov - u[..., :, None] * u[..., None, :]
    new_mean = mean + Sv * column(gradient / denom)
    return new_mean, new_cov, Sv, c


def laplace_update(mean, cov, v, z):
    """One online Laplace (Sherman-Morrison) update of a Gaussian factor posterior (paper Eqs. 9-10).

    Parameters
    ----------
    mean, cov : ndarray of shape (k,), (k, k)
    v : ndarray of shape (k,), the asked question's factor
    z : float in [0, 1], its outcome

    Returns
    -------
    mean', cov'

    Examples
    --------
    >>> import numpy as np
    >>> m, S = laplace_update(np.zeros(2), np.eye(2), np.array([1.0, 0.0]), 1.0)
    >>> np.round(m, 3), np.round(np.diag(S), 3)
    (array([0.4, 0. ]), array([0.8, 1. ]))
    """
    cov = np.asarray(cov, dtype=float)
    new_mean, new_cov, _, _ = laplace_step(np.asarray(mean, dtype=float), 0.5 * (cov + cov.T),
                                           np.asarray(v, dtype=float), float(z))
    return new_mean, new_cov


def quadratic_forms_from_scratch(question_factors, cov):
    """``v_j' cov v_j`` for every row ``v_j`` of ``question_factors``: (N,) for one ``cov``, (R, N) for R."""
    V = question_factors
    if cov.ndim == 2:
        return ((V @ cov) * V).sum(-1)
    step = max(1, _SCRATCH_ELEMENTS // max(V.shape[0] * V.shape[1], 1))
    parts = [((V @ cov[s : s + step]) * V).sum(-1) for s in range(0, cov.shape[0], step)]
    if not parts:
        return (V @ cov).sum(-1)
    return namespace(cov).cat(parts) if is_torch(cov) else np.concatenate(parts)


class QuadraticForms:
    """Lazily kept ``v_j' cov v_j`` of a changing covariance (one posterior, or (R, N) for many runs): downdated
    by ``- c (V cov v)^2`` per update (queued until asked for, dropped after ``max(4, k // 4)`` unasked) and
    recomputed every ``refresh_every`` updates."""

    def __init__(self, question_factors, refresh_every=None):
        self.V = question_factors
        self.refresh_every = REFRESH_EVERY if refresh_every is None else int(refresh_every)
        self.forms = None  # for the covariance before the queued updates, or None
        self.queued = []  # (Sv, c) of the Laplace updates not yet applied to ``forms``
        self.since_refresh = 0

    def updated(self, Sv, c):
        """Note one Laplace update (its ``cov v`` and ``c``)."""
        if self.forms is None:
            return
        if len(self.queued) >= max(4, self.V.shape[1] // 4):
            self.forms, self.queued = None, []  # not asked for lately: stop maintaining
        else:
            self.queued.append((Sv, c))

    def drop(self):
        """Forget the forms (after an update they cannot follow, e.g. of some runs only)."""
        self.forms, self.queued = None, []

    def get(self, cov):
        """The forms for ``cov``, the covariance after every noted update (read-only)."""
        queued, V = len(self.queued), self.V
        if self.forms is None or self.since_refresh + queued > self.refresh_every:
            self.forms = quadratic_forms_from_scratch(V, cov)
            self.since_refresh = 0
        elif queued:
            for Sv, c in self.queued:
                u = V @ Sv if Sv.ndim == 1 else Sv @ V.T
                self.forms = self.forms - column(c) * (u * u)
            self.since_refresh += queued
        self.queued = []
        if not is_torch(self.forms):
            self.forms.flags.writeable = False  # handed to policies; replaced, never modified
        return self.forms


def oracle_scores(predictions):
    """``sqrt(p (1 - p))``, the oracle (Neyman) score, as a new array (numpy: 0 outside ``[0, 1]``)."""
    p = predictions
    if is_torch(p):
        return namespace(p).addcmul(p, p, p, value=-1.0).sqrt_()
    s = np.subtract(1.0, p)
    np.multiply(p, s, out=s)
    np.maximum(s, 0.0, out=s)
    return np.sqrt(s, out=s)


class PosteriorView:
    """What a sampling policy may read of a predictor: a read-only snapshot of ``predictions``,
    ``question_factors``, ``mean``, ``cov`` and ``noise`` (``None`` where the posterior has none)."""

    __slots__ = ("_of", "predictions", "question_factors", "mean", "cov", "noise")

    def __init__(self, predictor):
        self._of = predictor
        self.predictions = predictor.predictions
        self.question_factors = getattr(predictor, "question_factors", None)
        self.mean = getattr(predictor, "mean", None)
        self.cov = getattr(predictor, "cov", None)
        self.noise = getattr(predictor, "noise", None)

    def oracle_scores(self):
        """``sqrt(p_j (1 - p_j))`` for every question (see :func:`oracle_scores`)."""
        if self._of.predictions is self.predictions:
            return self._of.oracle_scores
        return oracle_scores(self.predictions)

    def quadratic_forms(self):
        """``v_j' cov v_j`` for every question (factor posteriors only)."""
        if self.question_factors is None:
            raise ValueError(f"{type(self._of).__name__} has no question factors: no quadratic forms.")
        if self._of.cov is self.cov:
            return self._of.quadratic_forms()
        return quadratic_forms_from_scratch(self.question_factors, self.cov)


def _sigmoid_from_half_logits(h):
    """``sigmoid(x)`` for ``h = -x / 2``, overwriting ``h`` with ``exp(h)`` (see ``_predict``)."""
    np.exp(h, out=h)
    p = np.multiply(h, h)
    p += 1.0
    return np.reciprocal(p, out=p)


def check_posterior_options(dtype, predict_every):
    """Check a posterior's ``dtype`` and ``predict_every``; return ``predict_every`` as an int."""
    if dtype not in ("float64", "float32"):
        raise ValueError(f"dtype must be 'float64' or 'float32', got {dtype!r}.")
    check_scalar(predict_every, "predict_every", kind=numbers.Integral, low=1)
    return int(predict_every)


def read_only(a):
    """``a``, made read-only in place (what samplers are handed must not be changed by them)."""
    a.flags.writeable = False
    return a


class PosteriorBase:
    """One run's posterior: predictions recomputed after every ``predict_every``-th answer, lazy oracle scores."""

    question_factors = mean = cov = noise = None
    predict_every, _unpredicted, _scores = 1, 0, None

    def _learned(self):
        """Count one answer learned; recompute the predictions when it is their turn."""
        self._unpredicted += 1
        if self._unpredicted == self.predict_every:
            self._predict()
            self._unpredicted = 0

    @property
    def oracle_scores(self):
        """``sqrt(p_j (1 - p_j))`` for the current predictions (read-only)."""
        if self._scores is None:
            self._scores = read_only(oracle_scores(self.predictions))
        return self._scores

    def view(self):
        """The read-only :class:`PosteriorView` a policy sees."""
        return PosteriorView(self)


class BatchedPosteriorBase:
    """Many runs' posteriors in lockstep (torch): predictions (R, N) recomputed per run (``_predict(sel)``)."""

    question_factors = mean = cov = scores = None
    owner = "This predictor"

    def _start(self, R, predict_every):
        self.predict_every, self._unpredicted = predict_every, np.zeros(R, dtype=np.int64)
        self.predictions = self._predict(None)
        self.refreshes = 0

    @staticmethod
    def _runs(idx, R):
        return np.arange(R) if idx is None else idx.cpu().numpy()

    def _learned(self, idx):
        import torch  # (torch only where runs go in lockstep: importing faqstats does not import it)
        runs = self._runs(idx, self._unpredicted.size)
        self._unpredicted[runs] += 1
        due = self._unpredicted[runs] == self.predict_every
        if idx is None and due.all():
            self.predictions = self._predict(None)
        elif due.any():
            sel = torch.as_tensor(runs[due], device=self.predictions.device)
            self.predictions[sel] = self._predict(sel)
        self._unpredicted[runs[due]] = 0
        self.refreshes += 1

    @property
    def oracle_scores(self):
        return oracle_scores(self.predictions)

    def quadratic_forms(self):
        raise ValueError(f"{self.owner} has no question factors: no quadratic forms.")


class FixedPredictions(PosteriorBase):
    """Predictions that no answer moves (no factor model: all zero)."""

    def __init__(self, predictions):
        self.predictions = read_only(np.array(predictions, dtype=float))

    def update(self, question, outcome):
        """Nothing to learn."""


class FactorPosterior(PosteriorBase):
    """Gaussian approximation of a new model's factor and the predictions ``sigmoid(V mean)`` it implies; ``dtype``
    is the predictions' (the posterior stays float64), ``mean``, ``cov`` are read-only, replaced by each update."""

    def __init__(self, question_factors, mean, cov, *, dtype="float64", refresh_every=None, predict_every=1):
        self.predict_every = check_posterior_options(dtype, predict_every)
        # a read-only view of the fitted factors, not a copy
        self.question_factors = read_only(np.asarray(question_factors, dtype=float).view())
        self._V32 = None if dtype == "float64" else np.ascontiguousarray(question_factors, dtype=np.float32)
        self.mean = read_only(np.array(mean, dtype=float))
        cov = np.asarray(cov, dtype=float)
        self.cov = read_only(0.5 * (cov + cov.T))
        self._forms = QuadraticForms(self.question_factors, refresh_every)
        self._predict()

    offsets = None  # the identity link's, with ``noise``: set by GaussianPosterior

    def update(self, question, outcome):
        """One Laplace (identity link: exact Gaussian) step with the answer ``outcome`` to ``question``."""
        link = {} if self.noise is None else {"offset": self.offsets[question], "noise": self.noise[question]}
        mean, cov, Sv, c = laplace_step(self.mean, self.cov, self.question_factors[question], outcome, **link)
        self.mean, self.cov = read_only(mean), read_only(cov)
        self._forms.updated(Sv, c)
        self._learned()

    def _predict(self):
        if self._V32 is None:
            # sigmoid(x) = 1 / (1 + h^2) with h = exp(-x / 2), and the oracle score h p; logits
            # below -1418 clipped where h^2 would overflow (docs/performance.md, "Live step")
            h = self.question_factors @ (-0.5 * self.mean)
            if h.max() < 354.0:  # exp(2 * 354) is finite: nothing overflows
                p = _sigmoid_from_half_logits(h)
            else:
                np.minimum(h, 709.0, out=h)
                with np.errstate(over="ignore"):
                    p = _sigmoid_from_half_logits(h)
            scores = read_only(np.multiply(h, p, out=h))
        else:
            # sigmoid(x) = (1 + tanh(x / 2)) / 2 with numpy's SIMD float32 tanh: no overflow
            x = self._V32 @ (0.5 * self.mean).astype(np.float32)
            np.tanh(x, out=x)
            x *= 0.5
            x += 0.5
            p, scores = x.astype(np.float64), None  # scores computed when first asked for
        self.predictions, self._scores = read_only(p), scores

    def quadratic_forms(self):
        """``v_j' cov v_j`` for every question, for the current ``cov`` (read-only)."""
        return self._forms.get(self.cov)


class GaussianPosterior(FactorPosterior):
    """A low-rank Gaussian process conditioned on a new model's answers: ``z_j = offsets_j + v_j . u + e_j``,
    ``u ~ N(mean, cov)``, ``e_j ~ N(0, noise_j)``; the predictions are ``clip(offsets + V mean, 0, 1)``."""

    def __init__(self, question_factors, mean, cov, offsets, noise, *, dtype="float64", refresh_every=None,
                 predict_every=1):
        self.offsets = read_only(np.array(offsets, dtype=float))
        self.noise = read_only(np.array(noise, dtype=float))
        if self.offsets.shape != self.noise.shape or self.offsets.shape != (np.shape(question_factors)[0],):
            raise ValueError("offsets and noise must have one entry per question (row of question_factors).")
        if not (np.all(np.isfinite(self.noise)) and self.noise.min() > 0):
            raise ValueError("noise must be finite and positive.")
        super().__init__(question_factors, mean, cov, dtype=dtype, refresh_every=refresh_every,
                         predict_every=predict_every)

    def _predict(self):
        V = self.question_factors if self._V32 is None else self._V32
        p = (V @ self.mean.astype(V.dtype)).astype(np.float64, copy=False)
        p += self.offsets
        self.predictions, self._scores = read_only(np.clip(p, 0.0, 1.0, out=p)), None

    def predictive_variance(self):
        """``v_j' cov v_j + noise_j``: the process's variance of each outcome given the answers."""
        return self.quadratic_forms() + self.noise
