"""A :class:`~fedlib.config.Config`'s checks: each field's rule (:func:`field_problem`: its type,
range or valid values, and how to fix a bad value), whether a device can run here
(:func:`device_problem`), and its keyword options (``strategy_kw``, ``model_kw``,
``optimizer_kw``) checked against the registries that define them (:mod:`fedlib.options`: a
strategy's typed ``Options``, built once per config by ``Config.strategy_options``; a model's and an
optimizer's signatures), and the rules that tie them to other fields."""

from __future__ import annotations

import math
from typing import Any, Callable

import torch

from fedlib import augment, data, models, optim, partition, strategies
from fedlib.data import canonical_name
from fedlib.models import MODELS, model_options
from fedlib.optim import OPTIMIZERS, OptimizerSpec, optimizer_fixed, optimizer_options
from fedlib.options import Option, OptionError, option_problems, options_or_none
from fedlib.partition import PERSONAL_SCHEMES
from fedlib.strategies import STRATEGIES, StrategyOptions, strategy_options

__all__ = ["config_option_problems", "field_problem", "device_problem", "SCALES", "EXECUTORS",
           "PRECISIONS", "DEVICE_TYPES"]

SCALES = ("smoke", "quick", "paper")
EXECUTORS = ("auto", "sequential", "vectorized")
PRECISIONS = ("fp32", "bf16")
DEVICE_TYPES = ("cpu", "cuda", "mps")


# Each rule returns None (fine) or what is wrong and how to fix it; ConfigError prefixes
# "field=value: ".

def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _int_rule(
        lo: int,
        example: int,
        *,
        optional: bool = False,
        hi: int | None = None,  # noqa: ANN202
        hi_text: str = ""):
    def rule(v: Any) -> str | None:
        if v is None and optional:
            return None
        if not _is_int(v):
            kind = "a bool" if isinstance(v, bool) else f"a {type(v).__name__}"
            return (f"must be a whole number (int) >= {lo}{' or None' if optional else ''}, not "
                    f"{kind}; write e.g. {example}")
        if v < lo or (hi is not None and v >= hi):
            return f"must be >= {lo}" + (f" and < {hi_text or hi}"
                                         if hi is not None else "") + f"; e.g. {example}"
        return None
    return rule


def _real_rule(lo: float, hi: float, lo_open: bool, hi_open: bool, example: float):  # noqa: ANN202
    rng = f"{'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"

    def rule(v: Any) -> str | None:
        if not _is_real(v):
            kind = "a bool" if isinstance(v, bool) else type(v).__name__
            return f"must be a number in {rng}, not {kind}"
        if not math.isfinite(v) and not (v == hi == math.inf and not hi_open):
            return f"must be a finite number in {rng}; e.g. {example}"
        if v < lo or v > hi or (lo_open and v == lo) or (hi_open and v == hi):
            return f"must be in {rng}; e.g. {example}"
        return None
    return rule


def _choice_rule(choices: Any, plural: str, *, optional: bool = False,
                 normalize: Any = None):  # noqa: ANN202
    def rule(v: Any) -> str | None:
        if v is None and optional:
            return None
        opts = choices() if callable(choices) else choices
        key = normalize(v) if (normalize and isinstance(v, str)) else v
        if not isinstance(v, str) or key not in opts:
            listed = ", ".join(map(repr, opts)) + (" (or None)" if optional else "")
            return f"not one of the valid {plural}: {listed}"
        return None
    return rule


def _type_rule(tp: type, what: str):  # noqa: ANN202
    def rule(v: Any) -> str | None:
        return None if isinstance(v, tp) else f"must be {what}"
    return rule


def _kw_rule(v: Any) -> str | None:
    if not isinstance(v, dict) or not all(isinstance(k, str) for k in v):
        return "must be a dict with str keys, e.g. {} or {'beta': 0.5}"
    return None


def _milestones_rule(v: Any) -> str | None:
    if not isinstance(v, (tuple, list)) or not all(_is_real(m) and 0 < m <= 1 for m in v):
        return "must be a tuple of fractions of `rounds` in (0, 1], e.g. (0.5, 0.75)"
    return None


def _device_rule(v: Any) -> str | None:
    try:
        ok = isinstance(v, str) and torch.device(v).type in DEVICE_TYPES
    except (RuntimeError, ValueError):
        ok = False
    return None if ok else f"must be a device string: {', '.join(DEVICE_TYPES)}, or e.g. 'cuda:0'"


def _registry(module: Any, name: str) -> Callable[[], tuple[str, ...]]:
    """The names in ``module.<name>`` when a rule is checked (a registry may grow after import)."""
    return lambda: tuple(getattr(module, name))


def _dataset_key(v: str) -> str:
    return canonical_name(v)


def _lr_step_rule(v: Any) -> str | None:
    if v is None or (isinstance(v, (tuple, list)) and len(v) == 2 and _is_int(v[0]) and v[0] >= 1
                     and _is_real(v[1]) and 0 < v[1] <= 1):
        return None
    return "must be None or (step_size >= 1 epochs, 0 < gamma <= 1), e.g. (25, 0.5)"


def _cuda_graph_rule(v: Any) -> str | None:
    return None if v is None or isinstance(v, bool) else "None (auto), True or False"


_RULES: dict[str, Any] = {
    "dataset": _choice_rule(_registry(data, "DATASETS"), "datasets", normalize=_dataset_key),
    "model": _choice_rule(_registry(models, "MODELS"), "models"),
    "model_kw": _kw_rule,
    "strategy": _choice_rule(_registry(strategies, "STRATEGIES"), "strategies"),
    "strategy_kw": _kw_rule,
    "partition": _choice_rule(_registry(partition, "SCHEMES"), "partition schemes"),
    "partition_kw": _kw_rule,
    "num_clients": _int_rule(1, 10),
    "sample_fraction": _real_rule(0, 1, True, False, 0.1),
    "rounds": _int_rule(1, 100),
    "local_epochs": _int_rule(1, 10),
    "batch_size": _int_rule(1, 64),
    "optimizer": _choice_rule(_registry(optim, "OPTIMIZERS"), "optimizers"),
    "lr": _real_rule(0, math.inf, False, True, 0.01),
    "momentum": _real_rule(0, 1, False, True, 0.9),
    "weight_decay": _real_rule(0, math.inf, False, True, 1e-5),
    "lr_milestones": _milestones_rule,
    "lr_gamma": _real_rule(0, math.inf, True, True, 0.1),
    "augment": _choice_rule(_registry(augment, "AUGMENTATIONS"), "augmentations", optional=True),
    "drop_last": _type_rule(bool, "True or False"),
    "n_train": _int_rule(1, 1200, optional=True),
    "n_test": _int_rule(1, 400, optional=True),  # 0 test samples would make every accuracy NaN
    "eval_every": _int_rule(1, 1),
    "personal_eval": _type_rule(bool, "True or False"),
    "seed": _int_rule(0, 0, hi=2**63, hi_text="2**63"),
    "precision": _choice_rule(PRECISIONS, "precisions"),
    "device": _device_rule,
    "executor": _choice_rule(EXECUTORS, "executors"),
    "chunk_size": _int_rule(1, 8, optional=True),  # clients per vectorized chunk
    "checkpoint_every": _int_rule(0, 10, optional=True),
    "compile": _type_rule(bool, "True or False"),
    "cuda_graph": _cuda_graph_rule,
    "label": _type_rule(str, "a string"),
    "scale": _choice_rule(("",) + SCALES, "scales ('': no preset)"),
    "optimizer_kw": _kw_rule,
    "lr_step": _lr_step_rule,
    "persistent_optimizer": _type_rule(bool, "True or False"),
}


def field_problem(name: str, value: Any) -> str | None:
    """What is wrong with ``value`` as Config field ``name`` and how to fix it; None if it is
    valid."""
    return _RULES[name](value)


def device_problem(device: str) -> str | None:
    """Why a valid device string cannot run on this machine (e.g. CUDA absent); None if it can."""
    kind = torch.device(device).type
    if kind == "cuda" and not torch.cuda.is_available():
        return "CUDA is not available on this machine; use device='cpu'"
    index = torch.device(device).index
    if kind == "cuda" and index is not None and index >= torch.cuda.device_count():
        return (f"this machine has {torch.cuda.device_count()} CUDA device(s); use e.g. "
                "device='cuda:0'")
    if kind == "mps" and not torch.backends.mps.is_available():
        return "MPS is not available on this machine; use device='cpu'"
    return None


def config_option_problems(cfg: Any, bad: set[str]) -> list[tuple[str, str]]:
    """``(field, message)`` for every problem of ``cfg``'s keyword options and the rules that tie
    them to other fields; fields in ``bad`` (already failing their own rule) are not looked at
    again."""
    out: list[tuple[str, str]] = []

    def check(field: str, kind: str, name: Any, registry: dict, options: Callable,
              fixed: Any = None) -> bool:
        if field in bad:
            return False
        kw = getattr(cfg, field)
        if isinstance(name, str) and name in registry:
            try:
                valid = options(name)
            except ImportError as e:  # a package optimizer whose package is missing
                out.append((kind, f"{kind} {name!r}: {e}"))
                return False
            msgs = option_problems(field, f"{kind} {name!r}", valid, kw,
                                   fixed(name) if fixed else None)
        else:  # an unknown name (reported already): the options any of them takes
            union = {k: Option(k, Any) for n in registry for k in options_or_none(options, n)}
            msgs = option_problems(field, f"any {kind}", union, kw)
        out.extend((field, m) for m in msgs)
        return not msgs and isinstance(name, str) and name in registry

    options: StrategyOptions | None = None
    if "strategy_kw" not in bad and isinstance(cfg.strategy, str) and cfg.strategy in STRATEGIES:
        try:  # built once per config: each option, then the options together (FedSHIBU's groups)
            options = cfg.strategy_options()
        except OptionError as e:
            out.extend(("strategy_kw", f"strategy_kw {cfg.strategy_kw!r}: {m}" if e.joint else m)
                       for m in e.problems)
    else:  # strategy_kw already bad, or an unknown strategy
        check("strategy_kw", "strategy", cfg.strategy, STRATEGIES, strategy_options)
    check("model_kw", "model", cfg.model, MODELS, model_options)
    known = check("optimizer_kw", "optimizer", cfg.optimizer, OPTIMIZERS, optimizer_options,
                  optimizer_fixed)
    # what OptimizerSpec.from_config reads
    if known and not bad & {"lr", "momentum", "weight_decay", "lr_step"}:
        spec = OptimizerSpec.from_config(cfg)
        ft = options.finetune_momentum() if options is not None else None
        runs = [("", spec)] + ([(f" (in {cfg.strategy}'s fine-tuning, momentum ft_momentum={ft})",
                                 spec.replace(momentum=ft))] if ft is not None else [])
        for where, s in runs:
            why = s.combination_problem()
            if why:
                out.append(("optimizer_kw", f"optimizer_kw {cfg.optimizer_kw!r}{where}: {why}."))
                break
    trains_global = options is None or STRATEGIES[cfg.strategy].trains_global_model
    if not trains_global and cfg.personal_eval is False and "personal_eval" not in bad:
        schemes = " or ".join(map(repr, PERSONAL_SCHEMES))
        out.append(("personal_eval",
                    f"personal_eval False: strategy {cfg.strategy!r} never trains the global "
                    "model, so its only result is each client's own model on its own test split: "
                    f"set personal_eval=True (with partition {schemes})."))
    return out
