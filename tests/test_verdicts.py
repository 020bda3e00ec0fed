"""The one verdict function: its four outcomes, the t intervals against scipy's own tests, and its guards."""

import math

import pytest
from scipy import stats

from fedlib.verdicts import VERDICTS, decide, decide_ratio, not_testable, pending

REPRODUCED, CONTRADICTED, INCONCLUSIVE, NOT_TESTABLE = VERDICTS


def test_greater_reproduced_contradicted_inconclusive():
    a = {0: 86.0, 1: 86.4, 2: 85.8}
    assert decide("A beats B", "T1", a, {0: 84.0, 1: 84.5, 2: 83.9}).verdict == REPRODUCED
    assert decide("A beats B", "T1", a, {0: 88.0, 1: 88.3, 2: 87.9}).verdict == CONTRADICTED
    assert decide("A beats B", "T1", a, {0: 86.9, 1: 85.0, 2: 86.0}).verdict == INCONCLUSIVE


def test_margin_moves_the_verdict():
    a, b = {0: 86.0, 1: 86.4, 2: 85.8}, {0: 84.0, 1: 84.5, 2: 83.9}  # d ≈ +1.93, tight
    assert decide("by more than 1", "T", a, b, margin=1.0).verdict == REPRODUCED
    assert decide("by more than 3", "T", a, b, margin=3.0).verdict == CONTRADICTED
    assert decide("within 0.5", "T", a, b, kind="within", margin=0.5).verdict == CONTRADICTED
    assert decide("within 3", "T", a, b, kind="within", margin=3.0).verdict == REPRODUCED
    assert decide("not worse by 0.3", "T", b, a, kind="at_least", margin=0.3).verdict == CONTRADICTED
    assert decide("B below A", "T", b, a, kind="less").verdict == REPRODUCED


def test_paired_interval_matches_scipy():
    a, b = {0: 80.0, 1: 83.0, 2: 78.0, 3: 81.0}, {0: 79.0, 1: 81.5, 2: 77.5, 3: 79.0}
    v = decide("A beats B", "T", a, b)
    assert v.method.startswith("paired t")
    d = [a[k] - b[k] for k in a]
    lo, hi = stats.ttest_1samp(d, 0).confidence_interval(0.95)
    assert v.interval == pytest.approx((lo, hi))
    assert v.estimate == pytest.approx(sum(d) / 4)


def test_welch_interval_matches_scipy():
    a, b = [80.0, 83.0, 78.0], [79.0, 81.5, 77.5, 70.0]
    v = decide("A beats B", "T", a, b)
    assert v.method.startswith("Welch t")
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert v.interval == pytest.approx((ci.low, ci.high))


def test_unmatched_seeds_are_not_paired():
    v = decide("A beats B", "T", {0: 1.0, 1: 2.0, 2: 3.0}, {3: 0.0, 4: 0.5, 5: 0.1})
    assert v.method.startswith("Welch")


def test_too_few_seeds_is_inconclusive_whatever_the_gap():
    v = decide("A beats B", "T", {0: 90.0}, {0: 50.0})
    assert v.verdict == INCONCLUSIVE and "fewer than 3 seeds" in v.why


def test_runs_at_chance_are_not_testable():
    v = decide("both CKAs beat cosine", "FedCKA Table 3", [85.0, 84.0, 86.0], [10.5, 11.0, 10.0], chance=10.0)
    assert v.verdict == NOT_TESTABLE and "chance" in v.why
    # the underlying accuracies decide when a and b are differences
    gaps = decide("gap shrinks", "T", [1.5, 1.2, 1.7], [0.5, 0.4, 0.3], chance=10.0, runs=[11.9, 80.0])
    assert gaps.verdict == NOT_TESTABLE
    ok = decide("gap shrinks", "T", [1.5, 1.2, 1.7], [0.5, 0.4, 0.3], chance=10.0, runs=[12.1, 80.0])
    assert ok.verdict == REPRODUCED


def test_diverged_and_non_finite_are_not_testable():
    assert decide("x", "T", [1, 2, 3], [0, 0, 0], diverged=["Frobenius"]).verdict == NOT_TESTABLE
    assert decide("x", "T", [1, 2, math.nan], [0, 0, 0]).verdict == NOT_TESTABLE


def test_one_sided_fidelity_against_a_number():
    v = decide("within ±0.5 of the paper", "FedIntR Table I", [89.0 - 88.9, 89.1 - 88.9, 88.95 - 88.9],
               kind="within", margin=0.5)
    assert v.verdict == REPRODUCED and v.method.startswith("t ")


def test_ratio_verdicts():
    assert decide_ratio("costs more", "T4", [1.6, 1.7, 1.65, 1.62, 1.7], threshold=1.0).verdict == REPRODUCED
    assert decide_ratio("costs more", "T4", [0.9, 0.95, 0.97, 0.92, 0.96], threshold=1.0).verdict == CONTRADICTED
    assert decide_ratio("costs more", "T4", [0.9, 1.2, 1.1, 1.05, 1.3], threshold=1.0).verdict == INCONCLUSIVE
    assert decide_ratio("costs more", "T4", [1.6, 1.7], threshold=1.0).verdict == INCONCLUSIVE
    assert decide_ratio("cheaper", "T4", [0.5] * 5, kind="less", threshold=1.0).verdict == REPRODUCED


def test_line_and_dict_show_n_means_interval_margin():
    v = decide("A beats B", "FedIntR Table I", {0: 86.0, 1: 86.4, 2: 85.8}, {0: 84.0, 1: 84.5, 2: 83.9},
               names=("FedIntR", "FedAvg"), paper="+0.25")
    line = v.line()
    for s in ("[reproduced]", "FedIntR Table I", "FedIntR 86.07 (n=3)", "FedAvg 84.13 (n=3)", "d = +1.93",
              "d > 0", "paper: +0.25"):
        assert s in line, (s, line)
    d = v.to_dict()
    assert d["n"] == {"FedIntR": 3, "FedAvg": 3} and d["margin"] == 0 and len(d["interval"]) == 2


def test_not_testable_and_pending():
    assert not_testable("T IV ordering", "FedIntR Table IV", "1,000 rounds").verdict == NOT_TESTABLE
    assert pending("x", "T").verdict == "pending"


def test_bad_arguments_name_the_fix():
    with pytest.raises(ValueError, match="valid kinds"):
        decide("x", "T", [1, 2, 3], kind="bigger")
    with pytest.raises(ValueError, match="margin"):
        decide("x", "T", [1, 2, 3], margin=math.nan)
