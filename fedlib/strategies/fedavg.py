"""FedAvg (McMahan et al. 2017): local SGD on cross-entropy, sample-size-weighted averaging.

Everything FedAvg does is the default behaviour of :class:`~fedlib.strategies.base.Strategy`.
"""

from __future__ import annotations

from dataclasses import dataclass

from fedlib.strategies.base import Strategy, StrategyOptions


class FedAvg(Strategy):
    name = "fedavg"

    @dataclass(frozen=True)
    class Options(StrategyOptions):
        """FedAvg takes no options."""
