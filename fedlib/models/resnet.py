"""CIFAR-style ResNets (He et al. 2016): ResNet-18, -20 and -50 with option-A or option-B
shortcuts, optional MOON projection and FedIntR side heads."""
from __future__ import annotations

from typing import Sequence

import torch.nn.functional as F
from torch import Tensor, nn

from fedlib.models.base import FedModel, _proj_head

__all__ = ["ResNet", "BasicBlock", "Bottleneck", "resnet18", "resnet20", "resnet50"]


class _PadShortcut(nn.Module):
    """He et al. (2016) option-A shortcut: strided identity, zero-padded channels; no parameters."""

    def __init__(self, stride: int, extra: int) -> None:
        super().__init__()
        self.stride, self.extra = stride, extra

    def forward(self, x: Tensor) -> Tensor:
        x = x[:, :, ::self.stride, ::self.stride]
        return F.pad(x, (0, 0, 0, 0, self.extra // 2, self.extra - self.extra // 2))


class _Projection(nn.Sequential):
    """Option-B projection shortcut: 1×1 conv with stride ``stride``, then BN (``0`` the conv, ``1``
    the BN).

    The strided 1×1 conv is computed as what it is, a subsampling (every ``stride``-th row and
    column) followed by a unit-stride 1×1 conv: the same function and gradients up to float
    rounding, and no strided 1×1 conv reaches a kernel. oneDNN's strided 1×1 weight-gradient kernel
    (``jit_1x1``, channels-last input with fewer channels than its 16-channel block, e.g. a narrowed
    ResNet-18's first projection) writes past its per-thread workspace with more than one thread:
    heap corruption, then ``double free or corruption`` aborts. The conv module itself has stride 1;
    parameter names are those of ``nn.Sequential(conv, bn)``."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        if self.stride > 1:
            x = x[:, :, ::self.stride, ::self.stride]
        return super().forward(x)


def _conv_shortcut(cin: int, cout: int, stride: int) -> nn.Module:
    """Option-B projection shortcut (1×1 conv + BN, :class:`_Projection`) when shapes change,
    identity otherwise."""
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
        if option_a and (stride != 1 or cin != cout):
            self.shortcut: nn.Module = _PadShortcut(stride, cout - cin)
        else:
            self.shortcut = _conv_shortcut(cin, cout, stride)

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        return F.relu(self.bn3(self.conv3(out)) + self.shortcut(x))


class ResNet(FedModel):
    """CIFAR-style ResNet: 3×3 stride-1 stem conv-BN-ReLU (no max-pool), stages, adaptive avg pool,
    ``linear``.

    Taps: ``stem``, ``layer1``..``layerN`` (post-block outputs), ``pool`` (flattened pooled
    features), then the logits (``linear``). ``projection=True`` adds MOON's head l1 feat→feat-ReLU,
    l2 feat→``out_dim``, classifier l3 (taps l1, l2, l3; head ``l3``). ``intr_heads=True`` adds
    FedIntR side heads on the stem and every stage (taps ``proj:stem``, ``proj:layer1``, ...) on the
    flattened maps; only built when asked. Flattened full maps make these heads large (ResNet-20 on
    32×32: ~11.8M head parameters vs 0.27M in the network); ``intr_pool=k`` adaptive-average-pools
    each map to k×k before flattening instead (not in the paper; a cheaper option).
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
            self.intr_proj = nn.ModuleDict(
                {k: _proj_head(d, proj_hidden, proj_dim)
                 for k, d in dims.items()})
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
    """CIFAR ResNet-18 (FedER, FedBABU/FedSHIBU): BasicBlock [2, 2, 2, 2], widths 64-512, option-B
    shortcuts. ``width`` < 64 narrows every stage in proportion (w, 2w, 4w, 8w): a CPU-sized
    network, never the paper's."""
    return ResNet(BasicBlock, (2, 2, 2, 2), (width, 2 * width, 4 * width, 8 * width), in_shape,
                  num_classes, **kw)


def resnet50(in_shape: tuple[int, int, int], num_classes: int, width: int = 64, **kw) -> ResNet:
    """CIFAR-stem ResNet-50 (FedCKA on CIFAR-100 / Tiny ImageNet): Bottleneck [3, 4, 6, 3], 2048-d
    features. ``width`` < 64 narrows every stage in proportion, as for :func:`resnet18` (never the
    paper's)."""
    return ResNet(Bottleneck, (3, 4, 6, 3), (width, 2 * width, 4 * width, 8 * width), in_shape,
                  num_classes, **kw)


def resnet20(in_shape: tuple[int, int, int], num_classes: int, **kw) -> ResNet:
    """He et al. (2016) CIFAR ResNet-20 (FedIntR on CIFAR-100): 3×3 BasicBlocks, widths 16/32/64,
    option A."""
    return ResNet(BasicBlock, (3, 3, 3), (16, 32, 64), in_shape, num_classes, option_a=True, **kw)
