"""Strategy registry: ``build_strategy(name, **kw)``. One file per algorithm."""

from __future__ import annotations

from typing import Any

from fedlib.options import Option, option_problems, signature_options
from fedlib.strategies.base import ClientContext, FineTune, LocalBatch, Needs, Params, Strategy, weighted_average
from fedlib.strategies.centralized import Centralized
from fedlib.strategies.fedavg import FedAvg
from fedlib.strategies.fedbabu import FedBABU
from fedlib.strategies.fedcka import FedCKA
from fedlib.strategies.feder import FedER
from fedlib.strategies.fedintr import FedIntR
from fedlib.strategies.fedprox import FedProx
from fedlib.strategies.fedshibu import FedAvgCRSM, FedSHIBU
from fedlib.strategies.local_only import LocalOnly
from fedlib.strategies.moon import MOON
from fedlib.strategies.scaffold import SCAFFOLD

STRATEGIES: dict[str, type[Strategy]] = {
    "fedavg": FedAvg,
    "fedprox": FedProx,
    "scaffold": SCAFFOLD,
    "moon": MOON,
    "fedcka": FedCKA,
    "fedintr": FedIntR,
    "feder": FedER,
    "centralized": Centralized,
    "fedbabu": FedBABU,
    "fedshibu": FedSHIBU,
    "fedavg_crsm": FedAvgCRSM,
    "local_only": LocalOnly,
}


def strategy_options(name: str) -> dict[str, Option]:
    """The options (``Config.strategy_kw``) strategy ``name`` takes: its ``__init__``'s typed keyword arguments with
    their declared ranges (``option_ranges``)."""
    cls = STRATEGIES[name]
    return signature_options(cls, ranges=cls.option_ranges)


def build_strategy(name: str, **kw: Any) -> Strategy:
    """Strategy ``name`` with options ``kw``, checked against :func:`strategy_options` first (nothing coerced)."""
    if name not in STRATEGIES:
        raise ValueError(f"Unknown strategy {name!r}; valid strategies: {sorted(STRATEGIES)}.")
    problems = option_problems("strategy_kw", f"strategy {name!r}", strategy_options(name), kw)
    if problems:
        raise ValueError(" ".join(problems))
    return STRATEGIES[name](**kw)


__all__ = ["STRATEGIES", "build_strategy", "strategy_options", "ClientContext", "FineTune", "LocalBatch", "Needs",
           "Params", "Strategy", "weighted_average"]
