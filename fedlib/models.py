"""CNNs and ResNets that return named representation taps.

Every model is a :class:`FedModel`: ``model(x)`` gives logits; ``model(x, taps=names)`` gives
``(logits, [tap tensors in the requested order])`` from one forward pass. Taps are returned as computed
(conv maps ``(B, C, H, W)``, dense ``(B, F)``); callers flatten.

Tap order (``tap_names``): the main-path layers in forward order without the logits, then any side
projection-head taps (``"proj:<layer>"``, FedIntR), then the logits tap last. So ``tap_names[-1]`` is always
the logits, and ``layer_taps`` lists the main path only (logits last): FedCKA's "first M layers" are
``layer_taps[:M]`` (equal to ``tap_names[:M]`` whenever M does not reach past the main path).

Side projection heads run only when one of their taps is requested. No in-place ops on inputs and no
tensor-value control flow, so models work under ``torch.func.functional_call`` and ``torch.func.vmap``
(BatchNorm ResNets: vmap in eval mode, or stack the buffers too; see tests).

Initialization is PyTorch's default (Kaiming-uniform for conv/linear, BN weight 1 / bias 0), deterministic
under ``torch.manual_seed``; modules are created in forward order.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call

from fedlib.options import Option, at_least, option_problems, signature_options

__all__ = ["FedModel", "SimpleCNN", "IntrCNN", "ResNet", "MODELS", "build_model", "model_options",
           "conv_pool_relu"]


class FedModel(nn.Module):
    """Base class: tap bookkeeping shared by all models.

    Subclasses set ``layer_taps`` (main path, logits last), ``side_taps`` (optional projection heads),
    ``moon_tap``, ``head`` and implement ``_run(x, want) -> dict`` returning every main-path tap plus the
    requested side taps.
    """

    layer_taps: tuple[str, ...] = ()
    side_taps: tuple[str, ...] = ()
    intr_taps: tuple[str, ...] = ()
    moon_tap: str = ""
    head: str = ""

    @property
    def tap_names(self) -> tuple[str, ...]:
        """Every tap: main-path layers (no logits), side projection taps, then the logits tap."""
        return self.layer_taps[:-1] + self.side_taps + self.layer_taps[-1:]

    def forward(self, x: Tensor, taps: Sequence[str] = ()) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Logits if ``taps`` is empty; else ``(logits, [taps in the requested order])`` from the same pass."""
        if isinstance(taps, str):
            taps = (taps,)
        valid = self.tap_names
        bad = [t for t in taps if t not in valid]
        if bad:
            raise ValueError(f"unknown tap(s) {bad} for {type(self).__name__}; valid taps: {list(valid)}")
        out = self._run(x, frozenset(taps))
        logits = out[self.layer_taps[-1]]
        return (logits, [out[t] for t in taps]) if len(taps) else logits

    def _run(self, x: Tensor, want: frozenset[str]) -> dict[str, Tensor]:
        raise NotImplementedError

    tail_taps: tuple[str, ...] = ()  # the main-path taps :meth:`tail` can start from

    def tail(self, tap: str, h: Tensor) -> Tensor:
        """The logits from main-path tap ``tap``'s output ``h`` (the rest of the forward pass): fine-tuning a head
        on features computed once (:mod:`fedlib.finetune`). Models that can set :attr:`tail_taps`."""
        raise ValueError(f"{type(self).__name__} cannot run from tap {tap!r}; it can from {list(self.tail_taps)}.")

    def head_parameter_names(self) -> list[str]:
        """Names (as in ``named_parameters``) of the final classifier (FedBABU's head); the rest is the body."""
        return [n for n, _ in self.named_parameters() if n.startswith(self.head + ".")]


def _proj_head(in_dim: int, hidden: int | None, out_dim: int) -> nn.Sequential:
    """MOON-style 2-layer MLP projection head: Linear(in→hidden) → ReLU → Linear(hidden→out)."""
    hidden = in_dim if hidden is None else hidden
    return nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, out_dim))


def conv_pool_relu(conv: nn.Conv2d, x: Tensor, k: int = 2) -> Tensor:
    """``relu(max_pool2d(conv(x), k))``, the conv block of the CNNs below (pooling first: relu and max commute, in
    value and gradient, and the elementwise work shrinks k²-fold). A conv module with a ``forward_pool_relu(x, k)``
    method computes the block in one step: the vectorized executor's per-client convolutions on the CPU do, so a
    client's full-resolution conv map never leaves the cache (same values and gradients)."""
    fused = getattr(conv, "forward_pool_relu", None)
    return fused(x, k) if fused is not None else F.relu(F.max_pool2d(conv(x), k))


# --------------------------------------------------------------------------------------------------------------
# FedCKA / MOON simple CNN
# --------------------------------------------------------------------------------------------------------------
class SimpleCNN(FedModel):
    """FedCKA §4.1 / MOON ``ModelFedCon`` simple CNN.

    conv5x5(16)-ReLU-pool2 → conv5x5(32)-ReLU-pool2 → fc1 120 → fc2 84 → [l1 84→84 ReLU → l2 84→out_dim] →
    classifier. With ``projection`` (default, as FedCKA and MOON) the classifier ``l3`` sits on the projection
    output ``l2`` (no ReLU after l2, as MOON); without it this is MOON's plain SimpleCNN with classifier ``fc3``.
    Flatten size is 32·5·5 = 800 on 32×32 and 32·4·4 = 512 on 28×28.

    ``intr_heads=True`` adds FedIntR-style side projection heads (Linear→ReLU→Linear, 256-d) on the flattened
    outputs of conv1, conv2, fc1 and fc2 (taps ``"proj:<layer>"``), so FedIntR runs in FedCKA's setup.
    """

    def __init__(self, in_shape: tuple[int, int, int], num_classes: int, projection: bool = True,
                 out_dim: int = 256, intr_heads: bool = False, proj_dim: int = 256,
                 proj_hidden: int | None = 256) -> None:
        super().__init__()
        c, h, w = in_shape
        self.flat_dim = 32 * (((h - 4) // 2 - 4) // 2) * (((w - 4) // 2 - 4) // 2)
        self.projection = projection
        self.conv1 = nn.Conv2d(c, 16, 5)
        self.conv2 = nn.Conv2d(16, 32, 5)
        self.fc1 = nn.Linear(self.flat_dim, 120)
        self.fc2 = nn.Linear(120, 84)
        if projection:
            self.l1 = nn.Linear(84, 84)
            self.l2 = nn.Linear(84, out_dim)
            self.l3 = nn.Linear(out_dim, num_classes)
            self.layer_taps = ("conv1", "conv2", "fc1", "fc2", "l1", "l2", "l3")
            self.moon_tap, self.head = "l2", "l3"
        else:
            self.fc3 = nn.Linear(84, num_classes)
            self.layer_taps = ("conv1", "conv2", "fc1", "fc2", "fc3")
            self.moon_tap, self.head = "fc2", "fc3"
        if intr_heads:
            h1, w1 = (h - 4) // 2, (w - 4) // 2
            dims = {"conv1": 16 * h1 * w1, "conv2": self.flat_dim, "fc1": 120, "fc2": 84}
            self.proj = nn.ModuleDict({k: _proj_head(d, proj_hidden, proj_dim) for k, d in dims.items()})
            self.side_taps = self.intr_taps = tuple(f"proj:{k}" for k in dims)

    def _run(self, x: Tensor, want: frozenset[str]) -> dict[str, Tensor]:
        o: dict[str, Tensor] = {}
        o["conv1"] = h = conv_pool_relu(self.conv1, x)
        o["conv2"] = h = conv_pool_relu(self.conv2, h)
        o["fc1"] = h = F.relu(self.fc1(h.flatten(1)))
        o["fc2"] = h = F.relu(self.fc2(h))
        if self.projection:
            o["l1"] = h = F.relu(self.l1(h))
            o["l2"] = h = self.l2(h)
            o["l3"] = self.l3(h)
        else:
            o["fc3"] = self.fc3(h)
        for k in self.intr_taps:
            if k in want:
                o[k] = self.proj[k[5:]](o[k[5:]].flatten(1))
        return o


# --------------------------------------------------------------------------------------------------------------
# FedIntR CNN
# --------------------------------------------------------------------------------------------------------------
class IntrCNN(FedModel):
    """FedIntR §IV-A CNN: three conv3x3 (8, 16, 32)-ReLU-maxpool2, fc 128-ReLU, fc 96-ReLU, classifier ``fc3``.

    Convs use padding=1 (the paper does not say): 28→14→7→3 and 32→16→8→4 spatially. Each of the five
    intermediate layers has a side projection head (2-layer MLP, 256-d output as in MOON) on its flattened
    post-pool activation, tap ``"proj:<layer>"``; the classifier does not pass through them. Hidden width
    ``proj_hidden`` = 256 by default (``None`` = the head's input dim, as MOON's l1; costly on conv maps).

    ``fc2_proj_hidden``: the hidden width of fc2's head alone. The paper states only "a 2-layer MLP with an output
    dimension of 256"; the FedIntR code's heads are 256 wide except fc2's, which is 96 (fc2's own width). ``None``
    (default) keeps ``proj_hidden`` for fc2 too; 96 is the code's head (preset variant ``"code_fc2_head"``).

    ``code_input=True``: the input as the FedIntR code feeds Fashion-MNIST — resized (bilinear) to 32 × 32 and
    replicated to 3 channels inside the model — and convs without padding: 32→15→6→2 spatially, flatten 128.
    """

    _layers = ("conv1", "conv2", "conv3", "fc1", "fc2")

    def __init__(self, in_shape: tuple[int, int, int], num_classes: int, proj_dim: int = 256,
                 proj_hidden: int | None = 256, code_input: bool = False,
                 fc2_proj_hidden: int | None = None) -> None:
        super().__init__()
        if fc2_proj_hidden is not None and not (isinstance(fc2_proj_hidden, int) and fc2_proj_hidden >= 1):
            raise ValueError(f"intr_cnn: fc2_proj_hidden={fc2_proj_hidden!r} must be None (proj_hidden, the "
                             f"paper's reading) or a whole number >= 1 (96: the FedIntR code's fc2 head).")
        self.code_input = code_input
        c, h, w = (3, 32, 32) if code_input else in_shape
        pad = 0 if code_input else 1
        self.conv1 = nn.Conv2d(c, 8, 3, padding=pad)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=pad)
        self.conv3 = nn.Conv2d(16, 32, 3, padding=pad)
        sizes = [(h, w)]
        for _ in range(3):  # conv (3×3, padding `pad`) then 2×2 max-pool
            sizes.append(tuple((d + 2 * pad - 2) // 2 for d in sizes[-1]))
        (h1, w1), (h2, w2), (h3, w3) = sizes[1:]
        self.flat_dim = 32 * h3 * w3
        self.fc1 = nn.Linear(self.flat_dim, 128)
        self.fc2 = nn.Linear(128, 96)
        self.fc3 = nn.Linear(96, num_classes)
        dims = (8 * h1 * w1, 16 * h2 * w2, self.flat_dim, 128, 96)
        hidden = dict.fromkeys(self._layers, proj_hidden) | ({"fc2": fc2_proj_hidden} if fc2_proj_hidden else {})
        self.proj = nn.ModuleDict({k: _proj_head(d, hidden[k], proj_dim) for k, d in zip(self._layers, dims)})
        self.layer_taps = self._layers + ("fc3",)
        self.side_taps = self.intr_taps = tuple(f"proj:{k}" for k in self._layers)
        self.moon_tap, self.head = "proj:fc2", "fc3"
        self.tail_taps = ("conv3", "fc1", "fc2")

    def tail(self, tap: str, h: Tensor, o: dict[str, Tensor] | None = None) -> Tensor:
        """The main path after ``tap`` (conv3, fc1 or fc2), what :meth:`_run` runs too; ``o`` records each tap."""
        if tap not in self.tail_taps:
            return super().tail(tap, h)
        o = {} if o is None else o
        if tap == "conv3":
            o["fc1"] = h = F.relu(self.fc1(h.flatten(1)))
        if tap in ("conv3", "fc1"):
            o["fc2"] = h = F.relu(self.fc2(h))
        o["fc3"] = h = self.fc3(h)
        return h

    def _run(self, x: Tensor, want: frozenset[str]) -> dict[str, Tensor]:
        o: dict[str, Tensor] = {}
        if self.code_input:
            x = F.interpolate(x, size=(32, 32), mode="bilinear", align_corners=False)
            x = x.expand(-1, 3, -1, -1) if x.shape[1] == 1 else x
        o["conv1"] = h = conv_pool_relu(self.conv1, x)
        o["conv2"] = h = conv_pool_relu(self.conv2, h)
        o["conv3"] = h = conv_pool_relu(self.conv3, h)
        self.tail("conv3", h, o)
        for k in self._layers:
            if f"proj:{k}" in want:
                o[f"proj:{k}"] = self.proj[k](o[k].flatten(1))
        return o


# --------------------------------------------------------------------------------------------------------------
# CIFAR-style ResNets
# --------------------------------------------------------------------------------------------------------------
class _PadShortcut(nn.Module):
    """He et al. (2016) option-A shortcut: strided identity, zero-padded channels; no parameters."""

    def __init__(self, stride: int, extra: int) -> None:
        super().__init__()
        self.stride, self.extra = stride, extra

    def forward(self, x: Tensor) -> Tensor:
        x = x[:, :, ::self.stride, ::self.stride]
        return F.pad(x, (0, 0, 0, 0, self.extra // 2, self.extra - self.extra // 2))


class _Projection(nn.Sequential):
    """Option-B projection shortcut: 1×1 conv with stride ``stride``, then BN (``0`` the conv, ``1`` the BN).

    The strided 1×1 conv is computed as what it is, a subsampling (every ``stride``-th row and column) followed by
    a unit-stride 1×1 conv: the same function and gradients up to float rounding, and no strided 1×1 conv reaches a
    kernel. oneDNN's strided 1×1 weight-gradient kernel (``jit_1x1``, channels-last input with fewer channels than
    its 16-channel block, e.g. a narrowed ResNet-18's first projection) writes past its per-thread workspace with
    more than one thread: heap corruption, then ``double free or corruption`` aborts. The conv module itself has
    stride 1; parameter names are those of ``nn.Sequential(conv, bn)``."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        if self.stride > 1:
            x = x[:, :, ::self.stride, ::self.stride]
        return super().forward(x)


def _conv_shortcut(cin: int, cout: int, stride: int) -> nn.Module:
    """Option-B projection shortcut (1×1 conv + BN, :class:`_Projection`) when shapes change, identity otherwise."""
    if stride == 1 and cin == cout:
        return nn.Identity()
    return _Projection(cin, cout, stride)


class BasicBlock(nn.Module):
    """Two 3×3 conv-BN layers with a residual connection (He et al. 2016)."""

    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int = 1, option_a: bool = False) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        if option_a and (stride != 1 or cin != planes):
            self.shortcut: nn.Module = _PadShortcut(stride, planes - cin)
        else:
            self.shortcut = _conv_shortcut(cin, planes, stride)

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class Bottleneck(nn.Module):
    """1×1 → 3×3 (strided) → 1×1 (×4) bottleneck block (He et al. 2016), option-B shortcut."""

    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int = 1, option_a: bool = False) -> None:
        super().__init__()
        cout = planes * self.expansion
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.shortcut = _PadShortcut(stride, cout - cin) if option_a and (stride != 1 or cin != cout) \
            else _conv_shortcut(cin, cout, stride)

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        return F.relu(self.bn3(self.conv3(out)) + self.shortcut(x))


class ResNet(FedModel):
    """CIFAR-style ResNet: 3×3 stride-1 stem conv-BN-ReLU (no max-pool), stages, adaptive avg pool, ``linear``.

    Taps: ``stem``, ``layer1``..``layerN`` (post-block outputs), ``pool`` (flattened pooled features), then the
    logits (``linear``). ``projection=True`` adds MOON's head l1 feat→feat-ReLU, l2 feat→``out_dim``, classifier
    l3 (taps l1, l2, l3; head ``l3``). ``intr_heads=True`` adds FedIntR side heads on the stem and every stage
    (taps ``proj:stem``, ``proj:layer1``, ...) on the flattened maps; only built when asked. Flattened full maps
    make these heads large (ResNet-20 on 32×32: ~11.8M head parameters vs 0.27M in the network); ``intr_pool=k``
    adaptive-average-pools each map to k×k before flattening instead (not in the paper; a cheaper option).
    """

    def __init__(self, block: type[BasicBlock] | type[Bottleneck], num_blocks: Sequence[int],
                 widths: Sequence[int], in_shape: tuple[int, int, int], num_classes: int,
                 option_a: bool = False, projection: bool = False, out_dim: int = 256,
                 intr_heads: bool = False, proj_dim: int = 256, proj_hidden: int | None = 256,
                 intr_pool: int | None = None) -> None:
        super().__init__()
        c, h, w = in_shape
        self.projection, self.intr_pool = projection, intr_pool
        self.conv1 = nn.Conv2d(c, widths[0], 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.stages = tuple(f"layer{i + 1}" for i in range(len(num_blocks)))
        area = (lambda h, w: h * w) if intr_pool is None else (lambda h, w: intr_pool * intr_pool)
        cin, dims = widths[0], {"stem": widths[0] * area(h, w)}
        for i, (name, n, planes) in enumerate(zip(self.stages, num_blocks, widths)):
            stride = 1 if i == 0 else 2
            blocks = []
            for s in [stride] + [1] * (n - 1):
                blocks.append(block(cin, planes, s, option_a))
                cin = planes * block.expansion
            self.add_module(name, nn.Sequential(*blocks))
            h, w = (h - 1) // stride + 1, (w - 1) // stride + 1
            dims[name] = cin * area(h, w)
        self.feat_dim = cin
        if projection:
            self.l1 = nn.Linear(cin, cin)
            self.l2 = nn.Linear(cin, out_dim)
            self.l3 = nn.Linear(out_dim, num_classes)
            tail, self.moon_tap, self.head = ("l1", "l2", "l3"), "l2", "l3"
        else:
            self.linear = nn.Linear(cin, num_classes)
            tail, self.moon_tap, self.head = ("linear",), "pool", "linear"
        self.layer_taps = ("stem",) + self.stages + ("pool",) + tail
        if intr_heads:
            self.intr_proj = nn.ModuleDict({k: _proj_head(d, proj_hidden, proj_dim) for k, d in dims.items()})
            self.side_taps = self.intr_taps = tuple(f"proj:{k}" for k in dims)

    def _run(self, x: Tensor, want: frozenset[str]) -> dict[str, Tensor]:
        o: dict[str, Tensor] = {}
        o["stem"] = h = F.relu(self.bn1(self.conv1(x)))
        for name in self.stages:
            o[name] = h = getattr(self, name)(h)
        o["pool"] = h = F.adaptive_avg_pool2d(h, 1).flatten(1)
        if self.projection:
            o["l1"] = h = F.relu(self.l1(h))
            o["l2"] = h = self.l2(h)
            o["l3"] = self.l3(h)
        else:
            o["linear"] = self.linear(h)
        for k in ("stem",) + self.stages:
            if f"proj:{k}" in want:
                z = o[k] if self.intr_pool is None else F.adaptive_avg_pool2d(o[k], self.intr_pool)
                o[f"proj:{k}"] = self.intr_proj[k](z.flatten(1))
        return o


def resnet18(in_shape: tuple[int, int, int], num_classes: int, width: int = 64, **kw) -> ResNet:
    """CIFAR ResNet-18 (FedER, FedBABU/FedSHIBU): BasicBlock [2, 2, 2, 2], widths 64-512, option-B shortcuts.
    ``width`` < 64 narrows every stage in proportion (w, 2w, 4w, 8w): a CPU-sized network, never the paper's."""
    return ResNet(BasicBlock, (2, 2, 2, 2), (width, 2 * width, 4 * width, 8 * width), in_shape, num_classes, **kw)


def resnet50(in_shape: tuple[int, int, int], num_classes: int, width: int = 64, **kw) -> ResNet:
    """CIFAR-stem ResNet-50 (FedCKA on CIFAR-100 / Tiny ImageNet): Bottleneck [3, 4, 6, 3], 2048-d features.
    ``width`` < 64 narrows every stage in proportion, as for :func:`resnet18` (never the paper's)."""
    return ResNet(Bottleneck, (3, 4, 6, 3), (width, 2 * width, 4 * width, 8 * width), in_shape, num_classes, **kw)


def resnet20(in_shape: tuple[int, int, int], num_classes: int, **kw) -> ResNet:
    """He et al. (2016) CIFAR ResNet-20 (FedIntR on CIFAR-100): 3×3 BasicBlocks, widths 16/32/64, option A."""
    return ResNet(BasicBlock, (3, 3, 3), (16, 32, 64), in_shape, num_classes, option_a=True, **kw)


MODELS: dict[str, Callable[..., FedModel]] = {
    "simple_cnn": SimpleCNN,
    "intr_cnn": IntrCNN,
    "resnet18": resnet18,
    "resnet20": resnet20,
    "resnet50": resnet50,
}


_FIXED_KW = {"resnet20": ("option_a",)}  # set by the builder itself: not the caller's to pass
# the valid range of each model option (Config.model_kw); their types come from the builders' signatures
MODEL_OPTION_RANGES = {"out_dim": at_least(1), "proj_dim": at_least(1), "proj_hidden": at_least(1),
                       "width": at_least(1), "intr_pool": at_least(1)}


def model_options(name: str) -> dict[str, Option]:
    """The typed options (``Config.model_kw``) model ``name`` takes; the ResNet builders forward theirs to
    :class:`ResNet`."""
    return signature_options(MODELS[name], 2, MODEL_OPTION_RANGES, exclude=_FIXED_KW.get(name, ()),
                             forward=ResNet, forward_skip=5)  # after in_shape, num_classes / block, ..., num_classes


def build_model(name: str, in_shape: tuple[int, int, int], num_classes: int, **kwargs) -> FedModel:
    """Build model ``name`` for inputs of shape ``in_shape`` (C, H, W) and ``num_classes`` outputs."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; valid models: {sorted(MODELS)}")
    problems = option_problems("model_kw", f"model {name!r}", model_options(name), kwargs)
    if problems:
        raise ValueError(" ".join(problems))
    return MODELS[name](tuple(in_shape), num_classes, **kwargs)


@torch.no_grad()
def representations(model: nn.Module, params: dict[str, Tensor], x: Tensor, taps: Sequence[str],
                    batch_size: int = 1000) -> list[Tensor]:
    """The flattened taps ``(n, features)`` of ``model`` with ``params`` on ``x``, in eval mode (the model's own
    weights and mode are left as they were)."""
    was_training = model.training
    model.eval()
    try:
        chunks: list[list[Tensor]] = [[] for _ in taps]
        for i in range(0, len(x), batch_size):
            _, out = functional_call(model, params, (x[i:i + batch_size],), {"taps": tuple(taps)})
            for c, t in zip(chunks, out):
                c.append(t.flatten(1))
        return [torch.cat(c) for c in chunks]
    finally:
        model.train(was_training)
