"""The only module that imports torch: masked logistic factor fitting with AdamW.

The loss is the mean binary cross-entropy over observed cells (the paper's
objective divided by the number of observed cells), optimised full-batch with
AdamW whose decoupled weight decay ``alpha`` regularises both factor matrices,
as in the paper's reference code.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

# Below this observed fraction we gather observed cells instead of forming the
# dense (models x questions) logit matrix, so very sparse histories stay O(nnz k).
_DENSE_MIN_FRACTION = 0.2

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def resolve_device(device: str) -> str:
    """Map ``"auto"`` to ``"cuda"`` when a GPU is visible, else ``"cpu"``."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested but torch sees no CUDA device; use 'auto' or 'cpu'.")
    if not (device == "cpu" or device.startswith("cuda") or device == "mps"):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps', got {device!r}.")
    return device


def resolve_dtype(dtype: str) -> torch.dtype:
    try:
        return _DTYPES[dtype]
    except KeyError:
        raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, got {dtype!r}.") from None


def fit_factors(
    H: np.ndarray,
    *,
    n_components: int,
    alpha: float,
    learning_rate: float,
    max_iter: int,
    device: str,
    dtype: str,
    seed: int,
    question_factors: np.ndarray | None = None,
    init_model_factors: np.ndarray | None = None,
    progress=None,
):
    """Fit model factors U (and question factors V unless given) to ``H``.

    Parameters
    ----------
    H : ndarray of shape (n_models, n_questions)
        Outcomes in [0, 1], NaN where not observed.
    question_factors : ndarray of shape (n_questions, k), optional
        When given, V is frozen and only U is fitted (``transform``). Each row is then
        its own problem: the loss is the sum over rows of each row's mean
        cross-entropy, so a row's factor does not depend on the other rows of ``H``
        (AdamW acts element-wise), nor on their order.
    init_model_factors : ndarray of shape (k,) or (n_models, k), optional
        Starting point of U (``transform`` starts every row at the prior mean);
        default N(0, 1) draws from ``seed``.
    progress : callable(int) or None
        Called with the number of finished steps (for progress bars).

    Returns
    -------
    U, V : float64 ndarrays
    losses : float64 ndarray of shape (max_iter,), the training loss at each step
        (evaluated before that step's update)
    """
    tdtype = resolve_dtype(dtype)
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    n_models, n_questions = H.shape
    observed = ~np.isnan(H)
    dense = observed.mean() >= _DENSE_MIN_FRACTION

    if init_model_factors is None:
        # Drawn in float64 whatever the dtype, so float32 and float64 fits start alike.
        U0 = torch.randn(n_models, n_components, generator=gen, dtype=torch.float64).to(tdtype)
    else:
        U0 = torch.as_tensor(
            np.broadcast_to(np.asarray(init_model_factors, dtype=float), (n_models, n_components)).copy(),
            dtype=tdtype,
        )
    U = U0.to(device).requires_grad_(True)
    if question_factors is None:
        V0 = torch.randn(n_questions, n_components, generator=gen, dtype=torch.float64).to(tdtype)
        V = V0.to(device).requires_grad_(True)
        params = [U, V]
    else:
        V = torch.as_tensor(np.asarray(question_factors), dtype=tdtype, device=device)
        params = [U]

    # Weight of each observed cell in the loss: 1 / (all observed cells) for the joint
    # fit (the mean cross-entropy), 1 / (the row's observed cells) with V frozen.
    if question_factors is None:
        cell_weight = np.full(H.shape, 1.0 / observed.sum())
    else:
        cell_weight = np.broadcast_to(1.0 / np.maximum(observed.sum(axis=1, keepdims=True), 1), H.shape)

    if dense:
        target = torch.as_tensor(np.nan_to_num(H, nan=0.0), dtype=tdtype, device=device)
        weight = torch.as_tensor(np.where(observed, cell_weight, 0.0), dtype=tdtype, device=device)

        def loss_fn():
            logits = U @ V.T
            cell = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
            return (cell * weight).sum()

    else:
        rows, cols = np.nonzero(observed)
        rows_t = torch.as_tensor(rows, device=device)
        cols_t = torch.as_tensor(cols, device=device)
        target = torch.as_tensor(H[rows, cols], dtype=tdtype, device=device)
        weight = torch.as_tensor(cell_weight[rows, cols], dtype=tdtype, device=device)

        def loss_fn():
            logits = (U[rows_t] * V[cols_t]).sum(dim=1)
            cell = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
            return (cell * weight).sum()

    optimizer = torch.optim.AdamW(params, lr=learning_rate, weight_decay=alpha)
    losses = np.empty(max_iter)
    for step in range(max_iter):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        optimizer.step()
        losses[step] = loss.item()
        if progress is not None:
            progress(step + 1)
    if not np.isfinite(losses[-1]):
        raise FloatingPointError(
            "The factor-model loss diverged (non-finite). Lower learning_rate or raise alpha."
        )
    U_np = U.detach().to("cpu", torch.float64).numpy()
    V_np = V.detach().to("cpu", torch.float64).numpy()
    return U_np, V_np, losses
