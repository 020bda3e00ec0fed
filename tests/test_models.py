"""Tests for fedlib.models: shapes, taps, heads, registry errors, functional_call/vmap compatibility."""
from __future__ import annotations

import copy

import pytest
import torch
from torch.func import functional_call, stack_module_state, vmap

from fedlib.models import MODELS, FedModel, build_model
from fedlib.models import _PadShortcut  # noqa: PLC2701 (white-box check of option-A shortcuts)

SHAPES = [(1, 28, 28), (3, 32, 32), (3, 64, 64)]
CASES = [
    ("simple_cnn", {}), ("simple_cnn", {"projection": False}),
    ("intr_cnn", {}),
    ("resnet20", {}), ("resnet20", {"intr_heads": True, "intr_pool": 2}), ("resnet20", {"projection": True}),
    ("resnet18", {}), ("resnet18", {"projection": True}),
]


def _model(name: str, shape: tuple[int, int, int], classes: int = 10, **kw) -> FedModel:
    torch.manual_seed(0)
    return build_model(name, shape, classes, **kw).eval()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name,kw", CASES)
def test_logits_and_taps(name: str, kw: dict, shape: tuple[int, int, int]) -> None:
    m = _model(name, shape, 7, **kw)
    x = torch.randn(2, *shape)
    with torch.no_grad():
        logits = m(x)
        assert logits.shape == (2, 7)
        out, taps = m(x, taps=m.tap_names)
        assert len(taps) == len(m.tap_names) and m.tap_names[-1] == m.layer_taps[-1]
        torch.testing.assert_close(out, logits)  # taps do not change the logits
        torch.testing.assert_close(taps[-1], logits)  # last tap is the logits
        rev = list(reversed(m.tap_names))
        _, taps_rev = m(x, taps=rev)  # order follows the request
        for a, b in zip(taps_rev, reversed(taps)):
            torch.testing.assert_close(a, b)
        _, (moon,) = m(x, taps=[m.moon_tap])
        assert moon.dim() == 2 and moon.shape[0] == 2
    assert m.head == m.tap_names[-1]  # the classifier module is named like the logits tap


@pytest.mark.parametrize("shape", [(3, 32, 32), (3, 64, 64)])
def test_resnet50(shape: tuple[int, int, int]) -> None:
    m = _model("resnet50", shape, 5, projection=True)
    with torch.no_grad():
        out, (stem, l1, pool, l2) = m(torch.randn(2, *shape), taps=("stem", "layer1", "pool", "l2"))
    assert out.shape == (2, 5) and stem.shape[1] == 64 and l1.shape[1] == 256
    assert pool.shape == (2, 2048) and l2.shape == (2, 256) and m.head == "l3" and m.moon_tap == "l2"


def test_simple_cnn_architecture() -> None:
    m = _model("simple_cnn", (3, 32, 32), 10)
    assert m.flat_dim == 800 and m.fc1.in_features == 800
    assert m.tap_names == ("conv1", "conv2", "fc1", "fc2", "l1", "l2", "l3")
    assert (m.moon_tap, m.head) == ("l2", "l3")
    expected = (3 * 16 * 25 + 16) + (16 * 32 * 25 + 32) + (800 * 120 + 120) + (120 * 84 + 84) \
        + (84 * 84 + 84) + (84 * 256 + 256) + (256 * 10 + 10)
    assert sum(p.numel() for p in m.parameters()) == expected == 151802
    _, taps = m(torch.randn(2, 3, 32, 32), taps=m.tap_names)
    assert [tuple(t.shape[1:]) for t in taps] == [(16, 14, 14), (32, 5, 5), (120,), (84,), (84,), (256,), (10,)]
    plain = _model("simple_cnn", (1, 28, 28), 10, projection=False)
    assert plain.flat_dim == 512 and plain.tap_names == ("conv1", "conv2", "fc1", "fc2", "fc3")
    assert sum(p.numel() for p in plain.parameters()) == (1 * 16 * 25 + 16) + (16 * 32 * 25 + 32) \
        + (512 * 120 + 120) + (120 * 84 + 84) + (84 * 10 + 10)


def test_intr_cnn_projection_heads() -> None:
    m = _model("intr_cnn", (1, 28, 28), 10)
    assert m.intr_taps == ("proj:conv1", "proj:conv2", "proj:conv3", "proj:fc1", "proj:fc2")
    assert m.layer_taps == ("conv1", "conv2", "conv3", "fc1", "fc2", "fc3") and m.moon_tap == "proj:fc2"
    x = torch.randn(3, 1, 28, 28)
    logits, z = m(x, taps=m.intr_taps)
    assert [tuple(t.shape) for t in z] == [(3, 256)] * 5
    _, maps = m(x, taps=("conv1", "conv2", "conv3"))
    assert [tuple(t.shape[1:]) for t in maps] == [(8, 14, 14), (16, 7, 7), (32, 3, 3)]
    # the classifier does not pass through the side heads
    with torch.no_grad():
        for p in m.proj.parameters():
            p.zero_()
    torch.testing.assert_close(m(x), logits)


def test_intr_cnn_fc2_head_width_paper_and_code() -> None:
    """The paper's heads (hidden 256 on every layer) by default; the FedIntR code's fc2 head (96 wide) by name."""
    from fedlib.companion.papers import preset

    hidden = lambda m: {k: h[0].out_features for k, h in m.proj.items()}  # noqa: E731
    assert hidden(_model("intr_cnn", (1, 28, 28), 10)) == dict.fromkeys(("conv1", "conv2", "conv3", "fc1", "fc2"), 256)
    cfg = preset("fedintr", "smoke", variant="code_fc2_head")
    code = _model("intr_cnn", (1, 28, 28), 10, **cfg.model_kw)
    assert hidden(code) == {"conv1": 256, "conv2": 256, "conv3": 256, "fc1": 256, "fc2": 96}
    assert tuple(code.proj["fc2"][0].weight.shape) == (96, 96)
    _, z = code(torch.randn(2, 1, 28, 28), taps=code.intr_taps)
    assert [tuple(t.shape) for t in z] == [(2, 256)] * 5  # every head still ends in 256
    assert cfg.key() != preset("fedintr", "smoke").key()  # a different model: a different record
    with pytest.raises(ValueError, match="fc2_proj_hidden=0"):
        _model("intr_cnn", (1, 28, 28), 10, fc2_proj_hidden=0)


def test_side_heads_run_only_when_requested() -> None:
    m = _model("intr_cnn", (3, 32, 32), 10)
    calls: list[str] = []
    for k, head in m.proj.items():
        head.register_forward_hook(lambda *_, k=k: calls.append(k))
    x = torch.randn(2, 3, 32, 32)
    m(x, taps=("conv1", "fc2"))
    assert calls == []
    m(x, taps=("proj:conv2",))
    assert calls == ["conv2"]


@pytest.mark.parametrize("name,kw,head", [
    ("simple_cnn", {}, "l3"), ("simple_cnn", {"projection": False}, "fc3"), ("intr_cnn", {}, "fc3"),
    ("resnet18", {}, "linear"), ("resnet18", {"projection": True}, "l3"), ("resnet20", {"intr_heads": True}, "linear"),
])
def test_head_parameter_names(name: str, kw: dict, head: str) -> None:
    m = _model(name, (3, 32, 32), 10, **kw)
    assert m.head == head and m.head_parameter_names() == [f"{head}.weight", f"{head}.bias"]
    assert set(m.head_parameter_names()) <= dict(m.named_parameters()).keys()


def test_unknown_model_and_tap() -> None:
    with pytest.raises(ValueError, match="simple_cnn") as e:
        build_model("vgg11", (3, 32, 32), 10)
    assert all(n in str(e.value) for n in MODELS)
    m = _model("intr_cnn", (3, 32, 32), 10)
    with pytest.raises(ValueError, match="proj:fc2") as e:
        m(torch.randn(1, 3, 32, 32), taps=("conv1", "nope"))
    assert "nope" in str(e.value) and all(t in str(e.value) for t in m.tap_names)
    with pytest.raises(ValueError, match="valid taps"):
        _model("resnet20", (3, 32, 32), 10)(torch.randn(1, 3, 32, 32), taps=("proj:stem",))


@pytest.mark.parametrize("name,train", [("simple_cnn", True), ("intr_cnn", True), ("resnet20", False),
                                        ("resnet20", True)])
def test_functional_call_vmap(name: str, train: bool) -> None:
    torch.manual_seed(0)
    models = [build_model(name, (3, 32, 32), 10).train(train) for _ in range(3)]
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")
    x = torch.randn(3, 4, 3, 32, 32)
    taps = (models[0].moon_tap, models[0].tap_names[0])

    def f(p: dict, b: dict, xb: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        return functional_call(base, (p, b), (xb,), {"taps": taps})

    with torch.no_grad():
        logits, (moon, first) = vmap(f)(params, buffers, x)
        for i, m in enumerate(models):
            ref, (rmoon, rfirst) = m(x[i], taps=taps)
            torch.testing.assert_close(logits[i], ref, atol=1e-5, rtol=0)
            torch.testing.assert_close(moon[i], rmoon, atol=1e-5, rtol=0)
            torch.testing.assert_close(first[i], rfirst, atol=1e-5, rtol=0)


def test_resnet20_option_a() -> None:
    m = _model("resnet20", (3, 32, 32), 10)
    pads = [s for s in m.modules() if isinstance(s, _PadShortcut)]
    assert len(pads) == 2 and all(sum(p.numel() for p in s.parameters()) == 0 for s in pads)
    assert sum(p.numel() for p in m.parameters()) == 269722  # He et al. ResNet-20 ("0.27M")
    assert m.tap_names == ("stem", "layer1", "layer2", "layer3", "pool", "linear") and m.moon_tap == "pool"
    x = torch.randn(2, 16, 8, 8)
    y = pads[0](x)
    assert y.shape == (2, 32, 4, 4) and torch.equal(y[:, 8:24], x[:, :, ::2, ::2]) and not y[:, :8].any()
    mi = _model("resnet20", (3, 32, 32), 10, intr_heads=True)
    assert mi.intr_taps == ("proj:stem", "proj:layer1", "proj:layer2", "proj:layer3")
    _, z = mi(torch.randn(2, 3, 32, 32), taps=mi.intr_taps)
    assert [tuple(t.shape) for t in z] == [(2, 256)] * 4


def test_deterministic_init() -> None:
    for name in ("simple_cnn", "intr_cnn", "resnet20"):
        a, b = _model(name, (3, 32, 32)), _model(name, (3, 32, 32))
        assert all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values()))


def test_projection_shortcut_is_the_strided_1x1_conv() -> None:
    """Option-B projections subsample, then run a unit-stride 1×1 conv: the strided conv's values and gradients
    (float64), under the same parameter names; no model hands a strided 1×1 conv to a kernel."""
    from torch import nn

    from fedlib.models import _Projection  # noqa: PLC2701

    torch.manual_seed(0)
    proj = _Projection(6, 12, 2).double()
    ref = nn.Sequential(nn.Conv2d(6, 12, 1, 2, bias=False), nn.BatchNorm2d(12)).double()
    ref.load_state_dict(proj.state_dict())
    for h in (8, 7):  # odd sizes too: the last row and column are kept
        x = torch.randn(5, 6, h, h, dtype=torch.float64, requires_grad=True)
        y, y_ref = proj(x), ref(x)
        torch.testing.assert_close(y, y_ref)
        g = torch.randn_like(y)
        got = torch.autograd.grad(y, [x, proj[0].weight], g)
        want = torch.autograd.grad(y_ref, [x, ref[0].weight], g)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b)
    for name, kw in [("resnet18", {"width": 8}), ("resnet50", {"width": 8})]:
        m = build_model(name, (1, 16, 16), 10, **kw)
        assert "layer2.0.shortcut.0.weight" in m.state_dict() and "layer2.0.shortcut.1.running_var" in m.state_dict()
        convs = [c for c in m.modules() if isinstance(c, nn.Conv2d)]
        assert not [c for c in convs if c.kernel_size == (1, 1) and c.stride != (1, 1)]
        assert [s.stride for s in m.modules() if isinstance(s, _Projection)].count(2) == 3


_NARROW_RESNET_STEPS = """
import torch, torch.nn.functional as F
from fedlib.models import resnet18
torch.set_num_threads(2)
torch.manual_seed(0)
model = resnet18((1, 16, 16), 10, width=4).to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for b in (7, 5, 3) * 3:
    loss = F.cross_entropy(model(torch.randn(b, 1, 16, 16)), torch.randint(0, 10, (b,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
print("ok")
"""


def test_narrow_resnet_trains_on_two_cpu_threads_without_heap_corruption() -> None:
    """A narrowed ResNet-18 (4-32 channels: projections with fewer input channels than oneDNN's 16-channel block)
    trained in channels_last on two threads with odd batch sizes, as the sequential executor does on the CPU, in a
    subprocess so that a crash fails only this test. A strided 1×1 projection conv here makes oneDNN's weight
    gradient write past its workspace: SIGSEGV, or glibc's ``double free or corruption`` abort under
    ``MALLOC_CHECK_=3``."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "MALLOC_CHECK_": "3", "OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "PASSIVE"}
    p = subprocess.run([sys.executable, "-c", _NARROW_RESNET_STEPS], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "ok", (p.returncode, p.stderr[-2000:])
