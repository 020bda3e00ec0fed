"""The vectorized executor's CPU path: one ordinary convolution (BatchNorm, Linear) per client under
``vmap``.

``vmap`` turns a convolution over stacked weights into a grouped convolution. oneDNN's grouped
convolutions are fast in channels_last for most layer shapes but pathologically slow for a few (tiny
input-channel counts, e.g. the first layer, where the backward can take 100x longer). On the CPU the
executor therefore routes every ``Conv2d`` of its private model copy (:func:`per_client_convs`)
through a custom vmap rule that runs the convolution per client in channels_last (the sequential
executor's kernels), and runs each conv block (conv → max-pool → ReLU,
:func:`fedlib.models.conv_pool_relu`) whole per client, so a client's full-resolution conv map is
pooled while it is still in the cache and never stacked; in padded mode these per-client ops skip
the padding rows. ``BatchNorm2d`` and the ``Linear`` layers of 2-d inputs
(:mod:`fedlib.executors.fast.cpu_layers`) run per client the same way: vmap's batch rule for batch
norm folds the clients into the channels of one batch-norm call, and its batched matrix product is
not ``addmm``; both round differently from the sequential executor's kernels (up to ~1e-5 in a
narrow ResNet's activations), and BatchNorm ResNets on small batches amplify such differences
~1e4-fold within a few steps. Per client (the sequential executor's kernels, memory formats and
operand alignment) a model's gradients and running statistics are the sequential executor's bit for
bit. The rest (elementwise ops, pooling, the loss, the optimizer) stays batched.
:func:`fedlib.executors.fast.memory.keep_freed_memory` tunes glibc to reuse freed memory.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fedlib.executors.fast.cpu_layers import _PerClientBatchNorm2d, _PerClientLinear
from fedlib.executors.fast.cpu_rows import Rows, _batched, _check_rows, _client
from fedlib.executors.fast.layout import empty_stack, stack_rows

__all__ = ["per_client_convs", "Rows"]


def _conv_grads(ctx: Any, grad_out: Tensor, x: Tensor, w: Tensor) -> tuple[Tensor | None, ...]:
    """(dx, dw, db) of one client's ``F.conv2d(x, w, b, *ctx.conv)``; None where no gradient is
    needed. Under bf16 autocast the forward ran in bf16; the backward runs in ``x``'s dtype."""
    stride, padding, dilation = ctx.conv
    wants = ctx.needs_input_grad
    need = [wants[0], wants[1], wants[2] and ctx.has_bias]
    dx, dw, db = torch.ops.aten.convolution_backward(grad_out.to(x.dtype), x, w,
                                                     [w.shape[0]] if ctx.has_bias else None,
                                                     list(stride), list(padding), list(dilation),
                                                     False, [0, 0], 1, need)
    return (dx if need[0] else None, dw if need[1] else None, db if need[2] else None)


def _stack_grads(grads: list[tuple[Tensor | None, ...]], width: int) -> tuple[Tensor | None, ...]:
    """Per-client (dx, dw, db) → stacked (dx padded to ``width`` rows, dw, db)."""
    dx, dw, db = zip(*grads)
    return (stack_rows(list(dx), width) if dx[0] is not None else None,
            stack_rows(list(dw)) if dw[0] is not None else None,
            torch.stack(db) if db[0] is not None else None)


def _save_conv(ctx: Any, x: Tensor, w: Tensor, b: Tensor | None, conv: tuple, rows: Rows,
               *extra: Tensor) -> None:
    ctx.save_for_backward(x, w, *extra)
    ctx.conv, ctx.has_bias, ctx.rows = conv, b is not None, rows


class _StackedConv(torch.autograd.Function):
    """Per-client ``conv2d(x_i, w_i, b_i)`` of physical stacked tensors: x (N, B, Cin, H, W),
    w (N, Cout, Cin, kh, kw), b (N, Cout) or None; ``rows``: real rows per client (None: all).

    With a pooling size ``k``, the conv block ``relu(max_pool2d(conv2d(x_i, w_i, b_i), k))``: each
    client's conv map is pooled and rectified while still in the cache and then freed; only the
    block outputs are stacked (max-pool writes each client's slice in place), and the backward
    rebuilds each client's conv-map gradient right before that client's conv backward. Outputs: the
    stacked outputs, then (with ``k``) each client's argmax indices (saved for the backward)."""

    @staticmethod
    def forward(x: Tensor, w: Tensor, b: Tensor | None, conv: tuple,  # type: ignore[override]
                rows: Rows, k: int | None) -> tuple[Tensor, ...]:
        if k is None:
            ys = [F.conv2d(_client(x, i, rows), w[i], None if b is None else b[i], *conv)
                  for i in range(len(x))]
            return (stack_rows(ys, x.shape[1]),)
        idx: list[Tensor] = []
        out = None
        for i in range(len(x)):
            y = F.conv2d(_client(x, i, rows), w[i], None if b is None else b[i], *conv)
            if out is None:
                p, ix = torch.ops.aten.max_pool2d_with_indices(y, [k, k], [k, k])
                out = empty_stack(p, len(x), x.shape[1])
                out[i, :len(y)].copy_(p)
            else:
                ix = y.new_empty(0, dtype=torch.long)
                torch.ops.aten.max_pool2d_with_indices.out(y, [k, k], [k, k], [0, 0], [1, 1], False,
                                                           out=out[i, :len(y)], indices=ix)
            out[i, :len(y)].relu_()
            if len(y) < x.shape[1]:
                out[i, len(y):].zero_()
            idx.append(ix)
        return (out, *idx)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
        x, w, b, conv, rows, k = inputs
        ctx.k = k
        if k is None:
            _save_conv(ctx, x, w, b, conv, rows)
            return
        _save_conv(ctx, x, w, b, conv, rows, output[0], *output[1:])
        ctx.mark_non_differentiable(*output[1:])
        p0 = output[0][0]  # the conv map's memory format is the pooled map's
        cl = p0.is_contiguous(memory_format=torch.channels_last) and not p0.is_contiguous()
        ctx.fmt = torch.channels_last if cl else torch.contiguous_format

    @staticmethod
    def backward(ctx: Any, grad: Tensor, *_: Any):  # type: ignore[override]
        x, w, *saved = ctx.saved_tensors
        k, rows, (stride, padding, dilation) = ctx.k, ctx.rows, ctx.conv
        if k is None:
            grads = [_conv_grads(ctx, _client(grad, i, rows), _client(x, i, rows), w[i])
                     for i in range(len(x))]
            return (*_stack_grads(grads, x.shape[1]), None, None, None)
        out, *idx = saved
        # the conv map's size (all max-pool's backward reads of it)
        hw = [(n + 2 * p - d * (kk - 1) - 1) // s + 1
              for n, kk, s, p, d in zip(x.shape[-2:], w.shape[-2:], stride, padding, dilation)]
        grads = []
        for i in range(len(x)):
            xi = _client(x, i, rows)
            gp = torch.ops.aten.threshold_backward(_client(grad, i, rows), _client(out, i, rows), 0)
            like = torch.empty((len(xi), w.shape[1], *hw), dtype=gp.dtype, device=gp.device,
                               memory_format=ctx.fmt)
            gy = torch.ops.aten.max_pool2d_with_indices_backward(gp, like, [k, k], [k, k], [0, 0],
                                                                 [1, 1], False, idx[i])
            grads.append(_conv_grads(ctx, gy, xi, w[i]))
        return (*_stack_grads(grads, x.shape[1]), None, None, None)


class _ClientConv(torch.autograd.Function):
    """``F.conv2d`` for one client, or with ``k`` the conv block
    ``relu(max_pool2d(conv2d(x, w, b, ...), k))``, with a vmap rule that calls :class:`_StackedConv`
    on the whole stack."""

    @staticmethod
    def forward(x: Tensor, w: Tensor, b: Tensor | None, conv: tuple,  # type: ignore[override]
                rows: Rows, k: int | None) -> Tensor:
        y = F.conv2d(x, w, b, *conv)
        return y if k is None else F.relu(F.max_pool2d(y, k))

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Tensor) -> None:
        x, w, b, conv, rows, k = inputs
        _save_conv(ctx, x, w, b, conv, rows, *([] if b is None else [b]))
        ctx.k = k

    @staticmethod
    def backward(ctx: Any, grad: Tensor):  # type: ignore[override]
        x, w, *b = ctx.saved_tensors
        gy = grad
        if ctx.k is not None:  # off the hot path (that is the vmap rule): recompute the block
            with torch.enable_grad():
                y = F.conv2d(x.detach(), w.detach(), b[0].detach() if b else None,
                             *ctx.conv).requires_grad_(True)
                gy, = torch.autograd.grad(F.relu(F.max_pool2d(y, ctx.k)), y, grad)
        return (*_conv_grads(ctx, gy, x, w), None, None, None)

    @staticmethod
    def vmap(info: Any, in_dims: tuple, x: Tensor, w: Tensor, b: Tensor | None, conv: tuple,
             rows: Rows, k: int | None):
        n = info.batch_size
        b = None if b is None else _batched(b, in_dims[2], n)
        return _StackedConv.apply(_batched(x, in_dims[0], n), _batched(w, in_dims[1], n), b, conv,
                                  _check_rows(rows, n), k)[0], 0


class _PerClientConv2d(nn.Conv2d):
    """A Conv2d whose convolution goes through :class:`_ClientConv` (same parameters, same names).
    ``rows`` is a one-element list shared with the executor: the current group's real batch sizes,
    or None."""

    rows: list

    def _conv_forward(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        if not self._plain():
            return super()._conv_forward(input, weight, bias)
        return _ClientConv.apply(input, weight, bias, self._conv_args(), self.rows[0], None)

    def forward_pool_relu(self, input: Tensor, k: int) -> Tensor:
        """``F.relu(F.max_pool2d(self(input), k))`` in one step
        (:func:`fedlib.models.conv_pool_relu`)."""
        if not self._plain():
            return F.relu(F.max_pool2d(self(input), k))
        return _ClientConv.apply(input, self.weight, self.bias, self._conv_args(), self.rows[0], k)

    def _plain(self) -> bool:
        explicit = not isinstance(self.padding, str)  # not "same" / "valid"
        return self.padding_mode == "zeros" and self.groups == 1 and explicit

    def _conv_args(self) -> tuple:
        return tuple(self.stride), tuple(self.padding), tuple(self.dilation)


def per_client_convs(model: nn.Module, rows: list) -> nn.Module:
    """A deep copy of ``model`` whose plain ``Conv2d``, ``BatchNorm2d`` and ``Linear`` layers batch
    over clients per client (:class:`_ClientConv`,
    :class:`~fedlib.executors.fast.cpu_layers._ClientBatchNorm`,
    :class:`~fedlib.executors.fast.cpu_layers._ClientLinear`), reading the current real batch sizes
    from ``rows[0]``."""
    model = copy.deepcopy(model)
    for m in model.modules():
        if type(m) is nn.Conv2d:
            m.__class__ = _PerClientConv2d
            m.rows = rows
        elif type(m) is nn.BatchNorm2d:
            m.__class__ = _PerClientBatchNorm2d
            m.rows = rows
        elif type(m) is nn.Linear:
            m.__class__ = _PerClientLinear
            m.rows = rows
    return model
