"""Strategy registry: ``build_strategy(name, **kw)``. One file per algorithm."""

from __future__ import annotations

from typing import Any

from .base import ClientContext, FineTune, LocalBatch, Needs, Params, Strategy, weighted_average
from .centralized import Centralized
from .fedavg import FedAvg
from .fedbabu import FedBABU
from .fedcka import FedCKA
from .feder import FedER
from .fedintr import FedIntR
from .fedprox import FedProx
from .fedshibu import FedAvgCRSM, FedSHIBU, LocalOnly
from .moon import MOON
from .scaffold import SCAFFOLD

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


def build_strategy(name: str, **kw: Any) -> Strategy:
    if name not in STRATEGIES:
        raise ValueError(f"Unknown strategy {name!r}; valid strategies: {sorted(STRATEGIES)}.")
    try:
        return STRATEGIES[name](**kw)
    except TypeError as e:
        raise ValueError(f"Bad options for strategy {name!r}: {e}. See help(fedlib.strategies.{name}).") from None


__all__ = ["STRATEGIES", "build_strategy", "ClientContext", "FineTune", "LocalBatch", "Needs", "Params", "Strategy",
           "weighted_average"]
