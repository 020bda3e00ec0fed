"""The Strategy interface: named hooks that the engine calls; the engine owns every loop.

A strategy is FedAvg plus whatever its paper changes. The hooks, in the order the engine calls them each round::

    setup(model, cfg)                       once: resolve taps / frozen parameters from the model
    client_start(ctx, global_params)        the parameters a sampled client starts from (default: the global ones)
    penalty(ctx, params, global_params,     a term added to the cross-entropy of every local batch; sees the local
            taps, refs, y)                  model's taps and those of frozen reference models ("global", "prev")
    client_end(ctx, start, params)          what the client uploads (default: its trained parameters)
    aggregate(rnd, global_params, uploads,  the server update (default: the sample-size-weighted mean, McMahan
              weights, ctxs)                et al. 2017); may also write one model per client into client state
    eval_params(cid, global_params)         the parameters used for client ``cid``'s personalized evaluation

Parameters travel as ``Params`` — a dict from ``state_dict`` names to tensors (parameters *and* buffers).
``penalty`` must be written with pure tensor ops (no ``.item()``, no in-place updates of its inputs) so that the
vectorized executor can run it under ``torch.func.vmap``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

Params = dict[str, Tensor]


@dataclass
class ClientContext:
    """What a strategy may know about one client in one round."""

    cid: int
    round: int
    n_samples: int
    steps: int  # local optimizer steps this round (K in SCAFFOLD)
    lr: float
    first_visit: bool  # True the first time this client is sampled (no previous local model yet)
    state: dict[str, Any] = field(default_factory=dict)  # persistent per-client state, owned by the strategy


class Strategy:
    """FedAvg (McMahan et al. 2017). Subclasses override only what their paper changes."""

    name = "fedavg"
    taps: tuple[str, ...] = ()  # local-model taps that `penalty` needs
    references: tuple[str, ...] = ()  # frozen reference models whose taps `penalty` needs: "global", "prev"
    uses_global_params = False  # True if `penalty` reads global_params (FedProx)
    persistent_optimizer = False  # keep optimizer state across rounds (centralized training)
    vectorizable = True  # the penalty and hooks run under torch.func.vmap

    def setup(self, model: torch.nn.Module, cfg: Any) -> None:
        """Called once with the model the engine trains."""

    def trainable(self, name: str) -> bool:
        """Whether parameter ``name`` is trained locally (False: frozen, e.g. FedBABU's head)."""
        return True

    def client_start(self, ctx: ClientContext, global_params: Params) -> Params:
        return global_params

    def penalty(self, ctx: ClientContext, params: Params, global_params: Params, taps: list[Tensor],
                refs: dict[str, list[Tensor]], y: Tensor) -> Tensor | None:
        return None

    def client_end(self, ctx: ClientContext, start: Params, params: Params) -> Params:
        return params

    def aggregate(self, rnd: int, global_params: Params, uploads: list[Params], weights: Tensor,
                  ctxs: list[ClientContext]) -> Params:
        return weighted_average(uploads, weights)

    def eval_params(self, cid: int, global_params: Params, state: dict[str, Any]) -> Params:
        return global_params

    # server-side state for checkpoints (SCAFFOLD's c, ...)
    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass

    def describe(self) -> dict[str, Any]:
        """The hyper-parameters that define this strategy (recorded with results)."""
        return {k: v for k, v in vars(self).items() if not k.startswith("_") and _plain(v)}


def weighted_average(uploads: list[Params], weights: Tensor) -> Params:
    """Σ_i w_i θ_i per tensor. Integer buffers (BatchNorm's num_batches_tracked) are averaged and rounded."""
    out: Params = {}
    for k, ref in uploads[0].items():
        stacked = torch.stack([u[k] for u in uploads])
        w = weights.to(device=stacked.device, dtype=torch.float64 if not ref.is_floating_point() else ref.dtype)
        w = w.view(-1, *([1] * ref.dim()))
        if ref.is_floating_point():
            out[k] = (stacked * w).sum(0)
        else:
            out[k] = (stacked.to(w.dtype) * w).sum(0).round().to(ref.dtype)
    return out


def _plain(v: Any) -> bool:
    return isinstance(v, (int, float, str, bool, type(None))) or (
        isinstance(v, (tuple, list)) and all(isinstance(x, (int, float, str, bool)) for x in v))
