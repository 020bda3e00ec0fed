"""The quick scale's budget: by campaign, not by notebook.

Every part a claim needs is planned and the campaign (``make campaign SCALE=quick``: two
single-thread workers in the background) trains it; a notebook renders the committed records and
prints what retraining it from an empty store costs. A part is left out at quick only if its new
runs need more than :data:`MAX_PART_S` worker-seconds (the claim rows then say so with the
estimate), or for a reason other than time (``quick_why``: e.g. it cannot reach its plateau in the
preset's rounds).

The estimate is a stated model, never a measurement of the moment, so a plan does not change with
machine load: training sample-passes and the reference models' forwards
(:func:`fedlib.companion.costs.sample_passes`, :func:`fedlib.companion.costs.reference_passes`) ×
the method's cost factor, plus test images counted a third, × seconds per sample-pass of the model
on one thread of this CPU; :data:`WORKER_WALL` turns worker time into wall time for the campaign's
two workers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from fedlib.config import Config
from fedlib.companion.costs import (DEFAULT_THROUGHPUT, reference_passes, sample_passes,
                                    width_speedup)
from fedlib.companion.common import Plan
from fedlib.companion.scales import scale_of

__all__ = [
    "MAX_PART_S", "retrain_cost", "WORKER_WALL", "CPU_S_PER_PASS", "METHOD_FACTOR", "SIM_FACTOR",
    "Part", "Scope", "estimate_s", "fit"
]

# A part over this many single-thread worker-seconds is left out at quick (named, with its
# estimate).
MAX_PART_S = 10 * 3600.0
# Two single-thread workers train side by side: wall time is about half the worker time.
WORKER_WALL = 0.5
# Seconds per sample-pass of FedAvg with the simple CNN at batch 64 on one thread of this CPU
# (benchmarks/RESULTS.md).
CPU_S_PER_PASS = {"simple_cnn": 186.0 / 1_500_000}
# Cost per sample-pass (training and reference forwards) relative to FedAvg, from the committed
# quick records on one thread (benchmarks/RESULTS.md); kernel CKA adds an RBF Gram per layer.
METHOD_FACTOR = {
    "fedavg": 1.0, "centralized": 1.0, "local_only": 1.0, "fedprox": 1.1, "scaffold": 1.2,
    "moon": 1.35 * 5 / 5.4, "fedcka": 1.7 * 5 / 5.4, "fedintr": 3.1 * 6 / 6.8, "feder": 1.0
}
SIM_FACTOR = {"rbf_cka": 1.2}


def estimate_s(cfg: Config) -> float:
    """Estimated seconds to train ``cfg`` on this CPU (models other than the simple CNN scale by
    :data:`fedlib.companion.costs.DEFAULT_THROUGHPUT` and a narrow ResNet's width by
    :func:`fedlib.companion.costs.width_speedup`)."""
    cpu = DEFAULT_THROUGHPUT["cpu"]
    per_pass = CPU_S_PER_PASS.get(
        cfg.model) or CPU_S_PER_PASS["simple_cnn"] * cpu["simple_cnn"] / cpu.get(
            cfg.model, cpu["*"]) / width_speedup(cfg)
    factor = METHOD_FACTOR.get(cfg.strategy, 2.0) * SIM_FACTOR.get(cfg.strategy_kw.get("sim", ""),
                                                                   1.0)
    train, test = sample_passes(cfg)
    return cfg.rounds * ((train + reference_passes(cfg)) * factor + test / 3) * per_pass


@dataclass(frozen=True)
class Part:
    """Runs that one claim (or group of claims) needs: ``runs`` is ``{artifact: {RunId: Config}}``;
    ``extra_s`` is work that is not a run (e.g. timing); ``quick_why``: left out at quick whatever
    the budget."""

    name: str
    runs: Plan
    extra_s: float = 0.0
    quick_why: str = ""


class Scope(dict):
    """What a scale runs of a notebook, as its plan: ``{artifact: {RunId: Config}}``, the kept
    parts' runs merged by artifact; besides, the parts kept (``kept``), the parts left out
    (``left_out``: name → why) and the estimate of the kept runs (``seconds``: single-thread
    worker-seconds)."""

    def __init__(self, kept: Sequence[Part] = (), left_out: Mapping[str, str] | None = None,
                 seconds: float = 0.0) -> None:
        super().__init__()
        self.kept, self.left_out, self.seconds = list(kept), dict(left_out or {}), seconds
        for p in self.kept:
            for art, runs in p.runs.items():
                self.setdefault(art, {}).update(runs)

    def has(self, name: str) -> bool:
        return any(p.name == name for p in self.kept)

    def lines(self) -> list[str]:
        """One line per part: kept (with the estimate) or left out (with why)."""
        return ([f"runs: {p.name}" for p in self.kept] + [f"not run at this scale: {n} — {w}"
                                                           for n, w in self.left_out.items()]
                + [f"retraining from an empty store: about {self.seconds / 3600:.1f} single-thread "
                   f"worker-hours on this CPU, about {WORKER_WALL * self.seconds / 3600:.1f} h "
                   "wall time with the campaign's two workers"])


def fit(parts: list[Part], scale: str) -> Scope:
    """The plan of ``parts`` at ``scale``: every part at a scale without a budget (``paper``,
    ``smoke``); at a budgeted one (``quick``: :attr:`Scale.budgeted
    <fedlib.companion.scales.Scale.budgeted>`) a part with a ``quick_why`` or whose new runs (a run
    an earlier part keeps is counted once) need more than :data:`MAX_PART_S` worker-seconds is left
    out, with why."""
    budgeted = scale_of(scale).budgeted
    names = [p.name for p in parts]
    if len(set(names)) != len(names):
        raise ValueError(f"fit: part names must be distinct, got {names}.")
    kept: list[Part] = []
    left_out: dict[str, str] = {}
    seconds, seen = 0.0, set()
    for p in parts:
        if p.quick_why and budgeted:
            left_out[p.name] = p.quick_why
            continue
        new = {c.key(): c for runs in p.runs.values() for c in runs.values() if c.key() not in seen}
        cost = p.extra_s + sum(estimate_s(c) for c in new.values())
        if budgeted and cost > MAX_PART_S:
            h = cost / 3600  # as many decimals as it takes to read above the limit
            hours = next(f"{h:.{d}f}" for d in (1, 2, 3)
                         if round(h, d) > MAX_PART_S / 3600 or d == 3)
            left_out[p.name] = (f"its runs need about {hours} single-thread worker-hours on this "
                                f"CPU, over the {MAX_PART_S / 3600:.0f} a quick artifact may take")
            continue
        kept.append(p)
        seconds += cost
        seen |= set(new)
    return Scope(kept, left_out, seconds)


def retrain_cost(runs: Plan | Mapping[Any, Config], scale: str) -> str:
    """What retraining ``runs`` (a plan, or one artifact's ``{RunId: Config}``) from an empty store
    costs on this CPU at ``scale``: single-thread worker-hours by the stated model
    (:func:`estimate_s`, a run shared by artifacts counted once) and the wall time with the
    campaign's two workers. At a scale meant for a GPU (paper): where the GPU estimate is."""
    if scale_of(scale).gpu:
        return (f"retraining at {scale} scale: `python -m fedlib.companion.campaign plan --scale "
                f"{scale}` lists every run's estimate")
    flat = {
        c.key(): c
        for v in runs.values()
        for c in (v.values() if isinstance(v, Mapping) else [v])
    }
    hours = sum(estimate_s(c) for c in flat.values()) / 3600
    return (f"retraining these {len(flat)} runs from an empty store: about {hours:.1f} "
            f"single-thread worker-hours on this CPU, {WORKER_WALL * hours:.1f} h wall time with "
            f"the campaign's two workers (make campaign SCALE={scale})")
