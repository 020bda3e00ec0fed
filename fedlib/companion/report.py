"""Paper-vs-ours tables and the papers' claims, collected into a per-notebook summary for
``fedlib.companion.reproduce``.

In a notebook::

    report = Report("05_fedintr_benchmarks", scale=scale, dataset=dataset)
    report.runs(records)                     # training time, seeds, commits, devices of the runs
    report.table("FedIntR Table I", compare({"FedAvg": 88.90}, {"FedAvg": 100 * acc}))
    report.verdict(decide("FedIntR beats FedAvg", "FedIntR Table I", intr, avg, chance=10))
    report.check("every round samples 20 % of the clients", ok)  # an invariant of ours: fatal
    report.save()

A paper's claim is a :class:`~fedlib.companion.verdicts.Verdict` (reproduced, contradicted,
inconclusive, not testable at this scale) from :func:`fedlib.companion.verdicts.decide`; it never
raises (a faithful reimplementation may honestly disagree with a paper). Invariants of our own code
go through :meth:`Report.check`, which raises when they fail.

Every notebook calls :func:`~fedlib.companion.notebook_params.check_params` right after its
parameters cell. What a claim was decided on, where it differs from the paper, is
:mod:`fedlib.companion.setups`.

A table's provenance comes from its runs: ``report.table(name, df, runs=records)`` stores their
commits, devices and seeds beside the table; the summary's ``commit`` is the commit that rendered
it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from dataclasses import replace
from typing import Any, Mapping

import pandas as pd

from fedlib.companion.notebook_params import (  # noqa: F401  (re-exported)
    NotebookParameterError, check_params, injected_names)
from fedlib.companion.plots import provenance_line, save_figure
from fedlib.companion.presets import PRESETS, preset
from fedlib.companion.scales import scale_of
from fedlib.companion.provenance import code_commit, runs_provenance, unique_runs
from fedlib.companion.results import DEFAULT_ROOT, atomic_write_text, is_pending
from fedlib.companion.setups import (  # noqa: F401  (re-exported)
    MODEL_NAMES, PAPER_SETUPS, decided_on, label_rows, setup_changes, setup_label)
from fedlib.companion.verdicts import Verdict, not_testable


def compare(paper: Mapping[str, float], ours: Mapping[str, Any], unit: str = "%",
            not_run: str | None = None) -> pd.DataFrame:
    """The paper's numbers beside ours with the difference (ours − paper). A value of ours that is
    ``None``, NaN or a :class:`~fedlib.companion.results.Pending` run reads "pending". A paper
    setting missing from ``ours`` is an error, unless ``not_run`` is given (e.g. "not run at this
    scale"): then that text stands in its cell."""
    missing = [k for k in paper if k not in ours]
    if missing and not_run is None:
        raise ValueError(f"compare: no value of ours for {missing}; ours has {sorted(ours)}. Use "
                         "the paper's setting names as keys, or pass not_run= for settings a scale "
                         "leaves out.")
    rows = []
    for k in paper:
        o = ours.get(k, not_run)
        if o is None or is_pending(o) or (isinstance(o, float) and math.isnan(o)):
            o = "pending"
        num = not isinstance(o, str)
        rows.append({"setting": k, f"paper ({unit})": float(paper[k]),
                     f"ours ({unit})": round(float(o), 2) if num else o,
                     "diff": round(float(o) - float(paper[k]), 2) if num else ""})
    return pd.DataFrame(rows).set_index("setting")


CLAIM_COLUMNS = ("verdict", "claim", "source", "decided on", "n", "means", "d [95 % interval]",
                 "resolution (±)", "claim region", "paper", "size", "how / why")
DECIDED = ("reproduced", "contradicted", "inconclusive")
VERDICT_COLOURS = {"reproduced": "#d9f2d9", "contradicted": "#f8d7d7", "inconclusive": "#fff3cd",
                   "not testable at this scale": "#e9ecef", "pending": "#e7f0fb"}


def _fmt(x: Any, spec: str = "+.2f") -> str:
    return "—" if x is None or (isinstance(x, float) and x != x) else format(x, spec)


def _verdict_css(v: str) -> str:
    return f"background-color: {VERDICT_COLOURS[v]}" if v in VERDICT_COLOURS else ""


def claim_cells(c: Mapping[str, Any]) -> dict[str, str]:
    """A stored claim (:meth:`fedlib.companion.verdicts.Verdict.to_dict` plus ``status``) as the
    cells of one row of :data:`CLAIM_COLUMNS`: what it was decided on, n and the means per side, d
    with its interval and the interval's half-width (the smallest effect this many seeds resolve),
    the paper's number, the size reading (where the paper's effect lies against our interval), the
    method or the reason (and, for an inconclusive row, the seeds a side that would decide it). A
    row nothing decided was decided on nothing: "—"."""
    iv = c.get("interval") or [None, None]
    d = ("—" if c.get("estimate") is None
         else f"{_fmt(c['estimate'])} [{_fmt(iv[0])}, {_fmt(iv[1])}]")
    status = c.get("status", c.get("verdict", "?"))
    size = f"{c['size']} ({_fmt(c.get('paper_d'))})" if c.get("size") else "—"
    power = status == "inconclusive" and c.get("estimate") is not None
    seeds = f"{c['seeds']} seeds a side would decide it" if c.get("seeds") else \
        "no count up to 1,000 seeds a side would decide it" if power else ""
    finding = f"finding: {c['finding']}" if c.get("finding") else ""
    cells = [status, c.get("claim", ""), c.get("source", ""),
             (c.get("data") or "the paper's data and model") if status in DECIDED else "—",
             ", ".join(f"{k} {v}" for k, v in (c.get("n") or {}).items()) or "—",
             ", ".join(f"{k} {_fmt(v, '.2f')}" for k, v in (c.get("means") or {}).items()) or "—",
             d, "—" if None in iv else _fmt((iv[1] - iv[0]) / 2, ".2f"),
             c.get("region") or "—", c.get("paper") or "—", size,
             "; ".join(filter(None, [c.get("method", ""), c.get("why", ""), seeds, finding]))
             or "—"]
    return dict(zip(CLAIM_COLUMNS, cells))


def claim_rows(claims: list[dict]) -> list[list[object]]:
    """One row per claim (:func:`claim_cells`): verdict, claim, source, n, means, d and its
    interval, the claim's region, the paper's number, how it was decided or why not."""
    return [list(r.values()) for r in map(claim_cells, claims)]


class Tables:
    """Several styled tables shown one after the other (a notebook cell's output)."""

    def __init__(self, tables: list[Any]) -> None:
        self.tables = tables

    def _repr_html_(self) -> str:
        return "<br>".join(t.to_html() for t in self.tables)

    def __repr__(self) -> str:
        """The text a terminal (or a notebook's text/plain) shows: no memory address."""
        return "\n\n".join(f"{t.caption}\n{t.data.to_string(index=False)}" for t in self.tables)


class ClaimFailed(AssertionError):
    pass


class Report:
    """What one notebook run showed: its tables, its verdicts on the papers' claims, the invariants
    it checked, and the runs that produced it."""

    def __init__(self, notebook: str, *, scale: str, dataset: str, **meta: Any) -> None:
        self.notebook, self.scale, self.dataset = notebook, scale, dataset
        self.meta = {k: (v if isinstance(v, (int, float, str, bool, list)) else str(v))
                     for k, v in meta.items()}
        self.tables: dict[str, pd.DataFrame] = {}
        self.claims: list[dict[str, Any]] = []
        self.controls: list[dict[str, Any]] = []
        self.checks: list[dict[str, Any]] = []
        self.provenance: dict[str, Any] = {}
        self.table_provenance: dict[str, dict[str, Any]] = {}
        self._registered: set[str] = set()

    def table(self, name: str, df: pd.DataFrame, *, runs: Any = None) -> pd.DataFrame:
        """Add a table; ``runs`` (the records behind it) gives its provenance: their commits,
        devices, seeds."""
        self.tables[name] = df
        if runs is not None:
            self.table_provenance[name] = runs_provenance(runs)
        return df

    def runs(self, records: Any) -> dict[str, Any]:
        """Register the runs behind this notebook (a Record, or nested dicts / lists of them;
        pending and diverged placeholders are counted, not timed): their training minutes, seeds,
        commits, devices and precisions. A run is counted once however many artifacts share it (same
        key), within one call and across calls."""
        fresh = unique_runs(records)
        fresh = {k: r for k, r in fresh.items() if k not in self._registered}
        self._registered.update(k for k in fresh if isinstance(k, str))
        new, prov = runs_provenance(list(fresh.values())), self.provenance
        for k in ("runs", "pending", "diverged"):
            prov[k] = prov.get(k, 0) + new[k]
        minutes = prov.get("training_minutes", 0.0) + new["training_minutes"]
        prov["training_minutes"] = round(minutes, 2)
        for k in ("seeds", "commits", "devices", "precisions"):
            prov[k] = sorted({*prov.get(k, []), *map(str, new[k])}, key=str)
        return prov

    def check(self, text: str, ok: bool, *, detail: str = "") -> None:
        """An invariant of our own code (partitions cover every sample, a run learned): raises when
        it fails."""
        self.checks.append({"check": text, "status": "held" if ok else "FAILED", "detail": detail})
        print(f"[{'held' if ok else 'FAILED'}] {text}" + (f" — {detail}" if detail else ""))
        if not ok:
            raise ClaimFailed(f"Invariant failed: {text}. {detail}")

    claim = check  # older name

    def verdict(self, v: Verdict) -> Verdict:
        """Record a paper's claim, decided by :func:`fedlib.companion.verdicts.decide` (or
        ``decide_ratio``, ``not_testable``, ``pending``; a verdict marked ``control`` goes to the
        controls); at a scale that decides no claim (smoke) every claim is "not testable at this
        scale"."""
        if not isinstance(v, Verdict):
            raise TypeError("Report.verdict takes a fedlib.companion.verdicts.Verdict: "
                            "decide(claim, source, ours, theirs, kind=..., margin=..., "
                            "chance=...), decide_ratio(...) or not_testable(...).")
        if not scale_of(self.scale).decides and v.verdict != "pending":
            why = f"{self.scale} scale proves the code runs, not the paper"
            v = replace(not_testable(v.claim, v.source, why, v.paper), control=v.control)
        if not v.data:
            device = str(self.meta.get("device", "cpu"))
            v = replace(v, data=decided_on(v.source, self.dataset, self.model(v.source), device,
                                           timed="repeats" in v.method))
        (self.controls if v.control else self.claims).append({"status": v.verdict, **v.to_dict()})
        return v

    def model(self, source: str) -> str:
        """Our model for a claim citing ``source``: the model of its paper's preset at this scale
        (the presets of the papers' registry, :data:`fedlib.companion.presets.PRESETS`)."""
        paper = next((p for p in ("FedIntR", "FedCKA", "FedSHIBU", "FedER") if p in source), "")
        if not paper:
            return ""
        if not PRESETS:  # the registry was never imported: say so rather than name no model
            raise RuntimeError(f"A claim cites {paper}, whose preset names our model, and no "
                               "preset is registered: import fedlib.companion.papers first.")
        try:
            return preset(paper.lower(), self.scale, dataset=self.dataset).model
        except (ValueError, KeyError):
            return ""

    def control(self, v: Verdict) -> Verdict:
        """Record one of the project's own comparisons (a control such as local-only training, or a
        fidelity target): decided like a claim, listed apart from the papers' claims and never
        counted among them."""
        return self.verdict(replace(v, control=True))

    def save_figure(self, fig: Any, name: str, *, runs: Any = "registered",
                    scale: str | None = None, **extra: Any) -> list[Path]:
        """Save ``fig`` as ``figures/<scale>/<name>.{png,pdf,json}`` stamped with this notebook's
        provenance: scale, dataset, and the seeds, commits and devices of the runs registered by
        :meth:`runs`, or of ``runs`` (None: a figure no training run produced, e.g. timings)
        (``extra``: more ``key=value`` fields for the stamp, e.g. ``dataset="synthetic"``;
        ``scale``: the scale of what it shows when not this notebook's, e.g. a benchmark's stored
        result). A figure whose runs are all pending is not saved (it would show empty axes): the
        notebook still shows it, and nothing is returned."""
        seeds = self.meta.get("seeds", []) if runs is not None else []
        if isinstance(runs, str) and runs == "registered":
            runs = self if self.provenance else None
        counts = {} if runs is None else self.provenance if runs is self else runs_provenance(runs)
        if counts.get("runs") and counts.get("pending") == counts["runs"]:
            print(f"{name}: not saved, none of its {counts['runs']} runs is stored yet")
            return []
        prov = provenance_line(scale or self.scale, extra.pop("dataset", self.dataset),
                               str(self.meta.get("device", "cpu")),
                               seeds if isinstance(seeds, list) else [], runs=runs, **extra)
        # the summary lists them: claims link to their figures
        if name not in self.meta.setdefault("figures", []):
            self.meta["figures"].append(name)
        return save_figure(fig, name, prov, self.scale)

    def claims_frame(self) -> pd.DataFrame:
        """The claims recorded so far, one row each (:data:`CLAIM_COLUMNS`)."""
        return pd.DataFrame([claim_cells(c) for c in self.claims], columns=list(CLAIM_COLUMNS))

    def claims_table(self, controls: bool | None = None) -> Any:
        """The papers' claims as one styled table for a notebook's last cell (the verdict cell
        coloured, long text wrapped, the index hidden: a pandas ``Styler``), followed by the
        project's controls when there are any (``controls=None``; a notebook with controls only
        shows them alone, captioned so); ``controls=True``: the controls alone, ``False``: the
        claims alone."""
        if controls is None:
            return Tables(([self._styled(False)] if self.claims or not self.controls else [])
                          + ([self._styled(True)] if self.controls else []))
        return Tables([self._styled(controls)])

    def _styled(self, controls: bool) -> Any:
        rows = self.controls if controls else self.claims
        what = "our controls (not claims of the papers)" if controls else "the papers' claims"
        if controls and not self.claims:
            what = "no claim of the papers here; our controls (not claims of the papers)"
        df = pd.DataFrame([claim_cells(c) for c in rows], columns=list(CLAIM_COLUMNS))
        # pandas' default is random: not reproducible
        uuid = f"{self.notebook}-{'controls' if controls else 'claims'}"
        return (df.style.set_uuid(uuid).hide(axis="index").map(_verdict_css, subset=["verdict"])
                .set_properties(**{"text-align": "left", "white-space": "normal",
                                   "font-size": "0.9em"})
                .set_caption(f"{self.notebook}: {what} at scale {self.scale} on {self.dataset}"))

    def save(self, root: Path | None = None) -> Path:
        """Write ``results/summary/<notebook>.<scale>.json`` (only if its content changed):
        ``commit`` is the rendering commit; ``commits``, ``devices`` and ``seeds`` are the runs'
        (:meth:`runs`), and ``table_provenance`` those of each table given ``runs``."""
        root = Path(root or DEFAULT_ROOT) / "summary"
        tables = {k: json.loads(v.reset_index().to_json(orient="records"))
                  for k, v in self.tables.items()}
        doc = {"notebook": self.notebook, "scale": self.scale, "dataset": self.dataset,
               "commit": code_commit(), **self.meta, **self.provenance, "claims": self.claims,
               "controls": self.controls, "checks": self.checks, "tables": tables,
               **({"table_provenance": self.table_provenance} if self.table_provenance else {})}
        path = root / f"{self.notebook}.{self.scale}.json"
        atomic_write_text(path, json.dumps(doc, indent=1))
        return path
