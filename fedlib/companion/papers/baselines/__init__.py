"""The data partitions every paper uses (notebook 00) and FedAvg / FedProx in FedIntR's setup
(notebook 01)."""

from __future__ import annotations

from typing import Any

from fedlib.companion.common import Plan
from fedlib.companion.grid import Records
from fedlib.companion.papers.baselines.tables import baseline_verdicts, per_run_frame
from fedlib.companion.papers.baselines.plans import baseline_plan
from fedlib.companion.papers.fedintr.plans import FEDINTR_LAST
from fedlib.companion.papers.fedintr.preset import FEDINTR_PRESET
from fedlib.companion.report import setup_label
from fedlib.companion.verdicts import Verdict
from fedlib.companion.paper import Notebook, Paper


def baseline_claims(plan: Plan, records: Records, *, scale: str, dataset: str = "fmnist",
                    **params: Any) -> list[Verdict]:
    """FedIntR Table I's FedAvg and FedProx rows at FedIntR's statistic (the median of the last
    rounds), labelled with what this scale's runs change of the paper's setup (FedIntR's preset at
    paper scale)."""
    table1 = records.get("table1", {})
    paper = FEDINTR_PRESET.config("paper", dataset=dataset)
    data = setup_label("FedIntR Table I", dataset, [r.cfg for r in table1.values()], paper)
    return baseline_verdicts(per_run_frame(table1, last=FEDINTR_LAST[scale]), scale, dataset, data)


BASELINES_PAPER = Paper(
    name="Baselines",
    text="FedAvg / FedProx in FedIntR's setup; the partitions and the findings "
    "of all four papers",
    presets=(),
    notebooks=(
        # partitions only: nothing trained, invariants but no claims
        Notebook("00_data_partitions"),
        Notebook(
            "01_fedavg_baseline",
            plan=baseline_plan,
            claims=baseline_claims,
            datasets=("fmnist", ),
            # FedIntR Table I's rows: the same runs as notebook 05's
            priorities={"table1": 13, "*": 27}),
        # every notebook's stored claim rows read together: nothing trained, no claims
        Notebook("09_findings"),
    ),
    cited=False)  # its claim rows cite FedIntR's Table I
