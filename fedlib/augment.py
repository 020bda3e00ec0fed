"""Batched on-device augmentation: random draws apart from the images, then one tensor op per batch.

The engine draws a whole client-epoch's flips, crops and cutout centres at once on the CPU
(:func:`augment_params`, via :func:`fedlib.schedule.epoch_plan`), so every executor and device sees
the same draws; the executors apply them to each batch with :func:`apply_augment`.
:func:`augment_batch` does both for one batch.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = [
    "AUGMENTATIONS", "DEFAULT_AUGMENT", "VIEWS", "CUTOUT", "augment_params", "apply_augment",
    "augment_batch"
]

# The augmentation the papers train each dataset with. FedIntR §IV-A: "random horizontal flip ...
# except for the SVHN dataset". FedCKA trains without augmentation: its preset overrides this with
# augment="none". "crop_flip" (MOON-style RandomCrop(32, padding=4) + flip) is available but no
# dataset defaults to it.
DEFAULT_AUGMENT = {"fmnist": "flip", "svhn": "none", "cifar10": "flip", "cifar100": "flip",
                   "tinyimagenet": "flip", "synthetic": "none"}
# "crop_flip_cutout" (FedER thesis §4.2, "CIFAR100 with cutout"): crop_flip, then one square hole of
# side CUTOUT (DeVries & Taylor 2017's CIFAR-100 setting) centred anywhere in the image, clipped at
# the borders, set to 0.
AUGMENTATIONS = ("none", "flip", "crop_flip", "crop_flip_cutout")
# Distinct views of a sample under the augmentations that have finitely many (the reference taps are
# cached for these, one table per view; crops draw a new view every epoch).
VIEWS = {"none": 1, "flip": 2}
CUTOUT = 8


def augment_params(kind: str, n: int, generator: torch.Generator | None = None, *,
                   pad: int = 4) -> dict[str, Tensor]:
    """Random draws for augmenting ``n`` samples, on the generator's device (CPU by default).

    Drawing them apart from the images lets the engine draw a whole client-epoch at once on the CPU,
    so every executor and every device sees the same flips and crops. Order: crop row offsets,
    column offsets, flip mask.
    """
    if kind not in AUGMENTATIONS:
        raise ValueError(f"Unknown augmentation {kind!r}; valid: {AUGMENTATIONS}.")
    dev = generator.device if generator is not None else torch.device("cpu")
    out: dict[str, Tensor] = {}
    if kind == "none":
        return out
    if kind in ("crop_flip", "crop_flip_cutout") and pad > 0:
        out["dy"] = torch.randint(0, 2 * pad + 1, (n,), generator=generator, device=dev)
        out["dx"] = torch.randint(0, 2 * pad + 1, (n,), generator=generator, device=dev)
    out["flip"] = torch.rand(n, generator=generator, device=dev) < 0.5
    if kind == "crop_flip_cutout":  # hole centres as fractions of the image side (any image size)
        out["cy"] = torch.rand(n, generator=generator, device=dev)
        out["cx"] = torch.rand(n, generator=generator, device=dev)
    return out


def apply_augment(x: Tensor, kind: str, params: dict[str, Tensor], *, pad: int = 4,
                  fill: float | Tensor = 0.0) -> Tensor:
    """Apply draws from :func:`augment_params` to a batch ``(B, C, H, W)``; returns a new tensor."""
    if kind == "none" or x.shape[0] == 0:
        return x
    B, C, H, W = x.shape
    dev = x.device
    if "dy" in params:
        padded = torch.nn.functional.pad(x, (pad, pad, pad, pad), value=0.0)
        if not (isinstance(fill, (int, float)) and fill == 0):
            f = torch.as_tensor(fill, dtype=x.dtype, device=dev).reshape(-1)
            f = f.view(1, -1, 1, 1).expand(1, C, 1, 1)
            inside = torch.zeros(1, 1, H + 2 * pad, W + 2 * pad, dtype=torch.bool, device=dev)
            inside[..., pad:pad + H, pad:pad + W] = True
            padded = torch.where(inside, padded, f)
        dy, dx = params["dy"].to(dev), params["dx"].to(dev)
        rows = (dy[:, None] + torch.arange(H, device=dev))[:, None, :, None]  # (B, 1, H, 1)
        cols = (dx[:, None] + torch.arange(W, device=dev))[:, None, None, :]  # (B, 1, 1, W)
        b = torch.arange(B, device=dev)[:, None, None, None]
        c = torch.arange(C, device=dev)[None, :, None, None]
        x = padded[b, c, rows, cols]
    flip = params["flip"].to(dev)
    x = torch.where(flip[:, None, None, None], x.flip(-1), x)
    if "cy" in params:
        cy = (params["cy"].to(dev) * H).long()[:, None]
        cx = (params["cx"].to(dev) * W).long()[:, None]
        r, c = torch.arange(H, device=dev)[None, :], torch.arange(W, device=dev)[None, :]
        rows = (r >= cy - CUTOUT // 2) & (r < cy + CUTOUT - CUTOUT // 2)
        cols = (c >= cx - CUTOUT // 2) & (c < cx + CUTOUT - CUTOUT // 2)
        hole = rows[:, None, :, None] & cols[:, None, None, :]
        x = x.masked_fill(hole, 0.0)
    return x


def augment_batch(x: Tensor, kind: str, generator: torch.Generator | None = None, *, pad: int = 4,
                  fill: float | Tensor = 0.0) -> Tensor:
    """Augment a batch ``(B, C, H, W)`` on its own device; returns a new tensor (``x`` is not
    modified).

    * ``"none"``: ``x`` itself.
    * ``"flip"``: each sample is flipped left-right with probability 1/2 (one Bernoulli draw per
      sample).
    * ``"crop_flip"``: MOON-style ``RandomCrop(H×W, padding=pad)`` then the flip: the batch is
      padded by ``pad`` pixels of ``fill`` (default 0, i.e. zero in the normalized space; pass the
      per-channel normalized value of black, ``(0 − mean) / std`` = ``FedDataset.pad_fill``, to
      match torchvision's ``fill=0`` on raw pixels) and each sample gets its own uniformly drawn
      offset in ``[0, 2·pad]²``, gathered with one advanced-indexing op.

    Random draws come from ``generator`` (which must live on ``x.device``) via
    :func:`augment_params`.
    """
    if kind not in AUGMENTATIONS:
        raise ValueError(f"Unknown augmentation {kind!r}; valid: {AUGMENTATIONS}.")
    if kind == "none" or x.shape[0] == 0:
        return x
    params = augment_params(kind, x.shape[0], generator, pad=pad)
    return apply_augment(x, kind, params, pad=pad, fill=fill)
