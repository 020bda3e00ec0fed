"""FedER (feder-thesis.txt): Table 4.2's optimizer grid, its curves and Fig. A.1 (notebook 07)."""

from __future__ import annotations

from typing import Any

from fedlib.companion.common import Plan
from fedlib.companion.grid import Records
from fedlib.companion.papers.feder import tables as feder
from fedlib.companion.papers.feder.plans import FEDER_LEFT_OUT, feder_plan
from fedlib.companion.papers.feder.preset import FEDER_PRESET
from fedlib.companion.report import label_rows
from fedlib.companion.verdicts import Verdict
from fedlib.companion.paper import Notebook, Paper


def grid_claims(plan: Plan, records: Records, *, scale: str, dataset: str = "fmnist",
                **params: Any) -> list[Verdict]:
    """Table 4.2 and its figures' sentences: FedER against FedAvg and non-federated training per
    optimizer, the curves and the generalization gaps, each row saying what this scale changes from
    the thesis's setup."""
    rows = feder.verdicts(feder.grid_frame(records), dataset, FEDER_LEFT_OUT[scale])
    cfgs = list(plan["table4.2"].values())
    rounds = sorted({c.rounds for c in cfgs})
    base = next(c for c in cfgs if c.rounds == rounds[0])
    more = "; ".join(
        f"the {' and '.join(sorted({c.label.split('/')[2] for c in cfgs if c.rounds == r}))} rows: "
        f"{r} rounds" for r in rounds[1:])
    thesis = FEDER_PRESET.config("paper", dataset=dataset)
    return label_rows(rows, base, thesis, {".": more}, who="the thesis")


FEDER_PAPER = Paper(
    name="FedER", text="feder-thesis.txt", presets=(FEDER_PRESET, ),
    notebooks=(Notebook("07_feder_optimizer_grid", plan=feder_plan, claims=grid_claims,
                        datasets=("cifar100", ), priorities={"table42": 42, "*": 45}), ))
