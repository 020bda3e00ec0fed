"""Reference models' taps computed once per client and round, not once per batch.

A strategy's reference models (``Needs.references``: MOON's, FedCKA's and FedIntR's global and
previous models) are frozen for the whole round and run in eval mode, where every sample's taps
depend on that sample alone. Without augmentation (or with horizontal flips only: each sample then
has two possible inputs) a reference model's taps on a batch are therefore rows of a table computed
once per round over the client's samples: over ``E`` local epochs this replaces ``E`` reference
forward passes per sample by one (two with flips) and leaves the per-step cost at that of the local
model and the penalty. The numbers are the per-batch computation's up to float rounding (a
convolution may pick another algorithm for another batch size).

Clients of one executor call that share a reference model's parameters (the same object, e.g. the
global model) share one pass over their samples; a reference that is the same object as another (a
client's previous model at its first visit is the global model) reuses its table, so the two give
bitwise-identical taps.

The tables hold ``samples × (taps per sample) × distinct references`` numbers (twice that with
flips); above ``FEDLIB_REF_CACHE_MB`` megabytes (default 2048; 0 disables the cache) or with crops,
the executors compute the references per batch as before.
"""

from __future__ import annotations

import os

import torch
from torch import Tensor

from fedlib.augment import VIEWS
from fedlib.local import LocalTask, forward
from fedlib.params import Params

__all__ = ["RefTaps", "build_ref_taps"]

# samples per reference forward pass while the tables are built, by device type (the CPU's: a
# smaller working set is faster, benchmarks/RESULTS.md)
_CHUNK = {"cpu": 512, "cuda": 1024}


class RefTaps:
    """Every reference model's taps on every sample of the clients of one call: rows ``offset[i] +
    position`` for client ``i``'s sample at ``position`` in its index list; ``flipped`` holds the
    taps of the flipped samples.

    Tables are ``(samples, features)`` in the taps' memory order (a channels-last map as ``(n,
    H·W·C)``), so a lookup is a row gather and comes back in the layout the model produced."""

    def __init__(self, tables: dict[str, list[Tensor]], flipped: dict[str, list[Tensor]] | None,
                 offsets: list[int], shapes: list[tuple[torch.Size, bool]]) -> None:
        self.tables, self.flipped, self.offsets, self.shapes = tables, flipped, offsets, shapes

    def lookup(self, rows: Tensor, flip: Tensor | None) -> dict[str, list[Tensor]]:
        """Taps at ``rows`` (any shape; the taps come back with that leading shape); ``flip`` (same
        shape, bool) picks the flipped sample's taps."""
        flat = rows.reshape(-1)
        out: dict[str, list[Tensor]] = {}
        for r, taps in self.tables.items():
            got = []
            for k, t in enumerate(taps):
                v = t.index_select(0, flat)
                if flip is not None and self.flipped is not None:
                    v = torch.where(flip.reshape(-1, 1), self.flipped[r][k].index_select(0, flat),
                                    v)
                shape, nhwc = self.shapes[k]
                if nhwc:  # (m, H·W·C) -> (m, C, H, W) with channels-last strides
                    v = v.view(-1, shape[1], shape[2], shape[0]).permute(0, 3, 1, 2)
                got.append(v.reshape(*rows.shape, *shape))
            out[r] = got
        return out


def _pack(t: Tensor, nhwc: bool) -> Tensor:
    """A tap table ``(n, ...)`` as ``(n, features)``, channels-last order for a channels-last
    map."""
    return (t.permute(0, 2, 3, 1) if nhwc else t).reshape(t.shape[0], -1)


def _budget_bytes() -> int:
    return int(float(os.environ.get("FEDLIB_REF_CACHE_MB", "2048")) * 2**20)


@torch.no_grad()
def build_ref_taps(task: LocalTask, refs: list[dict[str, Params]],
                   indices: list[Tensor]) -> RefTaps | None:
    """The reference taps of clients with reference parameters ``refs`` and training indices
    ``indices`` (device tensors, in the order of each client's positions), or None where the cache
    does not apply (crops, or tables larger than the budget)."""
    needs = task.needs
    if not needs.references or not needs.taps or task.augment not in VIEWS or not indices:
        return None
    flips = task.augment == "flip"
    data = task.data
    # distinct parameter objects: one pass each over the samples of the clients that use it
    distinct: dict[int, tuple[Params, list[int]]] = {}
    for i, rs in enumerate(refs):
        for r in needs.references:
            p = rs[r]
            entry = distinct.setdefault(id(p), (p, []))
            if i not in entry[1]:
                entry[1].append(i)
    n_total = sum(len(ix) for ix in indices)
    probe = forward(task.ref_model, refs[0][needs.references[0]], data.x_train[indices[0][:2]],
                    needs.taps, False)[1]
    per_sample = sum(t[0].numel() * t.element_size() for t in probe)
    shapes = [(t.shape[1:], t.dim() == 4 and not t.is_contiguous()
               and t.is_contiguous(memory_format=torch.channels_last)) for t in probe]
    tables_bytes = per_sample * n_total * len(needs.references) * (2 if flips else 1)
    if tables_bytes > _budget_bytes():
        return None
    offsets = [0]
    for ix in indices[:-1]:
        offsets.append(offsets[-1] + len(ix))

    chunk = _CHUNK.get(data.x_train.device.type, 1024)

    def taps_of(p: Params, ix: Tensor, flip: bool) -> list[Tensor]:
        parts: list[list[Tensor]] = [[] for _ in needs.taps]
        for lo in range(0, len(ix), chunk):
            x = data.x_train[ix[lo:lo + chunk]]
            out = forward(task.ref_model, p, x.flip(-1) if flip else x, needs.taps, False)[1]
            for acc, t, (_, nhwc) in zip(parts, out, shapes):
                acc.append(_pack(t, nhwc))
        return [torch.cat(a) if len(a) > 1 else a[0] for a in parts]

    def table(flip: bool) -> dict[str, list[Tensor]]:
        # (id of the parameters, client) -> taps
        per_client: dict[tuple[int, int], list[Tensor]] = {}
        for key, (p, clients) in distinct.items():
            ix = torch.cat([indices[i] for i in clients])
            taps = taps_of(p, ix, flip)
            lo = 0
            for i in clients:
                n = len(indices[i])
                per_client[(key, i)] = [t[lo:lo + n] for t in taps]
                lo += n
        # one table per distinct column of parameter objects
        built: dict[tuple[int, ...], list[Tensor]] = {}
        out: dict[str, list[Tensor]] = {}
        for r in needs.references:
            column = tuple(id(rs[r]) for rs in refs)
            if column not in built:
                parts = [per_client[(pid, i)] for i, pid in enumerate(column)]
                built[column] = [torch.cat([p[k] for p in parts]) if len(parts) > 1 else parts[0][k]
                                 for k in range(len(needs.taps))]
            out[r] = built[column]
        return out

    return RefTaps(table(False), table(True) if flips else None, offsets, shapes)
