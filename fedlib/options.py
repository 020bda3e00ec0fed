"""Typed checks of the keyword options of strategies, models and optimizers (``Config.strategy_kw``,
``model_kw``, ``optimizer_kw``), run by :meth:`fedlib.config.Config.validate` before any data is
loaded.

A strategy declares its options as a frozen dataclass (:class:`TypedOptions`: each field's
annotation is its type, :func:`option` gives its default and valid range or values), checked once,
when it is built. A model's or an optimizer's option is typed by its annotation in the signature of
what takes it (a model builder, an optimizer class), or by the type of its default where the
signature has none; its range or its valid values are declared next to it
(:data:`fedlib.models.MODEL_OPTION_RANGES`, :data:`fedlib.optim.OPTIMIZER_OPTIONS`). An ``int``
option takes no float or bool, a ``bool`` option no string, a ``float`` option no NaN or inf, and an
option the callee does not take is an error, never ignored: nothing is coerced (``int(2.5)``,
``bool("False")``) or dropped. Each problem is one line naming ``field['option']``, the value and
the valid values.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import math
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping

from fedlib.errors import OneLineError

__all__ = [
    "Interval", "at_least", "above", "between", "Option", "signature_options", "option_problems",
    "options_or_none", "OptionError", "TypedOptions", "option"
]


@dataclass(frozen=True)
class Interval:
    """The numbers an option may take (its finite part: NaN and inf are never valid)."""

    lo: float = -math.inf
    hi: float = math.inf
    lo_open: bool = False
    hi_open: bool = False

    def __contains__(self, v: float) -> bool:
        return (v > self.lo if self.lo_open else v >= self.lo) and (v < self.hi if self.hi_open else
                                                                    v <= self.hi)

    def __str__(self) -> str:
        if self.hi == math.inf:
            return f"{'>' if self.lo_open else '>='} {self.lo}"
        left, right = "(" if self.lo_open else "[", ")" if self.hi_open else "]"
        return f"in {left}{self.lo}, {self.hi}{right}"


def at_least(lo: float) -> Interval:
    return Interval(lo)


def above(lo: float) -> Interval:
    return Interval(lo, lo_open=True)


def between(lo: float, hi: float, *, hi_open: bool = False) -> Interval:
    return Interval(lo, hi, hi_open=hi_open)


@dataclass(frozen=True)
class Option:
    """One keyword option: its type (an annotation), default, and valid range (:class:`Interval`) or
    values."""

    name: str
    type: Any
    default: Any = None
    valid: Interval | tuple | None = None


def signature_options(fn: Callable, skip: int = 0, ranges: dict[str, Any] | None = None,
                      exclude: tuple[str, ...] = (), forward: Callable | None = None,
                      forward_skip: int = 0) -> dict[str, Option]:
    """The keyword options of ``fn`` after its first ``skip`` parameters, typed by its annotations.
    A ``**kw`` parameter adds the options of ``forward`` (after ``forward_skip`` parameters); a
    class's ``__init__`` with ``**kw`` forwards to the next ``__init__`` in its MRO."""
    ranges = ranges or {}
    owner = fn if inspect.isclass(fn) else None
    init = fn.__init__ if owner is not None else fn
    if init is object.__init__:
        return {}
    params = list(inspect.signature(init).parameters.values())[skip + (owner is not None):]
    try:
        hints = typing.get_type_hints(init)
    except Exception:  # unresolvable annotations (a package's): fall back to the defaults' types
        hints = {}
    out: dict[str, Option] = {}
    for p in params:
        if p.kind == p.VAR_KEYWORD:
            if forward is None and owner is not None:
                # mro[0] defines this __init__
                mro = [c for c in owner.__mro__ if "__init__" in vars(c)]
                out.update(
                    {k: o
                     for k, o in signature_options(mro[1], 0, ranges).items() if k not in out})
            elif forward is not None:
                out.update({
                    k: o
                    for k, o in signature_options(forward, forward_skip, ranges).items()
                    if k not in out
                })
            continue
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) or p.name in exclude:
            continue
        default = None if p.default is p.empty else p.default
        tp = hints.get(p.name, _default_type(default))
        if default is None and p.default is not p.empty and not _allows_none(tp):
            tp = typing.Optional[tp]  # `step_size: int = None`
        out[p.name] = Option(p.name, tp, default, ranges.get(p.name))
    return {k: o for k, o in out.items() if k not in exclude}


def _default_type(default: Any) -> Any:
    if isinstance(default, bool):
        return bool
    if isinstance(default, (int, float)):
        # an unannotated numeric default (``delta=0.1``, ``weight_decay=0``): any finite number
        return float
    return type(default) if isinstance(default, (str, tuple, list)) else Any


def _args(tp: Any) -> tuple[Any, ...]:
    return typing.get_args(tp)


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _allows_none(tp: Any) -> bool:
    return tp is Any or tp is type(None) or (_is_union(tp) and type(None) in _args(tp))


def _accepts(tp: Any, v: Any) -> bool:
    """Whether ``v`` is a value of type ``tp`` as written (no conversion); floats must be finite."""
    if tp is Any or tp is inspect.Parameter.empty:
        return True
    if _is_union(tp):
        return any(_accepts(t, v) for t in _args(tp))
    if tp is type(None):
        return v is None
    if tp is bool:
        return isinstance(v, bool)
    if tp is int:
        return isinstance(v, int) and not isinstance(v, bool)
    if tp is float:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    origin = typing.get_origin(tp)
    if origin in (list, tuple) or tp in (list, tuple):
        if not isinstance(v, (list, tuple)):  # JSON gives a tuple back as a list
            return False
        args = _args(tp)
        if origin is tuple and args and args[-1] is not Ellipsis:
            return len(v) == len(args) and all(_accepts(t, x) for t, x in zip(args, v))
        return all(_accepts(args[0], x) for x in v) if args else True
    return isinstance(v, tp) if isinstance(tp, type) else True


def _type_text(tp: Any) -> str:
    if _is_union(tp):
        return " or ".join(_type_text(t) for t in _args(tp))
    if tp is type(None):
        return "None"
    if tp is bool:
        return "a bool (True or False)"
    if tp is int:
        return "a whole number (int)"
    if tp is float:
        return "a finite number"
    if tp is str:
        return "a string"
    return "a " + (str(tp) if typing.get_origin(tp) else getattr(tp, "__name__", str(tp)))


def _kind(v: Any) -> str:
    if isinstance(v, float) and not math.isfinite(v):
        return "not finite"
    return f"not a {type(v).__name__}"


def closest(name: str, valid: list[str], cutoff: float = 0.7,
            synonyms: dict[str, str] | None = None) -> str | None:
    """The valid name ``name`` most likely means (a "did you mean" hint): its synonym, else the
    closest spelling."""
    if synonyms and synonyms.get(name) in valid:
        return synonyms[name]
    m = difflib.get_close_matches(name, valid, n=1, cutoff=cutoff)
    return m[0] if m else None


def option_problems(field: str, owner: str, options: Mapping[str, Option], kw: dict[str, Any],
                    fixed: dict[str, str] | None = None) -> list[str]:
    """One line per option of ``kw`` that ``options`` does not allow (``owner``: e.g. "strategy
    'moon'"; ``fixed``: options the caller sets itself -> how to set them instead)."""
    out = []
    names = list(options)
    listing = ", ".join(map(repr, names)) if names else "none (it takes no options)"
    for k, v in kw.items():
        at = f"{field}[{k!r}] {v!r}"
        if fixed and k in fixed:
            out.append(f"{at}: {owner} gets {k!r} from fedlib, not from {field}: {fixed[k]}.")
            continue
        if k not in options:
            hint = f" (did you mean {m!r}?)" if (m := closest(k, names)) else ""
            out.append(f"{at}: {k!r} is not an option of {owner}{hint}; valid options: {listing}.")
            continue
        o = options[k]
        ok = _accepts(o.type, v)
        if ok and isinstance(o.valid, tuple):
            ok = v in o.valid
        elif ok and isinstance(o.valid, Interval) and isinstance(
                v, (int, float)) and not isinstance(v, bool):
            ok = v in o.valid
        if not ok:
            why = "" if (_accepts(o.type, v) or isinstance(o.valid, tuple)) else f", {_kind(v)}"
            out.append(f"{at}: {owner} takes {k} as {_want(o)}{why}; e.g. {o.default!r}.")
    return out


def _want(o: Option) -> str:
    """The valid values of ``o`` in words: its values, or its type and range (``or None`` last)."""
    if isinstance(o.valid, tuple):
        return "one of the valid values " + ", ".join(map(repr, o.valid))
    tp, none = o.type, False
    if _is_union(tp) and type(None) in _args(tp):
        rest = [t for t in _args(tp) if t is not type(None)]
        tp, none = (rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]), True
    return _type_text(tp) + (f" {o.valid}" if isinstance(o.valid, Interval) else
                             "") + (" or None" if none else "")


def options_or_none(options: Callable, name: str) -> dict[str, Option]:
    """``options(name)``, or none when the package that defines ``name`` is missing."""
    try:
        return options(name)
    except ImportError:
        return {}


class OptionError(OneLineError, ValueError):
    """Bad keyword options: ``problems``, one sentence each. Each names one option
    (``field['option'] value: ...``) unless ``joint``: options valid one by one that do not go
    together (the sentence names them)."""

    def __init__(self, problems: list[str], joint: bool = False) -> None:
        super().__init__(" ".join(problems))
        self.problems, self.joint = problems, joint


def option(default: Any, valid: Interval | tuple | None = None) -> Any:
    """A field of a :class:`TypedOptions` dataclass: its default and its valid range
    (:class:`Interval`) or values."""
    return dataclasses.field(default=default, metadata={"valid": valid})


@dataclass(frozen=True)
class TypedOptions:
    """Keyword options as a frozen dataclass, checked once, when it is built: every field against
    its annotation and its :func:`option` range (:func:`option_problems`: one :class:`OptionError`
    naming each bad option and its valid values), then :meth:`joint_problem`. An ``int`` given for a
    ``float`` field is stored as a float; nothing else is coerced. Subclasses set ``FIELD`` (the
    Config field, e.g. ``"strategy_kw"``) and :meth:`owner`."""

    FIELD: ClassVar[str] = "options"

    @classmethod
    def owner(cls) -> str:
        """Who takes the options, for messages (e.g. "strategy 'moon'")."""
        return cls.__name__

    @classmethod
    def table(cls) -> Mapping[str, Option]:
        """The declared options: name -> :class:`Option` (type, default, valid range or values), in
        field order (read-only, computed once per class)."""
        return _table(cls)

    @classmethod
    def build(cls, *args: Any, **kw: Any) -> "TypedOptions":
        """The options from positional and keyword values; a name that is not an option is an
        :class:`OptionError` (naming every bad option of ``kw``), not a ``TypeError``."""
        names = list(cls.table())
        if len(args) > len(names):
            raise TypeError(f"{cls.owner()} takes at most {len(names)} positional options, got "
                            f"{len(args)}.")
        given = dict(zip(names, args))
        if twice := sorted(set(given) & set(kw)):
            raise TypeError(f"{cls.owner()} got option(s) {twice} both by position and by name.")
        given.update(kw)
        if set(kw) - set(names):
            raise OptionError(option_problems(cls.FIELD, cls.owner(), cls.table(), given))
        return cls(**given)

    def __post_init__(self) -> None:
        table = self.table()
        values = {k: getattr(self, k) for k in table}
        problems = option_problems(self.FIELD, self.owner(), table, values)
        if problems:
            raise OptionError(problems)
        for k, o in table.items():
            if o.type is float and not isinstance(getattr(self, k), float):
                object.__setattr__(self, k, float(getattr(self, k)))
        why = self.joint_problem()
        if why is not None:
            raise OptionError([why], joint=True)

    def joint_problem(self) -> str | None:
        """What is wrong with several options together (each valid alone), and the fix; None when
        nothing is."""
        return None


@functools.cache
def _table(cls: type) -> Mapping[str, Option]:
    hints = typing.get_type_hints(cls)
    return types.MappingProxyType({f.name: Option(f.name, hints[f.name], f.default,
                                                  f.metadata.get("valid"))
                                   for f in dataclasses.fields(cls)})
