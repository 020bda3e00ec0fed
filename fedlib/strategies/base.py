"""The Strategy interface: a strategy declares what its local step needs and overrides named hooks; the engine
owns every loop and the executors (:mod:`fedlib.executors`) run local training without knowing the strategy.

A strategy is FedAvg plus whatever its paper changes. Declarations (:class:`~fedlib.local.Needs`, one place):
``needs.taps``, ``needs.references``, ``needs.tensors``, ``needs.global_params``, ``needs.exact_batches``,
``needs.vectorizable``, ``needs.persistent_optimizer``; ``centralized`` (one client holds all the data); and
``lr_rounding`` (how ``Config.lr_milestones`` fall on rounds: :func:`fedlib.schedule.round_lr`).

Hooks, in the order the engine calls them each round::

    setup(model, cfg)                      once: resolve taps / frozen parameters from the model (may set needs)
    trainable(name)                        whether a parameter trains during federated training
    client_start(ctx, global_params)       the parameters a sampled client starts from (default: the global ones)
    references(ctx, global_params)         {name: Params} of the frozen models in needs.references, per client
    client_tensors(ctx, global_params)     {name: Tensor} for needs.tensors, per client (e.g. SCAFFOLD's c, c_i)
    penalty(ctx, batch)                    a term added to the cross-entropy of every local batch (LocalBatch)
    correction(ctx, tensors)               Params added to every local update: p ← p − lr · correction
    client_end(ctx, start, params)         what the client uploads; saves the strategy's per-client state
    aggregate(rnd, global_params,          (params, metrics): the server update (default: the sample-size-weighted
              uploads, weights, ctxs)      mean, McMahan et al. 2017) of the uploads, which hold only the tensors
                                           local training changes (the engine keeps the rest), and what it did, a
                                           JSON-able dict merged into the round's history entry (e.g. FedER's
                                           per-layer ranks and weights; default {}); may keep one model per client
    finetune()                             a FineTune for personalized evaluation, or None
    eval_params(cid, global_params, state) the parameters client ``cid`` starts its personalized evaluation from

Per-client state lives in ``ctx.state`` (a dict the engine keeps and checkpoints: tensors, Params, numbers);
server state in ``state_dict`` / ``load_state_dict``.

``docs/design.md`` tabulates which hooks and declarations each of the twelve strategies uses;
``tests/test_strategy_interface.py`` exercises the least obvious shapes in both executors: a per-client tensor
carried across rounds into the penalty and the update (SCAFFOLD-shaped) and body-only training followed by
per-client head fine-tuning before evaluation (FedBABU-shaped).
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor

from fedlib.local import ClientContext, LocalBatch, Needs
from fedlib.options import option_problems, signature_options
from fedlib.params import Params

__all__ = ["Strategy", "FineTune", "SELECTS", "LR_ROUNDINGS", "ClientContext", "LocalBatch", "Needs", "Params",
           "weighted_average"]


SELECTS = ("first", "best")  # FineTune.select (fedlib.finetune.select)
LR_ROUNDINGS = ("ceil", "floor")  # Strategy.lr_rounding (fedlib.schedule.round_lr)


@dataclass(frozen=True)
class FineTune:
    """Fine-tuning before a personalized evaluation (FedBABU: the head, on the client's training split; ``None``: the
    run's value). ``backtrack``: the ladder lr/10, lr/100, ...; ``select``: how a client's model is kept from it;
    ``features``: the main-path tap that is the fine-tuned layers' only input, if one is (:mod:`fedlib.finetune`)."""

    trainable: Callable[[str], bool]
    epochs: int = 1
    lr: float | None = None
    momentum: float | None = None
    weight_decay: float | None = None
    batch_size: int | None = None
    backtrack: int = 0
    select: str = "first"
    features: str | None = None


class Strategy:
    """FedAvg (McMahan et al. 2017). Subclasses override only what their paper changes."""

    name = "fedavg"
    # how its cost per sample-pass compares (fedlib.companion.costs.FAMILY_FACTOR): "fedavg", "prox", "contrastive" (the global
    # and previous models' forward passes beside the local one), "feder" (EVBMF ranks every round), "personal"
    cost_family = "fedavg"
    needs = Needs()
    centralized = False  # one client holds the whole training set (the centralized baseline)
    trains_global_model = True  # False: only the personalized evaluation is a result (personal_eval=True)
    lr_rounding = "ceil"  # lr milestone m decays from round ⌈m · rounds⌉ ("floor": ⌊m · rounds⌋; fedlib.schedule)
    # the valid range (fedlib.options.Interval) or values (a tuple) of each __init__ option; types come from the
    # signature. Config.validate and build_strategy check strategy_kw against both (fedlib.options)
    option_ranges: dict[str, Any] = {}

    def __init_subclass__(cls, **kw: Any) -> None:
        """Every strategy's options are checked in one place, however it is built (``build_strategy``, a Config, or
        a direct call): its ``__init__`` first checks the options given against their types (the signature) and
        ``option_ranges`` (:func:`fedlib.options.option_problems`: one error naming each bad option and the valid
        values); an ``__init__`` keeps only the checks that tie several options together."""
        super().__init_subclass__(**kw)
        init = cls.__dict__.get("__init__")
        if init is None:
            return
        sig = inspect.signature(init)
        var_kw = next((p.name for p in sig.parameters.values() if p.kind is p.VAR_KEYWORD), None)

        @functools.wraps(init)
        def checked(self: Strategy, *args: Any, **kwargs: Any) -> None:
            if type(self) is cls:  # the class built checks its options once (not again in super().__init__)
                given = dict(sig.bind(self, *args, **kwargs).arguments)
                given.pop(next(iter(sig.parameters)))
                given.update(given.pop(var_kw, {}) if var_kw else {})
                options = signature_options(cls, ranges=cls.option_ranges)
                problems = option_problems("strategy_kw", f"strategy {cls.name!r}", options, given)
                if problems:
                    raise ValueError(" ".join(problems))
            init(self, *args, **kwargs)

        cls.__init__ = checked  # type: ignore[method-assign]

    def setup(self, model: torch.nn.Module, cfg: Any) -> None:
        """Called once with the model the engine trains."""

    def trainable(self, name: str) -> bool:
        """Whether parameter ``name`` is trained locally (False: frozen, e.g. FedBABU's head)."""
        return True

    def client_start(self, ctx: ClientContext, global_params: Params) -> Params:
        return global_params

    def references(self, ctx: ClientContext, global_params: Params) -> dict[str, Params]:
        """Parameters of each model in ``needs.references`` for this client. Return the same object for every
        client where it is shared (the global model): executors then evaluate it once for the whole chunk."""
        return {}

    def client_tensors(self, ctx: ClientContext, global_params: Params) -> dict[str, Tensor]:
        """This client's tensors for ``needs.tensors`` (the same object for every client where it is shared)."""
        return {}

    def penalty(self, ctx: ClientContext, batch: LocalBatch) -> Tensor | None:
        return None

    def correction(self, ctx: ClientContext, tensors: dict[str, Tensor]) -> Params | None:
        """Per trainable parameter, a direction added to every local update (``p ← p − lr · correction``, after
        the optimizer's step)."""
        return None

    def client_end(self, ctx: ClientContext, start: Params, params: Params) -> Params:
        """What client ``ctx.cid`` uploads after training from ``start`` to ``params``; the place to save its own
        per-client state in ``ctx.state``."""
        return params

    def aggregate(self, rnd: int, global_params: Params, uploads: list[Params], weights: Tensor,
                  ctxs: list[ClientContext]) -> tuple[Params, dict[str, Any]]:
        """The round's server update and what it did, for the record: a JSON-able dict the engine merges into the
        round's history entry (keys must not clash with the engine's: prefix them)."""
        return weighted_average(uploads, weights), {}

    def finetune(self) -> FineTune | None:
        """Fine-tuning each client runs before its personalized evaluation (None: evaluate as is)."""
        return None

    def eval_params(self, cid: int, global_params: Params, state: dict[str, Any]) -> Params:
        return global_params

    # server-side state for checkpoints (SCAFFOLD's c, ...)
    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass

    def describe(self) -> dict[str, Any]:
        """The hyper-parameters that define this strategy (recorded with results)."""
        return {k: v for k, v in vars(self).items() if not k.startswith("_") and _plain(v)}


def weighted_average(uploads: list[Params], weights: Tensor) -> Params:
    """Σ_i w_i θ_i per tensor. Integer buffers (BatchNorm's num_batches_tracked) are averaged and rounded."""
    out: Params = {}
    for k, ref in uploads[0].items():
        stacked = torch.stack([u[k] for u in uploads])
        w = weights.to(device=stacked.device, dtype=torch.float64 if not ref.is_floating_point() else ref.dtype)
        w = w.view(-1, *([1] * ref.dim()))
        if ref.is_floating_point():
            out[k] = (stacked * w).sum(0)
        else:
            out[k] = (stacked.to(w.dtype) * w).sum(0).round().to(ref.dtype)
    return out


def _plain(v: Any) -> bool:
    return isinstance(v, (int, float, str, bool, type(None))) or (
        isinstance(v, (tuple, list)) and all(isinstance(x, (int, float, str, bool)) for x in v))
