"""Client representation similarity (FedSHIBU): the CRSM and the similarity-weighted aggregation it
drives.

FedSHIBU (Algorithm 3, CRSMAggregation): each client uploads D̂_i, its extractor's representations
of a random subset of its own data; ``CRSM[i, j] = SimMet(D̂_i, D̂_j)`` (linear or RBF CKA); client
i's new extractor is ``Σ_j CRSM[i, j] / Σ_j' CRSM[i, j'] · θ_j``. Everything here is batched on the
device: one all-pairs CKA call (:func:`fedlib.kernels.cka_matrix`) for the matrix, one ``einsum``
per tensor for all clients' models.

Which samples D̂_i holds (each client's own, or the same ones for every client) is the strategy's
``samples`` option (:mod:`fedlib.strategies.fedshibu`); here they are just matrices. The controls
``"identity"`` (each client keeps its own extractor) and ``"uniform"`` (all rows equal: FedBABU)
need no representations; :func:`crsm_stats` summarizes a CRSM by the self-weight it leaves each
client and its mean off-diagonal similarity, and :func:`crsm_reading` a run's CRSM by how far its
weights stray from uniform (:data:`UNIFORM_SHARE`: when a claim whose mechanism is the CRSM can be
tested).

Diagnostics of what a CRSM can measure (``benchmarks/crsm_groups.py``): :func:`chance_crsm`, the CKA
that unpaired representations (each client's own samples) are expected to give whatever the clients'
data, and :func:`feature_crsm`, the CKA of own-sample representations paired by feature instead of
by sample.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch
from torch import Tensor

from fedlib.kernels import cka_matrix
from fedlib.params import Params

__all__ = [
    "SIMS", "CONTROLS", "crsm", "control_crsm", "crsm_stats", "group_crsm", "row_weights", "mix",
    "label_overlap", "offdiag_corr", "chance_crsm", "feature_crsm", "UNIFORM_SHARE",
    "uniform_deviation", "crsm_reading"
]

CONTROLS = ("identity", "uniform")
SIMS = ("linear", "rbf") + CONTROLS
# A CRSM is "uniform" when every weight of every client's row (row_weights) lies within this share
# of 1/N: it then aggregates as FedBABU (FedSHIBU) or FedAvg (FedAvg+CRSM) do, and a claim whose
# mechanism is the CRSM cannot be tested on it. Weights that followed the clients' label overlap
# (what FedSHIBU Fig. 3 says the CRSM finds) deviate from 1/N by 12-14 % of it on the quick shard
# partitions at s = 100 (homogeneous: the paper's "all clients weighed equally") and by 80-400 % at
# s = 10, 5 and 2; a quarter of 1/N lies between. A run is read over its second half, the rounds its
# final accuracy and its plateau come from (a uniform round gives every client the same body again).
UNIFORM_SHARE = 0.25


def control_crsm(m: int, sim: str) -> Tensor:
    """The CRSM of a control for ``m`` clients (float64): ``"identity"``, each client keeps its own
    extractor (pure local training); ``"uniform"``, all ones (every client gets the unweighted
    average: FedBABU)."""
    if sim not in CONTROLS:
        raise ValueError(f"Unknown CRSM control {sim!r}; valid: {CONTROLS}.")
    return torch.eye(m, dtype=torch.float64) if sim == "identity" else torch.ones(
        m, m, dtype=torch.float64)


def crsm(features: list[Tensor], sim: str = "linear", threshold: float = 0.5) -> Tensor:
    """The (m, m) float64 CRSM of ``m`` clients' representations (each (n_i, d)). Unpaired
    representations of different sizes are cut to the smallest n. ``sim`` "identity" / "uniform":
    :func:`control_crsm`; ``threshold``: the RBF bandwidth as a multiple of the median distance
    (Kornblith et al. 2019)."""
    if sim not in SIMS:
        raise ValueError(f"Unknown CRSM similarity {sim!r}; valid: {SIMS}.")
    m = len(features)
    if sim in CONTROLS:
        return control_crsm(m, sim).to(features[0].device)
    n = min(len(f) for f in features)
    if n < 2:
        raise ValueError(f"CRSM needs at least 2 samples per client, got {n}.")
    return cka_matrix([f[:n] for f in features], kind=sim, threshold=threshold)


def crsm_stats(S: Tensor) -> dict[str, float]:
    """``crsm_self``: the mean over clients of the weight each keeps of its own extractor (the
    diagonal of :func:`row_weights`; 1 = local training, 1/m = uniform); ``crsm_offdiag``: the mean
    off-diagonal entry of ``S`` (NaN for one client)."""
    m = len(S)
    off = ~torch.eye(m, dtype=torch.bool, device=S.device)
    return {"crsm_self": float(row_weights(S).diagonal().mean()),
            "crsm_offdiag": float(S[off].mean()) if m > 1 else float("nan")}


def uniform_deviation(S: Tensor) -> float:
    """The largest ``|w - 1/N|`` of the CRSM's row weights (:func:`row_weights`) as a share of
    ``1/N``: 0 for the uniform CRSM, ``N - 1`` for the identity; uniform by :data:`UNIFORM_SHARE`
    when at most it."""
    W = row_weights(torch.as_tensor(S, dtype=torch.float64))
    return float(((W - 1.0 / len(W)).abs() * len(W)).max())


def crsm_reading(history: Sequence[Mapping[str, Any]], rounds: int) -> dict[str, float] | None:
    """A run's CRSM over the rounds in ``(R/2, R]`` whose ``history`` entry holds one: ``deviation``
    (the largest :func:`uniform_deviation` of those rounds), ``self_min`` / ``self_max`` (the
    smallest and largest weight any client keeps of its own body), ``clients`` and ``rounds`` read;
    None when none holds a CRSM."""
    Ws = [row_weights(torch.as_tensor(e["crsm"], dtype=torch.float64)) for e in history
          if e.get("crsm") is not None and rounds / 2 < int(e["round"]) <= rounds]
    if not Ws:
        return None
    diag = torch.stack([W.diagonal() for W in Ws])
    return {"deviation": max(uniform_deviation(W) for W in Ws), "self_min": float(diag.min()),
            "self_max": float(diag.max()), "clients": float(len(Ws[0])), "rounds": float(len(Ws))}


def row_weights(S: Tensor) -> Tensor:
    """Each row of a CRSM normalized to sum to 1 (CKA is non-negative; negatives from rounding are
    clipped)."""
    S = S.clamp_min(0)
    return S / S.sum(1, keepdim=True).clamp_min(torch.finfo(S.dtype).tiny)


def mix(models: list[Params], W: Tensor, names: list[str] | tuple[str, ...]) -> list[Params]:
    """``out[i][k] = Σ_j W[i, j] · models[j][k]`` for every name ``k`` in ``names``: one batched
    product per tensor. Integer tensors (BatchNorm's ``num_batches_tracked``) are mixed and
    rounded."""
    out: list[Params] = [{} for _ in models]
    for k in names:
        stacked = torch.stack([m[k] for m in models])
        ref = stacked[0]
        w = W.to(device=stacked.device,
                 dtype=ref.dtype if ref.is_floating_point() else torch.float64)
        mixed = torch.einsum("ij,j...->i...", w,
                             stacked if ref.is_floating_point() else stacked.to(w.dtype))
        if not ref.is_floating_point():
            mixed = mixed.round().to(ref.dtype)
        for i in range(len(models)):
            out[i][k] = mixed[i]
    return out


def group_crsm(cids: list[int], groups: list[list[int]]) -> Tensor:
    """The oracle CRSM of FedSHIBU Fig. 1: 1 between clients of the same group, 0 otherwise
    (float64)."""
    where = {c: g for g, members in enumerate(groups) for c in members}
    missing = [c for c in cids if c not in where]
    if missing:
        raise ValueError(f"clients {missing} are in no group of {groups}.")
    g = torch.tensor([where[c] for c in cids])
    return (g[:, None] == g[None, :]).to(torch.float64)


def label_overlap(counts: Tensor) -> Tensor:
    """Cosine similarity of clients' label histograms (``counts``: clients × classes): 1 for the
    same label mix, 0 for disjoint labels. What a CRSM should find if it tracks data similarity
    (FedSHIBU Fig. 3)."""
    c = counts.to(torch.float64)
    c = c / c.norm(dim=1, keepdim=True).clamp_min(1e-12)
    return c @ c.T


def offdiag_corr(a: Tensor, b: Tensor) -> float:
    """Pearson correlation of the off-diagonal entries of two square matrices."""
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    off = ~torch.eye(len(a), dtype=torch.bool)
    x, y = a[off] - a[off].mean(), b[off] - b[off].mean()
    return float((x * y).sum() / (x.norm() * y.norm()).clamp_min(1e-300))


def chance_crsm(features: list[Tensor]) -> Tensor:
    """The linear CKA that ``m`` clients' representations (each (n_i, d), cut to the smallest n)
    give on average over every pairing of their rows (float64, 1 on the diagonal).

    With each client's own samples, row a of D̂_i and row a of D̂_j are different images, so the
    pairing CKA relies on is arbitrary. For centered Grams K and L of n samples, the mean of tr(K ·
    P L Pᵀ) over all permutations P is tr K · tr L / (n − 1), so ``S[i, j] = √(r_i r_j) / (n − 1)``
    with r = (tr K)² / ‖K‖²_F, the participation ratio of each client's representation alone: a
    product of one number per client, blind to what the clients share."""
    n = min(len(f) for f in features)
    if n < 2:
        raise ValueError(f"chance_crsm needs at least 2 samples per client, got {n}.")
    root_r = []
    for f in features:
        x = f[:n].to(torch.float64)
        x = x - x.mean(0)
        # tr K / ‖K‖_F, via X^T X (d x d)
        root_r.append(x.square().sum() / (x.T @ x).norm().clamp_min(1e-300))
    r = torch.stack(root_r)
    S = r[:, None] * r[None, :] / (n - 1)
    return S.fill_diagonal_(1.0)


def feature_crsm(features: list[Tensor]) -> Tensor:
    """Linear CKA of ``m`` clients' representations (each (n_i, d), cut to the smallest n) with the
    feature axis paired instead of the sample axis: the CKA of the transposed D̂_i, i.e. the cosine
    of the clients' centered (d, d) feature Gram matrices. With each client's own samples the
    features are the one axis whose entries correspond (the same unit of the same architecture,
    every body started from one model)."""
    n = min(len(f) for f in features)
    if n < 1:
        raise ValueError("feature_crsm needs at least 1 sample per client.")
    return cka_matrix([f[:n].T.contiguous() for f in features], kind="linear")
