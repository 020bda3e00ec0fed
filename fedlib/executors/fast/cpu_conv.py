"""The vectorized executor's CPU path: one ordinary convolution (BatchNorm, Linear) per client under ``vmap``.

``vmap`` turns a convolution over stacked weights into a grouped convolution. oneDNN's grouped convolutions are
fast in channels_last for most layer shapes but pathologically slow for a few (tiny input-channel counts, e.g.
the first layer, where the backward can take 100x longer). On the CPU the executor therefore routes every
``Conv2d`` of its private model copy (:func:`per_client_convs`) through a custom vmap rule that runs the
convolution per client in channels_last (the sequential executor's kernels), and runs each conv block (conv →
max-pool → ReLU, :func:`fedlib.models.conv_pool_relu`) whole per client, so a client's full-resolution conv map is
pooled while it is still in the cache and never stacked; in padded mode these per-client ops skip the padding
rows. ``BatchNorm2d`` (:class:`_ClientBatchNorm`) and the ``Linear`` layers of 2-d inputs (:class:`_ClientLinear`)
run per client the same way: vmap's batch rule for batch norm folds the clients into the channels of one batch-norm
call, and its batched matrix product is not ``addmm``; both round differently from the sequential executor's
kernels (up to ~1e-5 in a narrow ResNet's activations), and BatchNorm ResNets on small batches amplify such
differences ~1e4-fold within a few steps. Per client (the sequential executor's kernels, memory formats and operand
alignment) a model's gradients and running statistics are the sequential executor's bit for bit. The rest
(elementwise ops, pooling, the loss, the optimizer) stays batched.
:func:`fedlib.executors.fast.memory.keep_freed_memory` tunes glibc to reuse freed memory.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fedlib.executors.fast.layout import empty_stack, stack_rows

__all__ = ["per_client_convs", "Rows"]

# ------------------------------------------------------------------------------ per-client conv on the CPU
# ``rows`` (padded mode) holds each client's real batch size: padding rows are skipped (their outputs and input
# gradients are zero; the masked loss gives them no gradient anyway), so per-client work equals the sequential one.

Rows = tuple[int, ...] | None  # real rows per client (padded mode), or None: all rows are real


def _conv_grads(ctx: Any, grad_out: Tensor, x: Tensor, w: Tensor) -> tuple[Tensor | None, ...]:
    """(dx, dw, db) of one client's ``F.conv2d(x, w, b, *ctx.conv)``; None where no gradient is needed. Under bf16
    autocast the forward ran in bf16; the backward runs in ``x``'s dtype."""
    stride, padding, dilation = ctx.conv
    need = [ctx.needs_input_grad[0], ctx.needs_input_grad[1], ctx.needs_input_grad[2] and ctx.has_bias]
    dx, dw, db = torch.ops.aten.convolution_backward(
        grad_out.to(x.dtype), x, w, [w.shape[0]] if ctx.has_bias else None, list(stride), list(padding),
        list(dilation), False, [0, 0], 1, need)
    return (dx if need[0] else None, dw if need[1] else None, db if need[2] else None)


def _client(t: Tensor, i: int, rows: Rows) -> Tensor:
    """Client ``i``'s slice of a stacked tensor (N, B, ...), without its padding rows."""
    return t[i] if rows is None or rows[i] >= t.shape[1] else t[i, :rows[i]]


def _stack_grads(grads: list[tuple[Tensor | None, ...]], width: int) -> tuple[Tensor | None, ...]:
    """Per-client (dx, dw, db) → stacked (dx padded to ``width`` rows, dw, db)."""
    dx, dw, db = zip(*grads)
    return (stack_rows(list(dx), width) if dx[0] is not None else None,
            stack_rows(list(dw)) if dw[0] is not None else None,
            torch.stack(db) if db[0] is not None else None)


def _save_conv(ctx: Any, x: Tensor, w: Tensor, b: Tensor | None, conv: tuple, rows: Rows, *extra: Tensor) -> None:
    ctx.save_for_backward(x, w, *extra)
    ctx.conv, ctx.has_bias, ctx.rows = conv, b is not None, rows


class _StackedConv(torch.autograd.Function):
    """Per-client 2-d convolution of physical stacked tensors: x (N, B, Cin, H, W), w (N, Cout, Cin, kh, kw),
    b (N, Cout) or None; ``rows``: real rows per client (None: all)."""

    @staticmethod
    def forward(x: Tensor, w: Tensor, b: Tensor | None, conv: tuple, rows: Rows) -> Tensor:  # type: ignore[override]
        return stack_rows([F.conv2d(_client(x, i, rows), w[i], None if b is None else b[i], *conv)
                            for i in range(len(x))], x.shape[1])

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Tensor) -> None:
        _save_conv(ctx, *inputs)

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor):  # type: ignore[override]
        x, w = ctx.saved_tensors
        grads = [_conv_grads(ctx, _client(grad_out, i, ctx.rows), _client(x, i, ctx.rows), w[i])
                 for i in range(len(x))]
        return (*_stack_grads(grads, x.shape[1]), None, None)


class _StackedConvBlock(torch.autograd.Function):
    """Per-client ``relu(max_pool2d(conv2d(x_i, w_i, b_i), k))`` of physical stacked tensors (see
    :class:`_StackedConv`). Each client's conv map is pooled and rectified while still in the cache and then freed;
    only the block outputs are stacked (max-pool writes each client's slice in place), and the backward rebuilds
    each client's conv-map gradient right before that client's conv backward. Outputs: the stacked block outputs,
    then each client's argmax indices (saved for the backward)."""

    @staticmethod
    def forward(x: Tensor, w: Tensor, b: Tensor | None, conv: tuple, rows: Rows, k: int) -> tuple[Tensor, ...]:  # type: ignore[override]
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
        _save_conv(ctx, x, w, b, conv, rows, output[0], *output[1:])
        ctx.mark_non_differentiable(*output[1:])
        p0 = output[0][0]  # the conv map's memory format is the pooled map's
        cl = p0.is_contiguous(memory_format=torch.channels_last) and not p0.is_contiguous()
        ctx.k, ctx.fmt = k, torch.channels_last if cl else torch.contiguous_format

    @staticmethod
    def backward(ctx: Any, grad: Tensor, *_: Any):  # type: ignore[override]
        x, w, out, *idx = ctx.saved_tensors
        k, rows, (stride, padding, dilation) = ctx.k, ctx.rows, ctx.conv
        hw = [(n + 2 * p - d * (kk - 1) - 1) // s + 1  # the conv map's size (all max-pool's backward reads of it)
              for n, kk, s, p, d in zip(x.shape[-2:], w.shape[-2:], stride, padding, dilation)]
        grads = []
        for i in range(len(x)):
            xi = _client(x, i, rows)
            gp = torch.ops.aten.threshold_backward(_client(grad, i, rows), _client(out, i, rows), 0)
            like = torch.empty((len(xi), w.shape[1], *hw), dtype=gp.dtype, device=gp.device, memory_format=ctx.fmt)
            gy = torch.ops.aten.max_pool2d_with_indices_backward(gp, like, [k, k], [k, k], [0, 0], [1, 1], False,
                                                                 idx[i])
            grads.append(_conv_grads(ctx, gy, xi, w[i]))
        return (*_stack_grads(grads, x.shape[1]), None, None, None)


def _batched(t: Tensor, dim: int | None, n: int) -> Tensor:
    return t.expand(n, *t.shape) if dim is None else t.movedim(dim, 0)


def _check_rows(rows: Rows, n: int) -> Rows:
    if rows is not None and len(rows) != n:
        raise RuntimeError(f"per-client conv: {len(rows)} row counts for {n} clients")
    return rows


class _ClientConv(torch.autograd.Function):
    """``F.conv2d`` for one client, with a vmap rule that calls :class:`_StackedConv` on the whole stack."""

    @staticmethod
    def forward(x: Tensor, w: Tensor, b: Tensor | None, conv: tuple, rows: Rows) -> Tensor:  # type: ignore[override]
        return F.conv2d(x, w, b, *conv)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Tensor) -> None:
        _save_conv(ctx, *inputs)

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor):  # type: ignore[override]
        x, w = ctx.saved_tensors
        return (*_conv_grads(ctx, grad_out, x, w), None, None)

    @staticmethod
    def vmap(info: Any, in_dims: tuple, x: Tensor, w: Tensor, b: Tensor | None, conv: tuple, rows: Rows):
        n = info.batch_size
        b = None if b is None else _batched(b, in_dims[2], n)
        return _StackedConv.apply(_batched(x, in_dims[0], n), _batched(w, in_dims[1], n), b, conv,
                                  _check_rows(rows, n)), 0


class _ClientConvBlock(torch.autograd.Function):
    """``relu(max_pool2d(conv2d(x, w, b, ...), k))`` for one client, with a vmap rule that calls
    :class:`_StackedConvBlock` on the whole stack."""

    @staticmethod
    def forward(x: Tensor, w: Tensor, b: Tensor | None, conv: tuple, rows: Rows, k: int) -> Tensor:  # type: ignore[override]
        return F.relu(F.max_pool2d(F.conv2d(x, w, b, *conv), k))

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Tensor) -> None:
        x, w, b, conv, rows, k = inputs
        _save_conv(ctx, x, w, b, conv, rows, *([] if b is None else [b]))
        ctx.k = k

    @staticmethod
    def backward(ctx: Any, grad: Tensor):  # type: ignore[override]
        x, w, *b = ctx.saved_tensors  # off the hot path (that is the vmap rule): recompute the block
        with torch.enable_grad():
            y = F.conv2d(x.detach(), w.detach(), b[0].detach() if b else None, *ctx.conv).requires_grad_(True)
            gy, = torch.autograd.grad(F.relu(F.max_pool2d(y, ctx.k)), y, grad)
        return (*_conv_grads(ctx, gy, x, w), None, None, None)

    @staticmethod
    def vmap(info: Any, in_dims: tuple, x: Tensor, w: Tensor, b: Tensor | None, conv: tuple, rows: Rows, k: int):
        n = info.batch_size
        b = None if b is None else _batched(b, in_dims[2], n)
        return _StackedConvBlock.apply(_batched(x, in_dims[0], n), _batched(w, in_dims[1], n), b, conv,
                                       _check_rows(rows, n), k)[0], 0


class _PerClientConv2d(nn.Conv2d):
    """A Conv2d whose convolution goes through :class:`_ClientConv` (same parameters, same names). ``rows`` is a
    one-element list shared with the executor: the current group's real batch sizes, or None."""

    rows: list

    def _conv_forward(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        if not self._plain():
            return super()._conv_forward(input, weight, bias)
        return _ClientConv.apply(input, weight, bias, self._conv_args(), self.rows[0])

    def forward_pool_relu(self, input: Tensor, k: int) -> Tensor:
        """``F.relu(F.max_pool2d(self(input), k))`` in one step (:func:`fedlib.models.conv_pool_relu`)."""
        if not self._plain():
            return F.relu(F.max_pool2d(self(input), k))
        return _ClientConvBlock.apply(input, self.weight, self.bias, self._conv_args(), self.rows[0], k)

    def _plain(self) -> bool:
        return self.padding_mode == "zeros" and self.groups == 1 and not isinstance(self.padding, str)

    def _conv_args(self) -> tuple:
        return tuple(self.stride), tuple(self.padding), tuple(self.dilation)


# ------------------------------------------------------------------------------ per-client BatchNorm on the CPU
# The executor's private model copy routes every BatchNorm2d through the functions below: under vmap their rule runs
# ``native_batch_norm`` (and its backward) per client on that client's slice, with that client's weight, bias and
# running statistics (slices of the stacked buffers: the running-statistics update lands in the stack in place),
# exactly as the sequential executor's BatchNorm2d does. ``rows`` (padded mode) skips padding rows: they get zero
# outputs and zero input gradients and never enter a client's batch statistics.


def _at(t: Tensor | None, i: int) -> Tensor | None:
    return None if t is None else t[i]


class _StackedBatchNorm(torch.autograd.Function):
    """Per-client batch norm of physical stacked tensors: x (N, B, C, ...), weight and bias (N, C) or None, running
    statistics (N, C) or None (updated in place in training mode). Outputs: the stacked normalized input, then each
    client's saved mean and inverse standard deviation (for the backward)."""

    @staticmethod
    def forward(x: Tensor, w: Tensor | None, b: Tensor | None, rm: Tensor | None,  # type: ignore[override]
                rv: Tensor | None, training: bool, momentum: float, eps: float, rows: Rows) -> tuple[Tensor, ...]:
        outs, means, invstds = [], [], []
        for i in range(len(x)):
            o, m, s = torch.native_batch_norm(_client(x, i, rows), _at(w, i), _at(b, i), _at(rm, i), _at(rv, i),
                                              training, momentum, eps)
            outs.append(o)
            means.append(m)
            invstds.append(s)
        return stack_rows(outs, x.shape[1]), *means, *invstds

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
        x, w, b, rm, rv, training, momentum, eps, rows = inputs
        n = len(x)
        ctx.mark_non_differentiable(*output[1:])
        # eval mode normalizes by the running statistics (then saved); training mode by the batch's (saved outputs)
        ctx.save_for_backward(x, w, *(output[1:]), *((rm, rv) if not training else ()))
        ctx.n, ctx.training, ctx.eps, ctx.rows, ctx.has_bias = n, training, eps, rows, b is not None

    @staticmethod
    def backward(ctx: Any, grad: Tensor, *_: Any):  # type: ignore[override]
        x, w, *rest = ctx.saved_tensors
        n, rows = ctx.n, ctx.rows
        means, invstds = rest[:n], rest[n:2 * n]
        rm, rv = rest[2 * n:] if not ctx.training else (None, None)
        need = [ctx.needs_input_grad[0], w is not None and ctx.needs_input_grad[1],
                ctx.has_bias and ctx.needs_input_grad[2]]
        grads = [torch.ops.aten.native_batch_norm_backward(_client(grad, i, rows), _client(x, i, rows), _at(w, i),
                                                           _at(rm, i), _at(rv, i), means[i], invstds[i],
                                                           ctx.training, ctx.eps, need)
                 for i in range(n)]
        dx, dw, db = zip(*grads)
        return (stack_rows(list(dx), x.shape[1]) if need[0] else None, torch.stack(dw) if need[1] else None,
                torch.stack(db) if need[2] else None, None, None, None, None, None, None)


class _ClientBatchNorm(torch.autograd.Function):
    """``F.batch_norm`` for one client, with a vmap rule that calls :class:`_StackedBatchNorm` on the whole stack."""

    @staticmethod
    def forward(x: Tensor, w: Tensor | None, b: Tensor | None, rm: Tensor | None,  # type: ignore[override]
                rv: Tensor | None, training: bool, momentum: float, eps: float, rows: Rows) -> Tensor:
        return F.batch_norm(x, rm, rv, w, b, training, momentum, eps)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Tensor) -> None:
        x, w, b, rm, rv, training, momentum, eps, rows = inputs
        ctx.save_for_backward(x, w, b, *((rm, rv) if not training else ()))
        ctx.training, ctx.eps = training, eps

    @staticmethod
    def backward(ctx: Any, grad: Tensor):  # type: ignore[override]
        x, w, b, *stats = ctx.saved_tensors  # off the hot path (that is the vmap rule): recompute, stats untouched
        rm, rv = stats if stats else (None, None)
        with torch.enable_grad():
            leaves = [t.detach().requires_grad_(True) if t is not None else None for t in (x, w, b)]
            out = F.batch_norm(leaves[0], rm, rv, leaves[1], leaves[2], ctx.training, 0.0, ctx.eps)
            wanted = [t for t in leaves if t is not None]
            got = iter(torch.autograd.grad(out, wanted, grad))
        dx, dw, db = (next(got) if t is not None else None for t in leaves)
        return dx, dw, db, None, None, None, None, None, None

    @staticmethod
    def vmap(info: Any, in_dims: tuple, x: Tensor, w: Tensor | None, b: Tensor | None, rm: Tensor | None,
             rv: Tensor | None, training: bool, momentum: float, eps: float, rows: Rows):
        n = info.batch_size
        if training and any(t is not None and d is None for t, d in ((rm, in_dims[3]), (rv, in_dims[4]))):
            raise RuntimeError("per-client BatchNorm: running statistics updated in training mode must be stacked "
                               "per client like the input")
        w, b, rm, rv = (None if t is None else _batched(t, d, n) for t, d in zip((w, b, rm, rv), in_dims[1:5]))
        return _StackedBatchNorm.apply(_batched(x, in_dims[0], n), w, b, rm, rv, training, momentum, eps,
                                       _check_rows(rows, n))[0], 0


class _PerClientBatchNorm2d(nn.BatchNorm2d):
    """A BatchNorm2d whose normalization goes through :class:`_ClientBatchNorm` (same parameters, buffers and
    names; ``nn.BatchNorm2d``'s own bookkeeping of ``num_batches_tracked`` and the momentum). ``rows``: as for
    :class:`_PerClientConv2d`."""

    rows: list

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked)
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return _ClientBatchNorm.apply(input, self.weight, self.bias, self.running_mean if track else None,
                                      self.running_var if track else None, use_batch, factor, self.eps, self.rows[0])


# ------------------------------------------------------------------------------ per-client Linear on the CPU
# Linear layers of 2-d inputs (the models' classifiers and projection heads) run per client the same way: vmap's
# batched matrix product rounds differently from the sequential executor's ``addmm``; per client, the forward is
# ``F.linear`` on the client's real rows and the backward is the two matrix products autograd computes for it, on
# operands laid out as the sequential executor's are (:func:`_own`).


def _own(t: Tensor | None) -> Tensor | None:
    """``t`` row-major at a 64-byte-aligned address, as a freshly allocated tensor is: ``t`` itself where it already
    is, else a copy. A client's slice of a stack starts wherever the previous client's ends, and MKL's small matrix
    products round differently at addresses that are not 16-byte aligned."""
    if t is None or (t.is_contiguous() and t.data_ptr() % 64 == 0):
        return t
    return t.clone(memory_format=torch.contiguous_format)


class _StackedLinear(torch.autograd.Function):
    """Per-client ``F.linear`` of physical stacked tensors: x (N, B, in), w (N, out, in), b (N, out) or None."""

    @staticmethod
    def forward(x: Tensor, w: Tensor, b: Tensor | None, rows: Rows) -> Tensor:  # type: ignore[override]
        return stack_rows([F.linear(_own(_client(x, i, rows)), _own(w[i]), _own(_at(b, i))) for i in range(len(x))],
                          x.shape[1])

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Tensor) -> None:
        x, w, b, rows = inputs
        ctx.save_for_backward(x, w)
        ctx.rows, ctx.has_bias = rows, b is not None

    @staticmethod
    def backward(ctx: Any, grad: Tensor):  # type: ignore[override]
        x, w = ctx.saved_tensors
        need_x, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        need_b = ctx.has_bias and ctx.needs_input_grad[2]
        dx, dw, db = [], [], []
        for i in range(len(x)):  # addmm's backward: grad @ w, grad^T @ x, grad summed over the rows
            g, xi = _own(_client(grad, i, ctx.rows)), _own(_client(x, i, ctx.rows))
            if need_x:
                dx.append(g.mm(_own(w[i])))
            if need_w:
                dw.append(g.t().mm(xi))
            if need_b:
                db.append(g.sum(0))
        return (stack_rows(dx, x.shape[1]) if need_x else None, torch.stack(dw) if need_w else None,
                torch.stack(db) if need_b else None, None)


class _ClientLinear(torch.autograd.Function):
    """``F.linear`` of one client's 2-d input, with a vmap rule that calls :class:`_StackedLinear` on the stack."""

    @staticmethod
    def forward(x: Tensor, w: Tensor, b: Tensor | None, rows: Rows) -> Tensor:  # type: ignore[override]
        return F.linear(x, w, b)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Tensor) -> None:
        x, w, b, rows = inputs
        ctx.save_for_backward(x, w)
        ctx.has_bias = b is not None

    @staticmethod
    def backward(ctx: Any, grad: Tensor):  # type: ignore[override]
        x, w = ctx.saved_tensors
        db = grad.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return (grad.mm(w) if ctx.needs_input_grad[0] else None, grad.t().mm(x) if ctx.needs_input_grad[1] else None,
                db, None)

    @staticmethod
    def vmap(info: Any, in_dims: tuple, x: Tensor, w: Tensor, b: Tensor | None, rows: Rows):
        n = info.batch_size
        b = None if b is None else _batched(b, in_dims[2], n)
        return _StackedLinear.apply(_batched(x, in_dims[0], n), _batched(w, in_dims[1], n), b,
                                    _check_rows(rows, n)), 0


class _PerClientLinear(nn.Linear):
    """A Linear whose 2-d inputs go through :class:`_ClientLinear` (same parameters, same names); ``rows``: as for
    :class:`_PerClientConv2d`. Under autocast (``precision="bf16"``) it is the plain Linear: autocast's casts of the
    operands, and of their gradients, are ops of the plain layer."""

    rows: list

    def forward(self, input: Tensor) -> Tensor:
        if input.dim() != 2 or torch.is_autocast_enabled(input.device.type):
            return super().forward(input)
        return _ClientLinear.apply(input, self.weight, self.bias, self.rows[0])


def per_client_convs(model: nn.Module, rows: list) -> nn.Module:
    """A deep copy of ``model`` whose plain ``Conv2d``, ``BatchNorm2d`` and ``Linear`` layers batch over clients per
    client (:class:`_ClientConv`, :class:`_ClientBatchNorm`, :class:`_ClientLinear`), reading the current real batch
    sizes from ``rows[0]``."""
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


