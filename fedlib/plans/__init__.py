"""The runs each notebook needs at each scale, declared in one place that the notebooks themselves use.

``plan(notebook, scale, ...)`` returns ``{artifact: {RunId: Config}}`` (:class:`RunId`: a run's method, seed and the
settings its plan varies; ``str()`` of it is the run's name); a notebook trains (or loads from the
results store) exactly these runs, so a batch tool can list, cost and schedule them without executing notebooks.
One module per notebook; :data:`PLANS` maps a notebook's name to its plan function, which takes ``scale`` and the
notebook's parameters (``dataset``, ``device``, ``seed``, ``executor``) as keywords.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from ..config import SCALES, Config
from ._base import FedCKARunId, FedERRunId, FedIntRRunId, FedSHIBURunId, Plan, RunId
from .baseline import BASELINE_LEFT_OUT, BASELINE_SEEDS, baseline_plan
from .feder import feder_plan
from .fedcka import fedcka_ablations_plan, fedcka_heterogeneity_plan, fedcka_similarity_plan, keeps_artifacts
from .fedintr import fedintr_benchmarks_plan, fedintr_scaling_plan
from .fedshibu import FEDSHIBU_LEVELS, FEDSHIBU_METHODS, GROUPS, fedshibu_methods, fedshibu_plan

__all__ = ["plan", "PLANS", "PAPER_DATASETS", "Plan", "RunId", "FedCKARunId", "FedIntRRunId", "FedERRunId",
           "FedSHIBURunId", "fedshibu_plan", "fedshibu_methods", "FEDSHIBU_LEVELS", "FEDSHIBU_METHODS", "GROUPS",
           "baseline_plan", "BASELINE_SEEDS", "BASELINE_LEFT_OUT", "feder_plan", "fedintr_benchmarks_plan", "fedintr_scaling_plan",
           "fedcka_similarity_plan", "fedcka_heterogeneity_plan", "fedcka_ablations_plan",
           "PRIORITIES", "DEFAULT_PRIORITY", "DATASET_FIRST", "priority", "keeps_models"]

PLANS: dict[str, Callable[..., Plan]] = {
    "01_fedavg_baseline": baseline_plan,
    "02_fedcka_layer_similarity": fedcka_similarity_plan,
    "03_fedcka_heterogeneity": fedcka_heterogeneity_plan,
    "04_fedcka_ablations": fedcka_ablations_plan,
    "05_fedintr_benchmarks": fedintr_benchmarks_plan,
    "06_fedintr_scaling": fedintr_scaling_plan,
    "07_feder_optimizer_grid": feder_plan,
    "08_fedshibu_shards": fedshibu_plan,
}


# The datasets of the papers' columns each notebook reproduces at paper scale (the campaign plans every one; the
# notebooks run one at a time, ``dataset=``): FedCKA Table 1 (CIFAR-10, CIFAR-100, Tiny ImageNet) with Table 2 and
# the ablations on CIFAR-10; FedIntR Tables I and V on four datasets, Table III on CIFAR-10/100, Table IV and Fig. 5
# on CIFAR-10; FedER on CIFAR-100; FedSHIBU Table 1 on CIFAR-10/100.
PAPER_DATASETS: dict[str, tuple[str, ...]] = {
    "01_fedavg_baseline": ("fmnist",), "02_fedcka_layer_similarity": ("cifar10",),
    "03_fedcka_heterogeneity": ("cifar10", "cifar100", "tinyimagenet"), "04_fedcka_ablations": ("cifar10",),
    "05_fedintr_benchmarks": ("fmnist", "svhn", "cifar10", "cifar100"), "06_fedintr_scaling": ("cifar10",),
    "07_feder_optimizer_grid": ("cifar100",), "08_fedshibu_shards": ("cifar10", "cifar100"),
}


def plan(notebook: str, scale: str, **kw: Any) -> Plan:
    """The runs of ``notebook`` at ``scale``: ``{artifact: {RunId: Config}}``."""
    if notebook not in PLANS:
        raise ValueError(f"No plan for notebook {notebook!r}; valid: {sorted(PLANS)}.")
    if scale not in SCALES:
        raise ValueError(f"Unknown scale {scale!r}; valid scales: {SCALES}.")
    return PLANS[notebook](scale, **kw)


# (notebook number, artifact id) -> priority (lower runs first). Artifact ids are normalized: lower case, letters
# and digits only, Roman table numbers as digits ("Table II" -> "table2"); "*" matches any artifact.
PRIORITIES: dict[tuple[str, str], int] = {
    ("05", "table1"): 10, ("05", "table2"): 11, ("05", "table5"): 12,  # FedIntR, Fashion-MNIST column
    ("01", "table1"): 13,  # FedIntR Table I's FedAvg / FedProx rows (the same runs as notebook 05's)
    ("03", "table2"): 20,  # FedCKA Table 2 (CIFAR-10)
    ("03", "table1"): 21, ("05", "*"): 25, ("03", "*"): 26, ("01", "*"): 27,
    ("08", "table1"): 30,  # FedSHIBU Table 1 / Fig. 4
    ("07", "table42"): 31,  # FedER Table 4.2
    ("02", "*"): 40, ("04", "*"): 40, ("06", "*"): 40, ("07", "*"): 45, ("08", "*"): 45,
}
DEFAULT_PRIORITY = 50
DATASET_FIRST = "fmnist"  # within one priority, Fashion-MNIST runs first (the papers' numbers we can check here)
_ROMAN = {"i": 1, "ii": 2, "iii": 3, "iv": 4, "v": 5, "vi": 6, "vii": 7, "viii": 8, "ix": 9, "x": 10}


def keeps_models(cfg: Config) -> bool:
    """Whether a planned run keeps its clients' final models, as the notebook that renders it asks
    (:func:`fedlib.plans.fedcka.keeps_artifacts`: FedCKA's between-client CKA), so rendering does not retrain it."""
    return cfg.model == "simple_cnn" and keeps_artifacts(cfg)


def _norm(artifact: str) -> str:
    a = re.sub(r"[^a-z0-9 ]", "", artifact.lower().replace("_", " ").replace(".", ""))
    a = re.sub(r"\b(table|fig|figure)\s*(x|ix|viii|vii|vi|v|iv|iii|ii|i)\b", lambda m: f"{m[1]}{_ROMAN[m[2]]}", a)
    return a.replace(" ", "")


def priority(notebook: str, artifact: str) -> int:
    """The priority of ``artifact`` of ``notebook`` (:data:`PRIORITIES`; :data:`DEFAULT_PRIORITY` if unknown)."""
    num, art = notebook[:2], _norm(artifact)
    for (nb, pat), p in PRIORITIES.items():
        if nb == num and pat != "*" and re.match(rf"{pat}(?!\d)", art):
            return p
    return PRIORITIES.get((num, "*"), DEFAULT_PRIORITY)
