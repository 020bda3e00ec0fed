"""FedBABU (Oh et al. 2022): train and aggregate the body only; fine-tune the head per client to
evaluate.

The head stays at its shared random initialization during federated training (it is not trained);
the body is averaged (``body_mean``) and broadcast. ``head`` says which layers form it
(:func:`fedlib.models.base.head_layers`): ``"last"`` (default), the final linear layer (FedBABU's
Fig. 1: "the head (i.e., the last linear classifier)"); ``"dense"``, every dense layer following the
extractor (FedSHIBU §3.3: "All dense layers following the extractor form the classifier"; with the
FedIntR CNN fc1, fc2 and fc3). Both papers' networks (ResNet-18, 4convNet) end in one dense layer,
where the two coincide; with more, a comparison with FedSHIBU uses its head set.

Personalized evaluation (:mod:`fedlib.evaluation`): client i starts from its evaluation model θ_i
(head θ_cls^0, the random one), runs ``ft_epochs`` epochs of SGD (``ft_lr``, ``ft_momentum``, batch
``ft_batch_size``, no weight decay, a fresh optimizer) on ``min CE(θ; D_i^train)`` over the
parameters ``ft_part`` names, then is tested on its test split. ``ft_part``: ``"head"`` (default),
as both papers say (FedBABU's abstract: "the head is fine-tuned for personalization during the
evaluation process"; FedSHIBU §3.2: "The classifiers ... are fine-tuned to enhance the
personalization performance of the client models"); ``"full"``, the whole model at the same lr, as
FedBABU's code (its analysis notebook) does. The defaults are FedBABU's settings: 5 epochs, lr 1e-3,
momentum 0.9, batch 50. With ``ft_part="head"`` the head trains on its input features computed once
per client (``FineTune.features``).

``ft_backtrack`` (default 3; 0 keeps ``ft_lr`` whatever happens, as the papers and FedBABU's code
do) and ``ft_select`` are the ladder ft_lr, ft_lr/10, ... and the rule that keeps a client's model
from it (:mod:`fedlib.finetune`); the lr each client kept is ``personal_ft_lr``. On a body without
normalization (the quick preset's CNN) lr 1e-3 is past the edge of stability of the head's loss:
``"first"`` keeps it and a round's accuracy swings, ``"best"`` holds it (benchmarks/RESULTS.md);
notebook 08 uses ``"best"``.

Body average of the m uploads θ_i (FedSHIBU §3.1, FedBABU's aggregation; FedSHIBU's reported global
body too)::

    θ_G,ext = Σ_i |D_i| / Σ_j |D_j| · θ_i,ext   (``body_mean="weighted"``, the paper's)
    θ_G,ext = (1/m) Σ_i θ_i,ext                  (``body_mean="plain"``: FedBABU's code)

Equal, bitwise, when the clients are equally large (shards; tested). ``lr_rounding``: milestone m
decays the lr from 0-based round ⌈m·R⌉ (``"ceil"``, the paper's "at 1/2 and 3/4 of the rounds") or
⌊m·R⌋ (``"floor"``: FedBABU's code, ⌊R/2⌋ and ⌊3R/4⌋); they differ exactly when m·R is not a whole
number (:func:`fedlib.schedule.round_lr`; tested). Training: lr 0.1 decayed ×0.1 at 1/2 and 3/4 of
the rounds (``Config.lr_milestones``), momentum 0.9, batch 50 (the ``fedshibu`` preset).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from fedlib.models.base import HEADS, extractor_tap, head_layers
from fedlib.options import at_least, between, option
from fedlib.strategies.base import (LR_ROUNDINGS, SELECTS, ClientContext, FineTune, Params,
                                    Strategy, StrategyOptions, weighted_average)

FT_PARTS = ("head", "full")
BODY_MEANS = ("weighted", "plain")


class FedBABU(Strategy):
    name = "fedbabu"

    @dataclass(frozen=True)
    class Options(StrategyOptions):
        ft_epochs: int = option(5, at_least(0))  # 0: evaluated without fine-tuning
        ft_lr: float = option(1e-3, at_least(0))
        ft_momentum: float = option(0.9, between(0, 1, hi_open=True))
        ft_batch_size: int = option(50, at_least(1))
        ft_part: str = option("head", FT_PARTS)  # what is fine-tuned: the head, or the whole model
        head: str = option("last", HEADS)  # the layers forming the head
        ft_backtrack: int = option(3, at_least(0))  # ft_lr, ft_lr/10, ... (0: ft_lr alone)
        ft_select: str = option("first", SELECTS)  # how a client's model is kept from the ladder
        body_mean: str = option("weighted", BODY_MEANS)  # sample-size weighted or plain
        lr_rounding: str = option("ceil", LR_ROUNDINGS)  # milestone m at round ⌈m·R⌉ or ⌊m·R⌋

        def finetune_momentum(self) -> float | None:
            return self.ft_momentum if self.ft_epochs else None

    options: Options

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._head: frozenset[str] = frozenset()
        self._tap: str | None = None

    @property
    def lr_rounding(self) -> str:  # type: ignore[override]
        return self.options.lr_rounding

    def setup(self, model, cfg) -> None:
        head = self.options.head
        layers = head_layers(model, head)
        self._head = frozenset(n for n, _ in model.named_parameters() if n.split(".")[0] in layers)
        inner = layers and len(layers) < len(model.layer_taps)  # an extractor tap feeds the head
        self._tap = extractor_tap(model, head) if inner else None
        if not self._head:
            raise ValueError(f"{type(model).__name__} has no head={head!r} layers (FedModel.head, "
                             f"or dense layers at the end of its main path); FedBABU needs one.")

    def is_head(self, name: str) -> bool:
        return name in self._head

    def trainable(self, name: str) -> bool:
        return not self.is_head(name)

    def body_average(self, uploads: list[Params], weights: Tensor) -> Params:
        """The uploads' mean: by sample-size ``weights``, or 1/m each (``body_mean="plain"``)."""
        plain = torch.full_like(weights, 1 / len(uploads))
        return weighted_average(uploads, plain if self.options.body_mean == "plain" else weights)

    def aggregate(self, rnd: int, global_params: Params, uploads: list[Params], weights: Tensor,
                  ctxs: list[ClientContext]) -> tuple[Params, dict[str, Any]]:
        return self.body_average(uploads, weights), {}

    def finetune(self) -> FineTune | None:
        o = self.options
        if o.ft_epochs == 0:
            return None
        head = o.ft_part == "head"
        return FineTune(trainable=self.is_head if head else (lambda n: True), epochs=o.ft_epochs,
                        lr=o.ft_lr, momentum=o.ft_momentum, weight_decay=0.0,
                        batch_size=o.ft_batch_size, backtrack=o.ft_backtrack, select=o.ft_select,
                        features=self._tap if head else None)
