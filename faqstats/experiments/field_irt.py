"""The field's IRT methods, without a coverage guarantee: Fluid Benchmarking's adaptive test with maximum
Fisher information and tinyBenchmarks' gp-IRT, on a (multidimensional) 2PL model fitted by :func:`fit_irt`.
"""

import numbers
import warnings

import numpy as np
from scipy import optimize, special

from .._validation import check_history, check_scalar
from .field import FieldMethod, FieldRun, normal_interval

__all__ = ["fit_irt", "IRTFisher", "TinyBenchmarks"]


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
            low, high = _weighted_quantiles(acc, w, (alpha / 2, 1 - alpha / 2))
            low, high = min(low, estimate), max(high, estimate)  # the grid's coarseness must not exclude the MAP
        return FieldRun(estimate, sd, float(low), float(high), order)


def _weighted_quantiles(values, weights, qs):
    order = np.argsort(values, kind="stable")
    v, cw = values[order], np.cumsum(weights[order])
    return [float(v[min(np.searchsorted(cw, q * cw[-1]), v.size - 1)]) for q in qs]


class TinyBenchmarks(FieldMethod):
    """tinyBenchmarks' gp-IRT estimate on k-means anchors (Polo et al., ICML 2024): a point estimate, NaN interval.

    As its code: the IRT dimension chosen on every ``validation_every``-th history model (the smallest within
    ``tolerance`` of the best); ``lambda * anchor estimate + (1 - lambda) * p-IRT``,
    ``lambda = b^2 / (b^2 + v / (4 n))``.
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
