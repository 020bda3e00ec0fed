"""Notebook 07's plan and verdicts: 3 seeds, quick's two settings, and no FedER-vs-FedAvg verdict while the floor
decides FedER's weights."""

import pytest

from fedlib.artifacts.feder import FLOORED_MAX, mean_table, plateau_rise, runs_frame, verdicts
from fedlib.plans import plan
from fedlib.plans.feder import FEDER_LEFT_OUT, run_name, split_name
from fedlib.presets import preset
from fedlib.results import Pending, Record
from fedlib.schedule import num_batches


def record(final: float, floored: float | None = None, rounds: int = 10) -> Record:
    hist = [{"round": i + 1, "test_acc": (final - (rounds - 1 - i) * 0.1) / 100}
            | ({"feder_floored": floored} if floored is not None else {}) for i in range(rounds)]
    return Record("k", {}, hist, {}, "", "")


def runs(acc: dict[tuple[str, str], tuple[float, ...]], floored: float = 0.1) -> dict:
    return {run_name(row, s, i): record(v, floored if s == "FedER" else None) for (row, s), vs in acc.items()
            for i, v in enumerate(vs)}


def by_claim(vs):
    return {v.claim: v for v in vs}


def test_quick_plan_is_adams_fedavg_and_feder_once_on_its_step_budget():
    p = plan("07_feder_optimizer_grid", "quick")
    assert set(p) == {"table4.2"} and set(FEDER_LEFT_OUT["quick"]) == {"table4.2", "figA1"}
    assert {split_name(n) for n in p["table4.2"]} == {("Adam", "FedAvg", 0), ("Adam", "FedER", 0)}
    q = preset("feder", "quick", dataset="fmnist")
    per_client = q.n_train // q.num_clients
    steps = num_batches(per_client, q.batch_size, q.drop_last) * q.local_epochs
    assert q.batch_size == 64 and steps >= 100 and steps * q.rounds >= 1000  # local SGD steps per client
    full = plan("07_feder_optimizer_grid", "paper", dataset="cifar100")
    assert len(full["table4.2"]) == 15 * 3 and len(full["figA1"]) == 3


ADAM = {("Adam", "FedAvg"): (80.0, 81.0, 80.5), ("Adam", "FedER"): (80.6, 81.7, 81.0)}


def test_feder_vs_fedavg_is_decided_over_seeds_when_the_floor_is_rare():
    df = runs_frame(runs(ADAM, floored=0.05))
    v = by_claim(verdicts(df, "fmnist"))
    adam = v["FedER out-performs FedAvg with Adam"]
    assert adam.verdict == "reproduced" and adam.n == {"Adam · FedER": 3, "Adam · FedAvg": 3}
    assert adam.paper == "FedER − FedAvg = +0.18" and adam.method.startswith("paired t")
    rest = [x for x in v.values() if x is not adam]
    assert {x.verdict for x in rest} == {"not testable at this scale"} and {x.why for x in rest} == {"not run"}


def test_quick_says_why_it_tests_nothing_with_the_floored_share_it_saw():
    df = runs_frame(runs({("Adam", "FedAvg"): (80.0,), ("Adam", "FedER"): (80.2,)}, floored=0.65))
    v = by_claim(verdicts(df, "fmnist", FEDER_LEFT_OUT["quick"]))
    assert {x.verdict for x in v.values()} == {"not testable at this scale"}
    adam = v["FedER out-performs FedAvg with Adam"].why
    assert "40-minute budget" in adam and adam.endswith("floored share 0.65")


def test_a_floored_feder_is_fedavg_and_its_claim_not_testable():
    df = runs_frame(runs(ADAM, floored=FLOORED_MAX + 0.5))
    adam = by_claim(verdicts(df, "fmnist"))["FedER out-performs FedAvg with Adam"]
    assert adam.verdict == "not testable at this scale" and "75 %" in adam.why


def test_pending_and_table():
    r = runs(ADAM)
    r[run_name("Adam", "FedER", 2)] = Pending("k", {})
    df = runs_frame(r)
    assert by_claim(verdicts(df, "fmnist"))["FedER out-performs FedAvg with Adam"].verdict == "pending"
    t = mean_table(df)
    assert t.loc["Adam", "FedAvg"] == "80.50 ± 0.50" and t.loc["Adam", "FedER"] == "pending"


def test_plateau_rise_is_the_median_of_3_over_the_last_20_percent():
    assert plateau_rise(record(80.0)) == pytest.approx(0.2)  # +0.1 a round, rounds 8 -> 10
