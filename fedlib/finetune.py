"""Fine-tuning for a personalized evaluation: the learning-rate ladder, the rule that keeps one
model per client, and a fast path that trains a head on its input features computed once.

A client fine-tunes from its evaluation model on its own training split
(:class:`~fedlib.strategies.FineTune`: what, for how many epochs, at which lr). The ladder is ``lr,
lr/10, ..., lr/10^k`` (``k = FineTune.backtrack``); its models are judged by the client's mean
cross-entropy on its whole training split (eval mode, unaugmented), never by a test split.
``FineTune.select``:

* ``"first"``: the first lr whose model does not raise that loss (with ``k = 0``, the one lr,
  whatever it does); none: the client keeps its un-fine-tuned model.
* ``"best"``: every lr of the ladder; the model with the lowest loss (ties: the larger lr), the
  un-fine-tuned one included, so a client whose fine-tuning only hurts keeps its start.

The fast path (:class:`HeadTuner`): when every fine-tuned layer sees only the output of one
main-path tap (``FineTune.features``, FedBABU's head) and the model can run from it
(``FedModel.tail``), nothing in the model behaves differently when training (no BatchNorm, no
dropout), batches are at most flipped and the run is fp32, the body runs once per client (twice with
flips: on the images and on their mirror images) and the head trains on its output: the executor's
batches and flips (:func:`fedlib.schedule.epoch_plan`), optimizer and steps, without the body's
forward pass at every step and every lr. :meth:`HeadTuner.many` trains every (client, lr) job
together: one vmapped gradient and one functional optimizer step a batch for all of them (optimizers
with a functional step).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap

from fedlib.optim import EPOCH_END, OptimizerSpec
from fedlib.params import Params, load_params_
from fedlib.schedule import NonFiniteLossError, epoch_plan, num_batches
from fedlib.strategies.base import SELECTS

__all__ = ["SELECTS", "Tuned", "select", "HeadTuner", "head_path_problem"]

# a fine-tuned model and its training-split loss, or why it is not finite
Tuned = tuple[Params, float] | str
_MODAL = (nn.modules.batchnorm._BatchNorm, nn.modules.dropout._DropoutNd)


def select(rule: str, backtrack: int, lr: float, before: list[float],
           tune: Callable[[list[int], float], list[Tuned]], starts: list[Params],
           why_not_finite: Callable[[int, str, float], str],
           ladder: Callable[[list[int], list[float]], dict[float, list[Tuned]]] | None = None,
           ) -> tuple[list[Params], dict[str, list[float]]]:
    """Each client's kept model by ``rule`` (see the module docstring), and the log: per client the
    lr kept (0.0: un-fine-tuned) and the training-split loss before and after. ``tune(todo, lr)``:
    clients ``todo`` (positions) fine-tuned at ``lr``; ``ladder(todo, lrs)`` (optional, used by
    ``"best"``, which tunes every client at every lr): all of them at once, by lr. A client none of
    whose models is finite raises :class:`NonFiniteLossError` (``why_not_finite(i, what, lowest
    lr)``: its message)."""
    if rule not in SELECTS:
        raise ValueError(f"Unknown fine-tuning selection {rule!r}; valid: {SELECTS}.")
    n = len(starts)
    kept, lrs, after, finite = list(starts), [0.0] * n, list(before), [False] * n
    todo = list(range(n))
    rates = [lr / 10 ** k for k in range(backtrack + 1)]
    ahead = ladder(todo, rates) if rule == "best" and ladder is not None else None
    for k, rate in enumerate(rates):
        failed: list[int] = []
        for i, t in zip(todo, ahead[rate] if ahead is not None else tune(todo, rate)):
            if isinstance(t, str):  # a NaN model would still "score" an accuracy: never keep one
                if k == backtrack and not finite[i]:
                    raise NonFiniteLossError(why_not_finite(i, t, rate))
                failed.append(i)
                continue
            finite[i], (params, loss) = True, t
            if rule == "best":
                if loss < after[i]:
                    kept[i], lrs[i], after[i] = params, rate, loss
            elif backtrack and not loss <= before[i]:
                failed.append(i)
            else:
                kept[i], lrs[i], after[i] = params, rate, loss
        if rule == "first":
            if not failed:
                break
            todo = failed
    return kept, {"lr": lrs, "loss_before": before, "loss_after": after}


def head_path_problem(model: nn.Module, tap: str | None, trainable: tuple[str, ...], augment: Any,
                      precision: str) -> str | None:
    """Why :class:`HeadTuner` cannot fine-tune ``trainable`` on ``model`` exactly as the executor
    would (None: it can)."""
    if tap is None:
        return "the strategy names no feature tap"
    if tap not in getattr(model, "tail_taps", ()):
        return f"{type(model).__name__} cannot run from tap {tap!r}"
    after = set(model.layer_taps[model.layer_taps.index(tap) + 1:])
    if any(n.split(".")[0] not in after for n in trainable):
        return f"a fine-tuned parameter lies before tap {tap!r}"
    if any(isinstance(m, _MODAL) for m in model.modules()):
        return "the model has BatchNorm or dropout"
    if augment not in (None, "none", "flip"):
        return f"training batches are augmented with {augment!r} (only flips have a cached form)"
    return None if precision == "fp32" else f"precision {precision!r}"


class HeadTuner:
    """Fine-tunes a head on the features of its input tap (the module docstring's fast path).

    ``model``: the run's model, reused (its parameters are overwritten); ``client_indices``: each
    client's training indices into ``x`` / ``y``; ``augment``: ``"none"`` or ``"flip"``; ``seed``,
    ``round``, ``stream``: the batches' key, as the executor's."""

    def __init__(self, model: nn.Module, tap: str, trainable: tuple[str, ...], spec: OptimizerSpec,
                 epochs: int, batch_size: int, drop_last: bool, x: Tensor, y: Tensor,
                 client_indices: list[Tensor], augment: str, seed: int, round: int,
                 stream: int = 1) -> None:
        self.model, self.tap, self.trainable, self.spec = model, tap, trainable, spec
        self.epochs, self.batch_size, self.drop_last = epochs, batch_size, drop_last
        self.x, self.y, self.client_indices, self.augment = x, y, client_indices, augment or "none"
        self.seed, self.round, self.stream = seed, round, stream
        self._feats: dict[int, tuple[Tensor, Tensor | None]] = {}
        live = dict(model.named_parameters())
        self._opt = spec.build([live[n] for n in trainable])

    @torch.no_grad()
    def loss(self, cid: int, params: Params) -> float:
        """Mean cross-entropy of ``params`` on client ``cid``'s whole training split (from its
        cached features)."""
        load_params_(self.model, params)
        self.model.eval()
        return float(F.cross_entropy(self.model.tail(self.tap, self._features(cid, params)[0]),
                                     self.y[self.client_indices[cid]]))

    @torch.no_grad()
    def _features(self, cid: int, params: Params) -> tuple[Tensor, Tensor | None]:
        """The tap's output on the client's training split and (with flips) on its mirror images:
        the body's, the same for every lr, computed once."""
        if cid not in self._feats:
            load_params_(self.model, params)
            self.model.eval()
            x = self.x[self.client_indices[cid]]
            run = lambda x: self.model(x, taps=(self.tap,))[1][0]  # noqa: E731
            self._feats[cid] = (run(x), run(x.flip(-1)) if self.augment == "flip" else None)
        return self._feats[cid]

    def __call__(self, cid: int, start: Params, lr: float) -> Tuned:
        """Client ``cid`` fine-tuned from ``start`` at ``lr``: its model and training-split loss, or
        why it is not finite."""
        model, spec, opt = self.model, self.spec, self._opt
        (h, mirror), idx = self._features(cid, start), self.client_indices[cid]
        load_params_(model, start)
        trainable = set(self.trainable)
        for n, p in model.named_parameters():
            p.requires_grad_(n in trainable)
        spec.reset(opt)
        model.train()
        B, n = self.batch_size, len(idx)
        for epoch in range(self.epochs):
            for group in opt.param_groups:
                group["lr"] = spec.epoch_lr(lr, self.round * self.epochs + epoch)
            pos, draws = epoch_plan(n, self.augment, self.seed, self.round, cid, epoch, self.stream)
            pos = pos.to(h.device)
            for b in range(num_batches(n, B, self.drop_last)):
                sl = pos[b * B:(b + 1) * B]
                hb = h[sl]
                if mirror is not None:
                    flip = draws["flip"][b * B:(b + 1) * B].to(h.device).view(
                        -1, *[1] * (h.dim() - 1))
                    hb = torch.where(flip, mirror[sl], hb)
                loss = F.cross_entropy(model.tail(self.tap, hb), self.y[idx[sl]])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            spec.end_epoch(opt)
        live = dict(model.named_parameters())
        out = {k: live[k].detach().clone() if k in trainable else v for k, v in start.items()}
        return self._judged(cid, out, self.trainable)

    def _judged(self, cid: int, out: Params, trained: Any) -> Tuned:
        """``out`` and its training-split loss, or why it is not finite (a fine-tuned tensor, or the
        loss)."""
        bad = next((k for k in trained if not torch.isfinite(out[k]).all()), None)
        if bad is not None:
            return repr(bad)
        final = self.loss(cid, out)
        return (out,
                final) if final == final and abs(final) != float("inf") else "model's training loss"

    def many(self, jobs: list[tuple[int, Params, float]]) -> list[Tuned]:
        """``[self(cid, start, lr) for cid, start, lr in jobs]``, trained together: the jobs of
        clients with as many samples (so as many batches of each size) stacked, one vmapped gradient
        and one functional optimizer step (:meth:`fedlib.optim.OptimizerSpec.step`) a batch for all
        of them, each job on its own client's batches. The same numbers up to float rounding
        (tested); one at a time where the optimizer has no functional step."""
        if not self.spec.functional()[0] or self.spec.name in EPOCH_END:
            return [self(*j) for j in jobs]
        groups: dict[int, list[int]] = {}
        for j, (cid, _, _) in enumerate(jobs):
            groups.setdefault(len(self.client_indices[cid]), []).append(j)
        out: list[Tuned] = [""] * len(jobs)
        for js in groups.values():
            for j, t in zip(js, self._stacked([jobs[j] for j in js])):
                out[j] = t
        return out

    def _stacked(self, jobs: list[tuple[int, Params, float]]) -> list[Tuned]:
        spec, B, n = self.spec, self.batch_size, len(self.client_indices[jobs[0][0]])
        clients = sorted({cid for cid, _, _ in jobs})
        row = torch.tensor([clients.index(cid) for cid, _, _ in jobs])
        feats = [self._features(cid, next(s for c, s, _ in jobs if c == cid)) for cid in clients]
        # (clients, n, ...): each client's features once, whatever its lrs
        h = torch.stack([f[0] for f in feats])
        mirror = torch.stack([f[1] for f in feats]) if feats[0][1] is not None else None
        y = torch.stack([self.y[self.client_indices[cid]] for cid in clients])
        row = row.to(h.device)
        after = set(self.model.layer_taps[self.model.layer_taps.index(self.tap) + 1:])
        names = [k for k in jobs[0][1] if k.split(".")[0] in after]  # what the tail reads
        train = [k for k in names if k in self.trainable]
        frozen = [k for k in names if k not in self.trainable]
        p = [torch.stack([s[k] for _, s, _ in jobs]) for k in train]
        fixed = {f"m.{k}": torch.stack([s[k] for _, s, _ in jobs]) for k in frozen}
        tail = _Tail(self.model, self.tap)

        def loss(p: list[Tensor], fixed: dict[str, Tensor], hb: Tensor, yb: Tensor) -> Tensor:
            params = {**fixed, **{f"m.{k}": v for k, v in zip(train, p)}}
            return F.cross_entropy(functional_call(tail, params, (hb,)), yb)

        step_grads = vmap(grad(loss))
        state, t = spec.init_state(p), 0
        self.model.train()
        for epoch in range(self.epochs):
            lr = torch.tensor(
                [spec.epoch_lr(r, self.round * self.epochs + epoch) for _, _, r in jobs])
            plans = [
                epoch_plan(n, self.augment, self.seed, self.round, cid, epoch, self.stream)
                for cid in clients
            ]
            # (jobs, n): each job its client's order
            pos = torch.stack([q for q, _ in plans]).to(h.device)[row]
            flips = torch.stack([d["flip"] for _, d in plans]).to(
                h.device)[row] if mirror is not None else None
            for b in range(num_batches(n, B, self.drop_last)):
                sl = pos[:, b * B:(b + 1) * B]
                hb = h[row[:, None], sl]
                if mirror is not None:
                    flip = flips[:, b * B:(b + 1) * B].view(*sl.shape, *[1] * (h.dim() - 2))
                    hb = torch.where(flip, mirror[row[:, None], sl], hb)
                g = step_grads(p, fixed, hb, y[row[:, None], sl])
                p, state = spec.step(p, g, state, t=t, lr=lr)
                t += 1
        # start's strides
        return [self._judged(cid, {**start, **{k: torch.empty_like(start[k]).copy_(v[j])
                                               for k, v in zip(train, p)}}, train)
                for j, (cid, start, _) in enumerate(jobs)]


class _Tail(nn.Module):
    """``model.tail(tap, ·)`` as a module's forward pass, for :func:`torch.func.functional_call`."""

    def __init__(self, model: nn.Module, tap: str) -> None:
        super().__init__()
        self.m, self.tap = model, tap

    def forward(self, h: Tensor) -> Tensor:
        return self.m.tail(self.tap, h)
