"""Tests for fedlib.companion.similarity: FedCKA's layer-wise CKA between clients and the global model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedlib.config import Config
from fedlib.engine import Engine, clone_params
from fedlib.models import representations
from fedlib.kernels import linear_cka
from fedlib.companion.similarity import (LayerSimilarity, layer_cka, layer_cka_between_clients, layer_cka_to_global,
                               layer_similarity, pair_stats)

TAPS = ("conv1", "conv2", "fc1", "fc2", "l1", "l2", "l3")


@pytest.fixture(scope="module")
def setup(tiny_data):
    """An engine for the FedCKA simple CNN, a global model and 4 differently perturbed 'client' models."""
    cfg = Config(dataset="synthetic", model="simple_cnn", partition="iid", partition_kw={}, num_clients=4,
                 rounds=1, local_epochs=1, batch_size=64, lr=0.05, seed=0)
    eng = Engine(cfg, data=tiny_data, progress=False)
    glob = clone_params(eng.global_params)
    clients = {}
    for c in range(4):
        g = torch.Generator().manual_seed(100 + c)
        clients[c] = {k: v + 0.05 * (c + 1) * torch.randn(v.shape, generator=g, dtype=v.dtype)
                      for k, v in glob.items()}
    x = tiny_data.x_test[:60]
    return eng.model, glob, clients, x


def test_identical_clients_give_one_everywhere(setup):
    eng, glob, _, x = setup
    same = {c: clone_params(glob) for c in range(3)}
    sim = layer_similarity(eng, same, glob, x, TAPS)
    np.testing.assert_allclose(sim.to_global, 1.0, atol=1e-10)
    np.testing.assert_allclose(sim.between, 1.0, atol=1e-10)
    mean, var = pair_stats(sim.between)
    np.testing.assert_allclose(mean, 1.0, atol=1e-10)
    np.testing.assert_allclose(var, 0.0, atol=1e-18)


def test_shapes_symmetry_and_range(setup):
    eng, glob, clients, x = setup
    sim = layer_similarity(eng, clients, glob, x, TAPS)
    assert isinstance(sim, LayerSimilarity)
    assert sim.to_global.shape == (4, len(TAPS))
    assert sim.between.shape == (len(TAPS), 4, 4)
    assert sim.clients == (0, 1, 2, 3) and sim.taps == TAPS
    np.testing.assert_allclose(sim.between, sim.between.transpose(0, 2, 1), atol=1e-12)
    np.testing.assert_allclose(np.diagonal(sim.between, axis1=1, axis2=2), 1.0, atol=1e-10)
    assert np.all(sim.to_global >= -1e-12) and np.all(sim.to_global <= 1 + 1e-12)
    assert np.all(sim.between >= -1e-12) and np.all(sim.between <= 1 + 1e-12)
    assert np.all(sim.to_global < 1 - 1e-6)  # the perturbations change every layer
    df = sim.frame()
    assert list(df.index) == list(TAPS)
    np.testing.assert_allclose(df["CKA(client, global) mean"], sim.to_global.mean(0))
    np.testing.assert_allclose(df["CKA(client, client) mean"], sim.pair_mean())
    np.testing.assert_allclose(df["CKA(client, client) var"], sim.pair_var())


def test_agrees_with_a_loop_of_linear_cka(setup):
    eng, glob, clients, x = setup
    to_g = layer_cka_to_global(eng, clients, glob, x, TAPS)
    between = layer_cka_between_clients(eng, clients, x, TAPS)
    reps = {c: representations(eng, p, x, TAPS) for c, p in clients.items()}
    g_reps = representations(eng, glob, x, TAPS)
    for li in range(len(TAPS)):
        for c in range(4):
            assert to_g[c, li] == pytest.approx(linear_cka(reps[c][li], g_reps[li]).item(), abs=1e-10)
            for d in range(4):
                assert between[li, c, d] == pytest.approx(linear_cka(reps[c][li], reps[d][li]).item(), abs=1e-10)
    sim = layer_similarity(eng, clients, glob, x, TAPS)
    np.testing.assert_allclose(sim.to_global, to_g, atol=1e-12)
    np.testing.assert_allclose(sim.between, between, atol=1e-12)


def test_small_max_bytes_gives_the_same_matrix(setup):
    eng, glob, clients, x = setup
    models = [glob, *clients.values()]
    np.testing.assert_allclose(layer_cka(eng, models, x, TAPS[:3], max_bytes=1),
                               layer_cka(eng, models, x, TAPS[:3]), atol=1e-12)


def test_clients_are_sorted_by_id(setup):
    eng, glob, clients, x = setup
    shuffled = {c: clients[c] for c in (2, 0, 3, 1)}
    a = layer_similarity(eng, clients, glob, x, TAPS[:2])
    b = layer_similarity(eng, shuffled, glob, x, TAPS[:2])
    assert b.clients == (0, 1, 2, 3)
    np.testing.assert_allclose(a.to_global, b.to_global)
    np.testing.assert_allclose(a.between, b.between)


def test_pair_stats_uses_pairs_above_the_diagonal():
    m = np.array([[[1.0, 0.2, 0.4], [0.2, 1.0, 0.9], [0.4, 0.9, 1.0]]])
    mean, var = pair_stats(m)
    np.testing.assert_allclose(mean, [0.5])
    np.testing.assert_allclose(var, [np.var([0.2, 0.4, 0.9])])
    with pytest.raises(ValueError):
        pair_stats(np.ones((2, 1, 1)))
    with pytest.raises(ValueError):
        pair_stats(np.ones((2, 3)))


def test_empty_inputs_raise(setup):
    eng, glob, _, x = setup
    with pytest.raises(ValueError):
        layer_cka(eng, [], x, TAPS)
    with pytest.raises(ValueError):
        layer_cka(eng, [glob], x, ())


def test_cka_heatmap_draws_annotated_cells():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fedlib.companion.similarity import cka_heatmap

    fig, ax = plt.subplots()
    m = np.array([[0.9, 0.2, 0.5], [0.8, 0.1, 0.4]])
    im = cka_heatmap(ax, m, ["client 0", "client 1"], ["conv1", "conv2", "fc1"])
    assert im.get_array().shape == (2, 3)
    assert [t.get_text() for t in ax.texts] == ["0.90", "0.20", "0.50", "0.80", "0.10", "0.40"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["conv1", "conv2", "fc1"]
    plt.close(fig)
