"""The base of every model: :class:`FedModel`, its named representation taps and its head.

Every model is a :class:`FedModel`: ``model(x)`` gives logits; ``model(x, taps=names)`` gives
``(logits, [tap tensors in the requested order])`` from one forward pass. Taps are returned as
computed (conv maps ``(B, C, H, W)``, dense ``(B, F)``); callers flatten.

Tap order (``tap_names``): the main-path layers in forward order without the logits, then any side
projection-head taps (``"proj:<layer>"``, FedIntR), then the logits tap last. So ``tap_names[-1]``
is always the logits, and ``layer_taps`` lists the main path only (logits last): FedCKA's "first M
layers" are ``layer_taps[:M]`` (equal to ``tap_names[:M]`` whenever M does not reach past the main
path).

Side projection heads run only when one of their taps is requested. No in-place ops on inputs and no
tensor-value control flow, so models work under ``torch.func.functional_call`` and
``torch.func.vmap`` (BatchNorm ResNets: vmap in eval mode, or stack the buffers too; see tests).

Initialization is PyTorch's default (Kaiming-uniform for conv/linear, BN weight 1 / bias 0),
deterministic under ``torch.manual_seed``; modules are created in forward order.
"""
from __future__ import annotations

from typing import Sequence

import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["FedModel", "conv_pool_relu", "HEADS", "head_layers", "extractor_tap"]

class FedModel(nn.Module):
    """Base class: tap bookkeeping shared by all models.

    Subclasses set ``layer_taps`` (main path, logits last), ``side_taps`` (optional projection
    heads), ``moon_tap``, ``head`` and implement ``_run(x, want) -> dict`` returning every main-path
    tap plus the requested side taps.
    """

    layer_taps: tuple[str, ...] = ()
    side_taps: tuple[str, ...] = ()
    intr_taps: tuple[str, ...] = ()
    moon_tap: str = ""
    head: str = ""

    @property
    def tap_names(self) -> tuple[str, ...]:
        """Every tap: main-path layers (no logits), side projection taps, then the logits tap."""
        return self.layer_taps[:-1] + self.side_taps + self.layer_taps[-1:]

    def forward(self, x: Tensor, taps: Sequence[str] = ()) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Logits if ``taps`` is empty; else ``(logits, [taps in the requested order])`` from the
        same pass."""
        if isinstance(taps, str):
            taps = (taps,)
        valid = self.tap_names
        bad = [t for t in taps if t not in valid]
        if bad:
            raise ValueError(f"unknown tap(s) {bad} for {type(self).__name__}; valid taps: "
                             f"{list(valid)}")
        out = self._run(x, frozenset(taps))
        logits = out[self.layer_taps[-1]]
        return (logits, [out[t] for t in taps]) if len(taps) else logits

    def _run(self, x: Tensor, want: frozenset[str]) -> dict[str, Tensor]:
        raise NotImplementedError

    tail_taps: tuple[str, ...] = ()  # the main-path taps :meth:`tail` can start from

    def tail(self, tap: str, h: Tensor) -> Tensor:
        """The logits from main-path tap ``tap``'s output ``h`` (the rest of the forward pass):
        fine-tuning a head on features computed once (:mod:`fedlib.finetune`). Models that can set
        :attr:`tail_taps`."""
        raise ValueError(f"{type(self).__name__} cannot run from tap {tap!r}; it can from "
                         f"{list(self.tail_taps)}.")

    def head_parameter_names(self) -> list[str]:
        """Names (as in ``named_parameters``) of the final classifier (FedBABU's head); the rest is
        the body."""
        return [n for n, _ in self.named_parameters() if n.startswith(self.head + ".")]


def _proj_head(in_dim: int, hidden: int | None, out_dim: int) -> nn.Sequential:
    """MOON-style 2-layer MLP projection head: Linear(in→hidden) → ReLU → Linear(hidden→out)."""
    hidden = in_dim if hidden is None else hidden
    return nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, out_dim))


def conv_pool_relu(conv: nn.Conv2d, x: Tensor, k: int = 2) -> Tensor:
    """``relu(max_pool2d(conv(x), k))``, the conv block of the CNNs below (pooling first: relu and
    max commute, in value and gradient, and the elementwise work shrinks k²-fold). A conv module
    with a ``forward_pool_relu(x, k)`` method computes the block in one step: the vectorized
    executor's per-client convolutions on the CPU do, so a client's full-resolution conv map never
    leaves the cache (same values and gradients)."""
    fused = getattr(conv, "forward_pool_relu", None)
    return fused(x, k) if fused is not None else F.relu(F.max_pool2d(conv(x), k))


HEADS = ("last", "dense")


def head_layers(model: nn.Module, head: str = "last") -> tuple[str, ...]:
    """The main-path layers (``model.layer_taps``) forming the head: ``"last"``, the final linear
    layer (``model.head``); ``"dense"``, the trailing run of ``nn.Linear`` layers. The tap before
    them is the extractor's output (:func:`extractor_tap`)."""
    if head not in HEADS:
        raise ValueError(f"Unknown head {head!r}; valid: {HEADS}.")
    taps = model.layer_taps
    if head == "last":
        return (model.head,) if model.head else ()
    i = len(taps)
    while i > 0 and isinstance(getattr(model, taps[i - 1], None), nn.Linear):
        i -= 1
    return tuple(taps[i:])


def extractor_tap(model: nn.Module, head: str = "last") -> str:
    """The tap feeding the head: the representation FedSHIBU compares (with ``"dense"``, the last
    conv output)."""
    taps = model.layer_taps
    return taps[taps.index(head_layers(model, head)[0]) - 1]
