"""Local-only training: the personalized methods' baseline (each client keeps and trains its own
model)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fedlib.strategies.base import ClientContext, Params, Strategy, StrategyOptions


class LocalOnly(Strategy):
    """Each client trains alone with the same budget (personalized methods' baseline); the global
    model is never trained, so only the personalized accuracy is meaningful."""

    name = "local_only"
    trains_global_model = False

    @dataclass(frozen=True)
    class Options(StrategyOptions):
        """Local-only training takes no options."""

    def client_start(self, ctx: ClientContext, global_params: Params) -> Params:
        return ctx.state.get("own", global_params)

    def client_end(self, ctx: ClientContext, start: Params, params: Params) -> Params:
        ctx.state["own"] = params
        return params

    def aggregate(self, rnd, global_params, uploads, weights,
                  ctxs) -> tuple[Params, dict[str, Any]]:
        return global_params, {}

    def eval_params(self, cid: int, global_params: Params, state: dict[str, Any]) -> Params:
        return state.get("own", global_params)
