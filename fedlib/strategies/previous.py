"""What MOON, FedCKA and FedIntR share: the global model and the client's previous local model as
frozen references, and the two-way contrastive cross-entropy each of their losses is made of.

``references`` gives every client the round's global model (one object: executors evaluate it once
for all clients) and its own model from the last round it took part in; at a client's first
participation that is the global model itself (FedIntR Algorithm 1 synchronizes the old local model
with the global one; FedCKA's notes: the term is then exactly log 2). ``client_end`` keeps the
trained model in ``ctx.state["prev"]`` (checkpointed with the engine's per-client state).

Each loss is a two-way softmax cross-entropy with the global model as the positive
(:func:`two_way_nll`):

    −log( e^{s_g} / (e^{s_g} + e^{s_p}) ) = log(e^{s_g} + e^{s_p}) − s_g = softplus(s_p − s_g)

in log-sum-exp form: finite for any similarity, including unnormalized ones such as a squared
Frobenius distance of whole activation maps, where ``exp`` overflows float32. The losses differ in
the similarity and where it is taken (``moon_loss``, ``fedcka_loss``, ``fedintr_loss``, each in its
strategy's file); all are pure tensor code (no ``.item()``, no branching on values), so they run
under ``torch.func.vmap``.

With μ = 0 the term is off (:meth:`WithPrevious.declare`): the loss is the cross-entropy alone,
nothing is tapped or referenced, and a projection head only the term reaches is not trained —
FedAvg, bit for bit (tested).
"""

from __future__ import annotations

import dataclasses

import torch.nn.functional as F
from torch import Tensor

from fedlib.strategies.base import ClientContext, Needs, Params, Strategy


def two_way_nll(s_g: Tensor, s_p: Tensor) -> Tensor:
    """``−log(e^{s_g} / (e^{s_g} + e^{s_p}))`` elementwise, as ``softplus(s_p − s_g)``: finite for
    any finite input, and exactly log 2 (with opposite, cancelling gradients) where
    ``s_g == s_p``."""
    return F.softplus(s_p - s_g)


class WithPrevious(Strategy):
    """A strategy whose penalty compares the local model with the global and the previous local
    model; its options have a weight ``mu``."""

    def declare(self, taps: tuple[str, ...]) -> None:
        """The local step's needs: the class's references and tensors with ``taps``; none at all
        when μ = 0."""
        on = self.options.mu  # type: ignore[attr-defined]
        self.needs = dataclasses.replace(type(self).needs, taps=taps) if on else Needs()

    def references(self, ctx: ClientContext, global_params: Params) -> dict[str, Params]:
        return {"global": global_params, "prev": ctx.state.get("prev", global_params)}

    def client_end(self, ctx: ClientContext, start: Params, params: Params) -> Params:
        ctx.state["prev"] = params
        return params
