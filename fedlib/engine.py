"""The federated loop: rounds → client sampling → local training → aggregation → evaluation.

The :class:`Engine` owns every loop; a :class:`~fedlib.strategies.Strategy` supplies hooks and
declares what its local step needs; an executor (:mod:`fedlib.executors`) runs the local training it
is handed as a :class:`~fedlib.local.LocalTask`. Speed rules: the dataset lives on the device as
tensors and batches are index lookups (no DataLoader); one model, one frozen reference model and one
optimizer are built per run and reused for every client and round. Randomness is a pure function of
``(seed, round, client, epoch)`` (:mod:`fedlib.schedule`), so a resumed run, or one on another
executor, sees exactly the same batches.

Clients upload, and the server checks and aggregates, only what local training changes
(``Engine.trained``: the strategy's trainable parameters and the buffers); every other tensor — a
frozen head, projection heads no loss reaches — keeps its initial value, bit for bit. What clients
upload and what the server keeps is checked for NaN/inf every round
(:class:`~fedlib.schedule.NonFiniteLossError` names the client, the round and the tensor).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import Tensor

from fedlib.atomic import atomic_save
from fedlib.config import Config, ConfigError
from fedlib.data import FedDataset, load_dataset
from fedlib.evaluation import EVAL_BATCH, PersonalEvaluation, no_personal_tests, scores
from fedlib.executors import Executor, make_executor
from fedlib.executors.fast.layout import in_layout
from fedlib.local import ClientContext, ClientJob, ClientResult, LocalTask, Needs
from fedlib.models import build_model, representations
from fedlib.optim import OptimizerSpec
from fedlib.params import Params, clone_params, first_non_finite, tree_to
from fedlib.partition import Partition, make_partition
from fedlib.progress import ROUND_LOG_ENV, RoundProgress, progress_mode
from fedlib.schedule import (NonFiniteLossError, epoch_plan, num_batches, rng_key, round_lr,
                             sample_clients)
from fedlib.strategies import Strategy, build_strategy

__all__ = ["Engine", "EVAL_BATCH", "NonFiniteLossError", "load_data", "build_partition",
           "used_parameters", "clone_params", "rng_key", "sample_clients", "round_lr",
           "num_batches", "epoch_plan"]


def used_parameters(model: torch.nn.Module, taps: tuple[str, ...], x: Tensor) -> set[str]:
    """Names of the parameters that the logits (and the requested taps) depend on.

    Parameters outside the forward pass (e.g. projection heads no tap asks for) get no gradient, so
    FedAvg leaves them untouched; excluding them from training keeps every strategy consistent with
    that (weight decay and proximal terms do not move them either)."""
    model.zero_grad(set_to_none=True)
    out = model(x, taps=taps) if taps else model(x)
    logits, tap_out = (out if taps else (out, []))
    (logits.sum() + sum(t.sum() for t in tap_out)).backward()
    used = {n for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return used


def load_data(cfg: Config, root: str | Path | None = None) -> FedDataset:
    """The config's dataset on its device, cut to ``n_train`` / ``n_test`` (a fixed subset, seed
    0)."""
    data = load_dataset(cfg.dataset, root=root, device=cfg.device)
    if cfg.n_train is not None or cfg.n_test is not None:
        data = data.subset(cfg.n_train, cfg.n_test, seed=0)
    return data


def build_partition(cfg: Config, data: FedDataset, strategy: Strategy) -> Partition:
    labels = data.y_train.cpu().numpy()
    test_labels = data.y_test.cpu().numpy()
    if strategy.centralized:
        return make_partition("iid", labels, 1, cfg.seed)
    return make_partition(cfg.partition, labels, cfg.num_clients, cfg.seed, test_labels=test_labels,
                          **cfg.partition_kw)


class Engine(PersonalEvaluation):
    """One federated experiment in memory. ``Engine(cfg).run()`` returns the per-round history; its
    personalized evaluation is :class:`~fedlib.evaluation.PersonalEvaluation`'s."""

    def __init__(self, cfg: Config, data: FedDataset | None = None,
                 partition: Partition | None = None, progress: bool | None = None,
                 keep_client_models: bool = False) -> None:
        self.cfg = cfg.validate()
        # keep each client's latest trained model (client_models)
        self.keep_client_models = keep_client_models
        self.client_models: dict[int, Params] = {}
        self.device = torch.device(cfg.device)
        self.progress = progress
        self.data = data.to(self.device) if data is not None else load_data(cfg)
        # from the options validate() built: the strategy is constructed once, its options not again
        self.strategy = build_strategy(cfg.strategy, cfg.strategy_options())
        self.partition = partition or build_partition(cfg, self.data, self.strategy)
        if cfg.personal_eval and self.partition.test_indices is None:
            raise ConfigError(no_personal_tests(cfg, self.strategy.centralized), ["personal_eval"])
        self.n_clients = len(self.partition.client_indices)
        self.augment = cfg.augment if cfg.augment is not None else self.data.augment

        torch.manual_seed(cfg.seed)
        self.model = build_model(cfg.model, self.data.in_shape, self.data.num_classes,
                                 **cfg.model_kw)
        self.model.to(self.device)
        if self.device.type == "cpu" and self.data.x_train.dim() == 4:
            # oneDNN runs small convs and pooling faster in NHWC on the CPU (benchmarks/engine.py)
            self.model.to(memory_format=torch.channels_last)
        self.strategy.setup(self.model, cfg)
        self.needs: Needs = self.strategy.needs
        # the run's clients are long-lived trainers, whatever the strategy
        if cfg.persistent_optimizer:
            self.needs = dataclasses.replace(self.needs, persistent_optimizer=True)
        # evaluates any Params
        self.ref_model = copy.deepcopy(self.model).eval().requires_grad_(False)
        self.used = used_parameters(self.model, self.needs.taps, self.data.x_train[:2])
        self.trainable = self._trainable(self.strategy.trainable)
        params = {n for n, _ in self.model.named_parameters()}
        # what local training changes: the only tensors uploaded, checked and aggregated (buffers:
        # BatchNorm's)
        self.trained = self.trainable + tuple(k for k in self.model.state_dict() if k not in params)
        self.optimizer = OptimizerSpec.from_config(cfg).validate()
        self.global_params: Params = clone_params(self.model.state_dict())
        # conv weights' strides
        self.layout = {k: v for k, v in self.model.state_dict().items() if v.dim() == 4}
        self.client_idx = [torch.as_tensor(np.array(ix), dtype=torch.long, device=self.device)
                           for ix in self.partition.client_indices]
        self.client_state: dict[int, dict[str, Any]] = {c: {} for c in range(self.n_clients)}
        # needs.persistent_optimizer: per client
        self.optimizer_states: dict[int, dict[str, Any]] = {}
        self.visited: set[int] = set()
        self.history: list[dict[str, Any]] = []
        self.round = 0
        self.executor: Executor = self._make_executor(self.task())
        self.executor_name = self.executor.name
        self._finetune_executor: Executor | None = None
        # the last fine-tuning's per-client lr and losses
        self.finetune_log: dict[str, list[float]] = {}

    def _trainable(self, keep: Callable[[str], bool]) -> tuple[str, ...]:
        return tuple(n for n, _ in self.model.named_parameters() if n in self.used and keep(n))

    def _make_executor(self, task: LocalTask) -> Executor:
        c = self.cfg
        return make_executor(task, self.device, c.executor, chunk_size=c.chunk_size,
                             compile=c.compile, cuda_graph=c.cuda_graph)

    # ------------------------------------------------------------------------------- local training
    def task(self, **changes: Any) -> LocalTask:
        """The round's local training (``changes``: e.g. another trainable set for fine-tuning)."""
        c, s = self.cfg, self.strategy
        t = LocalTask(model=self.model, ref_model=self.ref_model, data=self.data,
                      augment=self.augment, client_indices=self.client_idx,
                      trainable=self.trainable, optimizer=self.optimizer, epochs=c.local_epochs,
                      batch_size=c.batch_size, drop_last=c.drop_last, seed=c.seed,
                      global_params=self.global_params, needs=self.needs, penalty=s.penalty,
                      correction=s.correction, precision=c.precision, what=f"strategy {s.name!r}")
        return dataclasses.replace(t, **changes) if changes else t

    def context(self, cid: int, rnd: int) -> ClientContext:
        n = len(self.client_idx[cid])
        steps = self.cfg.local_epochs * num_batches(n, self.cfg.batch_size, self.cfg.drop_last)
        lr = round_lr(self.cfg, rnd, self.strategy.lr_rounding)

        def features(params: Params, taps: tuple[str, ...], k: int,
                     shared: bool = False) -> list[Tensor]:
            return self.features(cid, rnd, params, taps, k, shared)

        return ClientContext(cid=cid, round=rnd, n_samples=n, steps=steps, lr=lr,
                             first_visit=cid not in self.visited, state=self.client_state[cid],
                             trainable=self.trainable, features=features)

    @torch.no_grad()
    def features(self, cid: int, rnd: int, params: Params, taps: tuple[str, ...] | list[str],
                 n: int, shared: bool = False) -> list[Tensor]:
        """The flattened taps (eval mode) of ``params`` on ``n`` training samples drawn by a key of
        (seed, round, client): client ``cid``'s own (all of them if it has fewer), or with
        ``shared`` the same ``n`` samples of the whole training set for every client of the
        round."""
        pool = (torch.arange(len(self.data.y_train), device=self.device) if shared
                else self.client_idx[cid])
        key = rng_key(self.cfg.seed, rnd, 0xFEA, 0 if shared else cid + 1)
        g = torch.Generator().manual_seed(key)
        pick = pool[torch.randperm(len(pool), generator=g)[:n].to(self.device)]
        return representations(self.ref_model, in_layout(params, self.layout),
                               self.data.x_train[pick], tuple(taps))

    def train(self, ctxs: list[ClientContext], starts: list[Params]) -> list[ClientResult]:
        """Local training of the clients ``ctxs`` from ``starts`` (what a round runs), checked for
        NaN/inf."""
        s, g = self.strategy, self.global_params
        needs = self.needs
        jobs = [ClientJob(ctx=c, start=st, refs=s.references(c, g) if needs.references else {},
                          tensors=s.client_tensors(c, g) if needs.tensors else {},
                          opt_state=(self.optimizer_states.get(c.cid)
                                     if needs.persistent_optimizer else None))
                for c, st in zip(ctxs, starts)]
        results = self.executor(self.task(), jobs)
        for c, r in zip(ctxs, results):
            bad = first_non_finite({k: r.params[k] for k in self.trained})
            if bad is not None:
                raise NonFiniteLossError(
                    f"Client {c.cid} uploaded a non-finite {bad!r} after round {c.round + 1} "
                    f"(strategy {s.name!r}, lr {c.lr}, mean training loss {r.loss}). Lower the "
                    "learning rate or the regularization weight (mu), or check the dataset's "
                    "normalization.")
            if r.opt_state is not None:
                self.optimizer_states[c.cid] = r.opt_state
        return results

    # ----------------------------------------------------------------------------------- evaluation
    @torch.no_grad()
    def evaluate(self, params: Params, x: Tensor, y: Tensor, batch_size: int | None = None,
                 precision: str = "fp32") -> tuple[float, float]:
        """(accuracy, mean cross-entropy) of ``params`` on ``(x, y)``
        (:func:`fedlib.evaluation.scores`). A run evaluates in the precision it trains in
        (``cfg.precision``; bf16 against float32: benchmarks/RESULTS.md)."""
        return scores(self.ref_model, params, x, y, self.layout, batch_size, precision)

    # --------------------------------------------------------------------------------------- rounds
    def run_round(self, rnd: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        cfg, strat = self.cfg, self.strategy
        sampled = sample_clients(self.n_clients, cfg.sample_fraction, cfg.seed, rnd)
        ctxs = [self.context(int(c), rnd) for c in sampled]
        starts = [strat.client_start(ctx, self.global_params) for ctx in ctxs]
        results = self.train(ctxs, starts)
        uploads = []
        for ctx, start, r in zip(ctxs, starts, results):
            uploads.append(strat.client_end(ctx, start, r.params))
            if self.keep_client_models:
                self.client_models[ctx.cid] = r.params
            self.visited.add(ctx.cid)
        sizes = torch.tensor([c.n_samples for c in ctxs], dtype=torch.float64)
        weights = (sizes / sizes.sum()).to(self.device)
        # what training changed, nothing else
        uploads = [{k: u[k] for k in self.trained} for u in uploads]
        new, metrics = strat.aggregate(rnd, self.global_params, uploads, weights, ctxs)
        # the model's memory format, as trained
        new = in_layout({k: new[k] for k in self.trained}, self.layout)
        bad = first_non_finite(new)
        if bad is not None:
            raise NonFiniteLossError(f"The aggregated global model's {bad!r} is non-finite after "
                                     f"round {rnd + 1} (strategy {strat.name!r}); the server keeps "
                                     "the previous global model.")
        # the untrained tensors: the same, untouched
        self.global_params = {**self.global_params, **new}
        train_time = time.perf_counter() - t0

        entry: dict[str, Any] = {
            "round": rnd + 1, "lr": ctxs[0].lr, "clients": [c.cid for c in ctxs],
            "train_loss": float(sum(w * r.loss for w, r in zip(weights.tolist(), results))),
            # per sampled client, in the order of "clients"
            "client_loss": [r.loss for r in results],
            "train_time_s": train_time, **metrics,
        }
        if (rnd + 1) % cfg.eval_every == 0 or rnd + 1 == cfg.rounds:
            acc, loss = self.evaluate(self.global_params, self.data.x_test, self.data.y_test,
                                      precision=self.cfg.precision)
            if math.isnan(loss) or math.isinf(loss):  # finite but huge weights overflow the logits
                raise NonFiniteLossError(
                    f"The global model's test loss is {loss} after round {rnd + 1} (strategy "
                    f"{strat.name!r}, lr {ctxs[0].lr}): training diverged. Lower the learning rate "
                    "or the regularization weight (mu).")
            entry.update(test_acc=acc, test_loss=loss)
            if cfg.personal_eval and self.partition.test_indices is not None:
                entry.update(self.personal_evaluation())
        entry["time_s"] = time.perf_counter() - t0
        return entry

    def run(self, checkpoint: str | Path | None = None,
            callback: Callable[["Engine", dict[str, Any]], None] | None = None
            ) -> list[dict[str, Any]]:
        """Train the remaining rounds, reporting each to :class:`~fedlib.progress.RoundProgress`
        (``progress``). With ``checkpoint``, state is saved every ``cfg.checkpoint_every``
        rounds."""
        what = " ".join(dict.fromkeys(x for x in (self.cfg.label, self.cfg.strategy) if x))
        bar = RoundProgress(what, self.round, self.cfg.rounds, progress_mode(self.progress),
                            log_path=os.environ.get(ROUND_LOG_ENV) or None)
        try:
            for rnd in range(self.round, self.cfg.rounds):
                entry = self.run_round(rnd)
                self.history.append(entry)
                self.round = rnd + 1
                bar.update(entry)
                every = self.cfg.checkpoint_every
                due = every and self.round % every == 0 and self.round < self.cfg.rounds
                if checkpoint is not None and due:
                    self.save_checkpoint(checkpoint)
                if callback is not None:
                    callback(self, entry)
        finally:
            bar.close()
        return self.history

    # ---------------------------------------------------------------------------------- checkpoints
    def state(self) -> dict[str, Any]:
        return tree_to(
            {
                "key": self.cfg.key(), "round": self.round, "global_params": self.global_params,
                "client_state": self.client_state, "optimizer_states": self.optimizer_states,
                "visited": sorted(
                    self.visited), "history": self.history, "strategy": self.strategy.state_dict()
            }, "cpu")

    def save_checkpoint(self, path: str | Path) -> None:
        """Atomically write the engine's state."""
        atomic_save(Path(path), self.state())

    def load_checkpoint(self, path: str | Path) -> None:
        st = torch.load(path, map_location="cpu", weights_only=False)
        if st["key"] != self.cfg.key():
            raise ValueError(f"Checkpoint {path} belongs to config {st['key']}, not "
                             f"{self.cfg.key()}; delete it.")
        st = tree_to(st, self.device)
        self.round = st["round"]
        self.global_params = in_layout(st["global_params"], self.layout)
        self.client_state = {int(c): s for c, s in st["client_state"].items()}
        self.optimizer_states = {int(c): s for c, s in st.get("optimizer_states", {}).items()}
        self.visited = set(st["visited"])
        self.history = list(st["history"])
        self.strategy.load_state_dict(st["strategy"])
