"""The client-vectorized executor: many clients' local training as one batched computation.

``VectorizedExecutor(task, device)(task, jobs)`` returns exactly what the sequential executor
returns — each client's trained ``Params`` (parameters *and* buffers) and its mean training loss —
but trains a chunk of clients together: their parameters are stacked along a leading client
dimension, the one loss of :func:`fedlib.local.local_loss` runs under ``torch.func.vmap`` and one
``backward`` of the summed per-client losses gives every client's gradient (clients are independent,
so ∂(Σ_j L_j)/∂θ_i = ∂L_i/∂θ_i). The optimizer is the task's :class:`~fedlib.optim.OptimizerSpec`
run as pure functional steps over the stacked tensors.

Same batches as the sequential executor
    Every client-epoch's order and augmentation draws come from :func:`fedlib.schedule.epoch_plan`
    (CPU, keyed by ``(seed, round, client, epoch)``), cut into :func:`fedlib.schedule.num_batches`
    batches of ``batch_size``. Client ``i`` takes ``K_i = epochs · nb_i`` steps; at global step
    ``t`` it is active iff ``t < K_i`` and uses epoch ``t // nb_i``, batch ``t % nb_i``. Clients are
    sorted by ``K_i`` (descending) inside a chunk, so the active clients are always a prefix and are
    addressed by views (no gathers). An inactive client gets no update at all (no weight decay, no
    momentum change). Since every client starts at step 0, an active client at global step ``t`` has
    taken exactly ``t`` steps: the per-client step count (SGD's first-step buffer, Adam's bias
    correction) is ``t + 1`` for every active client.

Two batching modes (chosen per task, see :attr:`VectorizedExecutor.mode`)
    * ``"padded"`` (models without buffers, steps without taps/references): each client's batch is
      padded to ``batch_size`` with a mask (as fedjax does for uneven clients); the loss is
      Σ mask·CE / Σ mask, whose gradient equals the mean over the real samples. One vmapped call per
      step.
    * ``"exact"`` (models with buffers, e.g. BatchNorm; ``Needs.unpadded``): no padding. At each
      step the active clients are grouped by their real batch size and each group runs as one
      vmapped call. BatchNorm batch statistics therefore never see padding, and per-sample penalties
      average over the real samples only. Running statistics are per client (stacked buffers,
      updated in place through ``functional_call``).

Declared inputs, generically
    Reference models (``Needs.references``) and per-client tensors (``Needs.tensors``) arrive with
    each job. One that is the same object for every client of a chunk is *shared* (a reference model
    is then evaluated once on the chunk's batches folded together, in eval mode); otherwise it is
    stacked over clients and vmapped. ``task.correction`` is evaluated once per client and chunk and
    added to every update.

Supported
    Optimizers with a functional step (SGD, Adam), optimizer state reset per client per round;
    vectorizable steps; models without dropout. Anything else: :meth:`VectorizedExecutor.can_run`
    says no and why, and the engine falls back to the sequential executor with a one-line notice.

Chunks
    ``chunk_size`` clients at a time (``None``: all). On CUDA with ``chunk_size=None`` the chunk is
    capped by a memory estimate (one probe step's peak memory per client against the free memory). A
    chunk's batches and stacked state are built by :mod:`fedlib.executors.fast.chunk`.

Static steps and CUDA graphs (on CUDA by default; ``Config.cuda_graph``):
:mod:`fedlib.executors.fast.static`. CPU convolutions: :mod:`fedlib.executors.fast.cpu_conv`. On the
CPU ``executor="auto"`` picks the sequential executor (:meth:`VectorizedExecutor.prefer`).

Opt-in options: ``precision="bf16"`` (forward under autocast; task field), ``compile=True``
(torch.compile of the vmapped loss; one graph per (active clients, batch width) shape),
``FEDLIB_VEC_CHUNK_MEM=0.6`` (fraction of free CUDA memory for the automatic chunk size),
``FEDLIB_CPU_MALLOC=0`` (leave glibc's allocator alone).
"""

from __future__ import annotations

import math
import os
import warnings
from typing import Any, Callable

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap

from fedlib.augment import apply_augment
from fedlib.local import ClientJob, ClientResult, LocalTask, local_loss
from fedlib.params import Params
from fedlib.schedule import non_finite_loss
from fedlib.executors.fast.chunk import Chunk, ChunkSpec, auto_chunk_size, chunk_ctx, prepare_chunk
from fedlib.executors.fast.cpu_conv import per_client_convs
from fedlib.executors.fast.layout import gather, write
from fedlib.executors.fast.memory import keep_freed_memory
from fedlib.executors.fast.static import StaticSteps

__all__ = ["VectorizedExecutor"]

# adaptive_avg_pool2d on channels_last input calls as_strided_, which vmap runs through its
# (correct, slower) fallback; the warning would otherwise print once per process for every ResNet.
warnings.filterwarnings("ignore", message=r".*batching rule for aten::as_strided_.*")




class VectorizedExecutor:
    """Trains a list of clients as one batched computation; same results as the sequential
    executor."""

    name = "vectorized"

    @staticmethod
    def can_run(task: LocalTask) -> tuple[bool, str]:
        """Whether this executor reproduces the sequential one for ``task`` (and if not, why)."""
        if not task.needs.vectorizable:
            return False, f"the local step of {task.what or 'this task'} is not vectorizable"
        if task.needs.persistent_optimizer:
            return False, f"{task.what or 'this task'} keeps optimizer state across rounds"
        ok, why = task.optimizer.functional()
        if not ok:
            return False, why
        for m in task.model.modules():
            if isinstance(m, nn.modules.dropout._DropoutNd):
                return False, "models with dropout (per-client random masks) are not vectorized"
        return True, ""

    @staticmethod
    def prefer(device: torch.device) -> tuple[bool, str]:
        """Whether ``executor="auto"`` should pick this executor: yes on accelerators, no on the
        CPU.

        On the CPU every client's batch (128-512 samples) already keeps the cores busy, so stacking
        clients saves no compute: the two executors run at parity there (``benchmarks/RESULTS.md``)
        and the sequential one, with its smaller memory footprint, is kept.
        ``executor="vectorized"`` still runs it on the CPU."""
        if torch.device(device).type == "cpu":
            return False, ("on the CPU the sequential executor is as fast and uses less memory "
                           "(benchmarks/RESULTS.md)")
        return True, ""

    def __init__(self, task: LocalTask, device: torch.device | str, *,
                 chunk_size: int | None = None, compile: bool = False,
                 cuda_graph: bool | None = None, static: bool | None = None) -> None:
        ok, why = self.can_run(task)
        if not ok:
            raise ValueError(f"VectorizedExecutor cannot run this task: {why}")
        self.device = torch.device(device)
        self.chunk_size, self.compile = chunk_size, bool(compile)
        # The functional forward runs on the task's model (its own parameters are never read) or, on
        # the CPU, on a copy whose convolutions, BatchNorm and Linear layers run per client
        # (fedlib.executors.fast.cpu_conv).
        grouped = os.environ.get("FEDLIB_VEC_CPU_CONV", "per_client") == "grouped"
        per_client = self.device.type == "cpu" and not grouped
        if per_client and os.environ.get("FEDLIB_CPU_MALLOC", "1") != "0":
            keep_freed_memory()
        # padded mode, CPU: the real batch sizes of the group being trained
        self._rows: list = [None]
        self.model = per_client_convs(task.model, self._rows) if per_client else task.model
        self.ref_model = task.ref_model  # shared reference models: clients folded into one batch
        if per_client and task.needs.references:
            self.ref_model_stacked = per_client_convs(task.ref_model, [None])
        else:
            self.ref_model_stacked = task.ref_model
        # what the chunk helpers (fedlib.executors.fast.chunk) read, explicitly; slices are stacked
        # in the model's memory formats (its state_dict)
        trainable = set(task.trainable)
        params = [n for n, _ in task.model.named_parameters()]
        self.spec = ChunkSpec(task, self.device, self.model, task.model.state_dict(),
                              trainable=[n for n in params if n in trainable],
                              nontrain=[n for n in params if n not in trainable],
                              buffer_names=[n for n, _ in task.model.named_buffers()],
                              chunk_mem=float(os.environ.get("FEDLIB_VEC_CHUNK_MEM", "0.6")))
        self.state_names, self.buffer_names = self.spec.state_names, self.spec.buffer_names
        self.mode = "exact" if (self.buffer_names or task.needs.unpadded) else "padded"
        self._loss_fns: dict[bool, Callable] = {}
        # the chunk being trained, as the vmapped loss reads it (loss_fn)
        self.current: dict[str, Any] = {}
        self.steps = StaticSteps(self.spec, self.loss_fn, self.current, mode=self.mode,
                                 compile=self.compile,
                                 want=cuda_graph if static is None else bool(static),
                                 require_cuda=static is None)

    @property
    def task(self) -> LocalTask:
        """The round's task (set by each call)."""
        return self.spec.task

    @property
    def static(self) -> bool:
        return self.steps.enabled

    @property
    def capture(self) -> bool:
        return self.steps.capture

    # --------------------------------------------------------------------------------------- public
    def __call__(self, task: LocalTask, jobs: list[ClientJob]) -> list[ClientResult]:
        if not jobs:
            return []
        self.spec.task = task
        size = self.chunk_size
        if size is None:
            size = auto_chunk_size(self.spec, jobs) if self.device.type == "cuda" else len(jobs)
        results: list[ClientResult] = []
        for lo in range(0, len(jobs), max(1, int(size))):
            results += self._train_chunk(jobs[lo:lo + size])
        return results


    # ------------------------------------------------------------------------------------- training
    def _train_chunk(self, jobs: list[ClientJob]) -> list[ClientResult]:
        ch = prepare_chunk(self.spec, jobs)
        N = len(ch.steps)
        self.current.update(task=self.task, ctx=chunk_ctx(ch.ctxs), shared=ch.shared,
                         glob=self.task.global_params, tensors=ch.tensors, amp_cache=True)
        self.model.train()
        # static: one rate
        if self.steps.enabled and not ch.frozen and self.task.optimizer.lr_step is None:
            loss_sum = self.steps.run(ch)
        else:
            loss_sum = torch.zeros(N, dtype=torch.float64, device=self.device)
            steps = torch.tensor(ch.steps)
            for t in range(ch.steps[0]):
                # clients are sorted by K_i: the active ones are a prefix
                active = int((steps > t).sum())
                for members, width, masked in self._groups(ch.cnt[:active, t].tolist()):
                    lo, hi = members[0], members[-1] + 1
                    sel = slice(lo, hi) if hi - lo == len(members) else torch.tensor(
                        members, device=self.device)
                    losses = self._step(ch, t, sel, width, masked)
                    loss_sum[sel] += losses.detach().double() * ch.cnt[members, t].to(
                        self.device, torch.float64)
        means = (loss_sum.cpu() / ch.cnt.sum(1).clamp_min(1).double()).tolist()
        # the first bad client in the caller's order
        for i in sorted(range(N), key=lambda i: ch.pos[i]):
            if not math.isfinite(means[i]):
                c = ch.ctxs[i]
                raise non_finite_loss(means[i], c.cid, c.round, self.task.what, c.lr)
        out: list[ClientResult] = [None] * N  # type: ignore[list-item]
        for i in range(N):
            params: Params = {}
            # what training changed is copied out; the rest is the start's tensor
            for k in self.state_names:
                src = ch.train[k] if k in ch.train else ch.bufs.get(k)
                params[k] = src[i].detach().clone() if src is not None else ch.starts[i][k]
            out[ch.pos[i]] = ClientResult(params, means[i])
        return out

    def _groups(self, sizes: list[int]) -> list[tuple[list[int], int, bool]]:
        """How the active clients (``sizes``: their real batch sizes) split into vmapped calls at
        one step, as (members, batch width, masked). "exact": one group per distinct size, unmasked.
        "padded": the full batches together, and the ragged ones together, padded to the largest of
        them and masked."""
        B = self.task.batch_size
        if self.mode == "exact":
            return [([i for i, s in enumerate(sizes) if s == w], w, False)
                    for w in sorted(set(sizes), reverse=True)]
        full = [i for i, s in enumerate(sizes) if s == B]
        rag = [i for i, s in enumerate(sizes) if s != B]
        out = [(full, B, False)] if full else []
        if rag:
            widths = {sizes[i] for i in rag}
            out.append((rag, max(widths), len(widths) > 1))
        return out

    def _step(self, ch: Chunk, t: int, sel: slice | Tensor, width: int, masked: bool) -> Tensor:
        """One optimizer step at global step ``t`` for the clients ``sel`` (a slice, or an index
        tensor, into the chunk), each on the first ``width`` samples of its batch; ``masked``: some
        have fewer (padding masked). Returns the per-client losses."""
        task = self.task
        if isinstance(sel, slice):
            take: Callable[[Tensor],
                           Tensor] = lambda v: v[sel]  # noqa: E731  (views: updates land in place)
        else:
            take = lambda v: gather(v, sel)  # noqa: E731
        idx = take(ch.idx[:, t])[:, :width]
        n = idx.shape[0]
        flat = idx.reshape(-1)
        x = task.data.x_train[flat]
        if ch.aug:
            x = apply_augment(x, task.augment,
                              {k: take(v[:, t])[:, :width].reshape(-1)
                               for k, v in ch.aug.items()}, fill=task.data.pad_fill)
        x = x.unflatten(0, (n, width))
        y = task.data.y_train[flat].view(n, width)
        mask = None
        if masked:
            cnt = take(ch.cnt[:, t].to(self.device))
            mask = (torch.arange(width, device=self.device)[None, :] < cnt[:, None]).to(x.dtype)

        names = list(ch.train)
        leaves = {k: take(ch.train[k]).detach().requires_grad_(True) for k in names}
        # slice views: BatchNorm updates the stack in place
        bufs = {k: take(v) for k, v in ch.bufs.items()}
        frozen = {k: take(v) for k, v in ch.frozen.items()}
        tensors = {k: take(v) for k, v in ch.tensors_stacked.items()}
        if ch.ref_taps is not None:
            rows = take(ch.offsets)[:, None] + take(ch.pos_in_client[:, t])[:, :width]
            flip = take(ch.aug["flip"][:, t])[:, :width] if "flip" in ch.aug else None
            refs = ch.ref_taps.lookup(rows, flip)
        else:
            refs = self._references(ch, take, x)
        if masked and not self.compile:  # per-client convs skip the padding rows (CPU)
            self._rows[0] = tuple(ch.cnt[:,
                                         t][sel if isinstance(sel, slice) else sel.cpu()].tolist())
        try:
            losses = self.loss_fn(masked)(leaves, bufs, frozen, x, y, mask, refs, tensors)
            grads = torch.autograd.grad(losses.sum(), [leaves[k] for k in names], allow_unused=True)
        finally:
            self._rows[0] = None
        grads = [torch.zeros_like(leaves[k]) if g is None else g for k, g in zip(names, grads)]
        params = [leaves[k].detach() for k in names]
        lr = self._lr(ch, t)
        lr = lr if not isinstance(lr, Tensor) else take(lr)
        with torch.no_grad():
            state = {s: [None if b is None else take(b) for b in bs] for s, bs in ch.opt.items()}
            new_p, new_state = task.optimizer.step(params, grads, state, t=t, lr=lr)
            for j, k in enumerate(names):
                p = new_p[j]
                if k in ch.corr:
                    p = p - _per_client(lr, p) * take(ch.corr[k])
                write(ch.train[k], sel, p)
            for s, vals in new_state.items():
                for j, v in enumerate(vals):
                    if v is None:
                        continue
                    if ch.opt[s][j] is None:
                        ch.opt[s][j] = torch.zeros_like(ch.train[names[j]])
                    write(ch.opt[s][j], sel, v)
            if not isinstance(sel, slice):
                for k, b in bufs.items():  # gathered copies: write the running statistics back
                    ch.bufs[k].index_copy_(0, sel, b)
        return losses

    def _lr(self, ch: Chunk, t: int) -> float | Tensor:
        """The rate of every client of the chunk at global step ``t``: the round's, or under a
        per-epoch StepLR (``OptimizerSpec.lr_step``) that of client i's epoch ``t // nb_i``, counted
        over the run as the sequential executor counts it (``round · epochs + epoch``)."""
        spec, E = self.task.optimizer, self.task.epochs
        if spec.lr_step is None:
            return ch.lr
        lrs = [
            spec.epoch_lr(c.lr, c.round * E + min(t * E // max(k, 1), E - 1))
            for c, k in zip(ch.ctxs, ch.steps)
        ]
        return lrs[0] if len(set(lrs)) == 1 else torch.tensor(lrs, device=self.device)

    @torch.no_grad()
    def _references(self, ch: Chunk, take: Callable[[Tensor], Tensor],
                    x: Tensor) -> dict[str, list[Tensor]]:
        """The reference models' taps on each client's batch (eval mode, no gradient)."""
        refs: dict[str, list[Tensor]] = {}
        n, b = x.shape[:2]
        taps = self.task.needs.taps
        for r in self.task.needs.references:
            # shared parameters, per-sample ops in eval mode: fold the clients into the batch
            if r in ch.refs:
                _, out = functional_call(self.ref_model, ch.refs[r], (x.flatten(0, 1), ),
                                         {"taps": taps})
                refs[r] = [o.unflatten(0, (n, b)) for o in out]
            else:
                stacked = {k: take(v) for k, v in ch.refs_stacked[r].items()}
                ref = self.ref_model_stacked
                refs[r] = list(
                    vmap(lambda p, xi: functional_call(ref, p, (xi, ), {"taps": taps})[1])(stacked,
                                                                                           x))
        return refs

    def loss_fn(self, masked: bool) -> Callable:
        """vmap over clients of :func:`fedlib.local.local_loss`. The chunk-level context and
        everything the clients share (task, non-trained parameters, declared tensors, global
        parameters) come from ``self.current``."""
        if masked in self._loss_fns:
            return self._loss_fns[masked]
        model, cur = self.model, self.current

        def client_loss(train: Params, bufs: Params, frozen: Params, x: Tensor, y: Tensor,
                        mask: Tensor | None, refs: dict[str, list[Tensor]],
                        tensors: dict[str, Tensor]) -> Tensor:
            params = {**cur["shared"], **frozen, **train, **bufs}
            return local_loss(cur["task"], cur["ctx"], model, params, train, x, y, mask, refs,
                              {**cur["tensors"], **tensors}, cur["glob"],
                              amp_cache=cur["amp_cache"])

        fn = vmap(client_loss, in_dims=(0, 0, 0, 0, 0, 0 if masked else None, 0, 0))
        if self.compile:
            # one graph per distinct (active clients, batch width): ragged last batches and clients
            # finishing at different steps give a few dozen shapes per run, more than dynamo's
            # default limit of 8
            import torch._dynamo as dynamo

            dynamo.config.recompile_limit = max(dynamo.config.recompile_limit, 256)
            fn = torch.compile(fn, dynamic=False)
        self._loss_fns[masked] = fn
        return fn


def _per_client(lr: float | Tensor, p: Tensor) -> float | Tensor:
    """A learning rate (a float, or one per client) broadcastable against stacked ``p``."""
    return lr if not isinstance(lr, Tensor) else lr.to(p.dtype).view(-1, *([1] * (p.dim() - 1)))
