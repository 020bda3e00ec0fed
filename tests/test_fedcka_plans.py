"""FedCKA notebooks' plans, grid tables, cost timing and pending rendering."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fedlib.config import Config
from fedlib.companion.timing import cached_costs, repeat_times, round_costs, synthetic_like
from fedlib.companion.grid import cell, runs_frame, seed_summary
from fedlib.companion.report import compare
from fedlib.companion.papers import plan
from fedlib.companion.common import FedCKARunId, RunId
from fedlib.companion.budget import MAX_PART_S, Part, estimate_s, fit
from fedlib.companion.papers.fedcka.preset import ALPHA_ROUNDS, EPOCH_ROUNDS, TABLE2_ROUNDS
from fedlib.companion.papers.fedcka.plans import (
    PAPER_T2_MU, FEDCKA_MU_GRID, TIMING_PART, cost_setups, fedcka_ablations_plan,
    fedcka_heterogeneity_plan, fedcka_similarity_plan, keeps_artifacts, table2_part)
from fedlib.companion.report import check_params
from fedlib.companion.papers import preset
from fedlib.companion.results import Pending, Record, Store, fetch
from fedlib.companion.similarity import run_similarity


def _keys(p):
    return {c.key() for runs in p.values() for c in runs.values()}


def test_paper_plans_are_the_papers_grids():
    p3 = plan("03_fedcka_heterogeneity", "paper")
    # 4 alphas x (FedAvg + 4 FedProx + SCAFFOLD + 4 MOON + 3 FedCKA) x 5 seeds
    assert len(p3["table2"]) == 4 * 13 * 5 == len({c.key() for c in p3["table2"].values()})
    assert {c.partition_kw["beta"] for c in p3["table2"].values()} == {5.0, 1.0, 0.5, 0.1}
    assert {c.local_epochs for c in p3["epochs"].values()} == {1, 2, 5, 10, 20}
    assert all(c.rounds == 100 and c.lr == 0.01 and c.batch_size == 128 for c in p3["table2"].values())
    p4 = plan("04_fedcka_ablations", "paper")
    assert sorted({c.strategy_kw.get("M", 2) for c in p4["M"].values()}) == list(range(1, 8))
    sims = {c.strategy_kw.get("sim", "linear_cka") for c in p4["metrics"].values() if c.strategy == "fedcka"}
    assert {"frobenius", "cosine", "rbf_cka", "linear_cka", "frobenius_literal", "cosine_unnormalized",
            "frobenius_mean"} == sims


@pytest.mark.parametrize("scale", ["smoke", "quick", "paper"])
def test_runs_shared_between_notebooks_are_one_config(scale):
    """Notebook 04's α = 5 runs are notebook 03's: Table 2's α = 5 column (at quick, where Table 2 runs longer for
    MOON, the local-epoch sweep's runs at the preset's E instead), trained once and keeping their models once."""
    p3, p4 = plan("03_fedcka_heterogeneity", scale), plan("04_fedcka_ablations", scale)
    rounds = ALPHA_ROUNDS[scale].get(5.0, preset("fedcka", scale).rounds)
    at5 = [c.replace(rounds=rounds) for c in p3["table2"].values() if c.partition_kw["beta"] == 5.0]
    fedavg5 = p3["table2"][FedCKARunId("FedAvg", 0, alpha=5)].replace(rounds=rounds)
    cka5 = p3["table2"][FedCKARunId("FedCKA (μ=3)", 0, alpha=5)].replace(rounds=rounds)
    assert {fedavg5.key(), cka5.key()} <= _keys(p4)
    seeds = {c.seed for c in p3["table2"].values()}
    assert {c.key() for c in p4["variance"].values()} == {c.key() for c in at5 if c.seed in seeds and (
        c.strategy == "fedavg" or c.strategy_kw == {"mu": 3.0})}
    assert all(keeps_artifacts(c) for c in p4["variance"].values())
    # nothing else keeps models: FedAvg and FedCKA at α = 5 and its rounds, every seed, once
    keep = {c.key() for rs in (*p3.values(), *p4.values()) for c in rs.values() if keeps_artifacts(c)}
    assert keep == {c.key() for c in p4["variance"].values()} and len(keep) == 2 * len(seeds)
    if scale == "quick":
        assert _keys({"epochs": p3["epochs"]}) >= keep and not any(keeps_artifacts(c) for c in p3["table2"].values())


@pytest.mark.parametrize("scale", ["smoke", "quick", "paper"])
def test_the_campaign_keeps_the_models_of_every_run_a_similarity_notebook_reads(scale):
    """Notebook 02 (IID FedAvg) and notebook 04's variance runs read their clients' models: the campaign's workers
    keep them (keeps_models), so that rendering with train=False finds them instead of leaving the claims pending."""
    from fedlib.companion.papers.fedcka.plans import keeps_models
    p2, p4 = plan("02_fedcka_layer_similarity", scale), plan("04_fedcka_ablations", scale)
    assert all(keeps_models(c) for c in [*p2["simple_cnn"].values(), *p4["variance"].values()])
    assert not any(keeps_models(c) for c in p4["M"].values() if c.strategy_kw.get("M", 2) != 2)


def test_quick_runs_take_their_alphas_rounds_and_the_other_scales_the_presets():
    """Every quick run of notebooks 03 and 04 runs the rounds of its α (ALPHA_ROUNDS; the
    local-epoch sweep and notebook 04 are at α = 5; the sweep's E below the preset's run
    EPOCH_ROUNDS), Table 2's the rounds of its column (TABLE2_ROUNDS: longer where MOON needs them),
    every method of a column the same; paper and smoke keep the preset's rounds whatever the α."""
    QUICK_ROUNDS, QUICK_EPOCH_ROUNDS = ALPHA_ROUNDS["quick"], EPOCH_ROUNDS["quick"]
    TABLE2 = TABLE2_ROUNDS["quick"]
    for nb in ("03_fedcka_heterogeneity", "04_fedcka_ablations"):
        for art, rs in plan(nb, "quick").items():
            rounds = TABLE2 if art == "table2" else QUICK_ROUNDS
            assert rs and all(c.rounds == (QUICK_EPOCH_ROUNDS[c.local_epochs] if art == "epochs" and c.local_epochs < 5
                                           else rounds[c.partition_kw["beta"]]) for c in rs.values()), (nb, art)
        for scale in ("paper", "smoke"):
            assert {c.rounds for rs in plan(nb, scale).values() for c in rs.values()} == {preset("fedcka", scale).rounds}
    alphas = {c.partition_kw["beta"] for c in plan("03_fedcka_heterogeneity", "quick")["table2"].values()}
    assert alphas == set(QUICK_ROUNDS) == set(TABLE2) and QUICK_ROUNDS[5.0] < QUICK_ROUNDS[0.1]
    assert all(TABLE2[a] >= QUICK_ROUNDS[a] for a in alphas)  # Table 2 never shortens a column
    assert TABLE2[5.0] > QUICK_ROUNDS[5.0] and TABLE2[0.5] > QUICK_ROUNDS[0.5]  # MOON's plateau


@pytest.mark.parametrize("notebook", ["02_fedcka_layer_similarity", "03_fedcka_heterogeneity",
                                      "04_fedcka_ablations"])
def test_quick_plans_have_five_seeds_per_method_and_no_part_over_the_cap(notebook):
    scope = plan(notebook, "quick")
    assert scope.kept and all(sum(estimate_s(c) for rs in p.runs.values() for c in rs.values()) <= MAX_PART_S
                              for p in scope.kept)
    runs = [c for rs in scope.values() for c in rs.values()]
    by_setting: dict[str, set[int]] = {}
    for c in runs:
        by_setting.setdefault(c.replace(seed=0).key(), set()).add(c.seed)
    assert all(s == {0, 1, 2, 3, 4} for s in by_setting.values())  # every method of every comparison: 5 seeds
    assert all(c.batch_size == 64 and c.n_train == 15000 for c in runs)  # the quick preset's budget by local steps


def test_quick_plans_every_table2_part_and_says_why_the_rest_is_left_out():
    s3 = fedcka_heterogeneity_plan("quick")
    assert all(s3.has(table2_part(m, a)) for m in ("FedAvg", "MOON", "FedProx", "SCAFFOLD")
               for a in (5.0, 1.0, 0.5, 0.1))
    mus = {(c.strategy, c.strategy_kw.get("mu"), c.partition_kw["beta"]) for c in s3["table2"].values()}
    fixed = {("fedcka", 3.0), ("moon", 10.0), ("fedprox", 0.001), ("fedavg", None), ("scaffold", None)}
    assert {m[:2] for m in mus} == fixed | {("fedcka", 5.0), ("moon", 0.1), ("fedprox", 0.1)}
    # each method at every α at its fixed μ and at the μ §4.2 states for that α (PAPER_T2_MU), no other
    for a, stated in PAPER_T2_MU.items():
        assert {(st, mu) for st, mu, b in mus if b == a} == fixed | set(stated.items())
    assert {(c.strategy, c.strategy_kw.get("mu")) for c in fedcka_heterogeneity_plan("paper")["table2"].values()
            } >= {(st, mu) for stated in PAPER_T2_MU.values() for st, mu in stated.items()}  # the grid holds them
    assert not s3.left_out  # E = 1 and 2 run longer, to their plateau, and the E ≥ 5 keep α = 5's rounds
    ep = {(c.local_epochs, c.rounds) for c in s3["epochs"].values()}
    quick_e = EPOCH_ROUNDS["quick"]
    assert ep == {(5, 25), (10, 25), (20, 25), *quick_e.items()} and min(quick_e.values()) > 25
    assert {c.rounds for c in fedcka_heterogeneity_plan("paper")["epochs"].values()} == {100}  # the paper's
    s4 = fedcka_ablations_plan("quick")
    assert s4.has("FedAvg and FedCKA (M = 2) at α = 5") and s4.has(TIMING_PART) and s4.has("M = 4-7")
    (r50, why), = fedcka_similarity_plan("quick").left_out.items()  # over the 10-hour limit, named with its estimate
    assert "ResNet-50" in r50 and "worker-hours" in why and float(why.split("about ")[1].split()[0]) > 10
    for scale in ("smoke", "paper"):  # every part runs at smoke (the code) and at paper (the papers' grids)
        assert not fedcka_heterogeneity_plan(scale).left_out and not fedcka_ablations_plan(scale).left_out


def test_fit_keeps_every_part_but_those_over_the_cap_or_without_a_plateau_and_counts_shared_runs_once():
    a = preset("fedcka", "quick", strategy="fedavg")
    b = a.replace(strategy="fedcka", strategy_kw={"mu": 3.0})
    unit = estimate_s(a)
    big = a.replace(rounds=int(a.rounds * 1.01 * MAX_PART_S / unit))
    assert estimate_s(b) == pytest.approx(1.7 * unit, rel=0.05)
    parts = [Part("base", {"x": {"a": a}}), Part("same run again", {"y": {"a": a}}), Part("too big", {"x": {"c": big}}),
             Part("fits after", {"x": {"b": b}}), Part("never at quick", {"x": {"b2": b.replace(seed=1)}},
                                                       quick_why="no plateau")]
    s = fit(parts, "quick")
    assert [p.name for p in s.kept] == ["base", "same run again", "fits after"]
    assert s.seconds == pytest.approx(2.7 * unit, rel=0.05)  # "a" once
    assert "worker-hours" in s.left_out["too big"] and s.left_out["never at quick"] == "no plateau"
    assert s == {"x": {"a": a, "b": b}, "y": {"a": a}}  # the plan: the kept parts' runs by artifact
    assert len(fit(parts, "paper").kept) == 5  # paper / smoke: everything
    with pytest.raises(ValueError, match="distinct"):
        fit([parts[0], parts[0]], "quick")


def test_quick_grid_is_a_subset_of_the_papers():
    for m, mus in FEDCKA_MU_GRID["quick"].items():
        assert set(mus) <= set(FEDCKA_MU_GRID["paper"][m])
    assert _keys(plan("03_fedcka_heterogeneity", "quick")) != _keys(plan("03_fedcka_heterogeneity", "paper"))


def _rec(cfg: Config, acc: float) -> Record:
    return Record(key=cfg.key(), config=cfg.to_dict(), history=[{"round": 1, "test_acc": acc, "train_time_s": 1.0}],
                  provenance={}, partition_hash="", final_params_hash="")


def test_compare_marks_pending_and_missing_settings():
    df = compare({"a": 60.0, "b": 50.0, "c": 40.0}, {"a": 61.234, "b": None}, not_run="not run at this scale")
    assert df.loc["a", "diff"] == 1.23 and df.loc["b", "ours (%)"] == "pending"
    assert df.loc["c", "ours (%)"] == "not run at this scale"


def test_round_costs_times_every_config_against_the_first_in_interleaved_repeats(tmp_path):
    setup = cost_setups("smoke")["cnn"]
    configs = {k: v for k, v in setup["configs"].items() if k in ("FedAvg", "FedCKA")}
    df = round_costs(configs, synthetic_like("cifar10", 64), reps=5)
    assert list(df.index) == ["FedAvg", "FedCKA"] and df.loc["FedAvg", "× FedAvg"] == 1.0
    assert (df["s / round"] > 0).all()
    t = repeat_times(df)
    assert t.shape == (5, 2) and list(t.columns) == ["FedAvg", "FedCKA"]
    assert df.loc["FedCKA", "× FedAvg"] == pytest.approx((t["FedCKA"] / t["FedAvg"]).median(), rel=1e-3)
    assert all(s["reps"] >= 5 for sc in ("smoke", "quick", "paper") for s in cost_setups(sc).values())
    store = Store(tmp_path)
    assert cached_costs(configs, "cifar10", 64, reps=5, store=store, train=False) is None
    first = cached_costs(configs, "cifar10", 64, reps=5, store=store)
    again = cached_costs(configs, "cifar10", 64, reps=5, store=store, train=False)  # stored: not timed again
    pd.testing.assert_frame_equal(first[["s / round", "× FedAvg"]], again[["s / round", "× FedAvg"]])
    pd.testing.assert_frame_equal(repeat_times(first), repeat_times(again), atol=1e-6)
    with pytest.raises(ValueError, match="unknown dataset"):
        synthetic_like("mnist")


def test_train_false_on_an_empty_store_gives_pending_runs_and_similarity(tmp_path):
    cfg = plan("04_fedcka_ablations", "smoke")["variance"][RunId("FedAvg", 0)]
    store = Store(tmp_path)
    assert isinstance(fetch(cfg, store=store, train=False), Pending)
    assert isinstance(run_similarity(cfg, store=store, train=False), Pending)
    assert not (tmp_path / "records").exists()  # nothing was trained


@pytest.mark.parametrize("bad,words", [(dict(seeds=[]), "non-empty list"), (dict(seeds=[-1]), ">= 0"),
                                       (dict(train="yes"), "True (train missing runs)")])
def test_check_params_names_bad_seeds_and_train(bad, words):
    with pytest.raises(ValueError, match="seeds=|train="):
        check_params(**bad)
    with pytest.raises(ValueError) as err:
        check_params(**bad)
    assert words in str(err.value)


def test_a_diverging_run_is_a_diverged_result_and_is_not_retrained(tmp_path, monkeypatch):
    import fedlib.companion.grid as grid
    from fedlib.companion.papers import preset

    cfg = preset("fedcka", "smoke", dataset="fmnist", lr=1e6, rounds=2)
    store = Store(tmp_path)
    out = grid.fetch_runs({"hot": cfg}, store=store, progress=False)
    assert isinstance(out["hot"], grid.Diverged) and out["hot"].failed_round >= 1
    monkeypatch.setattr(grid, "fetch", lambda *a, **k: pytest.fail("a diverged run was trained again"))
    again = grid.fetch_runs({"hot": cfg}, store=store, train=False)
    df = runs_frame(again)
    assert bool(df.loc[0, "diverged"]) and np.isnan(df.loc[0, "acc"])
    s = seed_summary(df, ["method"]).iloc[0]
    assert cell(s["mean"], s["std"], s["n"], s["pending"], s["diverged"]) == "diverged"


def test_a_cell_with_some_diverged_seeds_says_how_many_and_shows_no_mean():
    df = pd.DataFrame({"method": ["MOON"] * 5, "seed": range(5), "acc": [np.nan, 80.0, 81.0, 82.0, 83.0],
                       "pending": [False] * 5, "diverged": [True] + [False] * 4, "s / round": [1.0] * 5})
    s = seed_summary(df, ["method"]).iloc[0]
    assert (s["n"], s["n diverged"]) == (4, 1) and np.isnan(s["mean"])
    assert cell(s["mean"], s["std"], s["n"], s["pending"], s["diverged"], s["n diverged"]) == "diverged (1 of 5 seeds)"
    every = seed_summary(df.assign(diverged=True, acc=np.nan), ["method"]).iloc[0]
    assert cell(every["mean"], every["std"], every["n"], every["pending"], every["diverged"],
                every["n diverged"]) == "diverged"
    waiting = seed_summary(df.assign(pending=[False, True, False, False, False]), ["method"]).iloc[0]
    assert cell(waiting["mean"], waiting["std"], waiting["n"], waiting["pending"], waiting["diverged"],
                waiting["n diverged"]) == "pending"


def test_similarity_is_kept_in_the_store_and_a_rerun_for_models_keeps_the_stored_record(tmp_path):
    cfg = plan("04_fedcka_ablations", "smoke")["variance"][RunId("FedAvg", 0)].replace(rounds=2, checkpoint_every=1)
    store = Store(tmp_path)
    first = fetch(cfg, store=store)  # a record without models
    text = store.record_path(first.key).read_text()
    sim = run_similarity(cfg, store=store, n_eval=64)  # trains again for the models, keeps the record
    assert store.record_path(first.key).read_text() == text
    assert store.artifact_path(first.key).exists()
    assert not store.checkpoint_path(first.key).exists()  # finished: no checkpoint left behind
    store.artifact_path(first.key).unlink()  # a fresh checkout: records and analyses, no models
    again = run_similarity(cfg, store=store, train=False, n_eval=64)
    assert not isinstance(again, Pending) and again.taps == sim.taps
    np.testing.assert_allclose(again.between, sim.between)
    assert isinstance(run_similarity(cfg, store=store, train=False, n_eval=32), Pending)  # another analysis
