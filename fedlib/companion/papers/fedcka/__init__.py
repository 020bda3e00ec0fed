"""FedCKA (fedcka-arxiv.txt and fedcka-applsci.txt, two versions of one paper): layer similarity
(notebook 02), Table 2 and the heterogeneity sweep (notebook 03), the ablations, Tables 3-4 and the
variance (notebook 04)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from fedlib.companion.budget import Scope
from fedlib.companion.papers.fedcka.claims import (ablation_verdicts, cost_verdicts, fig5_verdicts,
                                                   table2_verdicts, table3_verdicts)
from fedlib.companion.papers.fedcka.similarity_claims import (premise_verdicts,
                                                              similarity_verdicts,
                                                              variance_verdicts)
from fedlib.companion.papers.fedcka.accuracy import Table2, epoch_rounds, epochs_at, seed_curves
from fedlib.companion.papers.fedcka.ablations import metrics_frame
from fedlib.companion.papers.fedcka.layers import N_EVAL, R50_TAPS
from fedlib.companion.grid import Records, fetch_runs, offs, runs_frame
from fedlib.companion.papers.fedcka.preset import FEDCKA_PRESET
from fedlib.companion.papers.fedcka.plans import (FEDCKA_MU, TIMING_PART, cost_setups,
                                                  fedcka_ablations_plan, fedcka_heterogeneity_plan,
                                                  fedcka_similarity_plan)
from fedlib.companion.results import Store
from fedlib.companion.similarity import run_similarity
from fedlib.companion.timing import cached_costs
from fedlib.companion.verdicts import Verdict
from fedlib.companion.paper import Notebook, Paper


def similarity_claims(plan: Scope, records: Records, *, scale: str, store: Store,
                      n_eval: int | None = None, **params: Any) -> list[Verdict]:
    """§3.1: early layers similar across clients, late layers not (simple CNN and ResNet-50), from
    the stored layer similarities of the plan's runs' final models."""
    n_eval = n_eval or N_EVAL[scale]
    sims = {c.seed: run_similarity(c, store=store, train=False, n_eval=n_eval)
            for c in plan["simple_cnn"].values()}
    sims50 = {c.seed: run_similarity(c, store=store, train=False, n_eval=n_eval, taps=R50_TAPS)
              for c in plan.get("resnet50", {}).values()}
    return similarity_verdicts(sims, sims50, plan, off=offs(runs_frame(records["simple_cnn"])))


def heterogeneity_claims(plan: Scope, records: Records, **params: Any) -> list[Verdict]:
    """Table 2 (every α, each method at the paper's μ for the setting) and Appl. Sci. Fig. 5
    (rounds and local epochs)."""
    seed_list = sorted({c.seed for rs in plan.values() for c in rs.values()})
    rounds = next(iter(plan["table2"].values())).rounds
    names = {"FedAvg": "FedAvg", "FedCKA": f"FedCKA (μ={FEDCKA_MU:g})"}
    curves = seed_curves(records["table2"], names, seed_list)
    ep = records.get("epochs", {})
    by_e = epoch_rounds(ep)
    epochs = runs_frame(ep) if ep else pd.DataFrame()
    equal = epochs_at(ep, min(by_e.values())) if ep else None  # at its common rounds, as the paper
    return [*table2_verdicts(Table2.from_records(records["table2"]).grid, plan),
            *fig5_verdicts(curves, epochs, rounds, plan, by_e, equal)]


def ablations_claims(plan: Scope, records: Records, *, scale: str, store: Store,
                     device: str = "cpu", n_eval: int | None = None,
                     **params: Any) -> list[Verdict]:
    """The M-layer ablation and its bounds, Table 3's similarity metrics, Table 4's costs (stored
    timings), the between-client variance per layer and the premise that the regularized layers
    stay similar."""
    sims: dict[str, dict[int, Any]] = {}
    for rid, c in plan["variance"].items():
        sim = run_similarity(c, store=store, train=False, n_eval=n_eval)
        sims.setdefault(rid.method, {})[c.seed] = sim
    setups = cost_setups(scale, device) if plan.has(TIMING_PART) else {}
    costs = {name: cached_costs(s["configs"], s["dataset"], s["n_train"], reps=s["reps"],
                                store=store, train=False) for name, s in setups.items()}
    m_df, bounds = runs_frame(records["M"]), runs_frame({**records["bounds"], **records["M"]})
    variance = records.get("variance") or fetch_runs(plan["variance"], store=store, train=False,
                                                     progress=False)
    off = offs(runs_frame(variance))  # the runs whose clients' models the similarity rows read
    return [*ablation_verdicts(m_df, bounds, plan),
            *table3_verdicts(metrics_frame(records["metrics"]), plan),
            *cost_verdicts(costs, plan, scale), *variance_verdicts(sims, plan, off=off),
            *premise_verdicts(sims, off=off)]


FEDCKA_PAPER = Paper(
    name="FedCKA",
    text="fedcka-arxiv.txt and fedcka-applsci.txt",
    presets=(FEDCKA_PRESET, ),
    notebooks=(
        Notebook("02_fedcka_layer_similarity", plan=fedcka_similarity_plan,
                 claims=similarity_claims, datasets=("cifar10", ), priorities={"*": 40}),
        Notebook(
            "03_fedcka_heterogeneity",
            plan=fedcka_heterogeneity_plan,
            claims=heterogeneity_claims,
            # Table 1's columns: Table 2's α = 5 runs
            datasets=("cifar10", "cifar100", "tinyimagenet"),
            priorities={"table2": 20, "*": 26}),
        Notebook("04_fedcka_ablations", plan=fedcka_ablations_plan, claims=ablations_claims,
                 datasets=("cifar10", ), priorities={"*": 40}),
    ))
