"""FedIntR (fedintr.txt): Tables I, II, III, V (notebook 05), Table IV and Figs. 4-5 (notebook
06)."""

from __future__ import annotations

from typing import Any

from fedlib.companion.budget import Scope
from fedlib.companion.common import Plan
from fedlib.companion.grid import Records
from fedlib.companion.papers.fedintr import tables as fi
from fedlib.companion.papers.fedintr import claims as fc
from fedlib.companion.papers.fedintr import scaling as fs
from fedlib.companion.papers.fedintr import scaling_claims as fsc
from fedlib.companion.papers.fedintr.plans import (
    FEDINTR_DEFAULT_E, FEDINTR_LAST, FEDINTR_TABLE4_AT, benchmarks_left_out,
    fedintr_benchmarks_plan, fedintr_scaling_plan, fig5_rounds, scaling_left_out)
from fedlib.companion.papers.fedintr.preset import FEDINTR_PRESET
from fedlib.companion.verdicts import Verdict
from fedlib.companion.paper import Notebook, Paper


def benchmarks_claims(plan: Plan, records: Records, *, scale: str, dataset: str = "fmnist",
                      **params: Any) -> list[Verdict]:
    """Table I (FedIntR against each method, as §IV-B reads each dataset), Table II (μ), Table III
    and §IV-C (β) and Table V (layer weights), each row saying what this scale changes from the
    paper's setup."""
    left_out = benchmarks_left_out(scale, dataset)
    t1 = fi.Table1.from_records(records["table1"], FEDINTR_LAST[scale], dataset, left_out)
    base = next(iter(plan["table1"].values()))
    t3 = (fi.Table3.from_records(records["table3"], t1, base.partition_kw["beta"])
          if "table3" in records else None)
    longer = {c.partition_kw["beta"]: c.rounds for c in plan.get("table3", {}).values()
              if c.rounds != base.rounds}
    notes = {"Table III|§IV-C": "; ".join(f"Table III at β = {b:g}: {r} rounds"
                                          for b, r in sorted(longer.items()))}
    return fc.labelled(fc.claims(t1, records, scale, t3), base, notes)


def scaling_claims(plan: Scope, records: Records, *, scale: str, dataset: str = "fmnist",
                   **params: Any) -> list[Verdict]:
    """Table IV (many clients, 20 % sampled) and Fig. 5 (local epochs), each row saying what this
    scale changes from the paper's setup (the preset's; Fig. 5's E and rounds are in its rows) and
    what the plan leaves out."""
    left_out = scaling_left_out(plan)
    df4 = (fs.table4_frame(records["table4"], FEDINTR_TABLE4_AT[scale])
           if "table4" in records else None)
    last, rounds = FEDINTR_LAST[scale], fig5_rounds(scale, dataset)
    df5 = fs.fig5_frame(records["fig5"], last)
    equal = fs.fig5_equal(records["fig5"], last, rounds, FEDINTR_DEFAULT_E[scale])
    rows = [*fsc.table4_verdicts(df4, left_out=left_out.get("table4")),
            *fsc.epochs_verdicts(df5, FEDINTR_DEFAULT_E[scale], equal=equal, rounds=rounds,
                                 budget_note=left_out.get("fig5 E > default", ""))]
    base = FEDINTR_PRESET.config(scale, dataset=dataset)
    longer = {e: r for e, r in rounds.items() if r != base.rounds}
    notes = {
        "Fig. 5": "; ".join(f"Fig. 5 at E = {e}: {r} rounds" for e, r in sorted(longer.items()))
    }
    return fc.labelled(rows, base, notes)


FEDINTR_PAPER = Paper(
    name="FedIntR",
    text="fedintr.txt",
    presets=(FEDINTR_PRESET, ),
    notebooks=(
        Notebook(
            "05_fedintr_benchmarks",
            plan=fedintr_benchmarks_plan,
            claims=benchmarks_claims,
            # Tables I and V; Table III: CIFAR-10/100
            datasets=("fmnist", "svhn", "cifar10", "cifar100"),
            # Table II is Table I's FedIntR rows
            priorities={"table1": 10, "table5": 12, "*": 25}),
        Notebook("06_fedintr_scaling", plan=fedintr_scaling_plan, claims=scaling_claims,
                 datasets=("cifar10", ), priorities={"*": 40}),
    ))
