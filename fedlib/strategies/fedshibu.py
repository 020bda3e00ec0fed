"""FedSHIBU (Algorithms 1–3): one body per client, aggregated by client similarity.

FedSHIBU is FedBABU (head frozen, body trained; head fine-tuned before evaluation) whose server
keeps one body per client: after local training client i uploads its body θ_i and D̂_i, the body's
output (the extractor's output, which feeds the head) on ``n`` random samples; the server computes
``CRSM[i, j] = CKA(D̂_i, D̂_j)`` (``sim``: "linear" or "rbf") and gives client i the body ``Σ_j
CRSM[i, j] / Σ_j' CRSM[i, j'] · θ_j`` (:mod:`fedlib.crsm`), which it starts from next round and is
evaluated with, after fine-tuning its classifier (§3.2: "The classifiers ... are fine-tuned to
enhance the personalization performance of the client models") by FedBABU's protocol and options
(``ft_*``, ``body_mean``, ``lr_rounding``: :mod:`fedlib.strategies.fedbabu`).

Controls (``sim``): ``"identity"`` keeps every client's own body (pure local training of the body:
the limit of a CRSM whose off-diagonal is 0); ``"uniform"`` makes every row equal (FedBABU: the same
body for all, its plain mean, equal to its sample-weighted average when the clients are equally
large, as shards make them); ``"groups"`` with ``groups=[[0..4], [5..9]]`` is Fig. 1's oracle
grouping (aggregation within each group). Every round's history entry carries ``crsm_self`` (the
mean weight a client keeps of its own body, the diagonal of the row-normalized CRSM) and
``crsm_offdiag`` (the mean off-diagonal similarity), and the CRSM itself (``crsm``,
``crsm_clients``) when at most ``keep_crsm`` clients took part.

``head`` (FedBABU's option) defaults to ``"dense"``: §3.3, "All dense layers following the extractor
form the classifier", and "the representation returned in Algorithm 2 is the output of the last
convolutional layer"; with the FedIntR CNN the head is fc1, fc2 and fc3 and D̂_i is conv3's output.
``head="last"`` takes the final linear layer alone (fc3; D̂_i is fc2's output), FedBABU's own
definition. ResNet-18 (the paper's) has one dense layer, where the two coincide.

Algorithm 2 writes ``D_i ← random subset of data samples at client i; D̂_i ← f(θ_i,ext, D)``: which
samples each body is evaluated on is ambiguous (``D_i`` or ``D``). ``samples``:

* ``"shared"`` (default): the same ``n`` samples of the whole training set for every client
  (Algorithm 2's literal ``D``, the usual paired CKA).
* ``"own"``: each client's own ``n`` samples (§4.3: "A fixed number of data samples are randomly
  chosen from each client"). Rows of D̂_i and D̂_j are then different images, arbitrarily paired.

The default is the reading under which the CRSM can show what the paper shows of it: clients
grouping by the labels they hold (Fig. 3) and equal weights on homogeneous data (§4.3: "all clients
would be weighed equally and FedSHIBU would equal FedBABU"). With own samples, CKA averaged over the
arbitrary pairing is √(r_i r_j) / (n − 1), r the participation ratio of each representation alone
(:func:`fedlib.crsm.chance_crsm`): no similarity between clients enters it. Measured on Fig. 1's
label groups (``benchmarks/crsm_groups.py``, quick preset, Fashion-MNIST): own samples give an
off-diagonal of 0.87–1.15× that chance level, a correlation with label overlap of −0.38 to +0.26,
and a self-weight of 0.73–0.84 on IID data too; shared samples put every client's most similar
client in its own group (correlation 0.80–1.00) and give equal weights on IID data. Two limits of
the algorithm as written remain: the shared CRSM's values are all close to 1 and Algorithm 3 divides
each row by its sum with no temperature, so the weights stay within a few percent of 1/m (FedSHIBU
stays close to FedBABU); and on Fig. 3's shards (s = 5) neither reading follows the graded label
overlap at quick scale.

Other choices the paper leaves open: ``n = 100`` samples (exposed); the CRSM mixes the round's
participants (m = N in the paper); the "global" model reported as ``test_acc`` is FedBABU's body
average (``body_mean``). FedAvg+CRSM (Algorithm 4, :mod:`fedlib.strategies.fedavg_crsm`) applies the
same aggregation to the whole model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import Tensor

from fedlib.crsm import CONTROLS, SIMS, control_crsm, crsm, crsm_stats, group_crsm, mix, row_weights
from fedlib.models.base import HEADS, extractor_tap
from fedlib.options import above, at_least, option
from fedlib.strategies.base import ClientContext, Params, StrategyOptions
from fedlib.strategies.fedbabu import FedBABU

SAMPLES = ("own", "shared")


@dataclass(frozen=True)
class CRSMOptions(StrategyOptions):
    """The options of the CRSM aggregation, FedSHIBU's and FedAvg+CRSM's."""

    sim: str = option("linear", SIMS + ("groups",))  # the CRSM's CKA, a control, or the oracle
    n: int = option(100, at_least(2))  # samples per client for D̂_i
    samples: str = option("shared", SAMPLES)  # which samples D̂_i is computed on
    rbf_threshold: float = option(0.5, above(0))
    keep_crsm: int = option(20, at_least(0))  # the CRSM recorded up to this many clients
    groups: list[list[int]] | None = None  # sim="groups": each group's client ids (Fig. 1)

    def joint_problem(self) -> str | None:
        if (self.sim == "groups") != (self.groups is not None):
            return ("sim='groups' (the oracle grouping of Fig. 1) and groups=[[client ids], ...] "
                    "go together.")
        return None


class FedSHIBU(FedBABU):
    name = "fedshibu"
    decoupled = True

    @dataclass(frozen=True)
    class Options(FedBABU.Options, CRSMOptions):
        head: str = option("dense", HEADS)  # §3.3: every dense layer after the extractor

    options: Options

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._uploads: dict[int, Tensor] = {}

    def setup(self, model, cfg) -> None:
        super().setup(model, cfg)
        self._tap = extractor_tap(model, self.options.head)  # D̂_i: what feeds the classifier

    def is_head(self, name: str) -> bool:
        return self.decoupled and super().is_head(name)

    def own(self, state: dict[str, Any], global_params: Params) -> Params:
        """This client's model: its personalized part over the global (head) parameters."""
        return {**global_params, **state["own"]} if "own" in state else global_params

    def client_start(self, ctx: ClientContext, global_params: Params) -> Params:
        return self.own(ctx.state, global_params)

    def client_end(self, ctx: ClientContext, start: Params, params: Params) -> Params:
        o = self.options
        if o.sim not in CONTROLS and o.groups is None:  # the controls and the oracle need no D̂_i
            shared = o.samples == "shared"
            self._uploads[ctx.cid] = ctx.features(params, (self._tap,), o.n, shared=shared)[0]
        return params

    def aggregate(self, rnd: int, global_params: Params, uploads: list[Params], weights: Tensor,
                  ctxs: list[ClientContext]) -> tuple[Params, dict[str, Any]]:
        o = self.options
        if o.groups:
            S = group_crsm([c.cid for c in ctxs], o.groups)
        elif o.sim in CONTROLS:
            S = control_crsm(len(ctxs), o.sim)
        else:
            S = crsm([self._uploads.pop(c.cid) for c in ctxs], o.sim, o.rbf_threshold)
        # what the clients trained
        for ctx, own in zip(ctxs, mix(uploads, row_weights(S), list(uploads[0]))):
            ctx.state["own"] = own
        metrics = crsm_stats(S)
        if len(ctxs) <= o.keep_crsm:
            metrics.update(crsm=S.cpu().tolist(), crsm_clients=[c.cid for c in ctxs])
        return self.body_average(uploads, weights), metrics

    def eval_params(self, cid: int, global_params: Params, state: dict[str, Any]) -> Params:
        return self.own(state, global_params)
