"""Notebook 07: FedER Table 4.2's optimizer grid and Appendix A's stable-rank variant, each run with
5 seeds at paper scale.

``quick`` cannot test FedER's own claims (:data:`FEDER_LEFT_OUT` says why: at its scale FedER is
FedAvg on most of its client-layers). It trains, with 5 seeds each, the cells of the thesis's claims
that do not need FedER (``FEDER_QUICK_RUNS``: FedAvg against the non-federated model with Adam and
AdamP, and StepLR's effect on FedAvg with Adam), and Adam · FedER with the first seed only, to show
FedER's floored share in a real federated run
(:data:`fedlib.companion.papers.feder.preset.FEDER_CELLS`: the cells each scale trains).
"""

from __future__ import annotations

from typing import Sequence

from fedlib.companion.papers.feder.preset import (FEDER_CELLS, FEDER_OPTIMIZERS, FEDER_SETTINGS,
                                                  feder_grid)
from fedlib.companion.common import FedERRunId, Plan

__all__ = ["feder_plan", "FEDER_SEEDS", "FEDER_LEFT_OUT"]

FEDER_SEEDS = {"paper": 5, "quick": 5, "smoke": 1}  # seeds per run: a comparison takes 5
_FLOOR = ("at quick EVBMF keeps no component in most of FedER's client-layers even after 1,000 "
          "local steps (benchmarks/feder_floor.json), where FedER is FedAvg, so no FedER claim is "
          "testable at this scale; quick trains Adam · FedER with one seed to measure it (Table "
          "4.2's FedER column and the stable rank at 5 seeds would add about 16 single-thread "
          "worker-hours)")
# What a scale leaves out, with why: the notebook reports the claims that need it as not testable at
# that scale. "feder": Table 4.2's FedER column (its claims against FedAvg); "figA1": FedER with the
# stable rank.
FEDER_LEFT_OUT: dict[str, dict[str, str]] = {
    "paper": {}, "smoke": {},
    "quick": {"feder": f"quick trains FedER with one seed only: {_FLOOR}",
              "figA1": f"quick does not run FedER with the stable rank: {_FLOOR}"},
}


def feder_plan(scale: str, dataset: str = "fmnist", device: str = "cpu", seed: int = 0,
               executor: str = "auto", seeds: Sequence[int] | None = None) -> Plan:
    """``table4.2``: :func:`~fedlib.companion.papers.feder.preset.feder_grid` (five optimizer rows ×
    non-federated / FedAvg / FedER; the cells of
    :data:`~fedlib.companion.papers.feder.preset.FEDER_CELLS`, quick: some with every seed, one with
    the first); ``figA1``: FedER with the stable rank (Adam; not at quick). Run ids:
    :class:`~fedlib.companion.common.FedERRunId` ``"<row> · <setting> · seed=<s>"``; ``seeds``:
    default ``seed, seed + 1, ...`` (:data:`FEDER_SEEDS`). The same runs give Figs. 4.1–4.15 and the
    per-layer ranks and weights. The thesis's dataset is CIFAR-100."""
    seeds = tuple(seeds) if seeds is not None else tuple(seed + i
                                                         for i in range(FEDER_SEEDS[scale]))
    every = tuple((r, s) for r in FEDER_OPTIMIZERS for s in FEDER_SETTINGS)
    kept = FEDER_CELLS[scale]
    table, stable = {}, {}
    for s in seeds:
        grid = feder_grid(scale, dataset=dataset, device=device, seed=s, executor=executor)
        cells = every if kept is None else kept[0] + (kept[1] if s == seeds[0] else ())
        for row, setting in cells:
            table[FedERRunId(setting, s, optimizer=row)] = grid[(row, setting)].replace(
                label=f"feder/{scale}/{row}/{setting}")
        stable[FedERRunId("FedER (stable rank)", s,
                          optimizer="Adam")] = grid[("Adam", "FedER")].replace(
                              strategy_kw={"metric": "stable_rank"},
                              label=f"feder/{scale}/Adam/stable")
    plan = {"table4.2": table, "figA1": stable}
    return {
        a: runs
        for a, runs in plan.items() if not (a == "figA1" and a in FEDER_LEFT_OUT[scale])
    }
