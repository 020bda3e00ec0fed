"""The figure check: every committed quick-scale figure's sidecar shows nothing a reviewer would catch (fewer seeds
than planned unmarked, rounds mixed unsaid, "best μ" without a search, symmetric intervals on a log axis, text
under 8 pt), and the check itself fails on each of those."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from fedlib.companion.figcheck import figure_facts, figure_problems, flag_figure, note_series  # noqa: E402
from fedlib.companion.plots import log_t_interval, mean_curves, sweep  # noqa: E402

QUICK = Path(__file__).resolve().parent.parent / "figures" / "quick"
SIDECARS = sorted(QUICK.glob("*.json"))


@pytest.mark.parametrize("path", SIDECARS, ids=[p.stem for p in SIDECARS])
def test_every_quick_figure_passes_the_figure_check(path):
    assert figure_problems(json.loads(path.read_text())) == []


def _facts(draw, **flags) -> dict:
    fig, ax = plt.subplots()
    draw(ax)
    if flags:
        flag_figure(fig, **flags)
    fig.canvas.draw()
    out = figure_facts(fig)
    plt.close(fig)
    return out


def test_a_clean_figure_passes():
    def draw(ax):
        ax.set_title("accuracy", fontsize=9)
        note_series(ax, "FedAvg (n=5)", n=5, planned=5, rounds=[40], interval="t", legend=True)
    assert figure_problems(_facts(draw)) == []


def test_the_check_fails_on_fewer_seeds_than_planned_without_the_mark():
    def draw(ax, marked):
        note_series(ax, "MOON (n=4)", n=4, planned=5, marked=marked, legend=True)
    assert any("4 of 5 planned" in p for p in figure_problems(_facts(lambda ax: draw(ax, False))))
    assert figure_problems(_facts(lambda ax: draw(ax, True))) == []


def test_the_check_fails_on_diverged_or_pending_runs_the_figure_does_not_mention():
    quiet = _facts(lambda ax: ax.set_title("accuracy", fontsize=9))
    assert any("1 of its runs diverged" in p for p in figure_problems({**quiet, "runs": {"diverged": 1}}))
    assert any("2 of its runs are pending" in p for p in figure_problems({**quiet, "runs": {"pending": 2}}))
    said = _facts(lambda ax: ax.set_title("MOON: × 1 of 5 diverged; pending: FedCKA", fontsize=9))
    assert figure_problems({**said, "runs": {"diverged": 1, "pending": 2}}) == []


def test_the_check_fails_on_a_legend_entry_without_its_seeds_and_a_solid_one_seed_curve():
    def draw(ax):
        note_series(ax, "FedER", n=1, legend=True, curve=True, dashed=False, interval="t")
    problems = figure_problems(_facts(draw))
    assert any("does not give its seeds" in p for p in problems)
    assert any("one-seed curve drawn solid" in p for p in problems)
    assert any("one seed but has an interval" in p for p in problems)


def test_the_check_fails_on_a_legend_curve_without_its_seeds_whoever_drew_it():
    def draw(ax, label):
        ax.plot([1, 2, 3], [50, 60, 65], label=label)
        ax.axhline(70, label="paper: 70 %")  # a reference line: no seeds to give
        ax.legend(fontsize=8)
    assert any("'FedER' of a curve" in p for p in figure_problems(_facts(lambda ax: draw(ax, "FedER"))))
    assert figure_problems(_facts(lambda ax: draw(ax, "FedER (n=1)"))) == []


def test_the_check_fails_on_rounds_mixed_without_saying_so():
    def draw(ax, say):
        note_series(ax, "FedAvg (n=5)", n=5, rounds=[40], legend=True)
        note_series(ax, "FedAvg E = 1 (n=5)", n=5, rounds=[450], legend=True)
        if say:
            ax.set_title("solid: 40 rounds; hollow: 450 rounds", fontsize=9)
    assert any("differ in rounds" in p for p in figure_problems(_facts(lambda ax: draw(ax, False))))
    assert figure_problems(_facts(lambda ax: draw(ax, True))) == []

    def within(ax):
        note_series(ax, "FedAvg (n=5)", n=5, rounds=[20, 65, 80])
        ax.set_title("80 rounds", fontsize=9)
    assert any("mixes [20, 65, 80] rounds" in p for p in figure_problems(_facts(within)))


def test_the_check_fails_on_runs_of_different_rounds_when_the_figure_does_not_state_them():
    def draw(ax, say):
        ax.set_xlabel("local epochs E")
        if say:
            ax.set_title("solid: 40 rounds; hollow: 450 rounds", fontsize=9)
    side = {**_facts(lambda ax: draw(ax, False)), "runs": {"rounds": [40, 450]}}
    assert any("its runs differ in rounds ([40, 450])" in p for p in figure_problems(side))
    assert figure_problems({**_facts(lambda ax: draw(ax, True)), "runs": {"rounds": [40, 450]}}) == []
    curves = {**_facts(lambda ax: ax.set_xlabel("round")), "runs": {"rounds": [30, 40]}}
    assert figure_problems(curves) == []  # curves over rounds show their rounds


def test_the_check_fails_on_best_mu_without_a_search_and_on_a_mu_axis_without_a_sweep():
    def draw(ax):
        ax.set_title("each method at its best μ", fontsize=9)
        ax.set_xlabel("μ")
        note_series(ax, "FedProx (n=5)", n=5, xs=[0.001], legend=True)
        note_series(ax, "MOON (n=5)", n=5, xs=[1.0], legend=True)
    problems = figure_problems(_facts(draw))
    assert any("says 'best μ'" in p for p in problems) and any("a μ axis" in p for p in problems)
    assert not any("says 'best μ'" in p for p in figure_problems(_facts(draw, mu_search=True)))


def test_the_check_fails_on_symmetric_intervals_on_a_log_axis_and_small_text():
    def draw(ax, interval):
        ax.set_yscale("log")
        ax.text(0.5, 0.5, "tiny", fontsize=6)
        note_series(ax, "FedAvg (n=5)", n=5, interval=interval, legend=True)
    problems = figure_problems(_facts(lambda ax: draw(ax, "t")))
    assert any("log axis" in p for p in problems) and any("under 8 pt" in p for p in problems)
    assert not any("log axis" in p for p in figure_problems(_facts(lambda ax: draw(ax, "log-t"))))


def test_the_check_fails_on_seeds_off_their_plateau_that_are_not_ringed():
    def draw(ax):
        note_series(ax, "FedAvg (n=5)", n=5, off=1, ringed=False, legend=True)
    assert any("not ringed" in p for p in figure_problems(_facts(draw)))


def test_a_sidecar_that_does_not_record_the_drawing_fails():
    assert figure_problems({"figure": "x", "provenance": "p"}) != []


def test_log_curves_carry_the_geometric_mean_and_its_interval_of_the_logs():
    g, lo, hi, n = log_t_interval([1e-4, 1e-2, 1.0])
    assert n == 3 and g == pytest.approx(1e-2) and 0 < lo < g < hi
    idx = pd.Index([1, 2])
    runs = {"FedAvg": {s: pd.Series([10.0 ** -s, 10.0 ** -s], index=idx) for s in range(3)},
            "FedER": {0: pd.Series([0.5, 0.4], index=idx)}}
    fig, ax = plt.subplots()
    mean_curves(ax, runs, percent=False, logy=True)
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert set(lines) == {"FedAvg (n=3)", "FedER (n=1)"} and lines["FedER (n=1)"].get_linestyle() == "--"
    assert np.allclose(lines["FedAvg (n=3)"].get_ydata(), 0.1) and len(ax.collections) == 1  # one band: FedAvg's
    assert ax.collections[0].get_paths()[0].vertices[:, 1].min() > 0
    assert [s["interval"] for s in ax._fedlib_series] == ["log-t", None]
    plt.close(fig)


def test_a_sweep_labels_points_whose_rounds_differ_and_names_the_common_count():
    fig, ax = plt.subplots()
    note = sweep(ax, {"FedAvg": {2: {0: 50.0, 1: 58.0}, 5: {0: 80.0, 1: 81.0}, 10: {0: 85.0, 1: 86.0}}},
                 xlabel="s", rounds={"FedAvg": {2: 20, 5: 80, 10: 80}})
    assert [t.get_text() for t in ax.texts] == ["20 rounds"] and "80 rounds unless labelled (hollow)" in note
    assert [ln.get_markerfacecolor() for ln in ax.get_lines() if ln.get_markerfacecolor() == "white"] == ["white"]
    ax.set_title(note, fontsize=9)
    fig.canvas.draw()
    assert figure_problems(figure_facts(fig)) == []
    plt.close(fig)


MISLEADING = Path(__file__).resolve().parent / "misleading_sidecars"  # four figures as they were drawn before


@pytest.mark.parametrize("name, reason", [
    ("fedintr_fig5_epochs_fmnist", "its runs differ in rounds ([40, 450])"),  # E = 1's 450 rounds said nowhere
    ("feder_training_curves_fmnist", "legend entry 'FedER' of a curve does not give its seeds"),  # one seed, unsaid
    ("fedintr_table1_mu_fmnist", "says 'best μ' where no μ search ran"),  # one μ per method, read as a sweep
    ("fedshibu_fig4_shards_fmnist", "its runs differ in rounds ([20, 65, 80])"),  # s = 2 at 20 rounds, unsaid
])
def test_the_check_fails_on_the_four_figures_that_misled(name, reason):
    side = json.loads((MISLEADING / f"{name}.json").read_text())
    assert any(reason in p for p in figure_problems(side))
