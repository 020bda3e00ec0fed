"""FedSHIBU (fedshibu.txt): Table 1 / Fig. 4's shard sweep, Figs. 1, 3 and 5 (notebook 08)."""

from __future__ import annotations

from typing import Any

from fedlib.companion.common import Plan
from fedlib.companion.grid import Records
from fedlib.companion.papers.fedshibu import tables as art
from fedlib.companion.papers.fedshibu import claims
from fedlib.data import CLASSES
from fedlib.companion.papers.fedshibu.plans import artifact_presets, fedshibu_plan
from fedlib.companion.papers.fedshibu.preset import FEDSHIBU_PRESET
from fedlib.companion.verdicts import Verdict
from fedlib.companion.paper import Notebook, Paper


def shards_claims(plan: Plan, records: Records, *, scale: str, dataset: str = "fmnist",
                  **params: Any) -> list[Verdict]:
    """Table 1 against the CRSM's controls, Fig. 1's groups, Fig. 3's CRSM and Fig. 5's FedAvg +
    CRSM, each row labelled with what this scale changes of the paper's setup (each artifact's at
    paper scale, on the paper's column:
    :func:`~fedlib.companion.papers.fedshibu.plans.artifact_presets`)."""
    frames = {a: art.personal_frame(rs) for a, rs in records.items()}
    column = art.paper_column(dataset)
    paper = artifact_presets("paper", dataset=column)
    return claims.shards_verdicts(frames, records, scale, column, dataset, paper,
                                  CLASSES.get(dataset, 10))


FEDSHIBU_PAPER = Paper(
    name="FedSHIBU", text="fedshibu.txt", presets=(FEDSHIBU_PRESET,),
    notebooks=(Notebook("08_fedshibu_shards", plan=fedshibu_plan, claims=shards_claims,
                        datasets=("cifar10", "cifar100"), priorities={"table1": 30, "*": 45}),))
