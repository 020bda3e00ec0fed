"""Stacking per-client tensors along a leading client dimension without losing their memory format.

On the CPU the model runs in channels_last; stacks, gathers and writes here keep each client's slice
in the strides of the tensors they come from, so oneDNN never sees mixed weight/input formats
(~3-10x slower convs).
"""

from __future__ import annotations

from typing import Mapping

import torch
from torch import Tensor

__all__ = ["stack_as", "stack_rows", "empty_stack", "gather", "write", "in_layout"]


def stack_as(ts: list[Tensor], like: Tensor) -> Tensor:
    """A fresh stack of ``ts`` whose slices have ``like``'s strides (the model's memory format: e.g.
    channels_last conv weights on the CPU), whatever the layout ``ts`` arrive in. Aggregated global
    parameters come back contiguous; stacking them as they come would hand oneDNN mismatched
    weight/input formats (conv backward ~10x slower on the CPU)."""
    if like.dim() and dense(like):
        out = torch.empty_strided((len(ts), *like.shape), (like.numel(), *like.stride()),
                                  dtype=like.dtype, device=like.device)
    else:
        out = like.new_empty((len(ts), *like.shape))
    for i, t in enumerate(ts):
        out[i].copy_(t)
    return out


def stack_rows(ts: list[Tensor], width: int | None = None) -> Tensor:
    """``torch.stack`` of per-client tensors whose slices keep the clients' strides (channels_last
    stays channels_last). ``width``: the rows of each slice; a client's tensor may have fewer
    (padding rows are zero). A single full tensor is returned as a view."""
    if ts[0].dim() == 0:
        return torch.stack(ts)
    t0 = max(ts, key=len)
    width = len(t0) if width is None else width
    if len(ts) == 1 and len(t0) == width:
        return t0.unsqueeze(0)
    out = empty_stack(t0, len(ts), width)
    for i, t in enumerate(ts):
        out[i, :len(t)].copy_(t)
        if len(t) < width:
            out[i, len(t):].zero_()
    return out


def empty_stack(t: Tensor, n: int, width: int) -> Tensor:
    """An uninitialized (n, width, *t.shape[1:]) tensor whose slices have ``t``'s strides where
    ``t`` is dense with its rows outermost (as in both 4-d memory formats); contiguous otherwise."""
    inner = t[0].numel() if len(t) else 0
    if inner and dense(t) and (len(t) == 1 or t.stride(0) == inner):
        return torch.empty_strided((n, width, *t.shape[1:]),
                                   (width * inner, inner, *t.stride()[1:]), dtype=t.dtype,
                                   device=t.device)
    return t.new_empty((n, width, *t.shape[1:]))


def dense(t: Tensor) -> bool:
    """Whether ``t``'s elements fill its storage span exactly once (some permutation of a contiguous
    layout)."""
    expected = 1
    for stride, size in sorted((st, sz) for sz, st in zip(t.shape, t.stride()) if sz != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def gather(v: Tensor, sel: Tensor) -> Tensor:
    """``v.index_select(0, sel)`` whose slices keep ``v``'s strides (index_select alone returns a
    contiguous tensor, which would hand channels_last conv weights to oneDNN as NCHW: mixed formats,
    ~3x slower convs on the CPU)."""
    if v.dim() < 2 or not dense(v):
        return v.index_select(0, sel)
    out = torch.empty_strided((len(sel), *v.shape[1:]), v.stride(), dtype=v.dtype, device=v.device)
    return torch.index_select(v, 0, sel, out=out)


def write(dst: Tensor, sel: slice | Tensor, value: Tensor) -> None:
    """``dst[sel] = value`` for a slice or an index tensor along the client dimension."""
    if isinstance(sel, slice):
        dst[sel].copy_(value)
    else:
        dst.index_copy_(0, sel, value)



def in_layout(params: Mapping[str, Tensor], like: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """``params`` with each conv weight (4-d) in the strides of ``like``'s tensor of that name (the
    model's own: channels_last on the CPU), the values unchanged; the same tensors where they match.
    Averaged or mixed weights come back contiguous, and a convolution's output takes its weight's
    format, so a model evaluated with them runs every later conv and max-pool in NCHW (max-pooling
    ~10x slower on the CPU; benchmarks/layout.py)."""
    out = dict(params)
    for k, v in params.items():
        ref = like.get(k)
        if v.dim() == 4 and ref is not None and ref.shape == v.shape and v.stride() != ref.stride(
        ) and dense(ref):
            out[k] = torch.empty_strided(ref.shape, ref.stride(), dtype=v.dtype,
                                         device=v.device).copy_(v)
    return out
