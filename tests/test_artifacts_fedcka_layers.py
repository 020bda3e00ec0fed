"""FedCKA's layer-similarity artifacts (notebook 02): the per-layer table over seeds, heatmaps whose colour scale
and precision show the early-vs-late-layer pattern, a pending run named as such."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from fedlib.artifacts.fedcka_layers import (PAPER_SIMILAR_LAYERS, R50_TAPS, between_figure,  # noqa: E402
                                            client_matrices_figure, describe_runs, layer_orders, layer_table,
                                            resnet50_artifact, resnet50_left_out, runs_table, setup_text,
                                            to_global_figure)
from fedlib.config import Config  # noqa: E402
from fedlib.results import Pending, Record  # noqa: E402
from fedlib.similarity import LayerSimilarity  # noqa: E402

TAPS = ("conv1", "conv2", "fc1", "fc2", "l1", "l2", "l3")


def _sim(seed: int = 0, taps=TAPS, n: int = 4) -> LayerSimilarity:
    """Early layers near 1 across clients, later layers lower and more spread (the papers' pattern)."""
    rng = np.random.default_rng(seed)
    level = np.linspace(0.999, 0.94, len(taps))
    to_global = np.clip(level + rng.normal(0, 0.002, (n, len(taps))), 0, 1)
    between = np.empty((len(taps), n, n))
    for i, lv in enumerate(level):
        m = np.clip(lv - 0.01 + rng.normal(0, 0.003 * i, (n, n)), 0, 1)
        between[i] = (m + m.T) / 2
        np.fill_diagonal(between[i], 1.0)
    return LayerSimilarity(tuple(taps), tuple(range(n)), to_global, between)


def _rec(seed: int) -> Record:
    cfg = Config(seed=seed, rounds=2)
    return Record(key=cfg.key(), config=cfg.to_dict(), history=[{"round": 1, "test_acc": 0.5},
                                                                 {"round": 2, "test_acc": 0.8}],
                  provenance={"wall_time_s": 60.0, "device": "cpu"}, partition_hash="", final_params_hash="")


def test_layer_table_averages_the_seeds_and_is_pending_while_one_is_missing():
    sims = {0: _sim(0), 1: _sim(1)}
    table = layer_table(sims)
    assert list(table.index) == list(TAPS) and table.shape == (len(TAPS), 4)
    expected = (sims[0].frame() + sims[1].frame()) / 2
    assert np.allclose(table.to_numpy(), expected.to_numpy(), atol=1e-6)
    assert "conv1 > conv2" in layer_orders(table) and "conv1, conv2" not in layer_orders(table)
    cfg = Config(seed=2)
    pending = layer_table({0: _sim(0), 2: Pending(cfg.key(), cfg.to_dict())})
    assert pending.iloc[0, 0] == "pending"


def test_to_global_heatmap_shows_three_decimals_on_the_datas_colour_range():
    sim = _sim()
    fig = to_global_figure(sim, setup_text(Config(), "fmnist", 0))
    ax = fig.axes[0]
    im = ax.get_images()[0]
    lo, hi = im.get_clim()
    assert lo < sim.to_global.min() and lo > 0.5 and hi <= 1.0  # not 0–1, not a fixed 0.9–1
    texts = [t.get_text() for t in ax.texts]
    assert len(texts) == sim.to_global.size and all(len(t.split(".")[1]) == 3 for t in texts)
    assert len(set(texts)) > len(TAPS)  # the annotations tell the layers apart
    assert len(fig.axes) == 2 and "CKA" in fig.axes[1].get_ylabel()  # a labelled colour bar
    assert "Fashion-MNIST" in ax.get_title() and "CIFAR-10" in ax.get_title()


def test_client_matrices_leave_the_diagonal_blank_and_share_one_scale_over_every_layer():
    sim = _sim()
    fig = client_matrices_figure(sim, "setup")
    panels = [ax for ax in fig.axes if ax.get_images()]
    assert [ax.get_title().split(":")[0] for ax in panels] == list(TAPS)  # every layer, as Appl. Sci. Fig. 2
    data = panels[0].get_images()[0].get_array()
    assert np.ma.getmaskarray(data).diagonal().all() or np.isnan(np.asarray(data.filled(np.nan))).diagonal().all()
    clims = {ax.get_images()[0].get_clim() for ax in panels}
    assert len(clims) == 1
    lo, hi = clims.pop()
    off = sim.between[:, ~np.eye(4, dtype=bool)]
    assert lo < off.min() and hi >= off.max() and hi <= 1.0
    assert sum(1 for ax in fig.axes if not ax.get_images() and ax.get_visible() and ax.get_ylabel()) == 1  # colour bar


def test_between_figure_draws_both_comparisons_with_distinct_styles():
    fig = between_figure(_sim(), "setup")
    ax1, ax2 = fig.axes[:2]
    styles = {(ln.get_color(), ln.get_linestyle(), ln.get_marker()) for ln in ax2.get_lines()}
    assert len(styles) == 2 and ax2.get_yscale() == "log"
    assert [t.get_text() for t in ax1.get_xticklabels()] == list(TAPS)


def test_resnet50_panel_shades_the_papers_layers_and_says_why_it_is_missing():
    sim = _sim(taps=R50_TAPS)
    frame, fig = resnet50_artifact(sim, _rec(0), "cifar10")
    assert list(frame.index) == list(R50_TAPS)
    assert len(fig.axes[0].patches) == len(PAPER_SIMILAR_LAYERS["ResNet-50"])
    assert "CIFAR-10" in fig.axes[0].get_title() and "80.0 %" in fig.axes[0].get_title()
    assert "not run" in resnet50_left_out({}, {"x": "too slow on a CPU"}, "quick")
    cfg = Config()
    assert "pending" in resnet50_left_out({0: Pending(cfg.key(), cfg.to_dict())}, {}, "paper")
    assert resnet50_left_out({0: sim}, {}, "paper") is None


def test_runs_table_and_description_name_pending_runs():
    cfg = Config(seed=1)
    records = {0: _rec(0), 1: Pending(cfg.key(), cfg.to_dict())}
    table = runs_table(records, 200)
    assert table.loc[0, "test acc (%)"] == pytest.approx(80.0) and table.loc[1, "test acc (%)"] == "pending"
    assert "pending" in describe_runs(records, None, "fmnist", 200)
    assert "linear CKA on 200 test images" in describe_runs(records, _sim(), "fmnist", 200)
