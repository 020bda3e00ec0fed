"""FedER (Fu 2022): effective-rank aggregation (Alg. 3 and 4, Eq. 2.9's sign, the stable rank) and the optimizer
grid it runs in (Adam, AdamP, RMSGD, per-epoch StepLR, per-client optimizer state across rounds)."""

import dataclasses
import math

import pytest
import torch

from fedlib.config import Config
from fedlib.companion.papers import preset
from fedlib.companion.papers.feder.preset import feder_grid
from fedlib.engine import Engine
from fedlib.executors import make_executor
from fedlib.models import build_model
from fedlib.optim import EPOCH_END, OptimizerSpec
from fedlib.companion.results import Store, run
from fedlib.strategies import FedER, weighted_average
from fedlib.strategies.feder import floored_share


def small(**kw) -> Config:
    base = dict(dataset="synthetic", model="intr_cnn", partition="iid", partition_kw={}, num_clients=3, rounds=2,
                local_epochs=2, batch_size=64, optimizer="adam", lr=1e-3, momentum=0.9, weight_decay=1e-4,
                augment="flip", executor="sequential", seed=1)
    base.update(kw)
    return Config(**base)


def trained(cfg, data):
    eng = Engine(cfg, data=data, progress=False)
    eng.run()
    return eng


def learned_conv(o: int, i: int, r: int, g: torch.Generator) -> torch.Tensor:
    """A conv weight with a planted CP rank ``r`` (rank r in both unfoldings) plus weak noise. (Pure Gaussian noise,
    a weight at initialization, has EVBMF rank 0.)"""
    a, b, k = torch.randn(r, o, generator=g), torch.randn(r, i, generator=g), torch.randn(r, 9, generator=g)
    w = torch.einsum("ro,ri,rk->oik", a, b, k).view(o, i, 3, 3) / r ** 0.5
    return w + 0.05 * torch.randn(o, i, 3, 3, generator=g)


def conv_net_uploads(k: int = 3, seed: int = 0) -> list[dict[str, torch.Tensor]]:
    """Client models in state_dict order: a tensor before any conv, conv → BN → conv → classifier."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(k):
        out.append({"pre.bias": torch.randn(5, generator=g),
                    "conv1.weight": learned_conv(16, 8, 5, g),
                    "bn1.weight": torch.randn(16, generator=g), "bn1.running_mean": torch.randn(16, generator=g),
                    "bn1.num_batches_tracked": torch.tensor(7 + len(out)),
                    "conv2.weight": learned_conv(12, 16, 5, g),
                    "fc.weight": torch.randn(10, 12, generator=g), "fc.bias": torch.randn(10, generator=g)})
    return out


def aggregate(strategy, uploads):
    w = torch.full((len(uploads),), 1.0 / len(uploads), dtype=torch.float64)
    return strategy.aggregate(0, uploads[0], uploads, w, [])[0]


def metrics(strategy, uploads):
    w = torch.full((len(uploads),), 1.0 / len(uploads), dtype=torch.float64)
    return strategy.aggregate(0, uploads[0], uploads, w, [])[1]


def test_equal_ranks_give_fedavgs_uniform_average():
    """Clients whose conv weights are output-channel permutations of each other have the same spectra, hence the
    same ranks: FedER is then exactly FedAvg's uniform average, every tensor included."""
    ups = conv_net_uploads()
    for k, u in enumerate(ups[1:], 1):
        perm = torch.randperm(16, generator=torch.Generator().manual_seed(k))
        u["conv1.weight"] = ups[0]["conv1.weight"][perm]
        u["conv2.weight"] = ups[0]["conv2.weight"][:, perm]
    for metric in ("entropy", "erank", "stable_rank"):
        s = FedER(metric=metric)
        got = aggregate(s, ups)
        want = weighted_average(ups, torch.full((3,), 1 / 3, dtype=torch.float64))
        for name in want:
            torch.testing.assert_close(got[name], want[name], rtol=0, atol=1e-6, msg=f"{metric}: {name}")
        m = metrics(s, ups)
        assert all(a == pytest.approx(1 / 3, abs=1e-9) for a in m["feder_alpha"]["conv1.weight"])
        assert min(m["feder_rank"]["conv1.weight"]) > 0.5  # not the floor's uniformity


@pytest.mark.parametrize("metric", ["entropy", "erank", "stable_rank"])
def test_weights_follow_a_planted_low_rank_client(metric):
    """Client 0's conv1 is rank 1 (the others rank 5): it gets the least weight on conv1 and on the BN tensors
    after it."""
    ups = conv_net_uploads()
    ups[0]["conv1.weight"] = learned_conv(16, 8, 1, torch.Generator().manual_seed(5))
    s = FedER(metric=metric)
    ranks, alphas = s.layer_weights(ups)
    assert ranks["conv1.weight"][0] < min(ranks["conv1.weight"][1:])
    a = alphas["conv1.weight"]
    assert a[0] < a[1] and a[0] < a[2] and float(a.sum()) == pytest.approx(1.0)
    assert torch.equal(alphas["bn1.weight"], a) and torch.equal(alphas["bn1.running_mean"], a)
    got = aggregate(s, ups)
    torch.testing.assert_close(got["conv1.weight"], sum(w * u["conv1.weight"] for w, u in zip(a.float(), ups)))


def test_naive_and_improved_differ_exactly_where_algorithm_4_says():
    ups = conv_net_uploads()
    ups[1]["conv2.weight"] = torch.zeros_like(ups[1]["conv2.weight"])  # EVBMF keeps nothing: er = 0
    naive, improved = FedER(version="naive"), FedER(version="improved")
    rn, an = naive.layer_weights(ups)
    ri, ai = improved.layer_weights(ups)
    assert rn == ri and rn["conv2.weight"][1] == 0.0
    uniform = torch.full((3,), 1 / 3, dtype=torch.float64)
    # the same: a conv layer whose ranks all exceed the floor; tensors before the first conv layer (uniform)
    assert torch.equal(an["conv1.weight"], ai["conv1.weight"])
    assert torch.equal(an["pre.bias"], uniform) and torch.equal(ai["pre.bias"], uniform)
    # Alg. 4 line 10: the floor max(0.001, er) gives the zero-rank client a small weight instead of none
    assert an["conv2.weight"][1] == 0.0
    er = [max(1e-3, e) for e in ri["conv2.weight"]]
    torch.testing.assert_close(ai["conv2.weight"], torch.tensor(er, dtype=torch.float64) / sum(er))
    # Alg. 4 line 24: non-conv tensors take the previous conv layer's weights; Alg. 3 line 22 averages them
    for name, conv in (("bn1.weight", "conv1.weight"), ("bn1.running_mean", "conv1.weight"),
                       ("bn1.num_batches_tracked", "conv1.weight"), ("fc.weight", "conv2.weight"),
                       ("fc.bias", "conv2.weight")):
        assert torch.equal(an[name], uniform) and torch.equal(ai[name], ai[conv])
    got_n, got_i = aggregate(naive, ups), aggregate(improved, ups)
    differ = {k for k in got_n if not torch.equal(got_n[k], got_i[k])}
    assert differ == {"conv2.weight", "bn1.weight", "bn1.running_mean", "fc.weight", "fc.bias"}  # nbt rounds equal


def test_eq_2_9_as_printed_makes_feder_uniform_averaging():
    ups = conv_net_uploads()
    s = FedER(metric="entropy_as_printed")
    ranks, alphas = s.layer_weights(ups)
    assert all(e <= 0 for er in ranks.values() for e in er)  # Σ σ̄ ln σ̄ ≤ 0
    for a in alphas.values():
        torch.testing.assert_close(a, torch.full((3,), 1 / 3, dtype=torch.float64))
    assert all(e > 0 for er in FedER().layer_weights(ups)[0].values() for e in er)  # the meaningful sign


def test_floored_share_counts_the_client_layers_the_floor_decides():
    """A weight at initialization (pure noise: EVBMF keeps nothing) sits at the floor; a learned one does not. The
    share is what the history records, and Eq. 2.9 as printed floors every client-layer."""
    g = torch.Generator().manual_seed(3)
    ups = conv_net_uploads()
    ups[0]["conv2.weight"] = torch.randn(12, 16, 3, 3, generator=g) * 0.05  # noise only
    s = FedER()
    m = metrics(s, ups)
    assert m["feder_rank"]["conv2.weight"][0] <= 1e-3 < min(m["feder_rank"]["conv1.weight"])
    assert m["feder_floored"] == pytest.approx(1 / 6)  # 1 of 2 layers x 3 clients
    assert floored_share(m["feder_rank"]) == m["feder_floored"]
    printed = FedER(metric="entropy_as_printed")
    assert metrics(printed, conv_net_uploads())["feder_floored"] == 1.0
    assert math.isnan(floored_share({}))


def test_feder_runs_and_records_its_weights_per_round(tiny_data, tmp_path):
    cfg = small(strategy="feder", rounds=2, local_epochs=1)
    rec = run(cfg, store=Store(tmp_path), data=tiny_data, progress=False)
    h = rec.history[-1]
    model = build_model(cfg.model, tiny_data.in_shape, tiny_data.num_classes, **cfg.model_kw)
    convs = [k for k, v in model.state_dict().items() if v.dim() == 4]
    assert set(h["feder_alpha"]) == set(convs) and set(h["feder_rank"]) == set(convs)
    for a in h["feder_alpha"].values():
        assert len(a) == 3 and sum(a) == pytest.approx(1.0)
    assert len(h["client_loss"]) == 3 and rec.strategy["metric"] == "entropy"
    assert all(0.0 <= e["feder_floored"] <= 1.0 for e in rec.history)
    assert rec.history[-1]["test_acc"] > 0.2  # it learns (10 classes)


# ---------------------------------------------------------------------------------------------- optimizers
def test_steplr_matches_torch_steplr_stepped_per_epoch():
    spec = OptimizerSpec(name="adam", lr=1e-3, lr_step=(25, 0.5))
    opt = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=25, gamma=0.5)
    for epoch in range(120):
        assert spec.epoch_lr(1e-3, epoch) == pytest.approx(opt.param_groups[0]["lr"], rel=1e-12)
        opt.step()
        sched.step()


def _epoch_log(monkeypatch, name):
    """Record, after every local epoch, the group lr and (rmsgd) the per-layer rates it actually uses."""
    log = []
    inner = EPOCH_END.get(name)

    def spy(opt):
        if inner is not None:
            inner(opt)
        log.append((opt.param_groups[0]["lr"], list(getattr(opt, "lr_vector", []))))

    monkeypatch.setitem(EPOCH_END, name, spy)
    return log


@pytest.mark.parametrize("name", ["adam", "adamp", "rmsgd"])
def test_steplr_changes_adam_and_adamp_per_epoch_and_leaves_rmsgd_alone(tiny_data, monkeypatch, name):
    cfg = small(optimizer=name, num_clients=1, rounds=2, local_epochs=3, persistent_optimizer=True,
                strategy="centralized")
    log = _epoch_log(monkeypatch, name)
    plain = trained(cfg, tiny_data)
    plain_log, log[:] = list(log), []
    stepped = trained(cfg.replace(lr_step=(2, 0.5)), tiny_data)
    lrs = [lr for lr, _ in log]
    assert lrs == pytest.approx([1e-3 * 0.5 ** (e // 2) for e in range(6)])  # epochs counted over the run
    assert [lr for lr, _ in plain_log] == pytest.approx([1e-3] * 6)
    same = all(torch.equal(plain.global_params[k], stepped.global_params[k]) for k in plain.global_params)
    if name == "rmsgd":  # the package ignores the group's lr: its own rates, and the training, are unchanged
        assert [v for _, v in log] == [v for _, v in plain_log] and same
        assert len(log[0][1]) > 0
    else:
        assert not same


def test_rmsgd_gets_epoch_step_every_epoch_and_one_param_group(tiny_data, monkeypatch):
    log = _epoch_log(monkeypatch, "rmsgd")
    eng = trained(small(optimizer="rmsgd", rounds=2, local_epochs=2, persistent_optimizer=True), tiny_data)
    assert len(log) == 3 * 2 * 2  # clients × rounds × epochs
    assert all(st["attributes"]["epoch"] == 4 for st in eng.optimizer_states.values())  # its own epoch count
    with pytest.raises(ValueError, match="one param group"):
        OptimizerSpec(name="rmsgd", lr=0.1).build([{"params": [torch.nn.Parameter(torch.zeros(2, 2))]}])


def test_reset_optimizer_state_means_a_fresh_rmsgd_every_round(tiny_data):
    """Without persistent state each round's rmsgd starts as a freshly built one (its attributes too)."""
    eng = trained(small(optimizer="rmsgd", rounds=2, local_epochs=1), tiny_data)
    opt = next(iter(eng.executor._opts.values()))
    eng.optimizer.reset(opt)
    assert opt.epoch == 0 and opt.metrics.history == []


@pytest.mark.parametrize("name", ["adam", "adamp", "rmsgd"])
def test_per_client_optimizer_state_survives_a_checkpoint_exactly(tiny_data, tmp_path, name):
    cfg = small(strategy="feder", optimizer=name, rounds=3, local_epochs=1, persistent_optimizer=True,
                checkpoint_every=1)
    full = run(cfg, store=Store(tmp_path / "a"), data=tiny_data, progress=False)

    class Killed(Exception):
        pass

    def kill(engine, entry):
        if entry["round"] == 2:
            raise Killed

    store = Store(tmp_path / "b")
    with pytest.raises(Killed):
        run(cfg, store=store, data=tiny_data, progress=False, callback=kill)
    resumed = run(cfg, store=store, data=tiny_data, progress=False)
    assert resumed.provenance["resumed_from_round"] == 2
    assert resumed.final_params_hash == full.final_params_hash
    strip = lambda h: [{k: v for k, v in e.items() if "time" not in k} for e in h]  # noqa: E731
    assert strip(resumed.history) == strip(full.history)
    # and the state matters: resetting it each round trains differently
    reset = run(cfg.replace(persistent_optimizer=False), store=Store(tmp_path / "c"), data=tiny_data, progress=False)
    assert reset.final_params_hash != full.final_params_hash


def test_adam_with_steplr_stays_vectorized_and_matches_sequential(tiny_data):
    cfg = small(optimizer="adam", lr_step=(1, 0.5), rounds=2, local_epochs=2, augment="none")
    seq = trained(cfg, tiny_data)
    vec = trained(cfg.replace(executor="vectorized"), tiny_data)
    assert vec.executor_name == "vectorized"
    for k in seq.global_params:
        torch.testing.assert_close(vec.global_params[k], seq.global_params[k], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["adamp", "rmsgd"])
def test_package_optimizers_fall_back_with_one_notice(tiny_data, name):
    eng = Engine(small(optimizer=name), data=tiny_data, progress=False)
    notices = []
    ex = make_executor(eng.task(), "cpu", "vectorized", notice=notices.append)
    assert ex.name == "sequential" and len(notices) == 1 and name in notices[0]


# ---------------------------------------------------------------------------------------------- presets
def test_feder_preset_and_grid():
    p = preset("feder")
    assert (p.model, p.dataset, p.num_clients, p.batch_size, p.lr, p.weight_decay) == \
        ("resnet18", "cifar100", 4, 128, 1e-3, 1e-4)
    assert p.rounds * p.local_epochs == 250 and p.persistent_optimizer and p.augment == "crop_flip_cutout"
    grid = feder_grid("paper", dataset="fmnist")
    assert len(grid) == 15 and grid[("Adam + StepLR", "FedER")].lr_step == (25, 0.5)
    assert grid[("AdamP", "non-federated")].strategy == "centralized"
    quick = feder_grid("quick")
    assert quick[("AdamP + StepLR", "FedAvg")].lr_step == (3, 0.5)  # 25 of 250 epochs: 3 of 30
    adam = quick[("Adam + StepLR", "FedAvg")]  # the Adam rows' 40 rounds (FEDER_ROUNDS): 4 of 40
    assert (adam.rounds, adam.lr_step) == (40, (4, 0.5)) and quick[("Adam", "non-federated")].rounds == 40
    assert quick[("AdamP", "FedAvg")].rounds == 30 and feder_grid("quick", rounds=7)[("Adam", "FedAvg")].rounds == 7
    assert preset("fedintr").key() == Config(**{**dataclasses.asdict(preset("fedintr"))}).key()
    with pytest.raises(ValueError, match="optimizer"):
        small(optimizer="lion").validate()
    with pytest.raises(ValueError, match="lr_step"):
        small(lr_step=(0, 0.5)).validate()


def test_new_fields_at_their_defaults_keep_earlier_keys():
    cfg = small()
    ident = cfg.identity()
    assert "lr_step" not in ident and "optimizer_kw" not in ident and "persistent_optimizer" not in ident
    assert cfg.replace(lr_step=(25, 0.5)).key() != cfg.key()
    assert Config.from_dict(cfg.replace(lr_step=(3, 0.5)).to_dict()) == cfg.replace(lr_step=(3, 0.5))


def test_cutout_cuts_one_square_hole():
    from fedlib.augment import CUTOUT, apply_augment

    x = torch.ones(1, 1, 28, 28)
    params = {"flip": torch.tensor([False]), "cy": torch.tensor([0.5]), "cx": torch.tensor([0.5])}
    y = apply_augment(x, "crop_flip_cutout", params)
    assert int((y == 0).sum()) == CUTOUT * CUTOUT and float(y[0, 0, 14, 14]) == 0.0
