"""The alternative representation metrics of FedCKA Table 3 (Frobenius distance, cosine) and their
registry."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from fedlib.kernels._base import _as_2d  # noqa: F401
from fedlib.kernels.cka import debiased_cka, linear_cka, rbf_cka  # noqa: F401


# --------------------------------------------------------------------------------------------------
# FedCKA Table 3 alternatives and the registry
# --------------------------------------------------------------------------------------------------
def _same_shape(x: Tensor, y: Tensor, dtype: torch.dtype | None) -> tuple[Tensor, Tensor]:
    x = _as_2d(x, dtype, "x")
    y = _as_2d(y, x.dtype, "y")
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same shape, got {tuple(x.shape)} and "
                         f"{tuple(y.shape)}")
    return x, y


def frobenius_sq(x: Tensor, y: Tensor, *, dtype: torch.dtype | None = torch.float64) -> Tensor:
    """Squared Frobenius distance ``||x - y||_F^2`` (FedCKA Table 3).  A *distance*: lower = more
    similar."""
    x, y = _same_shape(x, y, dtype)
    return (x - y).square().sum()


def vec_cosine(
    x: Tensor, y: Tensor, *, normalize: bool = False, dtype: torch.dtype | None = torch.float64
) -> Tensor:
    """Vectorized cosine of FedCKA Table 3: ``<vec x, vec y> = ||vec x|| ||vec y|| cos(theta)``
    (unnormalized, as the paper prints it).  ``normalize=True`` returns ``cos(theta)`` in [-1, 1] (0
    if either is zero)."""
    x, y = _same_shape(x, y, dtype)
    dot = (x * y).sum()
    if not normalize:
        return dot
    prod = x.square().sum() * y.square().sum()
    ok = prod > 0
    return torch.where(ok, dot / torch.sqrt(torch.where(ok, prod, torch.ones_like(prod))),
                       torch.zeros_like(dot))


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
"""Name -> ``f(x, y, **kw) -> 0-d tensor``. ``"cka"``/``"kernel_cka"``/``"frobenius"``/``"cosine"``
are FedCKA Table 3's four metrics in the paper's forms. The paper does not state kernel CKA's
threshold; ``rbf_cka`` defaults to t = 1.0 (Kornblith et al.'s demo uses 0.5): pass ``threshold=``
to choose."""

DISTANCE_METRICS = frozenset({"frobenius"})
"""Registry names whose value *decreases* with similarity (callers may negate them in a contrastive
loss)."""


def get_similarity(name: str) -> Callable[..., Tensor]:
    """Look up a similarity in :data:`SIMILARITIES`; ``ValueError`` listing the valid names
    otherwise."""
    try:
        return SIMILARITIES[name]
    except KeyError:
        raise ValueError(
            f"unknown similarity {name!r}; valid names: {sorted(SIMILARITIES)}") from None
