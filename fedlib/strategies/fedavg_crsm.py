"""FedAvg+CRSM (FedSHIBU's Algorithm 4): one model per client, the whole model aggregated by client
similarity.

FedSHIBU's aggregation (:mod:`fedlib.strategies.fedshibu`) applied to the whole model, without
decoupling or fine-tuning: after local training client i uploads its model θ_i and D̂_i, the
extractor's output on ``n`` random samples; the server computes ``CRSM[i, j] = CKA(D̂_i, D̂_j)`` and
gives client i the model

    θ_i ← Σ_j CRSM[i, j] / Σ_j' CRSM[i, j'] · θ_j        (Algorithm 4, Algorithm 3's row weights)

which it starts from next round and is evaluated with. D̂_i is the output of the last layer before
the dense ones (FedSHIBU's ``head="dense"``, which here only chooses the representation). With
``sim="identity"`` it is local-only training, with ``"uniform"`` FedAvg.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from fedlib.strategies.base import FineTune
from fedlib.strategies.fedshibu import CRSMOptions, FedSHIBU


class FedAvgCRSM(FedSHIBU):
    """FedAvg+CRSM (Algorithm 4): the whole model trained and mixed by CRSM rows; no fine-tuning."""

    name = "fedavg_crsm"
    decoupled = False

    @dataclass(frozen=True)
    class Options(CRSMOptions):
        """FedSHIBU's CRSM options alone; what FedSHIBU's code reads besides them is fixed, not an
        option."""

        head: ClassVar[str] = "dense"  # D̂_i: the extractor's output before the dense layers
        body_mean: ClassVar[str] = "weighted"  # the reported global model: the sample-weighted mean
        lr_rounding: ClassVar[str] = "ceil"  # milestone m decays from round ⌈m·R⌉

    options: Options  # type: ignore[assignment]

    def trainable(self, name: str) -> bool:
        return True

    def finetune(self) -> FineTune | None:
        return None
