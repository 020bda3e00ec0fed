"""FedProx (Li et al. 2020): a proximal term keeps local weights near the global model.

Local objective (Li et al. 2020, Eq. 2), over the trainable parameters:

    ℓ_CE + (μ/2) ‖w − w_g‖²            (``squared=True``, the paper)
    ℓ_CE + (μ/2) Σ_t ‖w_t − w_g,t‖     (``squared=False``: what FedIntR's reference code computes,
                                        per-tensor unsquared norms, a bug kept as an option)

The unsquared norm is taken with ``torch.linalg.vector_norm``, whose gradient at a zero vector is 0
(at the first local step w = w_g: a hand-written sqrt of a sum of squares would give 0·∞ = NaN).
With μ = 0 FedProx trains exactly like FedAvg: no term at all (tested bitwise, whole model).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from fedlib.options import at_least, option
from fedlib.strategies.base import ClientContext, LocalBatch, Needs, Strategy, StrategyOptions


class FedProx(Strategy):
    name = "fedprox"
    needs = Needs(global_params=True)

    @dataclass(frozen=True)
    class Options(StrategyOptions):
        mu: float = option(0.01, at_least(0))  # the proximal term's weight μ (0: no term, FedAvg)
        squared: bool = True  # the paper's squared norm; False: the per-tensor unsquared norms

    options: Options

    def penalty(self, ctx: ClientContext, b: LocalBatch) -> Tensor | None:
        mu = self.options.mu
        if not mu:
            return None
        if self.options.squared:
            return 0.5 * mu * sum(((p - b.global_params[k]) ** 2).sum()
                                  for k, p in b.params.items())
        return 0.5 * mu * sum(torch.linalg.vector_norm(p - b.global_params[k])
                              for k, p in b.params.items())
