"""A new model as a mixture of the history's models: :class:`HistoryMixture` and its posteriors for one run
(:class:`MixturePosterior`) and for many in lockstep (:class:`BatchedMixture`)."""

import numpy as np
from sklearn.base import TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ._validation import check_scalar, validate_history
from .posterior import BatchedPosteriorBase, PosteriorBase, check_posterior_options, read_only
from .predictor import Predictor, register_predictor

__all__ = ["BatchedMixture", "HistoryMixture", "MixturePosterior"]

#: the low-rank target of :class:`HistoryMixture` is clipped to [_TARGET_CLIP, 1 - _TARGET_CLIP]
_TARGET_CLIP = 0.01


class HistoryMixture(TransformerMixin, Predictor):
    """A new model as a mixture of the history's models: Bayesian model averaging over its rows.

    Model ``i``'s profile is ``P_ij = (1 - smoothing) H_ij + smoothing T_ij``, ``T`` its low-rank fit clipped to
    [0.01, 0.99] (or the question means; it fills missing cells too). An answer ``z`` to question ``j`` multiplies
    weight ``i`` (uniform at first) by ``(P_ij^z (1 - P_ij)^(1 - z))^temperature``; the predictions are
    ``sum_i w_i P_ij``. It has no factors: policies that need them refuse it.

    Parameters
    ----------
    smoothing : float in (0, 1], default=0.3
    temperature : float > 0, default=0.5
    target : {"low-rank", "means"}, default="low-rank"
    n_components : int, default=32
        Rank of the low-rank fit.
    random_state : int, Generator or None, default=None
        Seeds the split of each row's cells in :meth:`score`.

    Attributes
    ----------
    profiles_ : ndarray of shape (n_models, N)
        The smoothed history ``P``.
    question_means_ : ndarray of shape (N,)
    n_features_in_ : int

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=80, n_questions=100, n_components=3, random_state=0)
    >>> mix = HistoryMixture().fit(bank.history)
    >>> post = mix.posterior()
    >>> post.update(0, 1.0)
    >>> post.predictions.shape, round(float(post.weights().sum()), 12)
    ((100,), 1.0)
    """

    def __init__(self, smoothing=0.3, temperature=0.5, target="low-rank", n_components=32, random_state=None):
        self.smoothing, self.temperature, self.target = smoothing, temperature, target
        self.n_components, self.random_state = n_components, random_state

    def fit(self, X, y=None):
        """Keep the history's smoothed answer profiles.

        Parameters
        ----------
        X : array-like of shape (n_models, N)
        y : None

        Returns
        -------
        HistoryMixture
        """
        self.check_params()
        H = validate_history(self, X, reset=True)
        observed = ~np.isnan(H)
        overall = float(np.nanmean(H))
        means = (np.where(observed, H, 0.0).sum(0) + overall) / (observed.sum(0) + 1.0)
        if self.target == "low-rank" and H.shape[0] >= 2:
            from .surrogate import GaussianProcessSurrogate
            gp = GaussianProcessSurrogate(n_components=self.n_components, random_state=0).fit(H)
            target = np.clip(gp.predict(H), _TARGET_CLIP, 1.0 - _TARGET_CLIP)  # each model's low-rank fit
        else:
            target = np.broadcast_to(means, H.shape)
        filled = np.where(observed, H, target)
        s = float(self.smoothing)
        # the profiles stay inside (0, 1) whatever the target: every log-likelihood is finite
        floor = s * min(overall, 1.0 - overall, _TARGET_CLIP) / 2 + 1e-9
        self.profiles_, self.question_means_ = np.clip((1.0 - s) * filled + s * target, floor, 1.0 - floor), means
        return self

    def check_params(self):
        """Raise if a parameter is out of range (what :func:`~faqstats.load_factor_model` checks too)."""
        check_scalar(self.smoothing, "smoothing", low=0.0, high=1.0, closed="right")
        check_scalar(self.temperature, "temperature", low=0.0, closed="neither")
        if self.target not in ("low-rank", "means"):
            raise ValueError(f"target must be 'low-rank' or 'means', got {self.target!r}.")

    def get_entries(self, saver):
        """The entries it is saved as: ``profiles`` (n_models, N) and ``question_means`` (N,).

        Parameters
        ----------
        saver : object
        """
        check_is_fitted(self, "profiles_")
        profiles = saver.float(self, "profiles_")
        return ({"estimator": type(self).__name__, "params": saver.json(self.get_params(deep=False), "params"),
                 "n_questions": int(profiles.shape[1]), "n_models": int(profiles.shape[0])},
                {"profiles": profiles, "question_means": saver.float(self, "question_means_")})

    @classmethod
    def from_entries(cls, entries, fields):
        """The fitted mixture its stored entries hold: profiles in (0, 1), means in [0, 1].

        Parameters
        ----------
        entries : object
        fields : dict
        """
        entries.require("profiles", "question_means")
        profiles = entries.float("profiles", (None, entries.n_questions))
        if profiles.shape[0] < 1 or not np.all((profiles > 0) & (profiles < 1)):
            raise entries.error(f"{entries.key('profiles')!r} must hold at least one row, every entry in (0, 1).")
        means = entries.float("question_means", (entries.n_questions,))
        if not np.all((means >= 0) & (means <= 1)):
            raise entries.error(f"{entries.key('question_means')!r} must be in [0, 1].")
        model = cls()
        entries.set_params(model, fields["params"])
        model.profiles_, model.question_means_ = profiles, means
        return model

    def posterior(self, dtype="float64", predict_every=1):
        """A new model's :class:`MixturePosterior`: uniform weights over the history models.

        Parameters
        ----------
        dtype : {"float64", "float32"}, default="float64"
            Accepted; the mixture computes in float64.
        predict_every : int, default=1

        Returns
        -------
        MixturePosterior
        """
        check_is_fitted(self, "profiles_")
        return MixturePosterior(self.profiles_, self.temperature, dtype=dtype, predict_every=predict_every)

    def batched_posterior(self, runs, n_questions, dtype, device, predict_every=1):
        """The posteriors of ``runs`` runs in lockstep (the torch engine of :mod:`faqstats.batched`).

        Parameters
        ----------
        runs, n_questions : int
        dtype : torch.dtype
        device : torch.device
        predict_every : int, default=1

        Returns
        -------
        BatchedMixture
        """
        check_is_fitted(self, "profiles_")
        return BatchedMixture(self.profiles_, float(self.temperature), runs, dtype, device, predict_every)

    def transform(self, X):
        """Each row's log mixture weights over the history models given its observed cells.

        Parameters
        ----------
        X : array-like of shape (n_rows, N)

        Returns
        -------
        ndarray of shape (n_rows, n_models)
            Each row's largest is 0.
        """
        check_is_fitted(self, "profiles_")
        H = validate_history(self, X, reset=False, allow_empty_rows=True)
        seen = ~np.isnan(H)
        Y = np.where(seen, H, 0.0)
        log_p, log_q = np.log(self.profiles_), np.log1p(-self.profiles_)
        L = self.temperature * (Y @ log_p.T + (seen * (1.0 - Y)) @ log_q.T)
        return L - L.max(1, keepdims=True) if L.size else L

    def predict(self, X):
        """Predicted outcome of every question for each row of ``X``, given its observed cells.

        Parameters
        ----------
        X : array-like of shape (n_rows, N)

        Returns
        -------
        ndarray of shape (n_rows, N)
        """
        W = np.exp(self.transform(X))
        W /= W.sum(1, keepdims=True)
        return np.clip(W @ self.profiles_, 0.0, 1.0)


class MixturePosterior(PosteriorBase):
    """The weights of :class:`HistoryMixture`'s history models (``log_weights``, unnormalised, 0 at the prior)
    given a new model's answers; ``profiles`` (M, N) is the smoothed history, ``dtype`` accepted (float64)."""

    def __init__(self, profiles, temperature, *, dtype="float64", predict_every=1):
        self.predict_every = check_posterior_options(dtype, predict_every)
        self.profiles = read_only(np.asarray(profiles, dtype=float).view())
        self.temperature = float(temperature)
        self._log_p, self._log_q = np.log(self.profiles), np.log1p(-self.profiles)
        self.log_weights = read_only(np.zeros(self.profiles.shape[0]))
        self._predict()

    def update(self, question, outcome):
        """Reweigh the history models by their likelihood of ``outcome`` to ``question``."""
        z = float(outcome)
        step = self._log_p[:, question] * z
        step += self._log_q[:, question] * (1.0 - z)
        self.log_weights = read_only(self.log_weights + self.temperature * step)
        self._learned()

    def weights(self):
        """The normalised posterior weights of the history models."""
        w = np.exp(self.log_weights - self.log_weights.max())
        return w / w.sum()

    def _predict(self):
        p = self.weights() @ self.profiles
        self.predictions, self._scores = read_only(np.clip(p, 0.0, 1.0, out=p)), None


class BatchedMixture(BatchedPosteriorBase):
    """:class:`MixturePosterior` for ``R`` runs in lockstep (torch): log weights (R, M)."""

    owner = "HistoryMixture"

    def __init__(self, profiles, temperature, R, dtype, device, predict_every=1):
        import torch  # (torch only where runs go in lockstep: importing faqstats does not import it)
        P = torch.tensor(np.array(profiles, dtype=float), dtype=torch.float64, device=device)
        self.profiles = P
        self.log_p_t, self.log_q_t = torch.log(P).T.contiguous(), torch.log1p(-P).T.contiguous()  # (N, M)
        self.temperature, self.dtype = temperature, dtype
        self.log_weights = torch.zeros(R, P.shape[0], dtype=torch.float64, device=device)
        self._start(R, predict_every)

    def _predict(self, sel):
        import torch
        log_weights = self.log_weights if sel is None else self.log_weights[sel]
        w = torch.exp(log_weights - log_weights.amax(1, keepdim=True))
        w = w / w.sum(1, keepdim=True)
        return torch.mm(w, self.profiles).clamp_(0.0, 1.0).to(self.dtype)

    def update(self, idx, questions, outcomes):
        import torch
        z = outcomes.to(torch.float64)[:, None]
        step = (self.log_p_t[questions] * z + self.log_q_t[questions] * (1.0 - z)) * self.temperature
        if idx is None:
            self.log_weights += step
        else:
            self.log_weights[idx] += step
        self._learned(idx)


register_predictor(HistoryMixture)
