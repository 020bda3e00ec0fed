"""Figures say which runs made them (the records' commits, devices and seeds; the rendering commit apart) and are
byte-identical when rendered again, so regenerating them leaves the repository clean."""

from __future__ import annotations

import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from fedlib.config import Config  # noqa: E402
from fedlib.companion.plots import class_heatmap, provenance_line, save_figure  # noqa: E402
from fedlib.companion.report import Report  # noqa: E402
from fedlib.companion.results import Pending, Record  # noqa: E402


def _figure() -> plt.Figure:
    fig, (a, b) = plt.subplots(1, 2, figsize=(6, 2.5))
    a.plot([1, 2, 3], [60.0, 70.5, 72.1], marker="o", label="FedAvg (μ=0)")
    a.legend()
    class_heatmap(b, np.arange(20).reshape(4, 5), "Dirichlet α=0.5", annotate=True)
    return fig


def _render(directory, prov) -> dict[str, tuple[bytes, int]]:
    fig = _figure()
    save_figure(fig, "fig", prov, "quick", directory=directory)
    plt.close(fig)
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted((directory / "quick").iterdir())}


def test_rendering_twice_gives_byte_identical_files_left_untouched(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDLIB_COMMIT", "0123456789ab")
    prov = provenance_line("quick", "fmnist", "cpu", [0, 1])
    first = _render(tmp_path, prov)
    time.sleep(1.1)  # a date stamped in the files would differ now
    second = _render(tmp_path, prov)
    assert set(first) == {"fig.png", "fig.pdf", "fig.json"} and first == second  # same bytes, not rewritten
    assert b"CreationDate" not in first["fig.pdf"][0]


def _rec(seed: int, commit: str, device: str) -> Record:
    cfg = Config(dataset="fmnist", seed=seed)
    return Record(key=cfg.key(), config=cfg.to_dict(), history=[{"round": 1, "test_acc": 0.8}],
                  provenance={"commit": commit, "device": device, "wall_time_s": 60.0}, partition_hash="p",
                  final_params_hash="f")


def test_a_figure_states_the_commits_devices_and_seeds_of_its_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDLIB_COMMIT", "92db18c00000")  # the commit that renders, on a laptop
    cfg = Config(dataset="fmnist", seed=2)
    h100 = "NVIDIA H100 80GB HBM3"
    runs = {"FedAvg": [_rec(0, "a18ab63f0c1d", h100), _rec(1, "a18ab63f0c1d", h100)],
            "FedProx": Pending(cfg.key(), cfg.to_dict())}
    line = provenance_line("paper", "fmnist", "cpu", [0, 1, 2], runs=runs)
    assert "runs=3 (1 pending)" in line and "seeds=0,1" in line and "trained at commit=a18ab63" in line
    assert "on device=NVIDIA H100 80GB HBM3" in line and "rendered at commit=92db18c" in line
    assert "cpu" not in line and "NOT paper scale" not in line
    fig = _figure()
    save_figure(fig, "fig", line, "paper", directory=tmp_path)
    side = (tmp_path / "paper" / "fig.json").read_text()
    assert '"rendered_commit": "92db18c00000"' in side and '"a18ab63f0c1d"' in side
    # a Report's registered runs, and a table's own runs
    report = Report("05_x", scale="paper", dataset="fmnist")
    report.runs(runs)
    assert provenance_line("paper", "fmnist", "cpu", 0, runs=report) == line
    report.table("Table I", pd.DataFrame({"acc": [80.0]}), runs=runs["FedAvg"])
    assert report.table_provenance["Table I"]["commits"] == ["a18ab63f0c1d"]
    assert report.table_provenance["Table I"]["seeds"] == [0, 1]


def test_a_run_behind_two_artifacts_of_a_figure_counts_once_in_its_stamp():
    shared, own = _rec(0, "a18ab63f0c1d", "cpu"), _rec(1, "a18ab63f0c1d", "cpu")
    line = provenance_line("quick", "fmnist", "cpu", [], runs=[{"table1": [shared]}, {"table3": [shared, own]}])
    assert "runs=2 " in line and line.fields["runs"]["runs"] == 2


def test_a_figure_without_runs_names_the_rendering_as_such(monkeypatch):
    monkeypatch.setenv("FEDLIB_COMMIT", "92db18c00000")
    line = provenance_line("quick", "fmnist", "cpu", 0)
    assert "seeds=0" in line and "rendered at commit=92db18c00000 on device=cpu" in line and "NOT paper" in line


def test_the_rendering_commit_is_the_last_one_that_changed_code_so_committing_outputs_keeps_figures_unchanged(
        tmp_path, monkeypatch):
    """A commit that only adds records or figures does not change the stamp (re-rendering is byte-identical); a
    code commit does."""
    import subprocess

    from fedlib.companion.provenance import code_commit

    monkeypatch.delenv("FEDLIB_COMMIT", raising=False)
    git = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True,  # noqa: E731
                                    text=True).stdout.strip()
    git("init", "-q")
    git("config", "user.email", "t@t")
    git("config", "user.name", "t")
    (tmp_path / "fedlib").mkdir()
    (tmp_path / "fedlib" / "a.py").write_text("x = 1\n")
    git("add", "-A")
    git("commit", "-qm", "code")
    code = git("rev-parse", "HEAD")[:12]
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "f.json").write_text("{}\n")
    git("add", "-A")
    git("commit", "-qm", "outputs")
    assert code_commit(tmp_path) == code != git("rev-parse", "HEAD")[:12]
    (tmp_path / "fedlib" / "a.py").write_text("x = 2\n")
    assert code_commit(tmp_path) == code + "-dirty"
    git("commit", "-qam", "more code")
    assert code_commit(tmp_path) == git("rev-parse", "HEAD")[:12]


def test_mean_curves_keep_overlapping_methods_visible_and_the_reference_line_off_the_frame():
    import pandas as pd

    from fedlib.companion.plots import mean_curves

    fig, ax = plt.subplots()
    same = pd.Series([0.5, 0.8, 0.85], index=[1, 2, 3])
    mean_curves(ax, {"FedAvg (n=3)": {0: same}, "FedProx (n=3)": {0: same}}, hline=88.9, hline_label="paper")
    a, b = ax.get_lines()[:2]
    assert (a.get_color(), a.get_linestyle()) != (b.get_color(), b.get_linestyle())
    assert ax.get_ylim()[1] > 88.9 + 1
    plt.close(fig)


def test_a_run_shared_by_artifacts_counts_once_in_a_reports_runs_and_minutes():
    a, b = _rec(0, "c", "cpu"), _rec(1, "c", "cpu")
    report = Report("04_x", scale="quick", dataset="fmnist")
    prov = report.runs({"M": [a, b], "metrics": [a]})  # the same record under two artifacts
    assert prov["runs"] == 2 and prov["training_minutes"] == 2.0
    prov = report.runs({"variance": [b, a]})  # and again in a later call
    assert prov["runs"] == 2 and prov["training_minutes"] == 2.0


def test_a_figure_no_run_produced_says_where_and_when_it_was_rendered_and_no_seeds(monkeypatch):
    monkeypatch.setenv("FEDLIB_COMMIT", "92db18c00000")
    line = provenance_line("quick", "synthetic", "cpu", [], runs=None, timed="median of 5 repeats")
    assert "seeds=" not in line and "a18ab63" not in line and "timed=median of 5 repeats" in line
    assert "rendered at commit=92db18c" in line


def test_a_rendering_stamp_names_the_device_without_its_thread_count(monkeypatch):
    import torch

    from fedlib.companion.plots import provenance_line

    lines = set()
    for n in (1, 2):
        monkeypatch.setattr(torch, "get_num_threads", lambda n=n: n)
        lines.add(str(provenance_line("quick", "fmnist", "cpu", [0])))
    assert len(lines) == 1 and "threads" not in next(iter(lines))


def test_t_interval_is_scipys_95_percent_interval_and_none_for_one_seed():
    from scipy import stats

    from fedlib.companion.plots import t_interval

    v = [84.1, 85.0, 85.3, 84.7, 85.9]
    lo, hi = stats.t.interval(0.95, len(v) - 1, loc=np.mean(v), scale=stats.sem(v))
    m, h, n = t_interval(v)
    assert n == 5 and np.isclose(m, np.mean(v)) and np.isclose(h, (hi - lo) / 2)
    assert t_interval([80.0])[0] == 80.0 and np.isnan(t_interval([80.0])[1])
    assert t_interval([float("nan"), None])[2] == 0


def test_group_panels_draw_a_panel_per_group_that_was_run_on_its_own_scale_and_name_the_others():
    from fedlib.companion.plots import group_panels

    fig = plt.figure()
    note = group_panels(fig, {"α = 5": {"FedAvg": {0: 88.0, 1: 88.5}, "FedCKA": {0: 87.5, 1: 88.1}},
                              "α = 0.1": {"FedAvg": {}, "FedCKA": {}},
                              "α = 1": {"FedAvg": {0: 70.0, 1: 71.0}}})
    assert [ax.get_title() for ax in fig.axes] == ["α = 5", "α = 1"]
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["FedAvg", "FedCKA"]
    lo, hi = fig.axes[0].get_ylim()
    assert 80 < lo < 87.5 and 88.5 < hi < 95  # the panel spans its values, not 0-100: a 0.5-point gap shows
    assert fig.axes[1].get_ylim()[1] < 80
    assert note == "2 seeds (0,1); bars: 95 % t interval of the mean; not run yet: α = 0.1"
    plt.close(fig)


def test_a_sweep_of_two_settings_is_dots_not_a_line_and_three_are_a_line():
    from fedlib.companion.plots import sweep

    fig, ax = plt.subplots()
    sweep(ax, {"FedAvg": {1: {0: 80.0, 1: 81.0}, 6: {0: 85.0, 1: 85.5}},
               "FedIntR": {1: {0: 80.0}, 6: {0: 85.0}, 10: {0: 86.0}}}, xlabel="E")
    lines = {c.get_label(): c.lines[0].get_linestyle() for c in ax.containers}
    assert lines == {"FedAvg (n=2)": "None", "FedIntR (n=1)": "-"}
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "6", "10"]
    plt.close(fig)


def test_a_title_says_how_many_seeds_each_point_has_when_they_differ():
    from fedlib.companion.plots import group_panels, mean_curves, seeds_note, sweep

    assert seeds_note(range(5), counts=[5, 5]) == "5 seeds (0-4); bars: 95 % t interval of the mean"
    assert seeds_note(range(5), counts=[2, 5, 4]).startswith("5 seeds (0-4), 2 to 5 per point; bars:")
    fig, ax = plt.subplots()
    note = sweep(ax, {"FedAvg": {1: {0: 80.0, 1: 81.0}, 6: {0: 85.0, 1: 85.5, 2: 85.1}},
                      "FedIntR": {1: {1: 80.0, 2: 80.5}}}, xlabel="E")
    assert note.startswith("3 seeds (0-2), 2 to 3 per point; bars")
    note = group_panels(plt.figure(), {"β = 5": {"FedAvg": {0: 88.0, 1: 88.5}, "FedIntR": {2: 87.5, 3: 88.1}}})
    assert note.startswith("4 seeds (0-3), 2 per point; bars")
    note = mean_curves(ax, {"FedAvg": {0: pd.Series([0.5, 0.6]), 1: pd.Series([0.5, 0.7])},
                            "FedIntR": {0: pd.Series([0.5, 0.6])}})
    assert note.startswith("2 seeds (0,1), 1 to 2 per curve; band")
    plt.close(fig)


def test_runs_off_their_plateau_are_ringed_in_sweeps_and_panels_and_the_note_says_so():
    from fedlib.companion.plots import OFF_NOTE, OFF_SEEDS_NOTE, group_panels, sweep

    fig, ax = plt.subplots()
    pts = {"FedAvg": {1: {0: 80.0, 1: 82.0}, 6: {0: 85.0, 1: 85.5}}}
    assert sweep(ax, pts, xlabel="E", off={"FedAvg": {6: 0}}).count("\n") == 0 and not ax.texts
    note = sweep(ax, pts, xlabel="E", off={"FedAvg": {1: 2}})
    assert note.endswith("\n" + OFF_NOTE) and [t.get_text() for t in ax.texts] == ["2 of 2 still rising"]
    assert [ln.get_ydata()[0] for ln in ax.get_lines() if ln.get_markersize() == 14] == [81.0]
    plt.close(fig)
    fig = plt.figure()
    groups = {"α = 5": {"FedAvg": {0: 88.0, 1: 88.5}, "MOON": {0: 87.5, 1: 88.1}}}
    note = group_panels(fig, groups, off={"α = 5": {"MOON": [1]}})
    rings = [ln for ln in fig.axes[0].get_lines() if ln.get_markeredgecolor() == "tab:red"]
    assert note.endswith("\n" + OFF_SEEDS_NOTE) and len(rings) == 1 and list(rings[0].get_ydata()) == [88.1]
    assert "\n" not in group_panels(plt.figure(), groups, off={"α = 5": {"MOON": []}})
    plt.close("all")


def test_a_method_with_diverged_seeds_gets_no_mean_only_its_finished_seeds_and_the_count_under_its_name():
    from fedlib.companion.plots import DIVERGED_NOTE, group_panels

    fig = plt.figure()
    groups = {"α = 0.1": {"FedAvg": {0: 86.0, 1: 87.0}, "SCAFFOLD": {3: 88.6}}, "α = 5": {"SCAFFOLD": {}}}
    note = group_panels(fig, groups, diverged={"α = 0.1": {"SCAFFOLD": 4, "FedAvg": 0}, "α = 5": {"SCAFFOLD": 5}})
    low, every = fig.axes
    means = [ln for ln in low.get_lines() if ln.get_marker() == "o"]
    assert [list(ln.get_ydata()) for ln in means] == [[86.5]]  # FedAvg's mean only
    ticks = [t.get_text() for t in low.get_xticklabels()]
    assert ticks == ["FedAvg", "SCAFFOLD: × 4 of 5 diverged"] and not low.texts  # nothing on the data axis
    assert [t.get_text() for t in every.get_xticklabels()] == ["SCAFFOLD: × 5 of 5 diverged"]
    assert "2 per point" in note
    noted = {s["label"]: s for s in low._fedlib_series}
    assert noted["SCAFFOLD"]["planned"] == 5 and noted["SCAFFOLD"]["marked"] and noted["FedAvg"]["n"] == 2
    assert DIVERGED_NOTE in note and DIVERGED_NOTE not in group_panels(plt.figure(), {"α = 5": groups["α = 0.1"]})
    plt.close("all")


def test_similarity_heatmaps_blank_the_diagonal_and_colour_the_off_diagonal_on_its_own_range():
    from fedlib.companion.plots import offdiag_range, similarity_heatmap

    m = np.array([[1.0, 0.96, 0.92], [0.96, 1.0, 0.94], [0.92, 0.94, 1.0]])
    fig, ax = plt.subplots()
    im = similarity_heatmap(ax, m, ["c0", "c1", "c2"])
    assert im.get_clim() == (0.92, 0.96) and offdiag_range([m]) == (0.92, 0.96)
    written = [t.get_text() for t in ax.texts]
    assert "0.96" in written and "1.00" not in written and len(written) == 6  # the diagonal is blank
    assert all(t.get_fontsize() >= 8 for t in ax.texts)
    big = similarity_heatmap(plt.subplots()[1], np.eye(12), vrange=(0.0, 1.0))
    assert big.get_clim() == (0.0, 1.0) and not big.axes.texts  # no room for legible numbers: none
    plt.close("all")


def test_mean_curves_shade_the_interval_over_seeds_and_say_so():
    from fedlib.companion.plots import mean_curves

    fig, ax = plt.subplots()
    r = pd.Series([0.5, 0.7, 0.8], index=[1, 2, 3])
    note = mean_curves(ax, {"FedAvg": {0: r, 1: r + 0.01, 2: r - 0.01}, "FedIntR (μ=10)": {0: r}})
    assert note == "3 seeds (0-2), 1 to 3 per curve; band: 95 % t interval of the mean"
    assert len(ax.collections) == 1 and np.allclose(ax.lines[0].get_ydata(), [50, 70, 80])
    plt.close(fig)


def test_a_figure_whose_runs_are_all_pending_is_not_saved_and_one_with_a_finished_run_is(monkeypatch):
    import fedlib.companion.report

    saved = []
    stamps = {}
    monkeypatch.setattr(fedlib.companion.report, "save_figure",
                        lambda fig, name, prov, scale: stamps.update({name: str(prov)}) or saved.append(name) or [name])
    pend = [Pending(Config(dataset="fmnist", seed=s).key(), Config(dataset="fmnist", seed=s).to_dict())
            for s in (0, 1)]
    report = Report("03_x", scale="paper", dataset="fmnist")
    report.runs({"table2": pend})
    assert report.save_figure(_figure(), "empty") == [] and saved == []
    assert "empty" not in report.meta.get("figures", [])
    assert report.save_figure(_figure(), "one", runs=[_rec(0, "c", "cpu"), pend[1]]) == ["one"]
    report.runs({"fig5": [_rec(2, "c", "cpu")]})
    assert report.save_figure(_figure(), "registered") == ["registered"] and saved == ["one", "registered"]
    assert report.save_figure(_figure(), "timings", runs=None) == ["timings"]  # no training run behind it
    report.save_figure(_figure(), "bench", runs=None, scale="quick")  # a stored benchmark's scale, not the notebook's
    assert "scale=quick" in stamps["bench"] and "NOT paper scale" in stamps["bench"]
    assert "scale=paper" in stamps["timings"]


def test_a_seed_band_past_100_percent_stays_on_the_accuracy_axis():
    """Three seeds far apart early on: the mean's 95 % t band reaches past 100 %, the axis stops at 100."""
    from fedlib.companion.plots import mean_curves

    fig, ax = plt.subplots()
    mean_curves(ax, {"FedAvg": {s: pd.Series([a, 0.9], index=[1, 2]) for s, a in enumerate((0.2, 0.6, 0.95))}})
    assert ax.get_ylim()[1] == 100.0 and ax.get_ylim()[0] >= 0.0
    plt.close(fig)


def test_a_seed_band_below_zero_keeps_a_log_loss_axis_near_the_seeds():
    """Two seeds' losses far apart: the band's lower edge is at or below zero, and the log axis stays within a
    factor 2 of the lowest seed instead of running down decades."""
    from fedlib.companion.plots import mean_curves

    fig, ax = plt.subplots()
    mean_curves(ax, {"FedAvg": {0: pd.Series([1.2, 0.3, 0.25]), 1: pd.Series([1.4, 0.6, 0.26])}},
                percent=False, logy=True)
    assert ax.get_ylim()[0] >= 0.125 and ax.get_ylim()[1] <= 2.8
    plt.close(fig)


def test_the_papers_table_panel_fits_each_cells_text():
    """A long row label ("Adam + StepLR") is drawn inside its cell, not cut off by a fixed column width."""
    from fedlib.companion.plots import paper_panel

    fig, ax = plt.subplots(figsize=(3, 2))
    paper_panel(ax, [["Adam", "71.71", "76.87", "77.05"], ["Adam + StepLR", "74.54", "75.71", "75.97"]],
                ["optimizer", "non-fed.", "FedAvg", "FedER"], "title")
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    table = ax.tables[0]
    for cell in table.get_celld().values():
        assert cell.get_text().get_window_extent(renderer).width <= cell.get_window_extent(renderer).width
    plt.close(fig)
