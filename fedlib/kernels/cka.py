"""The CKA family: linear CKA (and its training form against several references), RBF and
debiased CKA, HSIC, minibatch CKA and the all-pairs CKA matrix."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from fedlib.kernels._base import (  # noqa: F401
    _as_2d,
    _center_features,
    _check_finite,
    _check_n_unbiased,
    _check_pair,
    _linear_gram,
    _rbf_gram,
    _safe_ratio,
    _tol,
    center_gram,
    no_tf32,
)


# --------------------------------------------------------------------------------------------------
# CKA family
# --------------------------------------------------------------------------------------------------
def choose_cka_form(n: int, d1: int, d2: int) -> str:
    """The form ``linear_cka(form="auto")`` uses: ``"feature"`` if ``n(d1 d2 + d1^2 + d2^2) <= n^2
    (d1 + d2)`` multiply-adds (roughly width < 2n/3), else ``"gram"``."""
    return "feature" if d1 * d2 + d1 * d1 + d2 * d2 <= n * (d1 + d2) else "gram"


def linear_cka(
    x: Tensor,
    y: Tensor,
    *,
    form: str = "auto",
    dtype: torch.dtype | None = torch.float64,
    eps: float | None = None,
) -> Tensor:
    """Linear CKA (Kornblith et al. 2019, Eq. for ``K = X X^T``) between ``x`` (n, d1) and ``y`` (n,
    d2).

    ``form="gram"``: ``<K_c, L_c>_F / (||K_c||_F ||L_c||_F)`` with n x n Grams of the
    column-centered features (centering features first equals ``HKH`` and is more accurate).
    ``form="feature"``: ``||Y_c^T X_c||_F^2 / (||X_c^T X_c||_F ||Y_c^T Y_c||_F)`` with d x d
    products.  ``"auto"`` picks the form with fewer multiply-adds: feature ``n(d1 d2 + d1^2 +
    d2^2)`` vs gram ``n^2 (d1 + d2)`` (i.e. feature when width < ~2n/3).  ``dtype=None`` computes in
    the input dtype. Returns a 0-d tensor in [0, 1]; 0 if either input has zero variance.
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


def sample_rows(t: Tensor) -> Tensor:
    """``t`` as ``(n, features)``. A conv map ``(n, C, H, W)`` is flattened in channels-last order
    (a view for the channels-last maps the CPU path produces, a copy otherwise): CKA does not
    depend on the order of features, and two maps flattened alike compare entry by entry."""
    if t.dim() == 4:
        return t.permute(0, 2, 3, 1).reshape(t.shape[0], -1)
    return t.reshape(t.shape[0], -1)


def _centered_gram(k: Tensor) -> tuple[Tensor, Tensor]:
    """``HKH`` of a symmetric Gram (``K_ij − r_i − r_j + m``, ``r`` its row means) and whether it
    is degenerate (``‖HKH‖ <= 100 ε ‖K‖``: zero variance)."""
    r = k.mean(1, keepdim=True)
    kc = k - r - r.T + r.mean()
    tol = _tol(k.dtype, None)
    return kc, ~((kc * kc).sum() > tol * tol * (k * k).sum())  # NaN: degenerate


def linear_cka_to(x: Tensor, refs: Sequence[Tensor]) -> list[Tensor]:
    """:func:`linear_cka` of ``x`` against each of ``refs``, all ``(n, ...)``, as a training loss
    needs it (FedCKA Eq. 3): in the input dtype, TF32 and the finiteness check left to the caller
    (pure tensor code, so it runs under ``torch.func.vmap``), the local Gram ``K = x xᵀ`` formed
    once. The n×n Grams are centered instead of the n×d features, which keeps the cost at the Gram
    products (four per reference pair of the widest layer: three Grams and one for the gradient,
    which flows through one factor of the symmetric ``K``); a reference given twice (the previous
    model is the global model) is one Gram. The ratio is :func:`linear_cka`'s (``gram`` form);
    the same values up to float rounding, 0 for a zero-variance input."""
    x = sample_rows(x)
    half = x @ x.detach().T  # K = x xᵀ, the gradient through one factor: doubled below (symmetric)
    kc, deg_x = _centered_gram(half + (half - half.detach()))
    ss_x = (kc * kc).sum()
    out: list[Tensor] = []
    done: dict[int, Tensor] = {}
    for r in refs:
        if id(r) not in done:
            rr = sample_rows(r).to(x.dtype)
            rc, deg_r = _centered_gram(rr @ rr.T)
            done[id(r)] = _safe_ratio((kc * rc).sum(), ss_x, (rc * rc).sum(), deg_x | deg_r)
        out.append(done[id(r)])
    return out


def rbf_cka(
    x: Tensor,
    y: Tensor,
    *,
    threshold: float = 1.0,
    debiased: bool = False,
    dtype: torch.dtype | None = torch.float64,
    eps: float | None = None,
) -> Tensor:
    """RBF-kernel CKA (Kornblith et al. 2019): ``K = exp(-D / (2 t^2 median(D)))``, ``t =
    threshold``.

    ``D`` are squared Euclidean distances; the median runs over all n^2 entries (diagonal zeros
    included) with the two middle values averaged, as ``numpy.median``.  ``debiased=True`` uses
    U-centering (needs n >= 4).  Differentiable (also through the median).  0 for zero-variance
    input.
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
    independent data and can be slightly negative.  Raises ``ValueError`` for n < 4; 0 for zero
    variance.
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

    ``[tr(K~L~) + 1'K~1 1'L~1 / ((n-1)(n-2)) - 2/(n-2) 1'K~L~1] / (n(n-3))`` with ``K~`` = ``K``
    with a zeroed diagonal.  Computed in the Grams' dtype.
    """
    if k.shape != l.shape or k.ndim != 2 or k.shape[0] != k.shape[1]:
        raise ValueError(f"K and L must be square and of equal shape, got {tuple(k.shape)}, "
                         f"{tuple(l.shape)}")
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


def _rep_gram(x: Tensor, kind: str, threshold: float, dtype: torch.dtype | None, eps: float | None,
              name: str = "x") -> tuple[Tensor, Tensor]:
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
        raise ValueError("kind must be one of 'linear', 'debiased', 'rbf', 'rbf_debiased'; got "
                         f"{kind!r}")
    return g, deg


_KINDS = ("linear", "debiased", "rbf", "rbf_debiased")


def _normalized_gram_stack(
    reps: Sequence[Tensor],
    kind: str,
    threshold: float,
    dtype: torch.dtype | None,
    eps: float | None,
    side: str = "reps",
    start: int = 0,
) -> Tensor:
    """(R, n*n) stack of centered Grams scaled to unit Frobenius norm (zero rows for degenerate
    reps)."""
    out: Tensor | None = None
    for i, r in enumerate(reps):
        g, deg = _rep_gram(r, kind, threshold, dtype, eps, f"{side}[{start + i}]")
        ss = (g * g).sum()
        ok = (~deg) & (ss > 0)
        scale = torch.where(ok, torch.rsqrt(torch.where(ok, ss, torch.ones_like(ss))),
                            torch.zeros_like(ss))
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
    """All-pairs CKA matrix ``S[i, j] = CKA(reps_a[i], reps_b[j])`` (``reps_b=None``: ``reps_a`` vs
    itself).

    Each representation (n, ...) is centered and its n x n centered Gram (``kind="linear"``;
    U-centered for ``"debiased"``; RBF for ``"rbf"``/``"rbf_debiased"`` with ``threshold``) is built
    once and scaled to unit norm; all HSIC ratios then come from one ``(R_a, n^2) @ (n^2, R_b)``
    matmul.  ``chunk`` caps how many Grams are held at once per side (default: as many as fit in
    ``max_bytes``; with more than one chunk the other side's Grams are rebuilt per chunk).
    Differentiable.  Equals the pairwise loop of :func:`linear_cka` / :func:`debiased_cka` /
    :func:`rbf_cka` up to rounding.
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
            raise ValueError(f"all representations must share the sample dim: got {r.shape[0]} and "
                             f"{n}")
    if kind in ("debiased", "rbf_debiased"):
        _check_n_unbiased(n)
    cdtype = dtype if dtype is not None else (
        reps_a[0].dtype if reps_a[0].is_floating_point() else torch.float64)
    if chunk is None:
        chunk = max(1, max_bytes // (n * n * torch.finfo(cdtype).bits // 8))
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    ra, rb = len(reps_a), len(reps_b)
    device = reps_a[0].device
    out = torch.zeros(ra, rb, dtype=cdtype, device=device)
    with no_tf32():
        for i0 in range(0, ra, chunk):
            ga = _normalized_gram_stack(reps_a[i0:i0 + chunk], kind, threshold, cdtype, eps,
                                        "reps_a", i0)
            for j0 in range(i0 if sym else 0, rb, chunk):
                if sym and j0 == i0:
                    gb = ga
                else:
                    gb = _normalized_gram_stack(reps_b[j0:j0 + chunk], kind, threshold, cdtype, eps,
                                                "reps_a" if sym else "reps_b", j0)
                block = ga @ gb.T
                out[i0 : i0 + ga.shape[0], j0 : j0 + gb.shape[0]] = block
                if sym and j0 != i0:
                    out[j0 : j0 + gb.shape[0], i0 : i0 + ga.shape[0]] = block.T
    return out


class MinibatchCKA:
    """Minibatch CKA (Nguyen et al. 2021):
    ``sum_b HSIC_1(K_b, L_b) / sqrt(sum_b HSIC_1(K_b,K_b) sum_b HSIC_1(L_b,L_b))``.

    ``update(x_b, y_b)`` with tensors accumulates one pair; with sequences of tensors (e.g. all
    layers of two models; ``y_b=None`` means ``x_b`` against itself) it accumulates the whole matrix
    with one batched matmul per batch.  ``compute()`` returns a 0-d tensor or an (R_x, R_y) matrix.
    With a single batch it equals :func:`debiased_cka`.  Each batch needs n >= 4.  Accumulators are
    detached (a metric, not a loss); use :func:`hsic1` for a differentiable estimate.
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
            g, deg = _rep_gram(r.detach(), self.kind, self.threshold, self.dtype, self.eps,
                               f"{side}[{i}]")
            rows.append(torch.where(deg, torch.zeros_like(g), g).reshape(-1))
        g = torch.stack(rows)
        return g, (g * g).sum(dim=1)

    @torch.no_grad()
    def update(self, x: Tensor | Sequence[Tensor],
               y: Tensor | Sequence[Tensor] | None = None) -> None:
        pair = isinstance(x, Tensor)
        if self.batches and pair != self._pair:
            raise ValueError("MinibatchCKA: mix of tensor and sequence updates")
        xs = [x] if pair else list(x)
        ys = xs if y is None else ([y] if isinstance(y, Tensor) else list(y))
        n = xs[0].shape[0]
        for r in (*xs, *ys):
            if r.shape[0] != n:
                raise ValueError(f"all representations in a batch must share n: got {r.shape[0]} "
                                 f"and {n}")
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
                raise ValueError(f"MinibatchCKA: got {tuple(xy.shape)} pairs, expected "
                                 f"{tuple(self._xy.shape)}")
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
        out = torch.where(ok, self._xy / torch.sqrt(torch.where(ok, prod, torch.ones_like(prod))),
                          0.0)
        return out[0, 0] if self._pair else out
