"""The three scales as data: :class:`Scale` says what plans, stores, reports and guards do at each.

* ``paper`` — the papers' exact setup (rounds, epochs, batch, optimizer), for a GPU;
* ``quick`` — meaningful numbers on a 2-core CPU in minutes (fewer rounds / epochs; each paper's
  preset says what shrinks);
* ``smoke`` — seconds on a CPU, for CI (a few hundred samples, one or two rounds). Never a result.

Code reads a scale's attributes (``scale_of(scale).exact``) and each paper's values keyed by scale
(its ``fedlib/companion/papers/<paper>/preset.py``), never the scale's name
(``tests/test_scale_is_data.py``). The names are the library's :data:`fedlib.config.SCALES`, which
validates ``Config.scale``.
"""

from __future__ import annotations

from dataclasses import dataclass

from fedlib.config import SCALES

__all__ = ["Scale", "SCALE", "scale_of"]


@dataclass(frozen=True)
class Scale:
    """What differs between the scales, one attribute each."""

    name: str
    exact: bool  # the papers' own setup, on every dataset they report: paper-scale results
    decides: bool  # its claims are decided; False: every claim is "not testable" (the code runs)
    gpu: bool  # meant for a GPU: GPU-hours, and a CPU estimate over an hour stops before it starts
    budgeted: bool  # its plans fit the CPU budget (fedlib.companion.budget.fit leaves out the rest)
    learns_costs: bool  # its runs' times teach the cost table (smoke runs are all set-up)
    store: str  # the records' folder under results/ ("": results/ itself)
    last: int  # the evaluated rounds whose median is a run's final accuracy in the ledger
    stamp: str  # the mark after a figure's provenance line
    readme: bool  # a whole batch's claims are the README's first screen

    @property
    def final_text(self) -> str:
        """How the ledger reads a final accuracy: ``"median of the last 10 rounds"``, or
        ``"last round"``."""
        return f"median of the last {self.last} rounds" if self.last > 1 else "last round"


_NOT_PAPER = "  [NOT paper scale]"
SCALE: dict[str, Scale] = {s.name: s for s in (
    Scale("smoke", exact=False, decides=False, gpu=False, budgeted=False, learns_costs=False,
          store="smoke", last=1, stamp=_NOT_PAPER, readme=False),
    Scale("quick", exact=False, decides=True, gpu=False, budgeted=True, learns_costs=True,
          store="", last=1, stamp=_NOT_PAPER, readme=True),
    Scale("paper", exact=True, decides=True, gpu=True, budgeted=False, learns_costs=True,
          store="", last=10, stamp="", readme=False),
)}
if tuple(SCALE) != SCALES:
    raise ImportError(f"fedlib.companion.scales describes {tuple(SCALE)}, not {SCALES}.")


def scale_of(name: str) -> Scale:
    """The :class:`Scale` named ``name`` (one of :data:`fedlib.config.SCALES`)."""
    if name not in SCALE:
        raise ValueError(f"Unknown scale {name!r}; valid scales: {SCALES}.")
    return SCALE[name]
