"""A client partition (:class:`Partition`: train and optionally test indices per client, with a
hash stored with every result) and the checks every scheme shares."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Sequence

import numpy as np

__all__ = ["Partition"]


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
        if num_classes is not None:
            k = num_classes
        else:
            k = int(labels.max()) + 1 if labels.size else 0
        if len(client_indices):
            counts = np.stack([np.bincount(labels[np.asarray(ix, dtype=np.int64)], minlength=k)
                               for ix in client_indices])
        else:
            counts = np.zeros((0, k), np.int64)
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
        return (isinstance(other, Partition) and self.hash == other.hash
                and self.scheme == other.scheme)

    def __hash__(self) -> int:
        return hash((self.hash, self.scheme))

    def __repr__(self) -> str:
        s = self.sizes
        return (f"Partition({self.scheme}, clients={self.n_clients}, sizes "
                f"{s.min() if s.size else 0}..{s.max() if s.size else 0}, "
                f"test={'yes' if self.test_indices is not None else 'no'}, hash={self.hash}, "
                f"params={self.params})")


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
        raise ValueError(f"Cannot split {n_samples} samples among {n_clients} clients: every "
                         f"client needs at least one sample. Use at most {n_samples} clients or "
                         "more data (larger n_train).")


def _class_indices(y: np.ndarray, k: int) -> list[np.ndarray]:
    order = np.argsort(y, kind="stable")
    bounds = np.cumsum(np.bincount(y, minlength=k))
    return np.split(order, bounds[:-1])
