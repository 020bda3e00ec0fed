"""Notebook 01: FedAvg, FedProx and the centralized baseline in FedIntR's setup."""

from __future__ import annotations

from typing import Sequence

from fedlib.companion.papers.fedcka.preset import FEDCKA_PRESET as FEDCKA
from fedlib.companion.papers.fedintr.preset import FEDINTR_PRESET as FEDINTR
from fedlib.companion.common import SEEDS, Plan, RunId

__all__ = ["baseline_plan", "BASELINE_SEEDS", "BASELINE_LEFT_OUT"]

# seeds per run (fedlib.companion.common.SEEDS)
BASELINE_SEEDS = {k: len(v) for k, v in SEEDS.items()}
BASELINE_LEFT_OUT: dict[str, dict[str, str]] = {"paper": {}, "smoke": {}, "quick": {}}


def baseline_plan(scale: str, dataset: str = "fmnist", device: str = "cpu", seed: int = 0,
                  executor: str = "auto", seeds: Sequence[int] | None = None) -> Plan:
    """FedIntR Table I's FedAvg and FedProx (mu = 0.001) rows (``table1``) and FedCKA Fig. 5's
    centralized upper bound (``centralized``: FedCKA's simple CNN on the whole training set of
    FedCKA's setup, with the federated run's rounds and local epochs, i.e. the same sample-passes)
    beside FedAvg in FedCKA's setup (``fedcka_fedavg``, the same Config as notebook 03's FedAvg at α
    = 5). ``seeds``: default ``seed, seed + 1, ...`` (:data:`BASELINE_SEEDS`). Run ids:
    :class:`~fedlib.companion.common.RunId`, ``"<method> | seed=<s>"``."""
    seeds = tuple(seeds) if seeds is not None else tuple(seed + i
                                                         for i in range(BASELINE_SEEDS[scale]))
    table, central, fed = {}, {}, {}
    for s in seeds:
        cfg = FEDINTR.config(scale, dataset=dataset, device=device, seed=s, executor=executor)
        table[RunId("FedAvg", s)] = cfg
        table[RunId("FedProx (μ=0.001)", s)] = cfg.replace(strategy="fedprox",
                                                           strategy_kw={"mu": 0.001})
        cka = FEDCKA.config(scale, dataset=dataset, device=device, seed=s, executor=executor)
        central[RunId("Centralized", s)] = cka.replace(strategy="centralized")
        fed[RunId("FedAvg (FedCKA's setup)", s)] = cka
    out = {"table1": table, "centralized": central, "fedcka_fedavg": fed}
    if "centralized" in BASELINE_LEFT_OUT[scale]:
        del out["centralized"], out["fedcka_fedavg"]
    return out
