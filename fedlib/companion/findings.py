"""What the project found, per paper: every notebook's stored claim rows read together (notebook
09).

The rows come from the notebooks' summaries (``results/summary/<notebook>.<scale>.json``, written
when a notebook renders); nothing here trains or decides anything anew. Per paper:

* :func:`verdict_counts` — the verdict counts, the decided rows and how many false decisions their
  95 % intervals allow (each decided row errs with probability at most 2.5 %, one-sided), and how
  many still hold after Holm's step-down over the paper's decided t rows
  (:func:`fedlib.companion.verdicts.holm`);
* :func:`forest` — a forest plot: each claim a row, our d with its 95 % interval, the paper's effect
  as a marker, the claim's region shaded, coloured by verdict;
* :func:`paragraph` — the findings in one paragraph, from the rows and their named findings.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from fedlib.companion import results
from fedlib.companion.papers.fedcka.claims import FEDCKA_FINDINGS
from fedlib.companion.claims_page import VERDICT_COLUMNS, holm_readings, paper_names, paper_of
from fedlib.companion.report import VERDICT_COLOURS as CELL_COLOURS, Tables
from fedlib.companion.verdicts import CONFIDENCE, MARGINS, VERDICTS

__all__ = ["MARKER_COLOURS", "CAVEATS", "FINDINGS", "paper_of", "load", "verdict_counts", "forest",
           "paragraph", "claims_view", "headline", "readme_block", "write_readme", "README_BEGIN",
           "README_END"]

MARKER_COLOURS = {"reproduced": "#1b7837", "contradicted": "#b2182b", "inconclusive": "#e08214",
                   "not testable at this scale": "#878787"}
# named findings: rows that are one phenomenon, with the mechanism
FINDINGS: dict[str, str] = {**FEDCKA_FINDINGS}
UNITS = {"points": "d (accuracy points)", "CKA": "d (CKA)", "ratio": "ratio"}
CAVEATS = {
    "FedCKA": "Fashion-MNIST stands in for CIFAR-10, CIFAR-100 and Tiny ImageNet; quick gives "
              "about 117 local steps a round against the paper's ~390; each method runs at the μ "
              "§4.2 states for CIFAR-10 (and FedCKA's ablations at μ = 3).",
    "FedIntR": "Table I's Fashion-MNIST column is the paper's own data; quick trains 12 k of its "
               "60 k images for 40 rounds of 6 epochs at batch 64 (the paper: 100 rounds of 10 at "
               "batch 512); every other column is CIFAR or SVHN, not on this machine.",
    "FedER": "Fashion-MNIST stands in for CIFAR-100 with a width-8 ResNet-18; at quick, EVBMF "
             "keeps no component in most client-layers, so FedER is FedAvg there.",
    "FedSHIBU": "Fashion-MNIST stands in for CIFAR-10 / CIFAR-100; at quick the client-similarity "
                "matrix is uniform, so FedSHIBU is FedBABU and the CRSM rows are not testable.",
}


def load(scale: str, root: Path | None = None) -> pd.DataFrame:
    """Every stored claim row of ``scale`` (controls left out), one row each: ``notebook``, the
    fields of :meth:`fedlib.companion.verdicts.Verdict.to_dict`; ``holm``: "holds" / "not after
    Holm" for a decided t row, "" else."""
    folder = Path(root or results.DEFAULT_ROOT) / "summary"
    rows = []
    for path in sorted(folder.glob(f"[0-9][0-9]_*.{scale}.json")):
        doc = json.loads(path.read_text())
        rows += [{"notebook": doc["notebook"], **c, "study": paper_of(c.get("source", ""))}
                 for c in doc.get("claims", [])]
    df = pd.DataFrame(rows)
    if df.empty:
        return df.assign(notebook=[], study=[], status=[], holm=[])
    for col in ("p", "estimate", "paper_d", "seeds", "unit", "finding", "size", "kind"):
        if col not in df:
            df[col] = None
    df["holm"] = ""
    for _, idx in df.groupby("study").groups.items():
        df.loc[idx, "holm"] = holm_readings(df.loc[idx].to_dict("records"))
    return df


def verdict_counts(df: pd.DataFrame) -> pd.DataFrame:
    """Per paper: the count of each verdict, the decided rows, the false decisions their intervals
    allow (at most 2.5 % of the decided rows, expected) and the decided t rows that still hold after
    Holm."""
    out = []
    for paper in [p for p in paper_names() if p in set(df.get("study", []))]:
        sub = df[df["study"] == paper]
        n = {v: int((sub["status"] == v).sum()) for v in VERDICT_COLUMNS}
        decided = n["reproduced"] + n["contradicted"]
        held = int((sub["holm"] == "holds").sum())
        tested = int(sub["holm"].isin(["holds", "not after Holm"]).sum())
        out.append({
            "paper": paper, **n, "decided": decided,
            "false decisions allowed (expected, at most)": round(decided * (1 - CONFIDENCE) / 2, 2),
            "decided t rows holding after Holm": f"{held} of {tested}"
        })
    return pd.DataFrame(out).set_index("paper") if out else pd.DataFrame()


def _shade_region(ax: plt.Axes, y: float, kind: str, margin: float, unit: str,
                  span: tuple[float, float]) -> None:
    ref = 1.0 if unit == "ratio" else 0.0
    lo, hi = {"greater": (ref, span[1]), "less": (span[0], ref), "at_least": (-margin, span[1]),
              "within": (-margin, margin)}.get(kind, (np.nan, np.nan))
    if math.isfinite(lo) and math.isfinite(hi):
        ax.fill_betweenx([y - 0.42, y + 0.42], lo, hi, color="#c6dbef", alpha=0.55, lw=0, zorder=0)


def forest(df: pd.DataFrame, paper: str, caption: str = "") -> plt.Figure | None:
    """A forest plot of ``paper``'s rows with an interval: each claim a row (its notebook's number
    first), our d and its 95 % interval coloured by verdict, the paper's effect as a black diamond,
    the claim's region shaded blue; a panel per unit of d. None when no row has an interval."""
    sub = df[(df["study"] == paper) & df["estimate"].notna()].copy()
    if sub.empty:
        return None
    sub["unit"] = sub["unit"].fillna("points").replace("", "points")
    units = [u for u in UNITS if u in set(sub["unit"])]
    heights = [max(2, (sub["unit"] == u).sum()) for u in units]
    fig, axes = plt.subplots(len(units), 1, figsize=(11, 1.2 + 0.3 * sum(heights)), squeeze=False,
                             gridspec_kw={"height_ratios": heights}, layout="constrained")
    for ax, unit in zip(axes[:, 0], units):
        rows = sub[sub["unit"] == unit].iloc[::-1]
        lo = np.array([r["interval"][0] for _, r in rows.iterrows()], float)
        hi = np.array([r["interval"][1] for _, r in rows.iterrows()], float)
        pd_ = rows["paper_d"].astype(float).to_numpy()
        vals = np.concatenate([lo, hi, pd_[np.isfinite(pd_)], [1.0 if unit == "ratio" else 0.0]])
        pad = 0.08 * (vals.max() - vals.min() or 1.0)
        span = (vals.min() - pad, vals.max() + pad)
        for y, (_, r) in enumerate(rows.iterrows()):
            margin = MARGINS.get(unit, 0.0) if r.get("kind") in ("within", "at_least") else 0.0
            _shade_region(ax, y, r.get("kind") or "", margin, unit, span)
            colour = MARKER_COLOURS.get(r["status"], "black")
            ax.plot([lo[y], hi[y]], [y, y], color=colour, lw=2.2, solid_capstyle="butt")
            ax.plot(r["estimate"], y, "o", color=colour, ms=5)
            if math.isfinite(pd_[y]):
                ax.plot(pd_[y], y, "D", mfc="none", mec="black", ms=6, mew=1.2)
        labels = [f"{r['notebook'][:2]} · {r['claim'][:80]}{'…' if len(r['claim']) > 80 else ''}"
                  for _, r in rows.iterrows()]
        ax.set_yticks(range(len(rows)), labels, fontsize=8)
        ax.set_ylim(-0.6, len(rows) - 0.4)
        ax.set_xlim(*span)
        ax.axvline(1.0 if unit == "ratio" else 0.0, color="black", lw=0.6)
        ax.set_xlabel(UNITS[unit], fontsize=9)
        ax.tick_params(axis="x", labelsize=8)
    handles = [
        plt.Line2D([], [], color=c, lw=2.2, marker="o", label=v) for v, c in MARKER_COLOURS.items()
    ]
    handles += [
        plt.Line2D([], [], ls="", marker="D", mfc="none", mec="black", label="the paper's "
                   "effect"),
        plt.Rectangle((0, 0), 1, 1, color="#c6dbef", alpha=0.55, label="the claim's region")
    ]
    axes[0, 0].legend(handles=handles, fontsize=8, loc="lower left", bbox_to_anchor=(0, 1.0),
                      ncol=3, frameon=False)
    fig.suptitle(
        f"{paper}: each claim's d with its 95 % interval" + (f"\n{caption}" if caption else ""),
        fontsize=9)
    return fig


def paragraph(df: pd.DataFrame, paper: str, findings: dict[str, str] | None = None) -> str:
    """``paper``'s findings in one paragraph: the counts, what was reproduced, the rows whose
    interval excludes the paper's effect, and each named finding with its mechanism (``findings``:
    name → text; :data:`FINDINGS`)."""
    findings = FINDINGS if findings is None else findings
    sub = df[df["study"] == paper]
    if sub.empty:
        return f"{paper}: no claim rows are stored at this scale."
    n = sub["status"].value_counts()
    parts = [
        f"**{paper}** — {len(sub)} claims: " +
        ", ".join(f"{int(n.get(v, 0))} {v}" for v in VERDICT_COLUMNS if n.get(v, 0)) + "."
    ]
    rep = sub[sub["status"] == "reproduced"]["claim"].tolist()
    if rep:
        parts.append("Reproduced: " + "; ".join(rep[:6]) +
                     (f"; and {len(rep) - 6} more" if len(rep) > 6 else "") + ".")
    smaller = sub[(sub["size"] == "smaller than the paper's")]
    if len(smaller):
        parts.append(f"In {len(smaller)} rows our interval lies below the paper's effect (a "
                     "smaller effect than the paper's, "
                     f"{int((smaller['status'] == 'inconclusive').sum())} of them inconclusive on "
                     "direction).")
    for name in sub["finding"].dropna().unique():
        if name:
            k = int((sub["finding"] == name).sum())
            text = (findings or {}).get(name, "")
            parts.append(f"*{name}* ({k} rows, one phenomenon)" + (f": {text}" if text else "."))
    return " ".join(parts)


def claims_view(df: pd.DataFrame) -> object:
    """Every paper's claim rows with both readings and the family-wise one, as a styled table
    (verdict coloured)."""
    cols = [
        "study", "notebook", "status", "holm", "size", "claim", "d [95 % interval]",
        "paper's effect", "seeds a side to decide"
    ]
    if df.empty:
        return pd.DataFrame(columns=cols)
    iv = [r["interval"] or [None, None] for _, r in df.iterrows()]
    view = df.assign(**{
        "notebook": df["notebook"].str[:2],
        "d [95 % interval]": ["—" if e is None or e != e else f"{e:+.2f} [{i[0]:+.2f}, {i[1]:+.2f}]"
                              for e, i in zip(df["estimate"], iv)],
        "paper's effect": ["—" if p is None or p != p else f"{p:+.2f}" for p in df["paper_d"]],
        "seeds a side to decide": ["—" if st != "inconclusive" or e is None or e != e else "> 1,000"
                                   if s is None or s != s else str(int(s))
                                   for s, st, e in zip(df["seeds"], df["status"], df["estimate"])],
        "size": df["size"].fillna("").replace("", "—"), "holm": df["holm"].replace("", "—")})[cols]
    view = view.rename(columns={"study": "paper", "status": "verdict", "holm": "Holm (per paper)"})
    return Tables([
        view.style.set_uuid("09-findings").hide(axis="index").map(
            lambda v: f"background-color: {CELL_COLOURS[v]}"
            if v in CELL_COLOURS else "", subset=["verdict"]).set_properties(
                **{"text-align": "left", "white-space": "normal", "font-size": "0.9em"
                   }).set_caption("every paper's claims: both readings and the family-wise one")
    ])


README_BEGIN, README_END = "<!-- findings: begin -->", "<!-- findings: end -->"


def headline(df: pd.DataFrame, paper: str) -> str:
    """``paper``'s one-sentence headline from its rows: the decided, reproduced and contradicted
    claims, the inconclusive ones and how many rows lie below the paper's effect, the not testable
    ones, its named findings."""
    sub = df[df["study"] == paper]
    n = sub["status"].value_counts()
    below = int((sub["size"] == "smaller than the paper's").sum())
    named = [f for f in sub["finding"].dropna().unique() if f]
    return (f"{int(n.get('reproduced', 0)) + int(n.get('contradicted', 0))} of {len(sub)} claims "
            f"decided ({int(n.get('reproduced', 0))} reproduced, {int(n.get('contradicted', 0))} "
            f"contradicted), {int(n.get('inconclusive', 0))} inconclusive, "
            f"{int(n.get(VERDICTS[3], 0))} not testable at this scale"
            + (f", {int(n.get('pending', 0))} pending" if n.get("pending", 0) else "")
            + f"; in {below} rows our interval lies below the paper's effect"
            + (f"; named finding: {', '.join(named)}" if named else "") + ".")


def readme_block(df: pd.DataFrame, scale: str) -> str:
    """The README's findings block at ``scale``: per paper, its verdict counts and headline, with
    links to the findings notebook and the claims page (between :data:`README_BEGIN` and
    :data:`README_END`)."""
    fam = verdict_counts(df)
    lines = [README_BEGIN, "", f"**What we found** (scale `{scale}`, Fashion-MNIST; not the "
                               "papers' setup: read "
             "[notebook 09](notebooks/09_findings.ipynb) first, every row in "
             f"[results/claims-{scale}.md](results/claims-{scale}.md)):", "",
             "| paper | reproduced | contradicted | inconclusive | not testable | headline |",
             "|---|--:|--:|--:|--:|---|"]
    lines += [
        f"| {p} | " + " | ".join(str(int(fam.loc[p, v]))
                                 for v in VERDICTS) + f" | {headline(df, p)} |" for p in fam.index
    ]
    return "\n".join([*lines, "", README_END])


def write_readme(path: Path, block: str) -> bool:
    """Replace the findings block of the README at ``path`` with ``block``; whether the text
    changed."""
    text = path.read_text()
    a, b = text.index(README_BEGIN), text.index(README_END) + len(README_END)
    new = text[:a] + block + text[b:]
    if new != text:
        path.write_text(new)
    return new != text
