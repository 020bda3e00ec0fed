"""Run ids: every plan keys its runs by a :class:`~fedlib.companion.common.RunId` whose ``str()`` is the run's name, unique
within its artifact and unchanged (the golden names below are the ones tables, ledgers and summaries print)."""

from __future__ import annotations

import pytest

from fedlib.companion.papers import PLANS, plan
from fedlib.companion.common import FedCKARunId, FedERRunId, FedIntRRunId, FedSHIBURunId, RunId

GOLDEN = [  # (notebook, scale, artifact, run id, its name)
    ("01_fedavg_baseline", "quick", "table1", RunId("FedAvg", 0), "FedAvg | seed=0"),
    ("01_fedavg_baseline", "quick", "table1", RunId("FedProx (μ=0.001)", 4), "FedProx (μ=0.001) | seed=4"),
    ("01_fedavg_baseline", "quick", "fedcka_fedavg", RunId("FedAvg (FedCKA's setup)", 2),
     "FedAvg (FedCKA's setup) | seed=2"),
    ("02_fedcka_layer_similarity", "quick", "simple_cnn", RunId("FedAvg (simple CNN)", 0),
     "FedAvg (simple CNN) | seed=0"),
    ("02_fedcka_layer_similarity", "paper", "resnet50", RunId("FedAvg (ResNet-50)", 0), "FedAvg (ResNet-50) | seed=0"),
    ("03_fedcka_heterogeneity", "quick", "table2", FedCKARunId("FedProx (μ=0.001)", 3, alpha=0.1),
     "FedProx (μ=0.001) | α=0.1 | seed=3"),
    ("03_fedcka_heterogeneity", "quick", "table2", FedCKARunId("FedCKA (μ=3)", 0, alpha=5),
     "FedCKA (μ=3) | α=5 | seed=0"),
    ("03_fedcka_heterogeneity", "quick", "epochs", FedCKARunId("FedAvg", 1, E=10), "FedAvg | E=10 | seed=1"),
    ("04_fedcka_ablations", "quick", "M", RunId("FedCKA (μ=3, M=7)", 4), "FedCKA (μ=3, M=7) | seed=4"),
    ("04_fedcka_ablations", "quick", "metrics", RunId("None (FedAvg)", 0), "None (FedAvg) | seed=0"),
    ("04_fedcka_ablations", "quick", "bounds", RunId("centralized", 2), "centralized | seed=2"),
    ("05_fedintr_benchmarks", "quick", "table1", FedIntRRunId("FedIntR", 0, mu=10), "FedIntR | μ=10 | seed=0"),
    ("05_fedintr_benchmarks", "quick", "table1", FedIntRRunId("FedAvg", 4), "FedAvg | seed=4"),
    ("05_fedintr_benchmarks", "quick", "table3", FedIntRRunId("FedIntR", 2, beta=0.1, mu=10),
     "β=0.1 | FedIntR | μ=10 | seed=2"),
    ("05_fedintr_benchmarks", "quick", "table5", FedIntRRunId("uniform (Eq. 6)", 1, mu=10),
     "uniform (Eq. 6) | μ=10 | seed=1"),
    ("06_fedintr_scaling", "quick", "fig5", FedIntRRunId("FedIntR", 0, E=1, mu=10), "E=1 | FedIntR | μ=10 | seed=0"),
    ("06_fedintr_scaling", "smoke", "table4", FedIntRRunId("FedAvg", 0, N=10), "N=10 | FedAvg | seed=0"),
    ("07_feder_optimizer_grid", "quick", "table4.2", FedERRunId("FedER", 0, optimizer="Adam"), "Adam · FedER · seed=0"),
    ("07_feder_optimizer_grid", "paper", "figA1", FedERRunId("FedER (stable rank)", 4, optimizer="Adam"),
     "Adam · FedER (stable rank) · seed=4"),
    ("07_feder_optimizer_grid", "paper", "table4.2", FedERRunId("non-federated", 2, optimizer="Adam + StepLR"),
     "Adam + StepLR · non-federated · seed=2"),
    ("08_fedshibu_shards", "quick", "table1", FedSHIBURunId("FedBABU", 4, s=2), "FedBABU | s=2 | seed=4"),
    ("08_fedshibu_shards", "quick", "fig1", FedSHIBURunId("aggregated within each group", 0),
     "aggregated within each group | seed=0"),
    ("08_fedshibu_shards", "quick", "fig3", FedSHIBURunId("own samples (§4.3)", 1, s=5),
     "own samples (§4.3) | s=5 | seed=1"),
]


@pytest.mark.parametrize("notebook,scale,artifact,rid,name", GOLDEN, ids=[g[4] for g in GOLDEN])
def test_golden_run_ids_are_planned_under_their_names(notebook, scale, artifact, rid, name):
    runs = plan(notebook, scale)[artifact]
    assert rid in runs and str(rid) == name and runs[rid].seed == rid.seed
    assert str(rid) == rid.SEP.join([rid.unseeded(), f"seed={rid.seed}"])


@pytest.mark.parametrize("notebook", sorted(PLANS))
def test_every_planned_run_id_names_one_run_of_its_artifact(notebook):
    for scale in ("smoke", "quick", "paper"):
        for artifact, runs in plan(notebook, scale).items():
            assert all(isinstance(rid, RunId) and rid.seed == cfg.seed for rid, cfg in runs.items()), artifact
            assert len({str(rid) for rid in runs}) == len(runs), (scale, artifact)


def test_run_ids_are_values():
    a, b = FedIntRRunId("FedIntR", 0, beta=0.1, mu=10), FedIntRRunId("FedIntR", 0, beta=0.1, mu=10.0)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1 and a.settings() == {"β": 0.1, "μ": 10.0}
    assert a != FedIntRRunId("FedIntR", 1, beta=0.1, mu=10) and a != RunId("FedIntR", 0)
    assert repr(FedSHIBURunId("FedBABU", 4, s=2)) == "FedSHIBURunId('FedBABU', seed=4, s=2)"
    assert FedCKARunId("FedAvg", 3, E=5).unseeded() == "FedAvg | E=5"
    with pytest.raises(AttributeError):
        a.seed = 1  # frozen
