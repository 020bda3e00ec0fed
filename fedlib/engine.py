"""The federated loop: rounds → client sampling → local training → aggregation → evaluation.

The :class:`Engine` owns every loop; a :class:`~fedlib.strategies.Strategy` only supplies hooks. Speed rules:
the dataset lives on the device as tensors and batches are index lookups (no DataLoader); one model, one frozen
reference model and one optimizer are built per run and reused for every client and round (parameters are
copied in, optimizer state is cleared); losses are checked for NaN once per client, not once per step.

All randomness is a pure function of ``(seed, round, client, epoch)``: client sampling, batch order and
augmentation do not depend on what ran before, so a run resumed from a checkpoint, or run by another executor,
sees exactly the same batches.
"""

from __future__ import annotations

import copy
import math
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from torch.func import functional_call

from .config import Config
from .data import FedDataset, apply_augment, augment_params, load_dataset
from .models import build_model
from .partition import Partition, make_partition
from .strategies import ClientContext, Params, Strategy, build_strategy


class NonFiniteLossError(FloatingPointError):
    """The training loss became NaN or infinite."""


# ------------------------------------------------------------------------------------------- pure helpers

def rng_key(seed: int, *parts: int) -> int:
    """A 63-bit seed derived from ``(seed, *parts)`` (numpy SeedSequence: independent streams per tuple)."""
    return int(np.random.SeedSequence([int(seed), *map(int, parts)]).generate_state(2, np.uint64)[0] >> 1)


def sample_clients(num_clients: int, fraction: float, seed: int, rnd: int) -> np.ndarray:
    """The sorted ids of the ``max(1, round(fraction · N))`` clients sampled in round ``rnd``."""
    m = max(1, int(round(fraction * num_clients)))
    if m >= num_clients:
        return np.arange(num_clients)
    rng = np.random.default_rng(rng_key(seed, rnd, 0x5A3))
    return np.sort(rng.choice(num_clients, size=m, replace=False))


def round_lr(cfg: Config, rnd: int) -> float:
    """Server-side step schedule: lr · γ^(number of milestones ≤ rnd / rounds)."""
    passed = sum(rnd >= math.ceil(m * cfg.rounds) for m in cfg.lr_milestones)
    return cfg.lr * cfg.lr_gamma ** passed


def num_batches(n: int, batch_size: int, drop_last: bool) -> int:
    """Batches per epoch; with ``drop_last`` a client smaller than one batch still takes one (smaller) step."""
    if drop_last and n >= batch_size:
        return n // batch_size
    return math.ceil(n / batch_size)


def epoch_plan(n: int, augment: str, seed: int, rnd: int, cid: int, epoch: int) -> tuple[Tensor, dict[str, Tensor]]:
    """The order (positions into a client's index list) in which client ``cid`` visits its ``n`` samples in
    ``epoch``, and the augmentation draws for them in that order. Drawn on the CPU from a generator keyed by
    ``(seed, rnd, cid, epoch)``: identical on every device and in every executor."""
    g = torch.Generator().manual_seed(rng_key(seed, rnd, cid, epoch))
    order = torch.randperm(n, generator=g)
    return order, augment_params(augment, n, g)


def clone_params(params: Params) -> Params:
    return {k: v.detach().clone() for k, v in params.items()}


def load_params_(model: torch.nn.Module, params: Params) -> None:
    """Copy ``params`` into ``model``'s parameters and buffers in place (keeps optimizer references valid)."""
    with torch.no_grad():
        for k, t in model.state_dict(keep_vars=True).items():
            t.copy_(params[k])


def used_parameters(model: torch.nn.Module, taps: tuple[str, ...], x: Tensor) -> set[str]:
    """Names of the parameters that the logits (and the requested taps) depend on.

    Parameters outside the forward pass (e.g. projection heads no tap asks for) get no gradient, so FedAvg leaves
    them untouched; excluding them from training keeps every strategy consistent with that (weight decay and
    proximal terms do not move them either)."""
    model.zero_grad(set_to_none=True)
    out = model(x, taps=taps) if taps else model(x)
    logits, tap_out = (out if taps else (out, []))
    (logits.sum() + sum(t.sum() for t in tap_out)).backward()
    used = {n for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return used


def load_data(cfg: Config, root: str | Path | None = None) -> FedDataset:
    """The config's dataset on its device, cut to ``n_train`` / ``n_test`` (a fixed subset, seed 0)."""
    data = load_dataset(cfg.dataset, root=root, device=cfg.device)
    if cfg.n_train is not None or cfg.n_test is not None:
        data = data.subset(cfg.n_train, cfg.n_test, seed=0)
    return data


def build_partition(cfg: Config, data: FedDataset, strategy: Strategy) -> Partition:
    labels = data.y_train.cpu().numpy()
    test_labels = data.y_test.cpu().numpy()
    if getattr(strategy, "centralized", False):
        return make_partition("iid", labels, 1, cfg.seed)
    return make_partition(cfg.partition, labels, cfg.num_clients, cfg.seed, test_labels=test_labels,
                          **cfg.partition_kw)


_OPTIMIZERS: dict[str, Callable[..., torch.optim.Optimizer]] = {
    "sgd": lambda ps, c: torch.optim.SGD(ps, lr=c.lr, momentum=c.momentum, weight_decay=c.weight_decay),
    "adam": lambda ps, c: torch.optim.Adam(ps, lr=c.lr, weight_decay=c.weight_decay),
}


def make_optimizer(cfg: Config, params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
    if cfg.optimizer not in _OPTIMIZERS:
        raise ValueError(f"Unknown optimizer {cfg.optimizer!r}; valid optimizers: {sorted(_OPTIMIZERS)}.")
    return _OPTIMIZERS[cfg.optimizer](params, cfg)


# ------------------------------------------------------------------------------------------------ engine

class Engine:
    """One federated experiment in memory. ``Engine(cfg).run()`` returns the per-round history."""

    def __init__(self, cfg: Config, data: FedDataset | None = None, partition: Partition | None = None,
                 progress: bool = True, keep_client_models: bool = False) -> None:
        self.cfg = cfg.validate()
        self.keep_client_models = keep_client_models  # keep each client's latest trained model (client_models)
        self.client_models: dict[int, Params] = {}
        self.device = torch.device(cfg.device)
        self.progress = progress
        self.data = data.to(self.device) if data is not None else load_data(cfg)
        self.strategy = build_strategy(cfg.strategy, **cfg.strategy_kw)
        self.partition = partition or build_partition(cfg, self.data, self.strategy)
        self.n_clients = len(self.partition.client_indices)
        self.augment = cfg.augment if cfg.augment is not None else self.data.augment

        torch.manual_seed(cfg.seed)
        self.model = build_model(cfg.model, self.data.in_shape, self.data.num_classes, **cfg.model_kw)
        self.model.to(self.device)
        if self.device.type == "cpu" and self.data.x_train.dim() == 4:
            # oneDNN runs small convs and pooling ~1.4-3x faster in NHWC on CPU (benchmarks/engine.py)
            self.model.to(memory_format=torch.channels_last)
        self.strategy.setup(self.model, cfg)
        self.ref_model = copy.deepcopy(self.model).eval().requires_grad_(False)  # evaluates any Params
        used = used_parameters(self.model, self.strategy.taps, self.data.x_train[:2])
        self.trainable = [n for n, _ in self.model.named_parameters() if n in used and self.strategy.trainable(n)]
        for n, p in self.model.named_parameters():
            p.requires_grad_(n in self.trainable)
        self.optimizer = make_optimizer(cfg, [p for n, p in self.model.named_parameters() if n in self.trainable])

        self.global_params: Params = clone_params(self.model.state_dict())
        self.client_idx = [torch.as_tensor(np.array(ix), dtype=torch.long, device=self.device)
                           for ix in self.partition.client_indices]
        self.client_state: dict[int, dict[str, Any]] = {c: {} for c in range(self.n_clients)}
        self.visited: set[int] = set()
        self.history: list[dict[str, Any]] = []
        self.round = 0
        self._executor = self._pick_executor()

    # -------------------------------------------------------------------------------- local training
    def batches(self, cid: int, rnd: int, epoch: int) -> Iterator[tuple[Tensor, Tensor]]:
        """Client ``cid``'s mini-batches for one epoch: index lookups into the on-device tensors."""
        idx = self.client_idx[cid]
        order, aug = epoch_plan(len(idx), self.augment, self.cfg.seed, rnd, cid, epoch)
        order = idx[order.to(self.device)]
        aug = {k: v.to(self.device) for k, v in aug.items()}
        B = self.cfg.batch_size
        for b in range(num_batches(len(idx), B, self.cfg.drop_last)):
            sl = slice(b * B, (b + 1) * B)
            x = self.data.x_train[order[sl]]
            if aug:
                x = apply_augment(x, self.augment, {k: v[sl] for k, v in aug.items()}, fill=self.data.pad_fill)
            yield x, self.data.y_train[order[sl]]

    def context(self, cid: int, rnd: int) -> ClientContext:
        n = len(self.client_idx[cid])
        steps = self.cfg.local_epochs * num_batches(n, self.cfg.batch_size, self.cfg.drop_last)
        return ClientContext(cid=cid, round=rnd, n_samples=n, steps=steps, lr=round_lr(self.cfg, rnd),
                             first_visit=cid not in self.visited, state=self.client_state[cid])

    def reference_params(self, ctx: ClientContext) -> dict[str, Params]:
        """The frozen models whose taps the strategy's penalty sees. "prev" is the global model on a first visit."""
        return {"global": self.global_params, "prev": ctx.state.get("prev", self.global_params)}

    def train_client(self, ctx: ClientContext, start: Params) -> tuple[Params, float]:
        """Local training of one client from ``start``; returns its parameters and mean training loss."""
        model, opt, strat = self.model, self.optimizer, self.strategy
        load_params_(model, start)
        if not strat.persistent_optimizer:
            opt.state.clear()
        for group in opt.param_groups:
            group["lr"] = ctx.lr
        model.train()
        live = {n: p for n, p in model.named_parameters() if n in self.trainable}
        ref_params = self.reference_params(ctx)
        loss_sum = torch.zeros((), device=self.device)
        seen = 0
        amp = self.cfg.precision == "bf16"
        for epoch in range(self.cfg.local_epochs):
            for x, y in self.batches(ctx.cid, ctx.round, epoch):
                with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=amp):
                    if strat.taps:
                        logits, taps = model(x, taps=strat.taps)
                    else:
                        logits, taps = model(x), []
                loss = F.cross_entropy(logits.float() if amp else logits, y)
                if strat.references:
                    with torch.no_grad():
                        refs = {r: functional_call(self.ref_model, ref_params[r], (x,), {"taps": strat.taps})[1]
                                for r in strat.references}
                else:
                    refs = {}
                extra = strat.penalty(ctx, live, self.global_params, taps, refs, y)
                if extra is not None:
                    loss = loss + extra
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                loss_sum += loss.detach() * len(y)
                seen += len(y)
        mean_loss = float(loss_sum) / max(seen, 1)
        if not math.isfinite(mean_loss):
            raise NonFiniteLossError(
                f"Training loss became {mean_loss} for client {ctx.cid} in round {ctx.round + 1} "
                f"(strategy {strat.name!r}, lr {ctx.lr}). Lower the learning rate or the regularization weight "
                f"(mu), or check the dataset's normalization.")
        return clone_params(model.state_dict()), mean_loss

    def _pick_executor(self) -> Callable[[list[ClientContext], list[Params]], list[tuple[Params, float]]]:
        mode = self.cfg.executor
        if mode in ("vectorized", "auto"):
            try:
                from .vectorized import VectorizedExecutor
            except ImportError:
                VectorizedExecutor = None  # type: ignore[assignment]
            if VectorizedExecutor is not None:
                ok, why = VectorizedExecutor.supports(self)
                if ok:
                    self.executor_name = "vectorized"
                    return VectorizedExecutor(self)
                if mode == "vectorized" or self.device.type != "cpu":  # on the CPU, auto prefers sequential anyway
                    print(f"fedlib: vectorized executor unavailable ({why}); using the sequential one.")
        self.executor_name = "sequential"
        return lambda ctxs, starts: [self.train_client(c, s) for c, s in zip(ctxs, starts)]

    # ------------------------------------------------------------------------------------- evaluation
    @torch.no_grad()
    def evaluate(self, params: Params, x: Tensor, y: Tensor, batch_size: int = 2048) -> tuple[float, float]:
        """(accuracy, mean cross-entropy) of ``params`` on ``(x, y)``, in eval mode."""
        if len(y) == 0:
            return float("nan"), float("nan")
        correct = torch.zeros((), device=self.device)
        loss = torch.zeros((), device=self.device)
        for i in range(0, len(y), batch_size):
            logits = functional_call(self.ref_model, params, (x[i:i + batch_size],))
            yb = y[i:i + batch_size]
            correct += (logits.argmax(1) == yb).sum()
            loss += F.cross_entropy(logits, yb, reduction="sum")
        return float(correct) / len(y), float(loss) / len(y)

    @torch.no_grad()
    def representations(self, params: Params, x: Tensor, taps: tuple[str, ...] | list[str],
                        batch_size: int = 1000) -> list[Tensor]:
        """The flattened taps ``(n, features)`` of the model with ``params`` on ``x`` (eval mode)."""
        chunks: list[list[Tensor]] = [[] for _ in taps]
        for i in range(0, len(x), batch_size):
            _, out = functional_call(self.ref_model, params, (x[i:i + batch_size],), {"taps": tuple(taps)})
            for c, t in zip(chunks, out):
                c.append(t.flatten(1))
        return [torch.cat(c) for c in chunks]

    def personal_evaluation(self) -> dict[str, float]:
        """Each client's model (``strategy.eval_params``) on its own test split: unweighted mean and std."""
        accs = []
        for cid, tidx in enumerate(self.partition.test_indices or []):
            params = self.strategy.eval_params(cid, self.global_params, self.client_state[cid])
            t = torch.as_tensor(tidx, dtype=torch.long, device=self.device)
            accs.append(self.evaluate(params, self.data.x_test[t], self.data.y_test[t])[0])
        return {"personal_acc_mean": float(np.mean(accs)), "personal_acc_std": float(np.std(accs))}

    # ---------------------------------------------------------------------------------------- rounds
    def run_round(self, rnd: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        cfg, strat = self.cfg, self.strategy
        sampled = sample_clients(self.n_clients, cfg.sample_fraction, cfg.seed, rnd)
        ctxs = [self.context(int(c), rnd) for c in sampled]
        starts = [strat.client_start(ctx, self.global_params) for ctx in ctxs]
        results = self._executor(ctxs, starts)
        uploads = []
        for ctx, start, (params, _) in zip(ctxs, starts, results):
            uploads.append(strat.client_end(ctx, start, params))
            if self.keep_client_models:
                self.client_models[ctx.cid] = params
            if "prev" in strat.references:
                ctx.state["prev"] = params
            self.visited.add(ctx.cid)
        sizes = torch.tensor([c.n_samples for c in ctxs], dtype=torch.float64)
        weights = (sizes / sizes.sum()).to(self.device)
        self.global_params = strat.aggregate(rnd, self.global_params, uploads, weights, ctxs)
        train_time = time.perf_counter() - t0

        entry: dict[str, Any] = {
            "round": rnd + 1, "lr": ctxs[0].lr, "clients": [c.cid for c in ctxs],
            "train_loss": float(sum(w * r[1] for w, r in zip(weights.tolist(), results))),
            "train_time_s": train_time,
        }
        if (rnd + 1) % cfg.eval_every == 0 or rnd + 1 == cfg.rounds:
            acc, loss = self.evaluate(self.global_params, self.data.x_test, self.data.y_test)
            entry.update(test_acc=acc, test_loss=loss)
            if cfg.personal_eval and self.partition.test_indices is not None:
                entry.update(self.personal_evaluation())
        entry["time_s"] = time.perf_counter() - t0
        return entry

    def run(self, checkpoint: str | Path | None = None,
            callback: Callable[["Engine", dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
        """Train the remaining rounds. With ``checkpoint``, state is saved every ``cfg.checkpoint_every`` rounds."""
        from tqdm.auto import tqdm

        bar = tqdm(range(self.round, self.cfg.rounds), desc=self.cfg.label or self.cfg.strategy,
                   disable=not self.progress, leave=False)
        for rnd in bar:
            entry = self.run_round(rnd)
            self.history.append(entry)
            self.round = rnd + 1
            if "test_acc" in entry:
                bar.set_postfix(acc=f"{entry['test_acc']:.4f}")
            every = self.cfg.checkpoint_every
            if checkpoint is not None and every and self.round % every == 0 and self.round < self.cfg.rounds:
                self.save_checkpoint(checkpoint)
            if callback is not None:
                callback(self, entry)
        return self.history

    # ----------------------------------------------------------------------------------- checkpoints
    def state(self) -> dict[str, Any]:
        cpu = lambda p: {k: v.detach().cpu() for k, v in p.items()}  # noqa: E731
        states = {c: {k: (cpu(v) if isinstance(v, dict) else v) for k, v in s.items()}
                  for c, s in self.client_state.items()}
        return {"key": self.cfg.key(), "round": self.round, "global_params": cpu(self.global_params),
                "client_state": states, "visited": sorted(self.visited), "history": self.history,
                "strategy": self.strategy.state_dict(), "optimizer": self.optimizer.state_dict()}

    def save_checkpoint(self, path: str | Path) -> None:
        """Atomically write the engine's state (write to a temporary file, then rename)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
        torch.save(self.state(), tmp)
        os.replace(tmp, path)

    def load_checkpoint(self, path: str | Path) -> None:
        st = torch.load(path, map_location=self.device, weights_only=False)
        if st["key"] != self.cfg.key():
            raise ValueError(f"Checkpoint {path} belongs to config {st['key']}, not {self.cfg.key()}; delete it.")
        dev = lambda p: {k: v.to(self.device) for k, v in p.items()}  # noqa: E731
        self.round = st["round"]
        self.global_params = dev(st["global_params"])
        self.client_state = {int(c): {k: (dev(v) if isinstance(v, dict) else v) for k, v in s.items()}
                             for c, s in st["client_state"].items()}
        self.visited = set(st["visited"])
        self.history = list(st["history"])
        self.strategy.load_state_dict(st["strategy"])
        self.optimizer.load_state_dict(st["optimizer"])
