"""Evaluation: a model's accuracy and loss on a split (:func:`scores`), and the personalized
evaluation (:class:`PersonalEvaluation`): each client's model from the strategy, fine-tuned on the
client's training split (:mod:`fedlib.finetune`) and scored on its own test split.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call

from fedlib.config import Config, ConfigError
from fedlib.executors.fast.layout import in_layout
from fedlib.finetune import HeadTuner, Tuned, head_path_problem, select
from fedlib.local import ClientContext, ClientJob, Needs
from fedlib.optim import OptimizerSpec
from fedlib.params import Params, first_non_finite
from fedlib.partition import PERSONAL_SCHEMES
from fedlib.schedule import NonFiniteLossError, num_batches

__all__ = ["EVAL_BATCH", "scores", "no_personal_tests", "PersonalEvaluation"]

# Test-set evaluation batch per device type (the CPU's: fastest measured, benchmarks/RESULTS.md).
EVAL_BATCH = {"cpu": 512, "cuda": 2048}


@torch.no_grad()
def scores(model: nn.Module, params: Params, x: Tensor, y: Tensor, layout: Params,
           batch_size: int | None = None, precision: str = "fp32") -> tuple[float, float]:
    """(accuracy, mean cross-entropy) of ``params`` on ``(x, y)`` with ``model`` (in eval mode), in
    batches of ``batch_size`` (default: :data:`EVAL_BATCH` for the device), in float32 or under bf16
    autocast (``precision``; the logits are float32 either way); ``layout``: the memory format of
    each conv weight (:func:`~fedlib.executors.fast.layout.in_layout`)."""
    device = x.device
    if len(y) == 0:
        return float("nan"), float("nan")
    batch_size = batch_size or EVAL_BATCH.get(device.type, 2048)
    params = in_layout(params, layout)
    correct = torch.zeros((), device=device)
    loss = torch.zeros((), device=device)
    amp = precision == "bf16"
    for i in range(0, len(y), batch_size):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            logits = functional_call(model, params, (x[i:i + batch_size],)).float()
        yb = y[i:i + batch_size]
        correct += (logits.argmax(1) == yb).sum()
        loss += F.cross_entropy(logits, yb, reduction="sum")
    return float(correct) / len(y), float(loss) / len(y)


def no_personal_tests(cfg: Config, centralized: bool) -> str:
    """The error for a personalized evaluation on a partition without per-client test splits."""
    what = ("the centralized strategy's one client" if centralized
            else f"partition {cfg.partition!r}")
    return (f"personal_eval=True needs per-client test splits, and {what} has none. Use a "
            f"partition that makes them ({', '.join(repr(s) for s in PERSONAL_SCHEMES)}; or pass "
            "Engine(partition=...) a Partition with test_indices), or set personal_eval=False.")


class PersonalEvaluation:
    """The :class:`~fedlib.engine.Engine`'s personalized evaluation (its methods read the engine's
    strategy, data, model and executor)."""

    def personalize(self, cids: list[int], finetune: bool = True,
                    cached: bool = True) -> list[Params]:
        """Each client's model for its personalized evaluation: ``strategy.eval_params``, then
        (``finetune``) the strategy's fine-tuning (``strategy.finetune()``) on the client's training
        split: its ladder of learning rates and the rule that keeps one model
        (:func:`fedlib.finetune.select`), on the head's cached features where the model allows
        (:class:`~fedlib.finetune.HeadTuner`), else run by the executor. ``self.finetune_log``
        records, per client, the learning rate kept (0.0: un-fine-tuned) and the training loss
        before and after. ``cached=False``: through the executor even where the head could train on
        cached features."""
        s = self.strategy
        g, states = self.global_params, self.client_state
        starts = [in_layout(s.eval_params(cid, g, states[cid]), self.layout) for cid in cids]
        ft = s.finetune() if finetune else None
        if ft is None:
            return starts
        c = self.cfg
        given = dict(lr=ft.lr, momentum=ft.momentum, weight_decay=ft.weight_decay)
        spec = self.optimizer.replace(**{k: v for k, v in given.items() if v is not None})
        bs, trainable = ft.batch_size or c.batch_size, self._trainable(ft.trainable)
        on_features = cached and head_path_problem(self.model, ft.features, trainable,
                                                   self.augment, c.precision) is None
        if on_features:
            head = HeadTuner(self.model, str(ft.features), trainable, spec, ft.epochs, bs,
                             c.drop_last, self.data.x_train, self.data.y_train, self.client_idx,
                             str(self.augment), c.seed, self.round)
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
            return (f"Client {cids[i]}'s fine-tuned {what} is non-finite (fine-tuning of strategy "
                    f"{s.name!r} for a personalized evaluation: lr {spec.lr} to {lowest}, "
                    f"{ft.epochs} epoch(s), batch {bs}), so it has no personalized accuracy. Lower "
                    "the fine-tuning learning rate (strategy_kw['ft_lr']).")

        tuned, self.finetune_log = select(ft.select, ft.backtrack, float(spec.lr), before, tune,
                                          starts, why, ladder)
        return tuned

    def _executor_tuner(self, cids: list[int], starts: list[Params], spec: OptimizerSpec,
                        trainable: tuple[str, ...], epochs: int,
                        bs: int) -> Callable[[list[int], float], list[Tuned]]:
        """Fine-tuning run by the executor (the whole model's forward pass at every step)."""
        task = self.task(trainable=trainable, optimizer=spec, epochs=epochs, batch_size=bs,
                         needs=Needs(), penalty=None, correction=None, stream=1,
                         what=f"fine-tuning of {self.strategy.name!r}")
        if self._finetune_executor is None:
            self._finetune_executor = self._make_executor(task)

        def tune(todo: list[int], lr: float) -> list[Tuned]:
            """Clients ``cids[i]`` (i in ``todo``) fine-tuned at ``lr``; a non-finite model is
            replaced by a str."""
            sizes = [len(self.client_idx[cids[i]]) for i in todo]
            ctxs = [ClientContext(cid=cids[i], round=self.round, n_samples=n,
                                  steps=epochs * num_batches(n, bs, self.cfg.drop_last), lr=lr,
                                  first_visit=False, state={}) for i, n in zip(todo, sizes)]
            jobs = [ClientJob(ctx=x, start=starts[i]) for x, i in zip(ctxs, todo)]
            try:
                results = self._finetune_executor(task, jobs)
            except NonFiniteLossError:  # the executor stops at the first such client: retry each
                if len(todo) == 1:
                    return ["model's training loss"]
                return [t for i in todo for t in tune([i], lr)]
            out: list[Tuned] = []
            for i, r in zip(todo, results):
                bad = first_non_finite(r.params)
                loss = self.train_loss(cids[i], r.params) if bad is None else math.nan
                finite = math.isfinite(loss)
                out.append((r.params, loss) if finite else repr(bad or "model's training loss"))
            return out
        return tune

    def train_loss(self, cid: int, params: Params) -> float:
        """Mean cross-entropy of ``params`` (eval mode) on client ``cid``'s whole training split,
        unaugmented."""
        ix = self.client_idx[cid]
        return scores(self.ref_model, params, self.data.x_train[ix], self.data.y_train[ix],
                      self.layout, precision=self.cfg.precision)[1]

    def personal_evaluation(self) -> dict[str, Any]:
        """Each client's personalized model on its own test split: unweighted mean and std over
        clients (after the strategy's fine-tuning; ``personal_noft_*``: before it, when the strategy
        fine-tunes). A fine-tuning strategy adds ``personal_ft_lr`` (each client's fine-tuning lr,
        :meth:`personalize`) and the mean loss on the clients' training splits after and before
        fine-tuning (``personal_train_loss_mean``, ``..._noft_...``)."""
        if self.partition.test_indices is None:
            raise ConfigError(no_personal_tests(self.cfg, self.strategy.centralized),
                              ["personal_eval"])
        tests = self.partition.test_indices
        cids = [cid for cid, t in enumerate(tests) if len(t)]
        out: dict[str, Any] = {}
        tunes = self.strategy.finetune() is not None
        variants = [("personal_acc", True)] + ([("personal_noft_acc", False)] if tunes else [])
        for name, ft in variants:
            accs = []
            for cid, params in zip(cids, self.personalize(cids, finetune=ft)):
                t = torch.as_tensor(np.array(tests[cid]), dtype=torch.long, device=self.device)
                accs.append(self.evaluate(params, self.data.x_test[t], self.data.y_test[t],
                                          precision=self.cfg.precision)[0])
            out.update({f"{name}_mean": float(np.mean(accs)), f"{name}_std": float(np.std(accs))})
            if ft and tunes:  # per client (in client order): the lr kept, 0.0 if none
                log = self.finetune_log
                out.update(personal_ft_lr=log["lr"],
                           personal_train_loss_mean=float(np.mean(log["loss_after"])),
                           personal_noft_train_loss_mean=float(np.mean(log["loss_before"])))
        return out
