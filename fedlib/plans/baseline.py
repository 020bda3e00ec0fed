"""Notebook 01: FedAvg, FedProx and the centralized baseline in FedIntR's setup."""

from __future__ import annotations

from typing import Sequence

from ..presets import preset
from ._base import Plan

__all__ = ["baseline_plan", "BASELINE_SEEDS"]

# FedAvg and FedProx (mu = 0.001) are 0.05 points apart in FedIntR Table I: at paper scale three seeds each, so the
# comparison is a mean ± std; one seed at the CPU scales.
BASELINE_SEEDS = {"paper": 3, "quick": 1, "smoke": 1}


def baseline_plan(scale: str, dataset: str = "fmnist", device: str = "cpu", seed: int = 0, executor: str = "auto",
                  seeds: Sequence[int] | None = None) -> Plan:
    """FedIntR Table I's FedAvg and FedProx (mu = 0.001) rows (``table1``) and FedCKA Fig. 5's centralized upper
    bound (``centralized``: FedCKA's simple CNN in FedCKA's setup on the whole training set, one epoch per round for
    as many rounds as the federated runs). ``seeds``: default ``seed, seed + 1, ...`` (:data:`BASELINE_SEEDS`).
    Run names: ``"<method> | seed=<s>"``."""
    seeds = tuple(seeds) if seeds is not None else tuple(seed + i for i in range(BASELINE_SEEDS[scale]))
    table, central = {}, {}
    for s in seeds:
        cfg = preset("fedintr", scale, dataset=dataset, device=device, seed=s, executor=executor)
        table[f"FedAvg | seed={s}"] = cfg
        table[f"FedProx (μ=0.001) | seed={s}"] = cfg.replace(strategy="fedprox", strategy_kw={"mu": 0.001})
        central[f"Centralized | seed={s}"] = preset("fedcka", scale, dataset=dataset, device=device, seed=s,
                                                    executor=executor, strategy="centralized", rounds=cfg.rounds,
                                                    local_epochs=1)
    return {"table1": table, "centralized": central}
