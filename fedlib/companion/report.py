"""Paper-vs-ours tables and the papers' claims, collected into a per-notebook summary for ``fedlib.companion.reproduce``.

In a notebook::

    report = Report("05_fedintr_benchmarks", scale=scale, dataset=dataset)
    report.runs(records)                                   # training time, seeds, commits, devices of the runs
    report.table("FedIntR Table I", compare({"FedAvg": 88.90}, {"FedAvg": 100 * acc}))
    report.verdict(decide("FedIntR beats FedAvg", "FedIntR Table I", intr, avg, chance=10))
    report.check("every round samples 20 % of the clients", ok)   # an invariant of our code: fatal
    report.save()

A paper's claim is a :class:`~fedlib.companion.verdicts.Verdict` (reproduced, contradicted, inconclusive, not testable at
this scale) from :func:`fedlib.companion.verdicts.decide`; it never raises (a faithful reimplementation may honestly disagree
with a paper). Invariants of our own code go through :meth:`Report.check`, which raises when they fail.

Every notebook calls :func:`check_params` right after its parameters cell, so a bad ``papermill -p`` value fails
at once instead of producing outputs labelled with it; so does a ``-p`` name the parameters cell does not define
(``-p sedd 3``: papermill only warns and runs with the default seed).

A table's provenance comes from its runs: ``report.table(name, df, runs=records)`` stores their commits, devices and
seeds beside the table; the summary's ``commit`` is the commit that rendered it.
"""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path
from dataclasses import replace
from typing import Any, Mapping, Sequence

import pandas as pd

from fedlib.config import SCALES, device_problem, field_problem
from fedlib.errors import OneLineError
from fedlib.companion.plots import provenance_line, save_figure
from fedlib.companion.presets import PRESETS, preset
from fedlib.companion.scales import scale_of
from fedlib.companion.provenance import code_commit, runs_provenance, unique_runs
from fedlib.companion.results import DEFAULT_ROOT, atomic_write_text, is_pending
from fedlib.companion.style import dataset_name
from fedlib.companion.verdicts import Verdict, not_testable


def _n_eval(v: Any) -> str | None:
    ok = v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 2)
    return None if ok else "must be None (the scale's default) or a whole number of test images >= 2"


def _seeds_problem(v: Any) -> str | None:
    if v is None:
        return None
    if not isinstance(v, (list, tuple)) or not v or len(set(v)) != len(v):
        return "must be None (the scale's default) or a non-empty list of distinct whole numbers >= 0, e.g. [0, 1, 2]"
    bad = [why for s in v if (why := field_problem("seed", s)) is not None]
    return f"every seed {bad[0]}" if bad else None


_PARAM_RULES = {
    "scale": lambda v: None if v in SCALES else f"not one of the valid scales: {', '.join(map(repr, SCALES))}",
    "dataset": lambda v: field_problem("dataset", v),
    "device": lambda v: field_problem("device", v) or device_problem(v),
    "seed": lambda v: field_problem("seed", v),
    "seeds": _seeds_problem,
    "train": lambda v: None if isinstance(v, bool) else "must be True (train missing runs) or False (render the "
                                                        "stored records, the others as pending)",
    "executor": lambda v: field_problem("executor", v),
    "n_eval": _n_eval,
    "variant": lambda v: None if v is None or isinstance(v, str) else "a preset variant's name (str) or None",
}


def injected_names(history: list[str] | None = None) -> list[str] | None:
    """The names papermill's injected-parameters cell assigned in this kernel (the latest executed cell that starts
    with papermill's ``# Parameters`` header, before the current one), or None when there is none (not run by
    papermill, or not in IPython). ``history``: the executed cells' sources, oldest first (default: IPython's)."""
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
    """Check a notebook's parameters (``scale``, ``dataset``, ``device``, ``seed``, ``seeds``, ``executor``,
    ``n_eval``, ``train``, ``variant``: its validity per preset is checked by :func:`fedlib.companion.presets.preset`);
    raise one ``ValueError`` naming each bad parameter, its value and the valid values. Under papermill, a ``-p``
    name that is not one of ``params`` (the notebook's parameters) is named too (:func:`injected_names`)."""
    unknown = sorted(set(params) - set(_PARAM_RULES))
    if unknown:
        raise ValueError(f"check_params: unknown parameter(s) {unknown}; known: {sorted(_PARAM_RULES)}.")
    bad = [f"{k}={v!r}: {why}." for k, v in params.items() if (why := _PARAM_RULES[k](v)) is not None]
    stray = [n for n in injected_names(_history) or [] if n not in params]
    if stray:
        bad.append(f"{', '.join(stray)}: not a parameter of this notebook (papermill ran it with the default "
                   f"instead); its parameters are {', '.join(params)}.")
    if bad:
        raise NotebookParameterError("Invalid notebook parameter(s) (papermill -p NAME VALUE):\n  - "
                                     + "\n  - ".join(bad))


class NotebookParameterError(OneLineError, ValueError):
    """A notebook parameter (papermill ``-p``) that is not valid: the message names each and the valid values."""


def compare(paper: Mapping[str, float], ours: Mapping[str, Any], unit: str = "%",
            not_run: str | None = None) -> pd.DataFrame:
    """The paper's numbers beside ours with the difference (ours − paper). A value of ours that is ``None``, NaN
    or a :class:`~fedlib.companion.results.Pending` run reads "pending". A paper setting missing from ``ours`` is an error,
    unless ``not_run`` is given (e.g. "not run at this scale"): then that text stands in its cell."""
    missing = [k for k in paper if k not in ours]
    if missing and not_run is None:
        raise ValueError(f"compare: no value of ours for {missing}; ours has {sorted(ours)}. Use the paper's "
                         f"setting names as keys, or pass not_run= for settings a scale leaves out.")
    rows = []
    for k in paper:
        o = ours.get(k, not_run)
        if o is None or is_pending(o) or (isinstance(o, float) and math.isnan(o)):
            o = "pending"
        num = not isinstance(o, str)
        rows.append({"setting": k, f"paper ({unit})": float(paper[k]), f"ours ({unit})": round(float(o), 2) if num
                     else o, "diff": round(float(o) - float(paper[k]), 2) if num else ""})
    return pd.DataFrame(rows).set_index("setting")


CLAIM_COLUMNS = ("verdict", "claim", "source", "decided on", "n", "means", "d [95 % interval]", "resolution (±)",
                 "claim region", "paper", "size", "how / why")
DECIDED = ("reproduced", "contradicted", "inconclusive")
# Where each paper's claims were made (first matching pattern of a claim's source wins): the datasets of the cited
# table or sentence and the paper's model. A claim decided on other data or another model says so.
PAPER_SETUPS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (r"FedIntR (Table (I|II|V)\b|§IV-B|§IV-F)", ("fmnist", "svhn", "cifar10", "cifar100"), "FedIntR CNN (ResNet-20 on "
                                                                                          "CIFAR-100)"),
    (r"FedIntR Table III|FedIntR §IV-C", ("cifar10", "cifar100"), "FedIntR CNN (ResNet-20 on CIFAR-100)"),
    (r"FedIntR", ("cifar10",), "FedIntR CNN"),
    (r"FedCKA.*Table 4|Table 4.*FedCKA", ("cifar10", "tinyimagenet"), "simple CNN and ResNet-50 on a GTX Titan V"),
    (r"FedCKA.*Table 1", ("cifar10", "cifar100", "tinyimagenet"), "simple CNN (ResNet-50 on CIFAR-100, Tiny ImageNet)"),
    (r"FedCKA", ("cifar10",), "simple CNN"),
    (r"FedER|thesis", ("cifar100",), "ResNet-18"),
    (r"FedSHIBU.*Table 1", ("cifar10", "cifar100"), "ResNet-18"),
    (r"FedSHIBU", ("cifar10",), "ResNet-18"),
)
MODEL_NAMES = {"simple_cnn": "simple CNN", "intr_cnn": "FedIntR CNN", "resnet18": "ResNet-18",
               "resnet20": "ResNet-20", "resnet50": "ResNet-50"}


def decided_on(source: str, dataset: str, model: str, device: str = "", timed: bool = False) -> str:
    """What a claim citing ``source`` was decided on, where it differs from the paper (:data:`PAPER_SETUPS`):
    ``"Fashion-MNIST, simple CNN; the paper: CIFAR-10, simple CNN"``; "" when the data and model are the paper's.
    ``timed``: a cost claim, decided on synthetic data on ``device``."""
    for pat, datasets, paper_model in PAPER_SETUPS:
        if re.search(pat, source):
            paper = f"{', '.join(dataset_name(d) for d in datasets)}, {paper_model}"
            if timed:
                return f"synthetic data timed on {device or 'this device'}; the paper: {paper}"
            ours = MODEL_NAMES.get(model, model)
            same = dataset in datasets and ours in paper_model
            return "" if same else f"{dataset_name(dataset)}, {ours}; the paper: {paper}"
    return ""


# training and test images of each of the papers' datasets (the papers train and test on all of them)
IMAGES = {"fmnist": (60_000, 10_000), "svhn": (73_257, 26_032), "cifar10": (50_000, 10_000),
          "cifar100": (50_000, 10_000)}


def setup_changes(cfg: Any, paper: Any, who: str = "the paper") -> str:
    """What ``cfg`` (a run's :class:`~fedlib.config.Config`) changes from ``paper`` (the paper's setup on its
    dataset): images, rounds × local epochs, batch, model options, as ``"at this scale: 12,000 of the 60,000
    training images; ..."``; "" when nothing."""
    tr, te = IMAGES.get(cfg.dataset, (None, None))
    imgs = [f"{n:,} of the {t:,} {w} images" if t else f"{n:,} {w} images"
            for n, t, w in ((cfg.n_train, tr, "training"), (cfg.n_test, te, "test")) if n and n != t]
    parts = [", ".join(imgs)] if imgs else []
    if (cfg.rounds, cfg.local_epochs) != (paper.rounds, paper.local_epochs):
        parts.append(f"{cfg.rounds} rounds × {cfg.local_epochs} local epochs ({who}: {paper.rounds} × "
                     f"{paper.local_epochs})")
    if cfg.batch_size != paper.batch_size:
        parts.append(f"batch {cfg.batch_size} ({who}: {paper.batch_size})")
    if dict(cfg.model_kw) != dict(paper.model_kw):
        kw = [", ".join(f"{k}={v}" for k, v in dict(c.model_kw).items()) or "none" for c in (cfg, paper)]
        parts.append(f"model options {kw[0]} ({who}: {kw[1]})")
    return "at this scale: " + "; ".join(parts) if parts else ""


def label_rows(verdicts: Any, cfg: Any, paper: Any, notes: Mapping[str, str] | None = None,
               who: str = "the paper") -> list[Verdict]:
    """``verdicts`` with ``data`` saying what they were decided on where it differs from the paper: the dataset and
    model (:func:`decided_on`), this scale's setup (:func:`setup_changes` of ``cfg`` against ``paper``) and
    ``notes`` (``{pattern: note}``: the note of the rows whose source matches, e.g. one artifact's rounds)."""
    setup, out = setup_changes(cfg, paper, who), []
    for v in verdicts:
        if v.data or v.verdict == "pending":
            out.append(v)
            continue
        other = decided_on(v.source, cfg.dataset, cfg.model)
        head = other or (f"the paper's data and model ({dataset_name(cfg.dataset)}, "
                         f"{MODEL_NAMES.get(cfg.model, cfg.model)})")
        tail = "; ".join(filter(None, [setup, *(n for pat, n in (notes or {}).items() if re.search(pat, v.source))]))
        out.append(replace(v, data=f"{head}; {tail}" if tail else other))
    return out


# The parts of a run's setup a scale may shrink, as a claim's "decided on" names them where they differ
SETUP_FIELDS = (("num_clients", "{} clients"), ("n_train", "{} training images"), ("rounds", "{} rounds"),
                ("local_epochs", "{} local epoch(s)"), ("batch_size", "batch {}"))


def _span(values: Any) -> str:
    vs = sorted(set(values), key=lambda v: (v is None, v or 0))
    text = lambda v: "all" if v is None else f"{v:,}"  # noqa: E731
    return text(vs[0]) if len(vs) == 1 else f"{text(vs[0])}-{text(vs[-1])}"


def setup_label(source: str, dataset: str, ours: Sequence[Any], paper: Any) -> str:
    """What a claim citing ``source`` was decided on where it differs from the paper's setup: the data and model
    (:func:`decided_on`) and each of :data:`SETUP_FIELDS` whose values in ``ours`` (the Configs of the runs it reads)
    differ from ``paper`` (the paper-scale plan's Config of the same artifact). "" when nothing differs."""
    if not ours:
        return decided_on(source, dataset, "")
    diff = [(fmt, _span(getattr(c, f) for c in ours), _span([getattr(paper, f)])) for f, fmt in SETUP_FIELDS
            if {getattr(c, f) for c in ours} != {getattr(paper, f)}]
    head = decided_on(source, dataset, ours[0].model)
    if not diff:
        return head
    o, t = (", ".join(fmt.format(x[k]) for fmt, *x in diff) for k in (0, 1))
    if head:
        mine, theirs = head.split("; the paper: ")
        return f"{mine}, {o}; the paper: {theirs}, {t}"
    model = MODEL_NAMES.get(ours[0].model, ours[0].model)
    return f"{dataset_name(dataset)}, {model} as the paper's, {o}; the paper: {t}"
VERDICT_COLOURS = {"reproduced": "#d9f2d9", "contradicted": "#f8d7d7", "inconclusive": "#fff3cd",
                   "not testable at this scale": "#e9ecef", "pending": "#e7f0fb"}


def _fmt(x: Any, spec: str = "+.2f") -> str:
    return "—" if x is None or (isinstance(x, float) and x != x) else format(x, spec)


def _verdict_css(v: str) -> str:
    return f"background-color: {VERDICT_COLOURS[v]}" if v in VERDICT_COLOURS else ""


def claim_cells(c: Mapping[str, Any]) -> dict[str, str]:
    """A stored claim (:meth:`fedlib.companion.verdicts.Verdict.to_dict` plus ``status``) as the cells of one row of
    :data:`CLAIM_COLUMNS`: what it was decided on, n and the means per side, d with its interval and the interval's
    half-width (the smallest effect this many seeds resolve), the paper's number, the size reading (where the
    paper's effect lies against our interval), the method or the reason (and, for an inconclusive row, the seeds a
    side that would decide it). A row nothing decided was decided on nothing: "—"."""
    iv = c.get("interval") or [None, None]
    d = "—" if c.get("estimate") is None else f"{_fmt(c['estimate'])} [{_fmt(iv[0])}, {_fmt(iv[1])}]"
    status = c.get("status", c.get("verdict", "?"))
    size = f"{c['size']} ({_fmt(c.get('paper_d'))})" if c.get("size") else "—"
    power = status == "inconclusive" and c.get("estimate") is not None
    seeds = f"{c['seeds']} seeds a side would decide it" if c.get("seeds") else \
        "no count up to 1,000 seeds a side would decide it" if power else ""
    cells = [status, c.get("claim", ""), c.get("source", ""),
             (c.get("data") or "the paper's data and model") if status in DECIDED else "—",
             ", ".join(f"{k} {v}" for k, v in (c.get("n") or {}).items()) or "—",
             ", ".join(f"{k} {_fmt(v, '.2f')}" for k, v in (c.get("means") or {}).items()) or "—", d,
             "—" if None in iv else _fmt((iv[1] - iv[0]) / 2, ".2f"),
             c.get("region") or "—", c.get("paper") or "—", size,
             "; ".join(filter(None, [c.get("method", ""), c.get("why", ""), seeds,
                                     f"finding: {c['finding']}" if c.get("finding") else ""])) or "—"]
    return dict(zip(CLAIM_COLUMNS, cells))


def claim_rows(claims: list[dict]) -> list[list[object]]:
    """One row per claim (:func:`claim_cells`): verdict, claim, source, n, means, d and its interval, the claim's
    region, the paper's number, how it was decided or why not."""
    return [list(r.values()) for r in map(claim_cells, claims)]


class Tables:
    """Several styled tables shown one after the other (a notebook cell's output)."""

    def __init__(self, tables: list[Any]) -> None:
        self.tables = tables

    def _repr_html_(self) -> str:
        return "<br>".join(t.to_html() for t in self.tables)

    def __repr__(self) -> str:  # the text a terminal (or a notebook's text/plain) shows: no memory address
        return "\n\n".join(f"{t.caption}\n{t.data.to_string(index=False)}" for t in self.tables)


class ClaimFailed(AssertionError):
    pass


class Report:
    """What one notebook run showed: its tables, its verdicts on the papers' claims, the invariants it checked, and
    the runs that produced it."""

    def __init__(self, notebook: str, *, scale: str, dataset: str, **meta: Any) -> None:
        self.notebook, self.scale, self.dataset = notebook, scale, dataset
        self.meta = {k: (v if isinstance(v, (int, float, str, bool, list)) else str(v)) for k, v in meta.items()}
        self.tables: dict[str, pd.DataFrame] = {}
        self.claims: list[dict[str, Any]] = []
        self.controls: list[dict[str, Any]] = []
        self.checks: list[dict[str, Any]] = []
        self.provenance: dict[str, Any] = {}
        self.table_provenance: dict[str, dict[str, Any]] = {}
        self._registered: set[str] = set()

    def table(self, name: str, df: pd.DataFrame, *, runs: Any = None) -> pd.DataFrame:
        """Add a table; ``runs`` (the records behind it) gives its provenance: their commits, devices, seeds."""
        self.tables[name] = df
        if runs is not None:
            self.table_provenance[name] = runs_provenance(runs)
        return df

    def runs(self, records: Any) -> dict[str, Any]:
        """Register the runs behind this notebook (a Record, or nested dicts / lists of them; pending and diverged
        placeholders are counted, not timed): their training minutes, seeds, commits, devices and precisions. A run
        is counted once however many artifacts share it (same key), within one call and across calls."""
        fresh = unique_runs(records)
        fresh = {k: r for k, r in fresh.items() if k not in self._registered}
        self._registered.update(k for k in fresh if isinstance(k, str))
        new, prov = runs_provenance(list(fresh.values())), self.provenance
        for k in ("runs", "pending", "diverged"):
            prov[k] = prov.get(k, 0) + new[k]
        prov["training_minutes"] = round(prov.get("training_minutes", 0.0) + new["training_minutes"], 2)
        for k in ("seeds", "commits", "devices", "precisions"):
            prov[k] = sorted({*prov.get(k, []), *map(str, new[k])}, key=str)
        return prov

    def check(self, text: str, ok: bool, *, detail: str = "") -> None:
        """An invariant of our own code (partitions cover every sample, a run learned): raises when it fails."""
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
            raise TypeError("Report.verdict takes a fedlib.companion.verdicts.Verdict: decide(claim, source, ours, theirs, "
                            "kind=..., margin=..., chance=...), decide_ratio(...) or not_testable(...).")
        if not scale_of(self.scale).decides and v.verdict != "pending":
            why = f"{self.scale} scale proves the code runs, not the paper"
            v = replace(not_testable(v.claim, v.source, why, v.paper), control=v.control)
        if not v.data:
            v = replace(v, data=decided_on(v.source, self.dataset, self.model(v.source), str(self.meta.get(
                "device", "cpu")), timed="repeats" in v.method))
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
        """Record one of the project's own comparisons (a control such as local-only training, or a fidelity
        target): decided like a claim, listed apart from the papers' claims and never counted among them."""
        return self.verdict(replace(v, control=True))

    def save_figure(self, fig: Any, name: str, *, runs: Any = "registered", scale: str | None = None,
                    **extra: Any) -> list[Path]:
        """Save ``fig`` as ``figures/<scale>/<name>.{png,pdf,json}`` stamped with this notebook's provenance: scale,
        dataset, and the seeds, commits and devices of the runs registered by :meth:`runs`, or of ``runs`` (None:
        a figure no training run produced, e.g. timings) (``extra``: more ``key=value`` fields for the stamp, e.g.
        ``dataset="synthetic"``; ``scale``: the scale of what it shows when not this notebook's, e.g. a benchmark's
        stored result). A figure whose runs are all pending is not saved (it would show empty axes): the
        notebook still shows it, and nothing is returned."""
        seeds = self.meta.get("seeds", []) if runs is not None else []
        if isinstance(runs, str) and runs == "registered":
            runs = self if self.provenance else None
        counts = {} if runs is None else self.provenance if runs is self else runs_provenance(runs)
        if counts.get("runs") and counts.get("pending") == counts["runs"]:
            print(f"{name}: not saved, none of its {counts['runs']} runs is stored yet")
            return []
        prov = provenance_line(scale or self.scale, extra.pop("dataset", self.dataset),
                               str(self.meta.get("device", "cpu")), seeds if isinstance(seeds, list) else [],
                               runs=runs, **extra)
        if name not in self.meta.setdefault("figures", []):  # the summary lists them: claims link to their figures
            self.meta["figures"].append(name)
        return save_figure(fig, name, prov, self.scale)

    def claims_frame(self) -> pd.DataFrame:
        """The claims recorded so far, one row each (:data:`CLAIM_COLUMNS`)."""
        return pd.DataFrame([claim_cells(c) for c in self.claims], columns=list(CLAIM_COLUMNS))

    def claims_table(self, controls: bool | None = None) -> Any:
        """The papers' claims as one styled table for a notebook's last cell (the verdict cell coloured, long text
        wrapped, the index hidden: a pandas ``Styler``), followed by the project's controls when there are any
        (``controls=None``; a notebook with controls only shows them alone, captioned so); ``controls=True``: the
        controls alone, ``False``: the claims alone."""
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
        uuid = f"{self.notebook}-{'controls' if controls else 'claims'}"  # pandas' default is random: not reproducible
        return (df.style.set_uuid(uuid).hide(axis="index").map(_verdict_css, subset=["verdict"])
                .set_properties(**{"text-align": "left", "white-space": "normal", "font-size": "0.9em"})
                .set_caption(f"{self.notebook}: {what} at scale {self.scale} on {self.dataset}"))

    def save(self, root: Path | None = None) -> Path:
        """Write ``results/summary/<notebook>.<scale>.json`` (only if its content changed): ``commit`` is the
        rendering commit; ``commits``, ``devices`` and ``seeds`` are the runs' (:meth:`runs`), and
        ``table_provenance`` those of each table given ``runs``."""
        root = Path(root or DEFAULT_ROOT) / "summary"
        doc = {"notebook": self.notebook, "scale": self.scale, "dataset": self.dataset, "commit": code_commit(),
               **self.meta, **self.provenance, "claims": self.claims, "controls": self.controls,
               "checks": self.checks,
               "tables": {k: json.loads(v.reset_index().to_json(orient="records")) for k, v in self.tables.items()},
               **({"table_provenance": self.table_provenance} if self.table_provenance else {})}
        path = root / f"{self.notebook}.{self.scale}.json"
        atomic_write_text(path, json.dumps(doc, indent=1))
        return path
