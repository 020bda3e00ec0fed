"""Spectral learning metrics (FedER, RMSGD): entropy of singular values, effective rank, stable
rank, condition number, per-layer metrics."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from fedlib.kernels._base import _check_finite, _svdvals  # noqa: F401
from fedlib.kernels.evbmf import evbmf  # noqa: F401

# --------------------------------------------------------------------------------------------------
# spectral learning metrics
# --------------------------------------------------------------------------------------------------

def _spectrum(s_or_matrix: Tensor | np.ndarray, name: str = "input") -> Tensor:
    """1-D float64 singular values: given directly (1-D) or of a 2-D matrix."""
    t = torch.as_tensor(s_or_matrix).to(torch.float64)
    _check_finite(t, name)
    if t.ndim == 2:
        if t.numel() == 0:
            return t.new_zeros(0)
        return _svdvals(t)
    if t.ndim != 1:
        raise ValueError(
            f"expected singular values (1-D) or a matrix (2-D), got shape {tuple(t.shape)}; "
            "unfold conv weights with unfold_conv() or use layer_metric()"
        )
    if bool((t < 0).any()):
        raise ValueError("singular values must be non-negative")
    return t


def entropy_of_singular_values(s: Tensor | np.ndarray) -> Tensor:
    """Shannon entropy (nats) of ``p = s / sum(s)``: ``-sum p ln p`` (0 ln 0 = 0).

    This is the FedER thesis's "ER" (Eq. 2.9, printed without the minus sign).  Accepts singular
    values or a matrix.  All-zero or empty spectrum -> 0.
    """
    s = _spectrum(s, "entropy_of_singular_values input")
    total = s.sum()
    ok = total > 0
    p = s / torch.where(ok, total, torch.ones_like(total))
    return torch.where(ok, -torch.special.xlogy(p, p).sum(), torch.zeros_like(total))


def effective_rank(s_or_matrix: Tensor | np.ndarray) -> Tensor:
    """Effective rank of Roy & Vetterli 2007: ``exp(entropy(s / sum s))``; in [1, len(s)].

    Accepts singular values or a matrix.  All-zero or empty spectrum -> 0 (not exp(0) = 1).
    """
    s = _spectrum(s_or_matrix, "effective_rank input")
    h = entropy_of_singular_values(s)
    return torch.where(s.sum() > 0, torch.exp(h), torch.zeros_like(h))


def stable_rank(a: Tensor | np.ndarray) -> Tensor:
    """Stable rank ``||A||_F^2 / ||A||_2^2 = sum s^2 / max(s)^2``; accepts a matrix or singular
    values; 0 if zero."""
    s = _spectrum(a, "stable_rank input")
    if s.numel() == 0:
        return s.new_zeros(())
    top = s.max()
    ok = top > 0
    return torch.where(ok,
                       s.square().sum() / torch.where(ok, top, torch.ones_like(top)).square(), 0.0)


def condition_number(s_or_a: Tensor | np.ndarray, *, rtol: float | None = None) -> Tensor:
    """``max(s) / min(s > tol)``: the ratio of the largest to the smallest *nonzero* singular value.

    Values ``<= rtol * max(s)`` count as zero (default ``rtol = len(s) * float64 eps``, numpy's rank
    tolerance), so a rank-deficient matrix gives the condition number of its range.  All-zero or
    empty input -> 0 (no usable spectrum).
    """
    s = _spectrum(s_or_a, "condition_number input")
    if s.numel() == 0:
        return s.new_zeros(())
    top = s.max()
    if not bool(top > 0):
        return s.new_zeros(())
    rtol = s.numel() * torch.finfo(torch.float64).eps if rtol is None else rtol
    nz = s[s > rtol * top]
    return top / nz.min()


# --------------------------------------------------------------------------------------------------
# RMSGD-style layer metrics
# --------------------------------------------------------------------------------------------------
def unfold_conv(weight: Tensor, mode: str = "input") -> Tensor:
    """Unfold a conv weight (O, I, kh, kw) as in RMSGD: ``"input"`` -> (I, O*kh*kw), ``"output"`` ->
    (O, I*kh*kw)."""
    if weight.ndim != 4:
        raise ValueError(f"conv weight must be 4-D (O, I, kh, kw), got shape {tuple(weight.shape)}")
    if mode == "input":
        return weight.permute(1, 0, 2, 3).reshape(weight.shape[1], -1)
    if mode == "output":
        return weight.reshape(weight.shape[0], -1)
    raise ValueError(f"mode must be 'input' or 'output', got {mode!r}")


_METRICS: dict[str, Callable[[Tensor], Tensor]] = {
    "erank": effective_rank,
    "entropy": entropy_of_singular_values,
    "stable_rank": stable_rank,
    "condition_number": condition_number,
    "rank": lambda s: torch.tensor(float((s > 0).sum()), dtype=torch.float64),
}


def layer_metric(weight: Tensor, metric: str = "erank", denoise: str | None = "evbmf") -> float:
    """A spectral learning metric of one layer's weight (RMSGD / FedER).

    Conv weights (4-D) are unfolded by input and by output channel (:func:`unfold_conv`), each
    transposed so rows <= cols, and the two metrics are averaged; Linear weights (2-D) are used
    directly. ``denoise="evbmf"`` measures the EVBMF-kept, shrunk singular values (an empty spectrum
    gives 0), ``None`` the raw ones.  ``metric`` in ``erank``, ``entropy``, ``stable_rank``,
    ``condition_number``, ``rank``.  Other shapes (biases, norms) raise ``ValueError``: FedER gives
    them the previous conv layer's value, which is the aggregator's job.
    """
    if metric not in _METRICS:
        raise ValueError(f"unknown metric {metric!r}; valid: {sorted(_METRICS)}")
    if denoise not in ("evbmf", None):
        raise ValueError(f"denoise must be 'evbmf' or None, got {denoise!r}")
    w = weight.detach().to(torch.float64)
    _check_finite(w, "layer weight")
    if w.ndim == 4:
        mats = [unfold_conv(w, "input"), unfold_conv(w, "output")]
    elif w.ndim == 2:
        mats = [w]
    else:
        raise ValueError("layer_metric needs a conv (4-D) or linear (2-D) weight, got shape "
                         f"{tuple(w.shape)}")
    vals = []
    for m in mats:
        if m.shape[0] > m.shape[1]:
            m = m.T
        s = evbmf(m).singular_values if denoise == "evbmf" else _svdvals(m)
        vals.append(float(_METRICS[metric](s)))
    return sum(vals) / len(vals)
