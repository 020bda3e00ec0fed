"""Seeded client partitions: pure functions of ``(labels, parameters, seed)``.

Schemes (:data:`SCHEMES`, dispatched by :func:`make_partition`):

* ``iid`` — a seeded permutation cut into ``n_clients`` near-equal parts.
* ``dirichlet`` — label skew with per-class proportions ``p ~ Dir(β·1)``. Conventions:

  - ``"niid-bench"`` (default; MOON / NIID-Bench ``noniid-labeldir``, used by FedCKA and MOON):
    balance cap (a client already holding ≥ N/n samples gets no share of later classes) and the
    whole draw is retried until every client holds ≥ ``min_size`` = 10 samples.
  - ``"fedintr"``: FedIntR's own split: no cap, no retry (``min_size`` = 0).
  - ``"flower"``: Flower's ``DirichletPartitioner`` defaults: no cap, retry until ≥ 10 samples per
    client.

  ``balance_cap`` / ``min_size`` given explicitly override the convention's values.
* ``shards`` — McMahan et al. / FedBABU pathological split: each class cut into equal shards,
  ``shards_per_user`` shards per client, and the test set split with the same class assignment.
* ``label_groups`` — FedSHIBU Fig. 1: clients 0–4 hold labels 0–4, clients 5–9 hold labels 5–9.

Randomness is numpy's ``Generator`` (PCG64) seeded by ``seed``: results are reproducible across runs
and platforms but not bit-identical to the reference implementations, which use numpy's legacy
global ``np.random`` stream (NIID-Bench) or an unseeded shuffle (FedBABU's shards).

Every :class:`Partition` carries a :attr:`~Partition.hash` of its indices, stored with every result.
"""

from __future__ import annotations

from typing import Any, Callable

from fedlib.partition.base import Partition
from fedlib.partition.schemes import DIRICHLET_CONVENTIONS, dirichlet, iid, label_groups, shards

__all__ = ["Partition", "SCHEMES", "PERSONAL_SCHEMES", "DIRICHLET_CONVENTIONS", "iid", "dirichlet",
           "shards", "label_groups", "make_partition"]


def _make_iid(labels: Any, n_clients: int, seed: int, test_labels: Any = None,
              **kw: Any) -> Partition:
    if kw:
        raise TypeError(f"iid takes no parameters, got {sorted(kw)}.")
    return iid(labels, n_clients, seed)


def _make_dirichlet(labels: Any, n_clients: int, seed: int, test_labels: Any = None,
                    **kw: Any) -> Partition:
    if "beta" not in kw and "alpha" in kw:  # FedCKA calls the concentration α
        kw["beta"] = kw.pop("alpha")
    if "beta" not in kw:
        raise ValueError("dirichlet needs beta (the concentration), e.g. partition_kw={'beta': "
                         "0.5}.")
    return dirichlet(labels, n_clients, seed=seed, **kw)


def _make_shards(labels: Any, n_clients: int, seed: int, test_labels: Any = None,
                 **kw: Any) -> Partition:
    if "shards_per_user" not in kw and "s" in kw:
        kw["shards_per_user"] = kw.pop("s")
    if "shards_per_user" not in kw:
        raise ValueError("shards needs shards_per_user, e.g. partition_kw={'shards_per_user': 2}.")
    return shards(labels, n_clients, seed=seed, test_labels=test_labels, **kw)


def _make_label_groups(labels: Any, n_clients: int, seed: int, test_labels: Any = None,
                       **kw: Any) -> Partition:
    groups = kw.pop("groups", ((0, 1, 2, 3, 4), (5, 6, 7, 8, 9)))
    cpg = kw.pop("clients_per_group", None)
    if kw:
        raise TypeError(f"label_groups got unexpected parameters {sorted(kw)}.")
    if cpg is None:
        if n_clients % len(groups):
            raise ValueError(f"label_groups: {n_clients} clients cannot be divided evenly among "
                             f"{len(groups)} groups; use a multiple of {len(groups)} clients or "
                             "pass clients_per_group.")
        cpg = n_clients // len(groups)
    elif cpg * len(groups) != n_clients:
        raise ValueError(
            f"label_groups: {len(groups)} groups × clients_per_group={cpg} = "
            f"{cpg * len(groups)} clients, but n_clients={n_clients}; make them agree.")
    return label_groups(labels, groups, cpg, seed, test_labels=test_labels)


SCHEMES: dict[str, Callable[..., Partition]] = {
    "iid": _make_iid,
    "dirichlet": _make_dirichlet,
    "shards": _make_shards,
    "label_groups": _make_label_groups,
}
# schemes whose partition carries per-client test splits
PERSONAL_SCHEMES = ("shards", "label_groups")


def make_partition(scheme: str, labels: Any, n_clients: int, seed: int, *, test_labels: Any = None,
                   **params: Any) -> Partition:
    """Dispatch to a scheme by name (:data:`SCHEMES`); ``params`` are the scheme's keyword
    parameters.

    ``test_labels`` is used by the schemes with a per-client test split (``shards``,
    ``label_groups``) and ignored by the others.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"Unknown partition scheme {scheme!r}; valid schemes: "
                         f"{', '.join(SCHEMES)}.")
    return SCHEMES[scheme](labels, int(n_clients), int(seed), test_labels, **params)
