"""The client-vectorized executor: many clients' local training as one batched computation.

``VectorizedExecutor(engine)(ctxs, starts)`` returns exactly what the sequential ``Engine.train_client`` loop
returns — each client's trained ``Params`` (parameters *and* buffers) and its mean training loss — but trains a
chunk of clients together: their parameters are stacked along a leading client dimension, the model runs under
``torch.func.vmap(functional_call(...))`` and one ``backward`` of the summed per-client losses gives every
client's gradient (clients are independent, so ∂(Σ_j L_j)/∂θ_i = ∂L_i/∂θ_i). Optimizers are small pure functions
over the stacked tensors (:func:`sgd_step`, :func:`adam_step`) with ``torch.optim``'s exact update rules.

Same batches as the sequential executor
    Every client-epoch's order and augmentation draws come from :func:`fedlib.engine.epoch_plan` (CPU, keyed by
    ``(seed, round, client, epoch)``), cut into :func:`fedlib.engine.num_batches` batches of ``batch_size``.
    Client ``i`` takes ``K_i = local_epochs · nb_i`` steps; at global step ``t`` it is active iff ``t < K_i`` and
    uses epoch ``t // nb_i``, batch ``t % nb_i``. Clients are sorted by ``K_i`` (descending) inside a chunk, so
    the active clients are always a prefix and are addressed by views (no gathers). An inactive client gets no
    update at all (no weight decay, no momentum change). Since every client starts at step 0, an active client at
    global step ``t`` has taken exactly ``t`` steps: the per-client step count (SGD's first-step buffer, Adam's
    bias correction) is ``t + 1`` for every active client.

Two batching modes (chosen per run, see :attr:`VectorizedExecutor.mode`)
    * ``"padded"`` (models without buffers, strategies without taps/references): each client's batch is padded to
      ``batch_size`` with a mask (as fedjax does for uneven clients); the loss is Σ mask·CE / Σ mask, whose
      gradient equals the mean over the real samples. One vmapped call per step.
    * ``"exact"`` (models with buffers, e.g. BatchNorm; strategies with taps or references): no padding. At each
      step the active clients are grouped by their real batch size (all full batches together; a ragged last
      batch with the other clients of the same size) and each group runs as one vmapped call. BatchNorm batch
      statistics therefore never see padding, and per-sample penalties (contrastive terms over taps) average over
      the real samples only. Running statistics are per client (stacked buffers, updated in place through
      ``functional_call``) and returned with each client's parameters.
    A penalty that reads ``y`` without asking for taps can force ``"exact"`` by setting the strategy attribute
    ``vectorized_exact_batches = True``.

Strategy penalty
    ``strategy.penalty(ctx, params, global_params, taps, refs, y)`` runs *inside* the vmapped loss with one
    client's trainable parameters, the shared global parameters, that client's taps and the reference taps
    (computed under ``no_grad`` with ``engine.ref_model`` in eval mode: ``"global"`` = the global model, shared;
    ``"prev"`` = each client's ``ctx.state.get("prev", global)``, stacked). ``ctx`` cannot vary per client inside
    ``vmap``: the penalty gets one *chunk-level* context whose ``round`` and ``lr`` are the real ones and whose
    per-client fields are sentinels (``cid = n_samples = steps = -1``, ``first_visit = False``, an empty
    read-only ``state``). A vectorizable penalty must therefore not read per-client scalars from ``ctx``.

Supported
    SGD (momentum, weight decay, ``dampening = 0``, ``nesterov = False``) and Adam (L2 weight decay, no amsgrad),
    optimizer state reset per client per round; strategies with ``vectorizable = True`` and without
    ``persistent_optimizer``; models without dropout. Anything else: :meth:`VectorizedExecutor.supports` says no
    and why, and the engine falls back to the sequential loop. Only ``engine.trainable`` parameters are trained;
    the others (frozen or unused) are returned exactly as each client started.

Chunks
    ``cfg.chunk_size`` clients at a time (``None``: all sampled clients). On CUDA with ``chunk_size=None`` the chunk
    is capped by a memory estimate (one probe step's peak memory per client against the free memory; ran on an H100,
    where the benchmarks' 10-20 clients fit in one chunk).

Static steps and CUDA graphs (``Config.cuda_graph=True``)
    A GPU running a small CNN is bound by kernel launches, not arithmetic, and the eager step above launches a few
    hundred small kernels through Python, with shapes that change as clients finish. In the *static* path every
    step has one shape: all ``N`` clients of the chunk run every step with a full ``batch_size`` batch, a client's
    padding rows are masked out of its loss (as in padded mode), a client that has finished (or not yet reached a
    ragged batch) has an all-zero mask, and its update is discarded (``torch.where`` on the parameters and the
    momentum buffer: no weight decay, no momentum change, exactly as in the eager path). Every tensor the step
    reads or writes lives at a fixed address (:class:`_Static`: stacked parameters, momentum buffers, the
    global/shared parameters, the step's data indices, real batch sizes, augmentation draws and learning rates),
    so on CUDA the whole step — data gather, augmentation, forward, backward, SGD update, loss accumulation — is
    captured once per chunk size as a CUDA graph and replayed for every step of every round; per step the host
    only copies the step's indices and batch sizes in and launches the graph. The numbers are the eager path's up
    to float rounding (``tests/test_vectorized.py`` runs the static path on the CPU, ``tests/test_cuda.py`` the
    captured graph on a GPU). The price is compute spent on finished clients' masked rows (all clients run
    ``max K_i`` steps), which a launch-bound GPU does not notice.
    Requirements (otherwise a one-line notice and the eager path): padded mode (no buffers, taps or reference
    models), SGD, no ``compile``, and a penalty that does not read ``ctx`` (the graph replays the Python-level
    values of its capture; the static path passes a context whose ``round`` is -1 and ``lr`` NaN). A failed
    capture also falls back to the eager path with a notice; a chunk whose clients start from different frozen
    parameters runs eagerly too.

Performance notes (CPU)
    ``vmap`` turns a convolution over stacked weights into a grouped convolution. oneDNN's grouped convolutions are
    fast in channels_last for most layer shapes but pathologically slow for a few (tiny input-channel counts, e.g.
    the first layer, where the backward can take 100x longer). On the CPU the executor therefore routes every
    ``Conv2d`` of its private model copy through a custom vmap rule that runs the convolution per client in
    channels_last (the sequential executor's kernels), and runs each conv block (conv → max-pool → ReLU,
    :func:`fedlib.models.conv_pool_relu`) whole per client, so a client's full-resolution conv map is pooled while
    it is still in the cache and never stacked; in padded mode these per-client ops skip the padding rows. The rest
    (linear layers, loss, optimizer) stays batched. It also tunes glibc to reuse freed memory
    (:func:`_keep_freed_memory`). On a 2-core CPU one client's batch already keeps both cores busy, so there is
    little to gain: the two executors run at parity (``benchmarks/RESULTS.md``), and ``executor="auto"`` keeps
    the simpler sequential one on the CPU.

Opt-in GPU options (off by default):
    ``Config.precision="bf16"``  the forward pass under ``torch.autocast(dtype=torch.bfloat16)`` (parameters,
                                 optimizer state and the loss accumulation stay float32), in both executors. It
                                 changes the numbers, so it is part of the config's identity;
                                 ``benchmarks/precision.py`` records its accuracy against float32 on Fashion-MNIST.
    ``Config.compile=True``      wrap the vmapped loss in ``torch.compile`` (dynamic=False; one graph per distinct
                                 (active clients, batch size) shape). On an H100 its first paper-scale round did
                                 not finish within 60 s of compiling; prefer ``cuda_graph``.
    ``Config.cuda_graph=True``   fixed-shape steps replayed from one captured CUDA graph (see "Static steps").
    ``FEDLIB_VEC_CHUNK_MEM=0.6``  the fraction of free CUDA memory the automatic chunk size may use.
    ``FEDLIB_CPU_MALLOC=0``       do not tune glibc's allocator on the CPU (see :func:`_keep_freed_memory`).
"""

from __future__ import annotations

import copy
import math
import os
import warnings
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, vmap

from .data import apply_augment
from .engine import NonFiniteLossError, epoch_plan, num_batches
from .strategies import ClientContext, Params

__all__ = ["VectorizedExecutor", "sgd_step", "adam_step", "init_optimizer_state"]

# adaptive_avg_pool2d on channels_last input calls as_strided_, which vmap runs through its (correct, slower)
# fallback; the warning would otherwise print once per process for every ResNet.
warnings.filterwarnings("ignore", message=r".*batching rule for aten::as_strided_.*")


# ----------------------------------------------------------------------------------- functional optimizers

def init_optimizer_state(kind: str, params: list[Tensor]) -> dict[str, list[Tensor | None]]:
    """Fresh optimizer state for stacked parameters (what a new ``torch.optim`` optimizer starts from)."""
    if kind == "sgd":
        return {"momentum_buffer": [None] * len(params)}
    if kind == "adam":
        return {"exp_avg": [torch.zeros_like(p) for p in params],
                "exp_avg_sq": [torch.zeros_like(p) for p in params]}
    raise ValueError(f"no functional optimizer {kind!r}")


def _lr_alpha(p: Tensor, lr: float | Tensor) -> float | Tensor:
    """A per-client learning rate (N,) as a tensor broadcastable against stacked ``p`` (N, ...)."""
    return lr if not isinstance(lr, Tensor) else lr.to(p.dtype).view(-1, *([1] * (p.dim() - 1)))


def sgd_step(params: list[Tensor], grads: list[Tensor], bufs: list[Tensor | None], *, lr: float | Tensor,
             momentum: float = 0.0, weight_decay: float = 0.0) -> tuple[list[Tensor], list[Tensor | None]]:
    """One ``torch.optim.SGD`` step (dampening 0, no nesterov) on stacked tensors; returns (params, buffers).

    ``d = g + wd·p``; momentum buffer ``b = d`` on the first step (``bufs[i] is None``), ``b = m·b + d`` after;
    ``p ← p − lr·b`` (``lr`` a float, or one value per client). Pure: the inputs are not modified."""
    new_p, new_b = [], []
    for p, g, b in zip(params, grads, bufs):
        d = g.add(p, alpha=weight_decay) if weight_decay != 0 else g
        if momentum != 0:
            b = d.detach().clone() if b is None else b.mul(momentum).add_(d)
            d = b
        a = _lr_alpha(p, lr)
        new_p.append(p.add(d, alpha=-a) if not isinstance(a, Tensor) else p - a * d)
        new_b.append(b)
    return new_p, new_b


def adam_step(params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor], exp_avg_sqs: list[Tensor], *,
              step: int, lr: float | Tensor, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
              weight_decay: float = 0.0) -> tuple[list[Tensor], list[Tensor], list[Tensor]]:
    """One ``torch.optim.Adam`` step (L2 weight decay, no amsgrad) on stacked tensors; ``step`` counts from 1.

    Returns (params, exp_avgs, exp_avg_sqs); the inputs are not modified."""
    bc1 = 1 - beta1 ** step
    bc2_sqrt = (1 - beta2 ** step) ** 0.5
    out_p, out_m, out_v = [], [], []
    for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
        if weight_decay != 0:
            g = g.add(p, alpha=weight_decay)
        m = m.lerp(g, 1 - beta1)
        v = v.mul(beta2).addcmul_(g, g, value=1 - beta2)
        denom = (v.sqrt() / bc2_sqrt).add_(eps)
        a = _lr_alpha(p, lr)
        if isinstance(a, Tensor):
            out_p.append(p - (a / bc1) * m / denom)
        else:
            out_p.append(p.addcdiv(m, denom, value=-(a / bc1)))
        out_m.append(m)
        out_v.append(v)
    return out_p, out_m, out_v


# ------------------------------------------------------------------------------ per-client conv on the CPU
#
# On the CPU the executor's private model copy routes every plain Conv2d through the functions below: under vmap
# their vmap rule runs one ordinary convolution per client on that client's slice (the sequential executor's
# kernels and memory formats) instead of vmap's grouped convolution, and a conv block (conv → max-pool → ReLU,
# ``fedlib.models.conv_pool_relu``) runs whole per client while the conv map is still in the cache. ``rows`` (padded
# mode) holds each client's real batch size: padding rows are skipped (their outputs and input gradients are zero;
# the masked loss gives them no gradient anyway), so per-client work equals the sequential executor's.

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


def _stack_as(ts: list[Tensor], like: Tensor) -> Tensor:
    """A fresh stack of ``ts`` whose slices have ``like``'s strides (the model's memory format: e.g. channels_last
    conv weights on the CPU), whatever the layout ``ts`` arrive in. Aggregated global parameters come back
    contiguous; stacking them as they come would hand oneDNN mismatched weight/input formats (conv backward ~10x
    slower on the CPU)."""
    if like.dim() and _dense(like):
        out = torch.empty_strided((len(ts), *like.shape), (like.numel(), *like.stride()), dtype=like.dtype,
                                  device=like.device)
    else:
        out = like.new_empty((len(ts), *like.shape))
    for i, t in enumerate(ts):
        out[i].copy_(t)
    return out


def _stack_rows(ts: list[Tensor], width: int | None = None) -> Tensor:
    """``torch.stack`` of per-client tensors whose slices keep the clients' strides (channels_last stays
    channels_last). ``width``: the rows of each slice; a client's tensor may have fewer (padding rows are zero).
    A single full tensor is returned as a view."""
    if ts[0].dim() == 0:
        return torch.stack(ts)
    t0 = max(ts, key=len)
    width = len(t0) if width is None else width
    if len(ts) == 1 and len(t0) == width:
        return t0.unsqueeze(0)
    out = _empty_stack(t0, len(ts), width)
    for i, t in enumerate(ts):
        out[i, :len(t)].copy_(t)
        if len(t) < width:
            out[i, len(t):].zero_()
    return out


def _empty_stack(t: Tensor, n: int, width: int) -> Tensor:
    """An uninitialized (n, width, *t.shape[1:]) tensor whose slices have ``t``'s strides where ``t`` is dense with
    its rows outermost (as in both 4-d memory formats); contiguous otherwise."""
    inner = t[0].numel() if len(t) else 0
    if inner and _dense(t) and (len(t) == 1 or t.stride(0) == inner):
        return torch.empty_strided((n, width, *t.shape[1:]), (width * inner, inner, *t.stride()[1:]),
                                   dtype=t.dtype, device=t.device)
    return t.new_empty((n, width, *t.shape[1:]))


def _dense(t: Tensor) -> bool:
    """Whether ``t``'s elements fill its storage span exactly once (some permutation of a contiguous layout)."""
    expected = 1
    for stride, size in sorted((st, sz) for sz, st in zip(t.shape, t.stride()) if sz != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _stack_grads(grads: list[tuple[Tensor | None, ...]], width: int) -> tuple[Tensor | None, ...]:
    """Per-client (dx, dw, db) → stacked (dx padded to ``width`` rows, dw, db)."""
    dx, dw, db = zip(*grads)
    return (_stack_rows(list(dx), width) if dx[0] is not None else None,
            _stack_rows(list(dw)) if dw[0] is not None else None,
            torch.stack(db) if db[0] is not None else None)


def _save_conv(ctx: Any, x: Tensor, w: Tensor, b: Tensor | None, conv: tuple, rows: Rows, *extra: Tensor) -> None:
    ctx.save_for_backward(x, w, *extra)
    ctx.conv, ctx.has_bias, ctx.rows = conv, b is not None, rows


class _StackedConv(torch.autograd.Function):
    """Per-client 2-d convolution of physical stacked tensors: x (N, B, Cin, H, W), w (N, Cout, Cin, kh, kw),
    b (N, Cout) or None; ``rows``: real rows per client (None: all)."""

    @staticmethod
    def forward(x: Tensor, w: Tensor, b: Tensor | None, conv: tuple, rows: Rows) -> Tensor:  # type: ignore[override]
        return _stack_rows([F.conv2d(_client(x, i, rows), w[i], None if b is None else b[i], *conv)
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
                out = _empty_stack(p, len(x), x.shape[1])
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


def _keep_freed_memory() -> bool:
    """Ask glibc to keep freed memory for reuse instead of returning it to the OS (``mallopt(M_MMAP_MAX, 0)``,
    ``mallopt(M_TRIM_THRESHOLD, 1 GiB)``). A chunk's activations are 10x one client's (100+ MB per tensor); by
    default glibc serves such blocks with fresh ``mmap`` pages on every step and the page faults cost the
    vectorized executor 1.3-1.6x on a 2-core CPU (``benchmarks/RESULTS.md``). Process-wide; set
    ``FEDLIB_CPU_MALLOC=0`` to leave the allocator alone. Returns whether it applied (glibc only)."""
    global _MALLOC_TUNED
    if _MALLOC_TUNED:
        return True
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        _MALLOC_TUNED = bool(libc.mallopt(-4, 0)) and bool(libc.mallopt(-1, 1 << 30))  # M_MMAP_MAX, M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        _MALLOC_TUNED = False
    return _MALLOC_TUNED


_MALLOC_TUNED = False


# ------------------------------------------------------------------------------------------------ executor

@dataclass
class _Chunk:
    """The state of one chunk of clients while it trains, sorted by number of steps (descending)."""

    ctxs: list[ClientContext]
    starts: list[Params]
    pos: list[int]  # position of each (sorted) client in the caller's list
    steps: list[int]  # K_i
    idx: Tensor  # (N, Kmax, B) data indices per step; padding repeats a valid index
    cnt: Tensor  # (N, Kmax) real batch sizes (0 once a client is done), on the CPU
    aug: dict[str, Tensor]  # augmentation draws (N, Kmax, B)
    train: dict[str, Tensor]  # stacked trainable parameters (N, ...)
    bufs: dict[str, Tensor]  # stacked buffers (BatchNorm running statistics)
    frozen: dict[str, Tensor]  # stacked non-trained parameters that differ between clients
    shared: Params  # non-trained parameters every client shares (the same tensor object in every start)
    prev: dict[str, Tensor] | None  # stacked "prev" reference models
    lr: float | Tensor
    opt: dict[str, list[Any]] = field(default_factory=dict)


@dataclass
class _Static:
    """Every tensor a static step reads or writes, at a fixed address (what a captured CUDA graph replays on)."""

    train: dict[str, Tensor]  # stacked trainable parameters (N, ...)
    mom: list[Tensor]  # SGD momentum buffers (empty without momentum)
    glob: Params  # the global model (the penalty's ``global_params``)
    shared: Params  # non-trained parameters every client shares
    idx: Tensor  # (N, B) this step's data indices
    cnt: Tensor  # (N,) this step's real batch sizes (0: the client takes no step)
    aug: dict[str, Tensor]  # (N, B) this step's augmentation draws
    lr: Tensor  # (N,) learning rates
    loss: Tensor  # (N,) float64: Σ over steps of the mean batch loss × real batch size
    fill: float | Tensor = 0.0  # the crop's padding value (FedDataset.pad_fill), on the device
    graph: Any = None  # torch.cuda.CUDAGraph once captured


def _capture(step: Callable[[], None], device: torch.device, warmup: int = 3) -> "torch.cuda.CUDAGraph":
    """Capture ``step`` as a CUDA graph, after ``warmup`` eager runs on a side stream (cuDNN/cuBLAS set-up, as
    PyTorch's CUDA-graph notes require). The warm-up runs change the state ``step`` updates: reload it after."""
    s = torch.cuda.Stream(device)
    s.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(s):
        for _ in range(warmup):
            step()
    torch.cuda.current_stream(device).wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    torch.cuda.synchronize(device)
    return graph


def _per_client_convs(model: nn.Module, rows: list) -> nn.Module:
    """A deep copy of ``model`` whose plain ``Conv2d`` layers batch over clients per client (:class:`_ClientConv`),
    reading the current real batch sizes from ``rows[0]``."""
    model = copy.deepcopy(model)
    for m in model.modules():
        if type(m) is nn.Conv2d:
            m.__class__ = _PerClientConv2d
            m.rows = rows
    return model


class VectorizedExecutor:
    """Trains a list of clients as one batched computation; same contract as ``Engine.train_client`` per client."""

    @staticmethod
    def supports(engine: Any) -> tuple[bool, str]:
        """(True, "") if this executor should run ``engine``; else (False, the reason).

        False when it cannot reproduce the sequential executor (strategy not vectorizable, persistent optimizer
        state, an optimizer other than plain SGD / Adam, dropout), and — only for ``executor="auto"`` — when
        :meth:`prefer` prefers the sequential executor on this device."""
        ok, why = VectorizedExecutor.can_run(engine)
        if ok and getattr(engine.cfg, "executor", "auto") == "auto":
            return VectorizedExecutor.prefer(engine)
        return ok, why

    @staticmethod
    def can_run(engine: Any) -> tuple[bool, str]:
        """Whether the vectorized executor reproduces the sequential one for ``engine`` (and if not, why)."""
        strat, opt, model = engine.strategy, engine.optimizer, engine.model
        if not getattr(strat, "vectorizable", False):
            return False, f"strategy {strat.name!r} is not vectorizable"
        if getattr(strat, "persistent_optimizer", False):
            return False, f"strategy {strat.name!r} keeps optimizer state across rounds"
        if len(opt.param_groups) != 1:
            return False, "the optimizer has several parameter groups"
        g = opt.param_groups[0]
        if type(opt) is torch.optim.SGD:
            if g.get("nesterov") or g.get("dampening", 0) != 0 or g.get("maximize"):
                return False, "only plain SGD (no nesterov, dampening 0, no maximize) is vectorized"
        elif type(opt) is torch.optim.Adam:
            if g.get("amsgrad") or g.get("maximize") or g.get("decoupled_weight_decay"):
                return False, "only plain Adam (no amsgrad, no decoupled weight decay) is vectorized"
        else:
            return False, f"optimizer {type(opt).__name__} has no functional implementation (only SGD and Adam)"
        if isinstance(g["lr"], Tensor):
            return False, "tensor learning rates are not supported"
        for m in model.modules():
            if isinstance(m, nn.modules.dropout._DropoutNd):
                return False, "models with dropout (per-client random masks) are not vectorized"
        return True, ""

    @staticmethod
    def prefer(engine: Any) -> tuple[bool, str]:
        """Whether ``executor="auto"`` should pick this executor: yes on accelerators, no on the CPU.

        On the CPU every client's batch (128-512 samples) already keeps the cores busy, so stacking clients saves
        no compute: the two executors run at parity there (``benchmarks/RESULTS.md``) and the sequential one,
        with its smaller memory footprint, is kept. ``executor="vectorized"`` still runs it on the CPU."""
        if engine.device.type == "cpu":
            return False, "on the CPU the sequential executor is as fast and uses less memory (benchmarks/RESULTS.md)"
        return True, ""

    def __init__(self, engine: Any, static: bool | None = None) -> None:
        ok, why = self.can_run(engine)
        if not ok:
            raise ValueError(f"VectorizedExecutor cannot run this engine: {why}")
        self.engine, self.cfg, self.device = engine, engine.cfg, engine.device
        opt = engine.optimizer
        self.kind = "sgd" if type(opt) is torch.optim.SGD else "adam"
        self.hyper = {k: v for k, v in opt.param_groups[0].items() if k != "params"}
        self.strategy = strat = engine.strategy
        self.taps, self.references = tuple(strat.taps), tuple(strat.references)
        # The functional forward runs on the engine's model (its own parameters are never read) or, on the CPU, on a
        # copy whose convolutions run per client (module docstring, "Performance notes").
        if self.device.type == "cpu" and os.environ.get("FEDLIB_CPU_MALLOC", "1") != "0":
            _keep_freed_memory()
        per_client = self.device.type == "cpu" and os.environ.get("FEDLIB_VEC_CPU_CONV", "per_client") != "grouped"
        self._rows: list = [None]  # padded mode, CPU: the real batch sizes of the group being trained
        self.model = _per_client_convs(engine.model, self._rows) if per_client else engine.model
        self.ref_model = _per_client_convs(engine.ref_model, [None]) if per_client and "prev" in self.references \
            else engine.ref_model
        self.layout = engine.model.state_dict()  # slices are stacked in the model's memory formats (see _stack_as)
        self.state_names = list(self.layout)
        trainable = set(engine.trainable)
        params = [n for n, _ in engine.model.named_parameters()]
        self.trainable = [n for n in params if n in trainable]
        self.nontrain = [n for n in params if n not in trainable]
        self.buffer_names = [n for n, _ in engine.model.named_buffers()]
        exact = bool(self.buffer_names or self.taps or self.references
                     or getattr(strat, "vectorized_exact_batches", False))
        self.mode = "exact" if exact else "padded"
        self.amp = getattr(self.cfg, "precision", "fp32") == "bf16"
        self.compile = bool(getattr(self.cfg, "compile", False))
        self.chunk_mem = float(os.environ.get("FEDLIB_VEC_CHUNK_MEM", "0.6"))
        self._auto_size: int | None = None
        self._loss_fns: dict[bool, Callable] = {}
        self._cur: dict[str, Any] = {}  # the chunk being trained: its chunk-level ctx, shared and global parameters
        # static steps (module docstring, "Static steps and CUDA graphs"); ``static``: force the static path
        # without capture (tests on the CPU)
        want = bool(getattr(self.cfg, "cuda_graph", False)) if static is None else bool(static)
        why = self._static_unsupported(capture=static is None)
        if want and why:
            print(f"fedlib: CUDA graphs unavailable ({why}); running the vectorized executor eagerly.")
        self.static = want and not why
        self.capture = self.static and self.device.type == "cuda"
        self._statics: dict[int, _Static] = {}

    # ----------------------------------------------------------------------------------------------- public
    def __call__(self, ctxs: list[ClientContext], starts: list[Params]) -> list[tuple[Params, float]]:
        if not ctxs:
            return []
        size = self.cfg.chunk_size
        if size is None:
            size = self._auto_chunk(ctxs, starts) if self.device.type == "cuda" else len(ctxs)
        results: list[tuple[Params, float]] = []
        for lo in range(0, len(ctxs), max(1, int(size))):
            results += self._train_chunk(ctxs[lo:lo + size], starts[lo:lo + size])
        return results

    # ------------------------------------------------------------------------------------------ chunk setup
    def _prepare(self, ctxs: list[ClientContext], starts: list[Params]) -> _Chunk:
        """Every batch index, real batch size and augmentation draw of the chunk, and its stacked state."""
        eng, cfg, dev = self.engine, self.cfg, self.device
        B = cfg.batch_size
        steps = [cfg.local_epochs * num_batches(c.n_samples, B, cfg.drop_last) for c in ctxs]
        order = sorted(range(len(ctxs)), key=lambda i: -steps[i])  # stable: ties keep the caller's order
        ctxs, starts, steps = [ctxs[i] for i in order], [starts[i] for i in order], [steps[i] for i in order]
        N, Kmax = len(ctxs), max(steps)
        idx = torch.zeros((N, Kmax, B), dtype=torch.long)
        cnt = torch.zeros((N, Kmax), dtype=torch.long)
        aug: dict[str, Tensor] = {}
        for i, c in enumerate(ctxs):
            ix = torch.as_tensor(np.array(eng.partition.client_indices[c.cid], dtype=np.int64))
            n = len(ix)
            nb = num_batches(n, B, cfg.drop_last)
            if nb == 0:
                continue
            used = min(n, nb * B)  # drop_last drops the tail
            pad = nb * B - used
            sizes = torch.full((nb,), B, dtype=torch.long)
            sizes[-1] = used - (nb - 1) * B
            for e in range(cfg.local_epochs):
                o, draws = epoch_plan(n, eng.augment, cfg.seed, c.round, c.cid, e)
                o = o[:used]
                rows = slice(e * nb, (e + 1) * nb)
                idx[i, rows] = torch.cat([ix[o], ix[o[:1]].expand(pad)]).view(nb, B)
                cnt[i, rows] = sizes
                for k, v in draws.items():
                    if k not in aug:
                        aug[k] = torch.zeros((N, Kmax, B), dtype=v.dtype)
                    aug[k][i, rows] = torch.cat([v[:used], v[:1].expand(pad)]).view(nb, B)

        def stack(name: str, src: list[Params]) -> Tensor:
            return _stack_as([s[name] for s in src], self.layout[name])

        train = {k: stack(k, starts) for k in self.trainable}
        frozen = {k: stack(k, starts) for k in self.nontrain if any(s[k] is not starts[0][k] for s in starts)}
        prev = None
        if "prev" in self.references:
            prevs = [c.state.get("prev", eng.global_params) for c in ctxs]
            prev = {k: stack(k, prevs) for k in self.state_names}
        lrs = [float(c.lr) for c in ctxs]
        ch = _Chunk(ctxs=ctxs, starts=starts, pos=order, steps=steps, idx=idx.to(dev), cnt=cnt,
                    aug={k: v.to(dev) for k, v in aug.items()}, train=train,
                    bufs={k: stack(k, starts) for k in self.buffer_names}, frozen=frozen,
                    shared={k: starts[0][k] for k in self.nontrain if k not in frozen}, prev=prev,
                    lr=lrs[0] if len(set(lrs)) == 1 else torch.tensor(lrs, device=dev))
        ch.opt = init_optimizer_state(self.kind, list(train.values()))
        return ch

    def _auto_chunk(self, ctxs: list[ClientContext], starts: list[Params]) -> int:
        """Clients per chunk on CUDA: ``FEDLIB_VEC_CHUNK_MEM`` of the free memory over one client's footprint
        (the peak of one probe training step, plus four copies of its trainable parameters for the stacked
        parameters, gradients and optimizer state). Measured once per executor."""
        if self._auto_size is None:
            eng, dev = self.engine, self.device
            torch.cuda.synchronize(dev)
            base = torch.cuda.memory_allocated(dev)
            torch.cuda.reset_peak_memory_stats(dev)
            probe = {k: v.detach().clone() for k, v in starts[0].items()}
            for k in self.trainable:
                probe[k].requires_grad_(True)
            x = eng.data.x_train[: self.cfg.batch_size]
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.amp):
                out = functional_call(self.model, probe, (x,), {"taps": self.taps} if self.taps else {})
            logits = out[0] if self.taps else out
            F.cross_entropy(logits.float(), eng.data.y_train[: self.cfg.batch_size]).backward()
            torch.cuda.synchronize(dev)
            act = torch.cuda.max_memory_allocated(dev) - base
            del probe, out, logits
            param_bytes = sum(starts[0][k].numel() * starts[0][k].element_size() for k in self.state_names)
            per_client = act + 4 * param_bytes
            free, _ = torch.cuda.mem_get_info(dev)
            self._auto_size = max(1, int(self.chunk_mem * free // max(per_client, 1)))
        return min(len(ctxs), self._auto_size)

    # --------------------------------------------------------------------------------------------- training
    def _train_chunk(self, ctxs: list[ClientContext], starts: list[Params]) -> list[tuple[Params, float]]:
        ch = self._prepare(ctxs, starts)
        N = len(ch.steps)
        # per-client fields are sentinels: a vectorizable penalty must not read them (module docstring)
        self._cur["ctx"] = ClientContext(cid=-1, round=ctxs[0].round, n_samples=-1, steps=-1, lr=ctxs[0].lr,
                                         first_visit=False, state=MappingProxyType({}))  # type: ignore[arg-type]
        self._cur["shared"], self._cur["global"] = ch.shared, self.engine.global_params
        self.model.train()
        if self.static and not ch.frozen:
            loss_sum = self._run_static(ch)
        else:
            loss_sum = torch.zeros(N, dtype=torch.float64, device=self.device)
            steps = torch.tensor(ch.steps)
            for t in range(ch.steps[0]):
                active = int((steps > t).sum())  # clients are sorted by K_i: the active ones are a prefix
                for members, width, masked in self._groups(ch.cnt[:active, t].tolist()):
                    lo, hi = members[0], members[-1] + 1
                    sel = slice(lo, hi) if hi - lo == len(members) else torch.tensor(members, device=self.device)
                    losses = self._step(ch, t, sel, width, masked)
                    loss_sum[sel] += losses.detach().double() * ch.cnt[members, t].to(self.device, torch.float64)
        means = (loss_sum.cpu() / ch.cnt.sum(1).clamp_min(1).double()).tolist()
        for i in sorted(range(N), key=lambda i: ch.pos[i]):  # the first bad client in the caller's order
            if not math.isfinite(means[i]):
                c = ch.ctxs[i]
                raise NonFiniteLossError(
                    f"Training loss became {means[i]} for client {c.cid} in round {c.round + 1} "
                    f"(strategy {self.strategy.name!r}, lr {c.lr}). Lower the learning rate or the regularization "
                    f"weight (mu), or check the dataset's normalization.")
        out: list[tuple[Params, float]] = [None] * N  # type: ignore[list-item]
        for i in range(N):
            params: Params = {}
            for k in self.state_names:
                src = ch.train[k] if k in ch.train else ch.bufs.get(k)
                params[k] = (src[i] if src is not None else ch.starts[i][k]).detach().clone()
            out[ch.pos[i]] = (params, means[i])
        return out

    def _groups(self, sizes: list[int]) -> list[tuple[list[int], int, bool]]:
        """How the active clients (``sizes``: their real batch sizes) split into vmapped calls at one step, as
        (members, batch width, masked). "exact": one group per distinct size, unmasked. "padded": the full
        batches together, and the ragged ones together, padded to the largest of them and masked."""
        B = self.cfg.batch_size
        if self.mode == "exact":
            return [([i for i, s in enumerate(sizes) if s == w], w, False) for w in sorted(set(sizes), reverse=True)]
        full = [i for i, s in enumerate(sizes) if s == B]
        rag = [i for i, s in enumerate(sizes) if s != B]
        out = [(full, B, False)] if full else []
        if rag:
            widths = {sizes[i] for i in rag}
            out.append((rag, max(widths), len(widths) > 1))
        return out

    def _step(self, ch: _Chunk, t: int, sel: slice | Tensor, width: int, masked: bool) -> Tensor:
        """One optimizer step at global step ``t`` for the clients ``sel`` (a slice, or an index tensor, into the
        chunk), each on the first ``width`` samples of its batch; ``masked``: some have fewer (padding masked).
        Returns the per-client losses."""
        eng = self.engine
        if isinstance(sel, slice):
            take: Callable[[Tensor], Tensor] = lambda v: v[sel]  # noqa: E731  (views: updates land in place)
        else:
            take = lambda v: _gather(v, sel)  # noqa: E731
        idx = take(ch.idx[:, t])[:, :width]
        n = idx.shape[0]
        flat = idx.reshape(-1)
        x = eng.data.x_train[flat]
        if ch.aug:
            x = apply_augment(x, eng.augment, {k: take(v[:, t])[:, :width].reshape(-1) for k, v in ch.aug.items()},
                              fill=eng.data.pad_fill)
        x = x.unflatten(0, (n, width))
        y = eng.data.y_train[flat].view(n, width)
        mask = None
        if masked:
            cnt = take(ch.cnt[:, t].to(self.device))
            mask = (torch.arange(width, device=self.device)[None, :] < cnt[:, None]).to(x.dtype)

        names = list(ch.train)
        leaves = {k: take(ch.train[k]).detach().requires_grad_(True) for k in names}
        bufs = {k: take(v) for k, v in ch.bufs.items()}  # slice views: BatchNorm updates the stack in place
        frozen = {k: take(v) for k, v in ch.frozen.items()}
        refs = self._references(ch, take, x)
        if masked and not self.compile:  # per-client convs skip the padding rows (CPU)
            self._rows[0] = tuple(ch.cnt[:, t][sel if isinstance(sel, slice) else sel.cpu()].tolist())
        try:
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.amp):
                losses = self._loss_fn(masked)(leaves, bufs, frozen, x, y, mask, refs)
            grads = torch.autograd.grad(losses.sum(), [leaves[k] for k in names], allow_unused=True)
        finally:
            self._rows[0] = None
        grads = [torch.zeros_like(leaves[k]) if g is None else g for k, g in zip(names, grads)]
        params = [leaves[k].detach() for k in names]
        lr = ch.lr if not isinstance(ch.lr, Tensor) else take(ch.lr)
        h = self.hyper
        with torch.no_grad():
            if self.kind == "sgd":
                mom = ch.opt["momentum_buffer"]
                new_p, new_b = sgd_step(params, grads, [None if b is None else take(b) for b in mom], lr=lr,
                                        momentum=h["momentum"], weight_decay=h["weight_decay"])
                for j, k in enumerate(names):
                    _write(ch.train[k], sel, new_p[j])
                    if new_b[j] is not None:
                        if mom[j] is None:
                            mom[j] = torch.zeros_like(ch.train[k])
                        _write(mom[j], sel, new_b[j])
            else:
                m, v = ch.opt["exp_avg"], ch.opt["exp_avg_sq"]
                new_p, new_m, new_v = adam_step(params, grads, [take(a) for a in m], [take(a) for a in v],
                                                step=t + 1, lr=lr, beta1=h["betas"][0], beta2=h["betas"][1],
                                                eps=h["eps"], weight_decay=h["weight_decay"])
                for j, k in enumerate(names):
                    _write(ch.train[k], sel, new_p[j])
                    _write(m[j], sel, new_m[j])
                    _write(v[j], sel, new_v[j])
            if not isinstance(sel, slice):
                for k, b in bufs.items():  # gathered copies: write the running statistics back
                    ch.bufs[k].index_copy_(0, sel, b)
        return losses

    # ---------------------------------------------------------------------------- static steps, CUDA graphs
    def _static_unsupported(self, capture: bool = True) -> str:
        """Why the static path cannot run this engine ("" if it can); ``capture``: also require CUDA."""
        if self.mode != "padded":
            return "they need padded batches: no BatchNorm buffers, taps or reference models"
        if self.kind != "sgd":
            return "only SGD is captured"
        if self.compile:
            return "compile=True and cuda_graph=True exclude each other"
        if capture and self.device.type != "cuda":
            return f"they need a CUDA device, not {self.device.type!r}"
        return ""

    def _static_for(self, ch: _Chunk) -> "_Static":
        """The fixed-address state for a chunk of ``N`` clients (made, and on CUDA captured, once per ``N``)."""
        N = len(ch.steps)
        S = self._statics.get(N)
        if S is not None:
            return S
        dev, B = self.device, self.cfg.batch_size
        train = {k: torch.empty_like(v) for k, v in ch.train.items()}  # the model's memory format
        S = _Static(train=train,
                    mom=[torch.zeros_like(v) for v in train.values()] if self.hyper["momentum"] != 0 else [],
                    glob={k: torch.empty_like(v) for k, v in self.engine.global_params.items()},
                    shared={k: torch.empty_like(v) for k, v in ch.shared.items()},
                    idx=torch.zeros((N, B), dtype=torch.long, device=dev),
                    cnt=torch.zeros(N, dtype=torch.long, device=dev),
                    aug={k: torch.empty_like(v[:, 0]) for k, v in ch.aug.items()},
                    lr=torch.empty(N, dtype=next(iter(train.values())).dtype, device=dev),
                    loss=torch.zeros(N, dtype=torch.float64, device=dev),
                    fill=self.engine.data.pad_fill)  # a property that copies to the device: not inside a capture
        self._statics[N] = S
        if self.capture:
            self._load_static(S, ch)
            self._load_step(S, ch, ch.cnt.to(dev), 0)
            try:
                S.graph = _capture(lambda: self._static_step(S), dev)
            except Exception as e:  # noqa: BLE001 — any capture failure: run the same step eagerly
                self.capture = False
                print(f"fedlib: CUDA graph capture failed ({type(e).__name__}: {e}); running the static steps eagerly.")
        return S

    def _load_static(self, S: "_Static", ch: _Chunk) -> None:
        """Copy a chunk's starting state into the fixed addresses (fresh optimizer state, zero loss)."""
        with torch.no_grad():
            for k, v in ch.train.items():
                S.train[k].copy_(v)
            for b in S.mom:
                b.zero_()  # m·0 + d = d exactly: torch.optim.SGD's first step (buffer = d)
            for k, v in self.engine.global_params.items():
                S.glob[k].copy_(v)
            for k, v in ch.shared.items():
                S.shared[k].copy_(v)
            if isinstance(ch.lr, Tensor):
                S.lr.copy_(ch.lr)
            else:
                S.lr.fill_(ch.lr)
            S.loss.zero_()

    @staticmethod
    def _load_step(S: "_Static", ch: _Chunk, cnt: Tensor, t: int) -> None:
        S.idx.copy_(ch.idx[:, t])
        S.cnt.copy_(cnt[:, t])
        for k, v in ch.aug.items():
            S.aug[k].copy_(v[:, t])

    def _run_static(self, ch: _Chunk) -> Tensor:
        """Train the chunk with fixed-shape steps (replayed from a CUDA graph where captured); returns each
        client's summed training loss (the eager loop's ``loss_sum``)."""
        # the context the penalty sees (a captured graph keeps the one of its capture: no per-round values)
        self._cur["ctx"] = ClientContext(cid=-1, round=-1, n_samples=-1, steps=-1, lr=math.nan, first_visit=False,
                                         state=MappingProxyType({}))  # type: ignore[arg-type]
        S = self._static_for(ch)
        self._load_static(S, ch)
        cnt = ch.cnt.to(self.device)
        for t in range(ch.steps[0]):
            self._load_step(S, ch, cnt, t)
            if S.graph is not None and self.capture:
                S.graph.replay()
            else:
                self._static_step(S)
        with torch.no_grad():
            for k, v in S.train.items():
                ch.train[k].copy_(v)
        return S.loss.clone()

    def _static_step(self, S: "_Static") -> None:
        """One fixed-shape SGD step of every client in ``S`` (module docstring, "Static steps"). No host
        synchronization: this is what a CUDA graph captures."""
        eng, dev = self.engine, self.device
        N, B = S.idx.shape
        flat = S.idx.reshape(-1)
        x = eng.data.x_train[flat]
        if S.aug:
            x = apply_augment(x, eng.augment, {k: v.reshape(-1) for k, v in S.aug.items()}, fill=S.fill)
        x = x.unflatten(0, (N, B))
        y = eng.data.y_train[flat].view(N, B)
        mask = (torch.arange(B, device=dev)[None, :] < S.cnt[:, None]).to(x.dtype)
        names = list(S.train)
        leaves = {k: S.train[k].detach().requires_grad_(True) for k in names}
        self._cur["shared"], self._cur["global"] = S.shared, S.glob  # the fixed addresses a capture records
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=self.amp, cache_enabled=False):
            losses = self._loss_fn(True)(leaves, {}, {}, x, y, mask, {})
        grads = torch.autograd.grad(losses.sum(), [leaves[k] for k in names], allow_unused=True)
        active = S.cnt > 0
        params = [S.train[k] for k in names]
        grads = [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]
        with torch.no_grad():
            # zero momentum buffers, not None: m·0 + d = d is SGD's first step exactly, in one captured shape
            new_p, new_b = sgd_step(params, grads, S.mom or [None] * len(params), lr=S.lr,
                                    momentum=self.hyper["momentum"], weight_decay=self.hyper["weight_decay"])
            for p, b, np_, nb in zip(params, S.mom or [None] * len(params), new_p, new_b):
                on = active.view(-1, *([1] * (p.dim() - 1)))  # finished clients keep their state
                p.copy_(torch.where(on, np_, p))
                if b is not None:
                    b.copy_(torch.where(on, nb, b))
            S.loss.add_(torch.where(active, losses.detach().double() * S.cnt.double(), 0.0))

    @torch.no_grad()
    def _references(self, ch: _Chunk, take: Callable[[Tensor], Tensor], x: Tensor) -> dict[str, list[Tensor]]:
        """The reference models' taps on each client's batch (eval mode, no gradient)."""
        refs: dict[str, list[Tensor]] = {}
        n, b = x.shape[:2]
        for r in self.references:
            if r == "global":  # shared parameters, per-sample ops in eval mode: fold the clients into the batch
                _, out = functional_call(self.ref_model, self.engine.global_params, (x.flatten(0, 1),),
                                         {"taps": self.taps})
                refs[r] = [o.unflatten(0, (n, b)) for o in out]
            elif r == "prev":
                prev = {k: take(v) for k, v in ch.prev.items()}  # type: ignore[union-attr]
                ref = self.ref_model
                refs[r] = list(vmap(lambda p, xi: functional_call(ref, p, (xi,), {"taps": self.taps})[1])(prev, x))
            else:
                raise ValueError(f"Unknown reference model {r!r}; valid: 'global', 'prev'.")
        return refs

    def _loss_fn(self, masked: bool) -> Callable:
        """vmap over clients of one client's loss: cross-entropy (masked mean if ``masked``) + the strategy's
        penalty. The chunk-level ctx and the shared non-trained parameters are read from ``self._cur``."""
        if masked in self._loss_fns:
            return self._loss_fns[masked]
        model, strat, taps, eng, cur = self.model, self.strategy, self.taps, self.engine, self._cur

        def client_loss(train: Params, bufs: Params, frozen: Params, x: Tensor, y: Tensor, mask: Tensor | None,
                        refs: dict[str, list[Tensor]]) -> Tensor:
            params = {**cur["shared"], **frozen, **train, **bufs}
            if taps:
                logits, tap_out = functional_call(model, params, (x,), {"taps": taps})
            else:
                logits, tap_out = functional_call(model, params, (x,)), []
            if logits.dtype in (torch.float16, torch.bfloat16):
                logits = logits.float()
            if mask is None:
                loss = F.cross_entropy(logits, y)
            else:
                # clamp: a client with no real sample this step (static path) has loss 0, not 0/0
                loss = (F.cross_entropy(logits, y, reduction="none") * mask).sum() / mask.sum().clamp_min(1)
            extra = strat.penalty(cur["ctx"], train, cur.get("global", eng.global_params), tap_out, refs, y)
            return loss if extra is None else loss + extra

        fn = vmap(client_loss, in_dims=(0, 0, 0, 0, 0, 0 if masked else None, 0))
        if self.compile:
            # one graph per distinct (active clients, batch width): ragged last batches and clients finishing at
            # different steps give a few dozen shapes per run, more than dynamo's default limit of 8 (after which it
            # silently runs eagerly)
            import torch._dynamo as dynamo

            dynamo.config.recompile_limit = max(dynamo.config.recompile_limit, 256)
            fn = torch.compile(fn, dynamic=False)
        self._loss_fns[masked] = fn
        return fn


def _gather(v: Tensor, sel: Tensor) -> Tensor:
    """``v.index_select(0, sel)`` whose slices keep ``v``'s strides (index_select alone returns a contiguous tensor,
    which would hand channels_last conv weights to oneDNN as NCHW: mixed formats, ~3x slower convs on the CPU)."""
    if v.dim() < 2 or not _dense(v):
        return v.index_select(0, sel)
    out = torch.empty_strided((len(sel), *v.shape[1:]), v.stride(), dtype=v.dtype, device=v.device)
    return torch.index_select(v, 0, sel, out=out)


def _write(dst: Tensor, sel: slice | Tensor, value: Tensor) -> None:
    """``dst[sel] = value`` for a slice or an index tensor along the client dimension."""
    if isinstance(sel, slice):
        dst[sel].copy_(value)
    else:
        dst.index_copy_(0, sel, value)
