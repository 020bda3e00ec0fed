"""FedER (Fu 2022, "Leveraging learning metrics for improved federated learning"): layer-wise
aggregation weighted by each client's effective rank of that layer.

Per client k and conv layer l (Alg. 2): ``er_l^k`` = the Shannon entropy of the layer's EVBMF-kept
singular values, the conv weight unfolded by input and by output channel and the two values
averaged, as RMSGD measures layers (:func:`fedlib.kernels.layer_metric`). Weights (Eq. 3.1): ``α_l^k
= er_l^k / Σ_k er_l^k``; ``W_l = Σ_k α_l^k W_l^k``.

``version="improved"`` (Alg. 4, the default): ``er ← max(floor, er)`` with floor 0.001, and every
non-conv tensor (BatchNorm parameters and buffers, the classifier) takes the weights of the nearest
conv layer before it in the model's ``state_dict`` order. Alg. 4 prints the floored rank in the sum
A_l (line 10) and recomputes the rank unfloored for the numerator (line 18); §3.3 says the floored
value replaces the rank, so both use it here (the unfloored numerator would give weights that do not
sum to one). ``version="naive"`` (Alg. 3): no floor (a layer whose clients all measure 0 falls back
to uniform weights instead of 0/0) and non-conv tensors averaged uniformly (1/K). Tensors before the
first conv layer are averaged uniformly in both. FedER ignores the clients' sample sizes.

``metric``:

* ``"entropy"`` — the thesis's ER, Eq. 2.9 with the minus sign of a Shannon entropy: ``−Σ σ̄ ln σ̄ ≥
  0`` (nats).
* ``"entropy_as_printed"`` — Eq. 2.9 as printed, ``Σ σ̄ ln σ̄ ≤ 0``: with Alg. 4's floor every
  weight becomes 0.001 and FedER is uniform averaging (kept to show exactly that).
* ``"erank"`` — Roy & Vetterli's effective rank, ``exp`` of the entropy.
* ``"stable_rank"`` — ``‖W‖_F² / ‖W‖_2²`` (Appendix A, Fig. A.1), of the raw weight unless
  ``denoise="evbmf"``.

``denoise``: ``"auto"`` (EVBMF for the entropy metrics, the raw weight for the stable rank),
``"evbmf"`` or ``"none"``. :meth:`aggregate` records every conv layer's metric and weights per
client (``feder_rank``, ``feder_alpha``: ``{layer: [value per client]}``, the rank before the floor)
in the round's history, and ``feder_floored``: the share of client-layers whose rank is at or below
the floor (EVBMF kept no component, or one). Where it is 1, every weight is the floor's and FedER is
FedAvg's uniform average.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from fedlib.kernels import layer_metric
from fedlib.options import at_least, option
from fedlib.strategies.base import (ClientContext, Params, Strategy, StrategyOptions,
                                    weighted_average)

METRICS = ("entropy", "entropy_as_printed", "erank", "stable_rank")
VERSIONS = ("improved", "naive")
DENOISES = ("auto", "evbmf", "none")


def floored_share(ranks: dict[str, list[float]], floor: float = 1e-3) -> float:
    """The share of client-layers (conv layer × client) whose rank is at or below ``floor`` (Alg.
    4's 0.001): the weights FedER's floor decides rather than the clients' spectra. NaN when there
    is no conv layer."""
    values = [e for er in ranks.values() for e in er]
    return sum(e <= floor for e in values) / len(values) if values else float("nan")


class FedER(Strategy):
    name = "feder"

    @dataclass(frozen=True)
    class Options(StrategyOptions):
        metric: str = option("entropy", METRICS)  # the layer's rank measure
        version: str = option("improved", VERSIONS)  # Alg. 4 (floor, non-conv follow) or Alg. 3
        floor: float = option(1e-3, at_least(0))  # Alg. 4's floor of the rank
        denoise: str = option("auto", DENOISES)  # EVBMF first ("auto": for the entropies)

    options: Options

    def layer_rank(self, weight: torch.Tensor) -> float:
        """``er`` of one conv weight (Alg. 2), before any floor."""
        metric, denoise = self.options.metric, self.options.denoise
        auto = "none" if metric == "stable_rank" else "evbmf"
        kept = None if (denoise if denoise != "auto" else auto) == "none" else "evbmf"
        if metric == "stable_rank":
            return layer_metric(weight, "stable_rank", kept)
        value = layer_metric(weight, "erank" if metric == "erank" else "entropy", kept)
        return -value if metric == "entropy_as_printed" else value

    def layer_weights(
            self, uploads: list[Params]) -> tuple[dict[str, list[float]], dict[str, torch.Tensor]]:
        """(``er`` per conv layer per client, before the floor; ``α`` per tensor of the state
        dict)."""
        K = len(uploads)
        uniform = torch.full((K,), 1.0 / K, dtype=torch.float64)
        ranks: dict[str, list[float]] = {}
        alphas: dict[str, torch.Tensor] = {}
        prev = None  # α of the last conv layer seen (α_p of Alg. 4)
        for name, ref in uploads[0].items():
            if ref.dim() == 4:
                ranks[name] = er = [self.layer_rank(u[name]) for u in uploads]
                if self.options.version == "improved":
                    er = [max(self.options.floor, e) for e in er]
                total = sum(er)
                prev = torch.tensor(er, dtype=torch.float64) / total if total != 0 else uniform
                alphas[name] = prev
            else:
                follow = self.options.version == "improved" and prev is not None
                alphas[name] = prev if follow else uniform
        return ranks, alphas

    def aggregate(self, rnd: int, global_params: Params, uploads: list[Params],
                  weights: torch.Tensor,
                  ctxs: list[ClientContext]) -> tuple[Params, dict[str, Any]]:
        ranks, alphas = self.layer_weights(uploads)
        out: Params = {}
        for name, a in alphas.items():
            out.update(
                weighted_average([{name: u[name]} for u in uploads], a.to(uploads[0][name].device)))
        return out, {"feder_rank": ranks, "feder_alpha": {k: alphas[k].tolist() for k in ranks},
                     "feder_floored": floored_share(ranks, self.options.floor)}
