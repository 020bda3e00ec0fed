"""One client's slice of a stacked tensor, for the per-client layers of the vectorized executor's
CPU path (:mod:`fedlib.executors.fast.cpu_conv`, :mod:`fedlib.executors.fast.cpu_layers`).

``rows`` (padded mode) holds each client's real batch size: padding rows are skipped (their outputs
and input gradients are zero; the masked loss gives them no gradient anyway), so per-client work
equals the sequential one.
"""

from __future__ import annotations

from torch import Tensor

__all__ = ["Rows"]

Rows = tuple[int, ...] | None  # real rows per client (padded mode), or None: all rows are real


def _client(t: Tensor, i: int, rows: Rows) -> Tensor:
    """Client ``i``'s slice of a stacked tensor (N, B, ...), without its padding rows."""
    return t[i] if rows is None or rows[i] >= t.shape[1] else t[i, :rows[i]]


def _at(t: Tensor | None, i: int) -> Tensor | None:
    return None if t is None else t[i]


def _batched(t: Tensor, dim: int | None, n: int) -> Tensor:
    return t.expand(n, *t.shape) if dim is None else t.movedim(dim, 0)


def _check_rows(rows: Rows, n: int) -> Rows:
    if rows is not None and len(rows) != n:
        raise RuntimeError(f"per-client conv: {len(rows)} row counts for {n} clients")
    return rows
