"""The data partitions every paper uses (notebook 00) and FedAvg / FedProx in FedIntR's setup (notebook 01)."""

from __future__ import annotations

from typing import Any, Mapping

from ..artifacts.baseline import baseline_verdicts, per_run_frame
from ..plans import baseline_plan
from ..plans.fedintr import FEDINTR_LAST
from ..verdicts import Verdict
from .paper import Notebook, Paper


def baseline_claims(records: Mapping[str, Mapping[Any, Any]], *, scale: str, dataset: str = "fmnist",
                    **params: Any) -> list[Verdict]:
    """FedIntR Table I's FedAvg and FedProx rows and FedCKA's centralized bound, at FedIntR's statistic (the
    median of the last rounds)."""
    flat = {rid: r for rs in records.values() for rid, r in rs.items()}
    return baseline_verdicts(per_run_frame(flat, last=FEDINTR_LAST[scale]), scale, dataset)


PAPER = Paper(
    name="Baselines", text="FedAvg / FedProx in FedIntR's setup; the partitions of all four papers", presets=(),
    notebooks=(
        Notebook("00_data_partitions"),  # partitions only: nothing trained, invariants but no claims
        Notebook("01_fedavg_baseline", plan=baseline_plan, claims=baseline_claims, datasets=("fmnist",),
                 priorities={"table1": 13, "*": 27}),  # FedIntR Table I's rows: the same runs as notebook 05's
    ))
