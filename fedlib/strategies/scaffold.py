"""SCAFFOLD (Karimireddy et al. 2020, "SCAFFOLD: Stochastic Controlled Averaging for Federated
Learning"): control variates correct each local step for the client's drift.

Per trainable parameter, a server control variate c and one c_i per client, both starting at zero
(the paper; NIID-Bench's random initialization destabilizes partial participation and is not
offered):

    local step      y ← y − η (g_i(y) + c − c_i)
                    (Algorithm 1, line 10: the optimizer's step, then ``correction`` = c − c_i,
                    applied outside momentum as NIID-Bench does)
    client update   c_i⁺ = c_i − c + (x − y_i) / (K η)
                    (option II; K the client's local steps this round)
    server update   c ← c + (1/N) Σ_{i ∈ S} (c_i⁺ − c_i)
                    (N all clients: partial participation)

The model is aggregated as in FedAvg (sample-size weights; the paper's global step size η_g = 1 with
equal client sizes), so a first round with zero control variates is exactly FedAvg's. c and c_i are
flat vectors over the trainable parameters; c is server state (``state_dict``), c_i per-client state
(``ctx.state``), both checkpointed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from fedlib.strategies.base import ClientContext, Needs, Params, Strategy, StrategyOptions


class SCAFFOLD(Strategy):
    name = "scaffold"
    needs = Needs(tensors=("c", "c_i"))

    @dataclass(frozen=True)
    class Options(StrategyOptions):
        """SCAFFOLD takes no options (zero control variates at the start, option II, η_g = 1)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._names: tuple[str, ...] = ()
        self._shapes: list[torch.Size] = []
        self._c: Tensor | None = None  # the server's control variate
        self._dc: Tensor | None = None  # Σ (c_i⁺ − c_i) over this round's clients
        self._zero: Tensor | None = None  # c_i of a client never sampled (one shared object)
        self._n_clients = 1

    def setup(self, model: torch.nn.Module, cfg: Any) -> None:
        self._n_clients = int(cfg.num_clients)

    def _flat(self, params: Params) -> Tensor:
        return torch.cat([params[k].detach().reshape(-1) for k in self._names])

    def client_tensors(self, ctx: ClientContext, global_params: Params) -> dict[str, Tensor]:
        if self._c is None:  # first round: c = 0 over the parameters the clients train
            self._names = tuple(ctx.trainable)
            self._shapes = [global_params[k].shape for k in self._names]
            self._c = torch.zeros_like(self._flat(global_params))
        if self._zero is None or self._zero.shape != self._c.shape:
            self._zero = torch.zeros_like(self._c)
        return {"c": self._c, "c_i": ctx.state.get("c_i", self._zero)}

    def correction(self, ctx: ClientContext, tensors: dict[str, Tensor]) -> Params:
        d = tensors["c"] - tensors["c_i"]
        return {
            k: v.reshape(s)
            for k, v, s in zip(self._names, d.split([s.numel()
                                                     for s in self._shapes]), self._shapes)
        }

    def client_end(self, ctx: ClientContext, start: Params, params: Params) -> Params:
        assert self._c is not None and self._zero is not None
        c_i = ctx.state.get("c_i", self._zero)
        if ctx.steps > 0 and ctx.lr > 0:
            c_new = c_i - self._c + (self._flat(start) - self._flat(params)) / (ctx.steps * ctx.lr)
            self._dc = c_new - c_i if self._dc is None else self._dc + (c_new - c_i)
            ctx.state["c_i"] = c_new
        return params

    def aggregate(self, rnd: int, global_params: Params, uploads: list[Params], weights: Tensor,
                  ctxs: list[ClientContext]) -> tuple[Params, dict[str, Any]]:
        if self._dc is not None and self._c is not None:
            self._c = self._c + self._dc / self._n_clients
        self._dc = None
        return super().aggregate(rnd, global_params, uploads, weights, ctxs)

    def state_dict(self) -> dict[str, Any]:
        return {"c": self._c, "names": list(self._names), "shapes": [list(s) for s in self._shapes]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._c, self._names = state["c"], tuple(state["names"])
        self._shapes = [torch.Size(s) for s in state["shapes"]]
        self._dc = None
