"""FedBABU, FedSHIBU, FedAvg+CRSM and local-only: the behaviours their papers' comparisons rest on."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedlib.config import Config, ConfigError
from fedlib.crsm import crsm, mix, row_weights
from fedlib.engine import Engine


def cfg(**kw) -> Config:
    base = dict(dataset="synthetic", model="intr_cnn", partition="iid", partition_kw={}, num_clients=5, rounds=2,
                local_epochs=1, batch_size=32, lr=0.05, momentum=0.9, weight_decay=0.0, augment="none", seed=1,
                executor="sequential")
    base.update(kw)
    return Config(**base)


def trained(c: Config, data) -> Engine:
    eng = Engine(c, data=data, progress=False)
    eng.run()
    return eng


def close(a, b, atol=1e-5):
    for k in a:
        torch.testing.assert_close(b[k], a[k], atol=atol, rtol=1e-4, msg=lambda m: f"{k}: {m}")


def test_mix_is_one_weighted_sum_per_client():
    g = torch.Generator().manual_seed(0)
    models = [{"w": torch.randn(3, 2, generator=g), "n": torch.tensor(i)} for i in range(4)]
    W = row_weights(torch.rand(4, 4, generator=g, dtype=torch.float64))
    out = mix(models, W, ["w", "n"])
    for i in range(4):
        ref = sum(float(W[i, j]) * models[j]["w"] for j in range(4))
        torch.testing.assert_close(out[i]["w"], ref)
        assert out[i]["n"] == round(sum(float(W[i, j]) * j for j in range(4)))
    np.testing.assert_allclose(W.sum(1).numpy(), 1.0)


def test_uniform_crsm_reduces_fedshibu_to_fedbabu(tiny_data):
    """Equal client sizes (iid, 480 / 5): unweighted rows equal FedAvg's weights, so every client's body is
    FedBABU's global body and training is the same."""
    babu = trained(cfg(strategy="fedbabu", strategy_kw={"head": "dense"}), tiny_data)
    shibu = trained(cfg(strategy="fedshibu", strategy_kw={"sim": "uniform"}), tiny_data)
    close(babu.global_params, shibu.global_params)
    for cid in range(5):
        close(babu.global_params, shibu.strategy.eval_params(cid, shibu.global_params, shibu.client_state[cid]))


def test_uniform_crsm_reduces_fedavg_crsm_to_fedavg(tiny_data):
    avg = trained(cfg(strategy="fedavg"), tiny_data)
    mixed = trained(cfg(strategy="fedavg_crsm", strategy_kw={"sim": "uniform"}), tiny_data)
    close(avg.global_params, mixed.global_params)
    close(avg.global_params, mixed.strategy.eval_params(3, mixed.global_params, mixed.client_state[3]))


def test_head_frozen_in_training_and_tuned_per_client(tiny_data):
    c = cfg(strategy="fedbabu", partition="shards", partition_kw={"shards_per_user": 2}, personal_eval=True)
    eng = trained(c, tiny_data)
    init = Engine(c, data=tiny_data, progress=False).global_params
    for k in ("fc3.weight", "fc3.bias"):
        torch.testing.assert_close(eng.global_params[k], init[k], rtol=0, atol=1e-7)
    assert (eng.global_params["conv1.weight"] - init["conv1.weight"]).abs().max() > 1e-4
    tuned = eng.personalize([0, 1])
    assert all((t["fc3.weight"] - init["fc3.weight"]).abs().max() > 1e-5 for t in tuned)
    assert all(torch.equal(t["conv1.weight"], eng.global_params["conv1.weight"]) for t in tuned)
    h = eng.history[-1]
    assert {"personal_acc_mean", "personal_acc_std", "personal_noft_acc_mean"} <= set(h)


@pytest.mark.parametrize("executor", ["sequential", "vectorized"])
@pytest.mark.parametrize("strategy", ["fedbabu", "fedshibu"])
def test_global_head_stays_bitwise_at_its_initialization(strategy, executor, tiny_data):
    """Only what the clients train is aggregated: the frozen head is never averaged (an average of five equal
    copies with weights 0.2 is not the copy in float32), so the global head and every client's own model keep
    the initial head exactly."""
    c = cfg(strategy=strategy, executor=executor, rounds=3)
    eng = trained(c, tiny_data)
    assert eng.executor.name == executor
    init = Engine(c, data=tiny_data, progress=False).global_params
    assert (eng.global_params["conv1.weight"] - init["conv1.weight"]).abs().max() > 1e-4
    for k in eng.model.head_parameter_names():
        assert torch.equal(eng.global_params[k], init[k]), k
        for cid in range(eng.n_clients):
            assert torch.equal(eng.strategy.eval_params(cid, eng.global_params, eng.client_state[cid])[k], init[k])


def test_personal_evaluation_uses_each_clients_own_test_classes(tiny_data, monkeypatch):
    c = cfg(strategy="fedbabu", partition="shards", partition_kw={"shards_per_user": 2}, personal_eval=True,
            rounds=1)
    eng = Engine(c, data=tiny_data, progress=False)
    seen = []
    evaluate = Engine.evaluate

    def spy(self, params, x, y, batch_size=2048, precision="fp32"):
        seen.append(set(y.tolist()))
        return evaluate(self, params, x, y, batch_size, precision)

    monkeypatch.setattr(Engine, "evaluate", spy)
    eng.personal_evaluation()
    ytr = tiny_data.y_train.numpy()
    own = [set(ytr[ix].tolist()) for ix in eng.partition.client_indices]
    assert len(seen) == 2 * 5  # with and without fine-tuning
    for i, labels in enumerate(seen):
        assert labels and labels <= own[i % 5]


def test_paired_crsm_finds_two_planted_groups(tiny_data):
    """Clients 0-4 see labels 0-4, clients 5-9 labels 5-9: trained bodies represent a shared probe batch alike
    within a group (fc2's output, the last dense layer's input), so the CRSM (recorded every round) is
    block-structured."""
    c = cfg(strategy="fedshibu", strategy_kw={"samples": "shared", "n": 80, "head": "last"}, partition="label_groups",
            num_clients=10, rounds=3, local_epochs=2)
    eng = trained(c, tiny_data)
    S = np.array(eng.history[-1]["crsm"])
    assert eng.history[-1]["crsm_clients"] == list(range(10))
    groups = np.arange(10) // 5
    same = groups[:, None] == groups[None, :]
    off = ~np.eye(10, dtype=bool)
    assert S[same & off].mean() > S[~same].mean() + 0.1


def test_crsm_rejects_unknown_similarities():
    with pytest.raises(ValueError, match="valid"):
        crsm([torch.zeros(3, 2)] * 2, sim="cosine")


@pytest.mark.parametrize("changes", [dict(partition="iid"), dict(partition="dirichlet", partition_kw={"beta": 0.5}),
                                     dict(strategy="centralized", partition="shards",
                                          partition_kw={"shards_per_user": 2})])
def test_personal_eval_without_per_client_test_splits_names_the_partitions_that_have_them(tiny_data, changes):
    with pytest.raises(ConfigError, match=r"per-client test splits.*'shards', 'label_groups'.*personal_eval=False"):
        Engine(cfg(personal_eval=True, **changes), data=tiny_data, progress=False)
