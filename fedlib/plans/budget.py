"""The quick scale's budget: a notebook's quick runs train in at most 40 minutes from an empty store on this
project's 2-core CPU.

A plan is built from :class:`Part` s in priority order — the runs the notebook's first claim needs, then the next
claim's, ... (the paper's best μ first, more rounds before more μ values). :func:`fit` keeps the parts whose new
runs (a run two parts share is counted once) still fit the budget and leaves the others out with the reason; the
notebook then marks their claims "not testable at this scale" and says which. A part can also be left out at quick
for a reason other than time (``quick_why``: e.g. it cannot reach its plateau in the preset's rounds).

The estimate is a stated model, never a measurement of the moment, so a plan does not change with machine load:
training sample-passes (:func:`fedlib.costs.sample_passes`; test images count a third) × the method's cost factor
× seconds per sample-pass of the model on this CPU (two threads), × :data:`WORKER_WALL` for a notebook's runs
trained side by side by two single-thread workers (:mod:`fedlib.workers`, the CPU default).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..config import Config
from ..costs import DEFAULT_THROUGHPUT, sample_passes
from ._base import Plan

__all__ = ["QUICK_BUDGET_S", "WORKER_WALL", "CPU_S_PER_PASS", "METHOD_FACTOR", "SIM_FACTOR", "Part", "Scope", "estimate_s", "fit"]

QUICK_BUDGET_S = 40 * 60.0
# Two single-thread worker processes train a pair of quick runs in about 0.6x the wall time of one two-thread
# process training them one after the other (benchmarks/cpu_choices.py --only processes; benchmarks/RESULTS.md).
WORKER_WALL = 0.6
# FedAvg with the simple CNN at batch 64 on this 2-core CPU: the FedCKA quick preset's 900k sample-passes
# (12 rounds x 5 epochs x 15,000 images) in 90-120 s; the upper end, so that a plan stays within its budget.
CPU_S_PER_PASS = {"simple_cnn": 120.0 / 900_000}
# Cost per sample-pass relative to FedAvg on this CPU: the contrastive methods run the global and the previous
# model's forward passes beside the local one; kernel CKA adds an RBF Gram per layer (FedCKA Table 3: 122 vs 104 s).
METHOD_FACTOR = {"fedavg": 1.0, "centralized": 1.0, "fedprox": 1.1, "scaffold": 1.2, "moon": 2.0, "fedcka": 2.5}
SIM_FACTOR = {"rbf_cka": 1.2}


def estimate_s(cfg: Config) -> float:
    """Estimated seconds to train ``cfg`` on this CPU (models other than the simple CNN scale by
    :data:`fedlib.costs.DEFAULT_THROUGHPUT`)."""
    cpu = DEFAULT_THROUGHPUT["cpu"]
    per_pass = CPU_S_PER_PASS.get(cfg.model) or CPU_S_PER_PASS["simple_cnn"] * cpu["simple_cnn"] / cpu.get(
        cfg.model, cpu["*"])
    factor = METHOD_FACTOR.get(cfg.strategy, 2.0) * SIM_FACTOR.get(cfg.strategy_kw.get("sim", ""), 1.0)
    train, test = sample_passes(cfg)
    return cfg.rounds * (train * factor + test / 3) * per_pass


@dataclass(frozen=True)
class Part:
    """Runs that one claim (or group of claims) needs: ``runs`` is ``{artifact: {run name: Config}}``;
    ``extra_s`` is work that is not a run (e.g. timing); ``quick_why``: left out at quick whatever the budget."""

    name: str
    runs: Plan
    extra_s: float = 0.0
    quick_why: str = ""


@dataclass
class Scope:
    """What a scale runs of a notebook: the parts kept, the parts left out (name → why) and the estimate."""

    kept: list[Part] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def plan(self) -> Plan:
        """The kept parts' runs, merged by artifact (the notebook's plan)."""
        out: Plan = {}
        for p in self.kept:
            for art, runs in p.runs.items():
                out.setdefault(art, {}).update(runs)
        return out

    def has(self, name: str) -> bool:
        return any(p.name == name for p in self.kept)

    def lines(self) -> list[str]:
        """One line per part: kept (with the estimate) or left out (with why)."""
        return ([f"runs: {p.name}" for p in self.kept] + [f"not run at this scale: {n} — {w}"
                                                           for n, w in self.left_out.items()]
                + [f"estimated training time from an empty store: {self.seconds / 60:.0f} min on this CPU (two "
                     f"single-thread workers)"])


def fit(parts: list[Part], budget_s: float = QUICK_BUDGET_S) -> Scope:
    """Keep each part in order if its new runs (wall time with the CPU's workers, :data:`WORKER_WALL`) fit what is
    left of ``budget_s`` (``math.inf``: keep all, and
    ignore ``quick_why``); a part that does not fit is left out and a later, cheaper one may still fit."""
    names = [p.name for p in parts]
    if len(set(names)) != len(names):
        raise ValueError(f"fit: part names must be distinct, got {names}.")
    scope, seen = Scope(), set()
    for p in parts:
        if p.quick_why and math.isfinite(budget_s):
            scope.left_out[p.name] = p.quick_why
            continue
        new = {c.key(): c for runs in p.runs.values() for c in runs.values() if c.key() not in seen}
        cost = p.extra_s + WORKER_WALL * sum(estimate_s(c) for c in new.values())
        if scope.seconds + cost <= budget_s:
            scope.kept.append(p)
            scope.seconds += cost
            seen |= set(new)
        else:
            scope.left_out[p.name] = (f"needs ~{cost / 60:.0f} more minutes of training; the notebook's quick runs "
                                      f"are budgeted at {budget_s / 60:.0f} minutes on this CPU "
                                      f"(~{scope.seconds / 60:.0f} used by the parts before it)")
    return scope
