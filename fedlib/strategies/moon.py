"""MOON (Li et al. 2021, "Model-Contrastive Federated Learning"): pull the local projection towards
the global model's, push it from the client's previous local model's.

Local objective (MOON Eq. 3-4), per batch, with z, z_g, z_p the projection-head outputs of the
local, global and previous local models on the same samples (the global and previous models frozen,
in eval mode):

    ℓ_CE + μ · mean_i −log( e^{cos(z_i, z_g,i)/τ} / (e^{cos(z_i, z_g,i)/τ} + e^{cos(z_i, z_p,i)/τ}))

with τ = 0.5 (:func:`moon_loss`). In a client's first round there is no previous model and no term
(MOON's pool of previous models is empty in round 0): a per-client 0/1 tensor ``has_prev`` switches
it off, inside the vectorized step as well. The projection is the model's ``moon_tap`` (simple CNN
and ResNets with ``projection=True``: ``l2``; FedIntR CNN: the fc2 side head) unless ``tap`` names
another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from fedlib.options import above, at_least, option
from fedlib.strategies.base import ClientContext, LocalBatch, Needs, Params, StrategyOptions
from fedlib.strategies.previous import WithPrevious, two_way_nll


def moon_loss(z: Tensor, z_g: Tensor, z_p: Tensor, tau: float = 0.5) -> Tensor:
    """MOON's model-contrastive loss (Li et al. 2021, Eq. 3): per sample, cross-entropy of ``[cos(z,
    z_g)/τ, cos(z, z_p)/τ]`` against the first; mean over the batch. Inputs ``(n, ...)``."""
    z, z_g, z_p = z.flatten(1), z_g.flatten(1), z_p.flatten(1)
    s_g, s_p = F.cosine_similarity(z, z_g, dim=1) / tau, F.cosine_similarity(z, z_p, dim=1) / tau
    return two_way_nll(s_g, s_p).mean()


class MOON(WithPrevious):
    name = "moon"
    needs = Needs(references=("global", "prev"), tensors=("has_prev",))

    @dataclass(frozen=True)
    class Options(StrategyOptions):
        mu: float = option(1.0, at_least(0))  # the term's weight
        tau: float = option(0.5, above(0))  # the temperature τ
        tap: str | None = None  # the projection's tap (None: the model's moon_tap)

    options: Options

    def setup(self, model: torch.nn.Module, cfg: Any) -> None:
        tap = self.options.tap or getattr(model, "moon_tap", "")
        if tap not in getattr(model, "tap_names", ()):
            raise ValueError(f"MOON tap {tap!r} is not a tap of {type(model).__name__}; valid "
                             f"taps: {list(getattr(model, 'tap_names', ()))}.")
        self._tap = tap
        self.declare((tap,))
        dev = next(model.parameters()).device
        # shared objects: one 0 and one 1 for every client
        self._flag = {False: torch.zeros((), device=dev), True: torch.ones((), device=dev)}

    def client_tensors(self, ctx: ClientContext, global_params: Params) -> dict[str, Tensor]:
        return {"has_prev": self._flag["prev" in ctx.state]}

    def penalty(self, ctx: ClientContext, b: LocalBatch) -> Tensor | None:
        o = self.options
        if not o.mu:
            return None
        term = moon_loss(b.taps[0], b.refs["global"][0], b.refs["prev"][0], o.tau)
        return o.mu * b.tensors["has_prev"] * term

    def describe(self) -> dict[str, Any]:
        """The options, with the tap resolved on the model (``tap=None``: its ``moon_tap``)."""
        return {**super().describe(), "tap": getattr(self, "_tap", self.options.tap)}
