"""Local training, defined once: what a client's step needs, computes and returns.

Both executors (:mod:`fedlib.executors`) train clients through the definitions here, in the spirit
of fedjax's single ``client_step``:

* :class:`Needs` — what a strategy's local step reads, declared in one place by the strategy: the
  local model's taps, the frozen reference models whose taps it compares against (by name; the
  strategy supplies their parameters per client), the per-client tensors it carries into the step
  (MOON's previous model is a reference, SCAFFOLD's ``c_i`` a tensor), whether it reads the global
  parameters, and whether its per-sample terms need unpadded batches.
* :class:`LocalTask` — one kind of local training (which parameters train, with which optimizer, for
  how many epochs of which batches, with which penalty), handed to an executor; never the engine.
* :class:`ClientJob` / :class:`ClientResult` — one client's inputs and outputs in one call.
* :func:`local_loss` — the one loss: cross-entropy under the run's precision (a masked mean over
  real samples when batches are padded) plus the strategy's penalty on a :class:`LocalBatch`.

A strategy's ``penalty`` and ``correction`` see one client; the vectorized executor runs them under
``torch.func.vmap``, so they must be pure tensor code (no ``.item()``, no in-place updates of
inputs) and must not read per-client scalars from ``ctx`` (inside ``vmap`` they get one chunk-level
context whose ``round`` and ``lr`` are real and whose per-client fields are sentinels; per-client
values travel as declared tensors instead).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call

from fedlib.optim import OptimizerSpec
from fedlib.params import Params

__all__ = [
    "ClientContext", "Needs", "LocalBatch", "LocalTask", "ClientJob", "ClientResult", "local_loss",
    "forward"
]


@dataclass
class ClientContext:
    """What a strategy may know about one client in one round."""

    cid: int
    round: int
    n_samples: int
    steps: int  # local optimizer steps this round (K in SCAFFOLD)
    lr: float
    first_visit: bool  # True the first time this client is sampled (no previous local model yet)
    # persistent per-client state, owned by the strategy
    state: dict[str, Any] = field(default_factory=dict)
    # the parameters this client trains (e.g. what SCAFFOLD's c_i covers)
    trainable: tuple[str, ...] = ()
    # features(params, taps, n, shared=False): the flattened taps of a model with ``params`` (eval
    # mode) on n of this client's own training samples (``shared=True``: on n samples of the whole
    # training set, the same for every client of the round), drawn by a key of (seed, round,
    # client); set by the engine outside vmap
    features: Callable[..., list[Tensor]] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Needs:
    """What a strategy's local step reads. Executors provide exactly this, generically (no strategy
    names)."""

    # local-model taps passed to ``penalty`` (model tap names, in this order)
    taps: tuple[str, ...] = ()
    # frozen models whose taps ``penalty`` sees; ``Strategy.references`` gives
    references: tuple[str, ...] = ()
    #                                   their parameters per client (eval mode, no gradient)
    # per-client tensors from ``Strategy.client_tensors`` (stacked in the executor)
    tensors: tuple[str, ...] = ()
    global_params: bool = False  # ``penalty`` reads ``LocalBatch.global_params``
    # per-sample terms: never pad a batch (implied by taps and references)
    exact_batches: bool = False
    vectorizable: bool = True  # penalty/correction are pure tensor code that runs under vmap
    persistent_optimizer: bool = False  # each client's optimizer state survives between rounds

    @property
    def unpadded(self) -> bool:
        return bool(self.exact_batches or self.taps or self.references)


@dataclass
class LocalBatch:
    """What a penalty sees for one client's mini-batch."""

    x: Tensor
    y: Tensor
    params: Params  # the client's trainable parameters (differentiable)
    global_params: Params  # the round's global model
    taps: list[Tensor]  # the local model's taps (``Needs.taps``)
    refs: dict[str, list[Tensor]]  # each reference model's taps on ``x``
    tensors: dict[str, Tensor]  # the client's declared tensors (``Needs.tensors``)


@dataclass(frozen=True)
class LocalTask:
    """One kind of local training. The executors know nothing else about the run."""

    # the architecture (executors read its structure and memory format, never its weights)
    model: nn.Module
    ref_model: nn.Module  # an eval-mode, gradient-free copy that evaluates reference models
    data: Any  # a fedlib.data.FedDataset on the device
    augment: str
    client_indices: Sequence[Tensor]  # each client's training indices (device tensors)
    # parameters trained in this task; the rest come back as each client started
    trainable: tuple[str, ...]
    optimizer: OptimizerSpec
    epochs: int
    batch_size: int
    drop_last: bool
    seed: int
    global_params: Params
    needs: Needs = Needs()
    penalty: Callable[[ClientContext, LocalBatch], Tensor | None] | None = None
    # p -= lr·corr each step
    correction: Callable[[ClientContext, dict[str, Tensor]], Params | None] | None = None
    precision: str = "fp32"
    stream: int = 0  # randomness stream of the batch plan (0: federated training)
    what: str = ""  # named in error messages, e.g. "strategy 'fedprox'"

    @property
    def amp(self) -> bool:
        return self.precision == "bf16"


@dataclass
class ClientJob:
    """One client's inputs in one executor call."""

    ctx: ClientContext
    start: Params
    # reference models by ``Needs.references`` name
    refs: dict[str, Params] = field(default_factory=dict)
    tensors: dict[str, Tensor] = field(default_factory=dict)  # ``Needs.tensors``
    # the client's optimizer state (``Needs.persistent_optimizer``)
    opt_state: dict[str, Any] | None = None


@dataclass
class ClientResult:
    params: Params  # parameters and buffers after local training
    loss: float  # mean training loss over the samples seen
    opt_state: dict[str, Any] | None = None


def forward(model: nn.Module, params: Params | None, x: Tensor, taps: tuple[str, ...], amp: bool,
            amp_cache: bool = True) -> tuple[Tensor, list[Tensor]]:
    """Logits (float32 under bf16) and taps of ``model`` with ``params`` on ``x`` (``None``: the
    model's own tensors, called directly rather than swapped in by ``functional_call``)."""
    kw = {"taps": taps} if taps else {}
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=amp, cache_enabled=amp_cache):
        out = model(x, **kw) if params is None else functional_call(model, params, (x,), kw)
    logits, tap_out = out if taps else (out, [])
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    return logits, tap_out


def local_loss(task: LocalTask, ctx: ClientContext, model: nn.Module, params: Params | None,
               train: Params, x: Tensor, y: Tensor, mask: Tensor | None, refs: dict[str,
                                                                                    list[Tensor]],
               tensors: dict[str, Tensor], global_params: Params, amp_cache: bool = True) -> Tensor:
    """One client's training loss on one batch: cross-entropy (mean over the real samples: ``mask``
    marks them when the batch is padded) plus ``task.penalty``. ``params``: every tensor the forward
    pass needs (``None``: the model's own); ``train``: the differentiable ones, as the penalty sees
    them."""
    logits, taps = forward(model, params, x, task.needs.taps, task.amp, amp_cache)
    if mask is None:
        loss = F.cross_entropy(logits, y)
    else:  # clamp: a client with no real sample this step (static path) has loss 0, not 0/0
        loss = (F.cross_entropy(logits, y, reduction="none") * mask).sum() / mask.sum().clamp_min(1)
    if task.penalty is not None:
        extra = task.penalty(
            ctx,
            LocalBatch(x=x, y=y, params=train, global_params=global_params, taps=taps, refs=refs,
                       tensors=tensors))
        if extra is not None:
            loss = loss + extra
    return loss
