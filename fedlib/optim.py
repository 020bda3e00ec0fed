"""Local optimizers: one description built from the Config, two ways to run it.

:class:`OptimizerSpec` says *which* optimizer with which hyper-parameters. The sequential executor builds the
``torch.optim`` optimizer it describes (:meth:`OptimizerSpec.build`, any registered optimizer); the vectorized
executor runs the pure functional steps below on parameters stacked over clients (:meth:`OptimizerSpec.step`),
which follow ``torch.optim``'s update rules exactly for the optimizers in :data:`FUNCTIONAL`. An optimizer with
no functional step (a package optimizer such as AdamP) runs only in the sequential executor.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

import torch
from torch import Tensor

__all__ = ["OptimizerSpec", "OPTIMIZERS", "FUNCTIONAL", "sgd_step", "adam_step", "init_optimizer_state"]

# name -> builder of the torch.optim optimizer for a list of parameters
OPTIMIZERS: dict[str, Callable[[list[torch.nn.Parameter], "OptimizerSpec"], torch.optim.Optimizer]] = {
    "sgd": lambda ps, s: torch.optim.SGD(ps, lr=s.lr, momentum=s.momentum, weight_decay=s.weight_decay),
    "adam": lambda ps, s: torch.optim.Adam(ps, lr=s.lr, betas=s.betas, eps=s.eps, weight_decay=s.weight_decay),
}
FUNCTIONAL = ("sgd", "adam")  # optimizers with a functional (vectorizable) step


@dataclass(frozen=True)
class OptimizerSpec:
    """An optimizer and its hyper-parameters (``lr`` is the base rate; a round's rate comes with each client)."""

    name: str = "sgd"
    lr: float = 0.01
    momentum: float = 0.0
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    extra: dict[str, Any] = field(default_factory=dict)  # options of registered package optimizers

    @classmethod
    def from_config(cls, cfg: Any) -> "OptimizerSpec":
        return cls(name=cfg.optimizer, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)

    def replace(self, **changes: Any) -> "OptimizerSpec":
        return replace(self, **changes)

    def validate(self) -> "OptimizerSpec":
        if self.name not in OPTIMIZERS:
            raise ValueError(f"Unknown optimizer {self.name!r}; valid optimizers: {sorted(OPTIMIZERS)}.")
        return self

    def build(self, params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
        """The ``torch.optim`` optimizer this spec describes (the sequential executor's)."""
        return OPTIMIZERS[self.validate().name](params, self)

    def functional(self) -> tuple[bool, str]:
        """(True, "") if :meth:`step` implements this optimizer; else (False, why)."""
        if self.name not in FUNCTIONAL:
            return False, f"optimizer {self.name!r} has no functional implementation (only SGD and Adam)"
        return True, ""

    def init_state(self, params: list[Tensor]) -> dict[str, list[Tensor | None]]:
        """Fresh state for (stacked) parameters: what a new ``torch.optim`` optimizer starts from."""
        return init_optimizer_state(self.name, params)

    def step(self, params: list[Tensor], grads: list[Tensor], state: dict[str, list[Tensor | None]], *, t: int,
             lr: float | Tensor) -> tuple[list[Tensor], dict[str, list[Tensor | None]]]:
        """One step at (0-based) step count ``t`` of every client; returns (new parameters, new state). Pure."""
        if self.name == "sgd":
            new_p, new_b = sgd_step(params, grads, state["momentum_buffer"], lr=lr, momentum=self.momentum,
                                    weight_decay=self.weight_decay)
            return new_p, {"momentum_buffer": new_b}
        if self.name == "adam":
            new_p, m, v = adam_step(params, grads, state["exp_avg"], state["exp_avg_sq"], step=t + 1, lr=lr,  # type: ignore[arg-type]
                                    beta1=self.betas[0], beta2=self.betas[1], eps=self.eps,
                                    weight_decay=self.weight_decay)
            return new_p, {"exp_avg": m, "exp_avg_sq": v}  # type: ignore[dict-item]
        raise ValueError(self.functional()[1])


def init_optimizer_state(kind: str, params: list[Tensor]) -> dict[str, list[Tensor | None]]:
    """Fresh optimizer state for stacked parameters (what a new ``torch.optim`` optimizer starts from)."""
    if kind == "sgd":
        return {"momentum_buffer": [None] * len(params)}
    if kind == "adam":
        return {"exp_avg": [torch.zeros_like(p) for p in params],
                "exp_avg_sq": [torch.zeros_like(p) for p in params]}
    raise ValueError(f"no functional optimizer {kind!r}")


def _lr_alpha(p: Tensor, lr: float | Tensor) -> float | Tensor:
    """A per-client learning rate (N,) as a tensor broadcastable against stacked ``p`` (N, ...)."""
    return lr if not isinstance(lr, Tensor) else lr.to(p.dtype).view(-1, *([1] * (p.dim() - 1)))


def sgd_step(params: list[Tensor], grads: list[Tensor], bufs: list[Tensor | None], *, lr: float | Tensor,
             momentum: float = 0.0, weight_decay: float = 0.0) -> tuple[list[Tensor], list[Tensor | None]]:
    """One ``torch.optim.SGD`` step (dampening 0, no nesterov) on stacked tensors; returns (params, buffers).

    ``d = g + wd·p``; momentum buffer ``b = d`` on the first step (``bufs[i] is None``), ``b = m·b + d`` after;
    ``p ← p − lr·b`` (``lr`` a float, or one value per client). Pure: the inputs are not modified."""
    new_p, new_b = [], []
    for p, g, b in zip(params, grads, bufs):
        d = g.add(p, alpha=weight_decay) if weight_decay != 0 else g
        if momentum != 0:
            b = d.detach().clone() if b is None else b.mul(momentum).add_(d)
            d = b
        a = _lr_alpha(p, lr)
        new_p.append(p.add(d, alpha=-a) if not isinstance(a, Tensor) else p - a * d)
        new_b.append(b)
    return new_p, new_b


def adam_step(params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor], exp_avg_sqs: list[Tensor], *,
              step: int, lr: float | Tensor, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
              weight_decay: float = 0.0) -> tuple[list[Tensor], list[Tensor], list[Tensor]]:
    """One ``torch.optim.Adam`` step (L2 weight decay, no amsgrad) on stacked tensors; ``step`` counts from 1.

    Returns (params, exp_avgs, exp_avg_sqs); the inputs are not modified."""
    bc1 = 1 - beta1 ** step
    bc2_sqrt = (1 - beta2 ** step) ** 0.5
    out_p, out_m, out_v = [], [], []
    for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
        if weight_decay != 0:
            g = g.add(p, alpha=weight_decay)
        m = m.lerp(g, 1 - beta1)
        v = v.mul(beta2).addcmul_(g, g, value=1 - beta2)
        denom = (v.sqrt() / bc2_sqrt).add_(eps)
        a = _lr_alpha(p, lr)
        if isinstance(a, Tensor):
            out_p.append(p - (a / bc1) * m / denom)
        else:
            out_p.append(p.addcdiv(m, denom, value=-(a / bc1)))
        out_m.append(m)
        out_v.append(v)
    return out_p, out_m, out_v
