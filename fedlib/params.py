"""``Params``: a model's state as a dict from ``state_dict`` names to tensors (parameters *and*
buffers).

Everything that travels between the server, the clients and the executors is a ``Params``; these
helpers are the only place that copies, moves or checks them.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

Params = dict[str, Tensor]

__all__ = ["Params", "clone_params", "load_params_", "to_device", "first_non_finite", "tree_to"]


def clone_params(params: Params) -> Params:
    """Detached copies of every tensor."""
    return {k: v.detach().clone() for k, v in params.items()}


def load_params_(model: nn.Module, params: Params) -> None:
    """Copy ``params`` into ``model``'s parameters and buffers in place (keeps optimizer references
    valid)."""
    with torch.no_grad():
        for k, t in model.state_dict(keep_vars=True).items():
            t.copy_(params[k])


def to_device(params: Params, device: torch.device | str) -> Params:
    return {k: v.to(device) for k, v in params.items()}


def first_non_finite(params: Params) -> str | None:
    """The name of the first floating tensor holding a NaN or an infinity (None if all are finite).
    One host synchronization for the whole dict."""
    names = [k for k, v in params.items() if v.is_floating_point()]
    if not names:
        return None
    flags = torch.stack([torch.isfinite(params[k]).all() for k in names]).cpu().tolist()
    return next((k for k, ok in zip(names, flags) if not ok), None)



def tree_to(obj: Any, device: torch.device | str) -> Any:
    """``obj`` with every tensor inside nested dicts, lists and tuples moved to ``device``
    (checkpoints)."""
    if isinstance(obj, Tensor):
        return obj.detach().to(device)
    if isinstance(obj, dict):
        return {k: tree_to(v, device) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(tree_to(v, device) for v in obj)
    return obj
