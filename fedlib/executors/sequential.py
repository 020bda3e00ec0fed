"""The sequential executor: one client after another on one reused model and ``torch.optim``
optimizer.

It is the reference the vectorized executor is tested against, and the executor for everything that
cannot be vectorized (package optimizers, persistent optimizer state, strategies whose step is not
pure tensor code). One model (the task's) and one optimizer per trainable set are reused for every
client and round: parameters are copied in, optimizer state is reset (or loaded from the job, for
persistent state; :meth:`OptimizerSpec.reset`, ``load_state_dict`` and ``state_dict`` also carry
state package optimizers keep in attributes). The model is called directly (its own tensors, no
``functional_call`` swapping each tensor with itself every step). The result copies only what
training changes (the trainable parameters and the buffers): the other tensors come back as the very
tensors the client started from. (Every tensor is still copied into the model: BatchNorm's in-place
updates and package optimizers' ``p.data`` steps leave no trace in version counters, so "already
loaded" is not knowable cheaply.) Each local epoch starts by setting the group's rate
(:meth:`OptimizerSpec.epoch_lr`: a per-epoch StepLR, epochs counted over the run as ``round · epochs
+ epoch``) and ends with :meth:`OptimizerSpec.end_epoch` (e.g. rmsgd's ``epoch_step``). Losses are
checked for NaN once per client, not once per step.
"""

from __future__ import annotations

import math
from typing import Iterator

import torch
from torch import Tensor

from fedlib.augment import apply_augment
from fedlib.local import ClientJob, ClientResult, LocalTask, forward, local_loss
from fedlib.params import load_params_
from fedlib.schedule import epoch_plan, non_finite_loss, num_batches
from fedlib.executors.refcache import build_ref_taps

__all__ = ["SequentialExecutor", "batches"]


def batches(task: LocalTask, cid: int, rnd: int, epoch: int) -> Iterator[tuple[Tensor, Tensor]]:
    """Client ``cid``'s mini-batches for one epoch: index lookups into the on-device tensors."""
    for x, y, _, _ in _batches(task, cid, rnd, epoch):
        yield x, y


def _batches(task: LocalTask, cid: int, rnd: int, epoch: int
             ) -> Iterator[tuple[Tensor, Tensor, Tensor, Tensor | None]]:
    """:func:`batches`, with each sample's position in the client's index list and its flip draw."""
    idx = task.client_indices[cid]
    data, dev = task.data, idx.device
    pos, aug = epoch_plan(len(idx), task.augment, task.seed, rnd, cid, epoch, task.stream)
    pos = pos.to(dev)
    order = idx[pos]
    aug = {k: v.to(dev) for k, v in aug.items()}
    B = task.batch_size
    for b in range(num_batches(len(idx), B, task.drop_last)):
        sl = slice(b * B, (b + 1) * B)
        x = data.x_train[order[sl]]
        if aug:
            x = apply_augment(x, task.augment, {k: v[sl]
                                                for k, v in aug.items()}, fill=data.pad_fill)
        yield x, data.y_train[order[sl]], pos[sl], aug["flip"][sl] if "flip" in aug else None


class SequentialExecutor:
    """Trains clients one at a time; ``executor(task, jobs)`` returns one :class:`ClientResult` per
    job."""

    name = "sequential"

    def __init__(self, task: LocalTask | None = None) -> None:
        self._opts: dict[tuple, torch.optim.Optimizer] = {}

    def __call__(self, task: LocalTask, jobs: list[ClientJob]) -> list[ClientResult]:
        return [self.train(task, job) for job in jobs]

    def _optimizer(self, task: LocalTask) -> torch.optim.Optimizer:
        """One optimizer per (model, trainable set, optimizer description), reused across clients
        and rounds."""
        key = (id(task.model), task.trainable, repr(task.optimizer))
        if key not in self._opts:
            named = dict(task.model.named_parameters())
            self._opts[key] = task.optimizer.build([named[n] for n in task.trainable])
        return self._opts[key]

    def train(self, task: LocalTask, job: ClientJob) -> ClientResult:
        """Local training of one client from ``job.start``."""
        model, ctx, needs = task.model, job.ctx, task.needs
        trainable = set(task.trainable)
        for n, p in model.named_parameters():
            p.requires_grad_(n in trainable)
        opt = self._optimizer(task)
        load_params_(model, job.start)
        spec = task.optimizer
        spec.reset(opt)
        if job.opt_state is not None:
            spec.load_state_dict(opt, job.opt_state)
        model.train()
        # the live tensors: gradients and BatchNorm updates land in them
        full = model.state_dict(keep_vars=True)
        live = {n: full[n] for n in task.trainable}
        corr = task.correction(ctx, job.tensors) if task.correction is not None else None
        corr = {k: c for k, c in corr.items() if k in live} if corr else None
        cached = build_ref_taps(task, [job.refs],
                                [task.client_indices[ctx.cid]]) if needs.references else None
        loss_sum = torch.zeros((), device=next(iter(full.values())).device)
        seen = 0
        for epoch in range(task.epochs):
            lr = spec.epoch_lr(ctx.lr, ctx.round * task.epochs + epoch)
            for group in opt.param_groups:
                group["lr"] = lr
            for x, y, pos, flip in _batches(task, ctx.cid, ctx.round, epoch):
                refs = {}
                if cached is not None:
                    refs = cached.lookup(pos, flip)
                elif needs.references:
                    with torch.no_grad():
                        refs = {r: forward(task.ref_model, job.refs[r], x, needs.taps, False)[1]
                                for r in needs.references}
                loss = local_loss(task, ctx, model, None, live, x, y, None, refs, job.tensors,
                                  task.global_params)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                if corr:
                    with torch.no_grad():
                        for k, c in corr.items():
                            live[k].sub_(c, alpha=lr)
                loss_sum += loss.detach() * len(y)
                seen += len(y)
            spec.end_epoch(opt)
        mean_loss = float(loss_sum) / max(seen, 1)
        if not math.isfinite(mean_loss):
            raise non_finite_loss(mean_loss, ctx.cid, ctx.round, task.what, ctx.lr)
        opt_state = spec.state_dict(opt) if needs.persistent_optimizer else None
        params = {n for n, _ in model.named_parameters()}
        # what training moved: trainable parameters and buffers
        changed = trainable | (full.keys() - params)
        out = {k: t.detach().clone() if k in changed else job.start[k] for k, t in full.items()}
        return ClientResult(out, mean_loss, opt_state)
