"""FedCKA's local objective (Eq. 1-3 of both versions) against a second implementation written from the papers.

The second implementation shares nothing with :mod:`fedlib.strategies.fedcka` or
:mod:`fedlib.kernels`: the simple CNN's forward pass in plain ``torch.nn.functional`` on float64
copies of the parameters, linear CKA in the feature form of Kornblith et al. (2019) on
column-centred activations, ``‖Yᵀ X‖²_F / (‖Xᵀ X‖_F ‖Yᵀ Y‖_F)``, and Eq. 2's two-way softmax written
literally, ``−log(e^{s_g} / (e^{s_g} + e^{s_p}))``. fedlib's loss (``fedcka_loss``, the strategy's
``penalty``, one step of the engine's executors) and its gradient with respect to the local model's
parameters are compared with it; then what the term does at the start of a round, where the local
model is the global one.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from fedlib.config import Config
from fedlib.data import load_dataset
from fedlib.engine import Engine
from fedlib.local import ClientContext, LocalBatch, forward
from fedlib.models import build_model
from fedlib.strategies import build_strategy
from fedlib.strategies.fedcka import fedcka_loss

REGULARIZED = ("conv1", "conv2")  # FedCKA's M = 2 "naturally similar" layers of the simple CNN
SHAPE = (1, 28, 28)  # Fashion-MNIST


# ------------------------------------------------------------------------------------ the second implementation
def ref_linear_cka(x: Tensor, y: Tensor) -> Tensor:
    """Linear CKA (Kornblith et al. 2019; FedCKA Eq. 3) of ``x`` (n, p1) and ``y`` (n, p2): the columns centred,
    then ``‖Yᵀ X‖²_F / (‖Xᵀ X‖_F ‖Yᵀ Y‖_F)``."""
    x = x - x.mean(0, keepdim=True)
    y = y - y.mean(0, keepdim=True)
    fro = lambda m: torch.sqrt((m * m).sum())  # noqa: E731
    return fro(y.T @ x) ** 2 / (fro(x.T @ x) * fro(y.T @ y))


def ref_two_way(s_g: Tensor, s_p: Tensor) -> Tensor:
    """Eq. 2's term for one layer, as printed: ``−log(e^{s_g} / (e^{s_g} + e^{s_p}))``."""
    return -torch.log(torch.exp(s_g) / (torch.exp(s_g) + torch.exp(s_p)))


def ref_simple_cnn(w: dict[str, Tensor], x: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """The FedCKA / MOON simple CNN with its projection head, from its parameters: logits and the activations of
    every layer, flattened to (n, features). A conv layer's activation is its block's output, ReLU then 2×2 max
    pooling (MOON's order)."""
    acts = {}
    h = F.max_pool2d(F.relu(F.conv2d(x, w["conv1.weight"], w["conv1.bias"])), 2)
    acts["conv1"] = h
    h = F.max_pool2d(F.relu(F.conv2d(h, w["conv2.weight"], w["conv2.bias"])), 2)
    acts["conv2"] = h
    h = F.relu(h.flatten(1) @ w["fc1.weight"].T + w["fc1.bias"])
    acts["fc1"] = h
    h = F.relu(h @ w["fc2.weight"].T + w["fc2.bias"])
    acts["fc2"] = h
    h = F.relu(h @ w["l1.weight"].T + w["l1.bias"])
    acts["l1"] = h
    h = h @ w["l2.weight"].T + w["l2.bias"]
    acts["l2"] = h
    logits = h @ w["l3.weight"].T + w["l3.bias"]
    acts["l3"] = logits
    return logits, {k: v.reshape(len(x), -1) for k, v in acts.items()}


def ref_similarities(w: dict[str, Tensor], w_g: dict[str, Tensor], w_p: dict[str, Tensor], x: Tensor,
                     layers=REGULARIZED) -> dict[str, tuple[Tensor, Tensor]]:
    """Per layer, ``(CKA(a, a_g), CKA(a, a_p))`` of the local model ``w`` against the global and previous models."""
    _, a = ref_simple_cnn(w, x)
    with torch.no_grad():
        _, a_g = ref_simple_cnn(w_g, x)
        _, a_p = ref_simple_cnn(w_p, x)
    return {k: (ref_linear_cka(a[k], a_g[k]), ref_linear_cka(a[k], a_p[k])) for k in layers}


def ref_ell_cka(w, w_g, w_p, x, layers=REGULARIZED) -> Tensor:
    """Eq. 2: the mean over the first M layers of the two-way softmax term."""
    sims = ref_similarities(w, w_g, w_p, x, layers)
    return sum(ref_two_way(s_g, s_p) for s_g, s_p in sims.values()) / len(layers)


def ref_local_loss(w, w_g, w_p, x, y, mu: float, layers=REGULARIZED) -> Tensor:
    """Eq. 1: cross-entropy (written out) plus μ ℓ_cka."""
    logits, _ = ref_simple_cnn(w, x)
    ce = (torch.logsumexp(logits, 1) - logits.gather(1, y[:, None])[:, 0]).mean()
    return ce + mu * ref_ell_cka(w, w_g, w_p, x, layers)


def as_f64(params: dict[str, Tensor], grad: bool = False) -> dict[str, Tensor]:
    return {k: v.detach().double().contiguous().requires_grad_(grad) for k, v in params.items()}


# ------------------------------------------------------------------------------------ fixtures
@pytest.fixture(autouse=True)
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def data():
    return load_dataset("synthetic", n_train=96, n_test=32, shape=SHAPE, num_classes=10, seed=0, signal=2.0)


def _perturbed(params: dict[str, Tensor], scale: float, seed: int) -> dict[str, Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {k: v + scale * v.abs().mean() * torch.randn(v.shape, generator=g) for k, v in params.items()}


@pytest.fixture(scope="module")
def models():
    """A simple CNN and three parameter sets: global, previous (another initialization) and local (the global one
    perturbed)."""
    torch.manual_seed(1)
    prev = {k: v.detach().clone() for k, v in build_model("simple_cnn", SHAPE, 10).state_dict().items()}
    torch.manual_seed(0)
    model = build_model("simple_cnn", SHAPE, 10)
    glob = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return model, glob, prev, _perturbed(glob, 0.3, seed=2)


def _rel(got: Tensor, want: Tensor) -> float:
    """``max |got − want| / max |want|``."""
    return float((got.double() - want).abs().max() / want.abs().max())


# ------------------------------------------------------------------------------------ the comparisons
# float64: the same mathematics to rounding (~1e-14). float32, training's dtype: ~8e-6 of the largest gradient entry
# (fedlib centres the n × n Grams, which loses a few more digits than this file's formula in float32, ~3e-6)
@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 2e-5)], ids=["float64", "float32"])
def test_fedcka_loss_and_its_parameter_gradient_match_the_second_implementation(models, data, dtype, tol):
    _, glob, prev, local = models
    model = build_model("simple_cnn", SHAPE, 10).to(dtype)
    x = data.x_train[:32]
    cast = lambda p: {k: v.to(dtype) for k, v in p.items()}  # noqa: E731
    # fedlib: the local model's taps with a gradient, the references' without (as the executors feed them)
    live = {k: v.clone().requires_grad_() for k, v in cast(local).items()}
    _, taps = forward(model, live, x.to(dtype), REGULARIZED, amp=False)
    with torch.no_grad():
        _, taps_g = forward(model, cast(glob), x.to(dtype), REGULARIZED, amp=False)
        _, taps_p = forward(model, cast(prev), x.to(dtype), REGULARIZED, amp=False)
    got = fedcka_loss(taps, taps_g, taps_p)
    got_grad = dict(zip(live, torch.autograd.grad(got, list(live.values()), allow_unused=True)))

    w = as_f64(local, grad=True)
    want = ref_ell_cka(w, as_f64(glob), as_f64(prev), x.double())
    want_grad = dict(zip(w, torch.autograd.grad(want, list(w.values()), allow_unused=True)))

    sims = ref_similarities(as_f64(local), as_f64(glob), as_f64(prev), x.double())
    assert all(s_p < s_g < 1 - 1e-4 for s_g, s_p in sims.values())  # no layer at a special point of the loss
    rel = abs(float(got.detach()) - float(want.detach())) / float(want.detach())
    print(f"\n{dtype}: loss {float(want.detach()):.6f}, relative difference {rel:.2e}")
    assert rel < tol / 10
    for k in ("conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias"):
        diff = float((got_grad[k].double() - want_grad[k]).abs().max())
        print(f"  d/d {k}: max |diff| {diff:.2e}, / max |grad| {_rel(got_grad[k], want_grad[k]):.2e}")
        assert _rel(got_grad[k], want_grad[k]) < tol, k
    for k in ("fc1.weight", "l3.bias"):  # past the regularized layers the term has no gradient
        assert got_grad[k] is None and want_grad[k] is None


def test_the_strategys_penalty_is_mu_times_eq2(models, data):
    model, glob, prev, local = models
    x, y = data.x_train[:32], data.y_train[:32]
    s = build_strategy("fedcka", mu=3.0)
    s.setup(model, None)
    assert s.needs.taps == REGULARIZED and s.needs.references == ("global", "prev")
    ctx = ClientContext(cid=0, round=1, n_samples=32, steps=1, lr=0.01, first_visit=False, state={"prev": prev})
    refs_params = s.references(ctx, glob)
    assert refs_params["global"] is glob and refs_params["prev"] is prev
    live = {k: v.clone().requires_grad_() for k, v in local.items()}
    _, taps = forward(model, live, x, s.needs.taps, amp=False)
    with torch.no_grad():
        refs = {r: forward(model, p, x, s.needs.taps, amp=False)[1] for r, p in refs_params.items()}
    pen = s.penalty(ctx, LocalBatch(x=x, y=y, params=live, global_params=glob, taps=taps, refs=refs, tensors={}))
    grads = torch.autograd.grad(pen, [live["conv1.weight"], live["conv2.weight"]])
    w = as_f64(local, grad=True)
    want = 3.0 * ref_ell_cka(w, as_f64(glob), as_f64(prev), x.double())
    want_grads = torch.autograd.grad(want, [w["conv1.weight"], w["conv2.weight"]])
    assert abs(pen.item() - want.item()) / want.item() < 1e-6
    assert all(_rel(g, gw) < 1e-5 for g, gw in zip(grads, want_grads))
    # a client's first visit: the previous model is the global model
    first = ClientContext(cid=1, round=0, n_samples=32, steps=1, lr=0.01, first_visit=True, state={})
    assert s.references(first, glob)["prev"] is glob


def _engine(data, executor: str) -> Engine:
    """Two IID clients of 48 images, one full-batch step of plain SGD (lr 1, no momentum, no weight decay): the
    step is minus the gradient of the whole local loss."""
    c = Config(dataset="synthetic", model="simple_cnn", strategy="fedcka", strategy_kw={"mu": 3.0}, partition="iid",
               partition_kw={}, num_clients=2, rounds=2, local_epochs=1, batch_size=48, drop_last=True, lr=1.0,
               momentum=0.0, weight_decay=0.0, augment="none", executor=executor, seed=0)
    return Engine(c, data=data, progress=False)


@pytest.mark.parametrize("executor", ["sequential", "vectorized"])
def test_one_engine_step_is_minus_the_gradient_of_eq1(models, data, executor):
    _, glob, prev, local = models
    eng = _engine(data, executor)
    assert eng.executor.name == executor
    eng.global_params = {k: v.clone() for k, v in glob.items()}
    eng.client_state[0]["prev"] = prev
    eng.visited.add(0)
    ctx = eng.context(0, 1)
    (res,) = eng.train([ctx], [local])
    idx = eng.client_idx[0]
    x, y = data.x_train[idx].double(), data.y_train[idx]
    w = as_f64(local, grad=True)
    want = ref_local_loss(w, as_f64(glob), as_f64(prev), x, y, mu=3.0)
    want_grad = dict(zip(w, torch.autograd.grad(want, list(w.values()))))
    assert res.loss == pytest.approx(want.item(), rel=1e-5)
    worst = max((_rel(local[k].double() - res.params[k].double(), want_grad[k]), k) for k in w)
    print(f"\n{executor}: loss {res.loss:.6f} vs {want.item():.6f}; the step vs the gradient, worst tensor {worst[1]}: "
          f"{worst[0]:.2e} of its largest entry")
    assert worst[0] < 1e-4, worst


# ------------------------------------------------------------------------------------ what the term does
def test_at_the_start_of_a_round_the_term_only_pushes_away_from_the_previous_model(models, data):
    """Local = global: s_g = 1, its maximum, so its gradient vanishes and ∇ℓ_cka = σ(s_p − 1) ∇s_p. A small step
    down that gradient lowers CKA to the previous model and (second order) to the global model too: at the start of
    a round Eq. 2 can only move the regularized layers away from the global model."""
    _, glob, prev, _ = models
    x = data.x_train[:32].double()
    w = as_f64(glob, grad=True)
    sims = ref_similarities(w, as_f64(glob), as_f64(prev), x)
    for layer, (s_g, s_p) in sims.items():
        assert abs(s_g.item() - 1) < 1e-12 and s_p.item() < 1 - 1e-3
        g_g = torch.autograd.grad(s_g, [w["conv1.weight"], w["conv2.weight"]], retain_graph=True, allow_unused=True)
        g_p = torch.autograd.grad(s_p, [w["conv1.weight"], w["conv2.weight"]], retain_graph=True, allow_unused=True)
        norm = lambda gs: math.sqrt(sum(float((g * g).sum()) for g in gs if g is not None))  # noqa: E731
        assert norm(g_g) < 1e-6 * norm(g_p), layer
    loss = ref_ell_cka(w, as_f64(glob), as_f64(prev), x)
    step = torch.autograd.grad(loss, [w["conv1.weight"], w["conv2.weight"]])
    w_new = as_f64(glob)
    with torch.no_grad():
        for k, g in zip(("conv1.weight", "conv2.weight"), step):
            w_new[k] -= 0.05 * g / g.norm() * w_new[k].norm()
    after = ref_similarities(w_new, as_f64(glob), as_f64(prev), x)
    for layer in REGULARIZED:
        assert float(after[layer][1]) < sims[layer][1].item()  # further from the previous model
        assert float(after[layer][0]) < 1 - 1e-4  # and from the global model
    assert float(ref_ell_cka(w_new, as_f64(glob), as_f64(prev), x)) < loss.item()  # a descent step of Eq. 2
