"""FedCKA notebooks' verdicts: left-out parts, pending, diverged and at-chance runs, and cost claims on repeats;
the mean layer similarity of FedAvg beside FedCKA."""

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from fedlib.companion.papers.fedcka.claims import (FIG5_ROUNDS, compare_runs, cost_verdicts, fig5_verdicts, table2_verdicts,  # noqa: E402
                                    variance_verdicts)
from fedlib.companion.papers.fedcka.ablations import similarity_levels  # noqa: E402
from fedlib.config import Config  # noqa: E402
from fedlib.companion.papers.fedcka.plans import (TIMING_PART, fedcka_ablations_plan,  # noqa: E402
                                                  fedcka_heterogeneity_plan)
from fedlib.companion.results import Pending  # noqa: E402
from fedlib.companion.similarity import LayerSimilarity  # noqa: E402
from fedlib.companion.verdicts import VERDICTS

REPRODUCED, CONTRADICTED, INCONCLUSIVE, NOT_TESTABLE = VERDICTS


def _frame(accs, **flags):
    rows = [dict(name=f"{m} | seed={s}", method=m, mu=np.nan, alpha=5.0, seed=s, pending=flags.get("pending", False),
                 diverged=flags.get("diverged", False) and m == "MOON", acc=a, chance=10.0)
            for m, per_seed in accs.items() for s, a in enumerate(per_seed)]
    return pd.DataFrame(rows)


def _cmp(df, **kw):
    return compare_runs("FedCKA beats MOON", "T2", df, {"method": "FedCKA"}, {"method": "MOON"}, ("FedCKA", "MOON"),
                        missing="left out: no time", **kw)


def test_compare_runs_decides_over_seeds_and_names_why_it_cannot():
    good = {"FedCKA": [86.0, 86.4, 85.9], "MOON": [85.0, 85.3, 84.8]}
    assert _cmp(_frame(good)).verdict == REPRODUCED
    assert _cmp(_frame({"FedCKA": good["FedCKA"]})).why == "left out: no time"  # MOON not in the plan
    assert _cmp(_frame(good, pending=True)).verdict == "pending"
    some = _frame(good).assign(pending=lambda d: d["seed"] > 0)  # seed 0 of each finished, the others to train
    assert _cmp(some).verdict == "pending"
    spoilt = some.assign(diverged=lambda d: (d["method"] == "MOON") & (d["seed"] == 0))
    assert _cmp(spoilt).verdict == NOT_TESTABLE and "MOON | seed=0" in _cmp(spoilt).why  # whatever the rest read
    rising = some.assign(off=lambda d: np.where((d["method"] == "FedCKA") & (d["seed"] == 0), "rises +1.10", None))
    assert _cmp(rising).verdict == NOT_TESTABLE and "FedCKA | seed=0: rises +1.10" in _cmp(rising).why
    assert _cmp(_frame(good, diverged=True)).verdict == NOT_TESTABLE
    at_chance = _cmp(_frame({"FedCKA": good["FedCKA"], "MOON": [10.2, 11.0, 10.5]}))
    assert at_chance.verdict == NOT_TESTABLE and "chance" in at_chance.why


def test_table2_tests_the_sentence_with_the_tables_gap_as_its_size_at_the_papers_mu():
    df = _frame({"FedAvg": [85.0, 85.2, 84.9], "FedCKA": [86.0, 86.4, 85.9]})
    vs = {v.claim: v for v in table2_verdicts(df, fedcka_heterogeneity_plan("quick"))}
    up = vs["FedCKA beats FedAvg at α = 5"]
    assert up.verdict == REPRODUCED and up.paper_d == pytest.approx(67.86 - 64.37)
    assert up.size() == "smaller than the paper's" and up.finding == "FedCKA below the baselines"
    assert vs["FedCKA beats SCAFFOLD at α = 5"].verdict == NOT_TESTABLE  # no SCAFFOLD run in this frame
    # the text says SCAFFOLD improves on FedAvg; Table 2 has it 9.90 points below at α = 0.1: the sentence is the
    # claim, the table's gap its size
    scaffold = vs["SCAFFOLD beats FedAvg at α = 0.1"]
    assert scaffold.paper_d == pytest.approx(-9.90) and "-9.90" in scaffold.paper
    assert not any("trails" in c for c in vs)
    # two μ of FedCKA at α = 5: the verdict reads the paper's (5), not the better one
    two = pd.concat([df, _frame({"FedCKA": [90.0, 90.1, 90.2]}).assign(name=lambda d: d["name"] + " μ3")])
    two["mu"] = np.where(two["method"] == "FedCKA", np.where(two["acc"] > 89, 3.0, 5.0), np.nan)
    at5 = {v.claim: v for v in table2_verdicts(two, fedcka_heterogeneity_plan("quick"))}["FedCKA beats FedAvg at α = 5"]
    assert at5.means["FedCKA"] == pytest.approx(np.mean([86.0, 86.4, 85.9]))


def test_a_larger_margin_needs_a_margin_first():
    """Both margins negative: "performs better by a larger margin" is not reproduced by their difference."""
    rows = {"FedAvg": [85.0, 85.2, 84.9], "FedCKA": [84.5, 84.6, 84.2]}
    df = pd.concat([_frame(rows), _frame({"FedAvg": [80.0, 80.2, 79.9], "FedCKA": [70.0, 71.0, 70.5]})
                    .assign(alpha=0.1, name=lambda d: d["name"] + " a01")])
    v = {v.claim: v for v in table2_verdicts(df, fedcka_heterogeneity_plan("quick"))}[
        "FedCKA's margin over FedAvg is larger at α = 5 than at α = 0.1"]
    assert v.estimate > 0 and v.verdict == CONTRADICTED and "no margin over FedAvg at α = 5" in v.why


def _epoch_sweep(accs: dict[int, list[float]]) -> pd.DataFrame:
    return pd.DataFrame([dict(name=f"FedAvg | E={e} | seed={s}", method="FedAvg", E=e, mu=np.nan, seed=s,
                              pending=False, diverged=False, acc=a, chance=10.0)
                         for e, per in accs.items() for s, a in enumerate(per)])


def test_the_epoch_claims_compare_the_sweeps_first_and_last_steps_never_a_best_e_picked_from_the_runs():
    """'Increases from the fewest E': the next E against the fewest; 'decreases again at the largest E': the largest
    against the one below it, whichever E has the best mean (never E_max against itself)."""
    rising = _epoch_sweep({5: [88.0, 88.2, 88.1], 10: [88.6, 88.9, 88.7], 20: [89.0, 89.3, 89.15]})
    v = {x.claim.split(" (")[0]: x for x in fig5_verdicts({}, rising, 25, fedcka_heterogeneity_plan("quick"))}
    up, down = v["FedAvg's accuracy increases slightly as local epochs increase from the fewest"], \
        v["FedAvg's accuracy decreases again at the largest E"]
    assert set(up.n) == {"E = 10", "E = 5"} and up.verdict == REPRODUCED
    assert set(down.n) == {"E = 20", "E = 10"} and down.verdict == CONTRADICTED
    assert down.interval[0] > 0  # E = 20 sits above E = 10 in every seed: a real interval, not [0, 0]
    cka = v["FedCKA's accuracy decreases again at the largest E"]  # a method the sweep lacks: named, not decided
    assert cka.verdict == NOT_TESTABLE and "FedCKA was not run at every E of the sweep" in cka.why
    dip = _epoch_sweep({5: [88.6, 88.9, 88.7], 10: [88.0, 88.2, 88.1], 20: [89.0, 89.3, 89.15]})  # E = 20 best
    v = {x.claim.split(" (")[0]: x for x in fig5_verdicts({}, dip, 25, fedcka_heterogeneity_plan("quick"))}
    up = v["FedAvg's accuracy increases slightly as local epochs increase from the fewest"]
    assert set(up.n) == {"E = 10", "E = 5"} and up.verdict == CONTRADICTED  # not E = 20, the best, against E = 5
    with pytest.raises(AssertionError, match="same runs"):
        compare_runs("x", "y", rising, {"E": 5}, {"E": 5}, ("a", "b"), missing="")


def test_the_first_epoch_step_is_decided_at_the_plateau_and_in_the_same_rounds_where_it_runs_longer():
    """E = 1 and 2 run 300 and 150 rounds, to their plateau, the other E 25: at the end E = 1 is the higher, at
    round 25 (the paper's reading: the same rounds for every E) E = 2 is; each reading is its own row."""
    end = _epoch_sweep({1: [88.4, 88.5, 88.6], 2: [88.0, 88.1, 88.2], 5: [88.1] * 3, 10: [88.2] * 3, 20: [88.0] * 3})
    at25 = end.assign(acc=np.where(end["E"] == 1, end["acc"] - 5, np.where(end["E"] == 2, end["acc"] - 2, end["acc"])))
    v = {x.claim: x for x in fig5_verdicts({}, end, 25, fedcka_heterogeneity_plan("quick"),
                                           {1: 300, 2: 150, 5: 25, 10: 25, 20: 25}, at25)}
    up = "FedAvg's accuracy increases slightly as local epochs increase from the fewest"
    plateau, same = v[f"{up}, each run to its plateau (300 and 150 rounds)"], v[f"{up}, in the same 25 rounds (the " \
                                                                            f"paper's setup: the same rounds for every E)"]
    assert plateau.verdict == CONTRADICTED and set(plateau.n) == {"E = 2", "E = 1"}
    assert plateau.control and not same.control  # the paper's reading is the claim, ours a control
    assert same.verdict == REPRODUCED and set(same.n) == {"E = 2 at round 25", "E = 1 at round 25"}
    assert up in {x.claim for x in fig5_verdicts({}, end, 25, fedcka_heterogeneity_plan("quick"), {e: 25 for e in
                                                                                         (1, 2, 5, 10, 20)}, at25)}
    waiting = end.assign(pending=end["E"] < 5, acc=np.where(end["E"] < 5, np.nan, end["acc"]))  # E = 1, 2 to train
    v = {x.claim: x.verdict for x in fig5_verdicts({}, waiting, 25, fedcka_heterogeneity_plan("quick"),
                                                   {1: 300, 2: 150, 5: 25, 10: 25, 20: 25}, waiting)}
    assert v[f"{up}, each run to its plateau (300 and 150 rounds)"] == "pending"
    assert v["FedAvg's accuracy decreases again at the largest E (overfitting)"] == REPRODUCED  # on its own runs


def _crossing_curves(rounds: int) -> dict[int, dict[str, pd.Series]]:
    """FedCKA 1 point below FedAvg up to round 40, 1 point above after it (seed noise of 0.1)."""
    r = np.arange(1, rounds + 1)
    return {s: {"FedAvg": pd.Series(80.0 + 0.1 * s, index=r),
                "FedCKA": pd.Series(np.where(r <= 40, 79.0, 81.0) + 0.1 * s + 0.05 * (-1) ** s, index=r)}
            for s in range(5)}


def test_the_round_40_crossover_is_decided_only_on_the_papers_100_round_schedule():
    """Appl. Sci. Fig. 5's crossover is at round 40 of 100: runs of another schedule leave it not testable even when
    they are longer than 40 rounds (quick's Table 2 at α = 5), the paper's rounds decide it."""
    epochs = pd.DataFrame({"method": ["FedAvg"], "E": [5], "acc": [80.0], "pending": [False], "chance": [10.0]})
    scope = fedcka_heterogeneity_plan("quick")
    for rounds in (25, 45, 60):
        vs = fig5_verdicts(_crossing_curves(rounds), epochs, rounds, scope)[:2]
        assert [v.verdict for v in vs] == [NOT_TESTABLE] * 2 and all("decided at paper scale" in v.why for v in vs)
    vs = fig5_verdicts(_crossing_curves(FIG5_ROUNDS), epochs, FIG5_ROUNDS, scope)[:2]
    assert [v.claim for v in vs] == ["FedCKA trails FedAvg in the first 40 rounds", "FedCKA leads FedAvg in rounds after 40"]
    assert [v.verdict for v in vs] == [REPRODUCED] * 2


def _costs(times):
    return pd.DataFrame({"method": list(times), "repeats (s)": list(times.values())}).set_index("method")


def test_cost_claims_are_decided_on_interleaved_repeats():
    scope = fedcka_ablations_plan("quick")
    cnn = _costs({"FedAvg": [1.0] * 5, "SCAFFOLD": [1.1] * 5, "FedProx": [1.05] * 5, "MOON": [2.0] * 5,
                  "FedCKA": [2.2, 2.1, 1.9, 2.3, 2.4]})  # the third repeat: FedCKA below MOON
    metrics = _costs({"kernel CKA": [3.0, 3.2, 2.9, 3.1, 3.0], "linear CKA": [2.5, 2.4, 2.6, 2.5, 2.5]})
    vs = {v.claim: v for v in cost_verdicts({"cnn": cnn, "metrics": metrics, "r50": None}, scope, "quick")}
    if not scope.has(TIMING_PART):  # the preset's runs left no room for the timing: said, with why
        assert all(v.verdict == NOT_TESTABLE and "minutes" in v.why for v in vs.values())
        return
    assert vs["kernel CKA costs more per round than linear CKA"].verdict == REPRODUCED
    largest = vs["simple CNN: FedCKA extends training by the largest amount"]
    assert largest.verdict == INCONCLUSIVE and largest.n == {"repeats": 5}  # the spread crosses 1
    assert vs["simple CNN: every regularizer costs more per round than FedAvg"].verdict == REPRODUCED
    assert vs["ResNet-50: every regularizer costs more per round than FedAvg"].verdict == "pending"
    smoke = {v.claim: v for v in cost_verdicts({"cnn": cnn, "metrics": metrics}, fedcka_ablations_plan("smoke"), "smoke")}
    assert smoke["ResNet-50: every regularizer costs more per round than FedAvg"].verdict == NOT_TESTABLE


def _sim(var3: float) -> LayerSimilarity:
    taps = ("conv1", "conv2", "fc1", "fc2")
    between = np.ones((4, 3, 3))
    for layer, spread in enumerate((0.01, 0.02, var3, 0.03)):
        between[layer][np.triu_indices(3, 1)] = [1 - spread, 1, 1 + spread]
        between[layer] = np.triu(between[layer]) + np.triu(between[layer], 1).T
    return LayerSimilarity(taps, (0, 1, 2), np.ones((3, 4)), between)


def test_third_layer_variance_is_decided_over_seeds():
    (v,) = variance_verdicts({"FedAvg": {s: _sim(0.1 + 0.01 * s) for s in range(3)}}, fedcka_ablations_plan("quick"))
    assert v.verdict == REPRODUCED and v.means["var(layer 3) / max var(other layers)"] > 1
    (w,) = variance_verdicts({"FedAvg": {s: _sim(0.005) for s in range(3)}}, fedcka_ablations_plan("quick"))
    assert w.verdict == CONTRADICTED


def _levels(seed: int, level: float) -> LayerSimilarity:
    """Three clients; per layer, between-client CKA ``level − 0.01 · layer`` (± a seeded spread) and CKA to the
    global model ``level``."""
    rng = np.random.default_rng(seed)
    taps = ("conv1", "conv2", "fc1")
    between = np.ones((3, 3, 3))
    for i in range(3):
        off = level - 0.01 * i + rng.uniform(-0.005, 0.005, 3)
        between[i][np.triu_indices(3, 1)] = off
        between[i] = np.triu(between[i]) + np.triu(between[i], 1).T
    return LayerSimilarity(taps, (0, 1, 2), np.full((3, 3), level) + rng.uniform(-0.01, 0.01, (3, 3)), between)


def test_similarity_levels_average_the_stored_seeds_and_draw_fedavg_beside_fedcka():
    cfg = Config()
    sims = {"FedAvg": {0: _levels(0, 0.99), 1: _levels(1, 0.98), 2: Pending(cfg.key(), cfg.to_dict())},
            "FedCKA (μ=3, M=2)": {0: _levels(2, 0.7), 1: _levels(3, 0.6)}}
    table, fig = similarity_levels(sims, "fmnist")
    assert set(table.columns) >= {"comparison", "layer", "run", "mean CKA", "std over seeds", "seeds",
                                  "pending seeds", "regularized by ℓ_cka"}
    assert len(table) == 2 * 3 * 2  # comparisons × layers × runs: tidy, one number per row

    def row(comparison, layer, run):
        return table[(table.comparison == comparison) & (table.layer == layer) & (table.run == run)].iloc[0]

    done = [sims["FedCKA (μ=3, M=2)"][s] for s in (0, 1)]
    between = row("between clients", "conv2", "FedCKA (μ=3, M=2)")
    assert between["mean CKA"] == pytest.approx(np.mean([s.pair_mean()[1] for s in done]), rel=1e-5)
    assert between["std over seeds"] == pytest.approx(np.std([s.pair_mean()[1] for s in done], ddof=1), rel=1e-4)
    to_global = row("client to global", "fc1", "FedCKA (μ=3, M=2)")
    assert to_global["mean CKA"] == pytest.approx(np.mean([s.to_global[:, 2].mean() for s in done]), rel=1e-5)
    fedavg = row("client to global", "conv1", "FedAvg")
    assert (fedavg["seeds"], fedavg["pending seeds"], fedavg["regularized by ℓ_cka"]) == (2, 1, True)
    assert not row("between clients", "fc1", "FedAvg")["regularized by ℓ_cka"]
    assert len(fig.axes) == 2
    for ax in fig.axes:
        assert [t.get_text() for t in ax.get_xticklabels()] == ["conv1", "conv2", "fc1"]
        assert len(ax.patches) == 2  # conv1 and conv2 shaded
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "regularized by ℓ_cka" in legend and any(t.startswith("FedAvg (n=2 of 3 planned") for t in legend)
        series = [ln for ln in ax.get_lines() if ln.get_marker() != "_"]  # not the error bars' caps
        assert len(series) == 2 and len({(ln.get_color(), ln.get_marker()) for ln in series}) == 2
    plt.close(fig)
    pending, none = similarity_levels({"FedAvg": {0: Pending(cfg.key(), cfg.to_dict())}}, "fmnist")
    assert none is None and pending.iloc[0, 0] == "pending"


def test_premise_verdict_compares_the_regularized_layers_similarity_with_fedavgs_per_seed():
    from types import SimpleNamespace

    from fedlib.companion.papers.fedcka.claims import premise_verdicts

    def sim(level):
        return SimpleNamespace(frame=lambda: pd.DataFrame(
            {"CKA(client, client) mean": [level, level, 0.9], "CKA(client, global) mean": [level, level, 0.95]},
            index=["conv1", "conv2", "fc1"]))

    lower = {"FedAvg": {s: sim(0.99 + 0.001 * s) for s in range(3)},
             "FedCKA (μ=3, M=2)": {s: sim(0.7 + 0.01 * s) for s in range(3)}}
    assert {v.verdict for v in premise_verdicts(lower)} == {"contradicted"}
    same = {"FedAvg": lower["FedAvg"], "FedCKA (μ=3, M=2)": {s: sim(0.995 + 0.001 * s) for s in range(3)}}
    assert {v.verdict for v in premise_verdicts(same)} == {"reproduced"}
    waiting = {**lower, "FedAvg": {0: Pending("k", {})}}
    assert {v.verdict for v in premise_verdicts(waiting)} == {"pending"}
