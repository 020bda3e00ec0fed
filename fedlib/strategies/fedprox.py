"""FedProx (Li et al. 2020): a proximal term keeps local weights near the global model.

Local objective: ℓ_CE + (μ/2)‖w − w_g‖² over the trainable parameters (Li et al. 2020, Eq. 2).
FedIntR's reference code uses the *unsquared* norm μ‖w − w_g‖ (a bug); ``squared=False`` reproduces it.
With μ = 0 FedProx trains exactly like FedAvg (tested).
"""

from __future__ import annotations

from torch import Tensor

from .base import ClientContext, Params, Strategy


class FedProx(Strategy):
    name = "fedprox"
    uses_global_params = True

    def __init__(self, mu: float = 0.01, squared: bool = True) -> None:
        if mu < 0:
            raise ValueError(f"FedProx mu must be >= 0 (got {mu}).")
        self.mu = float(mu)
        self.squared = bool(squared)

    def penalty(self, ctx: ClientContext, params: Params, global_params: Params, taps: list[Tensor],
                refs: dict[str, list[Tensor]], y: Tensor) -> Tensor:
        sq = sum(((p - global_params[k]) ** 2).sum() for k, p in params.items())
        if self.squared:
            return 0.5 * self.mu * sq
        return self.mu * sq.sqrt()
