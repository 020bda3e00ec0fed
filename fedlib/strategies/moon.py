"""MOON (Li et al. 2021, "Model-Contrastive Federated Learning"): pull the local projection towards the global
model's, push it from the client's previous local model's.

Local objective (MOON Eq. 3-4), per batch, with z, z_g, z_p the projection-head outputs of the local, global and
previous local models on the same samples (the global and previous models frozen, in eval mode):

    ℓ_CE + μ · mean_i −log( e^{cos(z_i, z_g,i)/τ} / (e^{cos(z_i, z_g,i)/τ} + e^{cos(z_i, z_p,i)/τ}) ),   τ = 0.5

(:func:`fedlib.contrastive.moon_loss`). In a client's first round there is no previous model and no term (MOON's
pool of previous models is empty in round 0): a per-client 0/1 tensor ``has_prev`` switches it off, inside the
vectorized step as well. The projection is the model's ``moon_tap`` (simple CNN and ResNets with
``projection=True``: ``l2``; FedIntR CNN: the fc2 side head) unless ``tap`` names another.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from fedlib.contrastive import moon_loss
from fedlib.options import above, at_least
from fedlib.strategies.base import ClientContext, LocalBatch, Needs, Params
from fedlib.strategies.previous import WithPrevious


class MOON(WithPrevious):
    name = "moon"
    cost_family = "contrastive"
    needs = Needs(references=("global", "prev"), tensors=("has_prev",))
    option_ranges = {"mu": at_least(0), "tau": above(0)}

    def __init__(self, mu: float = 1.0, tau: float = 0.5, tap: str | None = None) -> None:
        self.mu, self.tau, self.tap = float(mu), float(tau), tap

    def setup(self, model: torch.nn.Module, cfg: Any) -> None:
        tap = self.tap or getattr(model, "moon_tap", "")
        if tap not in getattr(model, "tap_names", ()):
            raise ValueError(f"MOON tap {tap!r} is not a tap of {type(model).__name__}; valid taps: "
                             f"{list(getattr(model, 'tap_names', ()))}.")
        self.tap = tap
        self.declare((tap,))
        dev = next(model.parameters()).device
        self._flag = {False: torch.zeros((), device=dev), True: torch.ones((), device=dev)}  # shared objects

    def client_tensors(self, ctx: ClientContext, global_params: Params) -> dict[str, Tensor]:
        return {"has_prev": self._flag["prev" in ctx.state]}

    def penalty(self, ctx: ClientContext, b: LocalBatch) -> Tensor | None:
        if not self.mu:
            return None
        term = moon_loss(b.taps[0], b.refs["global"][0], b.refs["prev"][0], self.tau)
        return self.mu * b.tensors["has_prev"] * term
