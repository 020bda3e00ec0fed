"""What MOON, FedCKA and FedIntR share: the global model and the client's previous local model as frozen
references.

``references`` gives every client the round's global model (one object: executors evaluate it once for all
clients) and its own model from the last round it took part in; at a client's first participation that is the
global model itself (FedIntR Algorithm 1 synchronizes the old local model with the global one; FedCKA's notes: the
term is then exactly log 2). ``client_end`` keeps the trained model in ``ctx.state["prev"]`` (checkpointed with the
engine's per-client state).

With μ = 0 the term is off (:meth:`WithPrevious.declare`): the loss is the cross-entropy alone, nothing is tapped
or referenced, and a projection head only the term reaches is not trained — FedAvg, bit for bit (tested).
"""

from __future__ import annotations

import dataclasses

from fedlib.strategies.base import ClientContext, Needs, Params, Strategy


class WithPrevious(Strategy):
    """A strategy whose penalty compares the local model with the global and the previous local model."""

    mu: float

    def declare(self, taps: tuple[str, ...]) -> None:
        """The local step's needs: the class's references and tensors with ``taps``; none at all when μ = 0."""
        self.needs = dataclasses.replace(type(self).needs, taps=taps) if self.mu else Needs()

    def references(self, ctx: ClientContext, global_params: Params) -> dict[str, Params]:
        return {"global": global_params, "prev": ctx.state.get("prev", global_params)}

    def client_end(self, ctx: ClientContext, start: Params, params: Params) -> Params:
        ctx.state["prev"] = params
        return params
