"""The Strategy interface: a strategy declares what its local step needs and overrides named hooks;
the engine owns every loop and the executors (:mod:`fedlib.executors`) run local training without
knowing the strategy.

A strategy is FedAvg plus whatever its paper changes. Declarations (:class:`~fedlib.local.Needs`,
one place): ``needs.taps``, ``needs.references``, ``needs.tensors``, ``needs.global_params``,
``needs.exact_batches``, ``needs.vectorizable``, ``needs.persistent_optimizer``; ``centralized``
(one client holds all the data); and ``lr_rounding`` (how ``Config.lr_milestones`` fall on rounds:
:func:`fedlib.schedule.round_lr`).

Options (``Config.strategy_kw``, typed): each strategy declares ``Options``, a nested frozen
dataclass (:class:`StrategyOptions`) whose fields are its options with their types, defaults and
valid ranges, checked once, where they are built (a Config builds them once per run:
``Config.strategy_options()``). The strategy reads them as ``self.options`` (``self.options.mu``),
fixed from then on: the dataclass is frozen.

Hooks, in the order the engine calls them each round::

    setup(model, cfg)
        once: resolve taps / frozen parameters from the model (may set needs)
    trainable(name)
        whether a parameter trains during federated training
    client_start(ctx, global_params)
        the parameters a sampled client starts from (default: the global ones)
    references(ctx, global_params)
        {name: Params} of the frozen models in needs.references, per client
    client_tensors(ctx, global_params)
        {name: Tensor} for needs.tensors, per client (e.g. SCAFFOLD's c, c_i)
    penalty(ctx, batch)
        a term added to the cross-entropy of every local batch (LocalBatch)
    correction(ctx, tensors)
        Params added to every local update: p ← p − lr · correction
    client_end(ctx, start, params)
        what the client uploads; saves the strategy's per-client state
    aggregate(rnd, global_params, uploads, weights, ctxs)
        (params, metrics): the server update (default: the sample-size-weighted mean, McMahan et al.
        2017) of the uploads, which hold only the tensors local training changes (the engine keeps
        the rest), and what it did, a JSON-able dict merged into the round's history entry (e.g.
        FedER's per-layer ranks and weights; default {}); may keep one model per client
    finetune()
        a FineTune for personalized evaluation, or None
    eval_params(cid, global_params, state)
        the parameters client ``cid`` starts its personalized evaluation from

Per-client state lives in ``ctx.state`` (a dict the engine keeps and checkpoints: tensors, Params,
numbers); server state in ``state_dict`` / ``load_state_dict``.

``docs/design.md`` tabulates which hooks and declarations each of the twelve strategies uses;
``tests/test_strategy_interface.py`` exercises the least obvious shapes in both executors: a
per-client tensor carried across rounds into the penalty and the update (SCAFFOLD-shaped) and
body-only training followed by per-client head fine-tuning before evaluation (FedBABU-shaped).
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import torch
from torch import Tensor

from fedlib.local import ClientContext, LocalBatch, Needs
from fedlib.options import TypedOptions
from fedlib.params import Params

__all__ = ["Strategy", "StrategyOptions", "FineTune", "SELECTS", "LR_ROUNDINGS", "ClientContext",
           "LocalBatch", "Needs", "Params", "weighted_average"]


SELECTS = ("first", "best")  # FineTune.select (fedlib.finetune.select)
LR_ROUNDINGS = ("ceil", "floor")  # Strategy.lr_rounding (fedlib.schedule.round_lr)


@dataclass(frozen=True)
class FineTune:
    """Fine-tuning before a personalized evaluation (FedBABU: the head, on the client's training
    split; ``None``: the run's value). ``backtrack``: the ladder lr/10, lr/100, ...; ``select``: how
    a client's model is kept from it; ``features``: the main-path tap that is the fine-tuned layers'
    only input, if one is (:mod:`fedlib.finetune`)."""

    trainable: Callable[[str], bool]
    epochs: int = 1
    lr: float | None = None
    momentum: float | None = None
    weight_decay: float | None = None
    batch_size: int | None = None
    backtrack: int = 0
    select: str = "first"
    features: str | None = None


@dataclass(frozen=True)
class StrategyOptions(TypedOptions):
    """A strategy's options (``Config.strategy_kw``, typed): every strategy declares its own as a
    nested frozen dataclass ``Options``, each field typed by its annotation and ranged by
    :func:`fedlib.options.option`, checked once, when it is built
    (:class:`fedlib.options.TypedOptions`)."""

    FIELD: ClassVar[str] = "strategy_kw"
    strategy: ClassVar[str] = "fedavg"  # the ``Strategy.name`` of the strategy that takes them

    @classmethod
    def owner(cls) -> str:
        return f"strategy {cls.strategy!r}"

    def finetune_momentum(self) -> float | None:
        """The momentum of the fine-tuning these options ask for before a personalized evaluation
        (None: no fine-tuning, or the run's momentum); Config validation checks the optimizer's
        options against it."""
        return None


class Strategy:
    """FedAvg (McMahan et al. 2017). Subclasses override only what their paper changes."""

    name = "fedavg"
    needs = Needs()
    centralized = False  # one client holds the whole training set (the centralized baseline)
    # False: only the personalized evaluation is a result (personal_eval=True)
    trains_global_model = True
    # lr milestone m decays from round ⌈m · rounds⌉ ("floor": ⌊m · rounds⌋; fedlib.schedule)
    lr_rounding = "ceil"

    @dataclass(frozen=True)
    class Options(StrategyOptions):
        """FedAvg takes no options."""

    options: StrategyOptions

    def __init_subclass__(cls, **kw: Any) -> None:
        """Names the strategy's ``Options`` after it (for messages); a strategy that declares none
        takes its parent's options under its own name. Options are never ``__init__`` parameters: an
        ``__init__`` takes ``(*args, **kw)`` on to this one (and sets up state)."""
        super().__init_subclass__(**kw)
        init = vars(cls).get("__init__")
        named = [p.name for p in list(inspect.signature(init).parameters.values())[1:]
                 if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)] if init else []
        if named:
            raise TypeError(f"strategy {cls.name!r}: declare {named} as fields of a nested frozen "
                            f"dataclass Options(StrategyOptions), not as __init__ parameters.")
        if "Options" not in vars(cls):
            cls.Options = dataclasses.make_dataclass(  # type: ignore[misc]
                "Options", [], bases=(cls.Options,), frozen=True,
                namespace={"__module__": cls.__module__,
                           "__qualname__": f"{cls.__qualname__}.Options"})
        cls.Options.strategy = cls.name

    def __init__(self, *args: Any, **kw: Any) -> None:
        """The strategy with its ``Options``: an object already built
        (``Config.strategy_options()``), or the options by position and name, built (and so checked)
        here."""
        if len(args) == 1 and not kw and isinstance(args[0], StrategyOptions):
            if type(args[0]) is not self.Options:
                raise TypeError(f"strategy {self.name!r} takes {self.Options.__qualname__}, not "
                                f"{type(args[0]).__qualname__}.")
            self.options = args[0]
        else:
            self.options = self.Options.build(*args, **kw)

    def setup(self, model: torch.nn.Module, cfg: Any) -> None:
        """Called once with the model the engine trains."""

    def trainable(self, name: str) -> bool:
        """Whether parameter ``name`` is trained locally (False: frozen, e.g. FedBABU's head)."""
        return True

    def client_start(self, ctx: ClientContext, global_params: Params) -> Params:
        return global_params

    def references(self, ctx: ClientContext, global_params: Params) -> dict[str, Params]:
        """Parameters of each model in ``needs.references`` for this client. Return the same object
        for every client where it is shared (the global model): executors then evaluate it once for
        the whole chunk."""
        return {}

    def client_tensors(self, ctx: ClientContext, global_params: Params) -> dict[str, Tensor]:
        """This client's tensors for ``needs.tensors`` (the same object for every client where it is
        shared)."""
        return {}

    def penalty(self, ctx: ClientContext, batch: LocalBatch) -> Tensor | None:
        return None

    def correction(self, ctx: ClientContext, tensors: dict[str, Tensor]) -> Params | None:
        """Per trainable parameter, a direction added to every local update (``p ← p − lr ·
        correction``, after the optimizer's step)."""
        return None

    def client_end(self, ctx: ClientContext, start: Params, params: Params) -> Params:
        """What client ``ctx.cid`` uploads after training from ``start`` to ``params``; the place to
        save its own per-client state in ``ctx.state``."""
        return params

    def aggregate(self, rnd: int, global_params: Params, uploads: list[Params], weights: Tensor,
                  ctxs: list[ClientContext]) -> tuple[Params, dict[str, Any]]:
        """The round's server update and what it did, for the record: a JSON-able dict the engine
        merges into the round's history entry (keys must not clash with the engine's: prefix
        them)."""
        return weighted_average(uploads, weights), {}

    def finetune(self) -> FineTune | None:
        """Fine-tuning each client runs before its personalized evaluation (None: evaluate as
        is)."""
        return None

    def eval_params(self, cid: int, global_params: Params, state: dict[str, Any]) -> Params:
        return global_params

    # server-side state for checkpoints (SCAFFOLD's c, ...)
    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass

    def describe(self) -> dict[str, Any]:
        """The hyper-parameters that define this strategy (recorded with results): its options, and
        what its ``setup`` resolved (e.g. MOON's tap on the model)."""
        out = {k: getattr(self.options, k) for k in self.options.table()}
        out.update(vars(self))
        return {k: v for k, v in out.items() if not k.startswith("_") and _plain(v)}


def weighted_average(uploads: list[Params], weights: Tensor) -> Params:
    """Σ_i w_i θ_i per tensor. Integer buffers (BatchNorm's num_batches_tracked) are averaged and
    rounded."""
    out: Params = {}
    for k, ref in uploads[0].items():
        stacked = torch.stack([u[k] for u in uploads])
        w = weights.to(device=stacked.device,
                       dtype=torch.float64 if not ref.is_floating_point() else ref.dtype)
        w = w.view(-1, *([1] * ref.dim()))
        if ref.is_floating_point():
            out[k] = (stacked * w).sum(0)
        else:
            out[k] = (stacked.to(w.dtype) * w).sum(0).round().to(ref.dtype)
    return out


def _plain(v: Any) -> bool:
    return isinstance(v, (int, float, str, bool, type(None))) or (
        isinstance(v, (tuple, list)) and all(isinstance(x, (int, float, str, bool)) for x in v))
