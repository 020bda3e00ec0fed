"""The papers' CNNs: FedCKA's and MOON's simple CNN, FedIntR's CNN."""
from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from fedlib.models.base import FedModel, _proj_head, conv_pool_relu

__all__ = ["SimpleCNN", "IntrCNN"]


class SimpleCNN(FedModel):
    """FedCKA §4.1 / MOON ``ModelFedCon`` simple CNN.

    conv5x5(16)-ReLU-pool2 → conv5x5(32)-ReLU-pool2 → fc1 120 → fc2 84 → [l1 84→84 ReLU → l2
    84→out_dim] → classifier. With ``projection`` (default, as FedCKA and MOON) the classifier
    ``l3`` sits on the projection output ``l2`` (no ReLU after l2, as MOON); without it this is
    MOON's plain SimpleCNN with classifier ``fc3``. Flatten size is 32·5·5 = 800 on 32×32 and
    32·4·4 = 512 on 28×28.

    ``intr_heads=True`` adds FedIntR-style side projection heads (Linear→ReLU→Linear, 256-d) on the
    flattened outputs of conv1, conv2, fc1 and fc2 (taps ``"proj:<layer>"``), so FedIntR runs in
    FedCKA's setup.
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
            self.proj = nn.ModuleDict(
                {k: _proj_head(d, proj_hidden, proj_dim)
                 for k, d in dims.items()})
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


class IntrCNN(FedModel):
    """FedIntR §IV-A CNN: three conv3x3 (8, 16, 32)-ReLU-maxpool2, fc 128-ReLU, fc 96-ReLU,
    classifier ``fc3``.

    Convs use padding=1 (the paper does not say): 28→14→7→3 and 32→16→8→4 spatially. Each of the
    five intermediate layers has a side projection head (2-layer MLP, 256-d output as in MOON) on
    its flattened post-pool activation, tap ``"proj:<layer>"``; the classifier does not pass through
    them. Hidden width ``proj_hidden`` = 256 by default (``None`` = the head's input dim, as MOON's
    l1; costly on conv maps).

    ``fc2_proj_hidden``: the hidden width of fc2's head alone. The paper states only "a 2-layer MLP
    with an output dimension of 256"; the FedIntR code's heads are 256 wide except fc2's, which is
    96 (fc2's own width). ``None`` (default) keeps ``proj_hidden`` for fc2 too; 96 is the code's
    head (preset variant ``"code_fc2_head"``).

    ``code_input=True``: the input as the FedIntR code feeds Fashion-MNIST — resized (bilinear) to
    32 × 32 and replicated to 3 channels inside the model — and convs without padding: 32→15→6→2
    spatially, flatten 128.
    """

    _layers = ("conv1", "conv2", "conv3", "fc1", "fc2")

    def __init__(self, in_shape: tuple[int, int, int], num_classes: int, proj_dim: int = 256,
                 proj_hidden: int | None = 256, code_input: bool = False,
                 fc2_proj_hidden: int | None = None) -> None:
        super().__init__()
        if fc2_proj_hidden is not None and not (isinstance(fc2_proj_hidden, int) and
                                                fc2_proj_hidden >= 1):
            raise ValueError(f"intr_cnn: fc2_proj_hidden={fc2_proj_hidden!r} must be None "
                             "(proj_hidden, the paper's reading) or a whole number >= 1 (96: the "
                             "FedIntR code's fc2 head).")
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
        hidden = dict.fromkeys(self._layers,
                               proj_hidden) | ({"fc2": fc2_proj_hidden} if fc2_proj_hidden else {})
        self.proj = nn.ModuleDict(
            {k: _proj_head(d, hidden[k], proj_dim)
             for k, d in zip(self._layers, dims)})
        self.layer_taps = self._layers + ("fc3",)
        self.side_taps = self.intr_taps = tuple(f"proj:{k}" for k in self._layers)
        self.moon_tap, self.head = "proj:fc2", "fc3"
        self.tail_taps = ("conv3", "fc1", "fc2")

    def tail(self, tap: str, h: Tensor, o: dict[str, Tensor] | None = None) -> Tensor:
        """The main path after ``tap`` (conv3, fc1 or fc2), what :meth:`_run` runs too; ``o``
        records each tap."""
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
