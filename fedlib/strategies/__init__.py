"""Strategy registry: ``build_strategy(name, options)``. One file per algorithm, its options typed
beside it (``<Strategy>.Options``: :class:`~fedlib.strategies.base.StrategyOptions`)."""

from __future__ import annotations

from typing import Any, Mapping

from fedlib.options import Option
from fedlib.strategies.base import (ClientContext, FineTune, LocalBatch, Needs, Params, Strategy,
                                    StrategyOptions, weighted_average)
from fedlib.strategies.centralized import Centralized
from fedlib.strategies.fedavg import FedAvg
from fedlib.strategies.fedavg_crsm import FedAvgCRSM
from fedlib.strategies.fedbabu import FedBABU
from fedlib.strategies.fedcka import FedCKA
from fedlib.strategies.feder import FedER
from fedlib.strategies.fedintr import FedIntR
from fedlib.strategies.fedprox import FedProx
from fedlib.strategies.fedshibu import FedSHIBU
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


def _registered(name: str) -> type[Strategy]:
    if name not in STRATEGIES:
        raise ValueError(f"Unknown strategy {name!r}; valid strategies: {sorted(STRATEGIES)}.")
    return STRATEGIES[name]


def strategy_options(name: str) -> Mapping[str, Option]:
    """The options (``Config.strategy_kw``) strategy ``name`` declares: name -> type, default and
    valid range or values (its ``Options`` fields)."""
    return STRATEGIES[name].Options.table()


def build_options(name: str, kw: dict[str, Any]) -> StrategyOptions:
    """Strategy ``name``'s typed options from keyword options ``kw``, checked as they are built (one
    :class:`~fedlib.options.OptionError` naming every bad option and its valid values; nothing
    coerced but an int for a float)."""
    return _registered(name).Options.build(**kw)


def build_strategy(name: str, options: StrategyOptions | None = None, /, **kw: Any) -> Strategy:
    """Strategy ``name`` with its ``options`` already built (``Config.strategy_options()``), or with
    keyword options ``kw``, built and checked here (:func:`build_options`)."""
    cls = _registered(name)
    if options is not None and kw:
        raise TypeError("build_strategy takes built options or keyword options, not both.")
    return cls(options) if options is not None else cls(**kw)


__all__ = ["STRATEGIES", "build_strategy", "build_options", "strategy_options", "ClientContext",
           "FineTune", "LocalBatch", "Needs", "Params", "Strategy", "StrategyOptions",
           "weighted_average"]
