"""The runs each notebook needs at each scale, declared in one place that the notebooks themselves use.

A plan function returns ``{artifact: {RunId: Config}}`` (:class:`RunId`: a run's method, seed and the settings its
plan varies; ``str()`` of it is the run's name); a notebook trains (or loads from the results store) exactly these
runs, so a batch tool can list, cost and schedule them without executing notebooks. One module per paper; each
function takes ``scale`` and the notebook's parameters (``dataset``, ``device``, ``seeds``, ``executor``) as
keywords. :mod:`fedlib.papers` registers each as its notebook's plan.
"""

from __future__ import annotations

from ..config import Config
from ._base import FedCKARunId, FedERRunId, FedIntRRunId, FedSHIBURunId, Plan, RunId
from .baseline import BASELINE_LEFT_OUT, BASELINE_SEEDS, baseline_plan
from .feder import feder_plan
from .fedcka import fedcka_ablations_plan, fedcka_heterogeneity_plan, fedcka_similarity_plan, keeps_artifacts
from .fedintr import fedintr_benchmarks_plan, fedintr_scaling_plan
from .fedshibu import FEDSHIBU_LEVELS, FEDSHIBU_METHODS, GROUPS, fedshibu_methods, fedshibu_plan

__all__ = ["Plan", "RunId", "FedCKARunId", "FedIntRRunId", "FedERRunId",
           "FedSHIBURunId", "fedshibu_plan", "fedshibu_methods", "FEDSHIBU_LEVELS", "FEDSHIBU_METHODS", "GROUPS",
           "baseline_plan", "BASELINE_SEEDS", "BASELINE_LEFT_OUT", "feder_plan", "fedintr_benchmarks_plan", "fedintr_scaling_plan",
           "fedcka_similarity_plan", "fedcka_heterogeneity_plan", "fedcka_ablations_plan",
           "keeps_models"]


def keeps_models(cfg: Config) -> bool:
    """Whether a planned run keeps its clients' final models, as the notebook that renders it asks
    (:func:`fedlib.plans.fedcka.keeps_artifacts`: FedCKA's layer similarity, notebooks 02 and 04), so rendering does not
    retrain it."""
    return cfg.model == "simple_cnn" and keeps_artifacts(cfg)
