"""The vectorized executor's per-client ``BatchNorm2d`` and ``Linear`` layers on the CPU
(:func:`fedlib.executors.fast.cpu_conv.per_client_convs` puts them in its private model copy).

BatchNorm: under vmap the rule of :class:`_ClientBatchNorm` runs ``native_batch_norm`` (and its
backward) per client on that client's slice, with that client's weight, bias and running statistics
(slices of the stacked buffers: the running-statistics update lands in the stack in place), exactly
as the sequential executor's BatchNorm2d does. ``rows`` (padded mode) skips padding rows: they get
zero outputs and zero input gradients and never enter a client's batch statistics.

Linear layers of 2-d inputs (the models' classifiers and projection heads) run per client the same
way: vmap's batched matrix product rounds differently from the sequential executor's ``addmm``; per
client, the forward is ``F.linear`` on the client's real rows and the backward is the two matrix
products autograd computes for it, on operands laid out as the sequential executor's are
(:func:`_own`).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fedlib.executors.fast.cpu_rows import Rows, _at, _batched, _check_rows, _client
from fedlib.executors.fast.layout import stack_rows

__all__ = ["_PerClientBatchNorm2d", "_PerClientLinear"]


class _StackedBatchNorm(torch.autograd.Function):
    """Per-client batch norm of physical stacked tensors: x (N, B, C, ...), weight and bias (N, C)
    or None, running statistics (N, C) or None (updated in place in training mode). Outputs: the
    stacked normalized input, then each client's saved mean and inverse standard deviation (for the
    backward)."""

    @staticmethod
    def forward(x: Tensor, w: Tensor | None, b: Tensor | None,  # type: ignore[override]
                rm: Tensor | None, rv: Tensor | None, training: bool, momentum: float, eps: float,
                rows: Rows) -> tuple[Tensor, ...]:
        outs, means, invstds = [], [], []
        for i in range(len(x)):
            o, m, s = torch.native_batch_norm(_client(x, i, rows), _at(w, i), _at(b, i), _at(rm, i),
                                              _at(rv, i), training, momentum, eps)
            outs.append(o)
            means.append(m)
            invstds.append(s)
        return stack_rows(outs, x.shape[1]), *means, *invstds

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
        x, w, b, rm, rv, training, momentum, eps, rows = inputs
        n = len(x)
        ctx.mark_non_differentiable(*output[1:])
        # eval mode normalizes by the running statistics (then saved); training mode by the batch's
        # (saved outputs)
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
        grads = [torch.ops.aten.native_batch_norm_backward(
            _client(grad, i, rows), _client(x, i, rows), _at(w, i), _at(rm, i), _at(rv, i),
            means[i], invstds[i], ctx.training, ctx.eps, need) for i in range(n)]
        dx, dw, db = zip(*grads)
        return (stack_rows(list(dx), x.shape[1]) if need[0] else None,
                torch.stack(dw) if need[1] else None, torch.stack(db) if need[2] else None,
                None, None, None, None, None, None)


class _ClientBatchNorm(torch.autograd.Function):
    """``F.batch_norm`` for one client, with a vmap rule that calls :class:`_StackedBatchNorm` on
    the whole stack."""

    @staticmethod
    def forward(x: Tensor, w: Tensor | None, b: Tensor | None,  # type: ignore[override]
                rm: Tensor | None, rv: Tensor | None, training: bool, momentum: float, eps: float,
                rows: Rows) -> Tensor:
        return F.batch_norm(x, rm, rv, w, b, training, momentum, eps)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Tensor) -> None:
        x, w, b, rm, rv, training, momentum, eps, rows = inputs
        ctx.save_for_backward(x, w, b, *((rm, rv) if not training else ()))
        ctx.training, ctx.eps = training, eps

    @staticmethod
    def backward(ctx: Any, grad: Tensor):  # type: ignore[override]
        # off the hot path (that is the vmap rule): recompute, stats untouched
        x, w, b, *stats = ctx.saved_tensors
        rm, rv = stats if stats else (None, None)
        with torch.enable_grad():
            leaves = [t.detach().requires_grad_(True) if t is not None else None for t in (x, w, b)]
            out = F.batch_norm(leaves[0], rm, rv, leaves[1], leaves[2], ctx.training, 0.0, ctx.eps)
            wanted = [t for t in leaves if t is not None]
            got = iter(torch.autograd.grad(out, wanted, grad))
        dx, dw, db = (next(got) if t is not None else None for t in leaves)
        return dx, dw, db, None, None, None, None, None, None

    @staticmethod
    def vmap(info: Any, in_dims: tuple, x: Tensor, w: Tensor | None, b: Tensor | None,
             rm: Tensor | None, rv: Tensor | None, training: bool, momentum: float, eps: float,
             rows: Rows):
        n = info.batch_size
        if training and any(t is not None and d is None
                            for t, d in ((rm, in_dims[3]), (rv, in_dims[4]))):
            raise RuntimeError("per-client BatchNorm: running statistics updated in training mode "
                               "must be stacked per client like the input")
        w, b, rm, rv = (None if t is None else _batched(t, d, n)
                        for t, d in zip((w, b, rm, rv), in_dims[1:5]))
        return _StackedBatchNorm.apply(_batched(x, in_dims[0], n), w, b, rm, rv, training, momentum,
                                       eps, _check_rows(rows, n))[0], 0


class _PerClientBatchNorm2d(nn.BatchNorm2d):
    """A BatchNorm2d whose normalization goes through :class:`_ClientBatchNorm` (same parameters,
    buffers and names; ``nn.BatchNorm2d``'s own bookkeeping of ``num_batches_tracked`` and the
    momentum). ``rows``: as for :class:`~fedlib.executors.fast.cpu_conv._PerClientConv2d`."""

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
        return _ClientBatchNorm.apply(input, self.weight, self.bias,
                                      self.running_mean if track else None,
                                      self.running_var if track else None, use_batch, factor,
                                      self.eps, self.rows[0])


def _own(t: Tensor | None) -> Tensor | None:
    """``t`` row-major at a 64-byte-aligned address, as a freshly allocated tensor is: ``t`` itself
    where it already is, else a copy. A client's slice of a stack starts wherever the previous
    client's ends, and MKL's small matrix products round differently at addresses that are not
    16-byte aligned."""
    if t is None or (t.is_contiguous() and t.data_ptr() % 64 == 0):
        return t
    return t.clone(memory_format=torch.contiguous_format)


class _StackedLinear(torch.autograd.Function):
    """Per-client ``F.linear`` of physical stacked tensors: x (N, B, in), w (N, out, in), b (N, out)
    or None."""

    @staticmethod
    def forward(x: Tensor, w: Tensor, b: Tensor | None,  # type: ignore[override]
                rows: Rows) -> Tensor:
        outs = [F.linear(_own(_client(x, i, rows)), _own(w[i]), _own(_at(b, i)))
                for i in range(len(x))]
        return stack_rows(outs, x.shape[1])

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
    """``F.linear`` of one client's 2-d input, with a vmap rule that calls :class:`_StackedLinear`
    on the stack."""

    @staticmethod
    def forward(x: Tensor, w: Tensor, b: Tensor | None,  # type: ignore[override]
                rows: Rows) -> Tensor:
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
        return (grad.mm(w) if ctx.needs_input_grad[0] else None,
                grad.t().mm(x) if ctx.needs_input_grad[1] else None, db, None)

    @staticmethod
    def vmap(info: Any, in_dims: tuple, x: Tensor, w: Tensor, b: Tensor | None, rows: Rows):
        n = info.batch_size
        b = None if b is None else _batched(b, in_dims[2], n)
        return _StackedLinear.apply(_batched(x, in_dims[0], n), _batched(w, in_dims[1], n), b,
                                    _check_rows(rows, n)), 0


class _PerClientLinear(nn.Linear):
    """A Linear whose 2-d inputs go through :class:`_ClientLinear` (same parameters, same names);
    ``rows``: as for :class:`~fedlib.executors.fast.cpu_conv._PerClientConv2d`. Under autocast
    (``precision="bf16"``) it is the plain Linear: autocast's casts of the operands, and of their
    gradients, are ops of the plain layer."""

    rows: list

    def forward(self, input: Tensor) -> Tensor:
        if input.dim() != 2 or torch.is_autocast_enabled(input.device.type):
            return super().forward(input)
        return _ClientLinear.apply(input, self.weight, self.bias, self.rows[0])
