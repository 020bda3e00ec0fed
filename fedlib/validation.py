"""A :class:`~fedlib.config.Config`'s keyword options (``strategy_kw``, ``model_kw``, ``optimizer_kw``) checked against
the registries that define them (:mod:`fedlib.options`: typed by the constructors' signatures), and the rules that
tie them to other fields."""

from __future__ import annotations

from typing import Any, Callable

from fedlib.models import MODELS, model_options
from fedlib.optim import OPTIMIZERS, OptimizerSpec, optimizer_fixed, optimizer_options
from fedlib.options import Option, option_problems, options_or_none
from fedlib.partition import PERSONAL_SCHEMES
from fedlib.strategies import STRATEGIES, build_strategy, strategy_options

__all__ = ["config_option_problems"]


def config_option_problems(cfg: Any, bad: set[str]) -> list[tuple[str, str]]:
    """``(field, message)`` for every problem of ``cfg``'s keyword options and the rules that tie them to other
    fields; fields in ``bad`` (already failing their own rule) are not looked at again."""
    out: list[tuple[str, str]] = []

    def check(field: str, kind: str, name: Any, registry: dict, options: Callable, fixed: Any = None) -> bool:
        if field in bad:
            return False
        kw = getattr(cfg, field)
        if isinstance(name, str) and name in registry:
            try:
                valid = options(name)
            except ImportError as e:  # a package optimizer whose package is missing
                out.append((kind, f"{kind} {name!r}: {e}"))
                return False
            msgs = option_problems(field, f"{kind} {name!r}", valid, kw, fixed(name) if fixed else None)
        else:  # an unknown name (reported already): the options any of them takes
            union = {k: Option(k, Any) for n in registry for k in options_or_none(options, n)}
            msgs = option_problems(field, f"any {kind}", union, kw)
        out.extend((field, m) for m in msgs)
        return not msgs and isinstance(name, str) and name in registry

    strategy = None
    if check("strategy_kw", "strategy", cfg.strategy, STRATEGIES, strategy_options):
        try:  # the strategy's own checks of its options together (e.g. FedSHIBU's sim='groups' and groups)
            strategy = build_strategy(cfg.strategy, **cfg.strategy_kw)
        except ValueError as e:
            out.append(("strategy_kw", f"strategy_kw {cfg.strategy_kw!r}: {e}"))
    check("model_kw", "model", cfg.model, MODELS, model_options)
    if check("optimizer_kw", "optimizer", cfg.optimizer, OPTIMIZERS, optimizer_options, optimizer_fixed) \
            and not bad & {"lr", "momentum", "weight_decay", "lr_step"}:  # what OptimizerSpec.from_config reads
        spec = OptimizerSpec.from_config(cfg)
        ft = strategy.finetune() if strategy is not None else None
        runs = [("", spec)] + ([(f" (in {cfg.strategy}'s fine-tuning, momentum ft_momentum={ft.momentum})",
                                 spec.replace(momentum=ft.momentum))] if ft and ft.momentum is not None else [])
        for where, s in runs:
            why = s.combination_problem()
            if why:
                out.append(("optimizer_kw", f"optimizer_kw {cfg.optimizer_kw!r}{where}: {why}."))
                break
    if strategy is not None and not strategy.trains_global_model and cfg.personal_eval is False \
            and "personal_eval" not in bad:
        out.append(("personal_eval", f"personal_eval False: strategy {cfg.strategy!r} never trains the global "
                    "model, so its only result is each client's own model on its own test split: set "
                    f"personal_eval=True (with partition {' or '.join(map(repr, PERSONAL_SCHEMES))})."))
    return out
