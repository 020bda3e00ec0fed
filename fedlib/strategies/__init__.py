"""Strategy registry: ``build_strategy(name, **kw)``. One file per algorithm."""

from __future__ import annotations

from typing import Any

from .base import ClientContext, FineTune, LocalBatch, Needs, Params, Strategy, weighted_average
from .centralized import Centralized
from .fedavg import FedAvg
from .feder import FedER
from .fedprox import FedProx

STRATEGIES: dict[str, type[Strategy]] = {
    "fedavg": FedAvg,
    "fedprox": FedProx,
    "feder": FedER,
    "centralized": Centralized,
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
