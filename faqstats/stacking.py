"""Fitted predictors side by side: :class:`StackedPredictor` combines them by answer count, with its posteriors
for one run (:class:`StackedPosterior`) and for many in lockstep (:class:`BatchedStack`)."""

import numbers

import numpy as np
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

from ._validation import check_scalar, check_seed, validate_history
from .mixture import HistoryMixture, MixturePosterior
from .posterior import BatchedPosteriorBase, PosteriorBase, check_posterior_options, read_only
from .predictor import Predictor, register_predictor

__all__ = ["BatchedStack", "HistoryMixture", "MixturePosterior", "StackedPosterior", "StackedPredictor"]

#: answer counts where a new set of stacking weights starts (the last set holds beyond)
STACK_STEPS = (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)


class StackedPredictor(Predictor):
    """Several predictors side by side, combined with weights that depend on the answers seen.

    Every component learns every answer; the prediction after ``n`` answers is ``sum_k w_k(n) p_k``, convex
    weights constant on the ranges of :data:`STACK_STEPS` that minimise the squared error on unasked questions of
    validation models (components fitted without them, then refitted on the whole history).

    Parameters
    ----------
    estimators : list of (str, estimator) or None, default=None
        Unfitted predictors; ``None``: a :class:`~faqstats.GaussianProcessSurrogate` and two
        :class:`HistoryMixture` (``smoothing=0.5, temperature=1`` and the defaults; user guide, Statistics).
    validation_fraction : float in (0, 1), default=0.25
        Share of the history's complete rows that learns the weights.
    max_answers : int or None, default=None
        Answers per validation path; ``None``: a quarter of the bank, at least 32 (at most ``N``).
    n_paths : int, default=256
        Validation paths (spread over the validation models).
    random_state : int, default=0
        Seeds the split, the paths and the components' fits (where they take one).

    Attributes
    ----------
    estimators_ : list of fitted estimators
    steps_ : ndarray of int
        The answer counts where each set of weights starts.
    weights_ : ndarray of shape (n_steps, n_estimators)
    validation_mse_ : ndarray of shape (n_steps, n_estimators + 1)
        Validation squared error per range: each component's, then the stack's.
    n_features_in_ : int

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=80, n_questions=100, n_components=3, random_state=0)
    >>> stack = StackedPredictor(n_paths=40).fit(bank.history)
    >>> stack.weights_.shape[1], bool(np.allclose(stack.weights_.sum(1), 1))
    (3, True)
    """

    def __init__(self, estimators=None, validation_fraction=0.25, max_answers=None, n_paths=256, random_state=0):
        self.estimators, self.validation_fraction, self.max_answers = estimators, validation_fraction, max_answers
        self.n_paths, self.random_state = n_paths, random_state

    def _components(self):
        if self.estimators is None:
            from .surrogate import GaussianProcessSurrogate
            return [("gp", GaussianProcessSurrogate(random_state=self.random_state)),
                    ("mixture-sharp", HistoryMixture(smoothing=0.5, temperature=1.0)),
                    ("mixture", HistoryMixture(smoothing=0.3, temperature=0.5))]
        items = list(self.estimators)
        if not items or not all(isinstance(e, tuple) and len(e) == 2 and isinstance(e[0], str) for e in items):
            raise ValueError("estimators must be a non-empty list of (name, estimator) pairs.")
        for name, est in items:
            if not hasattr(est, "posterior"):
                raise TypeError(f"estimator {name!r} ({type(est).__name__}) has no posterior(): not a predictor.")
        return items

    def component_names(self):
        """The names of the stack's components, in the order of ``estimators_`` and the weights' columns.

        Returns
        -------
        list of str
        """
        return [name for name, _ in self._components()]

    def fit(self, X, y=None):
        """Learn the weights on validation models of the history, then refit the components on all of it.

        Parameters
        ----------
        X : array-like of shape (n_models, N)
            At least a few complete rows.
        y : None

        Returns
        -------
        StackedPredictor
        """
        from .step_weights import validation_split
        components = self._components()
        check_scalar(self.n_paths, "n_paths", kind=numbers.Integral, low=1)
        seed = check_seed(self.random_state)
        H = validate_history(self, X, reset=True)
        N = H.shape[1]
        if self.max_answers is None:
            T = min(N, max(32, -(-N // 4)))
        else:
            T = int(check_scalar(self.max_answers, "max_answers", kind=numbers.Integral, low=1, high=N))
        try:
            train, Z = validation_split(H, self.validation_fraction, seed)
        except ValueError as exc:
            raise ValueError(f"StackedPredictor learns its weights on complete history rows: {exc}") from exc
        fitted = [clone(est).fit(train) for _, est in components]
        G, b, c = _stack_moments(fitted, Z, T, int(self.n_paths), seed)
        steps = np.array([s for s in STACK_STEPS if s < T], dtype=np.int64)
        bounds = np.append(steps, T)
        K = len(fitted)
        weights = np.empty((steps.size, K))
        mse = np.empty((steps.size, K + 1))
        for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
            Gi, bi, ci = G[lo:hi].sum(0), b[lo:hi].sum(0), c[lo:hi].sum()
            w = weights[i] = _convex_least_squares(Gi, bi)
            mse[i, :K] = (np.diag(Gi) - 2 * bi + ci) / (hi - lo)
            mse[i, K] = (w @ Gi @ w - 2 * w @ bi + ci) / (hi - lo)
        self.steps_, self.weights_, self.validation_mse_ = steps, weights, mse
        self.estimators_ = [clone(est).fit(H) for _, est in components]
        self.n_validation_ = Z.shape[0]
        return self

    def weights_at(self, n_answers):
        """The combination weights after ``n_answers`` answers.

        Parameters
        ----------
        n_answers : int or array-like of int

        Returns
        -------
        ndarray of shape (n_estimators,) or (len(n_answers), n_estimators)
        """
        check_is_fitted(self, "weights_")
        return self.weights_[np.searchsorted(self.steps_, n_answers, side="right") - 1]

    def get_entries(self, saver):
        """The entries it is saved as: ``steps``, ``weights``, ``validation_mse`` and its components'.

        Parameters
        ----------
        saver : object
        """
        check_is_fitted(self, "weights_")
        params = self.get_params(deep=False)
        if params["estimators"] is not None:  # the components' classes and parameters are stored with them
            params["estimators"] = [name for name, _ in params["estimators"]]
        arrays = {"steps": np.asarray(self.steps_, dtype=np.int64), "weights": saver.float(self, "weights_"),
                  "validation_mse": saver.float(self, "validation_mse_")}
        components = []
        for i, (name, part) in enumerate(zip(self.component_names(), self.estimators_)):
            part_fields, part_arrays = saver.entries(part, f"component{i}.")
            components.append({"name": name, **part_fields})
            arrays |= part_arrays
        n = {c["n_questions"] for c in components}
        if len(n) != 1:
            raise ValueError(f"Refusing to save: the stack's components have different numbers of questions {n}.")
        return {"estimator": type(self).__name__, "params": saver.json(params, "params"), "n_questions": n.pop(),
                "n_validation": int(getattr(self, "n_validation_", 0)), "components": components}, arrays

    @classmethod
    def from_entries(cls, entries, fields):
        """The fitted stack its stored entries hold, every entry checked.

        Parameters
        ----------
        entries : object
        fields : dict
        """
        entries.require("steps", "weights", "validation_mse")
        steps, where = entries.array("steps"), entries.where
        if steps.dtype.kind not in "iu" or steps.ndim != 1 or steps.size < 1 or steps[0] != 0 or np.any(
                np.diff(steps) <= 0):
            raise entries.error(f"{entries.key('steps')!r} must be increasing integers starting at 0, got "
                                f"{steps.dtype} {steps.shape}.")
        components = fields.get("components")
        if not isinstance(components, list) or not components:
            raise entries.error(f"metadata{where} 'components' must be a non-empty list.")
        weights = entries.float("weights", (steps.size, len(components)))
        if np.any(weights < 0) or not np.allclose(weights.sum(1), 1.0, rtol=0, atol=1e-9):
            raise entries.error(f"{entries.key('weights')!r} must be convex weights (non-negative, each row "
                                "summing to 1).")
        mse = entries.float("validation_mse", (steps.size, len(components) + 1))
        parts = []
        for i, part_fields in enumerate(components):
            part = entries.predictor(part_fields, f"component{i}.")
            if not isinstance(part_fields.get("name"), str):
                raise entries.error(f"component {i} of{where or ' the file'} has no name.")
            parts.append((part_fields["name"], part))
        model, params = cls(), dict(fields["params"])
        names = params.pop("estimators", None)
        entries.set_params(model, params)
        if names is not None:
            if names != [name for name, _ in parts]:
                raise entries.error(f"metadata{where} 'estimators' {names} are not its components' names.")
            model.set_params(estimators=[(name, clone(part)) for name, part in parts])
        n_validation = fields.get("n_validation", 0)
        if isinstance(n_validation, bool) or not isinstance(n_validation, int) or n_validation < 0:
            raise entries.error(f"metadata{where} 'n_validation' must be a non-negative integer.")
        model.estimators_, model.steps_, model.weights_ = [part for _, part in parts], steps.astype(np.int64), weights
        model.validation_mse_, model.n_validation_ = mse, n_validation
        return model

    def posterior(self, dtype="float64", predict_every=1):
        """A new model's :class:`StackedPosterior`: every component at its prior.

        Parameters
        ----------
        dtype : {"float64", "float32"}, default="float64"
        predict_every : int, default=1

        Returns
        -------
        StackedPosterior
        """
        check_is_fitted(self, "weights_")
        predict_every = check_posterior_options(dtype, predict_every)
        parts = [est.posterior(dtype=dtype, predict_every=predict_every) for est in self.estimators_]
        return StackedPosterior(parts, self.steps_, self.weights_, predict_every=predict_every)

    def batched_posterior(self, runs, n_questions, dtype, device, predict_every=1):
        """The stacks of ``runs`` runs in lockstep (the torch engine of :mod:`faqstats.batched`).

        Parameters
        ----------
        runs, n_questions : int
        dtype : torch.dtype
        device : torch.device
        predict_every : int, default=1

        Returns
        -------
        BatchedStack
        """
        from .batched_posterior import batched_posterior
        check_is_fitted(self, "weights_")
        parts = [batched_posterior(est, runs, n_questions, dtype, device, predict_every) for est in self.estimators_]
        return BatchedStack(parts, self.steps_, self.weights_, runs, dtype, device, predict_every)


class StackedPosterior(PosteriorBase):
    """Components' posteriors (refreshed on the same schedule) learning every answer, their predictions combined
    with the row of ``weights`` whose entry of ``steps`` is the last at most ``n_answers``."""

    def __init__(self, components, steps, weights, *, predict_every=1):
        self.components = list(components)
        self.steps = np.asarray(steps, dtype=np.int64)
        self.weights = np.asarray(weights, dtype=float)
        if self.weights.shape != (self.steps.size, len(self.components)) or self.steps[0] != 0:
            raise ValueError("weights must have one row per step (the first step 0) and one column per component.")
        self.predict_every = check_posterior_options("float64", predict_every)
        self.n_answers = 0
        self._predict()

    def update(self, question, outcome):
        """Every component learns the answer; the combination is refreshed on the schedule."""
        for part in self.components:
            part.update(question, outcome)
        self.n_answers += 1
        self._learned()

    def _predict(self):
        w = self.weights[np.searchsorted(self.steps, self.n_answers, side="right") - 1]
        p = w[0] * self.components[0].predictions
        for wk, part in zip(w[1:], self.components[1:]):
            p = p + wk * part.predictions
        self.predictions, self._scores = read_only(np.clip(p, 0.0, 1.0, out=p)), None


class BatchedStack(BatchedPosteriorBase):
    """:class:`StackedPosterior` for ``R`` runs in lockstep (torch): components combined by answer count."""

    owner = "StackedPredictor"

    def __init__(self, parts, steps, weights, R, dtype, device, predict_every=1):
        self.parts = parts
        self.steps = np.asarray(steps, dtype=np.int64)
        self.weights = np.asarray(weights, dtype=float)
        self.dtype, self.device = dtype, device
        self.n_answers = np.zeros(R, dtype=np.int64)
        self._start(R, predict_every)

    def _predict(self, sel):
        import torch
        counts = self.n_answers if sel is None else self.n_answers[sel.cpu().numpy()]
        w = self.weights[np.searchsorted(self.steps, counts, side="right") - 1]  # (runs, K)
        if sel is None and np.all(counts == counts[0]):  # in lockstep: the estimator's scalar weights, in its order
            w0 = w[0] if w.shape[0] else self.weights[0]
            p = self.parts[0].predictions * float(w0[0])
            for wk, part in zip(w0[1:], self.parts[1:]):
                p = p + part.predictions * float(wk)
            return p.clamp_(0.0, 1.0)
        wt = torch.as_tensor(w, dtype=self.dtype, device=self.device)
        rows = (lambda x: x) if sel is None else (lambda x: x[sel])  # noqa: E731
        p = rows(self.parts[0].predictions) * wt[:, :1]
        for k, part in enumerate(self.parts[1:], 1):
            p = p + rows(part.predictions) * wt[:, k : k + 1]
        return p.clamp_(0.0, 1.0)

    def update(self, idx, questions, outcomes):
        for part in self.parts:
            part.update(idx, questions, outcomes)
        self.n_answers[self._runs(idx, self.n_answers.size)] += 1
        self._learned(idx)


def _stack_moments(fitted, Z, T, n_paths, seed):
    """Per answer count ``t < T``: the means over validation paths of ``G[t] = P P' / n``, ``b[t] = P z / n``
    and ``c[t] = z z / n``, ``P`` the components' predictions of the ``n`` questions not yet asked."""
    import torch

    from .batched_posterior import batched_posterior

    n_val, N = Z.shape
    rng = np.random.default_rng([seed, 18])
    rows = np.resize(rng.permutation(n_val), max(n_paths, 1))[:n_paths]
    R = rows.size
    orders = np.stack([rng.permutation(N)[:T] for _ in range(R)])
    dtype, device = torch.float64, torch.device("cpu")
    posts = [batched_posterior(m, R, N, dtype, device, 1) for m in fitted]
    Zt = torch.as_tensor(Z[rows], dtype=dtype)
    unasked = torch.ones(R, N, dtype=dtype)
    K = len(fitted)
    G, b, c = np.zeros((T, K, K)), np.zeros((T, K)), np.zeros(T)
    ar = torch.arange(R)
    for t in range(T):
        n = float(N - t)
        P = torch.stack([post.predictions * unasked for post in posts], 1)  # (R, K, N)
        zu = Zt * unasked
        G[t] = (torch.einsum("rkn,rln->kl", P, P) / n).numpy()
        b[t] = (torch.einsum("rkn,rn->k", P, zu) / n).numpy()
        c[t] = float((zu * zu).sum() / n)
        q = torch.as_tensor(orders[:, t])
        z = Zt[ar, q]
        for post in posts:
            post.update(None, q, z)
        unasked[ar, q] = 0.0
    return G / R, b / R, c / R  # means over the paths


def _convex_least_squares(G, b):
    """``argmin w' G w - 2 b' w`` over the simplex (``w >= 0``, ``sum w = 1``), exactly: the best
    of the equality-constrained solutions on every support (few components: at most 2^K - 1)."""
    K = b.size
    best, best_value = None, np.inf
    for mask in range(1, 2**K):
        S = [k for k in range(K) if mask >> k & 1]
        # KKT of min w' G_S w - 2 b_S' w subject to sum w = 1
        A = np.zeros((len(S) + 1, len(S) + 1))
        A[:-1, :-1], A[:-1, -1], A[-1, :-1] = 2 * G[np.ix_(S, S)], 1.0, 1.0
        sol = np.linalg.lstsq(A, np.r_[2 * b[S], 1.0], rcond=None)[0][:-1]
        if np.any(sol < -1e-12):
            continue
        w = np.zeros(K)
        w[S] = np.clip(sol, 0.0, None) / np.clip(sol, 0.0, None).sum()
        value = w @ G @ w - 2 * b @ w
        if value < best_value - 1e-15 * max(abs(value), 1.0):
            best, best_value = w, value
    return best


register_predictor(StackedPredictor)
