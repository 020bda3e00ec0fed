"""FedSHIBU (Algorithms 1–3) and FedAvg+CRSM (Algorithm 4): one model per client, aggregated by client similarity.

FedSHIBU is FedBABU (head frozen, body trained; head fine-tuned before evaluation) whose server keeps one body
per client: after local training client i uploads its body θ_i and D̂_i, the body's output (the tap feeding the
head: ResNet-18's pooled last conv layer) on ``n`` random samples of its own data; the server computes
``CRSM[i, j] = CKA(D̂_i, D̂_j)`` (``sim``: "linear" or "rbf") and gives client i the body
``Σ_j CRSM[i, j] / Σ_j' CRSM[i, j'] · θ_j`` (:mod:`fedlib.crsm`), which it starts from next round and is
evaluated with. ``sim="uniform"`` makes every row equal: FedBABU with unweighted averaging; ``sim="groups"`` with
``groups=[[0..4], [5..9]]`` is Fig. 1's oracle grouping (aggregation within each group).

Choices the paper leaves open: ``n = 100`` samples (exposed); unpaired D̂ by default (the paper's: each client's
own samples), ``paired=True`` evaluates all bodies on one shared batch; the CRSM mixes the round's participants
(m = N in the paper); the "global" model reported as ``test_acc`` is the sample-weighted body average (FedBABU's).
The CRSM of every round is recorded (``crsm``, ``crsm_clients``) when at most ``keep_crsm`` clients took part.

FedAvg+CRSM (Algorithm 4) applies the same aggregation to the whole model, without decoupling or fine-tuning.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from ..crsm import crsm, group_crsm, mix, row_weights
from .base import ClientContext, FineTune, Params, Strategy, weighted_average
from .fedbabu import FedBABU


class FedSHIBU(FedBABU):
    name = "fedshibu"
    decoupled = True

    def __init__(self, sim: str = "linear", n: int = 100, paired: bool = False, rbf_threshold: float = 0.5,
                 keep_crsm: int = 20, groups: list[list[int]] | None = None, **ft: Any) -> None:
        super().__init__(**ft)
        if sim not in ("linear", "rbf", "uniform", "groups"):
            raise ValueError(f"Unknown CRSM similarity {sim!r}; valid: ('linear', 'rbf', 'uniform', 'groups').")
        if (sim == "groups") != (groups is not None):
            raise ValueError("sim='groups' (the oracle grouping of Fig. 1) and groups=[[client ids], ...] go together.")
        self.groups = None if groups is None else [list(map(int, g)) for g in groups]
        if n < 2:
            raise ValueError(f"FedSHIBU needs n >= 2 samples per client for the CRSM, got {n}.")
        self.sim, self.n, self.paired, self.rbf_threshold, self.keep_crsm = sim, int(n), bool(paired), \
            float(rbf_threshold), int(keep_crsm)
        self._uploads: dict[int, Tensor] = {}
        self._last: dict[str, Any] = {}

    def setup(self, model, cfg) -> None:
        if self.decoupled:
            super().setup(model, cfg)
        self._tap = model.layer_taps[-2]  # the representation feeding the classifier

    def is_head(self, name: str) -> bool:
        return self.decoupled and super().is_head(name)

    def own(self, state: dict[str, Any], global_params: Params) -> Params:
        """This client's model: its personalized part over the global (head) parameters."""
        return {**global_params, **state["own"]} if "own" in state else global_params

    def client_start(self, ctx: ClientContext, global_params: Params) -> Params:
        return self.own(ctx.state, global_params)

    def client_end(self, ctx: ClientContext, start: Params, params: Params) -> Params:
        self._uploads[ctx.cid] = ctx.features(params, (self._tap,), self.n, shared=self.paired)[0]
        return params

    def aggregate(self, rnd: int, global_params: Params, uploads: list[Params], weights: Tensor,
                  ctxs: list[ClientContext]) -> Params:
        feats = [self._uploads.pop(c.cid) for c in ctxs]
        S = group_crsm([c.cid for c in ctxs], self.groups) if self.groups else crsm(feats, self.sim, self.rbf_threshold)
        for ctx, own in zip(ctxs, mix(uploads, row_weights(S), list(uploads[0]))):  # what the clients trained
            ctx.state["own"] = own
        self._last = {"crsm": S.cpu().tolist(), "crsm_clients": [c.cid for c in ctxs]} \
            if len(ctxs) <= self.keep_crsm else {}
        return weighted_average(uploads, weights)

    def round_metrics(self) -> dict[str, Any]:
        return self._last

    def eval_params(self, cid: int, global_params: Params, state: dict[str, Any]) -> Params:
        return self.own(state, global_params)


class FedAvgCRSM(FedSHIBU):
    """FedAvg+CRSM (Algorithm 4): the whole model is trained and mixed by CRSM rows; no fine-tuning."""

    name = "fedavg_crsm"
    decoupled = False

    def trainable(self, name: str) -> bool:
        return True

    def finetune(self) -> FineTune | None:
        return None


class LocalOnly(Strategy):
    """Each client trains alone with the same budget (personalized methods' baseline); the global model is never
    trained, so only the personalized accuracy is meaningful."""

    name = "local_only"

    def client_start(self, ctx: ClientContext, global_params: Params) -> Params:
        return ctx.state.get("own", global_params)

    def client_end(self, ctx: ClientContext, start: Params, params: Params) -> Params:
        ctx.state["own"] = params
        return params

    def aggregate(self, rnd, global_params, uploads, weights, ctxs) -> Params:
        return global_params

    def eval_params(self, cid: int, global_params: Params, state: dict[str, Any]) -> Params:
        return state.get("own", global_params)
