"""FedCKA (Son, Kim and Chung, arXiv 2021 and Appl. Sci. 2022): a contrastive term on the first M layers' activations,
with CKA as the similarity.

Local objective (Eq. 1-3), per batch, with a_n, a_g,n, a_p,n the n-th layer's activations (flattened maps,
``(batch, C·H·W)``) of the local, global and previous local models on the same samples:

    ℓ = ℓ_CE + μ · (1/M) Σ_{n=1..M} −log( e^{sim(a_n, a_g,n)} / (e^{sim(a_n, a_g,n)} + e^{sim(a_n, a_p,n)}) )

no temperature, ``sim`` linear CKA (Eq. 3) by default (:data:`fedlib.contrastive.FEDCKA_SIMILARITIES` lists Table
3's alternatives), computed in log-sum-exp form. M = 2 ("the first two naturally similar layers"); any M up to
the model's depth (``layer_taps``, logits included: Fig. 5 sweeps M = 1..7 on the 7-layer CNN). A batch of fewer
than 4 samples contributes no CKA term. At a client's first participation the previous model is the global model:
the term is exactly log 2 with a zero gradient.

``on="heads"``: the FedIntR repository's FedCKA baseline, CKA of the first M layers' 256-d projection-head outputs
(``intr_taps``) instead of the activations: a deviation from the paper, kept as a named option.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from fedlib.contrastive import FEDCKA_SIMILARITIES, fedcka_loss
from fedlib.options import at_least
from fedlib.strategies.base import ClientContext, LocalBatch, Needs
from fedlib.strategies.previous import WithPrevious


class FedCKA(WithPrevious):
    name = "fedcka"
    cost_family = "contrastive"
    needs = Needs(references=("global", "prev"))
    option_ranges = {"mu": at_least(0), "M": at_least(1), "sim": tuple(FEDCKA_SIMILARITIES),
                     "on": ("activations", "heads")}

    def __init__(self, mu: float = 3.0, M: int = 2, sim: str = "linear_cka", on: str = "activations") -> None:
        self.mu, self.M, self.sim, self.on = float(mu), int(M), sim, on

    def setup(self, model: torch.nn.Module, cfg: Any) -> None:
        layers = tuple(getattr(model, "layer_taps" if self.on == "activations" else "intr_taps", ()))
        if not 1 <= self.M <= len(layers):
            raise ValueError(f"FedCKA M={self.M} with on={self.on!r}: {type(model).__name__} has {len(layers)} such "
                             f"layers {list(layers)}; choose 1 <= M <= {len(layers)}.")
        self.declare(layers[:self.M])

    def penalty(self, ctx: ClientContext, b: LocalBatch) -> Tensor | None:
        if not self.mu:
            return None
        term = fedcka_loss(b.taps, b.refs["global"], b.refs["prev"], self.sim)
        return None if term is None else self.mu * term
