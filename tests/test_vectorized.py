"""The vectorized executor trains exactly like the sequential one (fedlib/executors/).

Tolerances. In float32 the two executors add the same numbers in a different order (batched matmuls and
reductions over a client dimension, a masked mean instead of a mean), so they agree to float32 rounding (~1e-8
here), which SGD with momentum can amplify: we check atol 1e-5 / rtol 1e-4 on the global weights after 3 rounds at
lr 0.02. (At lr 0.05 the simple CNN reaches 3e-5 by round 3, and so does the sequential executor against itself
when its start is perturbed by 1e-7: that is the training's own sensitivity, not an executor difference.)
BatchNorm ResNets are chaotic at initialization (a 1e-7 perturbation of the start moves the sequential executor's
own weights by ~1e-3 within two steps when a ragged batch has a few samples), so they are compared in float64,
where the same rounding differences stay below 1e-10: that checks the algorithm, not float32 luck. A CNN is
checked in float64 too. On the CPU the vectorized executor's convolutions, BatchNorm and Linear layers run per
client with the sequential executor's kernels (fedlib/executors/fast/cpu_conv.py), so there a float32 ResNet run is
also compared bit for bit.
"""

import dataclasses
import math

import pytest
import torch

import fedlib.optim
import fedlib.strategies
from fedlib.config import Config
from fedlib.data import load_dataset
from fedlib.engine import Engine, NonFiniteLossError
from fedlib.strategies import Needs, Strategy
from fedlib.executors import VectorizedExecutor, supports
from fedlib.optim import adam_step, init_optimizer_state, sgd_step


def cfg(model="intr_cnn", **kw) -> Config:
    base = dict(dataset="synthetic", model=model, partition="dirichlet", partition_kw={"beta": 0.5, "min_size": 5},
                num_clients=6, sample_fraction=0.5, rounds=3, local_epochs=2, batch_size=48, lr=0.02, momentum=0.9,
                weight_decay=1e-4, augment="flip", executor="sequential", seed=3)
    base.update(kw)
    return Config(**base)


@pytest.fixture(scope="module")
def cifar_like():
    return load_dataset("synthetic", n_train=480, n_test=160, shape=(3, 32, 32), num_classes=10, seed=1, signal=2.0)


@pytest.fixture(scope="module")
def small_rgb():
    return load_dataset("synthetic", n_train=240, n_test=80, shape=(3, 16, 16), num_classes=10, seed=2, signal=2.0)


@pytest.fixture
def float64():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


def as64(data):
    return dataclasses.replace(data, x_train=data.x_train.double(), x_test=data.x_test.double())


def both(c: Config, data, **kw):
    """(sequential engine, vectorized engine) after ``c.rounds`` rounds."""
    out = []
    for ex in ("sequential", "vectorized"):
        eng = Engine(c.replace(executor=ex), data=data, progress=False, keep_client_models=True, **kw)
        assert isinstance(eng.executor, VectorizedExecutor) == (ex == "vectorized")
        eng.run()
        out.append(eng)
    return out


def assert_same_run(seq, vec, atol, rtol):
    for k in seq.global_params:
        torch.testing.assert_close(vec.global_params[k], seq.global_params[k], atol=atol, rtol=rtol,
                                   msg=lambda m: f"{k}: {m}")
    assert seq.client_models.keys() == vec.client_models.keys()
    for cid in seq.client_models:
        for k, v in seq.client_models[cid].items():
            torch.testing.assert_close(vec.client_models[cid][k], v, atol=atol, rtol=rtol)
    n_test = len(seq.data.y_test)
    for a, b in zip(seq.history, vec.history):
        assert a["clients"] == b["clients"]
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=max(rtol, 1e-12), abs=atol)
        assert abs(b["test_acc"] - a["test_acc"]) <= 1.01 / n_test  # at most one prediction flips at a tie


STRATEGIES = [("fedavg", {}), ("fedprox", {"mu": 0.5})]


@pytest.mark.parametrize("strategy,kw", STRATEGIES, ids=["fedavg", "fedprox"])
@pytest.mark.parametrize("model", ["simple_cnn", "intr_cnn"])
def test_cnns_match_sequential_float32(model, strategy, kw, tiny_data, cifar_like):
    data = cifar_like if model == "simple_cnn" else tiny_data
    c = cfg(model, strategy=strategy, strategy_kw=kw)
    sizes = [len(ix) for ix in Engine(c, data=data, progress=False).partition.client_indices]
    assert len(set(sizes)) > 1 and any(n % c.batch_size for n in sizes)  # unequal clients, ragged last batches
    seq, vec = both(c, data)
    assert vec.executor.mode == "padded"
    assert_same_run(seq, vec, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("strategy,kw", STRATEGIES, ids=["fedavg", "fedprox"])
@pytest.mark.parametrize("model", ["resnet20", "intr_cnn"])
def test_match_sequential_float64(model, strategy, kw, float64, tiny_data, small_rgb):
    data = as64(small_rgb if model == "resnet20" else tiny_data)
    c = cfg(model, strategy=strategy, strategy_kw=kw, num_clients=4, rounds=2, local_epochs=1, batch_size=32)
    seq, vec = both(c, data)
    assert vec.executor.mode == ("exact" if model == "resnet20" else "padded")
    assert_same_run(seq, vec, atol=1e-10, rtol=1e-9)
    if model == "resnet20":  # per-client running statistics came back and differ between clients
        a, b = (vec.client_models[cid]["bn1.running_mean"] for cid in sorted(vec.client_models)[:2])
        assert not torch.equal(a, b)


def test_drop_last_and_crop_flip_match_sequential(cifar_like):
    seq, vec = both(cfg("simple_cnn", drop_last=True, augment="crop_flip", rounds=2, batch_size=40), cifar_like)
    assert_same_run(seq, vec, atol=1e-5, rtol=1e-4)


def test_adam_matches_sequential(tiny_data):
    seq, vec = both(cfg(optimizer="adam", lr=1e-3, rounds=2), tiny_data)
    assert_same_run(seq, vec, atol=1e-5, rtol=1e-4)


def test_chunk_sizes_agree(tiny_data):
    c = cfg(executor="vectorized", rounds=2, sample_fraction=1.0)
    runs = {}
    for size in (1, 2, None):
        eng = Engine(c.replace(chunk_size=size), data=tiny_data, progress=False)
        eng.run()
        runs[size] = eng
    for size in (1, 2):
        for k, v in runs[None].global_params.items():
            torch.testing.assert_close(runs[size].global_params[k], v, atol=1e-6, rtol=1e-5)
        assert [h["train_loss"] for h in runs[size].history] == pytest.approx(
            [h["train_loss"] for h in runs[None].history], rel=1e-6)


# ----------------------------------------------------------------------------------- functional optimizers

def torch_optim_steps(refs, opts, grads):
    """One torch.optim step per client, client i taking slice i of the stacked gradients."""
    for i, (r, o) in enumerate(zip(refs, opts)):
        for p, gr in zip(r, grads):
            p.grad = gr[i].clone()
        o.step()


def assert_clients_match(stacked, refs):
    for i, r in enumerate(refs):
        for p, s in zip(r, stacked):
            torch.testing.assert_close(s[i], p.detach(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("momentum,wd", [(0.9, 1e-2), (0.0, 0.0), (0.5, 0.0)])
def test_sgd_step_equals_torch_optim(momentum, wd):
    g = torch.Generator().manual_seed(0)
    shapes = [(3, 4, 5), (3, 7)]  # 3 clients
    stacked = [torch.randn(s, generator=g) for s in shapes]
    state = init_optimizer_state("sgd", stacked)["momentum_buffer"]
    refs = [[torch.nn.Parameter(p[i].clone()) for p in stacked] for i in range(3)]
    opts = [torch.optim.SGD(r, lr=0.1, momentum=momentum, weight_decay=wd) for r in refs]
    for _ in range(4):
        grads = [torch.randn(s, generator=g) for s in shapes]
        stacked, state = sgd_step(stacked, grads, state, lr=0.1, momentum=momentum, weight_decay=wd)
        torch_optim_steps(refs, opts, grads)
    assert_clients_match(stacked, refs)


@pytest.mark.parametrize("wd", [0.0, 1e-2])
def test_adam_step_equals_torch_optim(wd):
    g = torch.Generator().manual_seed(1)
    shapes = [(2, 4, 5), (2, 3)]
    stacked = [torch.randn(s, generator=g) for s in shapes]
    st = init_optimizer_state("adam", stacked)
    m, v = st["exp_avg"], st["exp_avg_sq"]
    refs = [[torch.nn.Parameter(p[i].clone()) for p in stacked] for i in range(2)]
    opts = [torch.optim.Adam(r, lr=1e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=wd) for r in refs]
    for step in range(1, 6):
        grads = [torch.randn(s, generator=g) for s in shapes]
        stacked, m, v = adam_step(stacked, grads, m, v, step=step, lr=1e-2, beta1=0.8, beta2=0.99, eps=1e-6,
                                  weight_decay=wd)
        torch_optim_steps(refs, opts, grads)
    assert_clients_match(stacked, refs)


def test_per_client_learning_rates():
    p, gr = [torch.ones(2, 3)], [torch.ones(2, 3)]
    (out,), _ = sgd_step(p, gr, [None], lr=torch.tensor([0.1, 0.2]))
    assert torch.allclose(out, torch.tensor([[0.9] * 3, [0.8] * 3]))


# ------------------------------------------------------------------------------------ what is supported

def test_unsupported_optimizer_falls_back_with_a_notice(tiny_data, monkeypatch, capsys):
    monkeypatch.setitem(fedlib.optim.OPTIMIZERS, "rmsprop", lambda ps, s: torch.optim.RMSprop(ps, lr=s.lr))
    eng = Engine(cfg(optimizer="rmsprop", executor="vectorized", rounds=1), data=tiny_data, progress=False)
    assert not isinstance(eng.executor, VectorizedExecutor)
    out = capsys.readouterr().out
    assert "vectorized executor unavailable" in out and "rmsprop" in out and "sequential" in out
    eng.run()  # and it trains


def test_persistent_optimizer_and_unvectorizable_strategies_fall_back(tiny_data, monkeypatch):
    eng = Engine(cfg(strategy="centralized", executor="vectorized", rounds=1), data=tiny_data, progress=False)
    ok, why = supports(eng.task(), eng.device, "vectorized")
    assert not ok and "optimizer state" in why

    class Loopy(Strategy):
        name = "loopy"
        needs = Needs(vectorizable=False)

    monkeypatch.setitem(fedlib.strategies.STRATEGIES, "loopy", Loopy)
    eng = Engine(cfg(strategy="loopy", executor="vectorized", rounds=1), data=tiny_data, progress=False)
    assert not isinstance(eng.executor, VectorizedExecutor)
    assert "not vectorizable" in supports(eng.task(), eng.device, "vectorized")[1]


def test_auto_prefers_sequential_on_cpu(tiny_data):
    eng = Engine(cfg(executor="auto", rounds=1), data=tiny_data, progress=False)
    assert not isinstance(eng.executor, VectorizedExecutor) and eng.executor_name == "sequential"
    assert VectorizedExecutor.can_run(eng.task()) == (True, "")
    assert "CPU" in VectorizedExecutor.prefer(eng.device)[1]


def test_nan_loss_raises_the_sequential_error(tiny_data):
    bad = dataclasses.replace(tiny_data, x_train=torch.full_like(tiny_data.x_train, float("nan")))
    with pytest.raises(NonFiniteLossError, match=r"client \d+ in round 1 .*Lower the learning rate"):
        Engine(cfg(executor="vectorized", rounds=1), data=bad, progress=False).run()


# ------------------------------------------------------------------ frozen parameters, taps and references

class FrozenHead(Strategy):
    """Trains the body only (FedBABU-style): the classifier stays as each client started."""

    name = "frozen_head"

    def trainable(self, name):
        return not name.startswith("fc3.")


class TapPenalty(Strategy):
    """A penalty on taps against both reference models (MOON-like shape) that also reads ``y``."""

    name = "tap_penalty"
    needs = Needs(taps=("fc2", "proj:fc2"), references=("global", "prev"))

    def references(self, ctx, global_params):
        return {"global": global_params, "prev": ctx.state.get("prev", global_params)}

    def penalty(self, ctx, b):
        near = sum(((t - r) ** 2).mean() for t, r in zip(b.taps, b.refs["global"]))
        far = sum(((t - r) ** 2).mean() for t, r in zip(b.taps, b.refs["prev"]))
        return 0.1 * near - 0.01 * far + 1e-3 * (b.taps[0].sum(1) * b.y).mean() + 1e-3 * ctx.lr

    def client_end(self, ctx, start, params):
        ctx.state["prev"] = params
        return params


@pytest.mark.parametrize("strategy", [FrozenHead, TapPenalty], ids=["frozen_head", "taps_refs"])
def test_custom_strategies_match_sequential(strategy, tiny_data, monkeypatch):
    monkeypatch.setitem(fedlib.strategies.STRATEGIES, strategy.name, strategy)
    c = cfg(strategy=strategy.name, rounds=3, lr=0.02)
    seq, vec = both(c, tiny_data)
    assert vec.executor.mode == ("exact" if strategy is TapPenalty else "padded")
    assert_same_run(seq, vec, atol=1e-5, rtol=1e-4)
    if strategy is FrozenHead:
        init = Engine(c, data=tiny_data, progress=False).global_params
        # averaging identical heads only rounds (weights sum to 1 up to an ulp); the body moved
        torch.testing.assert_close(vec.global_params["fc3.weight"], init["fc3.weight"], rtol=0, atol=1e-7)
        assert (vec.global_params["fc1.weight"] - init["fc1.weight"]).abs().max() > 1e-3
        # each client returns its frozen parameters exactly as it started
        ctxs = [vec.context(cid, c.rounds) for cid in range(3)]
        starts = [{k: v + 0.01 * cid for k, v in vec.global_params.items()} for cid in range(3)]
        for start, r in zip(starts, vec.train(ctxs, starts)):
            params = r.params
            assert torch.equal(params["fc3.weight"], start["fc3.weight"])
            assert torch.equal(params["fc3.bias"], start["fc3.bias"])
            assert not torch.equal(params["conv1.weight"], start["conv1.weight"])
    else:
        assert all(math.isfinite(h["train_loss"]) for h in vec.history)


# ------------------------------------------------------------------------ per-client convolutions on the CPU

def _block_model(rows):
    """A one-block model whose conv runs through the executor's per-client path, and a plain twin."""
    from fedlib.models import conv_pool_relu
    from fedlib.executors.fast.cpu_conv import per_client_convs as _per_client_convs

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 5, 3, padding=1)
            self.conv2 = torch.nn.Conv2d(5, 4, 3)

        def forward(self, x):
            return self.conv2(conv_pool_relu(self.conv, x)).square().mean((1, 2, 3))

    torch.manual_seed(0)
    plain = Block()
    return plain, _per_client_convs(plain, rows)


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("ragged", [False, True])
def test_per_client_conv_blocks_match_plain_ops(channels_last, ragged):
    """vmap over clients of conv -> max-pool -> ReLU -> conv through the per-client functions gives the plain ops'
    values and gradients; with ``rows`` (padded mode) the padding rows are skipped: they get zero outputs and
    zero input gradients, and the real rows match a run on the real rows alone."""
    from torch.func import functional_call, stack_module_state, vmap

    rows = [None]
    plain, per_client = _block_model(rows)
    n, width = 3, 6
    counts = (6, 4, 1) if ragged else (6, 6, 6)
    # ties inside pooling windows (constant patches) must pick the same argmax as max_pool2d
    x = torch.randn(n, width, 3, 9, 9).round(decimals=1)
    x[:, :, :, :4, :4] = 0.5
    if channels_last:
        x = torch.stack([xi.contiguous(memory_format=torch.channels_last) for xi in x])
    x.requires_grad_(True)
    models = [plain] * n
    params, _ = stack_module_state(models)
    params = {k: v + 0.01 * torch.arange(n).view(-1, *[1] * (v.dim() - 1)) for k, v in params.items()}
    params = {k: v.detach().requires_grad_(True) for k, v in params.items()}

    rows[0] = counts if ragged else None
    out = vmap(lambda p, xi: functional_call(per_client, p, (xi,)))(params, x)
    rows[0] = None
    weights = torch.arange(1.0, width + 1)
    (out * weights).sum().backward()
    for i, c in enumerate(counts):
        p_i = {k: v[i].detach().clone().requires_grad_(True) for k, v in params.items()}
        x_i = x[i, :c].detach().clone().requires_grad_(True)
        ref = functional_call(plain, p_i, (x_i,))
        (ref * weights[:c]).sum().backward()
        torch.testing.assert_close(out[i, :c], ref, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(x.grad[i, :c], x_i.grad, rtol=1e-5, atol=1e-6)
        assert not x.grad[i, c:].any()
        for k in params:
            torch.testing.assert_close(params[k].grad[i], p_i[k].grad, rtol=1e-5, atol=1e-6)


def test_per_client_conv_block_without_vmap_is_the_plain_block():
    rows = [None]
    plain, per_client = _block_model(rows)
    x = torch.randn(4, 3, 8, 8, requires_grad=True)
    out, ref = per_client(x), plain(x)
    torch.testing.assert_close(out, ref)
    g1 = torch.autograd.grad(out.sum(), [x, per_client.conv.weight, per_client.conv.bias])
    g2 = torch.autograd.grad(ref.sum(), [x, plain.conv.weight, plain.conv.bias])
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b)


class _NormHead(torch.nn.Module):
    """conv -> BatchNorm -> ReLU -> pooled -> Linear -> BatchNorm-free Linear: the layers the per-client CPU path
    routes (a BatchNorm ResNet's, in miniature)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 6, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(6)
        self.fc = torch.nn.Linear(6, 5)
        self.out = torch.nn.Linear(5, 3, bias=False)

    def forward(self, x):
        h = torch.nn.functional.relu(self.bn(self.conv(x)))
        return self.out(torch.relu(self.fc(h.mean((2, 3)))))


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("ragged", [False, True])
def test_per_client_batchnorm_and_linear_are_the_plain_ops_bit_for_bit(train, ragged):
    """vmap over clients of the per-client BatchNorm and Linear (conv -> BN -> ReLU -> Linear -> Linear) gives each
    client the plain modules' outputs, gradients and running statistics exactly (the sequential executor's kernels,
    in channels_last); vmap's own BatchNorm rule does not (it folds the clients into the channels). With ``rows``
    the padding rows get zero outputs and input gradients and stay out of the batch statistics."""
    from torch.func import functional_call, vmap

    from fedlib.executors.fast.cpu_conv import per_client_convs as _per_client_convs
    from fedlib.executors.fast.layout import stack_as as _stack_as

    torch.manual_seed(0)
    plains = [_NormHead().to(memory_format=torch.channels_last).train(train) for _ in range(3)]
    for i, m in enumerate(plains):  # different running statistics per client, as after some training
        m.bn.running_mean.uniform_(-1, 1), m.bn.running_var.uniform_(0.5, 2), m.bn.num_batches_tracked.fill_(i)
    rows = [None]
    per_client = _per_client_convs(plains[0], rows).train(train)
    # stacked as the executor stacks them: each client's slice in the model's memory format
    stacked = {k: _stack_as([m.state_dict()[k] for m in plains], v) for k, v in plains[0].state_dict().items()}
    names = [k for k, _ in plains[0].named_parameters()]
    params = {k: stacked[k].detach().requires_grad_(True) for k in names}
    buffers = {k: v for k, v in stacked.items() if k not in params}
    n, width = 3, 7
    counts = (7, 4, 2) if ragged else (7, 7, 7)
    like = torch.empty(width, 3, 5, 5).contiguous(memory_format=torch.channels_last)
    x = _stack_as([torch.randn(width, 3, 5, 5) for _ in range(n)], like).requires_grad_(True)
    rows[0] = counts if ragged else None
    try:
        out = vmap(lambda p, b, xi: functional_call(per_client, (p, b), (xi,)))(params, buffers, x)
        weights = torch.arange(1.0, width + 1)[:, None]
        (out * weights).sum().backward()
    finally:
        rows[0] = None
    for i, c in enumerate(counts):
        m = plains[i]
        x_i = x[i, :c].detach().clone().requires_grad_(True)
        ref = m(x_i)
        (ref * weights[:c]).sum().backward()
        assert torch.equal(out[i, :c], ref) and not out[i, c:].any()
        assert torch.equal(x.grad[i, :c], x_i.grad) and not x.grad[i, c:].any()
        for k, p in m.named_parameters():
            assert torch.equal(params[k].grad[i], p.grad), k
        for k, b in m.named_buffers():  # updated in place, per client, from the real rows only (train mode)
            assert torch.equal(buffers[k][i], b), k


def test_per_client_batchnorm_and_linear_without_vmap_are_the_plain_modules():
    from fedlib.executors.fast.cpu_conv import per_client_convs as _per_client_convs

    torch.manual_seed(0)
    plain = _NormHead()
    per_client = _per_client_convs(plain, [None])
    x = torch.randn(4, 3, 5, 5, requires_grad=True)
    out, ref = per_client(x), plain(x)
    torch.testing.assert_close(out, ref)
    names = ["conv.weight", "bn.weight", "bn.bias", "fc.weight", "fc.bias", "out.weight"]
    g1 = torch.autograd.grad(out.square().sum(), [x] + [dict(per_client.named_parameters())[k] for k in names])
    g2 = torch.autograd.grad(ref.square().sum(), [x] + [dict(plain.named_parameters())[k] for k in names])
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(per_client.bn.running_mean, plain.bn.running_mean)
    torch.testing.assert_close(per_client.bn.running_var, plain.bn.running_var)


def test_resnet_float32_equals_sequential_on_cpu(small_rgb):
    """A narrowed BatchNorm ResNet-18 in float32, unequal clients with ragged last batches of a few samples (where
    the training amplifies any rounding difference ~1e4-fold within two steps): on the CPU the vectorized executor
    runs convolutions, BatchNorm and Linear layers per client with the sequential executor's kernels, so both
    executors end with the same weights and running statistics, bit for bit (the reported losses, reduced under
    vmap, to float32 rounding)."""
    c = cfg("resnet18", strategy="fedprox", strategy_kw={"mu": 0.5}, model_kw={"width": 4}, num_clients=4, rounds=2,
            local_epochs=1, batch_size=14, lr=0.05)
    sizes = [len(ix) for ix in Engine(c, data=small_rgb, progress=False).partition.client_indices]
    assert any(0 < n % c.batch_size < 6 for n in sizes), sizes  # a ragged batch of a few samples
    seq, vec = both(c, small_rgb)
    assert vec.executor.mode == "exact"
    assert all(torch.equal(vec.global_params[k], v) for k, v in seq.global_params.items())
    assert seq.client_models.keys() == vec.client_models.keys()
    for cid in seq.client_models:
        assert all(torch.equal(vec.client_models[cid][k], v) for k, v in seq.client_models[cid].items())
    assert [h["train_loss"] for h in vec.history] == pytest.approx([h["train_loss"] for h in seq.history], rel=1e-6)


def test_padded_mode_skips_padding_rows_on_cpu(tiny_data, monkeypatch):
    """The executor hands the per-client convs each group's real batch sizes at ragged steps (and only there)."""
    import fedlib.executors.fast.cpu_conv as V

    seen = []
    orig = V._StackedConv.forward

    def spy(x, w, b, conv, rows, k):
        seen.append(rows)
        return orig(x, w, b, conv, rows, k)

    monkeypatch.setattr(V._StackedConv, "forward", staticmethod(spy))
    c = cfg(rounds=1, local_epochs=1)
    seq, vec = both(c, tiny_data)
    assert vec.executor.mode == "padded"
    ragged = [r for r in seen if r is not None]
    assert ragged and all(len(set(r)) > 1 for r in ragged) and None in seen
    assert_same_run(seq, vec, atol=1e-6, rtol=1e-5)


def test_stacks_take_the_models_memory_format():
    """Aggregated global parameters come back contiguous while the CPU model is channels_last: the executor stacks
    every client's parameters in the model's layout (mixed formats made oneDNN's conv backward ~10x slower)."""
    from fedlib.executors.fast.layout import stack_as as _stack_as

    like = torch.empty(8, 3, 3, 3).contiguous(memory_format=torch.channels_last)
    ts = [torch.randn(8, 3, 3, 3) for _ in range(3)]
    out = _stack_as(ts, like)
    assert all(out[i].stride() == like.stride() and torch.equal(out[i], t) for i, t in enumerate(ts))
    assert _stack_as([torch.tensor(3), torch.tensor(4)], torch.tensor(0)).tolist() == [3, 4]


def test_gathered_client_groups_keep_the_memory_format():
    from fedlib.executors.fast.layout import gather as _gather, stack_as as _stack_as

    like = torch.empty(16, 8, 3, 3).contiguous(memory_format=torch.channels_last)
    v = _stack_as([torch.randn(16, 8, 3, 3) for _ in range(5)], like)
    sel = torch.tensor([0, 3, 4])
    g = _gather(v, sel)
    assert torch.equal(g, v[sel]) and all(g[i].stride() == like.stride() for i in range(3))


# ------------------------------------------------------------------------ static steps (CUDA-graph path)

def static_run(c: Config, data) -> Engine:
    """A vectorized run on the static path (fixed-shape steps, what Config(cuda_graph=True) captures on CUDA),
    eagerly on the CPU."""
    eng = Engine(c.replace(executor="vectorized"), data=data, progress=False, keep_client_models=True)
    eng.executor = VectorizedExecutor(eng.task(), eng.device, static=True)
    assert eng.executor.static and not eng.executor.capture
    eng.run()
    return eng


@pytest.mark.parametrize("strategy,kw", STRATEGIES, ids=["fedavg", "fedprox"])
@pytest.mark.parametrize("model", ["simple_cnn", "intr_cnn"])
def test_static_steps_match_sequential(model, strategy, kw, tiny_data, cifar_like):
    """All clients step every step, finished clients masked and their updates discarded: the same training."""
    data = cifar_like if model == "simple_cnn" else tiny_data
    c = cfg(model, strategy=strategy, strategy_kw=kw)
    seq = Engine(c, data=data, progress=False, keep_client_models=True)
    seq.run()
    assert_same_run(seq, static_run(c, data), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("variant", [dict(drop_last=True, augment="crop_flip", batch_size=40),
                                     dict(momentum=0.0, weight_decay=0.0, sample_fraction=1.0),
                                     dict(lr_milestones=(0.5,), lr_gamma=0.5, chunk_size=2)],
                         ids=["drop_last-crop_flip", "plain-sgd", "lr-schedule-chunks"])
def test_static_steps_match_sequential_variants(variant, cifar_like):
    c = cfg("simple_cnn", rounds=2, **variant)
    seq = Engine(c, data=cifar_like, progress=False, keep_client_models=True)
    seq.run()
    assert_same_run(seq, static_run(c, cifar_like), atol=1e-5, rtol=1e-4)


def test_static_steps_float64_exact(float64, tiny_data):
    data = as64(tiny_data)
    c = cfg(num_clients=4, rounds=2, local_epochs=1, batch_size=32)
    seq = Engine(c, data=data, progress=False, keep_client_models=True)
    seq.run()
    assert_same_run(seq, static_run(c, data), atol=1e-10, rtol=1e-9)


def test_cuda_graph_unavailable_runs_eagerly_with_a_notice(tiny_data, capsys):
    eng = Engine(cfg(executor="vectorized", cuda_graph=True, rounds=1), data=tiny_data, progress=False)
    assert isinstance(eng.executor, VectorizedExecutor) and not eng.executor.static
    assert "CUDA graphs unavailable" in capsys.readouterr().out
    eng = Engine(cfg(executor="vectorized", optimizer="adam", lr=1e-3, rounds=1), data=tiny_data, progress=False)
    assert "only SGD" in eng.executor.steps.unsupported()
    # the graph switch is an execution detail: it does not change the run's identity
    assert cfg(cuda_graph=True).key() == cfg().key() == cfg(cuda_graph=False).key()


@pytest.mark.parametrize("cuda_graph,device,why_not,expected,notice", [
    (None, "cuda", "", True, False),  # the default: static steps (captured) on CUDA whenever they apply
    (None, "cuda:1", "", True, False),
    (None, "cuda", "only SGD is captured", False, False),  # silently eager where they do not
    (None, "cpu", "", False, False),  # never on the CPU by default (sequential is what auto picks there)
    (True, "cuda", "", True, False),
    (True, "cuda", "only SGD is captured", False, True),  # asked for: say why not
    (False, "cuda", "", False, False),  # never
])
def test_static_steps_decision(cuda_graph, device, why_not, expected, notice):
    from fedlib.executors import use_static

    on, msg = use_static(cuda_graph, device, why_not)
    assert on is expected and bool(msg) is notice and (not notice or why_not in msg)


def test_default_config_takes_the_graph_path_on_cuda_where_it_applies(tiny_data, capsys):
    """What auto decides for a task, read on the CPU: FedAvg/FedProx in padded mode would run the static steps on
    CUDA; Adam would not (silently); on the CPU the default stays eager with no notice."""
    from fedlib.executors import use_static

    for strategy, kw, optim, on_cuda in [("fedavg", {}, "sgd", True), ("fedprox", {"mu": 0.01}, "sgd", True),
                                         ("fedavg", {}, "adam", False)]:
        eng = Engine(cfg(executor="vectorized", strategy=strategy, strategy_kw=kw, optimizer=optim, rounds=1),
                     data=tiny_data, progress=False)
        assert eng.cfg.cuda_graph is None and not eng.executor.static  # CPU: eager, nothing printed
        why = eng.executor.steps.unsupported(capture=False)
        assert use_static(None, "cuda", why)[0] is on_cuda, (strategy, optim, why)
    assert "CUDA graphs" not in capsys.readouterr().out


def test_old_records_with_cuda_graph_false_still_load():
    from fedlib.companion.results import Record

    c = cfg()
    d = {**c.to_dict(), "cuda_graph": False}
    assert Config.from_dict(d, migrate=True).key() == c.key()
    rec = Record(key=c.key(), config=d, history=[], provenance={}, partition_hash="", final_params_hash="")
    assert rec.cfg.cuda_graph is False and rec.cfg.key() == c.key()
