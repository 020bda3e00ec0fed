"""Experiment configuration: :class:`Config`, its validation and identity (the presets are in
:mod:`fedlib.companion.presets`).

An experiment is a :class:`Config`; ``fedlib.companion.results.run(cfg)`` turns it into a record.
Every field that can change a number is part of the config's identity (:meth:`Config.key`); fields
that only say *where* or *how fast* it runs (device, executor, checkpointing) are not, and are
recorded as provenance instead.

:meth:`Config.validate` checks every field (types too: an ``int`` field takes no float, bool or
string) and raises one :class:`ConfigError` naming each bad field, its value and the fix;
:meth:`Config.from_dict`, :meth:`Config.replace` and :func:`preset` reject unknown keys instead of
dropping them (docs/bad-inputs.md). The per-paper presets are in
:func:`fedlib.companion.presets.preset`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from fedlib import strategies
from fedlib.errors import OneLineError
from fedlib.options import closest
from fedlib.validation import (SCALES, _RULES, config_option_problems, device_problem,
                               field_problem)

# Fields that describe where/how a run executes, not what it computes.
EXECUTION_FIELDS = frozenset({"device", "executor", "checkpoint_every", "label", "scale",
                              "chunk_size", "compile", "cuda_graph"})


class ConfigError(OneLineError, ValueError, TypeError):
    """An invalid or unknown :class:`Config` field. The message names each field, its bad value and
    the fix; ``fields`` lists the fields. A ``ValueError`` (and, for callers of ``replace``, a
    ``TypeError``)."""

    def __init__(self, message: str, fields: list[str]) -> None:
        super().__init__(message)
        self.fields = fields


# What a config keeps beside its fields (no field: not in its repr, identity or pickle): the
# strategy's options built from it (Config.strategy_options) and the repr it was validated at
# (Config.validate).
_OPTIONS = "_strategy_options"
_VALID = "_validated"

# Keys of records written by older versions, applied by ``Config.from_dict(d, migrate=True)``
# (reading stored records). Renamed: old key -> current field. Dropped: keys whose field was removed
# (their value is ignored).
_RENAMED: dict[str, str] = {}
_DROPPED: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Config:
    """One federated experiment. Names follow the papers (``mu``, ``beta``/``alpha``, ``M`` live in
    kwargs)."""

    # what is trained
    dataset: str = "fmnist"
    model: str = "intr_cnn"
    model_kw: dict[str, Any] = field(default_factory=dict)
    strategy: str = "fedavg"
    strategy_kw: dict[str, Any] = field(default_factory=dict)
    # the federation
    partition: str = "dirichlet"
    partition_kw: dict[str, Any] = field(default_factory=lambda: {"beta": 0.5})
    num_clients: int = 10
    sample_fraction: float = 1.0
    rounds: int = 100
    # local training
    local_epochs: int = 10
    batch_size: int = 512
    optimizer: str = "sgd"
    lr: float = 0.01
    momentum: float = 0.9
    weight_decay: float = 1e-5
    # fractions of `rounds` at which lr *= lr_gamma (FedBABU: 0.5, 0.75)
    lr_milestones: tuple[float, ...] = ()
    lr_gamma: float = 0.1
    # options of package optimizers (fedlib.optim)
    optimizer_kw: dict[str, Any] = field(default_factory=dict)
    # per-epoch StepLR inside local training: (step_size epochs, gamma)
    lr_step: tuple[int, float] | None = None
    # each client keeps its optimizer state across rounds (a long-lived trainer)
    persistent_optimizer: bool = False
    augment: str | None = None  # None: the dataset's default in the papers
    # MOON's loader drops the last partial batch; a client smaller than a batch keeps one
    drop_last: bool = False
    # data scale (None: the whole split)
    n_train: int | None = None
    n_test: int | None = None
    # evaluation
    eval_every: int = 1
    personal_eval: bool = False  # per-client test splits (shards / label groups)
    seed: int = 0
    # numerics: "fp32", or "bf16" (forward pass under torch.autocast; parameters, optimizer state
    # and the loss stay float32). bf16 changes the numbers, so it is part of the identity;
    # benchmarks/precision.py records its accuracy.
    precision: str = "fp32"
    # execution (not part of the identity)
    device: str = "cpu"
    executor: str = "auto"  # "sequential" | "vectorized" | "auto"
    chunk_size: int | None = None  # clients per vectorized chunk (None: all sampled clients)
    # rounds between checkpoints; 0: none; None (auto): every round when the run is estimated over a
    # minute (fedlib.companion.costs.CHECKPOINT_AFTER_S, before_run), so a killed run resumes
    checkpoint_every: int | None = None
    # torch.compile the vectorized executor's loss (opt-in; for GPUs, slower on this CPU)
    compile: bool = False
    # vectorized executor on CUDA: fixed-shape steps replayed from one captured CUDA graph (the same
    # training up to float rounding: fedlib/executors/fast/static.py). None (auto): whenever they
    # apply on CUDA; True: also say why when they do not; False: never (the eager vectorized steps)
    cuda_graph: bool | None = None
    label: str = ""
    # the preset's scale ("smoke", "quick", "paper"); "" for a config no preset made
    scale: str = ""

    def __post_init__(self) -> None:
        # numpy scalars (a sweep over np.arange) become Python ones: json would hash np.int64(10) as
        # the string "10"
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            scalar = hasattr(v, "item") and getattr(v, "ndim", None) == 0
            if type(v).__module__ == "numpy" and scalar:
                object.__setattr__(self, f.name, v.item())

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    def replace(self, **changes: Any) -> "Config":
        """This config with ``changes``. The strategy's options built for this one carry over while
        ``strategy`` and ``strategy_kw`` stay the same (:meth:`strategy_options`); a validated
        config stays validated when only execution fields change (``EXECUTION_FIELDS``: no rule
        ties them to other fields) to valid values."""
        reject_unknown(changes, "Config.replace")
        new = dataclasses.replace(self, **changes)
        if _OPTIONS in self.__dict__:
            object.__setattr__(new, _OPTIONS, self.__dict__[_OPTIONS])
        if self.__dict__.get(_VALID) == repr(self) and set(changes) <= EXECUTION_FIELDS \
                and all(_RULES[k](getattr(new, k)) is None for k in changes):
            object.__setattr__(new, _VALID, repr(new))  # only where it runs changed, validly
        return new

    def strategy_options(self) -> strategies.StrategyOptions:
        """The strategy's typed options (``<Strategy>.Options``) built from ``strategy_kw``, and so
        checked, once per config: later calls, and configs :meth:`replace` makes with the same
        strategy and options, return the same object. Raises :class:`fedlib.options.OptionError`
        naming every bad option."""
        stamp = (self.strategy, repr(self.strategy_kw))  # the repr tells 1 from 1.0 and True
        cached = self.__dict__.get(_OPTIONS)
        if cached is None or cached[0] != stamp:
            cached = (stamp, strategies.build_options(self.strategy, self.strategy_kw))
            object.__setattr__(self, _OPTIONS, cached)
        return cached[1]

    def __getstate__(self) -> dict[str, Any]:
        """The fields alone: a pickled or deep-copied config is checked again where it is used."""
        return {k: v for k, v in self.__dict__.items() if k not in (_OPTIONS, _VALID)}

    def identity(self) -> dict[str, Any]:
        """The fields that determine the numbers (everything but execution details)."""
        d = dataclasses.asdict(self)
        for f, later in _LATER_OPTIONS.items():
            if isinstance(d[f], dict):
                d[f] = {k: v for k, v in d[f].items() if not (k in later and v == later[k])}
        return {k: v for k, v in d.items() if k not in EXECUTION_FIELDS
                and not (k in _LATER_FIELDS and v == _LATER_FIELDS[k])}

    def key(self) -> str:
        """Stable 16-hex hash of :meth:`identity` (the results store's key)."""
        blob = json.dumps(self.identity(), sort_keys=True, default=_jsonable)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(dataclasses.asdict(self), default=_jsonable))

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, migrate: bool = False) -> "Config":
        """The config of ``d`` (as :meth:`to_dict` writes it). Unknown keys raise
        :class:`ConfigError`.

        ``migrate=True`` (used when reading stored records) first renames the keys of older versions
        listed in ``_RENAMED`` and drops those in ``_DROPPED``; a migrated config may hash to a
        different :meth:`key`.
        """
        d = dict(d)
        if migrate:
            for old, new in _RENAMED.items():
                if old in d:
                    if new in d:
                        raise ConfigError(f"Config record has both {old!r} and its new name "
                                          f"{new!r}; keep one.",
                                          [old, new])
                    d[new] = d.pop(old)
            d = {k: v for k, v in d.items() if k not in _DROPPED}
        reject_unknown(d, "Config.from_dict")
        if isinstance(d.get("lr_milestones"), list):
            d["lr_milestones"] = tuple(d["lr_milestones"])
        if d.get("lr_step") is not None:
            d["lr_step"] = tuple(d["lr_step"])
        return cls(**d)

    def validate(self) -> "Config":
        """Return ``self`` if every field is usable, else raise one :class:`ConfigError` naming
        every bad field, its value and the fix (before any data is loaded or any round is trained).
        Checked once: a config already validated, and unchanged since (its dict fields could
        change), returns at once."""
        stamp = repr(self)
        if self.__dict__.get(_VALID) == stamp:
            return self
        problems = _problems(self)
        if problems:
            msg = "Invalid config:\n  - " + "\n  - ".join(m for _, m in problems)
            raise ConfigError(msg, list(dict.fromkeys(f for f, _ in problems)))
        object.__setattr__(self, _VALID, stamp)
        return self


def _checked_init(init: Any) -> Any:
    """``Config(...)`` with an unknown keyword raises :class:`ConfigError` naming it (not the
    dataclass TypeError)."""
    @functools.wraps(init)
    def __init__(self: Config, *args: Any, **kw: Any) -> None:
        reject_unknown(kw, "Config")
        init(self, *args, **kw)
    return __init__


Config.__init__ = _checked_init(Config.__init__)  # type: ignore[method-assign]


def reject_unknown(d: dict[str, Any], where: str) -> None:
    valid = Config.field_names()
    unknown = sorted(set(d) - set(valid))
    if unknown:
        hints = [f"{u!r} (did you mean {m!r}?)" if (m := closest(u, valid, 0.75, _SYNONYMS))
                 else repr(u) for u in unknown]
        raise ConfigError(f"{where}: unknown field(s) {', '.join(hints)}. Valid fields: "
                          f"{', '.join(valid)}.",
                          unknown)


# names other libraries use for a field, for the "did you mean" hint
_SYNONYMS = {"learning_rate": "lr", "num_rounds": "rounds", "epochs": "local_epochs",
             "clients": "num_clients", "n_clients": "num_clients", "strategy_kwargs": "strategy_kw",
             "model_kwargs": "model_kw", "optimizer_kwargs": "optimizer_kw",
             "partition_kwargs": "partition_kw", "wd": "weight_decay"}


# Fields added after records were first stored: left out of the identity while at these defaults, so
# every earlier config keeps its key.
_LATER_FIELDS: dict[str, Any] = {"optimizer_kw": {}, "lr_step": None, "persistent_optimizer": False}
# Options added after records were first stored (field -> option -> its default): left out of that
# field in the identity while at their defaults, so giving an option its default value keeps the key
# of the config without it.
_LATER_OPTIONS: dict[str, dict[str, Any]] = {
    "strategy_kw": {"body_mean": "weighted", "lr_rounding": "ceil"}}


def _problems(cfg: Config) -> list[tuple[str, str]]:
    """``(field, message)`` for every field that breaks its rule, then for every strategy / model /
    optimizer option (:mod:`fedlib.options`: typed by their signatures), in field order."""
    out = []
    for name in Config.field_names():
        v = getattr(cfg, name)
        why = _RULES[name](v)
        if why is not None:
            out.append((name, f"{name} {v!r}: {why}."))
    out += config_option_problems(cfg, {f for f, _ in out})
    order = Config.field_names()
    return sorted(out, key=lambda p: order.index(p[0]))


def _jsonable(o: Any) -> Any:
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    return str(o)
