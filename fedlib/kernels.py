"""Similarity and learning-metric kernels: the CKA family, effective rank, EVBMF.

Representational similarity (FedCKA, FedIntR analyses, FedSHIBU's CRSM)
    * :func:`linear_cka`, :func:`rbf_cka` -- Kornblith et al. 2019, "Similarity of neural network
      representations revisited" (ICML).  ``CKA = <HKH, HLH>_F / (||HKH||_F ||HLH||_F)``.
    * :func:`debiased_cka`, :func:`hsic1`, :class:`MinibatchCKA` -- unbiased HSIC (Song et al. 2012,
      JMLR 13) via U-centering (Szekely & Rizzo 2014); minibatch CKA of Nguyen et al. 2021 (ICLR).
    * :func:`frobenius_sq`, :func:`vec_cosine` -- the alternative metrics of FedCKA Table 3.
    * :func:`cka_matrix` -- all-pairs CKA (layers x layers, clients x clients) with one batched matmul.

Learning metrics (FedER thesis, RMSGD of Hosseini et al.)
    * :func:`entropy_of_singular_values` (the thesis's "ER", Eq. 2.9 with the sign fixed),
      :func:`effective_rank` (Roy & Vetterli 2007), :func:`stable_rank`, :func:`condition_number`.
    * :func:`evbmf` -- empirical variational Bayes matrix factorization, global analytic solution of
      Nakajima et al. 2013 (JMLR 14), noise variance by 1-D minimization of the EVB free energy.
    * :func:`unfold_conv`, :func:`layer_metric` -- RMSGD-style per-layer metrics.

Conventions (documented choices):
    * Inputs with more than two dims are flattened to ``(n, -1)``; rows are samples.
    * CKA kernels accumulate in float64 by default (``dtype=None`` keeps the input dtype, e.g. for a fast
      training loss); they are differentiable either way.  TF32 is disabled inside (:func:`no_tf32`).
    * A representation with (numerically) zero variance makes CKA 0/0; we define CKA = 0 there, never NaN.
      "Zero variance" means ``||X - mean(X)||_F <= eps * ||X||_F`` (``eps`` defaults to 100 machine
      epsilons of the compute dtype; an all-zero input counts as degenerate).
    * The debiased forms (:func:`debiased_cka`, :func:`hsic1`, :class:`MinibatchCKA`) need n >= 4 samples
      per batch (the estimator divides by n(n-3)); smaller n raises ``ValueError``.
    * Spectral metrics of an all-zero / empty spectrum are 0 (entropy, effective rank, stable rank,
      condition number), never NaN.
    * Non-finite input (NaN or +-inf, e.g. the activations of a diverged model) raises ``ValueError`` naming
      the input, in every public kernel: no kernel turns it into a plausible number. Inside ``torch.compile``
      or CUDA-graph capture the check (a device sync) is skipped and the caller owns it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "no_tf32",
    "center_gram",
    "linear_cka",
    "choose_cka_form",
    "rbf_cka",
    "debiased_cka",
    "hsic1",
    "MinibatchCKA",
    "cka_matrix",
    "frobenius_sq",
    "vec_cosine",
    "SIMILARITIES",
    "DISTANCE_METRICS",
    "get_similarity",
    "entropy_of_singular_values",
    "effective_rank",
    "stable_rank",
    "condition_number",
    "EVBMFResult",
    "evbmf",
    "evbmf_tau_bar",
    "unfold_conv",
    "layer_metric",
]

# ----------------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------------
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
    """``ValueError`` if ``x`` holds NaN or +-inf (skipped while compiling or capturing a CUDA graph)."""
    if torch.compiler.is_compiling() or (x.is_cuda and torch.cuda.is_current_stream_capturing()):
        return
    finite = torch.isfinite(x) if x.is_floating_point() or x.is_complex() else None
    if finite is not None and not bool(finite.all()):
        bad = int((~finite).sum())
        raise ValueError(
            f"{name} has {bad} non-finite value(s) (NaN or inf) out of {x.numel()}; a diverged model or a "
            "failed computation upstream produces these: check the input (torch.isfinite) before measuring it"
        )


def _as_2d(x: Tensor, dtype: torch.dtype | None, name: str = "x") -> Tensor:
    """Flatten to (n, -1) and cast (``dtype=None``: keep floating dtypes, promote others to float64)."""
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
            f"x and y must have the same number of samples (first dim): got {x.shape[0]} and {y.shape[0]}"
        )


def _tol(dtype: torch.dtype, eps: float | None) -> float:
    return 100.0 * torch.finfo(dtype).eps if eps is None else float(eps)


def _center_features(x: Tensor, eps: float | None) -> tuple[Tensor, Tensor]:
    """Column-center ``x``; also return a 0-d bool tensor, True when ``x`` has (numerically) zero variance."""
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
            f"debiased CKA / unbiased HSIC needs at least 4 samples (it divides by n(n-3)); got n={n}"
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
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # all points equal: K = 1 (degenerate)
    return torch.exp(-d / (2.0 * threshold**2 * scale))


# ----------------------------------------------------------------------------------------------------
# CKA family
# ----------------------------------------------------------------------------------------------------
def choose_cka_form(n: int, d1: int, d2: int) -> str:
    """The form ``linear_cka(form="auto")`` uses: ``"feature"`` if ``n(d1 d2 + d1^2 + d2^2) <= n^2 (d1 + d2)``
    multiply-adds (roughly width < 2n/3), else ``"gram"``."""
    return "feature" if d1 * d2 + d1 * d1 + d2 * d2 <= n * (d1 + d2) else "gram"


def linear_cka(
    x: Tensor,
    y: Tensor,
    *,
    form: str = "auto",
    dtype: torch.dtype | None = torch.float64,
    eps: float | None = None,
) -> Tensor:
    """Linear CKA (Kornblith et al. 2019, Eq. for ``K = X X^T``) between ``x`` (n, d1) and ``y`` (n, d2).

    ``form="gram"``: ``<K_c, L_c>_F / (||K_c||_F ||L_c||_F)`` with n x n Grams of the column-centered
    features (centering features first equals ``HKH`` and is more accurate).  ``form="feature"``:
    ``||Y_c^T X_c||_F^2 / (||X_c^T X_c||_F ||Y_c^T Y_c||_F)`` with d x d products.  ``"auto"`` picks the
    form with fewer multiply-adds: feature ``n(d1 d2 + d1^2 + d2^2)`` vs gram ``n^2 (d1 + d2)``
    (i.e. feature when width < ~2n/3).  ``dtype=None`` computes in the input dtype.
    Returns a 0-d tensor in [0, 1]; 0 if either input has zero variance.
    """
    x = _as_2d(x, dtype, "x")
    y = _as_2d(y, x.dtype, "y")
    _check_pair(x, y)
    n, d1 = x.shape
    d2 = y.shape[1]
    if form == "auto":
        form = choose_cka_form(n, d1, d2)
    if form not in ("gram", "feature"):
        raise ValueError(f"form must be 'auto', 'gram' or 'feature', got {form!r}")
    with no_tf32():
        xc, dx = _center_features(x, eps)
        yc, dy = _center_features(y, eps)
        if form == "feature":
            num = (yc.T @ xc).square().sum()
            ss_x = (xc.T @ xc).square().sum()
            ss_y = (yc.T @ yc).square().sum()
        else:
            k, l_ = _linear_gram(xc), _linear_gram(yc)
            num = (k * l_).sum()
            ss_x = (k * k).sum()
            ss_y = (l_ * l_).sum()
        return _safe_ratio(num, ss_x, ss_y, dx | dy)


def rbf_cka(
    x: Tensor,
    y: Tensor,
    *,
    threshold: float = 1.0,
    debiased: bool = False,
    dtype: torch.dtype | None = torch.float64,
    eps: float | None = None,
) -> Tensor:
    """RBF-kernel CKA (Kornblith et al. 2019): ``K = exp(-D / (2 t^2 median(D)))``, ``t = threshold``.

    ``D`` are squared Euclidean distances; the median runs over all n^2 entries (diagonal zeros
    included) with the two middle values averaged, as ``numpy.median``.  ``debiased=True`` uses
    U-centering (needs n >= 4).  Differentiable (also through the median).  0 for zero-variance input.
    """
    if threshold <= 0:
        raise ValueError(f"threshold must be positive, got {threshold}")
    x = _as_2d(x, dtype, "x")
    y = _as_2d(y, x.dtype, "y")
    _check_pair(x, y)
    if debiased:
        _check_n_unbiased(x.shape[0])
    with no_tf32():
        xc, dx = _center_features(x, eps)
        yc, dy = _center_features(y, eps)
        k = center_gram(_rbf_gram(xc, threshold), unbiased=debiased)
        l_ = center_gram(_rbf_gram(yc, threshold), unbiased=debiased)
        return _safe_ratio((k * l_).sum(), (k * k).sum(), (l_ * l_).sum(), dx | dy)


def debiased_cka(
    x: Tensor,
    y: Tensor,
    *,
    kernel: str = "linear",
    threshold: float = 1.0,
    dtype: torch.dtype | None = torch.float64,
    eps: float | None = None,
) -> Tensor:
    """Debiased CKA: CKA with the unbiased HSIC estimator (Song et al. 2012) via U-centering.

    ``kernel`` is ``"linear"`` or ``"rbf"`` (with ``threshold``).  Unlike biased CKA it is ~0 on
    independent data and can be slightly negative.  Raises ``ValueError`` for n < 4; 0 for zero variance.
    """
    if kernel == "rbf":
        return rbf_cka(x, y, threshold=threshold, debiased=True, dtype=dtype, eps=eps)
    if kernel != "linear":
        raise ValueError(f"kernel must be 'linear' or 'rbf', got {kernel!r}")
    x = _as_2d(x, dtype, "x")
    y = _as_2d(y, x.dtype, "y")
    _check_pair(x, y)
    _check_n_unbiased(x.shape[0])
    with no_tf32():
        xc, dx = _center_features(x, eps)  # translation-invariant; centering first helps accuracy
        yc, dy = _center_features(y, eps)
        k = center_gram(_linear_gram(xc), unbiased=True)
        l_ = center_gram(_linear_gram(yc), unbiased=True)
        return _safe_ratio((k * l_).sum(), (k * k).sum(), (l_ * l_).sum(), dx | dy)


def hsic1(k: Tensor, l: Tensor) -> Tensor:  # noqa: E741
    """Unbiased HSIC estimator HSIC_1 of Song et al. 2012 (JMLR 13, Eq. 5) for n x n Grams, n >= 4.

    ``[tr(K~L~) + 1'K~1 1'L~1 / ((n-1)(n-2)) - 2/(n-2) 1'K~L~1] / (n(n-3))`` with ``K~`` = ``K`` with a
    zeroed diagonal.  Computed in the Grams' dtype.
    """
    if k.shape != l.shape or k.ndim != 2 or k.shape[0] != k.shape[1]:
        raise ValueError(f"K and L must be square and of equal shape, got {tuple(k.shape)}, {tuple(l.shape)}")
    n = k.shape[0]
    _check_n_unbiased(n)
    _check_finite(k, "K")
    _check_finite(l, "L")
    eye = torch.eye(n, dtype=torch.bool, device=k.device)
    kt = k.masked_fill(eye, 0.0)
    lt = l.masked_fill(eye, 0.0)
    with no_tf32():
        trace = (kt * lt.T).sum()
        cross = kt.sum() * lt.sum() / ((n - 1) * (n - 2))
        mixed = kt.sum(dim=0) @ lt.sum(dim=1) * (2.0 / (n - 2))
    return (trace + cross - mixed) / (n * (n - 3))


def _rep_gram(
    x: Tensor, kind: str, threshold: float, dtype: torch.dtype | None, eps: float | None, name: str = "x"
) -> tuple[Tensor, Tensor]:
    """Centered (or U-centered) Gram of one representation and its degeneracy flag."""
    x = _as_2d(x, dtype, name)
    xc, deg = _center_features(x, eps)
    if kind == "linear":
        g = _linear_gram(xc)
    elif kind == "debiased":
        g = center_gram(_linear_gram(xc), unbiased=True)
    elif kind == "rbf":
        g = center_gram(_rbf_gram(xc, threshold))
    elif kind == "rbf_debiased":
        g = center_gram(_rbf_gram(xc, threshold), unbiased=True)
    else:
        raise ValueError(f"kind must be one of 'linear', 'debiased', 'rbf', 'rbf_debiased'; got {kind!r}")
    return g, deg


_KINDS = ("linear", "debiased", "rbf", "rbf_debiased")


def _normalized_gram_stack(
    reps: Sequence[Tensor], kind: str, threshold: float, dtype: torch.dtype | None, eps: float | None,
    side: str = "reps", start: int = 0,
) -> Tensor:
    """(R, n*n) stack of centered Grams scaled to unit Frobenius norm (zero rows for degenerate reps)."""
    out: Tensor | None = None
    for i, r in enumerate(reps):
        g, deg = _rep_gram(r, kind, threshold, dtype, eps, f"{side}[{start + i}]")
        ss = (g * g).sum()
        ok = (~deg) & (ss > 0)
        scale = torch.where(ok, torch.rsqrt(torch.where(ok, ss, torch.ones_like(ss))), torch.zeros_like(ss))
        if out is None:  # preallocate: never hold a list of Grams plus their stacked copy
            out = g.new_empty(len(reps), g.numel())
        out[i] = (g * scale).reshape(-1)
    assert out is not None
    return out


def cka_matrix(
    reps_a: Sequence[Tensor],
    reps_b: Sequence[Tensor] | None = None,
    *,
    kind: str = "linear",
    threshold: float = 1.0,
    chunk: int | None = None,
    dtype: torch.dtype | None = torch.float64,
    eps: float | None = None,
    max_bytes: int = 512 * 2**20,
) -> Tensor:
    """All-pairs CKA matrix ``S[i, j] = CKA(reps_a[i], reps_b[j])`` (``reps_b=None``: ``reps_a`` vs itself).

    Each representation (n, ...) is centered and its n x n centered Gram (``kind="linear"``; U-centered
    for ``"debiased"``; RBF for ``"rbf"``/``"rbf_debiased"`` with ``threshold``) is built once and scaled
    to unit norm; all HSIC ratios then come from one ``(R_a, n^2) @ (n^2, R_b)`` matmul.  ``chunk`` caps
    how many Grams are held at once per side (default: as many as fit in ``max_bytes``; with more than
    one chunk the other side's Grams are rebuilt per chunk).  Differentiable.  Equals the
    pairwise loop of :func:`linear_cka` / :func:`debiased_cka` / :func:`rbf_cka` up to rounding.
    """
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {_KINDS}; got {kind!r}")
    reps_a = list(reps_a)
    sym = reps_b is None
    reps_b = reps_a if reps_b is None else list(reps_b)
    if not reps_a or not reps_b:
        raise ValueError("cka_matrix needs at least one representation on each side")
    n = reps_a[0].shape[0]
    for r in (*reps_a, *reps_b):
        if r.shape[0] != n:
            raise ValueError(f"all representations must share the sample dim: got {r.shape[0]} and {n}")
    if kind in ("debiased", "rbf_debiased"):
        _check_n_unbiased(n)
    cdtype = dtype if dtype is not None else (reps_a[0].dtype if reps_a[0].is_floating_point() else torch.float64)
    if chunk is None:
        chunk = max(1, max_bytes // (n * n * torch.finfo(cdtype).bits // 8))
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    ra, rb = len(reps_a), len(reps_b)
    device = reps_a[0].device
    out = torch.zeros(ra, rb, dtype=cdtype, device=device)
    with no_tf32():
        for i0 in range(0, ra, chunk):
            ga = _normalized_gram_stack(reps_a[i0 : i0 + chunk], kind, threshold, cdtype, eps, "reps_a", i0)
            for j0 in range(i0 if sym else 0, rb, chunk):
                if sym and j0 == i0:
                    gb = ga
                else:
                    gb = _normalized_gram_stack(
                        reps_b[j0 : j0 + chunk], kind, threshold, cdtype, eps, "reps_a" if sym else "reps_b", j0
                    )
                block = ga @ gb.T
                out[i0 : i0 + ga.shape[0], j0 : j0 + gb.shape[0]] = block
                if sym and j0 != i0:
                    out[j0 : j0 + gb.shape[0], i0 : i0 + ga.shape[0]] = block.T
    return out


class MinibatchCKA:
    """Minibatch CKA (Nguyen et al. 2021):
    ``sum_b HSIC_1(K_b, L_b) / sqrt(sum_b HSIC_1(K_b,K_b) sum_b HSIC_1(L_b,L_b))``.

    ``update(x_b, y_b)`` with tensors accumulates one pair; with sequences of tensors (e.g. all layers
    of two models; ``y_b=None`` means ``x_b`` against itself) it accumulates the whole matrix with one
    batched matmul per batch.  ``compute()`` returns a 0-d tensor or an (R_x, R_y) matrix.  With a single
    batch it equals :func:`debiased_cka`.  Each batch needs n >= 4.  Accumulators are detached (a metric,
    not a loss); use :func:`hsic1` for a differentiable estimate.
    """

    def __init__(
        self, *, kernel: str = "linear", threshold: float = 1.0, dtype: torch.dtype = torch.float64,
        eps: float | None = None,
    ) -> None:
        if kernel not in ("linear", "rbf"):
            raise ValueError(f"kernel must be 'linear' or 'rbf', got {kernel!r}")
        self.kind = "debiased" if kernel == "linear" else "rbf_debiased"
        self.threshold = threshold
        self.dtype = dtype
        self.eps = eps
        self.reset()

    def reset(self) -> None:
        self._xy: Tensor | None = None
        self._xx: Tensor | None = None
        self._yy: Tensor | None = None
        self._pair = False
        self.batches = 0

    def _stack(self, reps: Sequence[Tensor], side: str) -> tuple[Tensor, Tensor]:
        """(R, n^2) U-centered Grams (zeroed for degenerate reps) and their self inner products."""
        rows = []
        for i, r in enumerate(reps):
            g, deg = _rep_gram(r.detach(), self.kind, self.threshold, self.dtype, self.eps, f"{side}[{i}]")
            rows.append(torch.where(deg, torch.zeros_like(g), g).reshape(-1))
        g = torch.stack(rows)
        return g, (g * g).sum(dim=1)

    @torch.no_grad()
    def update(self, x: Tensor | Sequence[Tensor], y: Tensor | Sequence[Tensor] | None = None) -> None:
        pair = isinstance(x, Tensor)
        if self.batches and pair != self._pair:
            raise ValueError("MinibatchCKA: mix of tensor and sequence updates")
        xs = [x] if pair else list(x)
        ys = xs if y is None else ([y] if isinstance(y, Tensor) else list(y))
        n = xs[0].shape[0]
        for r in (*xs, *ys):
            if r.shape[0] != n:
                raise ValueError(f"all representations in a batch must share n: got {r.shape[0]} and {n}")
        _check_n_unbiased(n)
        scale = 1.0 / (n * (n - 3))  # <U(K), U(L)> = n(n-3) HSIC_1(K, L)
        with no_tf32():
            gx, sx = self._stack(xs, "x")
            gy, sy = (gx, sx) if y is None else self._stack(ys, "y")
            xy = (gx @ gy.T) * scale
        if self._xy is None:
            self._xy, self._xx, self._yy = xy, sx * scale, sy * scale
        else:
            if xy.shape != self._xy.shape:
                raise ValueError(f"MinibatchCKA: got {tuple(xy.shape)} pairs, expected {tuple(self._xy.shape)}")
            self._xy = self._xy + xy
            self._xx = self._xx + sx * scale
            self._yy = self._yy + sy * scale
        self._pair = pair
        self.batches += 1

    def compute(self) -> Tensor:
        if self._xy is None:
            raise RuntimeError("MinibatchCKA.compute() called before update()")
        prod = self._xx[:, None] * self._yy[None, :]
        ok = prod > 0
        out = torch.where(ok, self._xy / torch.sqrt(torch.where(ok, prod, torch.ones_like(prod))), 0.0)
        return out[0, 0] if self._pair else out


# ----------------------------------------------------------------------------------------------------
# FedCKA Table 3 alternatives and the registry
# ----------------------------------------------------------------------------------------------------
def _same_shape(x: Tensor, y: Tensor, dtype: torch.dtype | None) -> tuple[Tensor, Tensor]:
    x = _as_2d(x, dtype, "x")
    y = _as_2d(y, x.dtype, "y")
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same shape, got {tuple(x.shape)} and {tuple(y.shape)}")
    return x, y


def frobenius_sq(x: Tensor, y: Tensor, *, dtype: torch.dtype | None = torch.float64) -> Tensor:
    """Squared Frobenius distance ``||x - y||_F^2`` (FedCKA Table 3).  A *distance*: lower = more similar."""
    x, y = _same_shape(x, y, dtype)
    return (x - y).square().sum()


def vec_cosine(
    x: Tensor, y: Tensor, *, normalize: bool = False, dtype: torch.dtype | None = torch.float64
) -> Tensor:
    """Vectorized cosine of FedCKA Table 3: ``<vec x, vec y> = ||vec x|| ||vec y|| cos(theta)`` (unnormalized,
    as the paper prints it).  ``normalize=True`` returns ``cos(theta)`` in [-1, 1] (0 if either is zero)."""
    x, y = _same_shape(x, y, dtype)
    dot = (x * y).sum()
    if not normalize:
        return dot
    prod = x.square().sum() * y.square().sum()
    ok = prod > 0
    return torch.where(ok, dot / torch.sqrt(torch.where(ok, prod, torch.ones_like(prod))), torch.zeros_like(dot))


def _normalized_cosine(x: Tensor, y: Tensor, **kw: object) -> Tensor:
    return vec_cosine(x, y, normalize=True, **kw)  # type: ignore[arg-type]


SIMILARITIES: dict[str, Callable[..., Tensor]] = {
    "cka": linear_cka,
    "kernel_cka": rbf_cka,
    "frobenius": frobenius_sq,
    "cosine": vec_cosine,
    "debiased_cka": debiased_cka,
    "normalized_cosine": _normalized_cosine,
}
"""Name -> ``f(x, y, **kw) -> 0-d tensor``.  ``"cka"``/``"kernel_cka"``/``"frobenius"``/``"cosine"`` are
FedCKA Table 3's four metrics in the paper's forms.  The paper does not state kernel CKA's threshold;
``rbf_cka`` defaults to t = 1.0 (Kornblith et al.'s demo uses 0.5): pass ``threshold=`` to choose."""

DISTANCE_METRICS = frozenset({"frobenius"})
"""Registry names whose value *decreases* with similarity (callers may negate them in a contrastive loss)."""


def get_similarity(name: str) -> Callable[..., Tensor]:
    """Look up a similarity in :data:`SIMILARITIES`; ``ValueError`` listing the valid names otherwise."""
    try:
        return SIMILARITIES[name]
    except KeyError:
        raise ValueError(f"unknown similarity {name!r}; valid names: {sorted(SIMILARITIES)}") from None


# ----------------------------------------------------------------------------------------------------
# spectral learning metrics
# ----------------------------------------------------------------------------------------------------
def _svdvals(m: Tensor) -> Tensor:
    """Singular values, computed on the tall orientation (LAPACK is several times faster there)."""
    return torch.linalg.svdvals(m.T if m.shape[0] < m.shape[1] else m)


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

    This is the FedER thesis's "ER" (Eq. 2.9, printed without the minus sign).  Accepts singular values
    or a matrix.  All-zero or empty spectrum -> 0.
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
    """Stable rank ``||A||_F^2 / ||A||_2^2 = sum s^2 / max(s)^2``; accepts a matrix or singular values; 0 if zero."""
    s = _spectrum(a, "stable_rank input")
    if s.numel() == 0:
        return s.new_zeros(())
    top = s.max()
    ok = top > 0
    return torch.where(ok, s.square().sum() / torch.where(ok, top, torch.ones_like(top)).square(), 0.0)


def condition_number(s_or_a: Tensor | np.ndarray, *, rtol: float | None = None) -> Tensor:
    """``max(s) / min(s > tol)``: the ratio of the largest to the smallest *nonzero* singular value.

    Values ``<= rtol * max(s)`` count as zero (default ``rtol = len(s) * float64 eps``, numpy's rank
    tolerance), so a rank-deficient matrix gives the condition number of its range.  All-zero or empty
    input -> 0 (no usable spectrum).
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


# ----------------------------------------------------------------------------------------------------
# EVBMF (Nakajima et al. 2013)
# ----------------------------------------------------------------------------------------------------
@dataclass
class EVBMFResult:
    """Result of :func:`evbmf` (orientation of the input matrix, float64).

    ``singular_values``: the kept, shrunk singular values (length ``rank``, descending); ``sigma2``: the
    (estimated or given) noise variance; ``threshold``: the EVB truncation threshold on singular values;
    ``u``/``v``: left/right singular vectors of the kept components when ``compute_uv=True``
    (``Y_hat = u diag(s) v^T``).
    """

    singular_values: Tensor
    rank: int
    sigma2: float
    threshold: float
    u: Tensor | None = None
    v: Tensor | None = None


def evbmf_tau_bar(alpha: float) -> float:
    """tau-bar(alpha) of Nakajima et al. 2013: the zero of ``Phi(t) + Phi(t / alpha)``,
    ``Phi(z) = ln(z + 1) / z - 1/2``, in ``(sqrt(alpha), ...)``; ~ 2.5129 sqrt(alpha)."""
    from scipy.optimize import brentq

    if not 0 < alpha <= 1:
        raise ValueError(f"alpha = L/M must be in (0, 1], got {alpha}")

    def phi(z: float) -> float:
        return math.log1p(z) / z - 0.5

    lo, hi = math.sqrt(alpha), 2.5129 * math.sqrt(alpha)
    while phi(hi) + phi(hi / alpha) > 0:  # decreasing function; widen until the sign changes
        hi *= 2.0
    return float(brentq(lambda t: phi(t) + phi(t / alpha), lo, hi, xtol=1e-14, rtol=1e-14))


def _evb_objective(u: np.ndarray, g2: np.ndarray, m: int, alpha: float, h: int, xubar: float) -> np.ndarray:
    """EVB free energy (up to constants and the factor 1/L) at ``sigma2 = exp(u)`` (vectorized over ``u``).

    ``sum_h psi0(x_h) + sum_{h<=H, x_h > xubar} psi1(x_h)`` with ``x_h = gamma_h^2 / (M sigma2)``,
    ``psi0(x) = x - ln x``, ``psi1(x) = ln(tau + 1) + alpha ln(tau/alpha + 1) - tau`` and ``tau(x)`` the
    larger root of ``tau + alpha/tau = x - 1 - alpha`` (Nakajima et al. 2013; 2015 JMLR 16).  The
    ``-ln gamma_h^2`` constants are dropped (so zero singular values are fine), and for kept components
    ``x - tau`` is rewritten as ``1 + alpha + alpha/tau`` to avoid cancellation at large ``x``.
    """
    u = np.atleast_1d(np.asarray(u, dtype=np.float64))[:, None]
    x = g2[None, :] / (m * np.exp(u))
    signal = (x > xubar) & (np.arange(g2.size) < h)[None, :]
    b = np.where(signal, x - (1.0 + alpha), 2.0 * math.sqrt(alpha) + 1.0)
    tau = 0.5 * (b + np.sqrt(np.clip(b * b - 4.0 * alpha, 0.0, None)))
    kept = 1.0 + alpha + alpha / tau + np.log1p(tau) + alpha * np.log1p(tau / alpha)
    return (np.where(signal, kept, x) + u).sum(axis=1)


def evbmf(
    y: Tensor | np.ndarray,
    sigma2: float | None = None,
    H: int | None = None,  # noqa: N803 - the paper's symbol
    *,
    compute_uv: bool = False,
    grid: int = 256,
) -> EVBMFResult:
    """Empirical VB matrix factorization, global analytic solution (Nakajima et al. 2013, JMLR 14).

    The matrix is transposed so that ``L <= M``; ``alpha = L/M``; ``tau_bar`` from :func:`evbmf_tau_bar`.
    If ``sigma2`` is None the noise variance minimizes the EVB free energy over
    ``[gamma_min^2 / (M x_bar), ||Y||_F^2 / (LM)]`` (``x_bar = (1 + tau_bar)(1 + alpha/tau_bar)``): a
    log-spaced grid of ``grid`` points, then ``scipy.optimize.minimize_scalar(method="bounded")`` around
    the best one.  Components with ``gamma_h > sqrt(M sigma2 x_bar)`` (at most ``H``) are kept and shrunk:
    ``gamma_hat = gamma/2 [1 - (L+M) s2/gamma^2 + sqrt((1 - (L+M) s2/gamma^2)^2 - 4 L M s2^2/gamma^4)]``.
    Pure noise gives rank 0 (an empty spectrum).  Scaling ``Y`` by ``c`` scales ``sigma2`` by ``c^2``.
    """
    from scipy.optimize import minimize_scalar

    t = torch.as_tensor(y).detach().to(torch.float64)
    if t.ndim != 2 or t.numel() == 0:
        raise ValueError(f"evbmf expects a non-empty 2-D matrix, got shape {tuple(t.shape)}")
    _check_finite(t, "evbmf input")
    transposed = t.shape[0] > t.shape[1]
    if transposed:
        t = t.T
    big_l, big_m = t.shape
    h = big_l if H is None else int(H)
    if not 1 <= h <= big_l:
        raise ValueError(f"H must be in [1, min(Y.shape)={big_l}], got {H}")
    if compute_uv:  # SVD of the tall t^T = V S U^T (faster than the wide orientation)
        vv, s, uh = torch.linalg.svd(t.T, full_matrices=False)
        uu = uh.T
    else:
        s = _svdvals(t)
    g = s.cpu().numpy()
    g2 = g * g
    alpha = big_l / big_m
    tau_bar = evbmf_tau_bar(alpha)
    xubar = (1.0 + tau_bar) * (1.0 + alpha / tau_bar)

    empty = EVBMFResult(s.new_zeros(0), 0, 0.0, 0.0, None, None)
    if sigma2 is None:
        ub = float(g2.sum()) / (big_l * big_m)
        if not ub > 0:
            return empty  # all-zero matrix: nothing to keep, zero noise
        pos = g2[g2 > 0]
        lb = min(float(pos.min()) / (big_m * xubar), ub)
        lo = math.log(lb / ub) - 1e-9
        if lo >= 0.0:
            est = 1.0
        else:
            us = np.linspace(lo, 0.0, grid)
            vals = _evb_objective(us, g2 / ub, big_m, alpha, h, xubar)
            i = int(np.argmin(vals))
            a, b = us[max(i - 1, 0)], us[min(i + 1, grid - 1)]
            res = minimize_scalar(
                lambda u: float(_evb_objective(u, g2 / ub, big_m, alpha, h, xubar)[0]),
                bounds=(a, b), method="bounded", options={"xatol": 1e-10},
            )
            u_best = float(res.x) if res.fun <= vals[i] else float(us[i])
            est = math.exp(u_best)
        sigma2 = est * ub
    sigma2 = float(sigma2)
    if sigma2 < 0:
        raise ValueError(f"sigma2 must be non-negative, got {sigma2}")
    thr = math.sqrt(big_m * sigma2 * xubar)
    keep = int(min(h, int((g > thr).sum())))
    if keep == 0:
        return EVBMFResult(s.new_zeros(0), 0, sigma2, thr, None, None)
    gk = s[:keep]
    a = 1.0 - (big_l + big_m) * sigma2 / gk.square()
    disc = (a.square() - 4.0 * big_l * big_m * sigma2**2 / gk**4).clamp_min(0.0)
    shrunk = 0.5 * gk * (a + torch.sqrt(disc))
    u_out = v_out = None
    if compute_uv:
        u_out, v_out = uu[:, :keep], vv[:, :keep]
        if transposed:
            u_out, v_out = v_out, u_out
    return EVBMFResult(shrunk, keep, sigma2, thr, u_out, v_out)


# ----------------------------------------------------------------------------------------------------
# RMSGD-style layer metrics
# ----------------------------------------------------------------------------------------------------
def unfold_conv(weight: Tensor, mode: str = "input") -> Tensor:
    """Unfold a conv weight (O, I, kh, kw) as in RMSGD: ``"input"`` -> (I, O*kh*kw), ``"output"`` -> (O, I*kh*kw)."""
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

    Conv weights (4-D) are unfolded by input and by output channel (:func:`unfold_conv`), each transposed
    so rows <= cols, and the two metrics are averaged; Linear weights (2-D) are used directly.
    ``denoise="evbmf"`` measures the EVBMF-kept, shrunk singular values (an empty spectrum gives 0),
    ``None`` the raw ones.  ``metric`` in ``erank``, ``entropy``, ``stable_rank``, ``condition_number``,
    ``rank``.  Other shapes (biases, norms) raise ``ValueError``: FedER gives them the previous conv
    layer's value, which is the aggregator's job.
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
        raise ValueError(f"layer_metric needs a conv (4-D) or linear (2-D) weight, got shape {tuple(w.shape)}")
    vals = []
    for m in mats:
        if m.shape[0] > m.shape[1]:
            m = m.T
        s = evbmf(m).singular_values if denoise == "evbmf" else _svdvals(m)
        vals.append(float(_METRICS[metric](s)))
    return sum(vals) / len(vals)
