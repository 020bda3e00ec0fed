"""The partitions' and the baselines' artifacts (notebooks 00, 01): tidy tables, legible partition figures, the
paper's FedIntR Table I numbers beside ours and drawn, pending and diverged runs named as such."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402

from fedlib.artifacts.baseline import (ALPHAS, PAPER_T1, baseline_verdicts, curves_figure,  # noqa: E402
                                       dirichlet_stats, label_entropy, partition_checks, partition_figure,
                                       runs_table, summary_table, versus_paper)
from fedlib.config import Config  # noqa: E402
from fedlib.grid import Diverged  # noqa: E402
from fedlib.partition import dirichlet, label_groups, shards  # noqa: E402
from fedlib.results import Pending, Record  # noqa: E402

LABELS = np.repeat(np.arange(10), 60)
TEST_LABELS = np.repeat(np.arange(10), 20)


def test_label_entropy_is_one_for_uniform_and_zero_for_a_single_class():
    ent = label_entropy(np.array([[5, 5, 5, 5], [7, 0, 0, 0]]))
    assert np.allclose(ent, [1.0, 0.0])


def test_dirichlet_stats_and_figure_one_row_and_one_panel_per_alpha_without_cell_labels():
    parts = {a: dirichlet(LABELS, 10, a, 0) for a in ALPHAS}
    stats = dirichlet_stats(parts)
    assert list(stats.index) == list(ALPHAS) and "partition hash" in stats.columns
    fig = partition_figure(parts, "fmnist", "dirichlet")
    panels = [ax for ax in fig.axes if ax.get_images()]
    assert len(panels) == len(ALPHAS)
    assert all(not ax.texts for ax in panels)  # no per-cell count labels
    assert [ax.get_title().split(" —")[0] for ax in panels] == [f"α = {a:g}" for a in ALPHAS]
    assert len({ax.get_images()[0].norm.vmax for ax in panels}) == 1  # one colour scale: the panels compare
    assert len(fig.axes) == len(ALPHAS) + 1  # and one colour bar
    assert "Fashion-MNIST" in fig.get_suptitle() and "CIFAR-10" in fig.get_suptitle()


def test_shard_figure_has_a_colour_bar_per_panel_and_the_checks_hold():
    shard_parts = {f"10 clients, s = {s}": shards(LABELS, 10, s, 0, test_labels=TEST_LABELS) for s in (2, 5)}
    groups = label_groups(LABELS, seed=0, test_labels=TEST_LABELS)
    fig = partition_figure({**{f"shards: {k}": p for k, p in shard_parts.items()}, "label groups": groups},
                           "cifar10", "shards")
    assert len([ax for ax in fig.axes if ax.get_images()]) == 3 and len(fig.axes) == 6
    assert "CIFAR-10" in fig.get_suptitle()
    parts = {a: dirichlet(LABELS, 10, a, 0) for a in (5.0, 0.1)}
    checks = partition_checks(LABELS, TEST_LABELS, parts, shard_parts, groups)
    assert len(checks) == 6 and all(c.ok for c in checks), [c for c in checks if not c.ok]


def test_partition_checks_catch_a_partition_that_drops_samples():
    parts = {a: dirichlet(LABELS, 10, a, 0) for a in (5.0, 0.1)}
    shard_parts = {"10 clients, s = 2": shards(LABELS, 10, 2, 0, test_labels=TEST_LABELS)}
    groups = label_groups(LABELS, seed=0, test_labels=TEST_LABELS)
    checks = partition_checks(np.concatenate([LABELS, [0]]), TEST_LABELS, parts, shard_parts, groups)
    assert not next(c for c in checks if c.text.startswith("Every training sample")).ok


def _rec(cfg: Config, accs, time_s: float = 2.0) -> Record:
    hist = [{"round": i + 1, "test_acc": a, "time_s": time_s} for i, a in enumerate(accs)]
    return Record(key=cfg.key(), config=cfg.to_dict(), history=hist,
                  provenance={"executor": "sequential", "device": "cpu"}, partition_hash="", final_params_hash="")


def _records(prox: str = "done"):
    out = {}
    for s in (0, 1, 2):
        avg = Config(seed=s, rounds=3)
        prox_cfg = avg.replace(strategy="fedprox", strategy_kw={"mu": 0.001})
        out[f"FedAvg | seed={s}"] = _rec(avg, [0.5, 0.8, 0.84 + 0.01 * s])
        out[f"FedProx (μ=0.001) | seed={s}"] = (
            _rec(prox_cfg, [0.5, 0.8, 0.85 + 0.01 * s]) if prox == "done" or s else
            Pending(prox_cfg.key(), prox_cfg.to_dict()) if prox == "pending" else
            Diverged(prox_cfg.key(), prox_cfg.to_dict(), 2, "loss is nan"))
    return out


def test_runs_and_summary_tables_give_mean_std_and_the_paper_beside_ours():
    per_run = runs_table(_records(), last=1)
    assert list(per_run["method"].unique()) == ["FedAvg", "FedProx (μ=0.001)"] and len(per_run) == 6
    assert np.allclose(per_run.loc[per_run.method == "FedAvg", "final"], [84, 85, 86])
    summary = summary_table(per_run)
    assert summary.loc["FedAvg", "final test acc (%)"] == "85.00 ± 1.00"
    assert summary.loc["FedProx (μ=0.001)", "seeds done / planned"] == "3 / 3"
    versus = versus_paper(per_run)
    assert list(versus.index) == list(PAPER_T1["fmnist"])
    assert versus.loc["FedAvg", "paper (%)"] == PAPER_T1["fmnist"]["FedAvg"]
    assert versus.loc["FedAvg", "diff"] == round(85.0 - PAPER_T1["fmnist"]["FedAvg"], 2)


def test_pending_and_diverged_runs_are_named_and_decide_nothing():
    for status in ("pending", "diverged"):
        per_run = runs_table(_records(prox=status), last=1)
        assert (per_run["status"] == status).sum() == 1 and per_run["final"].isna().sum() == 1
        expected = "86.50 ± 0.71" if status == "pending" else "diverged"  # the seeds done, or no mean at all
        assert summary_table(per_run).loc["FedProx (μ=0.001)", "final test acc (%)"] == expected
        verdicts = baseline_verdicts(per_run, "quick", "fmnist")
        within = next(v for v in verdicts if v.claim.startswith("FedProx"))
        assert within.verdict == ("pending" if status == "pending" else "not testable at this scale")
    done = baseline_verdicts(runs_table(_records(), last=1), "quick", "fmnist")
    assert [v.verdict for v in done[1:]] == ["not testable at this scale"]  # the fidelity target: not paper scale
    assert done[0].verdict in {"reproduced", "contradicted", "inconclusive"}
    assert all(v.control for v in done)  # the paper makes neither claim: both are the project's controls


def test_curves_figure_has_headroom_above_the_paper_line_and_labels_it():
    per_run = runs_table(_records(), last=1)
    ax = curves_figure(_records(), per_run, "fmnist", "quick").axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert {"FedAvg (n=3)", "FedProx (μ=0.001) (n=3)"} <= set(lines)
    paper = next(k for k in lines if "88.90 %" in k)
    assert paper.startswith("FedIntR Table I, Fashion-MNIST: 88.90 %")
    assert any("88.95 %" in k for k in lines)
    assert ax.get_ylim()[1] > max(PAPER_T1["fmnist"].values()) + 1  # the paper's line is off the top frame
    styles = {(ln.get_color(), ln.get_linestyle(), ln.get_linewidth()) for k, ln in lines.items() if "(n=3)" in k}
    assert len(styles) == 2
    assert "Fashion-MNIST" in ax.get_title()
    other = curves_figure(_records(), per_run, "svhn", "quick").axes[0]
    assert any("SVHN: 86.04 %" in ln.get_label() for ln in other.get_lines())
    pending = {k: Pending(r.key, r.config) for k, r in _records().items()}
    assert curves_figure(pending, runs_table(pending, last=1), "fmnist", "quick") is None
