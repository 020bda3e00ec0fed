"""SCAFFOLD, MOON, FedCKA, FedIntR (and FedProx's unsquared form): each loss against a slow per-sample reference,
the equivalences with FedAvg, the executors against each other, and exact resumption of their state."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from fedlib.config import Config
from fedlib.engine import Engine, sample_clients
from fedlib.executors.sequential import batches
from fedlib.kernels import linear_cka, linear_cka_to, rbf_cka
from fedlib.models import build_model
from fedlib.params import load_params_
from fedlib.strategies import build_strategy
from fedlib.strategies.fedcka import FEDCKA_SIMILARITIES, fedcka_loss
from fedlib.strategies.fedintr import fedintr_loss
from fedlib.strategies.fedprox import FedProx
from fedlib.strategies.moon import moon_loss
from fedlib.strategies.previous import two_way_nll


@pytest.fixture(scope="module")
def data():
    """Small images (the two CNNs' smallest sensible input) keep each federated run well under a second."""
    from fedlib.data import load_dataset

    return load_dataset("synthetic", n_train=240, n_test=60, shape=(1, 20, 20), num_classes=10, seed=0, signal=2.0)


def cfg(**kw) -> Config:
    base = dict(dataset="synthetic", model="simple_cnn", partition="dirichlet",
                partition_kw={"beta": 0.5, "min_size": 5}, num_clients=6, sample_fraction=0.5, rounds=2,
                local_epochs=1, batch_size=24, lr=0.02, momentum=0.9, weight_decay=1e-4, augment="none",
                executor="sequential", seed=3)
    base.update(kw)
    return Config(**base)


def trained(c: Config, data, **kw) -> Engine:
    eng = Engine(c, data=data, progress=False, **kw)
    eng.run()
    return eng


# ------------------------------------------------------------------------------ losses vs slow references
def naive_nll(s_g, s_p):
    return -torch.log(torch.exp(s_g) / (torch.exp(s_g) + torch.exp(s_p)))


def cos(a, b):
    return (a * b).sum() / (a.norm() * b.norm())


def rand(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def test_moon_loss_and_gradient_match_a_per_sample_reference():
    z, zg, zp = rand(6, 5, seed=1).requires_grad_(), rand(6, 5, seed=2), rand(6, 5, seed=3)
    got = moon_loss(z, zg, zp, tau=0.5)
    want = sum(naive_nll(cos(z[i], zg[i]) / 0.5, cos(z[i], zp[i]) / 0.5) for i in range(6)) / 6
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(torch.autograd.grad(got, z)[0], torch.autograd.grad(want, z)[0])


SLOW_SIMS = {  # sim(a, b) written out on the flattened batches
    "linear_cka": lambda a, b: linear_cka(a, b, form="gram"),
    "rbf_cka": lambda a, b: rbf_cka(a, b),
    "frobenius": lambda a, b: -sum(((a[i] - b[i]) ** 2).sum() for i in range(len(a))),
    "frobenius_literal": lambda a, b: sum(((a[i] - b[i]) ** 2).sum() for i in range(len(a))),
    "frobenius_mean": lambda a, b: -sum(((a[i] - b[i]) ** 2).sum() for i in range(len(a))) / a.numel(),
    "cosine": lambda a, b: cos(a.reshape(-1), b.reshape(-1)),
    "cosine_unnormalized": lambda a, b: a.reshape(-1).norm() * b.reshape(-1).norm() * cos(a.reshape(-1), b.reshape(-1)),
}


@pytest.mark.parametrize("sim", sorted(FEDCKA_SIMILARITIES))
@pytest.mark.parametrize("M", [1, 2, 3])
def test_fedcka_loss_and_gradient_match_a_slow_reference(sim, M):
    n = 7
    shapes = [(n, 2, 3, 3), (n, 4), (n, 3, 2, 2)][:M]  # conv maps and a dense layer, as the first M layers
    scale = 0.1 if "frobenius" in sim or "unnormalized" in sim else 1.0  # keep the naive exp() finite
    a = [(scale * rand(*s, seed=i)).requires_grad_() for i, s in enumerate(shapes)]
    g = [scale * rand(*s, seed=10 + i) for i, s in enumerate(shapes)]
    p = [scale * rand(*s, seed=20 + i) for i, s in enumerate(shapes)]
    got = fedcka_loss(a, g, p, sim)
    f = SLOW_SIMS[sim]
    want = sum(naive_nll(f(x.flatten(1), y.flatten(1)), f(x.flatten(1), z.flatten(1))) for x, y, z in zip(a, g, p)) / M
    torch.testing.assert_close(got, want)
    for ga, gw in zip(torch.autograd.grad(got, a), torch.autograd.grad(want, a)):
        torch.testing.assert_close(ga, gw)


def test_fedcka_is_log2_with_zero_gradient_when_previous_is_global_and_finite_when_unnormalized():
    a = rand(9, 4, 3, 3, seed=1).float().requires_grad_()
    g = rand(9, 4, 3, 3, seed=2).float()
    for sim in FEDCKA_SIMILARITIES:
        term = fedcka_loss([a], [g], [g], sim)
        assert abs(float(term.detach()) - math.log(2)) < 1e-7
        assert torch.equal(torch.autograd.grad(term, a)[0], torch.zeros_like(a))
    big = [1e3 * rand(9, 40, seed=5).float().requires_grad_()]  # ‖a − b‖² ~ 1e8: exp() overflows float32
    for sim in ("frobenius", "frobenius_literal", "cosine_unnormalized"):
        term = fedcka_loss(big, [1e3 * rand(9, 40, seed=6).float()], [1e3 * rand(9, 40, seed=7).float()], sim)
        grad = torch.autograd.grad(term, big)[0]
        assert torch.isfinite(term) and torch.isfinite(grad).all()
    assert fedcka_loss([a[:3]], [g[:3]], [g[:3]], "linear_cka") is None  # n < 4: no CKA term
    with pytest.raises(ValueError, match="valid"):
        fedcka_loss([a], [g], [g], "cka")


@pytest.mark.parametrize("n,d", [(40, 3), (5, 30)], ids=["feature_form", "gram_form"])
def test_linear_cka_to_several_references_equals_the_kernel(n, d):
    x, y1, y2 = rand(n, d, seed=1), rand(n, d + 1, seed=2), rand(n, d, seed=3) + rand(n, d, seed=1)
    for got, y in zip(linear_cka_to(x, [y1, y2]), [y1, y2]):
        torch.testing.assert_close(got, linear_cka(x, y))
    assert float(linear_cka_to(torch.ones(n, d, dtype=torch.float64), [y1])[0]) == 0.0  # zero variance: 0


@pytest.mark.parametrize("per_sample", [False, True])
@pytest.mark.parametrize("weighting", ["alpha", "uniform"])
def test_fedintr_loss_and_gradient_match_a_slow_reference(per_sample, weighting):
    K, n, tau = 3, 5, 0.5
    z = [rand(n, 4 + k, seed=k).requires_grad_() for k in range(K)]
    zg = [rand(n, 4 + k, seed=10 + k) for k in range(K)]
    zp = [rand(n, 4 + k, seed=20 + k) for k in range(K)]
    got = fedintr_loss(z, zg, zp, tau, per_sample, weighting)

    def one(samples):  # Eq. 2-6 on the mean cosine over `samples`
        pos = [sum(cos(z[k][i], zg[k][i]) for i in samples) / len(samples) / tau for k in range(K)]
        neg = [sum(cos(z[k][i], zp[k][i]) for i in samples) / len(samples) / tau for k in range(K)]
        losses = [naive_nll(pos[k], neg[k]) for k in range(K)]
        if weighting == "uniform":
            return sum(losses) / K
        norm = sum(torch.exp(s) for s in pos)
        return sum(torch.exp(pos[k]) / norm * losses[k] for k in range(K))

    want = sum(one([i]) for i in range(n)) / n if per_sample else one(list(range(n)))
    torch.testing.assert_close(got, want)
    for ga, gw in zip(torch.autograd.grad(got, z), torch.autograd.grad(want, z)):
        torch.testing.assert_close(ga, gw)


def test_two_way_nll_is_finite_far_out():
    s = torch.tensor([1e6, -1e6, 0.0])
    assert torch.isfinite(two_way_nll(s, s.flip(0))).all()


# ------------------------------------------------------------------------------------ FedProx unsquared
def test_fedprox_unsquared_is_the_per_tensor_norm_sum_with_a_zero_gradient_at_the_global_model(data):
    prox = FedProx(mu=0.3, squared=False)
    g = {"a": rand(3, 4, seed=1), "b": rand(5, seed=2)}
    w = {k: (v + 0.1 * rand(*v.shape, seed=7)).requires_grad_() for k, v in g.items()}
    batch = type("B", (), {"params": w, "global_params": g})()
    want = 0.15 * sum(math.sqrt(sum(float(x) ** 2 for x in (w[k] - g[k]).detach().reshape(-1))) for k in w)
    assert float(prox.penalty(None, batch).detach()) == pytest.approx(want, rel=1e-12)
    at_g = {k: v.clone().requires_grad_() for k, v in g.items()}
    batch = type("B", (), {"params": at_g, "global_params": g})()
    grads = torch.autograd.grad(prox.penalty(None, batch), list(at_g.values()))
    assert all(torch.equal(gr, torch.zeros_like(gr)) for gr in grads)
    # one step per client (the batch holds a whole client): every first step is at w = w_g
    c = cfg(model="intr_cnn", strategy="fedprox", strategy_kw={"mu": 0.5, "squared": False}, batch_size=240,
            rounds=2, sample_fraction=1.0)
    eng = trained(c, data)
    assert all(math.isfinite(h["train_loss"]) for h in eng.history)
    assert all(torch.isfinite(v).all() for v in eng.global_params.values())


# ------------------------------------------------------------------------------ equivalences with FedAvg
MU_ZERO = [("moon", {}, "simple_cnn"), ("moon", {}, "intr_cnn"), ("fedcka", {}, "simple_cnn"),
           ("fedcka", {"on": "heads"}, "intr_cnn"), ("fedintr", {}, "intr_cnn"), ("fedprox", {}, "intr_cnn"),
           ("fedprox", {"squared": False}, "intr_cnn")]


@pytest.mark.parametrize("executor", ["sequential", "vectorized"])
@pytest.mark.parametrize("strategy,kw,model", MU_ZERO)
def test_mu_zero_is_fedavg_bitwise_over_the_whole_model(strategy, kw, model, executor, data):
    """With mu = 0 the loss is the cross-entropy alone: every tensor of the final model (its whole state_dict,
    side projection heads included) is FedAvg's bit for bit, and what no loss reaches keeps its initialization
    (weight decay does not shrink a projection head the penalty would have trained)."""
    # 5 clients: sample-size weights that are not binary fractions, so averaging an untrained tensor would move it
    c = cfg(model=model, num_clients=5, sample_fraction=1.0, executor=executor)  # round 2: previous models exist
    avg = trained(c, data)
    reg = trained(c.replace(strategy=strategy, strategy_kw={**kw, "mu": 0.0}), data)
    assert reg.executor.name == avg.executor.name == executor
    init = Engine(c, data=data, progress=False).model.state_dict()
    assert reg.global_params.keys() == avg.global_params.keys() == init.keys()
    untrained = {n for n, _ in avg.model.named_parameters()} - set(avg.trainable)
    assert model != "intr_cnn" or untrained  # the IntR CNN's side heads: FedAvg never trains them
    for k in init:
        assert torch.equal(avg.global_params[k], reg.global_params[k]), k
        if k in untrained:
            assert torch.equal(reg.global_params[k], init[k]), k
    if executor == "sequential":  # ... and mu > 0 changes training
        reg1 = trained(c.replace(strategy=strategy, strategy_kw={**kw, "mu": 5.0}), data)
        assert not torch.equal(avg.global_params["fc1.weight"], reg1.global_params["fc1.weight"])


@pytest.mark.parametrize("strategy", ["scaffold", "moon", "fedcka"])
def test_first_round_is_fedavg(strategy, data):
    """Zero control variates (SCAFFOLD), no previous model (MOON: no term; FedCKA: log 2 with a zero gradient)."""
    c = cfg(rounds=1, sample_fraction=1.0, drop_last=True)  # drop_last: no batch too small for CKA
    avg = trained(c, data)
    reg = trained(c.replace(strategy=strategy, strategy_kw={} if strategy == "scaffold" else {"mu": 5.0}), data)
    for k in avg.global_params:
        assert torch.equal(avg.global_params[k], reg.global_params[k]), k
    extra = {"scaffold": 0.0, "moon": 0.0, "fedcka": 5.0 * math.log(2)}[strategy]
    assert reg.history[0]["train_loss"] == pytest.approx(avg.history[0]["train_loss"] + extra, abs=1e-5)


def slow_scaffold(c: Config, data) -> tuple[dict, torch.Tensor, dict]:
    """SCAFFOLD option II written out: torch.optim.SGD, the correction after each step, c_i and c updates."""
    eng = Engine(c, data=data, progress=False)
    model, names, task = eng.model, eng.trainable, eng.task()
    w = {k: v.clone() for k, v in eng.global_params.items()}
    c_srv = {k: torch.zeros_like(w[k]) for k in names}
    c_cl: dict[int, dict] = {}
    for rnd in range(c.rounds):
        uploads, sizes, dc = [], [], {k: torch.zeros_like(w[k]) for k in names}
        for cid in sample_clients(eng.n_clients, c.sample_fraction, c.seed, rnd).tolist():
            ci = c_cl.get(cid, {k: torch.zeros_like(w[k]) for k in names})
            load_params_(model, w)
            live = dict(model.named_parameters())
            opt = torch.optim.SGD([live[k] for k in names], lr=c.lr, momentum=c.momentum,
                                  weight_decay=c.weight_decay)
            steps = 0
            for epoch in range(c.local_epochs):
                for x, y in batches(task, cid, rnd, epoch):
                    opt.zero_grad()
                    F.cross_entropy(model(x), y).backward()
                    opt.step()
                    with torch.no_grad():
                        for k in names:
                            live[k] -= c.lr * (c_srv[k] - ci[k])
                    steps += 1
            y_i = {k: v.detach().clone() for k, v in model.state_dict().items()}
            new = {k: ci[k] - c_srv[k] + (w[k] - y_i[k]) / (steps * c.lr) for k in names}
            for k in names:
                dc[k] += new[k] - ci[k]
            c_cl[cid] = new
            uploads.append(y_i)
            sizes.append(len(eng.client_idx[cid]))
        c_srv = {k: c_srv[k] + dc[k] / eng.n_clients for k in names}
        w = {k: sum(u[k] * (s / sum(sizes)) for u, s in zip(uploads, sizes)) for k in w}
    flat = lambda d: torch.cat([d[k].reshape(-1) for k in names])  # noqa: E731
    return w, flat(c_srv), {cid: flat(v) for cid, v in c_cl.items()}


def test_scaffold_matches_a_slow_independent_computation(data):
    c = cfg(model="intr_cnn", strategy="scaffold", rounds=3, local_epochs=2, lr=0.05)
    w, c_srv, c_cl = slow_scaffold(c, data)
    eng = trained(c, data)
    assert float(c_srv.abs().max()) > 1e-3  # the control variates are not vacuous
    torch.testing.assert_close(eng.strategy.state_dict()["c"], c_srv, atol=1e-5, rtol=1e-4)
    assert set(c_cl) == {cid for cid, st in eng.client_state.items() if "c_i" in st}
    assert all(len(h["clients"]) < eng.n_clients for h in eng.history)  # c += Σ Δc_i / N over all N clients
    for cid, v in c_cl.items():
        torch.testing.assert_close(eng.client_state[cid]["c_i"], v, atol=1e-5, rtol=1e-4)
    for k in w:
        torch.testing.assert_close(eng.global_params[k], w[k], atol=1e-5, rtol=1e-4)


# ------------------------------------------------------------------------------ executors and checkpoints
@pytest.mark.parametrize("strategy,kw,model,augment", [
    ("scaffold", {}, "intr_cnn", "flip"),
    ("moon", {"mu": 5.0}, "simple_cnn", "flip"),
    ("fedcka", {"mu": 5.0, "M": 3}, "simple_cnn", "none"),
    ("fedintr", {"mu": 5.0}, "intr_cnn", "flip"),
])
def test_vectorized_equals_sequential(strategy, kw, model, augment, data):
    c = cfg(strategy=strategy, strategy_kw=kw, model=model, augment=augment, rounds=3)
    seq = trained(c, data)
    vec = trained(c.replace(executor="vectorized"), data)
    assert vec.executor.name == "vectorized"
    visits = [cid for h in seq.history for cid in h["clients"]]
    assert any(visits.count(v) > 1 for v in visits) and len(set(visits)) > len(seq.history[-1]["clients"])
    for k in seq.global_params:
        torch.testing.assert_close(vec.global_params[k], seq.global_params[k], atol=1e-5, rtol=1e-4)
    for a, b in zip(seq.history, vec.history):
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-4, abs=1e-5)


def test_reference_taps_cached_per_round_equal_per_batch(data, monkeypatch):
    from fedlib.executors import refcache

    c = cfg(strategy="fedcka", strategy_kw={"mu": 5.0}, augment="flip", rounds=3)
    cached = trained(c, data)
    monkeypatch.setitem(refcache._CHUNK, "cpu", 7)  # every client's table built over several chunks
    chunked = trained(c, data)
    for k in cached.global_params:
        torch.testing.assert_close(chunked.global_params[k], cached.global_params[k], atol=1e-5, rtol=1e-4)
    monkeypatch.setenv("FEDLIB_REF_CACHE_MB", "0")
    for ex in ("sequential", "vectorized"):
        plain = trained(c.replace(executor=ex), data)
        for k in cached.global_params:
            torch.testing.assert_close(plain.global_params[k], cached.global_params[k], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("strategy", ["scaffold", "moon"])
def test_checkpoint_resume_is_exact(strategy, data, tmp_path):
    c = cfg(strategy=strategy, rounds=4)
    full = trained(c, data)
    first = Engine(c.replace(rounds=4), data=data, progress=False)
    for rnd in range(2):
        first.history.append(first.run_round(rnd))
        first.round = rnd + 1
    first.save_checkpoint(tmp_path / "ck.pt")
    resumed = Engine(c, data=data, progress=False)
    resumed.load_checkpoint(tmp_path / "ck.pt")
    resumed.run()
    for k in full.global_params:
        assert torch.equal(full.global_params[k], resumed.global_params[k]), k
    if strategy == "scaffold":
        assert torch.equal(full.strategy.state_dict()["c"], resumed.strategy.state_dict()["c"])
    for cid, st in full.client_state.items():
        assert st.keys() == resumed.client_state[cid].keys()


# ------------------------------------------------------------------------------------ selection, options
def test_strategies_by_name_with_clear_errors():
    model = build_model("simple_cnn", (3, 32, 32), 10)
    for name, want in [("fedcka", ("conv1", "conv2")), ("moon", ("l2",))]:
        s = build_strategy(name)
        s.setup(model, cfg())
        assert s.needs.taps == want
    s = build_strategy("fedcka", M=7)
    s.setup(model, cfg())
    assert s.needs.taps == model.layer_taps
    with pytest.raises(ValueError, match="1 <= M <= 7"):
        build_strategy("fedcka", M=8).setup(model, cfg())
    with pytest.raises(ValueError, match="projection heads"):
        build_strategy("fedintr").setup(model, cfg())
    with pytest.raises(ValueError, match="valid"):
        build_strategy("fedcka", sim="cka")
    intr = build_model("intr_cnn", (1, 28, 28), 10)
    s = build_strategy("fedcka", on="heads", M=2)
    s.setup(intr, cfg())
    assert s.needs.taps == ("proj:conv1", "proj:conv2")


# ------------------------------------------------------------------------------- presets and model options
def test_presets_follow_the_papers_read_against_their_code():
    from fedlib.companion.papers import preset

    cka = preset("fedcka")
    assert (cka.lr, cka.drop_last, cka.model) == (0.01, True, "simple_cnn")  # MOON's lr; MOON's loader
    assert preset("fedcka", variant="lr0.1").lr == 0.1  # the printed value, kept by name
    assert preset("fedcka", dataset="cifar100").model_kw == {"projection": True}  # ResNet-50 "as per MOON"
    assert preset("fedcka", dataset="tinyimagenet").model == "resnet50"
    intr = preset("fedintr")
    assert intr.partition_kw == {"beta": 0.5, "convention": "fedintr"}  # no balance cap, no minimum size
    assert preset("fedintr", variant="moon_split").partition_kw["convention"] == "niid-bench"
    assert preset("fedintr", dataset="cifar100").model_kw == {"intr_heads": True}
    assert preset("fedintr", variant="code_input").model_kw == {"code_input": True}
    with pytest.raises(ValueError, match="valid: \\['lr0.1'\\]"):
        preset("fedcka", variant="lr1")
    for name in ("scaffold", "moon", "fedcka", "fedintr"):  # every strategy selectable by name in a preset
        assert preset("fedintr", "smoke", strategy=name).strategy == name


def test_fedintr_cnn_takes_fashion_mnist_as_its_code_does(data):
    m = build_model("intr_cnn", (1, 20, 20), 10, code_input=True)
    _, taps = m(torch.randn(2, 1, 20, 20), taps=("conv1", "conv2", "conv3"))
    assert [tuple(t.shape[1:]) for t in taps] == [(8, 15, 15), (16, 6, 6), (32, 2, 2)]  # 3 × 32 × 32, padding 0
    assert m.conv1.in_channels == 3 and m.conv1.padding == (0, 0) and m.flat_dim == 128
    c = cfg(model="intr_cnn", model_kw={"code_input": True}, strategy="fedintr", rounds=1)
    seq, vec = trained(c, data), trained(c.replace(executor="vectorized"), data)
    for k in seq.global_params:
        torch.testing.assert_close(vec.global_params[k], seq.global_params[k], atol=1e-5, rtol=1e-4)
