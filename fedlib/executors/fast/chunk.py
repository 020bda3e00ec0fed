"""Chunks of clients for the vectorized executor: what one chunk trains on, stacked, and how many
clients fit.

:func:`prepare_chunk` turns a list of jobs into a :class:`Chunk`, given a :class:`ChunkSpec` (what
it needs of the executor, explicitly: the task, the device, the model's state names by role and
their memory formats): every client's batch indices, real batch sizes and augmentation draws for
every step (from :func:`fedlib.schedule.epoch_plan`, so the batches are the sequential executor's),
its parameters stacked along a leading client dimension in the model's memory formats, its declared
reference models and tensors (shared when every client passed the same object, else stacked), its
update corrections and the functional optimizer's state. Clients are sorted by their number of steps
(descending), so the clients still active at any step are a prefix of the chunk.

:func:`auto_chunk_size` (CUDA, ``chunk_size=None``): ``FEDLIB_VEC_CHUNK_MEM`` (default 0.6) of the
free memory over one client's footprint, measured once per spec with one probe training step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, vmap

from fedlib.local import ClientContext, ClientJob, LocalTask
from fedlib.params import Params
from fedlib.schedule import epoch_plan, num_batches
from fedlib.executors.fast.layout import stack_as
from fedlib.executors.refcache import RefTaps, build_ref_taps

__all__ = ["Chunk", "ChunkSpec", "prepare_chunk", "chunk_ctx", "auto_chunk_size"]


@dataclass
class ChunkSpec:
    """What building a chunk needs, and what is kept across rounds: the task (the executor sets the
    round's), the device, the model the forward runs on, the model's state names by role with their
    memory formats, and two caches (each client's sample indices on the CPU; the clients per chunk
    once measured on CUDA)."""

    task: LocalTask
    device: torch.device
    model: nn.Module
    layout: Params  # the model's state_dict: each stacked tensor keeps its slice's memory format
    trainable: list[str]
    nontrain: list[str]  # parameters not trained (shared, or stacked where clients differ)
    buffer_names: list[str]
    chunk_mem: float = 0.6  # FEDLIB_VEC_CHUNK_MEM: the share of free CUDA memory chunks may take
    cpu_indices: dict[int, Tensor] = field(default_factory=dict)
    auto_size: int | None = None

    @property
    def state_names(self) -> list[str]:
        return list(self.layout)


@dataclass
class Chunk:
    """The state of one chunk of clients while it trains, sorted by number of steps (descending)."""

    ctxs: list[ClientContext]
    starts: list[Params]
    pos: list[int]  # position of each (sorted) client in the caller's list
    steps: list[int]  # K_i
    idx: Tensor  # (N, Kmax, B) data indices per step; padding repeats a valid index
    pos_in_client: Tensor  # (N, Kmax, B) the same samples' positions in each client's index list
    cnt: Tensor  # (N, Kmax) real batch sizes (0 once a client is done), on the CPU
    aug: dict[str, Tensor]  # augmentation draws (N, Kmax, B)
    train: dict[str, Tensor]  # stacked trainable parameters (N, ...)
    bufs: dict[str, Tensor]  # stacked buffers (BatchNorm running statistics)
    frozen: dict[str, Tensor]  # stacked non-trained parameters that differ between clients
    # non-trained parameters every client shares (the same tensor object in every start)
    shared: Params
    refs: dict[str, Params]  # reference models shared by the chunk
    refs_stacked: dict[str, dict[str, Tensor]]  # reference models that differ per client, stacked
    tensors: dict[str, Tensor]  # declared tensors shared by the chunk
    tensors_stacked: dict[str, Tensor]  # declared tensors that differ per client, stacked
    corr: dict[str, Tensor]  # per-client update corrections (N, ...) by trainable name
    lr: float | Tensor
    opt: dict[str, list[Any]] = field(default_factory=dict)
    # reference taps computed once for the chunk (fedlib.executors.refcache)
    ref_taps: RefTaps | None = None
    offsets: Tensor | None = None  # (N,) each client's first row in ``ref_taps``


def split_shared(items: list[Any]) -> bool:
    """Whether every client passed the very same object (then it is shared, not stacked)."""
    return all(it is items[0] for it in items)


def _indices(spec: ChunkSpec, cid: int) -> Tensor:
    if cid not in spec.cpu_indices:
        spec.cpu_indices[cid] = spec.task.client_indices[cid].detach().cpu().long()
    return spec.cpu_indices[cid]


def prepare_chunk(spec: ChunkSpec, jobs: list[ClientJob]) -> Chunk:
    """Every batch index, real batch size and augmentation draw of the chunk, and its stacked
    state."""
    task, dev = spec.task, spec.device
    B, E = task.batch_size, task.epochs
    steps = [E * num_batches(j.ctx.n_samples, B, task.drop_last) for j in jobs]
    # stable: ties keep the caller's order
    order = sorted(range(len(jobs)), key=lambda i: -steps[i])
    jobs, steps = [jobs[i] for i in order], [steps[i] for i in order]
    N, Kmax = len(jobs), max(steps)
    idx = torch.zeros((N, Kmax, B), dtype=torch.long)
    pos = torch.zeros((N, Kmax, B), dtype=torch.long)
    cnt = torch.zeros((N, Kmax), dtype=torch.long)
    aug: dict[str, Tensor] = {}
    for i, j in enumerate(jobs):
        c = j.ctx
        ix = _indices(spec, c.cid)
        n = len(ix)
        nb = num_batches(n, B, task.drop_last)
        if nb == 0:
            continue
        used = min(n, nb * B)  # drop_last drops the tail
        pad = nb * B - used
        sizes = torch.full((nb,), B, dtype=torch.long)
        sizes[-1] = used - (nb - 1) * B
        for e in range(E):
            o, draws = epoch_plan(n, task.augment, task.seed, c.round, c.cid, e, task.stream)
            o = o[:used]
            rows = slice(e * nb, (e + 1) * nb)
            idx[i, rows] = torch.cat([ix[o], ix[o[:1]].expand(pad)]).view(nb, B)
            pos[i, rows] = torch.cat([o, o[:1].expand(pad)]).view(nb, B)
            cnt[i, rows] = sizes
            for k, v in draws.items():
                if k not in aug:
                    aug[k] = torch.zeros((N, Kmax, B), dtype=v.dtype)
                aug[k][i, rows] = torch.cat([v[:used], v[:1].expand(pad)]).view(nb, B)

    def stack(name: str, src: list[Params]) -> Tensor:
        return stack_as([s[name] for s in src], spec.layout[name])

    starts = [j.start for j in jobs]
    train = {k: stack(k, starts) for k in spec.trainable}
    frozen = {
        k: stack(k, starts)
        for k in spec.nontrain if not split_shared([s[k] for s in starts])
    }
    refs, refs_stacked = {}, {}
    for r in task.needs.references:
        ps = [j.refs[r] for j in jobs]
        if split_shared(ps):
            refs[r] = ps[0]
        else:
            refs_stacked[r] = {k: stack(k, ps) for k in spec.state_names}
    tensors, tensors_stacked = {}, {}
    for name in task.needs.tensors:
        ts = [j.tensors[name] for j in jobs]
        if split_shared(ts):
            tensors[name] = ts[0]
        else:
            tensors_stacked[name] = torch.stack(ts)
    lrs = [float(j.ctx.lr) for j in jobs]
    ch = Chunk(ctxs=[j.ctx for j in jobs], starts=starts, pos=order, steps=steps, idx=idx.to(dev),
               pos_in_client=pos.to(dev), cnt=cnt,
               aug={k: v.to(dev) for k, v in aug.items()}, train=train,
               bufs={k: stack(k, starts) for k in spec.buffer_names}, frozen=frozen,
               shared={k: starts[0][k] for k in spec.nontrain if k not in frozen}, refs=refs,
               refs_stacked=refs_stacked, tensors=tensors, tensors_stacked=tensors_stacked, corr={},
               lr=lrs[0] if len(set(lrs)) == 1 else torch.tensor(lrs, device=dev))
    ch.corr = _corrections(task, ch)
    if task.needs.references:
        ch.ref_taps = build_ref_taps(task, [j.refs for j in jobs],
                                     [task.client_indices[j.ctx.cid] for j in jobs])
        if ch.ref_taps is not None:
            ch.offsets = torch.tensor(ch.ref_taps.offsets, device=dev)
    ch.opt = task.optimizer.init_state(list(train.values()))
    return ch


def _corrections(task: Any, ch: Chunk) -> dict[str, Tensor]:
    """``task.correction`` of every client of the chunk, stacked (N, ...) by trainable name."""
    corr = task.correction
    if corr is None:
        return {}
    ctx = chunk_ctx(ch.ctxs)
    if ch.tensors_stacked:
        out = vmap(lambda t: corr(ctx, {**ch.tensors, **t}) or {})(ch.tensors_stacked)
    else:
        one = corr(ctx, dict(ch.tensors)) or {}
        out = {k: v.expand(len(ch.steps), *v.shape) for k, v in one.items()}
    return {k: v for k, v in out.items() if k in ch.train}


def chunk_ctx(ctxs: list[ClientContext], rnd: int | None = None,
              lr: float | None = None) -> ClientContext:
    """The context a vmapped penalty sees: real round and lr, per-client fields as sentinels."""
    return ClientContext(cid=-1, round=ctxs[0].round if rnd is None else rnd, n_samples=-1,
                         steps=-1, lr=ctxs[0].lr if lr is None else lr, first_visit=False,
                         state=MappingProxyType({}))  # type: ignore[arg-type]


def auto_chunk_size(spec: ChunkSpec, jobs: list[ClientJob]) -> int:
    """Clients per chunk on CUDA: ``spec.chunk_mem`` of the free memory over one client's footprint
    (the peak of one probe training step, plus four copies of its trainable parameters for the
    stacked parameters, gradients and optimizer state). Measured once per spec."""
    if spec.auto_size is None:
        task, dev = spec.task, spec.device
        torch.cuda.synchronize(dev)
        base = torch.cuda.memory_allocated(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        start = jobs[0].start
        probe = {k: v.detach().clone() for k, v in start.items()}
        for k in spec.trainable:
            probe[k].requires_grad_(True)
        x = task.data.x_train[: task.batch_size]
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=task.amp):
            out = functional_call(spec.model, probe, (x, ),
                                  {"taps": task.needs.taps} if task.needs.taps else {})
        logits = out[0] if task.needs.taps else out
        F.cross_entropy(logits.float(), task.data.y_train[: task.batch_size]).backward()
        torch.cuda.synchronize(dev)
        act = torch.cuda.max_memory_allocated(dev) - base
        del probe, out, logits
        param_bytes = sum(start[k].numel() * start[k].element_size() for k in spec.state_names)
        free, _ = torch.cuda.mem_get_info(dev)
        spec.auto_size = max(1, int(spec.chunk_mem * free // max(act + 4 * param_bytes, 1)))
    return min(len(jobs), spec.auto_size)
