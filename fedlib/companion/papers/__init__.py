"""The papers fedlib reproduces, one registry: :data:`PAPERS` (each a :class:`Paper`: its presets
and notebooks).

Their presets by name are :data:`PRESETS` (registered in :data:`fedlib.companion.presets.PRESETS`
when this module is imported): ``preset("fedintr", "quick", **overrides)`` is a Config of FedIntR's
setup at scale quick.

Everything keyed by notebook is read from here: the plans the campaign trains (:data:`PLANS`), the
datasets it plans at paper scale (:data:`PAPER_DATASETS`), the order it trains them in
(:func:`priority`), and each notebook's claims (:func:`judge`). Adding a paper is filling in
:class:`Paper` in ``fedlib/companion/papers/<paper>/`` (its preset in ``preset.py``) and adding it
to :data:`PAPERS` (docs/adding-a-paper.md works one through).

    python -m fedlib.companion.papers                            # the papers, notebooks and presets
    python -m fedlib.companion.papers claims 05 --scale quick    # notebook 05's stored verdicts
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable

from fedlib.config import SCALES
from fedlib.companion.grid import fetch_runs
from fedlib.companion.common import Plan
from fedlib.companion.report import Report, claim_cells
from fedlib.companion.results import Store
from fedlib.companion.verdicts import VERDICTS
from fedlib.companion.papers import baselines, fedcka, feder, fedintr, fedshibu
from fedlib.companion.paper import DATASET_FIRST, DEFAULT_PRIORITY, Notebook, Paper, artifact_id
from fedlib.companion.presets import PRESETS, Preset, preset, register

__all__ = ["Paper", "Notebook", "PAPERS", "PRESETS", "Preset", "preset", "NOTEBOOKS", "PLANS",
           "PAPER_DATASETS", "DEFAULT_PRIORITY", "DATASET_FIRST", "artifact_id", "notebook", "plan",
           "priority", "judge", "main"]

PAPERS: tuple[Paper, ...] = (baselines.BASELINES_PAPER, fedcka.FEDCKA_PAPER, fedintr.FEDINTR_PAPER,
                             feder.FEDER_PAPER, fedshibu.FEDSHIBU_PAPER)
register(pr for p in PAPERS for pr in p.presets)  # PRESETS: every paper's, by name
NOTEBOOKS: dict[str, Notebook] = {nb.name: nb for p in PAPERS for nb in p.notebooks}
# Views the campaign reads (at call time, so a test may replace them): the notebooks that train
# something.
PLANS: dict[str,
            Callable[...,
                     Plan]] = {n: nb.plan
                               for n, nb in NOTEBOOKS.items() if nb.plan is not None}
PAPER_DATASETS: dict[str, tuple[str, ...]] = {
    n: nb.datasets
    for n, nb in NOTEBOOKS.items() if nb.plan is not None
}


def notebook(name: str) -> Notebook:
    """A registered notebook by name or number ("05", "05_fedintr_benchmarks")."""
    found = [nb for n, nb in NOTEBOOKS.items() if n == name or n[:2] == name]
    if len(found) != 1:
        raise ValueError(f"Unknown notebook {name!r}; valid: {sorted(NOTEBOOKS)} (or their "
                         "two-digit numbers).")
    return found[0]


def plan(name: str, scale: str, **params: Any) -> Plan:
    """The runs of notebook ``name`` at ``scale``: ``{artifact: {RunId: Config}}`` (``{}`` if it
    trains nothing)."""
    nb = notebook(name)
    if scale not in SCALES:
        raise ValueError(f"Unknown scale {scale!r}; valid scales: {SCALES}.")
    return nb.plan(scale, **params) if nb.plan is not None else {}


def priority(name: str, artifact: str) -> int:
    """The campaign priority of ``artifact`` of notebook ``name``, ranked by the registered notebook
    with the same number (:attr:`Notebook.priorities`; :data:`DEFAULT_PRIORITY` for an unknown
    notebook)."""
    nb = next((nb for n, nb in NOTEBOOKS.items() if n[:2] == name[:2]), None)
    return nb.priority(artifact) if nb is not None else DEFAULT_PRIORITY


def judge(name: str, scale: str, *, dataset: str = "fmnist", store: Store | None = None,
          device: str = "cpu", **params: Any) -> Report:
    """Notebook ``name``'s verdicts at ``scale`` from the records in ``store`` (default: the
    scale's), without executing the notebook or training anything: a
    :class:`~fedlib.companion.report.Report` whose ``claims`` and ``controls`` are the notebook's
    claim rows."""
    nb, store = notebook(name), store or Store.for_scale(scale)
    runs = plan(nb.name, scale, dataset=dataset, device=device, **params)
    records = {
        a: fetch_runs(rs, store=store, train=False, progress=False)
        for a, rs in runs.items()
    }
    report = Report(nb.name, scale=scale, dataset=dataset, device=device)
    report.runs(records)
    for v in nb.claims(runs, records, scale=scale, dataset=dataset, store=store, device=device,
                       **params):
        report.verdict(v)
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fedlib.companion.papers", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd")
    c = sub.add_parser("claims",
                       help="a notebook's verdicts from the stored records (trains nothing)")
    c.add_argument("notebook", help=f"a name or number: {', '.join(n[:2] for n in NOTEBOOKS)}")
    c.add_argument("--scale", choices=SCALES, default="quick")
    c.add_argument("--dataset", default="fmnist")
    c.add_argument("--store", default=None, help="results folder (default: the scale's)")
    a = ap.parse_args(argv)
    if a.cmd != "claims":
        for p in PAPERS:
            print(f"{p.name} ({p.text}); presets: {', '.join(pr.name for pr in p.presets) or '-'}")
            for nb in p.notebooks:
                print(f"  {nb.name}: datasets {', '.join(nb.datasets)}; priorities "
                      f"{dict(nb.priorities) or '-'}")
        return 0
    if a.store and not Path(a.store).is_dir():
        what = "not a folder" if Path(a.store).exists() else "no such folder"
        ap.error(f"--store {a.store}: {what}; give a results folder (one that holds records/; the "
                 f"default at scale {a.scale}: {Store.for_scale(a.scale).root}).")
    try:
        report = judge(a.notebook, a.scale, dataset=a.dataset,
                       store=Store(a.store) if a.store else None)
    except ValueError as e:
        ap.error(str(e))
    for title, rows in (("claims", report.claims), ("controls", report.controls)):
        print(f"{report.notebook}: {len(rows)} {title} at scale {a.scale} on {a.dataset}")
        for row in rows:
            cells = claim_cells(row)
            why = f" | why: {row['why']}" if row.get(
                "why") and cells["verdict"] not in VERDICTS[:2] else ""
            print("  " + " | ".join(cells[k]
                                    for k in ("verdict", "claim", "d [95 % interval]")) + why)
    return 0
