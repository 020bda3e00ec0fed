"""The strategy interface holds strategies unlike FedAvg, in both executors.

Two toy strategies stand in for the least obvious shapes:

* ``Carry`` (SCAFFOLD-shaped): a per-client tensor ``z_i`` and a shared tensor ``z``, declared in ``needs.tensors``,
  enter the penalty and a per-step update correction; each client updates its own ``z_i`` in ``client_end`` from
  what it trained, so the tensor carries information across rounds.
* ``BodyThenHead`` (FedBABU-shaped): federated training of the body only (the head stays at its shared
  initialization), then each client fine-tunes the head alone on its own data before its personalized evaluation.

Each runs in the sequential and the vectorized executor and must give the same models within float rounding.
"""

from __future__ import annotations

import pytest
import torch

import fedlib.strategies
from fedlib.config import Config
from fedlib.engine import Engine
from fedlib.executors import SequentialExecutor, VectorizedExecutor
from fedlib.strategies import FineTune, Needs, Strategy

BIAS = "fc3.bias"


class Carry(Strategy):
    name = "carry"
    needs = Needs(tensors=("z", "z_i"))

    def setup(self, model, cfg):
        self.z = torch.full_like(dict(model.named_parameters())[BIAS], 0.05).detach()

    def client_tensors(self, ctx, global_params):
        return {"z": self.z, "z_i": ctx.state.get("z_i", torch.zeros_like(self.z))}

    def penalty(self, ctx, b):
        return ((b.tensors["z_i"] - b.tensors["z"]) * b.params[BIAS]).sum()

    def correction(self, ctx, tensors):
        return {BIAS: 2.0 * tensors["z_i"] + tensors["z"]}

    def client_end(self, ctx, start, params):
        ctx.state["z_i"] = ctx.state.get("z_i", torch.zeros_like(self.z)) + (params[BIAS] - start[BIAS])
        return params


class BodyThenHead(Strategy):
    name = "body_then_head"

    def trainable(self, name):
        return not name.startswith("fc3.")

    def finetune(self):
        return FineTune(trainable=lambda n: n.startswith("fc3."), epochs=2, lr=0.05, batch_size=32)


def cfg(**kw) -> Config:
    base = dict(dataset="synthetic", model="intr_cnn", partition="dirichlet", partition_kw={"beta": 0.5, "min_size": 5},
                num_clients=6, sample_fraction=0.5, rounds=3, local_epochs=2, batch_size=48, lr=0.02, momentum=0.9,
                weight_decay=1e-4, augment="flip", seed=3)
    base.update(kw)
    return Config(**base)


def run_both(c: Config, data) -> tuple[Engine, Engine]:
    out = []
    for ex, cls in (("sequential", SequentialExecutor), ("vectorized", VectorizedExecutor)):
        eng = Engine(c.replace(executor=ex), data=data, progress=False, keep_client_models=True)
        assert isinstance(eng.executor, cls)
        eng.run()
        out.append(eng)
    return out[0], out[1]


def close(a: dict, b: dict, atol=1e-5, rtol=1e-4) -> None:
    for k in a:
        torch.testing.assert_close(b[k], a[k], atol=atol, rtol=rtol, msg=lambda m: f"{k}: {m}")


@pytest.fixture
def registered(monkeypatch):
    for s in (Carry, BodyThenHead):
        monkeypatch.setitem(fedlib.strategies.STRATEGIES, s.name, s)


def test_per_client_tensor_carried_across_rounds(registered, tiny_data):
    seq, vec = run_both(cfg(strategy="carry"), tiny_data)
    close(seq.global_params, vec.global_params)
    for cid, st in seq.client_state.items():
        assert ("z_i" in st) == ("z_i" in vec.client_state[cid])
        if "z_i" in st:
            close({"z_i": st["z_i"]}, {"z_i": vec.client_state[cid]["z_i"]})
    visits = [c for h in seq.history for c in h["clients"]]
    assert any(visits.count(c) > 1 for c in visits)  # some client came back with a non-zero z_i
    # the tensors matter: without them the same run ends elsewhere
    plain = Engine(cfg(executor="sequential"), data=tiny_data, progress=False)
    plain.run()
    assert (plain.global_params[BIAS] - seq.global_params[BIAS]).abs().max() > 1e-3


class CorrectionOnly(Carry):
    name = "correction_only"

    def penalty(self, ctx, b):
        return None


def test_correction_alone_changes_training_identically_in_both_executors(registered, monkeypatch, tiny_data):
    monkeypatch.setitem(fedlib.strategies.STRATEGIES, CorrectionOnly.name, CorrectionOnly)
    c = cfg(strategy="correction_only", rounds=2)
    seq, vec = run_both(c, tiny_data)
    close(seq.global_params, vec.global_params)
    plain = Engine(cfg(executor="sequential", rounds=2), data=tiny_data, progress=False)
    plain.run()
    assert (plain.global_params[BIAS] - seq.global_params[BIAS]).abs().max() > 1e-3
    # the static (fixed-shape) path applies it too
    static = Engine(c.replace(executor="vectorized"), data=tiny_data, progress=False)
    static.executor = VectorizedExecutor(static.task(), static.device, static=True)
    assert static.executor.static
    static.run()
    close(seq.global_params, static.global_params)


def test_body_training_then_head_finetuning(registered, tiny_data):
    c = cfg(strategy="body_then_head", partition="shards", partition_kw={"shards_per_user": 2}, personal_eval=True, num_clients=5,
            sample_fraction=1.0, rounds=2)
    seq, vec = run_both(c, tiny_data)
    close(seq.global_params, vec.global_params)
    init = Engine(c, data=tiny_data, progress=False).global_params
    # federated training never moved the head, and did move the body
    for k in ("fc3.weight", BIAS):
        torch.testing.assert_close(seq.global_params[k], init[k], rtol=0, atol=1e-7)
    assert (seq.global_params["fc1.weight"] - init["fc1.weight"]).abs().max() > 1e-3
    # fine-tuning moves the head only, per client, identically in both executors
    cids = list(range(seq.n_clients))
    tuned_s, tuned_v = seq.personalize(cids), vec.personalize(cids)
    for a, b in zip(tuned_s, tuned_v):
        close(a, b)
        assert torch.equal(a["fc1.weight"], seq.global_params["fc1.weight"])
        assert (a["fc3.weight"] - seq.global_params["fc3.weight"]).abs().max() > 1e-4
    assert not torch.equal(tuned_s[0]["fc3.weight"], tuned_s[1]["fc3.weight"])
    for a, b in zip(seq.history, vec.history):
        assert b["personal_acc_mean"] == pytest.approx(a["personal_acc_mean"], abs=1.01 / 20)
    assert seq.executor.name == "sequential" and vec._finetune_executor.name == "vectorized"
