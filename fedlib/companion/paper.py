"""The shape of a paper: what each of its notebooks trains, what it claims, and where the campaign
ranks it.

A :class:`Paper` is one filled-in template (``fedlib/companion/papers/<paper>/``): its presets (each
a :class:`~fedlib.companion.presets.Preset`, in its folder's ``preset.py``) and its notebooks. A
:class:`Notebook` declares

* ``plan(scale, *, dataset, device, seeds, executor, ...) -> {artifact: {RunId: Config}}`` — every
  run it needs (a :class:`~fedlib.companion.budget.Scope` where the scale leaves parts out: the
  plan, naming them);
* ``claims(plan, records, *, scale, dataset, store, ...) -> list[Verdict]`` — its verdicts on the
  paper's claims, read from ``plan`` (what it planned: the configs, the parts left out) and the
  plan's records (``{artifact: {RunId: Record | Pending | Diverged}}``), and from analyses kept in
  the store; it never trains nor plans again;
* ``datasets`` — the papers' columns it covers at paper scale (the campaign plans each);
* ``priorities`` — ``{artifact pattern: priority}`` for the campaign (lower trains first; ``"*"``
  any other).

Both functions take the notebook's parameters as keywords (those of its ``parameters`` cell), so
every notebook makes the same calls: ``nb = notebook("NN")``, ``plan = nb.plan(scale, **params)``,
its records fetched from the store, ``nb.claims(plan, records, scale=scale, store=store,
**params)``; and a batch tool can list, train and judge it without executing it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from fedlib.companion.common import Plan
from fedlib.companion.presets import Preset
from fedlib.companion.verdicts import Verdict

__all__ = ["Paper", "Notebook", "PlanFn", "ClaimsFn", "DEFAULT_PRIORITY", "DATASET_FIRST", "ROMAN",
           "artifact_id"]

PlanFn = Callable[..., Plan]
ClaimsFn = Callable[..., list[Verdict]]
DEFAULT_PRIORITY = 50  # an artifact no notebook ranks
# within one priority, Fashion-MNIST runs first (the papers' numbers we can check here)
DATASET_FIRST = "fmnist"
ROMAN = {"i": 1, "ii": 2, "iii": 3, "iv": 4, "v": 5, "vi": 6, "vii": 7, "viii": 8, "ix": 9, "x": 10}


def artifact_id(artifact: str) -> str:
    """An artifact's name normalized for matching: lower case, letters and digits only, Roman table
    and figure numbers as digits ("Table II" -> "table2", "table_v" -> "table5")."""
    a = re.sub(r"[^a-z0-9 ]", "", artifact.lower().replace("_", " ").replace(".", ""))
    a = re.sub(r"\b(table|fig|figure)\s*(x|ix|viii|vii|vi|v|iv|iii|ii|i)\b",
               lambda m: f"{m[1]}{ROMAN[m[2]]}", a)
    return a.replace(" ", "")


def _no_claims(plan: Plan, records: Mapping[str, Any], **params: Any) -> list[Verdict]:
    return []


@dataclass(frozen=True)
class Notebook:
    """One numbered notebook of a paper (``notebooks/<name>.ipynb``)."""

    name: str  # "05_fedintr_benchmarks"
    plan: PlanFn | None = None  # None: it trains nothing (partitions only)
    claims: ClaimsFn = _no_claims
    datasets: tuple[str, ...] = ("fmnist",)
    priorities: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not re.fullmatch(r"\d\d_[a-z0-9_]+", self.name):
            raise ValueError(f"Notebook name {self.name!r}: two digits, an underscore, then "
                             "lower-case words (e.g. '05_fedintr_benchmarks').")

    @property
    def number(self) -> str:
        return self.name[:2]

    def priority(self, artifact: str) -> int:
        """The campaign priority of ``artifact`` (the first pattern it starts with; ``"*"``; else
        the default)."""
        art = artifact_id(artifact)
        for pat, p in self.priorities.items():
            if pat != "*" and re.match(rf"{pat}(?!\d)", art):
                return p
        return self.priorities.get("*", DEFAULT_PRIORITY)


@dataclass(frozen=True)
class Paper:
    """A paper: its name, the text it is reproduced from, its presets and its notebooks."""

    name: str  # "FedIntR"
    text: str  # the paper as the notebooks cite it
    presets: tuple[Preset, ...]  # its setups (a paper that trains in another's setup has none)
    notebooks: tuple[Notebook, ...]
    cited: bool = True  # claim rows cite it by name (its section of the claims page)
