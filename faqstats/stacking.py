"""Predictors beyond the low-rank form: a mixture over the history's models, and stacks of predictors.

:class:`HistoryMixture` predicts a new model's answers as a posterior-weighted average of the
history models' (smoothed) answers: the new model is "like" the history models that answered
as it did so far. :class:`StackedPredictor` runs several fitted predictors side by side, each
learning every answer, and predicts a convex combination of their predictions whose weights
depend on how many answers are in, learned on validation models of the history. Both are
functions of the answers so far, so PAI stays exactly unbiased with them
(docs/statistics.md, "Any predictable predictor").
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted

from ._validation import check_scalar, check_seed, observed_halves, validate_history
from .posterior import PosteriorView, oracle_scores, read_only

__all__ = ["HistoryMixture", "MixturePosterior", "StackedPosterior", "StackedPredictor"]

#: the low-rank target of :class:`HistoryMixture` is clipped to [_TARGET_CLIP, 1 - _TARGET_CLIP]
_TARGET_CLIP = 0.01


def _check_dtype(dtype):
    if dtype not in ("float64", "float32"):
        raise ValueError(f"dtype must be 'float64' or 'float32', got {dtype!r}.")


def _check_predict_every(predict_every):
    check_scalar(predict_every, "predict_every", kind=numbers.Integral, low=1)
    return int(predict_every)


class HistoryMixture(TransformerMixin, BaseEstimator):
    """A new model as a mixture of the history's models: Bayesian model averaging over its rows.

    Each history model ``i`` has a smoothed answer profile ``P_ij = (1 - smoothing) H_ij +
    smoothing T_ij``, ``T_ij`` its own low-rank fit (a :class:`~faqstats.GaussianProcessSurrogate`'s
    prediction of its row, clipped to [0.01, 0.99]; ``target="means"``: the question's history mean
    ``m_j``), which also fills missing cells. A new
    model's prior weight is uniform over the ``M`` history models; each answer ``z`` to
    question ``j`` multiplies model ``i``'s weight by ``(P_ij^z (1 - P_ij)^(1 - z))^temperature``,
    and the predictions are ``sum_i w_i P_ij``. Nonparametric: it captures near-duplicates
    (fine-tunes and merges of one base) that a low-rank covariance smooths away. A drop-in for a
    fitted :class:`~faqstats.LogisticFactorModel` in :class:`~faqstats.PAIEstimator`,
    :class:`~faqstats.PairedPAIEstimator`, :func:`faqstats.batched.simulate` and
    :class:`~faqstats.EvaluationSession`, saved by :func:`~faqstats.save_factor_model` (as is a
    :class:`StackedPredictor`); it has no factors, so policies that need them
    (:class:`~faqstats.VarianceReductionSampler`) do not take it.

    Parameters
    ----------
    smoothing : float in (0, 1], default=0.3
        Share of each profile moved to the target (keeps every likelihood finite).
    temperature : float > 0, default=0.5
        Power of each answer's likelihood (below 1: a tempered, more cautious posterior).
    target : {"low-rank", "means"}, default="low-rank"
        What the profiles are smoothed toward: each model's low-rank fit, or the question means.
    n_components : int, default=32
        Rank of the low-rank fit (``target="low-rank"``).
    random_state : int, Generator or None, default=None
        Seeds the split of each row's cells in :meth:`score` (the fit is deterministic).

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
    >>> fq.PAIEstimator(mix, budget=20, random_state=0).fit(bank.new_outcomes[0]).n_queries_
    20
    """

    def __init__(self, smoothing=0.3, temperature=0.5, target="low-rank", n_components=32, random_state=None):
        self.smoothing = smoothing
        self.temperature = temperature
        self.target = target
        self.n_components = n_components
        self.random_state = random_state

    def fit(self, X, y=None):
        """Keep the history's smoothed answer profiles.

        Parameters
        ----------
        X : array-like of shape (n_models, N)
            Historical outcomes in [0, 1], NaN where not observed.
        y : None
            Ignored (scikit-learn's convention).

        Returns
        -------
        HistoryMixture
            The fitted mixture (``self``).
        """
        check_scalar(self.smoothing, "smoothing", low=0.0, high=1.0, closed="right")
        check_scalar(self.temperature, "temperature", low=0.0, closed="neither")
        if self.target not in ("low-rank", "means"):
            raise ValueError(f"target must be 'low-rank' or 'means', got {self.target!r}.")
        H = validate_history(self, X, reset=True)
        observed = ~np.isnan(H)
        counts = observed.sum(0)
        overall = float(np.nanmean(H))
        means = (np.where(observed, H, 0.0).sum(0) + overall) / (counts + 1.0)
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
        self.profiles_ = np.clip((1.0 - s) * filled + s * target, floor, 1.0 - floor)
        self.question_means_ = means
        return self

    def posterior(self, dtype="float64", predict_every=1):
        """A new model's :class:`MixturePosterior`: uniform weights over the history models.

        Parameters
        ----------
        dtype : {"float64", "float32"}, default="float64"
            Accepted for the estimator's interface; the mixture computes in float64.
        predict_every : int, default=1
            Refresh the predictions after every ``predict_every``-th answer only.

        Returns
        -------
        MixturePosterior
            The mixture, ready to learn the new model's answers.
        """
        check_is_fitted(self, "profiles_")
        return MixturePosterior(self.profiles_, self.temperature, dtype=dtype, predict_every=predict_every)

    def batched_posterior(self, runs, n_questions, dtype, device, predict_every=1):
        """The posteriors of ``runs`` runs in lockstep (:mod:`faqstats.batched`'s torch engine).

        Parameters
        ----------
        runs : int
        n_questions : int
        dtype : torch.dtype
        device : torch.device
        predict_every : int, default=1

        Returns
        -------
        object
            What the batched engine conditions on each answer.
        """
        from .batched import _BatchedMixture

        check_is_fitted(self, "profiles_")
        return _BatchedMixture(self.profiles_, float(self.temperature), runs, dtype, device, predict_every)

    def transform(self, X):
        """Each row's log mixture weights over the history models given its observed cells.

        Parameters
        ----------
        X : array-like of shape (n_rows, N)
            Outcomes in [0, 1], NaN where not observed.

        Returns
        -------
        ndarray of shape (n_rows, n_models)
            Log weights, largest 0.
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
            Outcomes in [0, 1], NaN where not observed.

        Returns
        -------
        ndarray of shape (n_rows, N)
        """
        W = np.exp(self.transform(X))
        W /= W.sum(1, keepdims=True)
        return np.clip(W @ self.profiles_, 0.0, 1.0)

    def score(self, X, y=None):
        """Held-out negative Brier score (higher is better): one seeded half of each row's cells
        conditions the prediction of the other.

        Parameters
        ----------
        X : array-like of shape (n_rows, N)
            Outcomes of held-out models, NaN where not observed.
        y : None
            Ignored (scikit-learn's convention).

        Returns
        -------
        float
            Minus the mean squared error on the scored cells.
        """
        check_is_fitted(self, "profiles_")
        H, fit_half, test_half = observed_halves(self, X)
        P = self.predict(np.where(fit_half, H, np.nan))
        return -float(np.mean((P[test_half] - H[test_half]) ** 2))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # NaN marks a cell that was not observed
        tags.input_tags.positive_only = True
        return tags


class MixturePosterior:
    """The weights of :class:`HistoryMixture`'s history models given a new model's answers.

    Parameters
    ----------
    profiles : ndarray of shape (M, N)
        The smoothed history, entries in (0, 1).
    temperature : float
        Power of each answer's likelihood.
    dtype : {"float64", "float32"}, default="float64"
        Accepted for the interface; computed in float64.
    predict_every : int, default=1
        Recompute the predictions after every ``predict_every``-th answer only.

    Attributes
    ----------
    predictions, oracle_scores : ndarray of shape (N,)
        Read-only; replaced by each refresh.
    log_weights : ndarray of shape (M,)
        The unnormalised log posterior weights of the history models (0 at the prior).

    Examples
    --------
    >>> import numpy as np
    >>> post = MixturePosterior(np.array([[0.9, 0.9], [0.1, 0.1]]), 1.0)
    >>> post.predictions.tolist()
    [0.5, 0.5]
    >>> post.update(0, 1.0)
    >>> post.predictions.round(2).tolist()
    [0.82, 0.82]
    """

    question_factors = mean = cov = noise = None  # no factors: the PosteriorView of a plain predictor

    def __init__(self, profiles, temperature, *, dtype="float64", predict_every=1):
        _check_dtype(dtype)
        self.predict_every, self._unpredicted = _check_predict_every(predict_every), 0
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
        self._unpredicted += 1
        if self._unpredicted == self.predict_every:
            self._predict()
            self._unpredicted = 0

    def weights(self):
        """The normalised posterior weights of the history models."""
        w = np.exp(self.log_weights - self.log_weights.max())
        return w / w.sum()

    def _predict(self):
        p = self.weights() @ self.profiles
        self.predictions, self._scores = read_only(np.clip(p, 0.0, 1.0, out=p)), None

    @property
    def oracle_scores(self):
        """``sqrt(p_j (1 - p_j))`` for the current predictions (read-only)."""
        if self._scores is None:
            self._scores = read_only(oracle_scores(self.predictions))
        return self._scores

    def view(self):
        return PosteriorView(self)


#: answer counts where a new set of stacking weights starts (the last set holds beyond)
STACK_STEPS = (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)


class StackedPredictor(BaseEstimator):
    """Several predictors side by side, combined with weights that depend on the answers seen.

    Every component learns every answer; the prediction after ``n`` answers is
    ``sum_k w_k(n) p_k`` with convex weights (``w_k >= 0``, summing to 1), constant on the
    ranges of :data:`STACK_STEPS`. :meth:`fit` learns them by cross-fitting on the history:
    the components are fitted without a share of its complete rows (the validation models),
    each validation model answers its questions in a random order, and the weights of each
    range minimise the squared error of the predictions on the questions not yet asked, summed
    over models and paths; then the components are refitted on the whole history. The weights are
    fixed before any new model answers and the components are functions of its answers so far,
    so PAI with the stack stays exactly unbiased (docs/statistics.md, "Any predictable predictor").

    Parameters
    ----------
    estimators : list of (str, estimator) or None, default=None
        Unfitted predictors with ``posterior()`` (and, for :func:`faqstats.batched.simulate`,
        a low-rank form or ``batched_posterior``). ``None``: a
        :class:`~faqstats.GaussianProcessSurrogate` (rank 32) and two :class:`HistoryMixture`,
        a sharp one (``smoothing=0.5, temperature=1``: best after few answers) and a cautious one
        (``smoothing=0.3, temperature=0.5``: best after many), the grid chosen on validation
        models of openllm_v1 (docs/results.md, "Stacked predictors").
    validation_fraction : float in (0, 1), default=0.25
        Share of the history's complete rows that learns the weights.
    max_answers : int or None, default=None
        Answers per validation path; ``None``: a quarter of the bank, at least 32 (at most
        ``N``). Larger counts take the last range's weights.
    n_paths : int, default=256
        Validation paths (spread over the validation models).
    random_state : int, default=0
        Seeds the split, the paths and the components' fits (where they take one).

    Attributes
    ----------
    estimators_ : list of fitted estimators
        The components, refitted on the whole history.
    steps_ : ndarray of int
        The answer counts where each set of weights starts.
    weights_ : ndarray of shape (n_steps, n_estimators)
        The combination weights.
    validation_mse_ : ndarray of shape (n_steps, n_estimators + 1)
        The validation squared error per range: each component's, then the stack's.
    n_features_in_ : int

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=80, n_questions=100, n_components=3, random_state=0)
    >>> stack = StackedPredictor(n_paths=40).fit(bank.history)
    >>> stack.weights_.shape[1], bool(np.allclose(stack.weights_.sum(1), 1))
    (3, True)
    >>> fq.PAIEstimator(stack, budget=20, random_state=0).fit(bank.new_outcomes[0]).n_queries_
    20
    """

    def __init__(self, estimators=None, validation_fraction=0.25, max_answers=None, n_paths=256, random_state=0):
        self.estimators = estimators
        self.validation_fraction = validation_fraction
        self.max_answers = max_answers
        self.n_paths = n_paths
        self.random_state = random_state

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

    def fit(self, X, y=None):
        """Learn the combination weights on validation models of the history, then refit the components on all of it.

        Parameters
        ----------
        X : array-like of shape (n_models, N)
            Historical outcomes in [0, 1], NaN where not observed; at least a few complete rows.
        y : None
            Ignored (scikit-learn's convention).

        Returns
        -------
        StackedPredictor
            The fitted stack (``self``).
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
            weights[i] = _convex_least_squares(Gi, bi)
            count = hi - lo
            mse[i, :K] = (np.diag(Gi) - 2 * bi + ci) / count
            w = weights[i]
            mse[i, K] = (w @ Gi @ w - 2 * w @ bi + ci) / count
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

    def posterior(self, dtype="float64", predict_every=1):
        """A new model's :class:`StackedPosterior`: every component at its prior.

        Parameters
        ----------
        dtype : {"float64", "float32"}, default="float64"
            Precision of the components' predictions.
        predict_every : int, default=1
            Refresh the predictions after every ``predict_every``-th answer only.

        Returns
        -------
        StackedPosterior
            The stack, ready to learn the new model's answers.
        """
        check_is_fitted(self, "weights_")
        predict_every = _check_predict_every(predict_every)
        parts = [est.posterior(dtype=dtype, predict_every=predict_every) for est in self.estimators_]
        return StackedPosterior(parts, self.steps_, self.weights_, predict_every=predict_every)

    def batched_posterior(self, runs, n_questions, dtype, device, predict_every=1):
        """The stacks of ``runs`` runs in lockstep (:mod:`faqstats.batched`'s torch engine).

        Parameters
        ----------
        runs : int
        n_questions : int
        dtype : torch.dtype
        device : torch.device
        predict_every : int, default=1

        Returns
        -------
        object
            What the batched engine conditions on each answer.
        """
        from .batched import _BatchedStack, batched_posterior

        check_is_fitted(self, "weights_")
        parts = [batched_posterior(est, runs, n_questions, dtype, device, predict_every) for est in self.estimators_]
        return _BatchedStack(parts, self.steps_, self.weights_, runs, dtype, device, predict_every)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.positive_only = True
        return tags


class StackedPosterior:
    """Components' posteriors learning every answer, their predictions combined by answer count.

    Parameters
    ----------
    components : list of posteriors
        Each with ``predictions`` and ``update(question, outcome)``, refreshed on the same schedule.
    steps : ndarray of int
        The answer counts where each row of ``weights`` starts.
    weights : ndarray of shape (len(steps), len(components))
    predict_every : int, default=1

    Attributes
    ----------
    predictions, oracle_scores : ndarray of shape (N,)
        Read-only; replaced by each refresh.
    n_answers : int

    Examples
    --------
    >>> import numpy as np
    >>> from faqstats.posterior import FixedPredictions
    >>> post = StackedPosterior([FixedPredictions([0.2, 0.4]), FixedPredictions([0.6, 0.8])], [0, 1],
    ...                         np.array([[1.0, 0.0], [0.5, 0.5]]))
    >>> post.predictions.tolist()
    [0.2, 0.4]
    >>> post.update(0, 1.0)
    >>> post.predictions.round(3).tolist()
    [0.4, 0.6]
    """

    question_factors = mean = cov = noise = None

    def __init__(self, components, steps, weights, *, predict_every=1):
        self.components = list(components)
        self.steps = np.asarray(steps, dtype=np.int64)
        self.weights = np.asarray(weights, dtype=float)
        if self.weights.shape != (self.steps.size, len(self.components)) or self.steps[0] != 0:
            raise ValueError("weights must have one row per step (the first step 0) and one column per component.")
        self.predict_every, self._unpredicted = _check_predict_every(predict_every), 0
        self.n_answers = 0
        self._predict()

    def update(self, question, outcome):
        """Every component learns the answer; the combination is refreshed on the schedule."""
        for part in self.components:
            part.update(question, outcome)
        self.n_answers += 1
        self._unpredicted += 1
        if self._unpredicted == self.predict_every:
            self._predict()
            self._unpredicted = 0

    def _predict(self):
        w = self.weights[np.searchsorted(self.steps, self.n_answers, side="right") - 1]
        p = w[0] * self.components[0].predictions
        for wk, part in zip(w[1:], self.components[1:]):
            p = p + wk * part.predictions
        self.predictions, self._scores = read_only(np.clip(p, 0.0, 1.0, out=p)), None

    @property
    def oracle_scores(self):
        """``sqrt(p_j (1 - p_j))`` for the current predictions (read-only)."""
        if self._scores is None:
            self._scores = read_only(oracle_scores(self.predictions))
        return self._scores

    def view(self):
        return PosteriorView(self)


def _stack_moments(fitted, Z, T, n_paths, seed):
    """Per answer count ``t < T``: the means over validation paths of ``G[t] = P P' / n``, ``b[t] = P z / n``
    and ``c[t] = z z / n``, ``P`` the components' predictions of the ``n`` questions not yet asked."""
    import torch

    from .batched import batched_posterior

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
