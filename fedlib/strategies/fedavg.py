"""FedAvg (McMahan et al. 2017): local SGD on cross-entropy, sample-size-weighted averaging.

Everything FedAvg does is the default behaviour of :class:`~fedlib.strategies.base.Strategy`.
"""

from __future__ import annotations

from fedlib.strategies.base import Strategy


class FedAvg(Strategy):
    name = "fedavg"
