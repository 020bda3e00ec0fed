"""The contrastive regularizers of MOON, FedCKA and FedIntR: a representation pulled towards the global model's and
pushed from the client's previous model's.

All three are a two-way softmax cross-entropy with the global model as the positive:

    −log( e^{s_g} / (e^{s_g} + e^{s_p}) ) = log(e^{s_g} + e^{s_p}) − s_g = softplus(s_p − s_g)

computed as :func:`two_way_nll` (log-sum-exp form: finite for any similarity, including unnormalized ones such as a
squared Frobenius distance of whole activation maps, where ``exp`` overflows float32). They differ in the
similarity and where it is taken:

* :func:`moon_loss` — MOON (Li et al. 2021, Eq. 3): per-sample cosine of projections, divided by τ, mean over the
  batch;
* :func:`fedcka_loss` — FedCKA (Eq. 2-3): one similarity of whole batch activations per layer (linear CKA by
  default; :data:`FEDCKA_SIMILARITIES`), no temperature, mean over the first M layers;
* :func:`fedintr_loss` — FedIntR (Eq. 2-6): per layer a cosine of projections over τ, the layers weighted by a
  softmax of their similarity to the global model (not detached), or uniformly (Eq. 6).

Everything here is pure tensor code (no ``.item()``, no branching on values): it runs under ``torch.func.vmap``.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from fedlib.kernels import rbf_cka

__all__ = ["two_way_nll", "moon_loss", "linear_cka_to", "FEDCKA_SIMILARITIES", "fedcka_loss", "fedintr_loss",
           "CKA_MIN_SAMPLES"]

CKA_MIN_SAMPLES = 4  # fewer samples: CKA of a batch is noise (2 centered points always give CKA 1)


def two_way_nll(s_g: Tensor, s_p: Tensor) -> Tensor:
    """``−log(e^{s_g} / (e^{s_g} + e^{s_p}))`` elementwise, as ``softplus(s_p − s_g)``: finite for any finite
    input, and exactly log 2 (with opposite, cancelling gradients) where ``s_g == s_p``."""
    return F.softplus(s_p - s_g)


def moon_loss(z: Tensor, z_g: Tensor, z_p: Tensor, tau: float = 0.5) -> Tensor:
    """MOON's model-contrastive loss (Li et al. 2021, Eq. 3): per sample, cross-entropy of
    ``[cos(z, z_g)/τ, cos(z, z_p)/τ]`` against the first; mean over the batch. Inputs ``(n, ...)``."""
    z, z_g, z_p = z.flatten(1), z_g.flatten(1), z_p.flatten(1)
    return two_way_nll(F.cosine_similarity(z, z_g, dim=1) / tau, F.cosine_similarity(z, z_p, dim=1) / tau).mean()


# ------------------------------------------------------------------------------------------------ FedCKA
def rows(t: Tensor) -> Tensor:
    """``t`` as ``(n, features)``. A conv map ``(n, C, H, W)`` is flattened in channels-last order (a view for the
    channels-last maps the CPU path produces, a copy otherwise): every metric here is either invariant to the order
    of features (CKA) or compares two maps flattened the same way."""
    if t.dim() == 4:
        return t.permute(0, 2, 3, 1).reshape(t.shape[0], -1)
    return t.reshape(t.shape[0], -1)


def _safe_div(num: Tensor, den2: Tensor, ok: Tensor) -> Tensor:
    """``num / sqrt(den2)`` where ``ok``, else 0 (a zero-variance representation); NaN-free gradients."""
    ok = ok & (den2 > 0)
    return torch.where(ok, num / torch.sqrt(torch.where(ok, den2, torch.ones_like(den2))), torch.zeros_like(num))


def _centered_gram(k: Tensor) -> tuple[Tensor, Tensor]:
    """``HKH`` (``K_ij − r_i − r_j + m``) and whether it is non-degenerate (``‖HKH‖ > 100 ε ‖K‖``)."""
    r = k.mean(1, keepdim=True)
    kc = k - r - r.T + r.mean()
    tol = 100 * torch.finfo(k.dtype).eps
    return kc, kc.square().sum() > tol * tol * k.square().sum()


def linear_cka_to(x: Tensor, refs: Sequence[Tensor]) -> list[Tensor]:
    """Linear CKA (Kornblith et al. 2019; FedCKA Eq. 3) of ``x`` against each of ``refs``, all ``(n, ...)``:
    ``⟨HKH, HRH⟩ / (‖HKH‖ ‖HRH‖)`` with ``K = xxᵀ``, ``R = rrᵀ``, the local Gram formed once. Centering the n×n Grams
    instead of the n×d features keeps the cost at the Gram products (four per reference pair of the widest
    layer: three Grams and one for the gradient, which uses the symmetry of ``K``). Same values as
    :func:`fedlib.kernels.linear_cka` up to float rounding (in the input dtype: float32 for training); 0 for a
    zero-variance input."""
    x = rows(x)
    xd = x.detach()
    half = x @ xd.T  # K = x xᵀ with the gradient through one factor; doubled below (K is symmetric)
    kc, ok_x = _centered_gram(half + (half - half.detach()))
    ss_x = kc.square().sum()
    out: list[Tensor] = []
    done: dict[int, Tensor] = {}
    for r in refs:
        if id(r) not in done:  # the same tensor twice (previous model = global model): one Gram
            rr = rows(r).to(x.dtype)
            rc, ok_r = _centered_gram(rr @ rr.T)
            done[id(r)] = _safe_div((kc * rc).sum(), ss_x * rc.square().sum(), ok_x & ok_r)
        out.append(done[id(r)])
    return out


def _pairwise(f: Callable[[Tensor, Tensor], Tensor]) -> Callable[[Tensor, Sequence[Tensor]], list[Tensor]]:
    return lambda x, refs: [f(rows(x), rows(r).to(x.dtype)) for r in refs]


def _cosine(x: Tensor, y: Tensor) -> Tensor:
    return F.cosine_similarity(x.reshape(1, -1), y.reshape(1, -1), dim=1)[0]


FEDCKA_SIMILARITIES: dict[str, Callable[[Tensor, Sequence[Tensor]], list[Tensor]]] = {
    "linear_cka": linear_cka_to,
    "rbf_cka": _pairwise(lambda x, y: rbf_cka(x, y, dtype=None)),
    "frobenius": _pairwise(lambda x, y: -(x - y).square().sum()),
    "frobenius_literal": _pairwise(lambda x, y: (x - y).square().sum()),
    "frobenius_mean": _pairwise(lambda x, y: -(x - y).square().mean()),
    "cosine": _pairwise(_cosine),
    "cosine_unnormalized": _pairwise(lambda x, y: (x * y).sum()),
}
"""FedCKA's similarity of two batches of one layer's activations ``(n, ...)``, each to a list of references.

* ``linear_cka`` (Eq. 3, the default) and ``rbf_cka`` (Kornblith's RBF kernel, threshold 1.0) — Table 3's CKAs;
* ``frobenius`` — ``−‖a₁ − a₂‖²_F``: Table 3's squared Frobenius norm with the sign that makes it a similarity
  (closer to the global model = larger); ``frobenius_literal`` — ``+‖a₁ − a₂‖²_F`` put in place of CKA as printed,
  which rewards moving *away* from the global model. The sum over a batch's whole activation maps reaches
  thousands, and in FedCKA's setup at α = 5 it diverges in the first round with a previous model (every seed, and
  an independent loop alike: benchmarks/RESULTS.md). ``frobenius_mean`` — ``−‖a₁ − a₂‖²_F / (n·d)``, the mean over
  the entries (what ``F.mse_loss`` computes): not the paper's, a named option that trains;
* ``cosine`` — the cosine of the flattened batch activations, ``cos θ`` of ``vec a₁, vec a₂``;
  ``cosine_unnormalized`` — the printed ``‖vec a₁‖ ‖vec a₂‖ cos θ`` (a dot product).

Unnormalized metrics reach thousands on whole activation maps; :func:`two_way_nll` keeps the loss finite."""

CKA_METRICS = frozenset({"linear_cka", "rbf_cka"})


def fedcka_loss(taps: Sequence[Tensor], taps_g: Sequence[Tensor], taps_p: Sequence[Tensor],
                sim: str = "linear_cka") -> Tensor | None:
    """FedCKA's ℓ_cka (Eq. 2): the mean over the given layers of ``−log(e^{sim(a, a_g)} / (e^{sim(a, a_g)} +
    e^{sim(a, a_p)}))`` on whole-batch activations, no temperature. None for a batch of fewer than
    :data:`CKA_MIN_SAMPLES` samples with a CKA metric (no term)."""
    if sim not in FEDCKA_SIMILARITIES:
        raise ValueError(f"Unknown FedCKA similarity {sim!r}; valid: {sorted(FEDCKA_SIMILARITIES)}.")
    if sim in CKA_METRICS and taps[0].shape[0] < CKA_MIN_SAMPLES:
        return None
    f = FEDCKA_SIMILARITIES[sim]
    terms = []
    for a, g, p in zip(taps, taps_g, taps_p):
        s_g, s_p = f(a, [g, p])
        terms.append(two_way_nll(s_g, s_p))
    return torch.stack(terms).mean()


# ------------------------------------------------------------------------------------------------ FedIntR
def fedintr_loss(zs: Sequence[Tensor], zs_g: Sequence[Tensor], zs_p: Sequence[Tensor], tau: float = 0.5,
                 per_sample: bool = False, weighting: str = "alpha") -> Tensor:
    """FedIntR's regularizer ``Σ_k α_k ℓ_k`` (Eq. 2-5) over the layers' projections ``z^k`` ``(n, ...)``.

    ``ℓ_k = −log(e^{sim(z^k, z_g^k)/τ} / (e^{sim(z^k, z_g^k)/τ} + e^{sim(z^k, z_p^k)/τ}))`` with the cosine (Eq. 3);
    ``α = softmax_k(sim(z^k, z_g^k)/τ)`` (Eq. 4), not detached. ``per_sample=False`` (the reference code): sim is
    the batch mean of the per-sample cosines, one two-way softmax per layer per batch; ``per_sample=True``: ℓ_k and
    α_k per sample, then the batch mean. ``weighting="uniform"``: Eq. 6, the mean of the ℓ_k (Table V's
    ablation). The caller multiplies by μ."""
    if weighting not in ("alpha", "uniform"):
        raise ValueError(f"Unknown FedIntR weighting {weighting!r}; valid: 'alpha' (Eq. 4-5), 'uniform' (Eq. 6).")
    pos = torch.stack([F.cosine_similarity(z.flatten(1), g.flatten(1), dim=1) for z, g in zip(zs, zs_g)]) / tau
    neg = torch.stack([F.cosine_similarity(z.flatten(1), p.flatten(1), dim=1) for z, p in zip(zs, zs_p)]) / tau
    if not per_sample:  # (K, n) -> (K,)
        pos, neg = pos.mean(1), neg.mean(1)
    losses = two_way_nll(pos, neg)
    if weighting == "uniform":
        return losses.mean(0).mean()
    return (torch.softmax(pos, dim=0) * losses).sum(0).mean()
