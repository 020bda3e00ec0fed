"""Shared helpers of the kernels: input checks, centering, Grams, TF32 control."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import Tensor


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def no_tf32() -> Iterator[None]:
    """Disable TF32 for CUDA matmuls and cuDNN inside the block, restoring the previous settings.

    Uses the ``fp32_precision`` API when this torch has it (mixing it with the legacy ``allow_tf32``
    flags makes torch raise), else ``torch.backends.cuda.matmul.allow_tf32`` / ``cudnn.allow_tf32``.
    """
    matmul = torch.backends.cuda.matmul
    conv = getattr(torch.backends.cudnn, "conv", None)
    if hasattr(matmul, "fp32_precision") and conv is not None and hasattr(conv, "fp32_precision"):
        saved = (matmul.fp32_precision, conv.fp32_precision)
        matmul.fp32_precision = "ieee"
        conv.fp32_precision = "ieee"
        try:
            yield
        finally:
            matmul.fp32_precision, conv.fp32_precision = saved
    else:  # pragma: no cover - older torch
        saved_l = (matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        try:
            yield
        finally:
            matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved_l


def _check_finite(x: Tensor, name: str) -> None:
    """``ValueError`` if ``x`` holds NaN or +-inf (skipped while compiling or capturing a CUDA
    graph)."""
    if torch.compiler.is_compiling() or (x.is_cuda and torch.cuda.is_current_stream_capturing()):
        return
    finite = torch.isfinite(x) if x.is_floating_point() or x.is_complex() else None
    if finite is not None and not bool(finite.all()):
        bad = int((~finite).sum())
        raise ValueError(
            f"{name} has {bad} non-finite value(s) (NaN or inf) out of {x.numel()}; a diverged "
            "model or a failed computation upstream produces these: check the input "
            "(torch.isfinite) before measuring it"
        )


def _as_2d(x: Tensor, dtype: torch.dtype | None, name: str = "x") -> Tensor:
    """Flatten to (n, -1) and cast (``dtype=None``: keep floating dtypes, promote others to
    float64)."""
    if not isinstance(x, Tensor):
        x = torch.as_tensor(x)
    if x.ndim == 0:
        raise ValueError(f"{name} must have a sample dimension, got a 0-d tensor")
    _check_finite(x, name)
    x = x.reshape(x.shape[0], -1)
    if dtype is None:
        dtype = x.dtype if x.is_floating_point() else torch.float64
    return x.to(dtype)


def _check_pair(x: Tensor, y: Tensor) -> None:
    if x.shape[0] != y.shape[0]:
        raise ValueError(
            f"x and y must have the same number of samples (first dim): got {x.shape[0]} and "
            f"{y.shape[0]}"
        )


def _tol(dtype: torch.dtype, eps: float | None) -> float:
    return 100.0 * torch.finfo(dtype).eps if eps is None else float(eps)


def _center_features(x: Tensor, eps: float | None) -> tuple[Tensor, Tensor]:
    """Column-center ``x``; also return a 0-d bool tensor, True when ``x`` has (numerically) zero
    variance."""
    xc = x - x.mean(dim=0, keepdim=True)
    tol = _tol(x.dtype, eps)
    degenerate = (xc * xc).sum() <= (tol * tol) * (x * x).sum()
    return xc, degenerate


def _safe_ratio(num: Tensor, ss_x: Tensor, ss_y: Tensor, degenerate: Tensor) -> Tensor:
    """``num / sqrt(ss_x * ss_y)`` with 0 where degenerate; NaN-free values *and* gradients."""
    prod = ss_x * ss_y
    ok = (~degenerate) & (prod > 0)
    safe = torch.where(ok, prod, torch.ones_like(prod))
    return torch.where(ok, num / torch.sqrt(safe), torch.zeros_like(num))


def center_gram(k: Tensor, *, unbiased: bool = False) -> Tensor:
    """Double-center a Gram matrix without forming H: ``K_ij - r_i - r_j + m``.

    With ``unbiased=True`` apply U-centering (Szekely & Rizzo 2014): zero the diagonal, use
    ``1/(n-2)`` row means and ``1/((n-1)(n-2))`` grand mean, and zero the diagonal again, so that
    ``<U(K), U(L)>_F = n(n-3) * HSIC_1(K, L)`` (Song et al. 2012).  Requires n >= 4.
    """
    n = k.shape[0]
    if k.ndim != 2 or k.shape[1] != n:
        raise ValueError(f"Gram matrix must be square, got shape {tuple(k.shape)}")
    _check_finite(k, "Gram matrix")
    if not unbiased:
        r = k.mean(dim=1, keepdim=True)
        c = k.mean(dim=0, keepdim=True)
        return k - r - c + k.mean()
    _check_n_unbiased(n)
    eye = torch.eye(n, dtype=torch.bool, device=k.device)
    k0 = k.masked_fill(eye, 0.0)
    means = k0.sum(dim=0) / (n - 2)
    means = means - means.sum() / (2 * (n - 1))
    u = k0 - means[:, None] - means[None, :]
    return u.masked_fill(eye, 0.0)


def _check_n_unbiased(n: int) -> None:
    if n < 4:
        raise ValueError(
            "debiased CKA / unbiased HSIC needs at least 4 samples (it divides by n(n-3)); got "
            f"n={n}"
        )


def _linear_gram(xc: Tensor) -> Tensor:
    return xc @ xc.T


def _sq_dists(xc: Tensor) -> Tensor:
    """Squared Euclidean distances with an exact-zero diagonal (autograd-safe: no sqrt)."""
    g = xc @ xc.T
    sq = torch.diagonal(g)
    d = (sq[:, None] + sq[None, :] - 2.0 * g).clamp_min(0.0)
    eye = torch.eye(d.shape[0], dtype=torch.bool, device=d.device)
    return d.masked_fill(eye, 0.0)


def _numpy_median(v: Tensor) -> Tensor:
    """Median of all entries with the two middle values averaged (numpy's convention)."""
    flat = v.reshape(-1)
    m = flat.numel()
    hi = torch.kthvalue(flat, m // 2 + 1).values
    if m % 2 == 1:
        return hi
    lo = torch.kthvalue(flat, m // 2).values
    return 0.5 * (lo + hi)


def _rbf_gram(xc: Tensor, threshold: float) -> Tensor:
    """Kornblith's RBF Gram: ``exp(-D / (2 t^2 median(D)))``, median over all n^2 entries of ``D``.

    If the median is 0 (more than half of all pairs coincide) the mean of ``D`` is used instead.
    """
    d = _sq_dists(xc)
    med = _numpy_median(d)
    scale = torch.where(med > 0, med, d.mean())
    # all points equal: K = 1 (degenerate)
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    return torch.exp(-d / (2.0 * threshold**2 * scale))

def _svdvals(m: Tensor) -> Tensor:
    """Singular values, computed on the tall orientation (LAPACK is several times faster there)."""
    return torch.linalg.svdvals(m.T if m.shape[0] < m.shape[1] else m)
