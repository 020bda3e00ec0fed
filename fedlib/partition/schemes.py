"""The partition schemes, pure functions of ``(labels, parameters, seed)``: :func:`iid`,
:func:`dirichlet` (label skew, three conventions), :func:`shards` and :func:`label_groups` (with
per-client test splits). :mod:`fedlib.partition` describes each."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from fedlib.partition.base import Partition, _check_clients, _class_indices, _labels

__all__ = ["DIRICHLET_CONVENTIONS", "iid", "dirichlet", "shards", "label_groups"]


def iid(labels: Any, n_clients: int, seed: int) -> Partition:
    """Uniformly random split: a seeded permutation cut into ``n_clients`` parts whose sizes differ
    by ≤ 1."""
    y = _labels(labels)
    _check_clients(n_clients, len(y))
    perm = np.random.default_rng(seed).permutation(len(y))
    parts = np.array_split(perm, int(n_clients))
    return Partition.from_indices(parts, y, "iid", {"n_clients": int(n_clients), "seed": int(seed)})


DIRICHLET_CONVENTIONS: dict[str, dict[str, Any]] = {
    "niid-bench": {"balance_cap": True, "min_size": 10},  # NIID-Bench noniid-labeldir: FedCKA, MOON
    "fedintr": {"balance_cap": False, "min_size": 0},  # FedIntR's partitioner: no cap, no retry
    "flower": {"balance_cap": False, "min_size": 10},  # Flower DirichletPartitioner defaults
}


def dirichlet(labels: Any, n_clients: int, beta: float, seed: int, *,
              balance_cap: bool | None = None, min_size: int | None = None, max_retries: int = 1000,
              convention: str = "niid-bench") -> Partition:
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
        raise ValueError(f"Unknown Dirichlet convention {convention!r}; valid: "
                         f"{sorted(DIRICHLET_CONVENTIONS)}.")
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
        raise ValueError(f"Dirichlet beta must be a finite number > 0 (got {beta}); use e.g. "
                         "beta=0.5 for moderate or beta=100 for near-iid heterogeneity, or "
                         "scheme='iid'.")
    _check_clients(n_clients, N)
    n = int(n_clients)
    if min_size < 0:
        raise ValueError(f"min_size must be >= 0, got {min_size}.")
    if min_size * n > N:
        raise ValueError(f"min_size={min_size} for {n} clients needs {min_size * n} samples but "
                         f"there are only {N}: lower min_size (min_size <= {N // n}) or use fewer "
                         "clients.")
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
            f"Dirichlet split (beta={beta}, {n} clients, {N} samples) left some client with fewer "
            f"than min_size={min_size} samples after max_retries={max_retries} draws (best "
            f"smallest client: {best}). Lower min_size, raise beta, or use fewer clients.")
    parts = [np.concatenate(pc) if pc else np.zeros(0, np.int64) for pc in pieces]
    params = {"n_clients": n, "beta": beta, "seed": int(seed), "balance_cap": cap,
              "min_size": min_size, "max_retries": int(max_retries), "convention": convention,
              "draws": attempt}
    return Partition.from_indices(parts, y, "dirichlet", params, num_classes=k)


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
            f"shards: n_clients·shards_per_user = {n}·{s} = {total} shards cannot be spread evenly "
            f"over {k} classes; choose n_clients and shards_per_user whose product is a multiple "
            f"of {k} (e.g. {lo or k} or {hi} shards).")
    per_class = total // k
    if total > N:
        raise ValueError(f"shards: {total} shards requested but only {N} samples; use fewer "
                         "clients, a smaller shards_per_user, or more data.")
    counts = np.bincount(y, minlength=k)
    short = [c for c in range(k) if counts[c] < per_class]
    if short:
        raise ValueError(f"shards: classes {short[:10]} have fewer than {per_class} training "
                         f"samples, so some of their {per_class} shards would be empty; use fewer "
                         "clients, a smaller shards_per_user, or more data.")
    rng = np.random.default_rng(seed)
    train_shards = [np.array_split(rng.permutation(ix), per_class) for ix in _class_indices(y, k)]
    test_shards = None
    if yt is not None:
        kt = max(k, int(yt.max()) + 1 if yt.size else 0)
        test_shards = [np.array_split(rng.permutation(ix), per_class)
                       for ix in _class_indices(yt, kt)[:k]]
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
            raise ValueError(f"shards: clients {empty[:10]} get no test samples (the test split "
                             f"has too few samples per class for {per_class} shards each); use "
                             "more test data (larger n_test), fewer clients, or a smaller "
                             "shards_per_user.")
    params = {"n_clients": n, "shards_per_user": s, "seed": int(seed)}
    return Partition.from_indices(parts, y, "shards", params, None if yt is None else tparts,
                                  num_classes=k)


def label_groups(labels: Any, groups: Sequence[Sequence[int]] = ((0, 1, 2, 3, 4), (5, 6, 7, 8, 9)),
                 clients_per_group: int = 5, seed: int = 0, *,
                 test_labels: Any = None) -> Partition:
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
        raise ValueError("label_groups: every group needs at least one label, e.g. "
                         "groups=((0,1,2,3,4),(5,6,7,8,9)).")
    if int(clients_per_group) != clients_per_group or clients_per_group < 1:
        raise ValueError(
            f"clients_per_group must be a positive integer, got {clients_per_group!r}.")
    cpg = int(clients_per_group)
    present = set(np.unique(y).tolist())
    missing = sorted({l for g in groups for l in g} - present)
    if missing:
        raise ValueError(f"label_groups: labels {missing} are named in groups but absent from the "
                         f"data (present: {sorted(present)}); fix groups to use only present "
                         "labels.")
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
                raise ValueError(f"label_groups: label {l} has {len(ix)} {what} samples for "
                                 f"{len(hs)} clients; use fewer clients_per_group or more data.")
            for h, part in zip(hs, np.array_split(rng.permutation(ix), len(hs))):
                out[h].append(part)
        return [np.concatenate(o) if o else np.zeros(0, np.int64) for o in out]

    parts = split(y, "training")
    tparts = split(yt, "test") if yt is not None else None
    params = {
        "n_clients": n, "groups": [list(g) for g in groups], "clients_per_group": cpg,
        "seed": int(seed)
    }
    return Partition.from_indices(parts, y, "label_groups", params, tparts, num_classes=k)
