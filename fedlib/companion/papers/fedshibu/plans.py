"""Notebook 08 (FedSHIBU): the shard sweep with the CRSM's controls, the label groups, the CRSM and
FedAvg+CRSM.

Every run is a config of FedSHIBU's preset at ``scale``
(:mod:`fedlib.companion.papers.fedshibu.preset`), named ``"<method> | s=<s> | seed=<n>"`` (``s``:
shards per user). FedBABU takes FedSHIBU's head (every dense layer after the extractor, §3.3), so it
is exactly the uniform-CRSM control; the identity-CRSM control keeps each client's own body (local
training of the body, the head frozen as in FedBABU); local-only trains each client's whole model
alone, the identity control of FedAvg+CRSM, whose uniform control is FedAvg. A run two artifacts
share is the same Config, trained once.

``quick`` (10 clients, 100 local steps per client a round, 5 seeds, every run evaluated every round;
rounds by shard level and figure, :data:`~fedlib.companion.papers.fedshibu.preset.FEDSHIBU_ROUNDS`,
so that every run ends on its plateau):

* Table 1: s ∈ {2, 5} (the paper's "extreme heterogeneity", where it claims FedSHIBU's gain), s = 10
  and s = 100 (homogeneous data, where the paper says FedSHIBU equals FedBABU), FedSHIBU (linear
  CKA), FedBABU, FedAvg and the identity control. RBF CKA and the other levels are left to
  ``paper``.
* Fig. 3: FedSHIBU at s = 5 with D̂_i on each client's own samples (§4.3) and on samples shared by
  every client (the other reading of Algorithm 2, Table 1's FedSHIBU; the quick federation has Fig.
  3's 10 clients).
* Fig. 5: FedAvg, FedAvg+CRSM and local-only at s = 5, evaluated every round.
* Fig. 1: FedBABU vs aggregation within each label group, 10 clients.

Fine-tuning (FedBABU and FedSHIBU): at ``quick`` and ``smoke`` each client keeps the fine-tuned
model of lowest loss on its training split over the ladder lr 1e-3 ... 1e-6 (``ft_select="best"``):
the quick CNN has no normalization, and at the papers' lr 1e-3 its inflated features leave some
two-class clients at 50 % while the loss still falls (:mod:`fedlib.strategies.fedbabu`). At
``paper`` (ResNet-18, batch-normalized) the papers' lr wherever it lowers the loss (the default;
:data:`~fedlib.companion.papers.fedshibu.preset.FT_SELECT`).

``paper``: the paper's setup (ResNet-18, 100 clients) with every s of Table 1, both CKAs, FedBABU,
FedAvg and the identity control; Figs. 1 and 3 with 10 clients. ``smoke``: quick's runs with one
seed, on a few hundred images.
"""

from __future__ import annotations

from typing import Any, Sequence

from fedlib.config import Config
from fedlib.companion.papers.fedshibu.preset import (FEDSHIBU_ROUNDS, FT_SELECT, FEDSHIBU_PRESET,
                                                     RBF_CKA)
from fedlib.companion.common import SEEDS, FedSHIBURunId, Plan

__all__ = ["fedshibu_plan", "artifact_presets", "fedshibu_methods", "FEDSHIBU_LEVELS",
           "FEDSHIBU_METHODS", "FEDSHIBU_SEEDS", "GROUPS", "FIG_S"]

FEDSHIBU_LEVELS = {
    "paper": (2, 3, 4, 5, 8, 10, 20, 50, 100), "quick": (2, 5, 10, 100), "smoke": (2, 5)
}
FEDSHIBU_SEEDS = SEEDS
FIG_S = 5  # Figs. 3 and 5: s = 5
LINEAR, RBF, BABU, AVG, IDENTITY = ("FedSHIBU (CKA linear)", "FedSHIBU (CKA RBF)", "FedBABU",
                                    "FedAvg", "identity CRSM (local bodies)")
FEDSHIBU_METHODS: dict[str, dict[str, Any]] = {
    LINEAR: dict(strategy="fedshibu", strategy_kw={"sim": "linear", "samples": "shared"}),
    RBF: dict(strategy="fedshibu", strategy_kw={"sim": "rbf"}),
    # = FedSHIBU with the uniform CRSM
    BABU: dict(strategy="fedbabu", strategy_kw={"head": "dense"}),
    AVG: dict(strategy="fedavg", strategy_kw={}),
    IDENTITY: dict(strategy="fedshibu", strategy_kw={"sim": "identity"}),
}
GROUPS = [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
# the strategies whose personalized evaluation fine-tunes the head
FINE_TUNED = ("fedbabu", "fedshibu")


def fedshibu_methods(scale: str, s: int) -> dict[str, dict[str, Any]]:
    """Table 1's methods at ``scale`` and shards per user ``s``: all but RBF CKA where ``scale``
    leaves it out (:data:`~fedlib.companion.papers.fedshibu.preset.RBF_CKA`)."""
    return {m: kw for m, kw in FEDSHIBU_METHODS.items() if m != RBF or RBF_CKA[scale]}


def artifact_presets(scale: str, **kw: Any) -> dict[str, Config]:
    """The config each artifact's runs start from at ``scale`` (``kw``: the preset's overrides):
    the preset's federation for Table 1 and Fig. 5, 10 clients for Figs. 1 and 3 (Fig. 3's
    federation). At paper scale, the paper's setup of each artifact: what its claim rows say this
    scale changes."""
    base = FEDSHIBU_PRESET.config(scale, **kw)
    ten = base.replace(num_clients=10)
    return {"table1": base, "fig1": ten, "fig3": ten, "fig5": base}


def fedshibu_plan(scale: str, dataset: str = "fmnist", device: str = "cpu",
                  seeds: Sequence[int] | None = None, executor: str = "auto") -> Plan:
    """FedSHIBU's artifacts (see the module docstring): ``table1``, ``fig1``, ``fig3``, ``fig5``."""
    seeds = tuple(seeds) if seeds is not None else FEDSHIBU_SEEDS[scale]
    start = artifact_presets(scale, dataset=dataset, device=device, executor=executor)
    rounds = FEDSHIBU_ROUNDS[scale]

    def at(c: Config, s: int, method: str, seed: int, **kw: Any) -> Config:
        c = c.replace(rounds=rounds[s]) if s in rounds else c
        return c.replace(seed=seed, partition_kw={"shards_per_user": s},
                         **{**FEDSHIBU_METHODS[method], **kw})

    def tuned(c: Config) -> Config:  # the fine-tuning of the module docstring
        fine = FT_SELECT[scale] is not None and c.strategy in FINE_TUNED
        kw = {**c.strategy_kw, "ft_select": FT_SELECT[scale]}
        return c.replace(strategy_kw=kw) if fine else c

    # every round: the curves of Figs. 4-5 and the plateau each verdict checks
    every = dict(eval_every=1)
    table = {FedSHIBURunId(m, n, s=s): at(start["table1"], s, m, n, **every)
             for s in FEDSHIBU_LEVELS[scale] for m in fedshibu_methods(scale, s) for n in seeds}

    def rounds_of(figure: str) -> dict[str, int]:  # a figure's own rounds, where the scale has them
        return dict(rounds=rounds[figure]) if figure in rounds else {}

    fig3 = {FedSHIBURunId(label, n, s=FIG_S): at(start["fig3"], FIG_S, LINEAR, n,
                                                 strategy_kw={"sim": "linear", **kw},
                                                 **rounds_of("fig3"))
            for label, kw in (("own samples (§4.3)", {"samples": "own"}),
                              ("shared samples (Algorithm 2's D)", {"samples": "shared"}))
            for n in seeds}
    fig5 = {
        FedSHIBURunId(label, n, s=FIG_S): at(start["fig5"], FIG_S, AVG, n, **every,
                                             **rounds_of("fig5")).replace(
                                                 strategy=strategy, strategy_kw=kw)
        for label, strategy, kw in (("FedAvg", "fedavg", {}),
                                    ("FedAvg+CRSM", "fedavg_crsm",
                                     {"sim": "linear", "samples": "shared"}), ("Local only",
                                                                               "local_only", {}))
        for n in seeds
    }
    groups = start["fig1"].replace(partition="label_groups", partition_kw={},
                                   eval_every=1,  # its curve, and its plateau
                                   **rounds_of("fig1"))
    fig1 = {
        FedSHIBURunId(label, n): groups.replace(seed=n, strategy=st, strategy_kw=kw)
        for label, st, kw in (("all bodies aggregated (FedBABU)", "fedbabu", {"head": "dense"}),
                              ("aggregated within each group", "fedshibu",
                               {"sim": "groups", "groups": GROUPS}))
        for n in seeds
    }
    plan = {"table1": table, "fig1": fig1, "fig3": fig3, "fig5": fig5}
    return {
        artifact: {name: tuned(c)
                   for name, c in runs.items()}
        for artifact, runs in plan.items()
    }
