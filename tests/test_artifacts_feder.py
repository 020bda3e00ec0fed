"""Notebook 07's plan, verdicts, tables and figures: 5 seeds, quick's two settings, no FedER-vs-FedAvg verdict while
the floor decides FedER's weights, Table 4.2 beside ours, and figures that draw the thesis's numbers."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from matplotlib.colors import LogNorm

from fedlib.companion.papers.feder.tables import (FLOOR, FLOORED_MAX, FEDER_T42, grid_frame, grid_table, grid_invariants,
                                    grid_means, record_rise, any_stored, verdicts, grid_versus_paper)
from fedlib.companion.papers.feder.figures import (THESIS_FIGURES, describe_floored, describe_rank_weights,
                                            describe_training_curves, figure_runs, floored_share_figure,
                                            rank_weights, stable_rank_figure, training_curves)
from fedlib.companion.grid import Diverged
from fedlib.companion.papers import plan
from fedlib.companion.common import FedERRunId
from fedlib.companion.papers.feder.plans import FEDER_LEFT_OUT
from fedlib.companion.papers import preset
from fedlib.companion.results import Pending, Record
from fedlib.schedule import num_batches


def record(final: float, floored: float | None = None, rounds: int = 10) -> Record:
    hist = [{"round": i + 1, "test_acc": (final - (rounds - 1 - i) * 0.1) / 100}
            | ({"feder_floored": floored} if floored is not None else {}) for i in range(rounds)]
    return Record("k", {"rounds": rounds}, hist, {}, "", "")


def rid(row: str, setting: str, seed: int) -> FedERRunId:
    return FedERRunId(setting, seed, optimizer=row)


def runs(acc: dict[tuple[str, str], tuple[float, ...]], floored: float = 0.1) -> dict:
    return {rid(row, s, i): record(v, floored if s == "FedER" else None) for (row, s), vs in acc.items()
            for i, v in enumerate(vs)}


def by_claim(vs):
    return {v.claim: v for v in vs}


def test_quick_plan_trains_the_claims_without_feder_at_5_seeds_and_feder_once():
    p = plan("07_feder_optimizer_grid", "quick")
    assert set(p) == {"table4.2"} and set(FEDER_LEFT_OUT["quick"]) == {"feder", "figA1"}
    cells = [("Adam", "non-federated"), ("Adam", "FedAvg"), ("Adam + StepLR", "FedAvg"), ("AdamP", "non-federated"),
             ("AdamP", "FedAvg")]
    assert set(p["table4.2"]) == {rid(r, s, i) for r, s in cells for i in range(5)} | {rid("Adam", "FedER", 0)}
    assert set(plan("07_feder_optimizer_grid", "quick", seeds=[7, 3])["table4.2"]) == (
        {rid(r, s, i) for r, s in cells for i in (7, 3)} | {rid("Adam", "FedER", 7)})
    assert str(rid("Adam + StepLR", "FedER", 2)) == "Adam + StepLR · FedER · seed=2"
    q = preset("feder", "quick", dataset="fmnist")
    per_client = q.n_train // q.num_clients
    steps = num_batches(per_client, q.batch_size, q.drop_last) * q.local_epochs
    assert q.batch_size == 64 and steps >= 100 and steps * q.rounds >= 1000  # local SGD steps per client
    full = plan("07_feder_optimizer_grid", "paper", dataset="cifar100")
    assert len(full["table4.2"]) == 15 * 5 and len(full["figA1"]) == 5


ADAM = {("Adam", "FedAvg"): (80.0, 81.0, 80.5), ("Adam", "FedER"): (80.6, 81.7, 81.0)}


def test_feder_vs_fedavg_is_decided_over_seeds_when_the_floor_is_rare():
    df = grid_frame(runs(ADAM, floored=0.05))
    v = by_claim(verdicts(df, "fmnist"))
    adam = v["FedER out-performs FedAvg with Adam"]
    assert adam.verdict == "reproduced" and adam.n == {"Adam · FedER": 3, "Adam · FedAvg": 3}
    assert adam.paper == "FedER − FedAvg = +0.18" and adam.method.startswith("paired t")
    assert adam.paper_d == pytest.approx(77.05 - 76.87) and adam.size()
    rest = [x for x in v.values() if x is not adam]
    assert {x.verdict for x in rest} == {"not testable at this scale"}
    assert all("is not run at this scale" in x.why for x in rest)
    assert v["FedER out-performs FedAvg with RMSGD"].why.endswith("floored share: 0.05 (Adam · FedER · seed=0)")


def test_quick_says_why_it_tests_no_feder_claim_with_the_floored_share_it_saw():
    acc = {("Adam", "FedAvg"): (80.0, 81.0, 80.5, 80.2, 80.9),
           ("Adam", "non-federated"): (78.0, 78.5, 78.2, 77.9, 78.8),
           ("Adam + StepLR", "FedAvg"): (79.0, 79.5, 79.1, 79.3, 79.6),
           ("AdamP", "FedAvg"): (70.1, 70.5, 70.2, 70.0, 70.3),
           ("AdamP", "non-federated"): (75.0, 75.5, 75.1, 75.3, 75.6), ("Adam", "FedER"): (80.2,)}
    v = by_claim(verdicts(grid_frame(runs(acc, floored=0.65)), "fmnist", FEDER_LEFT_OUT["quick"]))
    feder_claims = [x for c, x in v.items() if "FedER" in c]
    assert len(feder_claims) == 7 and {x.verdict for x in feder_claims} == {"not testable at this scale"}
    adam = v["FedER out-performs FedAvg with Adam"].why  # measured on the records, not the plan's text
    assert adam == ("FedER is FedAvg on 65 % of its client-layers in Adam · FedER · seed=0: EVBMF keeps no component "
                    "there (Alg. 4's floor), and above 25 % there is nothing to compare")
    assert all(x.why.startswith("FedER is FedAvg on 65 % of its client-layers in Adam · FedER · seed=0")
               for x in feder_claims)
    assert "for want of RMSGD · FedER" in v["FedER out-performs FedAvg with RMSGD"].why
    assert "train accuracy" in v["FedAvg's train accuracy stays below its test accuracy with AdamP without "
                                 "StepLR"].why
    assert v["FedAvg with Adam out-performs the non-federated ResNet-18"].verdict == "reproduced"
    assert v["StepLR lowers FedAvg's test accuracy with Adam"].verdict == "reproduced"
    assert v["FedAvg with AdamP without StepLR ends below its non-federated baseline"].verdict == "reproduced"



def curve_record(test: list[float], train: list[float] | None = None, floored: float | None = None) -> Record:
    """A run with the test (and train) accuracy (%) of each round."""
    hist = [{"round": i + 1, "test_acc": a / 100} | ({"train_acc": train[i] / 100} if train else {})
            | ({"feder_floored": floored} if floored is not None else {}) for i, a in enumerate(test)]
    return Record("k", {"rounds": len(test)}, hist, {}, "", "")


def test_a_uniform_floor_makes_every_feder_row_not_testable_with_the_share_measured_on_the_records():
    """No left-out text: the share the rows give is the stored runs' (the most floored one), whatever the scale."""
    acc = {("Adam", "FedAvg"): (80.0, 81.0, 80.5), ("Adam", "FedER"): (80.6, 81.7, 81.0),
           ("AdamP", "FedAvg"): (70.0, 70.4, 70.2), ("AdamP", "FedER"): (69.0, 69.5, 69.2)}
    r = runs(acc, floored=0.4)
    r[rid("AdamP", "FedER", 1)] = record(69.5, floored=0.55)
    v = by_claim(verdicts(grid_frame(r), "fmnist"))
    assert "55 % of its client-layers in AdamP · FedER · seed=1" in v["FedER under-performs FedAvg with AdamP "
                                                                     "without StepLR"].why
    assert "40 % of its client-layers in Adam · FedER" in v["FedER out-performs FedAvg with Adam"].why
    rms = v["FedER out-performs FedAvg with RMSGD"]  # not run: measured on the FedER runs stored, the most floored
    assert rms.verdict == "not testable at this scale" and "55 %" in rms.why
    assert rms.paper_d == pytest.approx(60.52 - 60.07)


def test_the_thesis_figure_sentences_are_decided_from_the_curves_they_describe():
    """Fig. 4.8's come-down is the peak minus the end against Adam's, its train-below-test the recorded train
    accuracy; the stable rank's "competitive" is the policy's 1 point."""
    rise = [min(85.0, 60.0 + 10 * i) + 0.1 * (i % 2) for i in range(10)]  # on its plateau from round 4
    r = {rid("Adam", "FedAvg", s): curve_record([x + s for x in rise]) for s in range(3)}
    r |= {rid("AdamP", "FedAvg", s): curve_record([70 + s + (10 if 2 <= i <= 4 else 0) - (0.3 * i if i > 4 else 0)
                                                   for i in range(10)],
                                                  train=[50.0 + s + i for i in range(10)]) for s in range(3)}
    v = by_claim(verdicts(grid_frame(r), "fmnist"))
    down = v["FedAvg with AdamP comes down from an early peak: its drop from its best round to its end exceeds "
             "FedAvg with Adam's"]
    assert down.estimate == pytest.approx(10 + 0.3 * 8) and "come-down: the highest round's" in down.why
    assert down.verdict == "reproduced"
    train = v["FedAvg's train accuracy stays below its test accuracy with AdamP without StepLR"]
    assert train.means == pytest.approx({"AdamP · FedAvg train_acc": 60.0, "acc": 68.3})
    assert train.verdict == "reproduced"
    assert v["StepLR lifts FedAvg's test accuracy with AdamP"].why == "AdamP + StepLR · FedAvg is not run at this " \
                                                                     "scale"
    stable = {rid("Adam", "FedER (stable rank)", s): record(80.5 + 0.1 * s, floored=0.05) for s in range(3)}
    stable |= {rid("Adam", "FedER", s): record(80.0 + 0.1 * s, floored=0.05) for s in range(3)}
    st = [x for c, x in by_claim(verdicts(grid_frame(stable), "fmnist")).items() if "stable rank" in c][0]
    assert st.region.startswith("|d| <= 1") and st.verdict == "reproduced"

def test_a_floored_feder_is_fedavg_and_its_claim_not_testable():
    df = grid_frame(runs(ADAM, floored=FLOORED_MAX + 0.5))
    adam = by_claim(verdicts(df, "fmnist"))["FedER out-performs FedAvg with Adam"]
    assert adam.verdict == "not testable at this scale" and "75 %" in adam.why


def test_pending_and_table():
    r = runs(ADAM)
    r[rid("Adam", "FedER", 2)] = Pending("k", {})
    df = grid_frame(r)
    assert by_claim(verdicts(df, "fmnist"))["FedER out-performs FedAvg with Adam"].verdict == "pending"
    t = grid_means(df)
    assert t.loc["Adam", "FedAvg"] == "80.50 ± 0.50" and t.loc["Adam", "FedER"] == "pending"
    r[rid("Adam", "FedAvg", 0)] = Diverged("k0", {}, 3, "nan")  # a finished seed diverged: whatever seed 2 reads
    adam = by_claim(verdicts(grid_frame(r), "fmnist"))["FedER out-performs FedAvg with Adam"]
    assert adam.verdict == "not testable at this scale" and "diverged" in adam.why


def test_plateau_rise_is_the_rise_of_the_fitted_line_over_the_last_20_percent():
    assert record_rise(record(80.0)) == pytest.approx(0.2)  # +0.1 a round, over the last 2 of 10 rounds


# ------------------------------------------------------------------------- tables and figures of notebook 07
LAYERS = ("conv1.weight", "layer1.0.conv1.weight", "layer4.1.conv2.weight")


def feder_record(final: float, rounds: int = 4, clients: int = 4, metric: str = "entropy") -> Record:
    """A FedER run: conv1 at the floor for every client, layer1 floored for client 0 only, layer4 kept."""
    hist = []
    for i in range(rounds):
        er = {LAYERS[0]: [0.0] * clients, LAYERS[1]: [0.0] + [0.5] * (clients - 1),
              LAYERS[2]: [1.0 + 0.1 * k + 0.05 * i for k in range(clients)]}
        alpha = {n: (np.maximum(v, FLOOR) / np.maximum(v, FLOOR).sum()).tolist() for n, v in er.items()}
        hist.append({"round": i + 1, "test_acc": (final - (rounds - 1 - i)) / 100, "test_loss": 1.5 / (i + 1),
                     "client_loss": [2.0 / (i + 1) + 0.1 * k for k in range(clients)],
                     "feder_rank": er, "feder_alpha": alpha,
                     "feder_floored": sum(e <= FLOOR for v in er.values() for e in v) / (3 * clients)})
    return Record("feder", {"strategy_kw": {"metric": metric}}, hist, {}, "", "")


def plain_record(final: float, rounds: int = 4, clients: int = 4) -> Record:
    hist = [{"round": i + 1, "test_acc": (final - (rounds - 1 - i)) / 100, "test_loss": 1.5 / (i + 1),
             "client_loss": [2.0 / (i + 1) + 0.1 * k for k in range(clients)]} for i in range(rounds)]
    return Record("avg", {}, hist, {}, "", "")


def nb_records(pending_feder: bool = False) -> dict:
    """``{artifact: {run name: run}}`` as notebook 07 fetches them: Adam's three settings and Fig. A.1's run."""
    feder = Pending("p", {}) if pending_feder else feder_record(80.0)
    return {"table4.2": {rid("Adam", "non-federated", 0): plain_record(78.0, clients=1),
                         rid("Adam", "FedAvg", 0): plain_record(79.0), rid("Adam", "FedER", 0): feder},
            "figA1": {rid("Adam", "FedER (stable rank)", 0): feder_record(79.5, metric="stable_rank")}}


def test_versus_paper_puts_table_4_2_beside_ours_and_names_what_a_scale_left_out():
    t = grid_versus_paper(grid_frame(nb_records()), "quick")
    assert len(t) == 5 * 3 and t.loc["Adam · FedAvg", "paper (%)"] == FEDER_T42["Adam"][1]
    assert t.loc["Adam · FedER", "ours (%)"] == 80.0
    assert t.loc["Adam · FedER", "diff"] == round(80 - FEDER_T42["Adam"][2], 2)
    assert t.loc["RMSGD · FedER", "ours (%)"] == "not run at scale=quick"
    t = grid_versus_paper(grid_frame(nb_records(pending_feder=True)), "quick")
    assert t.loc["Adam · FedER", "ours (%)"] == "pending"
    r = nb_records()
    r["table4.2"][rid("Adam", "FedAvg", 0)] = Diverged("d", {}, 3, "nan loss")
    assert grid_versus_paper(grid_frame(r), "quick").loc["Adam · FedAvg", "ours (%)"] == "diverged"


def test_grid_table_and_invariants_over_nested_records():
    recs = nb_records()
    t = grid_table(grid_frame(recs), recs)
    assert list(t.columns) == ["final test acc (%)", "FedER floored share", "rise, last 20 % (points)", "pending",
                               "diverged", "record"]
    assert len(t) == 4 and t.loc["Adam · FedER · seed=0", "record"] == "feder"
    assert set(grid_invariants(recs).values()) == {True}
    bad = feder_record(80.0)
    bad.history[1]["feder_alpha"][LAYERS[2]] = [0.5, 0.5, 0.5, 0.5]
    recs["table4.2"][rid("Adam", "FedER", 0)] = bad
    assert not grid_invariants(recs)["FedER records a weight per client for every conv layer each round, summing to 1"]


def _table_texts(fig) -> list[str]:
    return [c.get_text().get_text() for a in fig.axes for t in a.tables for c in t.get_celld().values()]


def test_training_curves_separate_accuracy_and_loss_and_keep_the_thesis_in_its_own_panel():
    recs = nb_records()
    fig = training_curves(recs, "fmnist", "quick")
    loss_axes = [a for a in fig.axes if a.get_yscale() == "log"]
    acc_axes = [a for a in fig.axes if a.get_ylabel() == "test accuracy (%)"]
    assert len(loss_axes) == 2 and len(acc_axes) == 1  # training and test loss, accuracy: no twin axes
    assert all(a.get_ylabel() for a in loss_axes + acc_axes)
    assert all("×" not in t.get_text() and "times" not in t.get_text() for a in loss_axes
               for t in a.get_yticklabels())  # plain tick labels on the log axes
    labels = {ln.get_label() for ln in acc_axes[0].lines}
    assert labels == {"FedAvg (n=1)", "FedER (n=1)", "non-federated (n=1)"}  # Fig. A.1's stable-rank run is not a Table 4.2 cell
    assert all(ln.get_ydata().max() <= 80.0 for ln in acc_axes[0].lines)  # no thesis line (76.87 ...) as data
    assert len({(ln.get_color(), ln.get_marker()) for ln in acc_axes[0].lines}) == 3
    title = acc_axes[0].get_title()
    assert "4.1a (non-federated)" in title and "4.6a (FedAvg)" in title and "4.11a (FedER)" in title
    assert "4.6b (FedAvg)" in loss_axes[0].get_title()
    del recs["table4.2"][rid("Adam", "FedAvg", 0)].history[0]["test_loss"]  # a round without a test loss
    assert len([a for a in training_curves(recs, "fmnist", "quick").axes if a.get_yscale() == "log"]) == 2
    sup = fig.get_suptitle()
    assert "Fashion-MNIST" in sup and "CIFAR-100" in sup and "1 seed (0), no interval" in sup
    assert "Figs. 4.1 (non-federated · Adam), 4.6 (FedAvg · Adam), 4.11 (FedER · Adam)" in sup
    assert {f"{v:.2f}" for v in FEDER_T42["Adam"]} <= set(_table_texts(fig))  # Table 4.2 as a table


def test_training_curves_state_the_seeds_once_for_rows_of_different_seed_counts():
    """Adam with one FedER seed, AdamP with two seeds a cell: one seeds note for the figure, not one per row."""
    recs = nb_records()
    recs["table4.2"].update({rid("AdamP", s, k): plain_record(78.0 + k, clients=1 if s == "non-federated" else 10)
                             for s in ("non-federated", "FedAvg") for k in (0, 1)})
    sup = training_curves(recs, "fmnist", "quick").get_suptitle()
    assert sup.count("95 % t interval") == 1 and "2 seeds (0,1), 1 to 2 per curve; band" in sup


def test_training_curves_name_pending_runs_and_wait_for_a_stored_one():
    recs = nb_records(pending_feder=True)
    fig = training_curves(recs, "fmnist", "quick")
    assert "pending: Adam · FedER (seed 0)" in fig.get_suptitle()  # a cell with its seeds, not a name per run
    assert {ln.get_label() for a in fig.axes for ln in a.lines} == {"FedAvg (n=1)", "non-federated (n=1)"}
    none = {"table4.2": {k: Pending("p", {}) for k in recs["table4.2"]}}
    assert training_curves(none, "fmnist", "quick") is None
    assert floored_share_figure({"table4.2": {k: v for k, v in recs["table4.2"].items() if k.method != "FedER"}},
                                "fmnist", "quick") is None
    assert not any_stored({("Adam", "FedER"): Pending("p", {})})


def test_thesis_figures_follow_table_4_2s_rows_per_setting():
    assert THESIS_FIGURES[("Adam", "non-federated")] == "4.1" and THESIS_FIGURES[("RMSGD", "non-federated")] == "4.5"
    assert THESIS_FIGURES[("AdamP", "FedAvg")] == "4.8" and THESIS_FIGURES[("Adam + StepLR", "FedER")] == "4.12"
    assert THESIS_FIGURES[("RMSGD", "FedER")] == "4.15"


def test_describe_training_curves_states_the_numbers_and_what_is_pending():
    text = describe_training_curves(grid_frame(runs(ADAM)))
    assert "FedAvg · Adam 80.50 % ± 1.24 (3 seeds)" in text and "FedER · Adam 81.10 %" in text
    assert ("FedER − FedAvg, paired on the seeds both ran: Adam +0.60 points ± 0.25 (3 seeds; thesis, CIFAR-100: "
            "+0.18)") in text and "Pending" not in text
    one = describe_training_curves(grid_frame(runs({("Adam", "FedAvg"): (80.0, 81.0, 80.5), ("Adam", "FedER"): (80.6,)})))
    assert "Adam +0.60 points (1 seed, no interval; thesis" in one  # one seed against its own FedAvg seed, not a mean
    r = runs(ADAM)
    r[rid("Adam", "FedER", 2)] = Pending("k", {})
    assert describe_training_curves(grid_frame(r)).endswith("Pending: Adam · FedER · seed=2.")
    none = grid_frame({rid("Adam", "FedAvg", 0): Pending("k", {})})
    assert describe_training_curves(none).startswith("Pending: no run of Table 4.2 is stored yet")


def test_describe_floored_and_rank_weights_state_the_numbers():
    text = describe_floored(grid_frame(runs(ADAM, floored=0.65)))
    assert "Adam: 0.65 (seed 0), 0.65 (seed 1), 0.65 (seed 2)" in text and "not testable" in text
    assert "are judged" in describe_floored(grid_frame(runs(ADAM, floored=0.05)))
    assert describe_floored(grid_frame({rid("Adam", "FedER", 0): Pending("k", {})})).startswith("Pending")
    text = describe_rank_weights(feder_record(80.0), 0)
    assert "1 of 3 conv layers stay at the floor for all 4 clients in all 4 rounds" in text
    assert "largest weight relative to 1/K is 1.33× (layer1.0.conv1, client 1, round 1)" in text  # 0.5 / 1.501 × 4
    assert "smallest 0.00266× (layer1.0.conv1, client 0, round 1)" in text  # the floored client


def test_rank_weights_greys_the_floor_and_labels_both_colour_bars():
    fig = rank_weights(feder_record(80.0), "fmnist", "quick", 0)
    images = [im for a in fig.axes for im in a.images]
    assert len(images) == 2 * 4
    er0, er1 = (im.get_array() for im in images if im.axes.get_title() in ("client 0: er", "client 1: er"))
    assert er0.shape == (len(LAYERS), 4)  # layer × round
    assert er0.mask[0].all() and er0.mask[1].all() and not er0.mask[2].any()  # client 0: floored, floored, kept
    assert er1.mask[0].all() and not er1.mask[1:].any()
    assert isinstance(images[-1].norm, LogNorm) and images[-1].norm.vmin < 1 < images[-1].norm.vmax
    bars = [a for a in fig.axes if a.get_ylabel() and ("er:" in a.get_ylabel() or "α × K" in a.get_ylabel())]
    assert len(bars) == 2
    assert "floored share per round" in fig._suptitle.get_text()


def test_floored_share_and_stable_rank_figures():
    recs = nb_records()
    ax = floored_share_figure(recs, "fmnist", "quick").axes[0]
    assert [ln.get_label() for ln in ax.lines][0] == "FedER · Adam (n=1)"
    assert "1 seed (0), no interval" in ax.get_title()
    fig = stable_rank_figure(recs, "cifar100", "paper")
    ax = fig.axes[0]
    assert not any(ln.get_label().startswith("thesis") for ln in ax.lines)  # the thesis's numbers: a table
    assert {f"{v:.2f}" for v in FEDER_T42["Adam"]} <= set(_table_texts(fig)) and "not given" in _table_texts(fig)
    ours = ax.lines
    assert len(ours) == 4 and len({(ln.get_color(), ln.get_linestyle(), ln.get_marker()) for ln in ours}) == 4
    assert "CIFAR-100" in ax.get_title() and "1 seed (0)" in ax.get_title()
    assert stable_rank_figure({rid("Adam", "FedAvg", 0): Pending("p", {})}, "fmnist", "quick") is None


def test_a_figures_footer_states_only_the_settings_it_draws():
    recs = nb_records(pending_feder=True)
    assert set(figure_runs(recs)) == set(recs["table4.2"])  # Fig. A.1's stable-rank run is not in the curves
    assert list(figure_runs(recs, ("FedER",))) == [rid("Adam", "FedER", 0)]  # pending: still named



def test_the_setup_line_gives_each_optimizer_rows_rounds():
    """Quick trains the Adam rows longer than AdamP: the one-line setup says which rows run how many rounds."""
    from fedlib.companion.papers.feder.tables import grid_setup

    line = grid_setup(plan("07_feder_optimizer_grid", "quick"), "quick", "fmnist", {})
    assert "40 rounds (Adam, Adam + StepLR), 30 rounds (AdamP) x 1 local epoch(s)" in line
    assert "2 rounds x 1 local epoch(s)" in grid_setup(plan("07_feder_optimizer_grid", "smoke"), "smoke", "fmnist", {})


def test_rows_say_what_quick_changes_from_the_thesis_setup():
    from fedlib.companion.report import label_rows
    from fedlib.companion.verdicts import not_testable

    q, thesis = preset("feder", "quick", dataset="fmnist"), preset("feder", "paper", dataset="fmnist")
    v = label_rows([not_testable("c", "FedER thesis Table 4.2", "why")], q, thesis, {".": "the Adam rows: 40 rounds"},
                   who="the thesis")[0]
    assert v.data.startswith("Fashion-MNIST, ResNet-18; the paper: CIFAR-100")
    for part in ("25,600 of the 60,000 training images", "30 rounds × 1 local epochs (the thesis: 250 × 1)",
                 "batch 64 (the thesis: 128)", "model options width=8 (the thesis: none)", "the Adam rows: 40"):
        assert part in v.data
    assert label_rows([v], q, thesis)[0] is v  # a row that says what it was decided on keeps it
