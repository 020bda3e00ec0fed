"""FedIntR (Tun et al., "Federated Learning with Intermediate Representation Regularization"): a MOON-like
contrastive term on every layer's projection, the layers weighted by their similarity to the global model.

Local objective (Eq. 2-5), per batch, with z^k, z_g^k, z_p^k the k-th layer's projection-head outputs (the
model's ``intr_taps``: the FedIntR CNN's five layers, ResNet-20's stem and three stages with
``intr_heads=True``) of the local, global and previous local models:

    ℓ_k = −log( e^{sim(z^k, z_g^k)/τ} / (e^{sim(z^k, z_g^k)/τ} + e^{sim(z^k, z_p^k)/τ}) ),   sim = cosine (Eq. 3)
    α_k = softmax_k( sim(z^k, z_g^k)/τ )                                                (Eq. 4, not detached)
    ℓ   = ℓ_CE + μ Σ_k α_k ℓ_k                                                           (Eq. 5)

τ = 0.5. ``per_sample=False`` (default, the reference code): sim is the batch mean of the per-sample cosines, one
two-way softmax per layer per batch; ``per_sample=True``: ℓ_k and α_k per sample, averaged over the batch.
``weighting="uniform"``: Eq. 6, ℓ_CE + (μ/K) Σ_k ℓ_k (Table V's ablation). See
:func:`fedlib.contrastive.fedintr_loss`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from fedlib.contrastive import fedintr_loss
from fedlib.options import above, at_least
from fedlib.strategies.base import ClientContext, LocalBatch, Needs
from fedlib.strategies.previous import WithPrevious


class FedIntR(WithPrevious):
    name = "fedintr"
    cost_family = "contrastive"
    needs = Needs(references=("global", "prev"))
    option_ranges = {"mu": at_least(0), "tau": above(0), "weighting": ("alpha", "uniform")}

    def __init__(self, mu: float = 10.0, tau: float = 0.5, per_sample: bool = False, weighting: str = "alpha") -> None:
        self.mu, self.tau, self.per_sample, self.weighting = float(mu), float(tau), bool(per_sample), weighting

    def setup(self, model: torch.nn.Module, cfg: Any) -> None:
        heads = tuple(getattr(model, "intr_taps", ()))
        if not heads:
            raise ValueError(f"FedIntR needs a model with per-layer projection heads; {type(model).__name__} has "
                             f"none. Use model 'intr_cnn', or 'resnet20' with model_kw={{'intr_heads': True}}.")
        self.declare(heads)

    def penalty(self, ctx: ClientContext, b: LocalBatch) -> Tensor | None:
        if not self.mu:
            return None
        term = fedintr_loss(b.taps, b.refs["global"], b.refs["prev"], self.tau, self.per_sample, self.weighting)
        return self.mu * term
