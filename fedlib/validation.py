"""A :class:`~fedlib.config.Config`'s keyword options (``strategy_kw``, ``model_kw``,
``optimizer_kw``) checked against the registries that define them (:mod:`fedlib.options`: a
strategy's typed ``Options``, built once per config by ``Config.strategy_options``; a model's and an
optimizer's signatures), and the rules that tie them to other fields."""

from __future__ import annotations

from typing import Any, Callable

from fedlib.models import MODELS, model_options
from fedlib.optim import OPTIMIZERS, OptimizerSpec, optimizer_fixed, optimizer_options
from fedlib.options import Option, OptionError, option_problems, options_or_none
from fedlib.partition import PERSONAL_SCHEMES
from fedlib.strategies import STRATEGIES, StrategyOptions, strategy_options

__all__ = ["config_option_problems"]


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
    if check("optimizer_kw", "optimizer", cfg.optimizer, OPTIMIZERS, optimizer_options, optimizer_fixed) \
            and not bad & {"lr", "momentum", "weight_decay", "lr_step"}:  # what OptimizerSpec.from_config reads
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
        out.append(("personal_eval", f"personal_eval False: strategy {cfg.strategy!r} never trains "
                                     "the global "
                    "model, so its only result is each client's own model on its own test split: "
                    "set personal_eval=True (with partition "
                    f"{' or '.join(map(repr, PERSONAL_SCHEMES))})."))
    return out
