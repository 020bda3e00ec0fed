"""A notebook's parameters, checked right after its parameters cell.

Every notebook calls :func:`check_params` there, so a bad ``papermill -p`` value fails at once
instead of producing outputs labelled with it; so does a ``-p`` name the parameters cell does not
define (``-p sedd 3``: papermill only warns and runs with the default seed).
"""

from __future__ import annotations

import ast
from typing import Any

from fedlib.config import SCALES, device_problem, field_problem
from fedlib.errors import OneLineError


def _n_eval(v: Any) -> str | None:
    ok = v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 2)
    return None if ok else ("must be None (the scale's default) or a whole number of test images "
                            ">= 2")


def _seeds_problem(v: Any) -> str | None:
    if v is None:
        return None
    if not isinstance(v, (list, tuple)) or not v or len(set(v)) != len(v):
        return ("must be None (the scale's default) or a non-empty list of distinct whole numbers "
                ">= 0, e.g. [0, 1, 2]")
    bad = [why for s in v if (why := field_problem("seed", s)) is not None]
    return f"every seed {bad[0]}" if bad else None


_PARAM_RULES = {
    "scale": lambda v: (None if v in SCALES
                        else f"not one of the valid scales: {', '.join(map(repr, SCALES))}"),
    "dataset": lambda v: field_problem("dataset", v),
    "device": lambda v: field_problem("device", v) or device_problem(v),
    "seed": lambda v: field_problem("seed", v),
    "seeds": _seeds_problem,
    "train": lambda v: None if isinstance(v, bool) else (
        "must be True (train missing runs) or False (render the stored records, the others as "
        "pending)"),
    "executor": lambda v: field_problem("executor", v),
    "n_eval": _n_eval,
    "variant": lambda v: (None if v is None or isinstance(v, str)
                          else "a preset variant's name (str) or None"),
}


def injected_names(history: list[str] | None = None) -> list[str] | None:
    """The names papermill's injected-parameters cell assigned in this kernel (the latest executed
    cell that starts with papermill's ``# Parameters`` header, before the current one), or None when
    there is none (not run by papermill, or not in IPython). ``history``: the executed cells'
    sources, oldest first (default: IPython's)."""
    if history is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return None
        ip = get_ipython()
        history = list(ip.user_ns.get("In", [])) if ip is not None else []
    for src in reversed(history[:-1]):  # the last one is the cell running now
        if isinstance(src, str) and src.lstrip().startswith("# Parameters\n"):
            try:
                tree = ast.parse(src)
            except SyntaxError:
                return None
            return [t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                    if isinstance(t, ast.Name)]
    return None


def check_params(*, _history: list[str] | None = None, **params: Any) -> None:
    """Check a notebook's parameters (``scale``, ``dataset``, ``device``, ``seed``, ``seeds``,
    ``executor``, ``n_eval``, ``train``, ``variant``: its validity per preset is checked by
    :func:`fedlib.companion.presets.preset`); raise one ``ValueError`` naming each bad parameter,
    its value and the valid values. Under papermill, a ``-p`` name that is not one of ``params``
    (the notebook's parameters) is named too (:func:`injected_names`)."""
    unknown = sorted(set(params) - set(_PARAM_RULES))
    if unknown:
        raise ValueError(f"check_params: unknown parameter(s) {unknown}; known: "
                         f"{sorted(_PARAM_RULES)}.")
    bad = [f"{k}={v!r}: {why}." for k, v in params.items()
           if (why := _PARAM_RULES[k](v)) is not None]
    stray = [n for n in injected_names(_history) or [] if n not in params]
    if stray:
        bad.append(f"{', '.join(stray)}: not a parameter of this notebook (papermill ran it with "
                   f"the default instead); its parameters are {', '.join(params)}.")
    if bad:
        raise NotebookParameterError("Invalid notebook parameter(s) (papermill -p NAME VALUE):"
                                     "\n  - " + "\n  - ".join(bad))


class NotebookParameterError(OneLineError, ValueError):
    """A notebook parameter (papermill ``-p``) that is not valid: the message names each and the
    valid values."""
