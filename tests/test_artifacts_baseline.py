"""The partitions' and the baselines' artifacts (notebooks 00, 01): tidy tables, legible partition figures, the
paper's FedIntR Table I numbers beside ours and drawn, pending and diverged runs named as such."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402

from fedlib.artifacts.baseline import (ALPHAS, dirichlet_stats, label_entropy, partition_checks,  # noqa: E402
                                       partition_figure)
from fedlib.partition import dirichlet, label_groups, shards  # noqa: E402

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
