"""The papers' networks, each a :class:`~fedlib.models.base.FedModel` with named representation
taps (:mod:`fedlib.models.base`: the tap order and the head), and their registry: :data:`MODELS`,
:func:`build_model` with its typed options, :func:`representations`.

The CNNs are in :mod:`fedlib.models.cnn`, the ResNets in :mod:`fedlib.models.resnet`.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import Tensor, nn
from torch.func import functional_call

from fedlib.models.base import FedModel, conv_pool_relu
from fedlib.models.cnn import IntrCNN, SimpleCNN
from fedlib.models.resnet import ResNet, _PadShortcut, _Projection, resnet18, resnet20, resnet50
from fedlib.options import Option, at_least, option_problems, signature_options

__all__ = ["FedModel", "SimpleCNN", "IntrCNN", "ResNet", "MODELS", "build_model", "model_options",
           "conv_pool_relu", "representations", "resnet18", "resnet20", "resnet50", "_PadShortcut",
           "_Projection"]


MODELS: dict[str, Callable[..., FedModel]] = {
    "simple_cnn": SimpleCNN,
    "intr_cnn": IntrCNN,
    "resnet18": resnet18,
    "resnet20": resnet20,
    "resnet50": resnet50,
}


_FIXED_KW = {"resnet20": ("option_a",)}  # set by the builder itself: not the caller's to pass
# the valid range of each model option (Config.model_kw); their types come from the builders'
# signatures
MODEL_OPTION_RANGES = {"out_dim": at_least(1), "proj_dim": at_least(1), "proj_hidden": at_least(1),
                       "width": at_least(1), "intr_pool": at_least(1)}


def model_options(name: str) -> dict[str, Option]:
    """The typed options (``Config.model_kw``) model ``name`` takes; the ResNet builders forward
    theirs to :class:`ResNet`."""
    return signature_options(MODELS[name], 2, MODEL_OPTION_RANGES, exclude=_FIXED_KW.get(name, ()),
                             # after in_shape, num_classes / block, ..., num_classes
                             forward=ResNet, forward_skip=5)


def build_model(name: str, in_shape: tuple[int, int, int], num_classes: int, **kwargs) -> FedModel:
    """Build model ``name`` for inputs of shape ``in_shape`` (C, H, W) and ``num_classes``
    outputs."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; valid models: {sorted(MODELS)}")
    problems = option_problems("model_kw", f"model {name!r}", model_options(name), kwargs)
    if problems:
        raise ValueError(" ".join(problems))
    return MODELS[name](tuple(in_shape), num_classes, **kwargs)


@torch.no_grad()
def representations(model: nn.Module, params: dict[str, Tensor], x: Tensor, taps: Sequence[str],
                    batch_size: int = 1000) -> list[Tensor]:
    """The flattened taps ``(n, features)`` of ``model`` with ``params`` on ``x``, in eval mode (the
    model's own weights and mode are left as they were)."""
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
