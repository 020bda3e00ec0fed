"""FedER (feder-thesis.txt): Table 4.2's optimizer grid, its curves and Fig. A.1 (notebook 07)."""

from __future__ import annotations

from typing import Any, Mapping

from ..artifacts import feder
from ..plans import feder_plan
from ..plans.feder import FEDER_LEFT_OUT
from ..verdicts import Verdict
from .paper import Notebook, Paper


def grid_claims(records: Mapping[str, Mapping[Any, Any]], *, scale: str, dataset: str = "fmnist",
                **params: Any) -> list[Verdict]:
    """Table 4.2: FedER against FedAvg and non-federated training per optimizer, and the generalization gaps."""
    return feder.verdicts(feder.grid_frame(records), dataset, FEDER_LEFT_OUT[scale])


PAPER = Paper(
    name="FedER", text="feder-thesis.txt", presets=("feder",),
    notebooks=(Notebook("07_feder_optimizer_grid", plan=feder_plan, claims=grid_claims, datasets=("cifar100",),
                        priorities={"table42": 42, "*": 45}),))
