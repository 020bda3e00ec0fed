"""Notebook 07: FedER Table 4.2's optimizer grid and Appendix A's stable-rank variant."""

from __future__ import annotations

from ..presets import FEDER_OPTIMIZERS, FEDER_SETTINGS, feder_grid
from ._base import Plan

__all__ = ["feder_plan"]


def feder_plan(scale: str, dataset: str = "fmnist", device: str = "cpu", seed: int = 0,
               executor: str = "auto") -> Plan:
    """``table4.2``: :func:`fedlib.presets.feder_grid` (five optimizer rows × non-federated / FedAvg / FedER), run
    names ``"<row> · <setting>"``; ``figA1``: FedER with the stable rank (Adam). The same runs give Figs. 4.1–4.15
    and the per-layer ranks and weights. The thesis's dataset is CIFAR-100 (``dataset="cifar100"``)."""
    grid = feder_grid(scale, dataset=dataset, device=device, seed=seed, executor=executor)
    table = {f"{row} · {s}": grid[(row, s)].replace(label=f"feder/{scale}/{row}/{s}")
             for row in FEDER_OPTIMIZERS for s in FEDER_SETTINGS}
    stable = grid[("Adam", "FedER")].replace(strategy_kw={"metric": "stable_rank"}, label=f"feder/{scale}/Adam/stable")
    return {"table4.2": table, "figA1": {"Adam · FedER (stable rank)": stable}}
