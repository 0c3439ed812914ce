"""The unguaranteed field as experiment methods, side by side with PAI (docs/results.md): their base
:class:`FieldMethod`, ProEval's Bayesian quadrature, the model-based estimate, and on a 2PL model (:func:`fit_irt`)
Fluid Benchmarking's adaptive test and tinyBenchmarks' gp-IRT.

A design is fixed before the new model answers, so it is drawn per seed and shared by every new model:
:meth:`FieldMethod.run`'s ``random_state`` is ``np.random.default_rng([random_state, method_key(method), seed])``'s
first integer.
"""

import numbers
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import optimize, special, stats
from sklearn.base import BaseEstimator

from .._validation import check_alpha, check_history, check_scalar, check_seed
from ..model_based import ModelBasedEstimator
from .records import RECORD_COLUMNS, method_key

__all__ = ["FieldMethod", "FieldRun", "IRTFisher", "ModelBased", "ProEvalBQ", "TinyBenchmarks", "fit_irt",
           "normal_interval"]


@dataclass(frozen=True)
class FieldRun:
    """One :class:`FieldMethod` run on one new model: the estimate, the method's own std_error and interval (NaN
    where it has none), and the queried questions in query order.
    """

    estimate: float
    std_error: float
    low: float
    high: float
    queried: np.ndarray

    @property
    def n_queries(self):
        """Number of questions queried."""
        return int(np.size(self.queried))


class FieldMethod(BaseEstimator):
    """Base of the field's methods: :meth:`fit` on the history, then :meth:`run` on a new model; subclasses implement
    ``_fit(H)``, ``_run(y, budget, seed, alpha)`` and maybe ``_design_key``.
    """

    def check_params(self):
        """Check the parameters (a ValueError names the bad one); subclasses add theirs."""

    def fit(self, history, y=None):
        """Check the parameters and fit on the history (0/1, NaN = not observed)."""
        self.check_params()
        H = check_history(history, name="history", allow_graded=False)
        self.n_features_in_ = H.shape[1]
        self._fit(H)
        self._designs = {}  # seed -> the method's design, shared by every new model of that seed
        return self

    def _check_run(self, outcomes, budget, alpha):
        if not hasattr(self, "n_features_in_"):
            raise ValueError(f"This {type(self).__name__} is not fitted yet; call fit(history) first.")
        y = np.asarray(outcomes, dtype=float)
        if y.shape != (self.n_features_in_,):
            raise ValueError(f"outcomes must be a vector of the history's {self.n_features_in_} questions, "
                             f"got shape {y.shape}.")
        if not np.isin(y, (0.0, 1.0)).all():
            raise ValueError("outcomes must be complete 0/1 values (the runs query them).")
        check_scalar(budget, "budget", kind=numbers.Integral, low=1, high=self.n_features_in_)
        check_alpha(alpha)
        return y

    def run(self, outcomes, budget, *, alpha=0.05, random_state=None):
        """Query ``budget`` distinct questions of a new model's complete 0/1 ``outcomes`` and estimate its accuracy
        (its own interval at level ``alpha``); ``random_state`` seeds the design, the same for every model.
        """
        y = self._check_run(outcomes, budget, alpha)
        return self._run(y, int(budget), check_seed(random_state), float(alpha))

    def _design_key(self, seed):
        """What a design depends on: the seed, or a constant for a method without randomness."""
        return seed

    def run_records(self, name, fraction, budget, seeds, new, truths, rows, random_state, alpha):
        """:func:`~faqstats.experiments.run_methods`' records of one budget and some ``seeds`` (each one design,
        shared by the new models); ``covered`` is NaN where the method gives no interval.
        """
        key = method_key(name)
        n = new.shape[0]
        seeds = [int(s) for s in np.atleast_1d(seeds)]
        columns = np.empty((5, len(seeds) * n))
        memo = {}  # a deterministic design gives the same run for every seed: run it once per model
        for s, seed in enumerate(seeds):
            design_seed = int(np.random.default_rng([random_state, key, seed]).integers(2**31 - 1))
            for i in range(n):
                cache = (self._design_key(design_seed), i)
                if cache not in memo:
                    memo[cache] = self.run(new[i], int(budget), alpha=alpha, random_state=design_seed)
                r = memo[cache]
                columns[:, s * n + i] = (r.estimate, r.std_error, r.low, r.high, r.n_queries)
        estimate, std_error, low, high, n_queries = columns
        truth = np.tile(truths, len(seeds))
        covered = (low <= truth) & (truth <= high)
        if np.isnan(low).any():  # no interval: coverage is undefined (NaN), not 0
            covered = np.where(np.isnan(low) | np.isnan(high), np.nan, covered.astype(float))
        return pd.DataFrame({
            "method": name, "budget_fraction": float(fraction), "budget": int(budget),
            "model": np.tile(np.arange(n), len(seeds)), "row": np.tile(rows, len(seeds)),
            "seed": np.repeat(seeds, n), "truth": truth, "estimate": estimate, "std_error": std_error,
            "low": low, "high": high, "covered": covered,
            "n_queries": n_queries.astype(np.int64),
        }, columns=RECORD_COLUMNS)


def normal_interval(estimate, sd, alpha):
    """``estimate -+ z_{1-alpha/2} * sd``: the normal ``1 - alpha`` interval the field reports."""
    z = stats.norm.ppf(1 - alpha / 2)
    return estimate - z * sd, estimate + z * sd


class ModelBased(FieldMethod):
    """The model-based estimate: :class:`~faqstats.ModelBasedEstimator`, calibrated per budget on the history."""

    def __init__(self, max_calibration_models=200, random_state=0):
        self.max_calibration_models = max_calibration_models
        self.random_state = random_state

    def check_params(self):
        check_scalar(self.max_calibration_models, "max_calibration_models", kind=numbers.Integral, low=1)

    def _fit(self, H):
        self.history_ = H
        self.estimators_ = {}
        self.fold_fits_ = {}  # the calibration folds' predictors, fitted once for every budget

    def _run(self, y, budget, seed, alpha):
        if budget not in self.estimators_:  # the history alone: the split's held-out history models
            self.estimators_[budget] = ModelBasedEstimator(
                budget=budget, max_calibration_models=self.max_calibration_models,
                random_state=self.random_state, verbose=False).calibrate(self.history_, fold_fits=self.fold_fits_)
        est = self.estimators_[budget].set_params(random_state=seed).fit(y)
        low, high = est.conf_int(alpha)
        queried = est.queries_["question"]
        return FieldRun(est.estimate_, est.scale_, low, high, queried)


class ProEvalBQ(FieldMethod):
    """ProEval's Bayesian quadrature (``BQPriorSampler``, github.com/google-deepmind/proeval; ``faqstats[field]``):
    a GP over the questions, prior from the history's complete rows (at most ``max_history``, subsampled by seed),
    its variance-reduction plan, and a normal interval from the accuracy's posterior sd.
    """

    def __init__(self, noise_variance=0.3, n_init=0, max_history=300):
        self.noise_variance = noise_variance
        self.n_init = n_init
        self.max_history = max_history

    def check_params(self):
        check_scalar(self.noise_variance, "noise_variance", low=0.0, closed="neither")
        check_scalar(self.n_init, "n_init", kind=numbers.Integral, low=0)
        check_scalar(self.max_history, "max_history", kind=numbers.Integral, low=2)

    @staticmethod
    def _sampler_class():  # ProEval's, imported when needed
        try:
            from proeval.sampler import BQPriorSampler
        except ImportError as exc:
            raise ImportError("the 'proeval' method needs ProEval: pip install 'faqstats[field]' "
                              "(proeval==0.1.1).") from exc
        return BQPriorSampler

    def _fit(self, H):
        self._sampler_class()  # fail now, not in a worker
        complete = H[~np.isnan(H).any(axis=1)]
        if complete.shape[0] < 2:
            raise ValueError(f"ProEval needs at least 2 complete history rows, the history has {complete.shape[0]}.")
        self.history_ = complete

    def _design_key(self, seed):
        subsampled = self.history_.shape[0] > self.max_history
        return seed if subsampled or self.n_init > 0 else 0

    def _plan(self, budget, seed):
        """ProEval's plan for ``seed`` (a larger budget's greedy plan starts with a smaller one's)."""
        key = self._design_key(seed)
        cached = self._designs.get(key)
        if cached is None or len(cached.indices) < budget:
            sources = self.history_
            if sources.shape[0] > self.max_history:
                rng = np.random.default_rng(seed)
                sources = sources[np.sort(rng.choice(sources.shape[0], self.max_history, replace=False))]
            sampler = self._sampler_class()(noise_variance=self.noise_variance, n_init=self.n_init)
            cached = sampler.plan(sources.T, budget, seed=seed)  # ProEval: (items, source models)
            self._designs[key] = cached
        return cached

    def _run(self, y, budget, seed, alpha):
        plan = self._plan(budget, seed)
        idx = list(plan.indices[:budget])
        mean, integral_var = _proeval_posterior(self._sampler_class().get_posterior, plan, idx, y[idx])
        estimate = float(np.mean(mean))
        sd = float(np.sqrt(max(integral_var[0], 0.0)))
        return FieldRun(estimate, sd, *normal_interval(estimate, sd, alpha), np.asarray(idx))


def _proeval_posterior(get_posterior, plan, idx, answers):
    """ProEval's posterior after a plan's first ``len(idx)`` queries: the mean at every question, the variance of
    their mean. It reads the plan's private GP inputs: ``SamplingPlan.estimate`` needs the whole plan's answers."""
    test_x, u, noise_variance = plan._test_x, plan._prior_mean, plan._noise_variance
    mu_x = np.mean(test_x, axis=1, keepdims=True)
    mean, _ = get_posterior(test_x[:, idx], answers, test_x, noise_variance, idx, u)
    _, integral_var = get_posterior(test_x[:, idx], answers, mu_x, noise_variance, idx, u)
    return mean, integral_var


def fit_irt(history, n_dims=1, *, item_regularization=0.1, max_iter=100, tol=1e-6):
    """MAP fit of a (multidimensional) 2PL model ``P(i answers j) = sigmoid(theta_i . a_j + c_j)`` on the observed cells
    (``theta_i ~ N(0, I)``, items ``~ N(0, 1 / item_regularization)``, L-BFGS): ``(a, c, standardised abilities)``.
    """
    H = check_history(history, name="history", allow_graded=False)
    d = check_scalar(n_dims, "n_dims", kind=numbers.Integral, low=1)
    lam = check_scalar(item_regularization, "item_regularization", low=0.0, closed="neither")
    check_scalar(max_iter, "max_iter", kind=numbers.Integral, low=1)
    M, N = H.shape
    observed = ~np.isnan(H)
    Y = np.where(observed, H, 0.0)
    W = observed.astype(float)
    # start: the top singular directions of the mean-filled, centred matrix
    col = np.where(W.sum(0) > 0, Y.sum(0) / np.maximum(W.sum(0), 1), 0.5)
    filled = np.where(observed, H, col)
    U, S, Vt = np.linalg.svd(filled - col, full_matrices=False)
    k = min(d, S.size)
    theta0 = np.zeros((M, d))
    a0 = np.zeros((N, d))
    theta0[:, :k] = U[:, :k] * np.sqrt(M)
    a0[:, :k] = 4.0 * Vt[:k].T * S[:k] / np.sqrt(M)  # probability slope -> logit slope (~4x at p = 1/2)
    c0 = special.logit(np.clip(col, 0.02, 0.98))

    def unpack(x):
        return x[:M * d].reshape(M, d), x[M * d:(M + N) * d].reshape(N, d), x[(M + N) * d:]

    def objective(x):
        theta, a, c = unpack(x)
        z = theta @ a.T + c
        loss = np.sum(W * (np.logaddexp(0.0, z) - Y * z))
        loss += 0.5 * (np.sum(theta ** 2) + lam * (np.sum(a ** 2) + np.sum(c ** 2)))
        G = W * (special.expit(z) - Y)
        grad = np.concatenate([(G @ a + theta).ravel(), (G.T @ theta + lam * a).ravel(), G.sum(0) + lam * c])
        return loss, grad

    x0 = np.concatenate([theta0.ravel(), a0.ravel(), c0])
    res = optimize.minimize(objective, x0, jac=True, method="L-BFGS-B",
                            options={"maxiter": int(max_iter), "ftol": float(tol), "gtol": 1e-6})
    theta, a, c = unpack(res.x)
    # standardise the abilities: theta = mu + L theta', so theta . a + c = theta' . (L^T a) + (mu . a + c)
    mu = theta.mean(0)
    cov = np.atleast_2d(np.cov(theta, rowvar=False)) + 1e-9 * np.eye(d)
    L = np.linalg.cholesky(cov)
    ability = np.linalg.solve(L, (theta - mu).T).T
    return a @ L, c + a @ mu, ability


class IRTFisher(FieldMethod):
    """Fluid Benchmarking's adaptive test (AI2, https://github.com/allenai/fluid-benchmarking) on a :func:`fit_irt` 2PL
    model: ask the unasked question of largest Fisher information at the MAP ability; the estimate averages the answers
    and the rest's predictions, its interval the ability's grid posterior (``item_noise``: plus the Bernoulli variance).
    """

    _GRID = np.linspace(-8.0, 8.0, 641)  # the ability posterior's grid (the prior N(0, 1) has no mass beyond)

    def __init__(self, theta_range=(-4.0, 4.0), item_noise=False, item_regularization=0.1, max_iter=100):
        self.theta_range = theta_range
        self.item_noise = item_noise
        self.item_regularization = item_regularization
        self.max_iter = max_iter

    def check_params(self):
        low, high = self.theta_range
        if not low < 0 < high:
            raise ValueError(f"theta_range must be (low, high) with low < 0 < high, got {self.theta_range}.")
        check_scalar(self.item_regularization, "item_regularization", low=0.0, closed="neither")
        check_scalar(self.max_iter, "max_iter", kind=numbers.Integral, low=1)

    def _fit(self, H):
        A, c, _ = fit_irt(H, 1, item_regularization=self.item_regularization, max_iter=self.max_iter)
        self.discrimination_, self.intercept_ = A[:, 0], c

    def _design_key(self, seed):
        return 0  # deterministic

    def _map_ability(self, theta, a, c, y):
        """Newton for the MAP ability under N(0, 1) from ``theta``, projected onto ``theta_range``."""
        low, high = self.theta_range
        for _ in range(100):
            p = special.expit(a * theta + c)
            score = np.sum(a * (y - p)) - theta
            if abs(score) < 1e-8:
                break
            step = score / (np.sum(a * a * p * (1 - p)) + 1.0)  # the log-posterior is concave
            theta = float(np.clip(theta + step, low, high))
            if theta in (low, high) and np.sign(step) == np.sign(theta):
                break
        return theta

    def _run(self, y, budget, seed, alpha):
        a, c = self.discrimination_, self.intercept_
        N = a.size
        asked = np.zeros(N, dtype=bool)
        order = np.empty(budget, dtype=np.int64)
        theta = 0.0
        for t in range(budget):
            p = special.expit(a * theta + c)
            info = np.where(asked, -np.inf, a * a * p * (1 - p))
            j = int(np.argmax(info))  # ties: the first, as Fluid Benchmarking's np.argmax
            asked[j] = True
            order[t] = j
            theta = self._map_ability(theta, a[order[:t + 1]], c[order[:t + 1]], y[order[:t + 1]])
        observed = y[asked].sum()
        p_rest = special.expit(a[~asked] * theta + c[~asked])
        estimate = float((observed + p_rest.sum()) / N)
        # the ability's posterior on a grid, propagated to the accuracy
        z = np.outer(self._GRID, a[asked]) + c[asked]
        log_post = -0.5 * self._GRID ** 2 + (y[asked] * z - np.logaddexp(0.0, z)).sum(axis=1)
        w = np.exp(log_post - log_post.max())
        w /= w.sum()
        P = special.expit(np.outer(self._GRID, a[~asked]) + c[~asked])
        acc = (observed + P.sum(axis=1)) / N
        mean = float(w @ acc)
        var = float(w @ (acc - mean) ** 2)
        if self.item_noise:
            sd = float(np.sqrt(var + w @ (P * (1 - P)).sum(axis=1) / N ** 2))
            low, high = normal_interval(estimate, sd, alpha)
        else:
            sd = float(np.sqrt(var))
            rank = np.argsort(acc, kind="stable")  # the grid posterior's quantiles
            v, cw = acc[rank], np.cumsum(w[rank])
            low, high = (float(v[min(np.searchsorted(cw, q * cw[-1]), v.size - 1)]) for q in (alpha / 2, 1 - alpha / 2))
            low, high = min(low, estimate), max(high, estimate)  # the grid's coarseness must not exclude the MAP
        return FieldRun(estimate, sd, float(low), float(high), order)


class TinyBenchmarks(FieldMethod):
    """tinyBenchmarks' gp-IRT estimate on k-means anchors (Polo et al., ICML 2024), as its code: no interval.

    The IRT dimension is chosen on every ``validation_every``-th history model (the smallest within ``tolerance`` of the
    best); ``lambda * anchor estimate + (1 - lambda) * p-IRT`` with ``lambda = b^2 / (b^2 + v / (4 n))``.
    """

    def __init__(self, n_dims_grid=(1, 2, 5, 10, 15), validation_every=5, tolerance=0.0025,
                 item_regularization=0.1, max_iter=100):
        self.n_dims_grid = n_dims_grid
        self.validation_every = validation_every
        self.tolerance = tolerance
        self.item_regularization = item_regularization
        self.max_iter = max_iter

    def check_params(self):
        grid = list(np.atleast_1d(self.n_dims_grid))
        if not grid:
            raise ValueError("n_dims_grid must name at least one dimension.")
        for d in grid:
            check_scalar(d, "n_dims_grid entries", kind=numbers.Integral, low=1)
        check_scalar(self.validation_every, "validation_every", kind=numbers.Integral, low=2)
        check_scalar(self.tolerance, "tolerance", low=0.0)
        check_scalar(self.item_regularization, "item_regularization", low=0.0, closed="neither")
        check_scalar(self.max_iter, "max_iter", kind=numbers.Integral, low=1)

    def _fit_irt(self, H, d):
        return fit_irt(H, d, item_regularization=self.item_regularization, max_iter=self.max_iter)[:2]

    def _fit(self, H):
        grid = sorted({int(d) for d in np.atleast_1d(self.n_dims_grid)})
        rows = np.arange(H.shape[0])
        val = rows[::self.validation_every]
        train = np.setdiff1d(rows, val)
        if train.size < 2 or val.size < 1:
            raise ValueError(f"TinyBenchmarks needs at least 3 history models (got {H.shape[0]}).")
        seen = np.arange(0, H.shape[1], 2)
        unseen = np.arange(1, H.shape[1], 2)
        errors = {}
        for d in grid:
            A, c = self._fit_irt(H[train], d)
            errs = []
            for i in val:
                s, u = seen[~np.isnan(H[i, seen])], unseen[~np.isnan(H[i, unseen])]
                if s.size == 0 or u.size == 0:
                    continue
                theta = _mle_ability(H[i, s], A[s], c[s])
                errs.append(abs(special.expit(A[u] @ theta + c[u]).mean() - H[i, u].mean()))
            if not errs:
                raise ValueError("TinyBenchmarks: no validation model has answers on both halves of the bank.")
            errors[d] = float(np.mean(errs))
        best = min(errors.values())
        self.n_dims_ = next(d for d in grid if errors[d] - best < self.tolerance)
        self.validation_errors_ = errors
        self.bias_ = errors[self.n_dims_]
        self.variance_ = float(np.nanmean(np.nanvar(H, axis=1)))
        self.discrimination_, self.intercept_ = self._fit_irt(H, self.n_dims_)

    def _anchors(self, budget, seed):
        """Anchor questions and weights: k-means on the items' IRT parameters (fixed per seed and budget)."""
        from sklearn.cluster import KMeans
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.metrics import pairwise_distances

        key = (seed, budget)
        if key not in self._designs:
            X = np.column_stack([self.discrimination_, self.intercept_])
            with warnings.catch_warnings():  # questions with equal parameters: fewer distinct clusters, fine
                warnings.simplefilter("ignore", ConvergenceWarning)
                km = KMeans(n_clusters=budget, n_init="auto", random_state=seed).fit(X)
            weights = np.bincount(km.labels_, minlength=budget) / X.shape[0]
            dist = pairwise_distances(km.cluster_centers_, X)
            anchors = np.empty(budget, dtype=np.int64)
            taken = np.zeros(X.shape[0], dtype=bool)
            for k in range(budget):  # the nearest question not already an anchor: exactly `budget` queries
                j = int(np.argmin(np.where(taken, np.inf, dist[k])))
                anchors[k], taken[j] = j, True
            self._designs[key] = (anchors, weights)
        return self._designs[key]

    def _run(self, y, budget, seed, alpha):
        anchors, weights = self._anchors(budget, seed)
        A, c = self.discrimination_, self.intercept_
        N = y.size
        naive = float(weights @ y[anchors])
        theta = _mle_ability(y[anchors], A[anchors], c[anchors])
        rest = np.setdiff1d(np.arange(N), anchors)
        share = budget / N
        irt_part = special.expit(A[rest] @ theta + c[rest]).mean() if rest.size else 0.0
        pirt = share * y[anchors].mean() + (1 - share) * irt_part
        lam = self.bias_ ** 2 / (self.bias_ ** 2 + self.variance_ / (4 * budget)) if self.bias_ > 0 else 0.0
        estimate = float(lam * naive + (1 - lam) * pirt)
        return FieldRun(estimate, np.nan, np.nan, np.nan, anchors)


def _mle_ability(y, A, c, eps=1e-10):
    """tinyBenchmarks' ``estimate_ability_parameters``: maximum likelihood by BFGS from 0, logits clipped at 30."""
    def nll(theta):
        z = A @ theta + c
        p = special.expit(np.clip(z, -30, 30))
        value = -np.sum(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps))
        # its exact gradient (tinyBenchmarks differentiates numerically: the same optimum, faster)
        dz = p * (1 - p) * ((1 - y) / (1 - p + eps) - y / (p + eps)) * (np.abs(z) < 30)
        return value, A.T @ dz

    return optimize.minimize(nll, np.zeros(A.shape[1]), jac=True, method="BFGS").x
