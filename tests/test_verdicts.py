"""The one verdict function: its four outcomes, the t intervals against scipy's own tests, and its guards."""

import math

import numpy as np
import pytest
from scipy import stats

import fedlib.companion.papers  # noqa: F401  (registers the papers' presets, which name our models)
from fedlib.companion.verdicts import VERDICTS, decide, decide_ratio, not_testable, pending

REPRODUCED, CONTRADICTED, INCONCLUSIVE, NOT_TESTABLE = VERDICTS


def test_greater_reproduced_contradicted_inconclusive():
    a = {0: 86.0, 1: 86.4, 2: 85.8}
    assert decide("A beats B", "T1", a, {0: 84.0, 1: 84.5, 2: 83.9}).verdict == REPRODUCED
    assert decide("A beats B", "T1", a, {0: 88.0, 1: 88.3, 2: 87.9}).verdict == CONTRADICTED
    assert decide("A beats B", "T1", a, {0: 86.9, 1: 85.0, 2: 86.0}).verdict == INCONCLUSIVE


def test_one_margin_policy_decides_every_region():
    a, b = {0: 86.0, 1: 86.4, 2: 85.8}, {0: 84.0, 1: 84.5, 2: 83.9}  # d ≈ +1.93, tight
    assert decide("A beats B", "T", a, b).verdict == REPRODUCED
    assert decide("A comparable to B", "T", a, b, kind="within").verdict == CONTRADICTED  # beyond ±1 point
    assert decide("B at least as good as A", "T", b, a, kind="at_least").verdict == CONTRADICTED
    assert decide("B below A", "T", b, a, kind="less").verdict == REPRODUCED
    close = {0: 85.9, 1: 86.5, 2: 85.7}
    assert decide("A comparable to B", "T", a, close, kind="within").verdict == REPRODUCED


def test_a_margin_the_policy_does_not_give_is_an_error_naming_the_policy():
    a, b = [86.0, 86.4, 85.8], [84.0, 84.5, 83.9]
    with pytest.raises(ValueError, match="margin policy gives 0"):
        decide("by more than 1", "T", a, b, margin=1.0)
    with pytest.raises(ValueError, match="margin policy gives 1"):
        decide("within 0.5", "T", a, b, kind="within", margin=0.5)
    with pytest.raises(ValueError, match="valid units"):
        decide("x", "T", a, b, unit="percent")
    assert decide("within", "T", a, b, kind="within", margin=1.0).margin == 1.0  # the policy's own value is fine


def test_every_region_prints_the_rule_it_came_from():
    a, b = {0: 86.0, 1: 86.4, 2: 85.8}, {0: 84.0, 1: 84.5, 2: 83.9}
    regions = {k: decide("A vs B", "T", a, b, kind=k).region for k in ("greater", "at_least", "within", "less")}
    assert regions == {"greater": "d > 0 (direction: against 0)", "less": "d < 0 (direction: against 0)",
                       "at_least": "d >= -1 (comparable: ±1 point, the margin policy)",
                       "within": "|d| <= 1 (comparable: ±1 point, the margin policy)"}
    assert decide("r", "T", [1.2, 1.3, 1.25], unit="ratio").region == "d > 1 (direction: against 1)"
    assert decide("c", "T", [0.9, 0.91, 0.9], [0.9, 0.9, 0.905], kind="within", unit="CKA").region.startswith(
        "|d| <= 0.01")


def test_the_size_reading_places_the_papers_effect_against_our_interval():
    a, b = {0: 86.0, 1: 86.4, 2: 85.8}, {0: 84.0, 1: 84.5, 2: 83.9}  # d ≈ +1.93 [+1.79, +2.08]
    assert decide("A beats B", "T", a, b, paper_d=2.0).size() == "consistent with the paper's size"
    assert decide("A beats B", "T", a, b, paper_d=25.6).size() == "smaller than the paper's"
    assert decide("A beats B", "T", a, b, paper_d=0.5).size() == "larger than the paper's"
    assert decide("B trails A", "T", b, a, kind="less", paper_d=-25.6).size() == "smaller than the paper's"
    assert decide("A beats B", "T", a, b).size() == ""  # no effect of the paper's
    wide = decide("A beats B", "T", [86.0, 84.4, 85.8, 85, 84], [84.0, 84.5, 85.9, 85, 84.3], paper_d=25.6)
    assert wide.verdict == INCONCLUSIVE and wide.size() == "smaller than the paper's"  # it excludes the paper's
    assert "smaller than the paper's (+25.60)" in wide.line() and wide.to_dict()["size"] == wide.size()


def test_an_inconclusive_row_states_the_seeds_that_would_decide_it():
    a, b = [86.0, 84.4, 85.8, 85.0, 84.0], [84.0, 84.5, 85.9, 85.0, 84.3]
    v = decide("A beats B", "T", dict(enumerate(a)), dict(enumerate(b)))  # at our own d ≈ +0.30
    import statistics
    sd = statistics.stdev(x - y for x, y in zip(a, b))
    n = v.seeds
    assert v.verdict == INCONCLUSIVE and n is not None and n > 5
    # independent: at n seeds the expected interval half-width is below the effect, at n - 1 it is not by the rule
    t = lambda k: stats.t.ppf(0.975, k - 1) + stats.t.ppf(0.8, k - 1)  # noqa: E731
    assert math.sqrt(n) * 0.30 / sd >= t(n) * 0.99 and math.sqrt(n - 1) * 0.30 / sd < t(n - 1) * 1.01
    at_paper = decide("A beats B", "T", dict(enumerate(a)), dict(enumerate(b)), paper_d=5.0)
    assert at_paper.seeds is not None and at_paper.seeds < n
    assert decide("A beats B", "T", [86.0, 86.4, 85.8], [84.0, 84.5, 83.9]).seeds is None  # decided


def test_holm_keeps_a_family_wise_level_over_decided_rows():
    from fedlib.companion.verdicts import holm
    assert holm([0.001, 0.02, 0.01]) == [True, True, True]  # 0.003, 0.02, 0.02 against 0.025
    assert holm([0.001, 0.02, 0.015, 0.5]) == [True, False, False, False]  # 0.004, then 0.045 > 0.025
    assert holm([math.nan, 0.001]) == [True, True]  # a row that is no t decision is left as it is
    a, b = {0: 86.0, 1: 86.4, 2: 85.8}, {0: 84.0, 1: 84.5, 2: 83.9}
    v = decide("A beats B", "T", a, b)
    d = [a[k] - b[k] for k in a]
    tstat = sum(d) / 3 / (statistics_stdev(d) / math.sqrt(3))
    assert v.p == pytest.approx(stats.t.sf(tstat, 2))


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
    v = decide("within ±1 of the paper", "FedIntR Table I", [89.0 - 88.9, 89.1 - 88.9, 88.95 - 88.9],
               kind="within")
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
    gone = decide("A beats B", "T", {0: 86.0, 1: float("nan")}, {0: 84.0, 1: 84.5}, diverged=["A seed 1"])
    assert gone.to_dict()["means"] == {"A": None, "B": 84.25}  # a diverged side: null in JSON, never NaN


def test_not_testable_and_pending():
    assert not_testable("T IV ordering", "FedIntR Table IV", "1,000 rounds").verdict == NOT_TESTABLE
    assert pending("x", "T").verdict == "pending"


def test_bad_arguments_name_the_fix():
    with pytest.raises(ValueError, match="valid kinds"):
        decide("x", "T", [1, 2, 3], kind="bigger")
    with pytest.raises(ValueError, match="margin"):
        decide("x", "T", [1, 2, 3], margin=math.nan)


def test_plateau_rule_reads_a_line_fitted_to_the_curves_second_half():
    from fedlib.companion.verdicts import PLATEAU_RISE, plateau_rise

    flat = {r: 80.0 + (0.1 if r % 2 else 0.0) for r in range(1, 31)}
    assert abs(plateau_rise(flat, 30)) <= PLATEAU_RISE
    rising = {r: 50.0 + r for r in range(1, 31)}  # +1 point a round: 6 points over the last 6 of 30 rounds
    assert plateau_rise(rising, 30) == pytest.approx(6.0)
    # the first half does not count: a curve that rose early and then stayed flat is on its plateau
    assert plateau_rise({r: 10.0 + 5 * min(r, 15) for r in range(1, 31)}, 30) == pytest.approx(0.0)
    # a slow independent reference: numpy's least squares over rounds 16-30
    rng = np.random.default_rng(0)
    noisy = {r: 70 + 0.05 * r + float(rng.normal(0, 2)) for r in range(1, 31)}
    xs = np.arange(16, 31)
    assert plateau_rise(noisy, 30) == pytest.approx(np.polyfit(xs, [noisy[x] for x in xs], 1)[0] * 6, abs=1e-9)
    assert plateau_rise({30: 80.0}, 30) is None  # evaluated at the last round only: cannot be checked
    assert plateau_rise({r: 80.0 for r in range(1, 30)}, 30) is None  # not at its last round
    assert plateau_rise({r: 80.0 for r in (10, 20, 30)}, 30) is None  # 2 rounds of the second half
    assert plateau_rise({r: 80.0 for r in (20, 25, 30)}, 30) == pytest.approx(0.0)  # every 5th round: enough


def test_noise_about_a_plateau_rarely_reads_as_a_rise():
    """Simulated runs on their plateau with noise of sd 1.5 points (the noisiest quick setups): the rule calls few
    of them off it, and finds a true rise of 3 points over the last 20 % in nearly every run."""
    from fedlib.companion.verdicts import PLATEAU_RISE, plateau_rise

    rng, rounds = np.random.default_rng(1), 40
    r = np.arange(1, rounds + 1)
    def off(curve):
        noisy = lambda: dict(zip(r.tolist(), (curve + rng.normal(0, 1.5, rounds)).tolist()))  # noqa: E731
        return np.mean([plateau_rise(noisy(), rounds) > PLATEAU_RISE for _ in range(400)])

    assert off(np.full(rounds, 80.0)) < 0.06
    assert off(80.0 + 3.0 / 8 * (r - rounds)) > 0.95  # 3 points over the last 8 rounds


def test_a_run_off_its_plateau_makes_a_claim_not_testable_with_its_name():
    v = decide("A beats B", "paper", {0: 80, 1: 81, 2: 82}, {0: 70, 1: 71, 2: 72},
               off=["A | seed=1: rises +3.00 points over its last 20 % of rounds"])
    assert v.verdict == "not testable at this scale" and "A | seed=1" in v.why and "plateau" in v.why
    assert decide("A beats B", "paper", {0: 80, 1: 81, 2: 82}, {0: 70, 1: 71, 2: 72}).verdict == "reproduced"


def test_off_plateau_reads_a_records_history():
    from types import SimpleNamespace

    from fedlib.companion.verdicts import off_plateau

    rec = lambda accs: SimpleNamespace(cfg=SimpleNamespace(rounds=len(accs)),  # noqa: E731
                                       history=[{"round": i + 1, "test_acc": a} for i, a in enumerate(accs)])
    assert off_plateau(rec([0.5] * 10 + [0.8] * 20)) is None
    assert "rises" in off_plateau(rec([0.01 * i for i in range(30)]))
    sparse = SimpleNamespace(cfg=SimpleNamespace(rounds=10), history=[
        {"round": r, "test_acc": 0.8 if r == 10 else None} for r in range(1, 11)])
    assert "not evaluated" in off_plateau(sparse)


@pytest.mark.parametrize("gone", [5, 30])
def test_a_record_missing_a_round_is_an_incomplete_record_and_never_decides(gone):
    from types import SimpleNamespace

    from fedlib.companion.verdicts import off_plateau, off_plateau_by_every_metric

    flat = [0.5] * 10 + [0.8] * 20
    rec = SimpleNamespace(cfg=SimpleNamespace(rounds=30), history=[
        {"round": i + 1, "test_acc": a} for i, a in enumerate(flat) if i + 1 != gone])
    assert off_plateau(rec) == f"incomplete record: round {gone} missing"
    assert off_plateau_by_every_metric(rec) == f"incomplete record: round {gone} missing"
    v = decide("A beats B", "T", {0: 80, 1: 81, 2: 82}, {0: 70, 1: 71, 2: 72}, off=[f"A s0: {off_plateau(rec)}"])
    assert v.verdict == NOT_TESTABLE and "incomplete record" in v.why


def test_closed_regions_include_their_edge_and_open_ones_do_not():
    same = {0: 80.0, 1: 81.0, 2: 79.5}
    assert decide("A no worse than B", "T", same, same, kind="at_least").verdict == REPRODUCED
    assert decide("A matches B", "T", same, same, kind="within").verdict == REPRODUCED
    edge = {k: v + 1.0 for k, v in same.items()}  # d = 1 exactly in every seed: on the policy margin's edge
    assert decide("A comparable to B", "T", edge, same, kind="within").verdict == REPRODUCED
    assert decide("B at least as good as A", "T", same, edge, kind="at_least").verdict == REPRODUCED
    assert decide("A beats B", "T", same, same, kind="greater").verdict == CONTRADICTED
    assert decide("A below B", "T", same, same, kind="less").verdict == CONTRADICTED
    assert decide_ratio("at t", "T", [1.0] * 5, kind="greater").verdict == CONTRADICTED
    assert decide_ratio("at t", "T", [1.0] * 5, kind="less").verdict == CONTRADICTED


def test_seed_keys_of_int_and_str_pair_as_one_seed():
    a, b = {0: 80.0, 1: 83.0, 2: 78.0}, {"0": 79.0, "1": 81.5, "2": 77.5}
    mixed, same = decide("A beats B", "T", a, b), decide("A beats B", "T", a, {int(k): v for k, v in b.items()})
    assert mixed.method.startswith("paired") and mixed.interval == same.interval
    with pytest.raises(ValueError, match="seed 1 is given twice"):
        decide("x", "T", {0: 1.0, 1: 2.0, "1": 3.0})
    with pytest.raises(ValueError, match="seed key 'a'"):
        decide("x", "T", {"a": 1.0, "b": 2.0})


@pytest.mark.parametrize("bad", [-1, -0.5, math.nan, math.inf, 0])
def test_decide_ratio_refuses_a_threshold_that_is_not_a_positive_number(bad):
    with pytest.raises(ValueError, match="threshold"):
        decide_ratio("x", "T", [1.2, 1.3, 1.25, 1.4, 1.3], threshold=bad)


@pytest.mark.parametrize("kw", [{"margin": -1.0}, {"margin": math.inf}, {"chance": math.nan}, {"chance": -3},
                                {"names": ("A", "A")}])
def test_decide_refuses_negative_or_non_finite_margins_and_chance(kw):
    with pytest.raises(ValueError, match=next(iter(kw))):
        decide("x", "T", [1.0, 2.0, 3.0], [1.0, 2.0, 3.0], **kw)


def test_a_record_is_off_its_plateau_for_the_campaign_only_when_off_by_every_accuracy_it_holds():
    from types import SimpleNamespace

    from fedlib.companion.verdicts import off_plateau_by_every_metric

    rising, flat = [0.01 * i for i in range(30)], [0.5] * 10 + [0.8] * 20
    rec = lambda **m: SimpleNamespace(cfg=SimpleNamespace(rounds=30), history=[  # noqa: E731
        {"round": i + 1, **{k: v[i] for k, v in m.items()}} for i in range(30)])
    assert "rises" in off_plateau_by_every_metric(rec(test_acc=rising))
    assert off_plateau_by_every_metric(rec(test_acc=flat)) is None
    assert off_plateau_by_every_metric(rec(test_acc=rising, personal_acc_mean=flat)) is None  # a verdict may read it
    assert "rises" in off_plateau_by_every_metric(rec(test_acc=rising, personal_acc_mean=rising))
    assert off_plateau_by_every_metric(rec(train_loss=rising)) is None  # no accuracy: nothing to read


@pytest.mark.parametrize("seeds", [0, 1])
def test_decide_rejects_fewer_than_two_seeds_a_side(seeds):
    with pytest.raises(ValueError, match="min_seeds"):
        decide("x", "y", [1.0], [2.0], min_seeds=seeds)


def test_decide_ratio_rejects_non_finite_ratios():
    with pytest.raises(ValueError, match="finite"):
        decide_ratio("x", "y", [1.2, float("nan"), 1.3, 1.4, 1.25])


def test_claims_name_what_they_were_decided_on_where_it_differs_from_the_paper():
    from fedlib.companion.report import Report, decided_on

    assert decided_on("FedIntR Table I; §IV-B", "fmnist", "intr_cnn") == ""  # the paper's own column
    assert decided_on("FedIntR §IV-E, Fig. 5 (CIFAR-10)", "fmnist", "intr_cnn") == \
        "Fashion-MNIST, FedIntR CNN; the paper: CIFAR-10, FedIntR CNN"
    assert "the paper: CIFAR-10" in decided_on("FedCKA Table 2 (both versions)", "fmnist", "simple_cnn")
    assert "timed on cpu" in decided_on("FedCKA Table 4; §4.5", "synthetic", "", "cpu", timed=True)
    r = Report("03_x", scale="quick", dataset="fmnist", device="cpu")
    r.verdict(decide("FedCKA beats FedAvg", "FedCKA Table 2", [70, 71, 72], [60, 61, 62]))
    r.control(decide("FedProx performs like FedAvg", "FedIntR Table I", [70, 71, 72], [70, 71, 72], kind="within"))
    assert [c["claim"] for c in r.claims] == ["FedCKA beats FedAvg"] and len(r.controls) == 1
    assert r.claims[0]["data"] == "Fashion-MNIST, simple CNN; the paper: CIFAR-10, simple CNN"
    assert r.claims_frame()["decided on"].tolist() == ["Fashion-MNIST, simple CNN; the paper: CIFAR-10, simple CNN"]


def statistics_stdev(xs):
    import statistics
    return statistics.stdev(xs)


def test_a_claims_label_names_the_setup_a_scale_shrinks():
    """setup_label: the data and model (decided_on) and each of clients, training images, rounds, local epochs and
    batch where the runs differ from the paper-scale Config; "" when nothing differs."""
    from fedlib.config import Config
    from fedlib.companion.report import setup_label

    paper = Config(dataset="fmnist", model="intr_cnn", num_clients=10, rounds=100, local_epochs=10, batch_size=512)
    quick = [paper.replace(n_train=12000, rounds=r, local_epochs=6, batch_size=64) for r in (40, 80)]
    text = setup_label("FedIntR Table I", "fmnist", quick, paper)
    assert text == ("Fashion-MNIST, FedIntR CNN as the paper's, 12,000 training images, 40-80 rounds, "
                    "6 local epoch(s), batch 64; the paper: all training images, 100 rounds, 10 local epoch(s), "
                    "batch 512")
    assert setup_label("FedIntR Table I", "fmnist", [paper], paper) == ""
    other = setup_label("FedSHIBU Fig. 5", "fmnist", [paper.replace(num_clients=10)], paper.replace(
        model="resnet18", num_clients=100))
    assert other.startswith("Fashion-MNIST, FedIntR CNN, 10 clients; the paper: CIFAR-10, ResNet-18, 100 clients")


def test_a_record_with_a_round_twice_or_beyond_its_rounds_is_incomplete():
    from types import SimpleNamespace

    from fedlib.companion.verdicts import incomplete

    rec = lambda rounds: SimpleNamespace(cfg=SimpleNamespace(rounds=3),  # noqa: E731
                                         history=[{"round": r, "test_acc": 0.5} for r in rounds])
    assert incomplete(rec([1, 2, 3])) is None
    assert incomplete(rec([1, 2, 2, 3])) == "incomplete record: round 2 appears twice"
    assert incomplete(rec([1, 2, 3, 4])) == "incomplete record: round 4 is not one of its 3 rounds"
    assert incomplete(rec([1])) == "incomplete record: round 2 missing (2 in all)"
