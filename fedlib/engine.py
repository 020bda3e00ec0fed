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
import torch.nn.functional as F
from torch import Tensor
from torch.func import functional_call

from fedlib.atomic import atomic_save
from fedlib.config import Config, ConfigError
from fedlib.data import FedDataset, load_dataset
from fedlib.executors import Executor, make_executor
from fedlib.executors.fast.layout import in_layout
from fedlib.finetune import HeadTuner, Tuned, head_path_problem, select
from fedlib.local import ClientContext, ClientJob, ClientResult, LocalTask, Needs
from fedlib.models import build_model, representations
from fedlib.optim import OptimizerSpec
from fedlib.params import Params, clone_params, first_non_finite, tree_to
from fedlib.partition import PERSONAL_SCHEMES, Partition, make_partition
from fedlib.progress import ROUND_LOG_ENV, RoundProgress, progress_mode
from fedlib.schedule import NonFiniteLossError, epoch_plan, num_batches, rng_key, round_lr, sample_clients
from fedlib.strategies import Strategy, build_strategy

__all__ = ["Engine", "NonFiniteLossError", "load_data", "build_partition", "used_parameters", "clone_params",
           "rng_key", "sample_clients", "round_lr", "num_batches", "epoch_plan"]


# Test-set evaluation batch per device type (``Engine.evaluate``; ``python benchmarks/engine.py
# --eval`` times it: the FedIntR CNN on Fashion-MNIST's 10,000 test images). CPU: 512, 0.36 s
# against 0.61 s at 2048 on the idle 2-core CPU (profile of a round, 2026-11-23; the reruns under
# load in benchmarks/RESULTS.md are too noisy to rank). CUDA: 2048, unchanged and not re-measured
# (no GPU when the CPU row was set).
EVAL_BATCH = {"cpu": 512, "cuda": 2048}


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


def no_personal_tests(cfg: Config, centralized: bool) -> str:
    """The error for a personalized evaluation on a partition without per-client test splits."""
    what = "the centralized strategy's one client" if centralized else f"partition {cfg.partition!r}"
    return (f"personal_eval=True needs per-client test splits, and {what} has none. Use a partition that makes "
            f"them ({', '.join(repr(s) for s in PERSONAL_SCHEMES)}; or pass Engine(partition=...) a Partition "
            f"with test_indices), or set personal_eval=False.")


class Engine:
    """One federated experiment in memory. ``Engine(cfg).run()`` returns the per-round history."""

    def __init__(self, cfg: Config, data: FedDataset | None = None, partition: Partition | None = None,
                 progress: bool | None = None, keep_client_models: bool = False) -> None:
        self.cfg = cfg.validate()
        self.keep_client_models = keep_client_models  # keep each client's latest trained model (client_models)
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
        self.model = build_model(cfg.model, self.data.in_shape, self.data.num_classes, **cfg.model_kw)
        self.model.to(self.device)
        if self.device.type == "cpu" and self.data.x_train.dim() == 4:
            # oneDNN runs small convs and pooling ~1.4-3x faster in NHWC on CPU
            # (benchmarks/engine.py)
            self.model.to(memory_format=torch.channels_last)
        self.strategy.setup(self.model, cfg)
        self.needs: Needs = self.strategy.needs
        if cfg.persistent_optimizer:  # the run's clients are long-lived trainers, whatever the strategy
            self.needs = dataclasses.replace(self.needs, persistent_optimizer=True)
        self.ref_model = copy.deepcopy(self.model).eval().requires_grad_(False)  # evaluates any Params
        self.used = used_parameters(self.model, self.needs.taps, self.data.x_train[:2])
        self.trainable = self._trainable(self.strategy.trainable)
        params = {n for n, _ in self.model.named_parameters()}
        # what local training changes: the only tensors uploaded, checked and aggregated (buffers:
        # BatchNorm's)
        self.trained = self.trainable + tuple(k for k in self.model.state_dict() if k not in params)
        self.optimizer = OptimizerSpec.from_config(cfg).validate()
        self.global_params: Params = clone_params(self.model.state_dict())
        self.layout = {k: v for k, v in self.model.state_dict().items() if v.dim() == 4}  # conv weights' strides
        self.client_idx = [torch.as_tensor(np.array(ix), dtype=torch.long, device=self.device)
                           for ix in self.partition.client_indices]
        self.client_state: dict[int, dict[str, Any]] = {c: {} for c in range(self.n_clients)}
        self.optimizer_states: dict[int, dict[str, Any]] = {}  # needs.persistent_optimizer: per client
        self.visited: set[int] = set()
        self.history: list[dict[str, Any]] = []
        self.round = 0
        self.executor: Executor = self._make_executor(self.task())
        self.executor_name = self.executor.name
        self._finetune_executor: Executor | None = None
        self.finetune_log: dict[str, list[float]] = {}  # the last fine-tuning's per-client lr and losses

    def _trainable(self, keep: Callable[[str], bool]) -> tuple[str, ...]:
        return tuple(n for n, _ in self.model.named_parameters() if n in self.used and keep(n))

    def _make_executor(self, task: LocalTask) -> Executor:
        c = self.cfg
        return make_executor(task, self.device, c.executor, chunk_size=c.chunk_size, compile=c.compile,
                             cuda_graph=c.cuda_graph)

    # -------------------------------------------------------------------------------- local training
    def task(self, **changes: Any) -> LocalTask:
        """The round's local training (``changes``: e.g. another trainable set for fine-tuning)."""
        c, s = self.cfg, self.strategy
        t = LocalTask(model=self.model, ref_model=self.ref_model, data=self.data, augment=self.augment,
                      client_indices=self.client_idx, trainable=self.trainable, optimizer=self.optimizer,
                      epochs=c.local_epochs, batch_size=c.batch_size, drop_last=c.drop_last, seed=c.seed,
                      global_params=self.global_params, needs=self.needs, penalty=s.penalty,
                      correction=s.correction, precision=c.precision, what=f"strategy {s.name!r}")
        return dataclasses.replace(t, **changes) if changes else t

    def context(self, cid: int, rnd: int) -> ClientContext:
        n = len(self.client_idx[cid])
        steps = self.cfg.local_epochs * num_batches(n, self.cfg.batch_size, self.cfg.drop_last)
        lr = round_lr(self.cfg, rnd, self.strategy.lr_rounding)
        return ClientContext(cid=cid, round=rnd, n_samples=n, steps=steps, lr=lr,
                             first_visit=cid not in self.visited, state=self.client_state[cid],
                             trainable=self.trainable,
                             features=lambda params, taps, k, shared=False: self.features(cid, rnd, params, taps, k,
                                                                                          shared))

    @torch.no_grad()
    def features(self, cid: int, rnd: int, params: Params, taps: tuple[str, ...] | list[str], n: int,
                 shared: bool = False) -> list[Tensor]:
        """The flattened taps (eval mode) of ``params`` on ``n`` training samples drawn by a key of
        (seed, round, client): client ``cid``'s own (all of them if it has fewer), or with
        ``shared`` the same ``n`` samples of the whole training set for every client of the
        round."""
        pool = torch.arange(len(self.data.y_train), device=self.device) if shared else self.client_idx[cid]
        g = torch.Generator().manual_seed(rng_key(self.cfg.seed, rnd, 0xFEA, 0 if shared else cid + 1))
        pick = pool[torch.randperm(len(pool), generator=g)[:n].to(self.device)]
        return representations(self.ref_model, in_layout(params, self.layout), self.data.x_train[pick], tuple(taps))

    def train(self, ctxs: list[ClientContext], starts: list[Params]) -> list[ClientResult]:
        """Local training of the clients ``ctxs`` from ``starts`` (what a round runs), checked for
        NaN/inf."""
        s, g = self.strategy, self.global_params
        jobs = [ClientJob(ctx=c, start=st, refs=s.references(c, g) if self.needs.references else {},
                          tensors=s.client_tensors(c, g) if self.needs.tensors else {},
                          opt_state=self.optimizer_states.get(c.cid) if self.needs.persistent_optimizer else None)
                for c, st in zip(ctxs, starts)]
        results = self.executor(self.task(), jobs)
        for c, r in zip(ctxs, results):
            bad = first_non_finite({k: r.params[k] for k in self.trained})
            if bad is not None:
                raise NonFiniteLossError(
                    f"Client {c.cid} uploaded a non-finite {bad!r} after round {c.round + 1} (strategy {s.name!r}, "
                    f"lr {c.lr}, mean training loss {r.loss}). Lower the learning rate or the regularization "
                    f"weight (mu), or check the dataset's normalization.")
            if r.opt_state is not None:
                self.optimizer_states[c.cid] = r.opt_state
        return results

    # ------------------------------------------------------------------------------------- evaluation
    @torch.no_grad()
    def evaluate(self, params: Params, x: Tensor, y: Tensor, batch_size: int | None = None,
                 precision: str = "fp32") -> tuple[float, float]:
        """(accuracy, mean cross-entropy) of ``params`` on ``(x, y)``, in eval mode, in batches of
        ``batch_size`` (default: :data:`EVAL_BATCH` for the device), in float32 or under bf16
        autocast (``precision``; the logits are float32 either way). A run evaluates in the
        precision it trains in (``cfg.precision``): bf16 evaluation of bf16-trained models gave the
        float32 accuracy to within 0.1 points (``python benchmarks/engine.py --eval-precision``,
        benchmarks/RESULTS.md)."""
        return self._scores(params, x, y, batch_size, precision)

    @torch.no_grad()
    def _scores(self, params: Params, x: Tensor, y: Tensor, batch_size: int | None = None,
                precision: str = "fp32") -> tuple[float, float]:
        """:meth:`evaluate`'s computation (also used on training splits, which are not
        evaluations)."""
        if len(y) == 0:
            return float("nan"), float("nan")
        batch_size = batch_size or EVAL_BATCH.get(self.device.type, 2048)
        params = in_layout(params, self.layout)
        correct = torch.zeros((), device=self.device)
        loss = torch.zeros((), device=self.device)
        amp = precision == "bf16"
        for i in range(0, len(y), batch_size):
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=amp):
                logits = functional_call(self.ref_model, params, (x[i:i + batch_size],)).float()
            yb = y[i:i + batch_size]
            correct += (logits.argmax(1) == yb).sum()
            loss += F.cross_entropy(logits, yb, reduction="sum")
        return float(correct) / len(y), float(loss) / len(y)

    def personalize(self, cids: list[int], finetune: bool = True, cached: bool = True) -> list[Params]:
        """Each client's model for its personalized evaluation: ``strategy.eval_params``, then
        (``finetune``) the strategy's fine-tuning (``strategy.finetune()``) on the client's training
        split: its ladder of learning rates and the rule that keeps one model
        (:func:`fedlib.finetune.select`), on the head's cached features where the model allows
        (:class:`~fedlib.finetune.HeadTuner`), else run by the executor. ``self.finetune_log``
        records, per client, the learning rate kept (0.0: un-fine-tuned) and the training loss
        before and after. ``cached=False``: through the executor even where the head could train on
        cached features."""
        s = self.strategy
        starts = [in_layout(s.eval_params(cid, self.global_params, self.client_state[cid]), self.layout)
                  for cid in cids]
        ft = s.finetune() if finetune else None
        if ft is None:
            return starts
        c = self.cfg
        spec = self.optimizer.replace(**{k: v for k, v in dict(lr=ft.lr, momentum=ft.momentum,
                                                               weight_decay=ft.weight_decay).items() if v is not None})
        bs, trainable = ft.batch_size or c.batch_size, self._trainable(ft.trainable)
        if cached and head_path_problem(self.model, ft.features, trainable, self.augment, c.precision) is None:
            head = HeadTuner(self.model, str(ft.features), trainable, spec, ft.epochs, bs, c.drop_last,
                             self.data.x_train, self.data.y_train, self.client_idx, str(self.augment), c.seed,
                             self.round)
            before = [head.loss(cid, p) for cid, p in zip(cids, starts)]

            def tune(todo: list[int], lr: float) -> list[Tuned]:
                return head.many([(cids[i], starts[i], lr) for i in todo])

            def ladder(todo: list[int], lrs: list[float]) -> dict[float, list[Tuned]]:
                got = head.many([(cids[i], starts[i], lr) for lr in lrs for i in todo])
                return {lr: got[k * len(todo):(k + 1) * len(todo)] for k, lr in enumerate(lrs)}
        else:
            ladder = None
            before = [self.train_loss(cid, p) for cid, p in zip(cids, starts)]
            tune = self._executor_tuner(cids, starts, spec, trainable, ft.epochs, bs)

        def why(i: int, what: str, lowest: float) -> str:
            return (f"Client {cids[i]}'s fine-tuned {what} is non-finite (fine-tuning of strategy {s.name!r} for a "
                    f"personalized evaluation: lr {spec.lr} to {lowest}, {ft.epochs} epoch(s), batch {bs}), so it "
                    f"has no personalized accuracy. Lower the fine-tuning learning rate (strategy_kw['ft_lr']).")

        tuned, self.finetune_log = select(ft.select, ft.backtrack, float(spec.lr), before, tune, starts, why, ladder)
        return tuned

    def _executor_tuner(self, cids: list[int], starts: list[Params], spec: OptimizerSpec, trainable: tuple[str, ...],
                        epochs: int, bs: int) -> Callable[[list[int], float], list[Tuned]]:
        """Fine-tuning run by the executor (the whole model's forward pass at every step)."""
        task = self.task(trainable=trainable, optimizer=spec, epochs=epochs, batch_size=bs, needs=Needs(),
                         penalty=None, correction=None, stream=1, what=f"fine-tuning of {self.strategy.name!r}")
        if self._finetune_executor is None:
            self._finetune_executor = self._make_executor(task)

        def tune(todo: list[int], lr: float) -> list[Tuned]:
            """Clients ``cids[i]`` (i in ``todo``) fine-tuned at ``lr``; a non-finite model is
            replaced by a str."""
            ctxs = [ClientContext(cid=cids[i], round=self.round, n_samples=len(self.client_idx[cids[i]]),
                                  steps=epochs * num_batches(len(self.client_idx[cids[i]]), bs, self.cfg.drop_last),
                                  lr=lr, first_visit=False, state={}) for i in todo]
            try:
                results = self._finetune_executor(task, [ClientJob(ctx=x, start=starts[i]) for x, i in zip(ctxs, todo)])
            except NonFiniteLossError:  # the executor stops at the first such client: retry them one by one
                return ["model's training loss"] if len(todo) == 1 else [t for i in todo for t in tune([i], lr)]
            out: list[Tuned] = []
            for i, r in zip(todo, results):
                bad = first_non_finite(r.params)
                loss = self.train_loss(cids[i], r.params) if bad is None else math.nan
                out.append((r.params, loss) if math.isfinite(loss) else repr(bad or "model's training loss"))
            return out
        return tune

    def train_loss(self, cid: int, params: Params) -> float:
        """Mean cross-entropy of ``params`` (eval mode) on client ``cid``'s whole training split,
        unaugmented."""
        ix = self.client_idx[cid]
        return self._scores(params, self.data.x_train[ix], self.data.y_train[ix], precision=self.cfg.precision)[1]

    def personal_evaluation(self) -> dict[str, Any]:
        """Each client's personalized model on its own test split: unweighted mean and std over
        clients (after the strategy's fine-tuning; ``personal_noft_*``: before it, when the strategy
        fine-tunes). A fine-tuning strategy adds ``personal_ft_lr`` (each client's fine-tuning lr,
        :meth:`personalize`) and the mean loss on the clients' training splits after and before
        fine-tuning (``personal_train_loss_mean``, ``..._noft_...``)."""
        if self.partition.test_indices is None:
            raise ConfigError(no_personal_tests(self.cfg, self.strategy.centralized), ["personal_eval"])
        tests = self.partition.test_indices
        cids = [cid for cid, t in enumerate(tests) if len(t)]
        out: dict[str, Any] = {}
        variants = [("personal_acc", True)] + ([("personal_noft_acc", False)] if self.strategy.finetune() else [])
        for name, ft in variants:
            accs = []
            for cid, params in zip(cids, self.personalize(cids, finetune=ft)):
                t = torch.as_tensor(np.array(tests[cid]), dtype=torch.long, device=self.device)
                accs.append(self.evaluate(params, self.data.x_test[t], self.data.y_test[t],
                                          precision=self.cfg.precision)[0])
            out.update({f"{name}_mean": float(np.mean(accs)), f"{name}_std": float(np.std(accs))})
            if ft and self.strategy.finetune():  # per client (in client order): the lr kept, 0.0 if none
                log = self.finetune_log
                out.update(personal_ft_lr=log["lr"], personal_train_loss_mean=float(np.mean(log["loss_after"])),
                           personal_noft_train_loss_mean=float(np.mean(log["loss_before"])))
        return out

    # ---------------------------------------------------------------------------------------- rounds
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
        uploads = [{k: u[k] for k in self.trained} for u in uploads]  # what training changed, nothing else
        new, metrics = strat.aggregate(rnd, self.global_params, uploads, weights, ctxs)
        new = in_layout({k: new[k] for k in self.trained}, self.layout)  # the model's memory format, as trained
        bad = first_non_finite(new)
        if bad is not None:
            raise NonFiniteLossError(f"The aggregated global model's {bad!r} is non-finite after round {rnd + 1} "
                                     f"(strategy {strat.name!r}); the server keeps the previous global model.")
        self.global_params = {**self.global_params, **new}  # the untrained tensors: the same, untouched
        train_time = time.perf_counter() - t0

        entry: dict[str, Any] = {
            "round": rnd + 1, "lr": ctxs[0].lr, "clients": [c.cid for c in ctxs],
            "train_loss": float(sum(w * r.loss for w, r in zip(weights.tolist(), results))),
            "client_loss": [r.loss for r in results],  # per sampled client, in the order of "clients"
            "train_time_s": train_time, **metrics,
        }
        if (rnd + 1) % cfg.eval_every == 0 or rnd + 1 == cfg.rounds:
            acc, loss = self.evaluate(self.global_params, self.data.x_test, self.data.y_test,
                                      precision=self.cfg.precision)
            if math.isnan(loss) or math.isinf(loss):  # finite but huge weights overflow the logits
                raise NonFiniteLossError(
                    f"The global model's test loss is {loss} after round {rnd + 1} (strategy {strat.name!r}, lr "
                    f"{ctxs[0].lr}): training diverged. Lower the learning rate or the regularization weight (mu).")
            entry.update(test_acc=acc, test_loss=loss)
            if cfg.personal_eval and self.partition.test_indices is not None:
                entry.update(self.personal_evaluation())
        entry["time_s"] = time.perf_counter() - t0
        return entry

    def run(self, checkpoint: str | Path | None = None,
            callback: Callable[["Engine", dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
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
                if checkpoint is not None and every and self.round % every == 0 and self.round < self.cfg.rounds:
                    self.save_checkpoint(checkpoint)
                if callback is not None:
                    callback(self, entry)
        finally:
            bar.close()
        return self.history

    # ----------------------------------------------------------------------------------- checkpoints
    def state(self) -> dict[str, Any]:
        return tree_to({"key": self.cfg.key(), "round": self.round, "global_params": self.global_params,
                        "client_state": self.client_state, "optimizer_states": self.optimizer_states,
                        "visited": sorted(self.visited), "history": self.history,
                        "strategy": self.strategy.state_dict()}, "cpu")

    def save_checkpoint(self, path: str | Path) -> None:
        """Atomically write the engine's state."""
        atomic_save(Path(path), self.state())

    def load_checkpoint(self, path: str | Path) -> None:
        st = torch.load(path, map_location="cpu", weights_only=False)
        if st["key"] != self.cfg.key():
            raise ValueError(f"Checkpoint {path} belongs to config {st['key']}, not {self.cfg.key()}; delete it.")
        st = tree_to(st, self.device)
        self.round = st["round"]
        self.global_params = in_layout(st["global_params"], self.layout)
        self.client_state = {int(c): s for c, s in st["client_state"].items()}
        self.optimizer_states = {int(c): s for c, s in st.get("optimizer_states", {}).items()}
        self.visited = set(st["visited"])
        self.history = list(st["history"])
        self.strategy.load_state_dict(st["strategy"])
