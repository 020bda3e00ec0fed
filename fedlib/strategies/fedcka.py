"""FedCKA (Son, Kim and Chung, arXiv 2021 and Appl. Sci. 2022): a contrastive term on the first M
layers' activations, with CKA as the similarity.

Local objective (Eq. 1-3), per batch, with a_n, a_g,n, a_p,n the n-th layer's activations (flattened
maps, ``(batch, C·H·W)``) of the local, global and previous local models on the same samples:

    ℓ = ℓ_CE + μ · (1/M) Σ_{n=1..M} −log( e^{s_g,n} / (e^{s_g,n} + e^{s_p,n}) ),
    s_g,n = sim(a_n, a_g,n),   s_p,n = sim(a_n, a_p,n)

no temperature, ``sim`` linear CKA (Eq. 3, :func:`fedlib.kernels.linear_cka_to`) by default
(:data:`FEDCKA_SIMILARITIES` lists Table 3's alternatives), computed in log-sum-exp form
(:func:`fedcka_loss`). M = 2 ("the first two naturally similar layers"); any M up to the model's
depth (``layer_taps``, logits included: Fig. 5 sweeps M = 1..7 on the 7-layer CNN). A batch of fewer
than 4 samples contributes no CKA term. At a client's first participation the previous model is the
global model: the term is exactly log 2 with a zero gradient.

``on="heads"``: the FedIntR repository's FedCKA baseline, CKA of the first M layers' 256-d
projection-head outputs (``intr_taps``) instead of the activations: a deviation from the paper, kept
as a named option.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from fedlib.kernels import linear_cka_to, rbf_cka, sample_rows
from fedlib.options import at_least, option
from fedlib.strategies.base import ClientContext, LocalBatch, Needs, StrategyOptions
from fedlib.strategies.previous import WithPrevious, two_way_nll

CKA_MIN_SAMPLES = 4  # fewer samples: CKA of a batch is noise (2 centered points always give CKA 1)


Similarity = Callable[[Tensor, Sequence[Tensor]], list[Tensor]]  # (x, refs) -> sim(x, ref) per ref


def _pairwise(f: Callable[[Tensor, Tensor], Tensor]) -> Similarity:
    return lambda x, refs: [f(sample_rows(x), sample_rows(r).to(x.dtype)) for r in refs]


def _cosine(x: Tensor, y: Tensor) -> Tensor:
    return F.cosine_similarity(x.reshape(1, -1), y.reshape(1, -1), dim=1)[0]


FEDCKA_SIMILARITIES: dict[str, Similarity] = {
    "linear_cka": linear_cka_to,
    "rbf_cka": _pairwise(lambda x, y: rbf_cka(x, y, dtype=None)),
    "frobenius": _pairwise(lambda x, y: -(x - y).square().sum()),
    "frobenius_literal": _pairwise(lambda x, y: (x - y).square().sum()),
    "frobenius_mean": _pairwise(lambda x, y: -(x - y).square().mean()),
    "cosine": _pairwise(_cosine),
    "cosine_unnormalized": _pairwise(lambda x, y: (x * y).sum()),
}
"""FedCKA's similarity of two batches of one layer's activations ``(n, ...)``, each to a list of
references.

* ``linear_cka`` (Eq. 3, the default) and ``rbf_cka`` (Kornblith's RBF kernel, threshold 1.0) —
  Table 3's CKAs;
* ``frobenius`` — ``−‖a₁ − a₂‖²_F``: Table 3's squared Frobenius norm with the sign that makes it a
  similarity (closer to the global model = larger); ``frobenius_literal`` — ``+‖a₁ − a₂‖²_F`` put in
  place of CKA as printed, which rewards moving *away* from the global model. The sum over a batch's
  whole activation maps reaches thousands, and in FedCKA's setup at α = 5 it diverges in the first
  round with a previous model (benchmarks/RESULTS.md).
  ``frobenius_mean`` — ``−‖a₁ − a₂‖²_F / (n·d)``, the mean over the entries (what ``F.mse_loss``
  computes): not the paper's, a named option that trains;
* ``cosine`` — the cosine of the flattened batch activations, ``cos θ`` of ``vec a₁, vec a₂``;
  ``cosine_unnormalized`` — the printed ``‖vec a₁‖ ‖vec a₂‖ cos θ`` (a dot product).

Unnormalized metrics reach thousands on whole activation maps; :func:`two_way_nll` keeps the loss
finite."""

CKA_METRICS = frozenset({"linear_cka", "rbf_cka"})


def fedcka_loss(taps: Sequence[Tensor], taps_g: Sequence[Tensor], taps_p: Sequence[Tensor],
                sim: str = "linear_cka") -> Tensor | None:
    """FedCKA's ℓ_cka (Eq. 2): the mean over the given layers of ``−log(e^{sim(a, a_g)} / (e^{sim(a,
    a_g)} + e^{sim(a, a_p)}))`` on whole-batch activations, no temperature. None for a batch of
    fewer than :data:`CKA_MIN_SAMPLES` samples with a CKA metric (no term)."""
    if sim not in FEDCKA_SIMILARITIES:
        raise ValueError(f"Unknown FedCKA similarity {sim!r}; valid: "
                         f"{sorted(FEDCKA_SIMILARITIES)}.")
    if sim in CKA_METRICS and taps[0].shape[0] < CKA_MIN_SAMPLES:
        return None
    f = FEDCKA_SIMILARITIES[sim]
    terms = []
    for a, g, p in zip(taps, taps_g, taps_p):
        s_g, s_p = f(a, [g, p])
        terms.append(two_way_nll(s_g, s_p))
    return torch.stack(terms).mean()


class FedCKA(WithPrevious):
    name = "fedcka"
    needs = Needs(references=("global", "prev"))

    @dataclass(frozen=True)
    class Options(StrategyOptions):
        mu: float = option(3.0, at_least(0))  # the term's weight
        M: int = option(2, at_least(1))  # the first M layers (at most the model's: setup checks)
        sim: str = option("linear_cka", tuple(FEDCKA_SIMILARITIES))  # the similarity (Table 3)
        on: str = option("activations", ("activations", "heads"))  # activations or their heads

    options: Options

    def setup(self, model: torch.nn.Module, cfg: Any) -> None:
        o = self.options
        layers = tuple(getattr(model, "layer_taps" if o.on == "activations" else "intr_taps", ()))
        if not 1 <= o.M <= len(layers):
            raise ValueError(f"FedCKA M={o.M} with on={o.on!r}: {type(model).__name__} has "
                             f"{len(layers)} such layers {list(layers)}; choose 1 <= M <= "
                             f"{len(layers)}.")
        self.declare(layers[:o.M])

    def penalty(self, ctx: ClientContext, b: LocalBatch) -> Tensor | None:
        if not self.options.mu:
            return None
        term = fedcka_loss(b.taps, b.refs["global"], b.refs["prev"], self.options.sim)
        return None if term is None else self.options.mu * term
