"""The FedIntR notebooks' plans: the paper's grids at paper scale, shared records at quick scale, their run ids."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from fedlib.companion.papers import preset
from fedlib.companion.papers import plan
from fedlib.companion.common import FedIntRRunId
from fedlib.companion.papers.fedintr.plans import (FEDINTR_BEST_MU, FEDINTR_DEFAULT_E, FEDINTR_METHODS, FEDINTR_QUICK_LEFT_OUT,
                                  mu_grid, scaling_left_out)


def test_paper_grids_are_the_papers():
    p = plan("05_fedintr_benchmarks", "paper", dataset="cifar10", seeds=(0, 1, 2))
    mus = {}
    for rid, cfg in p["table1"].items():
        mus.setdefault(rid.method, set()).add(rid.mu)
        assert cfg.rounds == 100 and cfg.local_epochs == 10 and cfg.batch_size == 512 and cfg.n_train is None
        assert cfg.partition_kw["beta"] == 0.5 and cfg.num_clients == 10
    assert mus == {"FedAvg": {None}, "FedCKA": {0.1, 1, 3, 5, 10}, "FedProx": {0.001, 0.01, 0.1, 1},
                   "MOON": {0.1, 1, 5, 10}, "FedIntR": {0.1, 1, 3, 5, 10}}
    assert len(p["table1"]) == 3 * 19  # every run with 3 seeds
    assert {c.partition_kw["beta"] for c in p["table3"].values()} == {5.0, 0.1}
    uniform = [c for rid, c in p["table5"].items() if rid.method.startswith("uniform")]
    assert {c.strategy_kw["weighting"] for c in uniform} == {"uniform"}
    assert uniform[0].strategy_kw["mu"] == 3  # Table I's best μ on CIFAR-10


def test_table_iii_runs_each_beta_to_its_quick_plateau_and_the_papers_rounds_at_paper_scale():
    """Quick runs β = 0.1 longer (FEDINTR_TABLE3_ROUNDS), every method alike; β = 5 the preset's rounds, as Table I's
    β = 0.5; the paper runs 100 rounds at every β."""
    from fedlib.companion.papers.fedintr.preset import FEDINTR_TABLE3_ROUNDS

    quick = plan("05_fedintr_benchmarks", "quick", dataset="fmnist")
    rounds = {(rid.beta, rid.method): c.rounds for rid, c in quick["table3"].items()}
    assert rounds == {(5.0, "FedAvg"): 40, (5.0, "FedIntR"): 40, (0.1, "FedAvg"): FEDINTR_TABLE3_ROUNDS["quick"][0.1],
                      (0.1, "FedIntR"): FEDINTR_TABLE3_ROUNDS["quick"][0.1]}
    assert {c.rounds for c in quick["table1"].values()} == {40} and FEDINTR_TABLE3_ROUNDS["quick"][0.1] > 40
    paper = plan("05_fedintr_benchmarks", "paper", dataset="cifar10", seeds=(0,))
    assert {c.rounds for c in paper["table3"].values()} == {100}


def test_paper_scaling_plan_is_table_iv_and_fig_5():
    p = plan("06_fedintr_scaling", "paper", dataset="cifar10")
    t4 = {(rid.N, c.rounds, c.sample_fraction) for rid, c in p["table4"].items()}
    assert t4 == {(50, 800, 0.2), (100, 1000, 0.2)} and len(p["table4"]) == 16 * 5  # 5 seeds each
    fig5 = {(rid.E, rid.method, rid.mu) for rid in p["fig5"]}
    assert {e for e, _, _ in fig5} == {1, 5, 10, 20, 40} and ("E", "FedIntR", 3) not in fig5
    assert (10, "FedIntR", 3.0) in fig5 and (10, "MOON", 5.0) in fig5  # CIFAR-10's Table I μ


def test_quick_scaling_plan_is_fig_5_with_five_seeds_and_no_table_iv():
    """Table IV cannot reach its plateau at quick: it is left out (with why); Fig. 5 runs FedAvg and FedIntR at E = 1,
    the quick preset's E and E = 20 with 5 seeds, and its runs at the preset's E are notebook 05's Table I runs (one
    record each)."""
    p = plan("06_fedintr_scaling", "quick")
    assert set(p) == {"fig5"} and set(scaling_left_out(p)) == {"table4", "fig5 E > default"}
    runs = {(rid.E, rid.method, rid.mu, rid.seed) for rid in p["fig5"]}
    E = preset("fedintr", "quick").local_epochs
    assert FEDINTR_DEFAULT_E["quick"] == E and FEDINTR_DEFAULT_E["paper"] == preset("fedintr").local_epochs == 10
    methods = (("FedAvg", None), ("FedIntR", 10.0))  # Table I's best μ on Fashion-MNIST
    assert runs == {(e, m, mu, s) for e in (1, E, 20) for m, mu in methods for s in (0, 1, 2, 3, 4)}
    table1 = {c.key() for c in plan("05_fedintr_benchmarks", "quick")["table1"].values()}
    assert all(c.key() in table1 for rid, c in p["fig5"].items() if rid.E == E)
    assert len(plan("06_fedintr_scaling", "smoke")["table4"]) == 2  # smoke keeps a stand-in: one seed


def test_notebook_06_leaves_out_at_quick_only_parts_over_the_budget_and_says_how_long_they_take():
    """Table IV and each E of Fig. 5 above the default are planned as the paper has them, and each is left out by the
    10-hour rule on its own: E = 20 fits, E = 40 does not. The claims' reason is the stated model's estimate of those
    very runs, and smoke and paper keep every part."""
    from fedlib.companion.budget import MAX_PART_S, estimate_s
    from fedlib.companion.papers.fedintr.plans import FIG5_LONG_PART, FIG5_PART, fedintr_scaling_plan

    scope = fedintr_scaling_plan("quick")
    assert [p.name for p in scope.kept] == [FIG5_PART, f"{FIG5_LONG_PART} at E = 20 (FedAvg and FedIntR, 5 seeds)"]
    assert len(scope.left_out) == 2
    long = fedintr_scaling_plan("paper")["fig5"]
    quick_long = {(rid.E, rid.method) for rid in long if rid.E > FEDINTR_DEFAULT_E["paper"]}
    assert quick_long == {(e, m) for e in (20, 40) for m in FEDINTR_METHODS}  # quick plans FedAvg and FedIntR only
    why = scaling_left_out(scope)

    def hours(e: int) -> float:
        return sum(estimate_s(preset("fedintr", "quick").replace(
            strategy=FEDINTR_METHODS[m], strategy_kw={} if m == "FedAvg" else {"mu": 10.0}, local_epochs=e, seed=s))
            for m in ("FedAvg", "FedIntR") for s in range(5)) / 3600

    assert hours(20) < MAX_PART_S / 3600 < hours(40)
    assert f"need about {hours(40):.2f} single-thread worker-hours" in why["fig5 E > default"]
    assert why["fig5 E > default"].startswith(f"{FIG5_LONG_PART} at E = 40 (FedAvg and FedIntR, 5 seeds): ")
    assert "800 and 1,000 rounds, 8 method settings, 5 seeds" in why["table4"]
    assert all(scaling_left_out(fedintr_scaling_plan(scale)) == {} for scale in ("smoke", "paper"))


def test_quick_runs_are_the_strategies_scripts_runs():
    """scripts/strategies_quick.py and notebook 05 share their quick records (the same config keys)."""
    spec = importlib.util.spec_from_file_location("sq", Path(__file__).resolve().parent.parent / "scripts" /
                                                  "strategies_quick.py")
    sq = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sq)
    keys = {c.key() for c in plan("05_fedintr_benchmarks", "quick")["table1"].values()}
    left_out = FEDINTR_QUICK_LEFT_OUT["quick"]
    for name, (strategy, kw, _) in sq.METHODS.items():
        if strategy != "scaffold" and name.split(" (")[0] not in left_out:
            assert preset("fedintr", "quick", strategy=strategy, strategy_kw=kw).key() in keys, name


@pytest.mark.parametrize("scale", ["smoke", "quick"])
def test_small_scales_hold_the_papers_best_mu_and_seeds_for_the_key_comparison(scale):
    grid = mu_grid(scale)
    assert all(FEDINTR_BEST_MU["fmnist"][m] in grid[m] for m in FEDINTR_BEST_MU["fmnist"])
    names = plan("05_fedintr_benchmarks", scale, seeds=(0, 1, 2))["table1"]
    seeds = {}
    for rid in names:
        seeds.setdefault((rid.method, rid.mu), set()).add(rid.seed)
    kept = [(m, FEDINTR_BEST_MU["fmnist"].get(m)) for m in FEDINTR_METHODS if m not in FEDINTR_QUICK_LEFT_OUT[scale]]
    assert set(seeds) == {(m, None if mu is None else float(mu)) for m, mu in kept}
    assert all(s == {0, 1, 2} for s in seeds.values())  # every comparison: 3 seeds per method


def test_run_ids_name_their_settings():
    rid = FedIntRRunId("FedIntR", 2, beta=0.1, mu=10)
    assert str(rid) == "β=0.1 | FedIntR | μ=10 | seed=2" and rid.settings() == {"β": 0.1, "μ": 10.0}
    assert str(FedIntRRunId("FedAvg", 0, N=50)) == "N=50 | FedAvg | seed=0" and rid.label == "FedIntR (μ=10)"
    assert FedIntRRunId("FedIntR", 2, beta=0.1, mu=10.0) == rid  # μ is a float field: 10 and 10.0 are one id


def test_the_paper_campaign_plans_every_dataset_column_of_the_papers():
    from fedlib.companion.campaign import collect
    from fedlib.companion.papers import PAPER_DATASETS

    items = collect("paper", "cuda", only=["03", "05"])
    got = {(u[0], it.cfg.dataset) for it in items for u in it.uses}
    want = {(nb, d) for nb in ("03_fedcka_heterogeneity", "05_fedintr_benchmarks") for d in PAPER_DATASETS[nb]}
    assert want <= got
    table3 = {it.cfg.dataset for it in items for u in it.uses if u[1] == "table3"}
    assert table3 == {"cifar10", "cifar100"}  # Table III's columns only


def test_paper_scale_off_cifar_leaves_table_iii_out_and_its_claim_says_why(tmp_path):
    """Table III has CIFAR-10 and CIFAR-100 columns only: at paper scale on Fashion-MNIST the plan has no table3 and
    the notebook's claims render from no records at all (every run pending), Table III's row naming why."""
    from fedlib.companion.grid import fetch_runs
    from fedlib.companion.papers import notebook
    from fedlib.companion.papers.fedintr.plans import benchmarks_left_out
    from fedlib.companion.results import Store

    assert "table3" not in plan("05_fedintr_benchmarks", "paper", dataset="fmnist", seeds=(0,))
    assert "table3" in plan("05_fedintr_benchmarks", "paper", dataset="cifar100", seeds=(0,))
    assert "table3" in plan("05_fedintr_benchmarks", "quick", dataset="fmnist", seeds=(0,))
    assert "CIFAR-10 and CIFAR-100" in benchmarks_left_out("paper", "svhn")["table3"]
    assert benchmarks_left_out("quick", "fmnist") == FEDINTR_QUICK_LEFT_OUT["quick"]
    nb = notebook("05_fedintr_benchmarks")
    runs = nb.plan("paper", dataset="fmnist", seeds=(0,))
    store = Store(tmp_path)
    records = {a: fetch_runs(rs, store=store, train=False, progress=False) for a, rs in runs.items()}
    verdicts = nb.claims(runs, records, scale="paper", dataset="fmnist", seeds=(0,), store=store)
    by = {v.claim: v for v in verdicts}
    t3 = by["FedIntR's gain over FedAvg grows as β falls"]
    assert t3.verdict == "not testable at this scale" and "CIFAR-10 and CIFAR-100 only" in t3.why
