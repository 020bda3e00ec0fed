"""FedCKA notebooks' verdicts: left-out parts, pending, diverged and at-chance runs, and cost claims on repeats."""

import numpy as np
import pandas as pd

from fedlib.artifacts.fedcka import compare_runs, cost_verdicts, table2_verdicts, variance_verdicts
from fedlib.plans.fedcka import TIMING_PART, ablations_scope, heterogeneity_scope
from fedlib.similarity import LayerSimilarity
from fedlib.verdicts import VERDICTS

REPRODUCED, CONTRADICTED, INCONCLUSIVE, NOT_TESTABLE = VERDICTS


def _frame(accs, **flags):
    rows = [dict(name=f"{m} | seed={s}", method=m, mu=np.nan, alpha=5.0, seed=s, pending=flags.get("pending", False),
                 diverged=flags.get("diverged", False) and m == "MOON", acc=a)
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
    assert _cmp(_frame(good, diverged=True)).verdict == NOT_TESTABLE
    at_chance = _cmp(_frame({"FedCKA": good["FedCKA"], "MOON": [10.2, 11.0, 10.5]}))
    assert at_chance.verdict == NOT_TESTABLE and "chance" in at_chance.why


def test_table2_claims_left_out_at_quick_are_not_testable_with_the_budget_reason():
    df = _frame({"FedAvg": [85.0, 85.2, 84.9], "FedCKA": [86.0, 86.4, 85.9]})
    vs = {v.claim: v for v in table2_verdicts(df, heterogeneity_scope("quick"))}
    assert vs["FedCKA beats FedAvg at α = 5"].verdict == REPRODUCED
    assert vs["FedCKA beats SCAFFOLD at α = 5"].verdict == NOT_TESTABLE
    assert "minutes" in vs["FedCKA beats SCAFFOLD at α = 5"].why
    assert "-9.90" in vs["SCAFFOLD beats FedAvg at α = 0.1"].paper  # the paper's own table against its text


def _costs(times):
    return pd.DataFrame({"method": list(times), "repeats (s)": list(times.values())}).set_index("method")


def test_cost_claims_are_decided_on_interleaved_repeats():
    scope = ablations_scope("quick")
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
    smoke = {v.claim: v for v in cost_verdicts({"cnn": cnn, "metrics": metrics}, ablations_scope("smoke"), "smoke")}
    assert smoke["ResNet-50: every regularizer costs more per round than FedAvg"].verdict == NOT_TESTABLE


def _sim(var3: float) -> LayerSimilarity:
    taps = ("conv1", "conv2", "fc1", "fc2")
    between = np.ones((4, 3, 3))
    for layer, spread in enumerate((0.01, 0.02, var3, 0.03)):
        between[layer][np.triu_indices(3, 1)] = [1 - spread, 1, 1 + spread]
        between[layer] = np.triu(between[layer]) + np.triu(between[layer], 1).T
    return LayerSimilarity(taps, (0, 1, 2), np.ones((3, 4)), between)


def test_third_layer_variance_is_decided_over_seeds():
    (v,) = variance_verdicts({"FedAvg": {s: _sim(0.1 + 0.01 * s) for s in range(3)}}, ablations_scope("quick"))
    assert v.verdict == REPRODUCED and v.means["var(layer 3) / max var(other layers)"] > 1
    (w,) = variance_verdicts({"FedAvg": {s: _sim(0.005) for s in range(3)}}, ablations_scope("quick"))
    assert w.verdict == CONTRADICTED
