"""FedCKA's layer-similarity artifacts (notebook 02): the per-layer table over seeds, heatmaps whose colour scale
and precision show the early-vs-late-layer pattern, a pending run named as such."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from fedlib.companion.papers.fedcka.layers import (PAPER_SIMILAR_LAYERS, R50_TAPS, between_figure,  # noqa: E402
                                            client_matrices_figure, describe_between, describe_matrices,
                                            describe_runs, describe_to_global, layer_orders, layer_table,
                                            resnet50_artifact, resnet50_left_out, seed_table, setup_text, stored,
                                            to_global_figure)
from fedlib.config import Config  # noqa: E402
from fedlib.companion.results import Pending, Record  # noqa: E402
from fedlib.companion.similarity import LayerSimilarity  # noqa: E402

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


def test_to_global_heatmap_colours_its_own_range_with_every_value_written():
    sim = _sim()
    fig = to_global_figure(sim, setup_text(Config(), "fmnist", 0))
    ax = fig.axes[0]
    lo, hi = ax.collections[0].get_clim()
    assert (lo, hi) == (pytest.approx(sim.to_global.min()), pytest.approx(sim.to_global.max()))  # not 0–1
    texts = [t.get_text() for t in ax.texts]
    assert len(texts) == sim.to_global.size and all(len(t.split(".")[1]) == 3 for t in texts)
    assert all(t.get_fontsize() >= 8 for t in ax.texts)
    assert [t.get_text() for t in ax.get_xticklabels()] == list(TAPS)
    assert len(fig.axes) == 2 and "range" in fig.axes[1].get_ylabel()  # the colour bar says what its colours span
    title = ax.get_title()
    assert "Fashion-MNIST" in title and "seed 0" in title and "CIFAR-10" in title
    assert f"{sim.to_global.mean(0)[0]:.3f} at conv1" in title


def test_client_matrices_leave_the_diagonal_blank_on_the_off_diagonal_range():
    sim = _sim()
    fig = client_matrices_figure(sim, "setup")
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_title()]
    assert [ax.get_title().split(":")[0] for ax in panels] == list(TAPS)  # every layer, as Appl. Sci. Fig. 2
    data = np.ma.filled(panels[0].collections[0].get_array(), np.nan).reshape(4, 4)
    assert np.isnan(np.diagonal(data)).all()
    off = ~np.eye(4, dtype=bool)
    lo, hi = min(m[off].min() for m in sim.between), max(m[off].max() for m in sim.between)
    assert all(ax.collections[0].get_clim() == (pytest.approx(lo), pytest.approx(hi)) for ax in panels)
    assert not any(ax.texts for ax in panels)  # no numbers too small to read
    bars = [ax for ax in fig.axes if ax.get_visible() and "range" in ax.get_ylabel()]
    assert len(bars) == 1  # one colour bar, which says what its colours span


def test_between_figure_averages_the_seeds_with_t_intervals_and_distinct_styles():
    sims = {0: _sim(0), 1: _sim(1), 2: _sim(2)}
    fig = between_figure(sims, "setup")
    ax1, ax2 = fig.axes[:2]
    series = [ln for ln in ax1.get_lines() if ln.get_marker() != "_"]
    assert len({(ln.get_color(), ln.get_linestyle(), ln.get_marker()) for ln in series}) == 2
    assert ax2.get_yscale() == "log"
    assert [t.get_text() for t in ax1.get_xticklabels()] == list(TAPS)
    mean = np.mean([s.pair_mean() for s in sims.values()], 0)
    assert np.allclose(series[0].get_ydata(), mean)
    assert "3 seeds (0-2)" in fig.get_suptitle() and "95 % t" in fig.get_suptitle()


def test_resnet50_panel_shades_the_papers_layers_and_says_why_it_is_missing():
    sim = _sim(taps=R50_TAPS)
    frame, fig = resnet50_artifact({0: sim}, {0: _rec(0)}, "cifar10")
    assert list(frame.index) == list(R50_TAPS)
    assert len(fig.axes[0].patches) == len(PAPER_SIMILAR_LAYERS["ResNet-50"])
    title = fig.axes[0].get_title()
    assert "CIFAR-10" in title and "80.0 %" in title and "1 seed (0)" in title
    assert "not run" in resnet50_left_out({}, {"x": "too slow on a CPU"}, "quick")
    cfg = Config()
    assert "pending" in resnet50_left_out({0: Pending(cfg.key(), cfg.to_dict())}, {}, "paper")
    assert resnet50_left_out({0: sim}, {}, "paper") is None


def test_descriptions_state_the_numbers_and_say_pending_without_runs():
    sim, cfg = _sim(), Config(seed=1)
    text = describe_to_global(sim, 0)
    assert text.startswith("Seed 0") and f"conv1 {sim.to_global[:, 0].mean():.3f}" in text
    assert "pending" in describe_to_global(None, None) and "pending" in describe_matrices(None, None)
    sims = {0: _sim(0), 1: _sim(1), 2: Pending(cfg.key(), cfg.to_dict())}
    assert list(stored(sims)) == [0, 1]
    between = describe_between(sims)
    mean = np.mean([sims[s].pair_mean() for s in (0, 1)], 0)
    assert "seeds 0, 1 (2 pending)" in between and f"{mean[0]:.3f} (conv1)" in between
    assert "conv1 and conv2 (as the paper says)" in between
    assert "pending" in describe_between({2: sims[2]})
    iu = np.triu_indices(4, 1)
    assert f"conv2 [{sim.between[1][iu].min():.3f}, {sim.between[1][iu].max():.3f}]" in describe_matrices(sim, 0)


def test_seed_table_and_description_name_pending_runs():
    cfg = Config(seed=1)
    records = {0: _rec(0), 1: Pending(cfg.key(), cfg.to_dict())}
    table = seed_table(records, 200)
    assert table.loc[0, "test acc (%)"] == pytest.approx(80.0) and table.loc[1, "test acc (%)"] == "pending"
    assert "pending" in describe_runs(records, None, "fmnist", 200)
    assert "linear CKA on 200 test images" in describe_runs(records, _sim(), "fmnist", 200)
