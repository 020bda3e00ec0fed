"""Local optimizers: one description built from the Config, two ways to run it.

:class:`OptimizerSpec` says *which* optimizer with which hyper-parameters. The sequential executor
builds the ``torch.optim`` optimizer it describes (:meth:`OptimizerSpec.build`, any registered
optimizer); the vectorized executor runs the pure functional steps below on parameters stacked over
clients (:meth:`OptimizerSpec.step`), which follow ``torch.optim``'s update rules exactly for the
optimizers in :data:`FUNCTIONAL`. An optimizer with no functional step (a package optimizer such as
AdamP) runs only in the sequential executor.

Package optimizers (FedER thesis §4.1), used as their packages ship them, never rewritten:

* ``adamp`` — ``adamp.AdamP`` (Heo et al. 2021); options ``delta``, ``wd_ratio``, ``nesterov`` via
  ``extra``. Its two flattening helpers use ``reshape`` instead of ``view`` (the same numbers;
  ``view`` fails on the channels_last conv weights fedlib trains on the CPU); the update itself is
  the package's.
* ``rmsgd`` — ``rmsgd.RMSGD`` (Hosseini et al. 2022); options ``beta``, ``step_size``, ``gamma``,
  ``linear`` via ``extra``. Its quirks, and how fedlib handles each: (1) it ignores the param
  group's ``lr`` and sets every layer's rate itself from its ``lr`` at construction: fedlib builds
  it with ``spec.lr``, so a StepLR (``lr_step``) or a round schedule changes the group's ``lr`` but
  not its steps, exactly as with the package and torch's ``StepLR``; its own decay is
  ``extra={"step_size", "gamma"}``. (2) it wants ``epoch_step()`` after every epoch:
  :data:`EPOCH_END` holds that call and the executor runs :meth:`OptimizerSpec.end_epoch` after each
  local epoch. (3) it assumes one param group (its per-layer rates are indexed by position in the
  group): fedlib always passes one group and the builder refuses more. (4) its state lives in
  attributes (epoch, knowledge gains, velocities, per-layer rates, metric history), not in
  ``Optimizer.state``: :data:`ATTRIBUTE_STATE` names them, and :meth:`OptimizerSpec.state_dict` /
  :meth:`~OptimizerSpec.load_state_dict` / :meth:`~OptimizerSpec.reset` save, restore and reset them
  with the tensors, so a client's RMSGD survives a round, or a checkpoint, whole.

``Config.optimizer_kw`` is checked against :data:`OPTIMIZER_OPTIONS` before training: a package
optimizer takes the options of its own signature (typed by it, within its ranges) except those
fedlib sets from the Config (``lr``, ``momentum``, ``weight_decay``, and Adam's ``betas``, ``eps``);
``sgd`` takes ``nesterov`` (torch's Nesterov SGD, and the same update in :func:`sgd_step`); ``adam``
takes none.

A per-epoch StepLR (``lr_step = (step_size, gamma)``, FedER thesis Table 4.1: 25, 0.5) sets the
group's ``lr`` to ``lr · gamma^⌊epoch / step_size⌋`` at the start of each local epoch
(:meth:`OptimizerSpec.epoch_lr`): the rates ``torch.optim.lr_scheduler.StepLR`` stepped once per
epoch gives (tested against it).
"""

from __future__ import annotations

import importlib
import copy
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import torch
from torch import Tensor

from fedlib.options import Option, at_least, between, option_problems, signature_options

__all__ = [
    "OptimizerSpec", "OPTIMIZERS", "OPTIMIZER_OPTIONS", "optimizer_options", "FUNCTIONAL",
    "EPOCH_END", "ATTRIBUTE_STATE", "sgd_step", "adam_step", "init_optimizer_state"
]

# name -> builder of the torch.optim optimizer for a list of parameters
OPTIMIZERS: dict[str,
                 Callable[[list[torch.nn.Parameter], "OptimizerSpec"], torch.optim.Optimizer]] = {
                     "sgd": lambda ps, s: torch.optim.SGD(ps, lr=s.lr, momentum=s.momentum,
                                                          weight_decay=s.weight_decay, **s.extra),
                     "adam": lambda ps, s: torch.optim.Adam(ps, lr=s.lr, betas=s.betas, eps=s.eps,
                                                            weight_decay=s.weight_decay, **s.extra),
                 }
FUNCTIONAL = ("sgd", "adam")  # optimizers with a functional (vectorizable) step


def _adamp(ps: list[torch.nn.Parameter], s: "OptimizerSpec") -> torch.optim.Optimizer:
    from adamp import AdamP

    # the package flattens with .view, which channels_last conv weights (CPU) refuse
    class _AdamP(AdamP):
        def _channel_view(self, x: Tensor) -> Tensor:
            return x.reshape(x.size(0), -1)

        def _layer_view(self, x: Tensor) -> Tensor:
            return x.reshape(1, -1)

    return _AdamP(ps, lr=s.lr, betas=s.betas, eps=s.eps, weight_decay=s.weight_decay, **s.extra)


def _rmsgd(ps: list[torch.nn.Parameter], s: "OptimizerSpec") -> torch.optim.Optimizer:
    from rmsgd import RMSGD

    if ps and isinstance(ps[0], dict):
        raise ValueError("rmsgd assumes one param group (its per-layer rates are indexed within "
                         "it); pass a list.")
    return RMSGD(ps, lr=s.lr, momentum=s.momentum, weight_decay=s.weight_decay, **s.extra)


OPTIMIZERS["adamp"] = _adamp
OPTIMIZERS["rmsgd"] = _rmsgd
# name -> what runs after every local epoch (rmsgd: its per-epoch metric and rate update)
EPOCH_END: dict[str, Callable[[torch.optim.Optimizer],
                              None]] = {"rmsgd": lambda opt: opt.epoch_step()}
# name -> optimizer attributes that hold state outside ``Optimizer.state`` ("a.b": attribute b of
# attribute a)
ATTRIBUTE_STATE: dict[str, tuple[str, ...]] = {
    "rmsgd": ("epoch", "KG", "velocity", "lr_vector", "zeta", "not_ready", "metrics.history"),
}


@dataclass(frozen=True)
class OptimizerOptions:
    """What ``Config.optimizer_kw`` may hold for one optimizer: the options of ``source``'s
    signature (typed by it), only ``takes`` of them where fedlib implements only those (None: all),
    less ``fixed`` (set by fedlib from the Config), within ``ranges`` (:mod:`fedlib.options`)."""

    source: str  # "module:Class"
    fixed: tuple[str, ...]
    takes: tuple[str, ...] | None = None
    ranges: dict[str, Any] = field(default_factory=dict)


OPTIMIZER_OPTIONS: dict[str, OptimizerOptions] = {
    # nesterov: torch's SGD and sgd_step (so the vectorized executor too); other SGD options are not
    # implemented
    "sgd": OptimizerOptions("torch.optim:SGD", ("lr", "momentum", "weight_decay"),
                            takes=("nesterov", )),
    "adam": OptimizerOptions("torch.optim:Adam", ("lr", "betas", "eps", "weight_decay"), takes=()),
    "adamp": OptimizerOptions("adamp:AdamP", ("lr", "betas", "eps", "weight_decay"),
                              ranges={"delta": at_least(0), "wd_ratio": between(0, 1)}),
    "rmsgd": OptimizerOptions(
        "rmsgd:RMSGD", ("lr", "momentum", "weight_decay"), ranges={
            "beta": between(0, 1, hi_open=True), "gamma": at_least(0), "step_size": at_least(1),
            "dampening": between(0, 1)
        }),
}
_FIXED_HOW = {
    "lr": "set Config.lr (and lr_step, lr_milestones) instead",
    "momentum": "set Config.momentum instead", "weight_decay": "set Config.weight_decay instead",
    "betas": "fedlib uses (0.9, 0.999)", "eps": "fedlib uses 1e-8"
}


def optimizer_options(name: str) -> dict[str, Option]:
    """The typed options (``Config.optimizer_kw``) optimizer ``name`` takes, from its class's own
    signature."""
    if name not in OPTIMIZER_OPTIONS:  # registered without a declaration: it takes no options
        return {}
    o = OPTIMIZER_OPTIONS[name]
    module, cls = o.source.split(":")
    try:
        source = getattr(importlib.import_module(module), cls)
    except ImportError as e:
        raise ImportError(f"needs the package {module!r}, which is not installed ({e}); run "
                          f"scripts/setup.sh or pip install {module}") from None
    opts = signature_options(source, 1, o.ranges, exclude=o.fixed)  # after params
    return opts if o.takes is None else {k: v for k, v in opts.items() if k in o.takes}


def optimizer_fixed(name: str) -> dict[str, str]:
    """The options fedlib sets itself for optimizer ``name`` -> how to change them."""
    return {k: _FIXED_HOW[k]
            for k in OPTIMIZER_OPTIONS[name].fixed} if name in OPTIMIZER_OPTIONS else {}


@dataclass(frozen=True)
class OptimizerSpec:
    """An optimizer and its hyper-parameters (``lr`` is the base rate; a round's rate comes with
    each client)."""

    name: str = "sgd"
    lr: float = 0.01
    momentum: float = 0.0
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    extra: dict[str, Any] = field(default_factory=dict)  # options of registered package optimizers
    lr_step: tuple[int, float] | None = None  # per-epoch StepLR (step_size in epochs, gamma)

    @classmethod
    def from_config(cls, cfg: Any) -> "OptimizerSpec":
        step = getattr(cfg, "lr_step", None)
        return cls(name=cfg.optimizer, lr=cfg.lr, momentum=cfg.momentum,
                   weight_decay=cfg.weight_decay,
                   extra=dict(getattr(cfg, "optimizer_kw", None) or
                              {}), lr_step=(int(step[0]), float(step[1])) if step else None)

    def epoch_lr(self, lr: float, epoch: int) -> float:
        """The group lr of (0-based) local epoch ``epoch`` counted over the whole run, from the
        round's ``lr``: ``lr · gamma^⌊epoch / step_size⌋`` under ``lr_step`` (torch's StepLR stepped
        per epoch), else ``lr``."""
        if self.lr_step is None:
            return lr
        return lr * self.lr_step[1] ** (epoch // self.lr_step[0])

    def end_epoch(self, opt: torch.optim.Optimizer) -> None:
        """What the optimizer wants after each epoch (:data:`EPOCH_END`; nothing for torch's
        optimizers)."""
        hook = EPOCH_END.get(self.name)
        if hook is not None:
            hook(opt)

    def state_dict(self, opt: torch.optim.Optimizer) -> dict[str, Any]:
        """A detached copy of ``opt``'s state: tensors, plain group settings and
        :data:`ATTRIBUTE_STATE`."""
        sd = opt.state_dict()
        out: dict[str, Any] = {
            "state": {
                k: {
                    n: v.detach().clone() if isinstance(v, Tensor) else copy.deepcopy(v)
                    for n, v in st.items()
                }
                for k, st in sd["state"].items()
            }, "param_groups": [{k: v
                                 for k, v in g.items() if _plain_setting(v)}
                                for g in sd["param_groups"]]
        }
        attrs = ATTRIBUTE_STATE.get(self.name, ())
        if attrs:
            out["attributes"] = {a: _compact(a, copy.deepcopy(_get(opt, a))) for a in attrs}
        return out

    def load_state_dict(self, opt: torch.optim.Optimizer, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` into ``opt`` (group entries it did not save keep their
        current values)."""
        cur = opt.state_dict()["param_groups"]
        opt.load_state_dict({
            "state": state["state"],
            "param_groups": [{**c, **g} for c, g in zip(cur, state["param_groups"])]
        })
        for a, v in state.get("attributes", {}).items():
            _set(opt, a, copy.deepcopy(v))

    def reset(self, opt: torch.optim.Optimizer) -> None:
        """Return ``opt`` to the state of a freshly built optimizer (tensors and attributes)."""
        opt.state.clear()
        for a, v in getattr(opt, "_fedlib_fresh", {}).items():  # snapshot taken by build()
            _set(opt, a, copy.deepcopy(v))

    def replace(self, **changes: Any) -> "OptimizerSpec":
        return replace(self, **changes)

    def validate(self) -> "OptimizerSpec":
        """``self`` if its name, its options (``extra``, see :data:`OPTIMIZER_OPTIONS`) and their
        combination with the momentum are valid; else a ValueError naming each problem."""
        if self.name not in OPTIMIZERS:
            raise ValueError(f"Unknown optimizer {self.name!r}; valid optimizers: "
                             f"{sorted(OPTIMIZERS)}.")
        problems = option_problems("optimizer_kw", f"optimizer {self.name!r}",
                                   optimizer_options(self.name), self.extra,
                                   optimizer_fixed(self.name))
        if not problems and (why := self.combination_problem()):
            problems = [f"optimizer_kw {self.extra!r}: {why}."]
        if problems:
            raise ValueError(" ".join(problems))
        return self

    def combination_problem(self) -> str | None:
        """What the optimizer would refuse in these settings together (torch's SGD and RMSGD:
        Nesterov momentum needs a momentum and no dampening), or None."""
        if self.extra.get("nesterov") and self.name in ("sgd", "rmsgd"):
            if self.momentum <= 0:
                return (f"nesterov=True needs momentum > 0 (momentum is {self.momentum}); set it, "
                        "e.g. 0.9")
            if self.extra.get("dampening", 0) != 0:
                return f"nesterov=True needs dampening=0 (dampening is {self.extra['dampening']})"
        return None

    def build(self, params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
        """The ``torch.optim`` optimizer this spec describes (the sequential executor's)."""
        opt = OPTIMIZERS[self.validate().name](params, self)
        attrs = ATTRIBUTE_STATE.get(self.name, ())
        if attrs:  # what reset() returns to
            opt._fedlib_fresh = {a: copy.deepcopy(_get(opt, a))
                                 for a in attrs}  # type: ignore[attr-defined]
        return opt

    def functional(self) -> tuple[bool, str]:
        """(True, "") if :meth:`step` implements this optimizer; else (False, why)."""
        if self.name not in FUNCTIONAL:
            return False, (f"optimizer {self.name!r} has no functional implementation (only SGD "
                           "and Adam)")
        return True, ""

    def init_state(self, params: list[Tensor]) -> dict[str, list[Tensor | None]]:
        """Fresh state for (stacked) parameters: what a new ``torch.optim`` optimizer starts
        from."""
        return init_optimizer_state(self.name, params)

    def step(self, params: list[Tensor], grads: list[Tensor], state: dict[str, list[Tensor | None]],
             *, t: int, lr: float | Tensor) -> tuple[list[Tensor], dict[str, list[Tensor | None]]]:
        """One step at (0-based) step count ``t`` of every client; returns (new parameters, new
        state). Pure."""
        if self.name == "sgd":
            new_p, new_b = sgd_step(params, grads, state["momentum_buffer"], lr=lr,
                                    momentum=self.momentum, weight_decay=self.weight_decay,
                                    nesterov=bool(self.extra.get("nesterov")))
            return new_p, {"momentum_buffer": new_b}
        if self.name == "adam":
            new_p, m, v = adam_step(
                params,
                grads,
                state["exp_avg"],
                state["exp_avg_sq"],
                step=t + 1,
                lr=lr,  # type: ignore[arg-type]
                beta1=self.betas[0],
                beta2=self.betas[1],
                eps=self.eps,
                weight_decay=self.weight_decay)
            return new_p, {"exp_avg": m, "exp_avg_sq": v}  # type: ignore[dict-item]
        raise ValueError(self.functional()[1])


def _get(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _set(obj: Any, path: str, value: Any) -> None:
    *head, last = path.split(".")
    for part in head:
        obj = getattr(obj, part)
    setattr(obj, last, value)


def _compact(path: str, value: Any) -> Any:
    """RMSGD reads only the last entry of its metric history again: keep that one, padded to the
    length."""
    if path == "metrics.history" and isinstance(value, list) and value:
        return [None] * (len(value) - 1) + [value[-1]]
    return value


def _plain_setting(v: Any) -> bool:
    """Group settings worth saving (numbers, flags, tuples, parameter indices), not objects an
    optimizer parks there (rmsgd puts its metrics object and numpy arrays in its defaults)."""
    return v is None or isinstance(v, (int, float, bool, str)) or (
        isinstance(v, (tuple, list)) and all(isinstance(x, (int, float, bool)) for x in v))


def init_optimizer_state(kind: str, params: list[Tensor]) -> dict[str, list[Tensor | None]]:
    """Fresh optimizer state for stacked parameters (what a new ``torch.optim`` optimizer starts
    from)."""
    if kind == "sgd":
        return {"momentum_buffer": [None] * len(params)}
    if kind == "adam":
        return {"exp_avg": [torch.zeros_like(p) for p in params],
                "exp_avg_sq": [torch.zeros_like(p) for p in params]}
    raise ValueError(f"no functional optimizer {kind!r}")


def _lr_alpha(p: Tensor, lr: float | Tensor) -> float | Tensor:
    """A per-client learning rate (N,) as a tensor broadcastable against stacked ``p`` (N, ...)."""
    return lr if not isinstance(lr, Tensor) else lr.to(p.dtype).view(-1, *([1] * (p.dim() - 1)))


def sgd_step(params: list[Tensor], grads: list[Tensor], bufs: list[Tensor | None], *,
             lr: float | Tensor, momentum: float = 0.0, weight_decay: float = 0.0,
             nesterov: bool = False) -> tuple[list[Tensor], list[Tensor | None]]:
    """One ``torch.optim.SGD`` step (dampening 0) on stacked tensors; returns (params, buffers).

    ``d = g + wd·p``; momentum buffer ``b = d`` on the first step (``bufs[i] is None``), ``b = m·b +
    d`` after; ``p ← p − lr·b``, or with ``nesterov`` ``p ← p − lr·(d + m·b)`` (``lr`` a float, or
    one value per client). Pure: the inputs are not modified."""
    new_p, new_b = [], []
    for p, g, b in zip(params, grads, bufs):
        d = g.add(p, alpha=weight_decay) if weight_decay != 0 else g
        if momentum != 0:
            b = d.detach().clone() if b is None else b.mul(momentum).add_(d)
            d = d.add(b, alpha=momentum) if nesterov else b
        a = _lr_alpha(p, lr)
        new_p.append(p.add(d, alpha=-a) if not isinstance(a, Tensor) else p - a * d)
        new_b.append(b)
    return new_p, new_b


def adam_step(params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor],
              exp_avg_sqs: list[Tensor], *, step: int, lr: float | Tensor, beta1: float = 0.9,
              beta2: float = 0.999, eps: float = 1e-8,
              weight_decay: float = 0.0) -> tuple[list[Tensor], list[Tensor], list[Tensor]]:
    """One ``torch.optim.Adam`` step (L2 weight decay, no amsgrad) on stacked tensors; ``step``
    counts from 1.

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
