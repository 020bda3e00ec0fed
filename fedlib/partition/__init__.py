"""Seeded client partitions: pure functions of ``(labels, parameters, seed)``.

Schemes (:data:`SCHEMES`, dispatched by :func:`make_partition`):

* ``iid`` — a seeded permutation cut into ``n_clients`` near-equal parts.
* ``dirichlet`` — label skew with per-class proportions ``p ~ Dir(β·1)``. Conventions:

  - ``"niid-bench"`` (default; MOON / NIID-Bench ``noniid-labeldir``, used by FedCKA and MOON): balance cap
    (a client already holding ≥ N/n samples gets no share of later classes) and the whole draw is retried until
    every client holds ≥ ``min_size`` = 10 samples.
  - ``"fedintr"``: FedIntR's own split: no cap, no retry (``min_size`` = 0).
  - ``"flower"``: Flower's ``DirichletPartitioner`` defaults: no cap, retry until ≥ 10 samples per client.

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

import hashlib
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["Partition", "SCHEMES", "PERSONAL_SCHEMES", "DIRICHLET_CONVENTIONS", "iid", "dirichlet", "shards", "label_groups",
           "make_partition"]


# ------------------------------------------------------------------------------------------------ Partition

def _freeze(ix: Any) -> np.ndarray:
    a = np.array(ix, dtype=np.int64).reshape(-1)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Partition:
    """Train (and optionally test) sample indices per client.

    ``client_indices[c]``: sorted int64 indices into the training split for client ``c``.
    ``counts[c, k]``: how many of them have label ``k``.
    ``test_indices``: per-client indices into the test split (shards, label groups), else ``None``.
    """

    client_indices: list[np.ndarray]
    counts: np.ndarray
    test_indices: list[np.ndarray] | None = None
    scheme: str = "custom"
    params: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "client_indices", [_freeze(ix) for ix in self.client_indices])
        if self.test_indices is not None:
            object.__setattr__(self, "test_indices", [_freeze(ix) for ix in self.test_indices])
        counts = np.array(self.counts, dtype=np.int64)
        if counts.ndim != 2 or counts.shape[0] != len(self.client_indices):
            raise ValueError(f"counts must be (n_clients, n_classes); got {counts.shape} for "
                             f"{len(self.client_indices)} clients.")
        counts.setflags(write=False)
        object.__setattr__(self, "counts", counts)

    @classmethod
    def from_indices(cls, client_indices: Sequence[Any], labels: Any, scheme: str = "custom",
                     params: dict | None = None, test_indices: Sequence[Any] | None = None,
                     num_classes: int | None = None) -> "Partition":
        """Build a partition from index lists; ``counts`` is computed from ``labels``."""
        labels = _labels(labels)
        k = num_classes if num_classes is not None else (int(labels.max()) + 1 if labels.size else 0)
        counts = np.stack([np.bincount(labels[np.asarray(ix, dtype=np.int64)], minlength=k)
                           for ix in client_indices]) if len(client_indices) else np.zeros((0, k), np.int64)
        return cls([np.sort(np.asarray(ix, dtype=np.int64)) for ix in client_indices], counts,
                   None if test_indices is None else [np.sort(np.asarray(ix, dtype=np.int64))
                                                      for ix in test_indices],
                   scheme, dict(params or {}))

    @property
    def n_clients(self) -> int:
        return len(self.client_indices)

    @property
    def sizes(self) -> np.ndarray:
        """Number of training samples per client."""
        return np.array([len(ix) for ix in self.client_indices], dtype=np.int64)

    @cached_property
    def hash(self) -> str:
        """First 16 hex digits of a sha256 over the client (and test) indices, as little-endian
        int64.

        Each list is prefixed with the client count and each client's indices with their length, so
        different splits of the same indices hash differently. Independent of platform and numpy
        version.
        """
        h = hashlib.sha256()

        def feed(lists: list[np.ndarray]) -> None:
            h.update(np.int64(len(lists)).astype("<i8").tobytes())
            for ix in lists:
                h.update(np.int64(len(ix)).astype("<i8").tobytes())
                h.update(ix.astype("<i8", copy=False).tobytes())

        h.update(b"train")
        feed(self.client_indices)
        if self.test_indices is not None:
            h.update(b"test")
            feed(self.test_indices)
        return h.hexdigest()[:16]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Partition) and self.hash == other.hash and self.scheme == other.scheme

    def __hash__(self) -> int:
        return hash((self.hash, self.scheme))

    def __repr__(self) -> str:
        s = self.sizes
        return (f"Partition({self.scheme}, clients={self.n_clients}, sizes {s.min() if s.size else 0}.."
                f"{s.max() if s.size else 0}, test={'yes' if self.test_indices is not None else 'no'}, "
                f"hash={self.hash}, params={self.params})")


# -------------------------------------------------------------------------------------------------- helpers

def _labels(labels: Any) -> np.ndarray:
    if hasattr(labels, "detach"):  # torch tensor
        labels = labels.detach().cpu().numpy()
    y = np.asarray(labels)
    if y.ndim != 1:
        y = y.reshape(-1)
    if y.size and not np.issubdtype(y.dtype, np.integer):
        if not np.all(np.equal(np.mod(y, 1), 0)):
            raise ValueError("labels must be integers.")
    y = y.astype(np.int64)
    if y.size and y.min() < 0:
        raise ValueError("labels must be non-negative integers.")
    return y


def _check_clients(n_clients: int, n_samples: int) -> None:
    if int(n_clients) != n_clients or n_clients < 1:
        raise ValueError(f"n_clients must be a positive integer, got {n_clients!r}.")
    if n_clients > n_samples:
        raise ValueError(f"Cannot split {n_samples} samples among {n_clients} clients: every client needs at "
                         f"least one sample. Use at most {n_samples} clients or more data (larger n_train).")


def _class_indices(y: np.ndarray, k: int) -> list[np.ndarray]:
    order = np.argsort(y, kind="stable")
    bounds = np.cumsum(np.bincount(y, minlength=k))
    return np.split(order, bounds[:-1])


# ------------------------------------------------------------------------------------------------------ iid

def iid(labels: Any, n_clients: int, seed: int) -> Partition:
    """Uniformly random split: a seeded permutation cut into ``n_clients`` parts whose sizes differ
    by ≤ 1."""
    y = _labels(labels)
    _check_clients(n_clients, len(y))
    perm = np.random.default_rng(seed).permutation(len(y))
    parts = np.array_split(perm, int(n_clients))
    return Partition.from_indices(parts, y, "iid", {"n_clients": int(n_clients), "seed": int(seed)})


# ------------------------------------------------------------------------------------------------ dirichlet

DIRICHLET_CONVENTIONS: dict[str, dict[str, Any]] = {
    "niid-bench": {"balance_cap": True, "min_size": 10},   # MOON / NIID-Bench noniid-labeldir (FedCKA, MOON)
    "fedintr": {"balance_cap": False, "min_size": 0},      # FedIntR's partitioner: no cap, no retry
    "flower": {"balance_cap": False, "min_size": 10},      # Flower DirichletPartitioner defaults
}


def dirichlet(labels: Any, n_clients: int, beta: float, seed: int, *, balance_cap: bool | None = None,
              min_size: int | None = None, max_retries: int = 1000, convention: str = "niid-bench") -> Partition:
    """Label-skewed split with per-class client proportions ``p ~ Dir(β·1_n)``.

    For each class in turn: shuffle its indices, draw ``p``; with ``balance_cap`` zero the share of
    every client that already holds ≥ N/n samples and renormalize; cut the class at
    ``floor(cumsum(p)·n_k)``. The whole draw is repeated (the generator keeps running) until every
    client holds ≥ ``min_size`` samples, at most ``max_retries`` times. ``balance_cap`` /
    ``min_size`` default to the ``convention``'s values (:data:`DIRICHLET_CONVENTIONS`:
    ``"niid-bench"`` cap + 10, ``"fedintr"`` no cap + 0, ``"flower"`` no cap + 10).

    If the cap zeroes every client with a nonzero share (possible only for tiny β, whose draws
    contain exact zeros) the class is split evenly among the uncapped clients instead of producing
    NaNs. Not bit-identical to NIID-Bench, which draws from numpy's legacy global ``np.random``
    stream.
    """
    if convention not in DIRICHLET_CONVENTIONS:
        raise ValueError(f"Unknown Dirichlet convention {convention!r}; valid: {sorted(DIRICHLET_CONVENTIONS)}.")
    conv = DIRICHLET_CONVENTIONS[convention]
    cap = conv["balance_cap"] if balance_cap is None else bool(balance_cap)
    min_size = conv["min_size"] if min_size is None else int(min_size)
    y = _labels(labels)
    N = len(y)
    try:
        beta = float(beta)
    except (TypeError, ValueError):
        raise ValueError(f"beta must be a positive number, got {beta!r}.") from None
    if not math.isfinite(beta) or beta <= 0:
        raise ValueError(f"Dirichlet beta must be a finite number > 0 (got {beta}); use e.g. beta=0.5 for "
                         f"moderate or beta=100 for near-iid heterogeneity, or scheme='iid'.")
    _check_clients(n_clients, N)
    n = int(n_clients)
    if min_size < 0:
        raise ValueError(f"min_size must be >= 0, got {min_size}.")
    if min_size * n > N:
        raise ValueError(f"min_size={min_size} for {n} clients needs {min_size * n} samples but there are only {N}:"
                         f" lower min_size (min_size <= {N // n}) or use fewer clients.")
    if max_retries < 1:
        raise ValueError(f"max_retries must be >= 1, got {max_retries}.")
    k = int(y.max()) + 1
    by_class = _class_indices(y, k)
    rng = np.random.default_rng(seed)
    alpha = np.full(n, beta)
    threshold = N / n
    best = -1
    for attempt in range(1, max_retries + 1):
        sizes = np.zeros(n, dtype=np.int64)
        pieces: list[list[np.ndarray]] = [[] for _ in range(n)]
        for c in range(k):
            idx = rng.permutation(by_class[c])
            p = rng.dirichlet(alpha)
            if cap:
                open_ = sizes < threshold
                p = p * open_
                if p.sum() <= 0:
                    p = open_.astype(np.float64)
            p = p / p.sum()
            cuts = (np.cumsum(p) * len(idx)).astype(np.int64)[:-1]
            for j, part in enumerate(np.split(idx, cuts)):
                if len(part):
                    pieces[j].append(part)
                    sizes[j] += len(part)
        best = max(best, int(sizes.min()))
        if sizes.min() >= min_size:
            break
    else:
        raise ValueError(
            f"Dirichlet split (beta={beta}, {n} clients, {N} samples) left some client with fewer than "
            f"min_size={min_size} samples after max_retries={max_retries} draws (best smallest client: {best}). "
            f"Lower min_size, raise beta, or use fewer clients.")
    parts = [np.concatenate(pc) if pc else np.zeros(0, np.int64) for pc in pieces]
    params = {"n_clients": n, "beta": beta, "seed": int(seed), "balance_cap": cap, "min_size": min_size,
              "max_retries": int(max_retries), "convention": convention, "draws": attempt}
    return Partition.from_indices(parts, y, "dirichlet", params, num_classes=k)


# --------------------------------------------------------------------------------------------------- shards

def shards(labels: Any, n_clients: int, shards_per_user: int, seed: int, *,
           test_labels: Any = None) -> Partition:
    """Pathological non-iid split (McMahan et al. 2017; FedBABU): ``shards_per_user`` class shards
    per client.

    There are ``S = n_clients·shards_per_user`` shards, ``S / K`` per class (K = number of classes,
    which must divide S). Each class's indices are shuffled and cut into that many near-equal
    shards; the list of shard labels (each class repeated ``S / K`` times) is shuffled and dealt
    ``shards_per_user`` per client, so a client holds at most ``shards_per_user`` distinct classes
    (fewer when it draws two shards of one class). With ``test_labels``, the test split of each
    class is cut into the same number of shards and client ``c`` receives the test shards matching
    its train shards: only its classes, in the same proportions, disjoint across clients. Seeded
    (FedBABU's shuffle is unseeded).
    """
    y = _labels(labels)
    N = len(y)
    _check_clients(n_clients, N)
    n = int(n_clients)
    if int(shards_per_user) != shards_per_user or shards_per_user < 1:
        raise ValueError(f"shards_per_user must be a positive integer, got {shards_per_user!r}.")
    s = int(shards_per_user)
    yt = None if test_labels is None else _labels(test_labels)
    k = int(y.max()) + 1
    total = n * s
    if total % k:
        lo, hi = (total // k) * k, (total // k + 1) * k
        raise ValueError(
            f"shards: n_clients·shards_per_user = {n}·{s} = {total} shards cannot be spread evenly over {k} "
            f"classes; choose n_clients and shards_per_user whose product is a multiple of {k} "
            f"(e.g. {lo or k} or {hi} shards).")
    per_class = total // k
    if total > N:
        raise ValueError(f"shards: {total} shards requested but only {N} samples; use fewer clients, a smaller "
                         f"shards_per_user, or more data.")
    counts = np.bincount(y, minlength=k)
    short = [c for c in range(k) if counts[c] < per_class]
    if short:
        raise ValueError(f"shards: classes {short[:10]} have fewer than {per_class} training samples, so some of "
                         f"their {per_class} shards would be empty; use fewer clients, a smaller shards_per_user, "
                         f"or more data.")
    rng = np.random.default_rng(seed)
    train_shards = [np.array_split(rng.permutation(ix), per_class) for ix in _class_indices(y, k)]
    test_shards = None
    if yt is not None:
        kt = max(k, int(yt.max()) + 1 if yt.size else 0)
        test_shards = [np.array_split(rng.permutation(ix), per_class) for ix in _class_indices(yt, kt)[:k]]
    deal = rng.permutation(np.repeat(np.arange(k), per_class)).reshape(n, s)
    next_shard = np.zeros(k, dtype=np.int64)
    parts, tparts = [], []
    for row in deal:
        tr, te = [], []
        for c in row:
            j = next_shard[c]
            next_shard[c] += 1
            tr.append(train_shards[c][j])
            if test_shards is not None:
                te.append(test_shards[c][j])
        parts.append(np.concatenate(tr))
        if test_shards is not None:
            tparts.append(np.concatenate(te))
    if test_shards is not None:
        empty = [c for c, t in enumerate(tparts) if len(t) == 0]
        if empty:
            raise ValueError(f"shards: clients {empty[:10]} get no test samples (the test split has too few samples "
                             f"per class for {per_class} shards each); use more test data (larger n_test), fewer "
                             f"clients, or a smaller shards_per_user.")
    params = {"n_clients": n, "shards_per_user": s, "seed": int(seed)}
    return Partition.from_indices(parts, y, "shards", params, None if yt is None else tparts, num_classes=k)


# --------------------------------------------------------------------------------------------- label groups

def label_groups(labels: Any, groups: Sequence[Sequence[int]] = ((0, 1, 2, 3, 4), (5, 6, 7, 8, 9)),
                 clients_per_group: int = 5, seed: int = 0, *, test_labels: Any = None) -> Partition:
    """FedSHIBU Fig. 1: group ``g``'s clients (``g·clients_per_group`` … ``(g+1)·clients_per_group −
    1``) hold only the labels in ``groups[g]``.

    Each class is shuffled and split evenly (sizes differ by ≤ 1) among the clients whose group
    contains it, so every client of a group holds the same mix of its group's labels; a label in
    several groups is shared by all their clients. Samples whose label is in no group are left out.
    With ``test_labels`` the test split is divided the same way.
    """
    y = _labels(labels)
    yt = None if test_labels is None else _labels(test_labels)
    groups = [tuple(int(l) for l in g) for g in groups]
    if not groups or any(len(g) == 0 for g in groups):
        raise ValueError("label_groups: every group needs at least one label, e.g. groups=((0,1,2,3,4),(5,6,7,8,9)).")
    if int(clients_per_group) != clients_per_group or clients_per_group < 1:
        raise ValueError(f"clients_per_group must be a positive integer, got {clients_per_group!r}.")
    cpg = int(clients_per_group)
    present = set(np.unique(y).tolist())
    missing = sorted({l for g in groups for l in g} - present)
    if missing:
        raise ValueError(f"label_groups: labels {missing} are named in groups but absent from the data (present: "
                         f"{sorted(present)}); fix groups to use only present labels.")
    n = len(groups) * cpg
    holders: dict[int, list[int]] = {}
    for gi, g in enumerate(groups):
        for l in dict.fromkeys(g):
            holders.setdefault(l, []).extend(range(gi * cpg, (gi + 1) * cpg))
    k = int(y.max()) + 1
    rng = np.random.default_rng(seed)

    def split(lab: np.ndarray, what: str) -> list[np.ndarray]:
        kk = max(k, int(lab.max()) + 1 if lab.size else 0)
        by_class = _class_indices(lab, kk)
        out: list[list[np.ndarray]] = [[] for _ in range(n)]
        for l in sorted(holders):
            hs = holders[l]
            ix = by_class[l] if l < kk else np.zeros(0, np.int64)
            if len(ix) < len(hs):
                raise ValueError(f"label_groups: label {l} has {len(ix)} {what} samples for {len(hs)} clients; use "
                                 f"fewer clients_per_group or more data.")
            for h, part in zip(hs, np.array_split(rng.permutation(ix), len(hs))):
                out[h].append(part)
        return [np.concatenate(o) if o else np.zeros(0, np.int64) for o in out]

    parts = split(y, "training")
    tparts = split(yt, "test") if yt is not None else None
    params = {"n_clients": n, "groups": [list(g) for g in groups], "clients_per_group": cpg, "seed": int(seed)}
    return Partition.from_indices(parts, y, "label_groups", params, tparts, num_classes=k)


# ------------------------------------------------------------------------------------------------- registry

def _make_iid(labels: Any, n_clients: int, seed: int, test_labels: Any = None, **kw: Any) -> Partition:
    if kw:
        raise TypeError(f"iid takes no parameters, got {sorted(kw)}.")
    return iid(labels, n_clients, seed)


def _make_dirichlet(labels: Any, n_clients: int, seed: int, test_labels: Any = None, **kw: Any) -> Partition:
    if "beta" not in kw and "alpha" in kw:  # FedCKA calls the concentration α
        kw["beta"] = kw.pop("alpha")
    if "beta" not in kw:
        raise ValueError("dirichlet needs beta (the concentration), e.g. partition_kw={'beta': 0.5}.")
    return dirichlet(labels, n_clients, seed=seed, **kw)


def _make_shards(labels: Any, n_clients: int, seed: int, test_labels: Any = None, **kw: Any) -> Partition:
    if "shards_per_user" not in kw and "s" in kw:
        kw["shards_per_user"] = kw.pop("s")
    if "shards_per_user" not in kw:
        raise ValueError("shards needs shards_per_user, e.g. partition_kw={'shards_per_user': 2}.")
    return shards(labels, n_clients, seed=seed, test_labels=test_labels, **kw)


def _make_label_groups(labels: Any, n_clients: int, seed: int, test_labels: Any = None, **kw: Any) -> Partition:
    groups = kw.pop("groups", ((0, 1, 2, 3, 4), (5, 6, 7, 8, 9)))
    cpg = kw.pop("clients_per_group", None)
    if kw:
        raise TypeError(f"label_groups got unexpected parameters {sorted(kw)}.")
    if cpg is None:
        if n_clients % len(groups):
            raise ValueError(f"label_groups: {n_clients} clients cannot be divided evenly among {len(groups)} "
                             f"groups; use a multiple of {len(groups)} clients or pass clients_per_group.")
        cpg = n_clients // len(groups)
    elif cpg * len(groups) != n_clients:
        raise ValueError(f"label_groups: {len(groups)} groups × clients_per_group={cpg} = {cpg * len(groups)} "
                         f"clients, but n_clients={n_clients}; make them agree.")
    return label_groups(labels, groups, cpg, seed, test_labels=test_labels)


SCHEMES: dict[str, Callable[..., Partition]] = {
    "iid": _make_iid,
    "dirichlet": _make_dirichlet,
    "shards": _make_shards,
    "label_groups": _make_label_groups,
}
PERSONAL_SCHEMES = ("shards", "label_groups")  # schemes whose partition carries per-client test splits


def make_partition(scheme: str, labels: Any, n_clients: int, seed: int, *, test_labels: Any = None,
                   **params: Any) -> Partition:
    """Dispatch to a scheme by name (:data:`SCHEMES`); ``params`` are the scheme's keyword
    parameters.

    ``test_labels`` is used by the schemes with a per-client test split (``shards``,
    ``label_groups``) and ignored by the others.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"Unknown partition scheme {scheme!r}; valid schemes: {', '.join(SCHEMES)}.")
    return SCHEMES[scheme](labels, int(n_clients), int(seed), test_labels, **params)
