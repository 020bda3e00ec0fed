"""Centralized baseline: one "client" holds the whole training set (FedCKA's "70% upper bound").

The engine gives this strategy a single-client partition and keeps the client's optimizer state
across rounds (``needs.persistent_optimizer``), so a "round" is just ``local_epochs`` epochs of
ordinary training followed by an evaluation. With momentum 0 (or a single round) it produces exactly
the weights of FedAvg with one client holding all the data (tested).
"""

from __future__ import annotations

from dataclasses import dataclass

from fedlib.strategies.base import Needs, Strategy, StrategyOptions


class Centralized(Strategy):
    name = "centralized"
    needs = Needs(persistent_optimizer=True)
    centralized = True

    @dataclass(frozen=True)
    class Options(StrategyOptions):
        """The centralized baseline takes no options."""
