"""FedSHIBU (fedshibu.txt): Table 1 / Fig. 4's shard sweep, Figs. 1, 3 and 5 (notebook 08)."""

from __future__ import annotations

from typing import Any, Mapping

from fedlib.companion.papers.fedshibu import tables as art
from fedlib.companion.papers.fedshibu import claims
from fedlib.data import CLASSES
from fedlib.companion.papers.fedshibu.plans import fedshibu_plan
from fedlib.companion.verdicts import Verdict
from fedlib.companion.paper import Notebook, Paper


def shards_claims(records: Mapping[str, Mapping[Any, Any]], *, scale: str, dataset: str = "fmnist",
                  **params: Any) -> list[Verdict]:
    """Table 1 against the CRSM's controls, Fig. 1's groups, Fig. 3's CRSM and Fig. 5's FedAvg + CRSM, each row
    labelled with what this scale changes of the paper's setup (the paper-scale plan's, on the paper's column)."""
    frames = {a: art.personal_frame(rs) for a, rs in records.items()}
    column = art.paper_column(dataset)
    paper = {a: next(iter(rs.values())) for a, rs in fedshibu_plan("paper", dataset=column).items()}
    return claims.shards_verdicts(frames, records, scale, column, dataset, paper, CLASSES.get(dataset, 10))


FEDSHIBU_PAPER = Paper(
    name="FedSHIBU", text="fedshibu.txt", presets=("fedshibu",),
    notebooks=(Notebook("08_fedshibu_shards", plan=fedshibu_plan, claims=shards_claims,
                        datasets=("cifar10", "cifar100"), priorities={"table1": 30, "*": 45}),))
