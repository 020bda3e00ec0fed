"""Notebook 08 (FedSHIBU): the shard sweep, the label groups, the CRSM and FedAvg+CRSM."""

from __future__ import annotations

from typing import Any

from ..presets import preset
from ._base import Plan

__all__ = ["fedshibu_plan", "fedshibu_methods", "FEDSHIBU_LEVELS", "FEDSHIBU_METHODS", "GROUPS"]

FEDSHIBU_LEVELS = {"paper": (2, 3, 4, 5, 8, 10, 20, 50, 100), "quick": (2, 5, 20), "smoke": (2,)}
FEDSHIBU_METHODS: dict[str, dict[str, Any]] = {
    "FedSHIBU (CKA linear)": dict(strategy="fedshibu", strategy_kw={"sim": "linear"}),
    "FedSHIBU (CKA RBF)": dict(strategy="fedshibu", strategy_kw={"sim": "rbf"}),
    "FedBABU": dict(strategy="fedbabu", strategy_kw={}),
    "FedAvg": dict(strategy="fedavg", strategy_kw={}),
    "Local only": dict(strategy="local_only", strategy_kw={}),
}
GROUPS = [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]


def fedshibu_methods(scale: str) -> dict[str, dict[str, Any]]:
    """Table 1's methods at ``scale``: all five, except that ``quick`` (a 2-core CPU) leaves out RBF CKA, whose
    CRSM differs from the linear one only in its kernel (the paper's RBF column is at or below linear for s ≤ 5)."""
    if scale == "quick":
        return {m: kw for m, kw in FEDSHIBU_METHODS.items() if m != "FedSHIBU (CKA RBF)"}
    return dict(FEDSHIBU_METHODS)


def fedshibu_plan(scale: str, dataset: str = "fmnist", device: str = "cpu", seed: int = 0,
                  executor: str = "auto") -> Plan:
    """FedSHIBU's artifacts: Table 1 / Fig. 4 (shards sweep × methods), Fig. 1 (label groups: all bodies vs
    within-group aggregation), Fig. 3 (the CRSM of 10 clients at s = 5, unpaired and paired), Fig. 5 (FedAvg vs
    FedAvg+CRSM at s = 5, evaluated every round)."""
    base = preset("fedshibu", scale, dataset=dataset, device=device, seed=seed, executor=executor)
    table = {f"{m} | s={s}": base.replace(partition_kw={"shards_per_user": s}, **kw)
             for s in FEDSHIBU_LEVELS[scale] for m, kw in fedshibu_methods(scale).items()}
    ten = base.replace(num_clients=10, eval_every=max(1, base.rounds // 10))
    groups = ten.replace(partition="label_groups", partition_kw={})
    fig1 = {"all bodies aggregated (FedBABU)": groups.replace(strategy="fedbabu"),
            "aggregated within each group": groups.replace(strategy="fedshibu",
                                                           strategy_kw={"sim": "groups", "groups": GROUPS})}
    s5 = ten.replace(partition_kw={"shards_per_user": 5})
    fig3 = {"unpaired (the paper's D̂_i)": s5.replace(strategy="fedshibu", strategy_kw={"sim": "linear"}),
            "paired (one shared probe batch)": s5.replace(strategy="fedshibu",
                                                          strategy_kw={"sim": "linear", "paired": True})}
    every = base.replace(partition_kw={"shards_per_user": 5}, eval_every=1)
    fig5 = {"FedAvg": every.replace(strategy="fedavg"), "FedAvg+CRSM": every.replace(strategy="fedavg_crsm")}
    return {"table1": table, "fig1": fig1, "fig3": fig3, "fig5": fig5}
