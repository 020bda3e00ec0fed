"""The ledger of a scale: artifact × runs done / needed, the claims' verdicts, and statistics over
seeds.

``results/ledger-<scale>.md`` — written by ``python -m fedlib.companion.campaign run|ledger`` (its
run and seed sections also close the batch summary ``results/summary-<scale>.md`` of ``python -m
fedlib.companion.reproduce``, which the campaign never writes). The runs are the plans'
(:data:`fedlib.companion.papers.PLANS`); a run is finished when its record is in the store (done) or
it diverged (a non-finite loss or non-finite metrics: a result, counted and never averaged).
Verdicts come from the notebooks' own summaries (``results/summary/<notebook>.<scale>.json``,
written when a notebook renders, e.g. ``papermill ... -p train False``); a summary written before
the newest record of its notebook is flagged as stale. Where a plan runs the same configuration with
several seeds, the final test accuracy is given as mean ± std over the seeds done (n). The file is
rewritten only when its content changes.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from fedlib.companion.provenance import code_commit
from fedlib.companion.report import claim_rows
from fedlib.companion.results import DEFAULT_ROOT, Record, Store, atomic_write_text
from fedlib.companion.scales import SCALE, scale_of

__all__ = [
    "ledger", "write_ledger", "runs_section", "claims_section", "seeds_section", "ledger_path"
]


def ledger_path(scale: str, store: Store) -> Path:
    stores = {DEFAULT_ROOT / s.store for s in SCALE.values()}  # each scale's default store
    root = DEFAULT_ROOT if store.root in stores else store.root
    return root / f"ledger-{scale}.md"


def _final(rec: Record, scale: str) -> float:
    """Final accuracy in %: the median of the scale's last evaluated rounds (:attr:`Scale.last
    <fedlib.companion.scales.Scale.last>`: 10 at paper scale, FedIntR's convention; the last one
    otherwise); personalized runs: the mean client accuracy."""
    # a personalized run's own
    name = "personal_acc_mean" if rec.metric("personal_acc_mean").size else "test_acc"
    return 100 * rec.final(name, last=scale_of(scale).last)


def runs_section(items: list[Any]) -> list[str]:
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for it in items:
        for nb, art, _ in it.uses:
            r = rows.setdefault(
                (nb, art),
                {"n": 0, "done": 0, "diverged": 0, "blocked": set(), "prio": it.priority})
            r["n"] += 1
            r["done"] += it.status in ("done", "diverged")
            r["diverged"] += it.status == "diverged"
            if it.status == "blocked":
                r["blocked"].add(it.cfg.dataset)
            r["prio"] = min(r["prio"], it.priority)
    out = ["## Runs by artifact", "", "| notebook | artifact | finished / needed | of which "
                                      "diverged | blocked "
           "(dataset absent) | priority |", "|:--|:--|--:|--:|:--|--:|"]
    for (nb, art), r in sorted(rows.items(), key=lambda kv: (kv[1]["prio"], kv[0])):
        blocked = ", ".join(sorted(r["blocked"]))
        out.append(f"| {nb} | {art} | {r['done']} / {r['n']} | {r['diverged']} | {blocked} | "
                   f"{r['prio']} |")
    n = {s: sum(i.status == s for i in items) for s in ("done", "diverged", "blocked")}
    out += ["", f"{n['done'] + n['diverged']} of {len(items)} distinct runs finished (a run shared "
                f"by artifacts counts once), {n['diverged']} of them diverged (a result, not "
                f"retried); {n['blocked']} blocked.",
            ""]
    return out


def claims_section(scale: str, items: list[Any], store: Store, summary_root: Path) -> list[str]:
    out = ["## Claims", "", "| notebook | claim | verdict | detail |", "|:--|:--|:--|:--|"]
    notebooks = sorted({nb for it in items for nb, _, _ in it.uses})
    notes = []
    for nb in notebooks:
        p = summary_root / f"{nb}.{scale}.json"
        if not p.exists():
            notes.append(f"- {nb}: not rendered at scale `{scale}` yet (`papermill "
                         f"notebooks/{nb}.ipynb out.ipynb -p scale {scale} -p train False`).")
            continue
        doc = json.loads(p.read_text())
        newest = max((store.record_path(i.key).stat().st_mtime for i in items if i.status == "done"
                      and any(u[0] == nb for u in i.uses)), default=0.0)
        if newest > p.stat().st_mtime:
            notes.append(f"- {nb}: its summary predates newer records: render it again to update "
                         "the verdicts.")
        for row in claim_rows(doc.get("claims", [])):
            verdict, claim, source, *numbers = (str(x).replace("|", "/") for x in row)
            detail = [n for n in numbers if n not in ("—", "the paper's data and model")]
            out.append(f"| {nb} | {claim} ({source}) | {verdict} | {'; '.join(detail)} |")
    return out + [""] + notes + [""]


def seeds_section(items: list[Any], store: Store, scale: str) -> list[str]:
    groups: dict[tuple[str, str, str], list[Any]] = {}
    for it in items:
        base = it.cfg.replace(seed=0).key()
        for nb, art, _ in it.uses:
            g = groups.setdefault((nb, art, base), [])
            if it not in g:
                g.append(it)
    out = [
        "## Statistics over seeds", "", f"Final test accuracy ({scale_of(scale).final_text}; "
        "personalized runs: mean client accuracy), mean ± std over the seeds done.", "",
        "| notebook | artifact | run | n done / seeds | mean ± std (%) | per seed |",
        "|:--|:--|:--|--:|--:|:--|"
    ]
    n_rows = 0
    for (nb, art, _), its in groups.items():
        if len(its) < 2:
            continue
        name = next(rid for it in its for b, a, rid in it.uses if (b, a) == (nb, art)).unseeded()
        recs = [(it.cfg.seed, store.get(it.key)) for it in its if it.status == "done"]
        vals = [(s, _final(r, scale)) for s, r in recs if r is not None]
        div = sorted(it.cfg.seed for it in its if it.status == "diverged")
        if vals:
            m = statistics.mean(v for _, v in vals)
            sd = statistics.stdev(v for _, v in vals) if len(vals) > 1 else float("nan")
            stat = f"{m:.2f} ± {sd:.2f}" if len(vals) > 1 else f"{m:.2f} (n = 1)"
        else:
            stat = "pending"
        per = ", ".join([f"s{s}: {v:.2f}"
                         for s, v in sorted(vals)] + [f"s{s}: diverged" for s in div])
        out.append(f"| {nb} | {art} | {name.replace('|', '/')} | {len(vals)} / {len(its)} | {stat} "
                   f"| {per} |")
        n_rows += 1
    if not n_rows:
        out.append(
            "| | | (no plan at this scale runs one configuration with several seeds) | | | |")
    return out + [""]


def ledger(scale: str, items: list[Any], *, store: Store | None = None,
           summary_root: Path | None = None) -> str:
    """The ledger of the campaign's ``items`` (:func:`fedlib.companion.campaign.collect` of every
    plan at ``scale``)."""
    store = store or Store.for_scale(scale)
    summary_root = summary_root or (DEFAULT_ROOT if ledger_path(scale, store).parent == DEFAULT_ROOT
                                    else store.root) / "summary"
    head = [f"# fedlib ledger — scale `{scale}`", "",
            f"_Written by `python -m fedlib.companion.campaign` at commit {code_commit()}: the "
            "runs every notebook's plan needs (`fedlib/companion/papers/`), which are done "
            f"(records in `{store.root.name}/records/`), and what the notebooks concluded from "
            "them._", ""]
    if not scale_of(scale).exact:
        head += [f"_Scale `{scale}` is not the papers' setup: these numbers are not paper-scale "
                 "results._", ""]
    return "\n".join(head + runs_section(items) + claims_section(scale, items, store, summary_root)
                     + seeds_section(items, store, scale))


def write_ledger(scale: str, items: list[Any], *, store: Store | None = None, **kw: Any) -> Path:
    """Write :func:`ledger` to :func:`ledger_path` (``ledger-<scale>.md``, never the batch
    summary)."""
    store = store or Store.for_scale(scale)
    path = ledger_path(scale, store)
    atomic_write_text(path, ledger(scale, items, store=store, **kw))
    return path
