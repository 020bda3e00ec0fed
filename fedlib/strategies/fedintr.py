"""FedIntR (Tun et al., "Federated Learning with Intermediate Representation Regularization"): a
MOON-like contrastive term on every layer's projection, the layers weighted by their similarity to
the global model.

Local objective (Eq. 2-5), per batch, with z^k, z_g^k, z_p^k the k-th layer's projection-head
outputs (the model's ``intr_taps``: the FedIntR CNN's five layers, ResNet-20's stem and three stages
with ``intr_heads=True``) of the local, global and previous local models:

    ℓ_k = −log( e^{sim(z^k, z_g^k)/τ} / (e^{sim(z^k, z_g^k)/τ} + e^{sim(z^k, z_p^k)/τ}) )    (Eq. 2)
    α_k = softmax_k( sim(z^k, z_g^k)/τ )                                       (Eq. 4, not detached)
    ℓ   = ℓ_CE + μ Σ_k α_k ℓ_k                                                               (Eq. 5)

with sim the cosine (Eq. 3) and τ = 0.5. ``per_sample=False`` (default, the reference code): sim is
the batch mean of the per-sample cosines, one two-way softmax per layer per batch;
``per_sample=True``: ℓ_k and α_k per sample, averaged over the batch. ``weighting="uniform"``:
Eq. 6, ℓ_CE + (μ/K) Σ_k ℓ_k (Table V's ablation). See :func:`fedintr_loss`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from fedlib.options import above, at_least, option
from fedlib.strategies.base import ClientContext, LocalBatch, Needs, StrategyOptions
from fedlib.strategies.previous import WithPrevious, two_way_nll

WEIGHTINGS = ("alpha", "uniform")


def fedintr_loss(zs: Sequence[Tensor], zs_g: Sequence[Tensor], zs_p: Sequence[Tensor],
                 tau: float = 0.5, per_sample: bool = False, weighting: str = "alpha") -> Tensor:
    """FedIntR's regularizer ``Σ_k α_k ℓ_k`` (Eq. 2-5) over the layers' projections ``z^k``,
    each ``(n, ...)``.

    ``ℓ_k = −log(e^{sim(z^k, z_g^k)/τ} / (e^{sim(z^k, z_g^k)/τ} + e^{sim(z^k, z_p^k)/τ}))`` with the
    cosine (Eq. 3); ``α = softmax_k(sim(z^k, z_g^k)/τ)`` (Eq. 4), not detached. ``per_sample=False``
    (the reference code): sim is the batch mean of the per-sample cosines, one two-way softmax per
    layer per batch; ``per_sample=True``: ℓ_k and α_k per sample, then the batch mean.
    ``weighting="uniform"``: Eq. 6, the mean of the ℓ_k (Table V's ablation). The caller multiplies
    by μ."""
    if weighting not in WEIGHTINGS:
        raise ValueError(f"Unknown FedIntR weighting {weighting!r}; valid: 'alpha' (Eq. 4-5), "
                         "'uniform' (Eq. 6).")
    cos = lambda a, b: F.cosine_similarity(a.flatten(1), b.flatten(1), dim=1)  # noqa: E731
    pos = torch.stack([cos(z, g) for z, g in zip(zs, zs_g)]) / tau
    neg = torch.stack([cos(z, p) for z, p in zip(zs, zs_p)]) / tau
    if not per_sample:  # (K, n) -> (K,)
        pos, neg = pos.mean(1), neg.mean(1)
    losses = two_way_nll(pos, neg)
    if weighting == "uniform":
        return losses.mean(0).mean()
    return (torch.softmax(pos, dim=0) * losses).sum(0).mean()


class FedIntR(WithPrevious):
    name = "fedintr"
    needs = Needs(references=("global", "prev"))

    @dataclass(frozen=True)
    class Options(StrategyOptions):
        mu: float = option(10.0, at_least(0))  # the term's weight
        tau: float = option(0.5, above(0))  # the temperature τ
        per_sample: bool = False  # ℓ_k, α_k per sample, or of the batch-mean cosines (the code's)
        weighting: str = option("alpha", WEIGHTINGS)  # α_k (Eq. 4-5) or uniform (Eq. 6)

    options: Options

    def setup(self, model: torch.nn.Module, cfg: Any) -> None:
        heads = tuple(getattr(model, "intr_taps", ()))
        if not heads:
            raise ValueError(f"FedIntR needs a model with per-layer projection heads; "
                             f"{type(model).__name__} has none. Use model 'intr_cnn', or "
                             f"'resnet20' with model_kw={{'intr_heads': True}}.")
        self.declare(heads)

    def penalty(self, ctx: ClientContext, b: LocalBatch) -> Tensor | None:
        o = self.options
        if not o.mu:
            return None
        term = fedintr_loss(b.taps, b.refs["global"], b.refs["prev"], o.tau, o.per_sample,
                            o.weighting)
        return o.mu * term
