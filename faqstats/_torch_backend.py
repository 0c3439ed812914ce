"""Torch half of :class:`faqstats.LogisticFactorModel`: masked logistic factor fitting with AdamW or
alternating Newton."""

import contextlib

import numpy as np
import torch
import torch.nn.functional as F

# Below this observed fraction, gather observed cells (O(nnz k)) instead of dense logits.
_DENSE_MIN_FRACTION = 0.2

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def resolve_device(device):
    """Map ``"auto"`` to ``"cuda"`` when a GPU is visible, else ``"cpu"``."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested but torch sees no CUDA device; use 'auto' or 'cpu'.")
    if not (device == "cpu" or device.startswith("cuda") or device == "mps"):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps', got {device!r}.")
    return device


@contextlib.contextmanager
def intra_op_threads(n):
    """Torch's intra-op threads set to ``n`` meanwhile (``None``: left as is): small tensors gain nothing from a
    second thread, whose spin-waits cost much on a busy machine."""
    if n is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def resolve_dtype(dtype):
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, got {dtype!r}.")
    return _DTYPES[dtype]


def _bce(x, y):
    return F.binary_cross_entropy_with_logits(x, y, reduction="none")


def _start(H, k, seed, scale, init_model_factors, question_factors, tdtype, device):
    """Starting U and V (V frozen at ``question_factors`` when given): ``scale`` times N(0, 1) draws
    from ``seed``, in float64 whatever the dtype so float32 and float64 fits start alike."""
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    n_models, n_questions = H.shape
    if init_model_factors is None:
        U = scale * torch.randn(n_models, k, generator=gen, dtype=torch.float64)
    else:
        U = np.broadcast_to(np.asarray(init_model_factors, dtype=float), (n_models, k))
        U = torch.as_tensor(U.copy())
    if question_factors is None:
        V = scale * torch.randn(n_questions, k, generator=gen, dtype=torch.float64)
    else:
        V = torch.as_tensor(np.asarray(question_factors))
    return U.to(device=device, dtype=tdtype), V.to(device=device, dtype=tdtype)


def fit_factors(H, *, n_components, regularization, learning_rate, max_iter, device, dtype, seed,
                question_factors=None, init_model_factors=None, progress=lambda step: None):
    """Fit model factors U (and question factors V unless given) to ``H`` with AdamW -> ``U, V, losses`` (float64;
    the loss before each step). Frozen V: the loss sums each row's mean cross-entropy. U starts at
    ``init_model_factors`` ((k,) or (n_models, k)), else N(0, 1) draws from ``seed``; ``progress(steps done)``."""
    tdtype = resolve_dtype(dtype)
    observed = ~np.isnan(H)
    U, V = _start(H, n_components, seed, 1.0, init_model_factors, question_factors, tdtype, device)
    # Cell weights, a (rows x 1) column: 1 / (observed cells), or 1 / (the row's) with V frozen.
    if question_factors is None:
        params = [U.requires_grad_(True), V.requires_grad_(True)]
        row_weight = np.full((H.shape[0], 1), 1.0 / observed.sum())
    else:
        params = [U.requires_grad_(True)]
        row_weight = 1.0 / np.maximum(observed.sum(axis=1, keepdims=True), 1)
    cells = _observed_cells(H, observed, row_weight, tdtype, device)

    def loss_fn():
        if isinstance(cells, _DenseCells):
            return (_bce(U @ V.T, cells.Y) * cells.W).sum()
        return (_bce((U[cells.rows] * V[cells.cols]).sum(dim=1), cells.y) * cells.w).sum()

    optimizer = torch.optim.AdamW(params, lr=learning_rate, weight_decay=regularization)
    losses = np.empty(max_iter)
    for step in range(max_iter):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        optimizer.step()
        losses[step] = loss.item()
        progress(step + 1)
    if not np.isfinite(losses[-1]):
        advice = "lower learning_rate" + (" or raise regularization" if regularization < 1.0 else "")
        raise FloatingPointError(f"The factor-model loss diverged (non-finite): {advice}, or check the history "
                                 "for rows or columns with extreme values.")
    U, V = U.detach(), V.detach()
    return U.to("cpu", torch.float64).numpy(), V.to("cpu", torch.float64).numpy(), losses


# Alternating Newton on L(U, V) = sum_{observed} BCE(u_i . v_j, H_ij) + (regularization / 2) (||U||^2 + ||V||^2):
# a half-sweep takes one damped Newton step (batched Cholesky, per-row Armijo backtracking) for every
# row's ridge-logistic regression at once, so L never increases; Hessian blocks are bounded by _BLOCK_ELEMENTS.

_BLOCK_ELEMENTS = 1 << 23  # largest temporary (elements) for Hessian/Khatri-Rao chunks
_ARMIJO = 1e-4
_MAX_HALVINGS = 30


class _TriuPairs:
    """Upper-triangle index pairs of a k x k matrix and the map back to the full matrix."""

    def __init__(self, k, device):
        self.a, self.b = torch.triu_indices(k, k, device=device)
        full = torch.empty(k, k, dtype=torch.long, device=device)
        full[self.a, self.b] = torch.arange(self.a.numel(), device=device)
        full[self.b, self.a] = full[self.a, self.b]
        self.full = full.reshape(-1)
        self.k = k

    def products(self, B):
        """Row-wise Khatri-Rao square: (n, k(k+1)/2) with B[:, a] * B[:, b]."""
        return B[:, self.a] * B[:, self.b]

    def hessians(self, tri, ridge):
        """(n, T) packed upper triangles -> (n, k, k) float64 matrices plus ridge * I."""
        Hs = tri.to(torch.float64)[:, self.full].reshape(-1, self.k, self.k)
        Hs.diagonal(dim1=1, dim2=2).add_(ridge)
        return Hs


def _newton_directions(G, hess_tri_block, n_rows, ridge, pairs):
    """D = -H_i^{-1} g_i for every row, in row blocks so Hessians stay bounded."""
    # a block holds a few float64 copies of its (rows, k, k) Hessians: keep it ~_BLOCK_ELEMENTS
    rows_per_block = max(1, _BLOCK_ELEMENTS // (4 * pairs.k * pairs.k))
    D = torch.empty_like(G)
    for r0 in range(0, n_rows, rows_per_block):
        r1 = min(n_rows, r0 + rows_per_block)
        Hs = pairs.hessians(hess_tri_block(r0, r1), ridge)
        L, info = torch.linalg.cholesky_ex(Hs)
        if bool((info != 0).any()):  # pragma: no cover - ridge > 0 keeps H positive definite
            raise FloatingPointError("A Newton Hessian was not positive definite; raise regularization.")
        g = G[r0:r1].to(torch.float64).unsqueeze(-1)
        D[r0:r1] = -torch.cholesky_solve(g, L).squeeze(-1).to(G.dtype)
    return D


class _DenseCells:
    """Observed cells as dense (rows x cols) target and weight matrices (weight 0 = missing)."""

    def __init__(self, target, weight):
        self.Y, self.W = target, weight

    def transposed(self):
        return _DenseCells(self.Y.T, self.W.T)

    @staticmethod
    def logits(A, B):
        return A @ B.T

    def other_logits(self, X):
        return X.T

    def data_loss(self, X):
        return (self.W * _bce(X, self.Y)).sum(dim=1)

    def step(self, A, B, X, ridge, pairs, active):
        """One damped Newton step on every active row of A (B fixed); X = A @ B.T."""
        P = torch.sigmoid(X)
        G = (self.W * (P - self.Y)) @ B + ridge * A
        S = self.W * P * (1.0 - P)
        del P
        T = pairs.a.numel()
        cols_per_chunk = max(1, _BLOCK_ELEMENTS // T)
        # Khatri-Rao chunks of B made once per step for every row block (cols x k(k+1)/2 in all)
        products = [(c0, min(B.shape[0], c0 + cols_per_chunk), pairs.products(B[c0 : c0 + cols_per_chunk]))
                    for c0 in range(0, B.shape[0], cols_per_chunk)]

        def hess_tri(r0, r1):
            tri = torch.zeros(r1 - r0, T, dtype=A.dtype, device=A.device)
            for c0, c1, kr in products:
                tri += S[r0:r1, c0:c1] @ kr
            return tri

        D = _newton_directions(G, hess_tri, A.shape[0], ridge, pairs)
        D[~active] = 0
        XD = D @ B.T
        f0 = self.data_loss(X) + 0.5 * ridge * (A * A).sum(dim=1)
        slope = (G * D).sum(dim=1)

        def trial_loss(rows, t):
            if rows.numel() == A.shape[0]:  # first trial, every row: no gathered copies of X, W, Y
                Xt, At, Wr, Yr = torch.addcmul(X, t[:, None], XD), A + t[:, None] * D, self.W, self.Y
            else:
                Xt, At = X[rows] + t[:, None] * XD[rows], A[rows] + t[:, None] * D[rows]
                Wr, Yr = self.W[rows], self.Y[rows]
            return (Wr * _bce(Xt, Yr)).sum(dim=1) + 0.5 * ridge * (At * At).sum(dim=1)

        t = _armijo(f0, slope, trial_loss, active)
        return A + t[:, None] * D, X + t[:, None] * XD, t, D


def _observed_cells(H, observed, weight, tdtype, device):
    """The observed cells of ``H`` with their weights (``weight``: per row, (n_models, 1), or one), dense
    when at least :data:`_DENSE_MIN_FRACTION` are observed, else gathered (O(nnz) memory)."""
    if observed.mean() >= _DENSE_MIN_FRACTION:
        return _DenseCells(torch.as_tensor(np.nan_to_num(H, nan=0.0), dtype=tdtype, device=device),
                           torch.as_tensor(np.where(observed, weight, 0.0), dtype=tdtype, device=device))
    rows, cols = np.nonzero(observed)  # sorted by row, then col: the order _GatheredCells keeps
    weight = np.broadcast_to(weight, (H.shape[0], 1))[rows, 0]
    return _GatheredCells(torch.as_tensor(rows, device=device), torch.as_tensor(cols, device=device),
                          torch.as_tensor(H[rows, cols], dtype=tdtype, device=device),
                          torch.as_tensor(weight, dtype=tdtype, device=device), *H.shape)


class _GatheredCells:
    """Observed cells as (row, col, target, weight) lists sorted by row: O(nnz) memory."""

    def __init__(self, rows, cols, target, weight, n_rows, n_cols):
        order = torch.argsort(rows * n_cols + cols)  # by row, then col (stable layout)
        self.rows, self.cols = rows[order], cols[order]
        self.y, self.w = target[order], weight[order]
        self.n_rows, self.n_cols = n_rows, n_cols
        self.ptr = torch.zeros(n_rows + 1, dtype=torch.long, device=rows.device)
        self.ptr[1:] = torch.cumsum(torch.bincount(self.rows, minlength=n_rows), 0)
        self._to_other = None

    def transposed(self):
        other = _GatheredCells(self.cols, self.rows, self.y, self.w, self.n_cols, self.n_rows)
        # position of each of our cells in the other's (col-major) order
        self._to_other = torch.argsort(self.cols * self.n_rows + self.rows)
        other._to_other = torch.argsort(other.cols * self.n_cols + other.rows)
        return other

    def _chunks(self, lo=0, hi=None, width=1):
        hi = self.rows.numel() if hi is None else hi
        size = max(1, _BLOCK_ELEMENTS // max(width, 1))
        for c0 in range(lo, hi, size):
            yield c0, min(hi, c0 + size)

    def logits(self, A, B):
        x = torch.empty(self.rows.numel(), dtype=A.dtype, device=A.device)
        for c0, c1 in self._chunks(width=A.shape[1]):
            x[c0:c1] = (A[self.rows[c0:c1]] * B[self.cols[c0:c1]]).sum(dim=1)
        return x

    def other_logits(self, x):
        return x[self._to_other]

    def data_loss(self, x):
        out = torch.zeros(self.n_rows, dtype=x.dtype, device=x.device)
        return out.index_add_(0, self.rows, self.w * _bce(x, self.y))

    def step(self, A, B, x, ridge, pairs, active):
        p = torch.sigmoid(x)
        r = self.w * (p - self.y)
        s = self.w * p * (1.0 - p)
        G = ridge * A
        for c0, c1 in self._chunks(width=A.shape[1]):
            G.index_add_(0, self.rows[c0:c1], r[c0:c1, None] * B[self.cols[c0:c1]])
        T = pairs.a.numel()

        def hess_tri(r0, r1):
            tri = torch.zeros(r1 - r0, T, dtype=A.dtype, device=A.device)
            lo, hi = int(self.ptr[r0]), int(self.ptr[r1])
            for c0, c1 in self._chunks(lo, hi, width=T):
                contrib = s[c0:c1, None] * pairs.products(B[self.cols[c0:c1]])
                tri.index_add_(0, self.rows[c0:c1] - r0, contrib)
            return tri

        D = _newton_directions(G, hess_tri, A.shape[0], ridge, pairs)
        D[~active] = 0
        xd = self.logits(D, B)
        f0 = self.data_loss(x) + 0.5 * ridge * (A * A).sum(dim=1)
        slope = (G * D).sum(dim=1)

        def trial_loss(rows, t):
            t_all = torch.zeros(self.n_rows, dtype=A.dtype, device=A.device)
            t_all[rows] = t
            cell_t = t_all[self.rows]
            At = A[rows] + t[:, None] * D[rows]
            return self.data_loss(x + cell_t * xd)[rows] + 0.5 * ridge * (At * At).sum(dim=1)

        t = _armijo(f0, slope, trial_loss, active)
        return A + t[:, None] * D, x + t[self.rows] * xd, t, D


def _armijo(f0, slope, trial_loss, active):
    """Per-row backtracking: the largest t in {1, 1/2, 1/4, ...} with
    f(t) <= f(0) + c t slope; rows that never qualify (or are inactive) get t = 0."""
    t = torch.zeros_like(f0)
    todo = torch.nonzero(active).squeeze(1)
    step = torch.ones(todo.numel(), dtype=f0.dtype, device=f0.device)
    for _ in range(_MAX_HALVINGS):
        if todo.numel() == 0:
            break
        ft = trial_loss(todo, step)
        ok = ft <= f0[todo] + _ARMIJO * step * slope[todo]
        t[todo[ok]] = step[ok]
        todo, step = todo[~ok], 0.5 * step[~ok]
    return t


def fit_factors_newton(H, *, n_components, regularization, max_iter, tol, device, dtype, seed, question_factors=None,
                       init_model_factors=None, progress=lambda step: None):
    """Alternating damped Newton on the L2-penalised sum of cross-entropies (see above), as :func:`fit_factors`
    but from the draws times 0.1 (where the loss is well curved), stopping when a sweep lowers the objective by
    less than ``tol`` (relative; frozen V: each row to convergence); ``losses``: the mean after each sweep."""
    tdtype = resolve_dtype(dtype)
    n_models, n_questions = H.shape
    observed = ~np.isnan(H)
    n_obs = int(observed.sum())
    U, V = _start(H, n_components, seed, 0.1, init_model_factors, question_factors, tdtype, device)
    by_row = _observed_cells(H, observed, 1.0, tdtype, device)
    pairs = _TriuPairs(n_components, device)
    ridge = float(regularization)
    X = by_row.logits(U, V)
    losses = []

    if question_factors is not None:
        active = torch.ones(n_models, dtype=torch.bool, device=device)
        # quadratic convergence: after a full step below sqrt(eps) (relative) the next is at rounding
        # level; each row stops on its own
        step_tol = float(np.sqrt(torch.finfo(tdtype).eps))
        for sweep in range(max_iter):
            U, X, t, D = by_row.step(U, V, X, ridge, pairs, active)
            small = D.abs().amax(dim=1) <= step_tol * (1.0 + U.abs().amax(dim=1))
            active &= ~(((t == 1) & small) | (t == 0))  # t = 0: no decrease left to find
            losses.append(float(by_row.data_loss(X).sum()) / n_obs)
            progress(sweep + 1)
            if not bool(active.any()):
                break
    else:
        by_col = by_row.transposed()
        all_rows = torch.ones(n_models, dtype=torch.bool, device=device)
        all_cols = torch.ones(n_questions, dtype=torch.bool, device=device)

        def objective(data):
            return float(data) + 0.5 * ridge * float((U * U).sum() + (V * V).sum())

        previous = objective(by_row.data_loss(X).sum())
        for sweep in range(max_iter):
            U, X, _, _ = by_row.step(U, V, X, ridge, pairs, all_rows)
            Xc = by_row.other_logits(X)
            V, Xc, _, _ = by_col.step(V, U, Xc, ridge, pairs, all_cols)
            X = by_col.other_logits(Xc)
            data = by_col.data_loss(Xc).sum()
            losses.append(float(data) / n_obs)
            progress(sweep + 1)
            current = objective(data)
            if not np.isfinite(current) or previous - current <= tol * abs(current):
                break
            previous = current
    losses = np.asarray(losses, dtype=float)
    if not (np.isfinite(losses).all() and bool(torch.isfinite(U).all()) and bool(torch.isfinite(V).all())):
        raise FloatingPointError("The Newton factor fit produced non-finite values; raise regularization or use "
                                 "dtype='float64'.")
    return U.to("cpu", torch.float64).numpy(), V.to("cpu", torch.float64).numpy(), losses
