"""FedSHIBU (Algorithms 1–3) and FedAvg+CRSM (Algorithm 4): one model per client, aggregated by client similarity.

FedSHIBU is FedBABU (head frozen, body trained; head fine-tuned before evaluation) whose server keeps one body
per client: after local training client i uploads its body θ_i and D̂_i, the body's output (the extractor's
output, which feeds the head) on ``n`` random samples; the server computes ``CRSM[i, j] = CKA(D̂_i, D̂_j)``
(``sim``: "linear" or "rbf") and gives client i the body ``Σ_j CRSM[i, j] / Σ_j' CRSM[i, j'] · θ_j``
(:mod:`fedlib.crsm`), which it starts from next round and is evaluated with, after fine-tuning its classifier
(§3.2: "The classifiers ... are fine-tuned to enhance the personalization performance of the client models") by
FedBABU's protocol and options (``ft_*``, ``body_mean``, ``lr_rounding``: :mod:`fedlib.strategies.fedbabu`).

Controls (``sim``): ``"identity"`` keeps every client's own body (pure local training of the body: the limit of a
CRSM whose off-diagonal is 0); ``"uniform"`` makes every row equal (FedBABU: the same body for all, its plain mean,
equal to its sample-weighted average when the clients are equally large, as shards make them); ``"groups"`` with
``groups=[[0..4], [5..9]]`` is Fig. 1's oracle grouping (aggregation within each group). Every round's history
entry carries ``crsm_self`` (the mean weight a client keeps of its own body, the diagonal of the row-normalized
CRSM) and ``crsm_offdiag`` (the mean off-diagonal similarity), and the CRSM itself (``crsm``, ``crsm_clients``)
when at most ``keep_crsm`` clients took part.

``head`` (FedBABU's option) defaults to ``"dense"``: §3.3, "All dense layers following the extractor form the
classifier", and "the representation returned in Algorithm 2 is the output of the last convolutional layer"; with
the FedIntR CNN the head is fc1, fc2 and fc3 and D̂_i is conv3's output. ``head="last"`` takes the final linear
layer alone (fc3; D̂_i is fc2's output), FedBABU's own definition. ResNet-18 (the paper's) has one dense layer,
where the two coincide.

Algorithm 2 writes ``D_i ← random subset of data samples at client i; D̂_i ← f(θ_i,ext, D)``: which samples each
body is evaluated on is ambiguous (``D_i`` or ``D``). ``samples``:

* ``"shared"`` (default): the same ``n`` samples of the whole training set for every client (Algorithm 2's literal
  ``D``, the usual paired CKA).
* ``"own"``: each client's own ``n`` samples (§4.3: "A fixed number of data samples are randomly chosen from each
  client"). Rows of D̂_i and D̂_j are then different images, arbitrarily paired.

The default is the reading under which the CRSM can show what the paper shows of it: clients grouping by the labels
they hold (Fig. 3) and equal weights on homogeneous data (§4.3: "all clients would be weighed equally and FedSHIBU
would equal FedBABU"). With own samples, CKA averaged over the arbitrary pairing is √(r_i r_j) / (n − 1), r the
participation ratio of each representation alone (:func:`fedlib.crsm.chance_crsm`): no similarity between clients
enters it. Measured on Fig. 1's label groups (``benchmarks/crsm_groups.py``, quick preset, Fashion-MNIST): own
samples give an off-diagonal of 0.87–1.15× that chance level, a correlation with label overlap of −0.38 to +0.26,
and a self-weight of 0.73–0.84 on IID data too; shared samples put every client's most similar client in its own
group (correlation 0.80–1.00) and give equal weights on IID data. Two limits of the algorithm as written remain:
the shared CRSM's values are all close to 1 and Algorithm 3 divides each row by its sum with no temperature, so the
weights stay within a few percent of 1/m (FedSHIBU stays close to FedBABU); and on Fig. 3's shards (s = 5) neither
reading follows the graded label overlap at quick scale.

Other choices the paper leaves open: ``n = 100`` samples (exposed); the CRSM mixes the round's participants
(m = N in the paper); the "global" model reported as ``test_acc`` is FedBABU's body average (``body_mean``).

FedAvg+CRSM (Algorithm 4) applies the same aggregation to the whole model, without decoupling or fine-tuning (its
``head`` only chooses the representation D̂_i); with ``sim="identity"`` it is local-only training, with
``"uniform"`` FedAvg.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from fedlib.crsm import CONTROLS, SIMS, control_crsm, crsm, crsm_stats, group_crsm, mix, row_weights
from fedlib.options import above, at_least
from fedlib.strategies.base import ClientContext, FineTune, Params
from fedlib.strategies.fedbabu import FedBABU, extractor_tap

SAMPLES = ("own", "shared")


class FedSHIBU(FedBABU):
    name = "fedshibu"
    decoupled = True
    option_ranges = {**FedBABU.option_ranges, "sim": SIMS + ("groups",), "samples": SAMPLES, "n": at_least(2),
                     "rbf_threshold": above(0), "keep_crsm": at_least(0)}

    def __init__(self, sim: str = "linear", n: int = 100, samples: str = "shared", rbf_threshold: float = 0.5,
                 keep_crsm: int = 20, groups: list[list[int]] | None = None, head: str = "dense", **ft: Any) -> None:
        super().__init__(head=head, **ft)
        if (sim == "groups") != (groups is not None):
            raise ValueError("sim='groups' (the oracle grouping of Fig. 1) and groups=[[client ids], ...] go together.")
        self.groups = None if groups is None else [list(map(int, g)) for g in groups]
        if n < 2:
            raise ValueError(f"FedSHIBU needs n >= 2 samples per client for the CRSM, got {n}.")
        self.sim, self.n, self.samples, self.rbf_threshold, self.keep_crsm = sim, int(n), samples, \
            float(rbf_threshold), int(keep_crsm)
        self._uploads: dict[int, Tensor] = {}

    def setup(self, model, cfg) -> None:
        super().setup(model, cfg)
        self._tap = extractor_tap(model, self.head)  # D̂_i: the representation feeding the classifier

    def is_head(self, name: str) -> bool:
        return self.decoupled and super().is_head(name)

    def own(self, state: dict[str, Any], global_params: Params) -> Params:
        """This client's model: its personalized part over the global (head) parameters."""
        return {**global_params, **state["own"]} if "own" in state else global_params

    def client_start(self, ctx: ClientContext, global_params: Params) -> Params:
        return self.own(ctx.state, global_params)

    def client_end(self, ctx: ClientContext, start: Params, params: Params) -> Params:
        if self.sim not in CONTROLS and self.groups is None:  # the controls and the oracle need no D̂_i
            self._uploads[ctx.cid] = ctx.features(params, (self._tap,), self.n, shared=self.samples == "shared")[0]
        return params

    def aggregate(self, rnd: int, global_params: Params, uploads: list[Params], weights: Tensor,
                  ctxs: list[ClientContext]) -> tuple[Params, dict[str, Any]]:
        if self.groups:
            S = group_crsm([c.cid for c in ctxs], self.groups)
        elif self.sim in CONTROLS:
            S = control_crsm(len(ctxs), self.sim)
        else:
            S = crsm([self._uploads.pop(c.cid) for c in ctxs], self.sim, self.rbf_threshold)
        for ctx, own in zip(ctxs, mix(uploads, row_weights(S), list(uploads[0]))):  # what the clients trained
            ctx.state["own"] = own
        metrics = crsm_stats(S)
        if len(ctxs) <= self.keep_crsm:
            metrics.update(crsm=S.cpu().tolist(), crsm_clients=[c.cid for c in ctxs])
        return self.body_average(uploads, weights), metrics

    def eval_params(self, cid: int, global_params: Params, state: dict[str, Any]) -> Params:
        return self.own(state, global_params)


class FedAvgCRSM(FedSHIBU):
    """FedAvg+CRSM (Algorithm 4): the whole model is trained and mixed by CRSM rows; no fine-tuning."""

    name = "fedavg_crsm"
    decoupled = False

    def __init__(self, sim: str = "linear", n: int = 100, samples: str = "shared", rbf_threshold: float = 0.5,
                 keep_crsm: int = 20, groups: list[list[int]] | None = None) -> None:
        """FedSHIBU's CRSM options; no fine-tuning or head options (FedAvg+CRSM trains and mixes the whole model)."""
        super().__init__(sim, n, samples, rbf_threshold, keep_crsm, groups)

    def trainable(self, name: str) -> bool:
        return True

    def finetune(self) -> FineTune | None:
        return None
