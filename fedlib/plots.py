"""Figures and paper-vs-ours tables that always say what produced them.

Every figure saved with :func:`save_figure` carries a provenance footer and is written as PNG and PDF to
``figures/<scale>/``, with a JSON sidecar holding the same provenance. The footer of a figure that shows runs comes
from their records (``provenance_line(..., runs=records)``): the commits, devices and seeds that trained them, and,
separately, the commit that rendered it. Files are written deterministically (no dates in their metadata) and only
when their bytes change, so rendering the same records again leaves them untouched.
"""

from __future__ import annotations

import io
import re
import textwrap
import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats

from .atomic import atomic_write_bytes, atomic_write_text
from .provenance import code_commit, device_name, runs_provenance, short_commit
from .style import method_style
from .verdicts import CONFIDENCE

# figures/ beside the package, or $FEDLIB_FIGURES (as $FEDLIB_RESULTS for the results)
FIGURES = Path(os.environ.get("FEDLIB_FIGURES", Path(__file__).resolve().parent.parent / "figures"))

# no creation dates or versions in the files: the same figure gives the same bytes
_METADATA = {"png": {"Software": None}, "pdf": {"Creator": None, "Producer": None, "CreationDate": None}}


class Provenance(str):
    """A footer line that also carries its fields (``.fields``), which :func:`save_figure` writes to the sidecar."""

    fields: dict[str, Any]

    def __new__(cls, text: str, fields: dict[str, Any]) -> "Provenance":
        obj = super().__new__(cls, text)
        obj.fields = fields
        return obj


def provenance_line(scale: str, dataset: str, device: str, seeds: Sequence[int] | int, *, runs: Any = None,
                    **extra: Any) -> Provenance:
    """One line naming how a figure was produced; the paper's setup is only ever called 'paper' scale.

    ``runs`` (the Records behind the figure, or nested dicts / lists of them, pending and diverged placeholders
    included, or a :class:`~fedlib.report.Report` whose ``runs`` were registered) gives the seeds, commits and
    devices of the runs that made it; the rendering commit is stated after them. Without ``runs`` (a figure
    computed while rendering, e.g. the partitions) the line gives ``seeds``, and the commit and ``device`` of the
    rendering."""
    seeds = [seeds] if isinstance(seeds, int) else list(seeds)
    fields: dict[str, Any] = {"scale": scale, "dataset": dataset, "rendered_commit": code_commit()}
    parts = [f"scale={scale}", f"dataset={dataset}"]
    if runs is None:
        # the rendering machine without its thread count: rendering the same records on it gives the same stamp
        fields.update(seeds=seeds, device=re.sub(r", \d+ threads?\)$", ")", device_name(device)))
        parts += [f"seeds={','.join(map(str, seeds))}"] * bool(seeds) + [
            f"rendered at commit={fields['rendered_commit']} on device={fields['device']}"]
    else:
        prov = dict(runs.provenance) if hasattr(runs, "table_provenance") else runs_provenance(runs)
        fields["runs"] = {k: prov.get(k) for k in ("runs", "pending", "diverged", "seeds", "commits", "devices")}
        n, pend, div = prov.get("runs", 0), prov.get("pending", 0), prov.get("diverged", 0)
        count = f"runs={n}" + (f" ({pend} pending)" if pend else "") + (f" ({div} diverged)" if div else "")
        parts += [count, f"seeds={','.join(map(str, prov.get('seeds') or [])) or 'none yet'}",
                  f"trained at commit={','.join(short_commit(str(c)) for c in prov.get('commits') or []) or '—'}",
                  f"on device={'; '.join(map(str, prov.get('devices') or [])) or '—'}",
                  f"rendered at commit={short_commit(fields['rendered_commit'])}"]
    parts += [f"{k}={v}" for k, v in extra.items()]
    fields.update(extra={k: str(v) for k, v in extra.items()})
    note = "" if scale == "paper" else "  [NOT paper scale]"
    return Provenance("fedlib · " + " · ".join(parts) + note, fields)


def save_figure(fig: plt.Figure, name: str, provenance: str, scale: str, directory: Path | None = None) -> list[Path]:
    """Stamp ``provenance`` under the figure and write ``figures/<scale>/<name>.{png,pdf,json}``; a file whose
    bytes would not change is left as it is.

    Each scale has its own folder, so a smoke or quick run never overwrites a paper-scale figure
    (``figures/smoke/`` is not committed)."""
    directory = Path(directory or FIGURES) / scale
    directory.mkdir(parents=True, exist_ok=True)
    # below the axes, wrapped to the figure's width; bbox_inches="tight" grows the saved canvas to include it
    stamp = "\n".join(textwrap.wrap(str(provenance), width=max(60, int(fig.get_figwidth() * 72 / 3.3)),
                                     break_on_hyphens=False))
    fig.text(0.5, -0.01, stamp, ha="center", va="top", fontsize=6, color="0.35")
    out = []
    for ext in ("png", "pdf"):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, dpi=150 if ext == "png" else None, bbox_inches="tight",
                    metadata=_METADATA[ext])
        out.append(atomic_write_bytes(directory / f"{name}.{ext}", buf.getvalue()))
    side = {"figure": name, "provenance": str(provenance), **getattr(provenance, "fields", {})}
    atomic_write_text(directory / f"{name}.json", json.dumps(side, indent=1, default=str))
    return out


def class_heatmap(ax: plt.Axes, counts: np.ndarray, title: str = "", annotate: bool = False) -> None:
    """Client × class sample counts (FedCKA Fig. 4, FedIntR Fig. 3): x = client, y = class."""
    im = ax.imshow(counts.T, aspect="auto", cmap="Blues", origin="lower")
    ax.set_xlabel("client")
    ax.set_ylabel("class")
    ax.set_title(title)
    n_c, n_k = counts.shape
    ax.set_xticks(range(n_c) if n_c <= 20 else np.linspace(0, n_c - 1, 6, dtype=int))
    ax.set_yticks(range(n_k) if n_k <= 20 else np.linspace(0, n_k - 1, 6, dtype=int))
    if annotate and n_c * n_k <= 200:
        for i in range(n_c):
            for j in range(n_k):
                ax.text(i, j, int(counts[i, j]), ha="center", va="center", fontsize=5,
                        color="white" if counts[i, j] > counts.max() / 2 else "black")
    plt.colorbar(im, ax=ax, fraction=0.046, pad=0.02)


def accuracy_curves(ax: plt.Axes, curves: Iterable[tuple[str, pd.Series]], hline: float | None = None,
                    hline_label: str = "") -> None:
    """Test accuracy per round for several runs, optionally with a reference line (e.g. an upper bound). Each method
    keeps its colour and line style (:func:`fedlib.style.method_style`), so overlapping curves stay visible, and the
    y-axis leaves room above the highest curve or line."""
    top = hline if hline is not None else 0.0
    for label, s in curves:
        n = len(s)
        ax.plot(s.index, 100 * s.values, ms=4, markevery=max(1, n // 10), label=label, **method_style(label))
        top = max(top, float(np.nanmax(100 * s.values)) if n else 0.0)
    if hline is not None:
        ax.axhline(hline, ls=(0, (2, 2)), color="0.3", lw=1, label=hline_label)
    if top > 0:
        ax.set_ylim(top=min(100.0, top + 0.08 * max(top - ax.get_ylim()[0], 10.0)))
    ax.set_xlabel("round")
    ax.set_ylabel("test accuracy (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


# ---- the figure kinds every artifact draws with: curves over rounds, values by group or along a sweep, similarity
# heatmaps, and the papers' numbers in a panel of their own. Error bars and bands are always the 95 % t interval
# over seeds (none for one seed), and every function returns the note that says so, for the figure's title.

def t_interval(values: Iterable[float]) -> tuple[float, float, int]:
    """(mean, half-width of the 95 % t interval of the mean, n) of the finite ``values``; the half-width is NaN for
    fewer than two values (one seed has no interval) and the mean NaN for none."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if len(v) == 0:
        return float("nan"), float("nan"), 0
    if len(v) == 1:
        return float(v[0]), float("nan"), 1
    half = stats.t.ppf(0.5 + CONFIDENCE / 2, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return float(v.mean()), float(half), len(v)


def seeds_note(seeds: Iterable[int], what: str = "bars", counts: Iterable[int] = (), per: str = "point") -> str:
    """``"5 seeds (0-4); bars: 95 % t interval"``, or ``"1 seed (0), no interval"``: what a figure's title says
    about its seeds and error bars. ``counts``: the number of seeds behind each drawn point (or bar, or curve:
    ``per``); where they differ, the note says so (``"5 seeds (0-4), 2 to 5 per point; ..."``), so a title never
    reads as if every point had all the seeds."""
    s = sorted(set(int(x) for x in seeds))
    if not s:
        return "no runs yet"
    names = f"{s[0]}-{s[-1]}" if len(s) > 2 and s == list(range(s[0], s[-1] + 1)) else ",".join(map(str, s))
    if len(s) == 1:
        return f"1 seed ({names}), no interval"
    n = sorted(set(int(c) for c in counts if c > 0))
    uneven = f", {n[0]} to {n[-1]} per {per}" if len(n) > 1 else f", {n[0]} per {per}" if n and n[0] < len(s) else ""
    return f"{len(s)} seeds ({names}){uneven}; {what}: 95 % t interval of the mean"


def mean_curves(ax: plt.Axes, runs: Mapping[str, Mapping[int, pd.Series]], *, percent: bool = True,
                ylabel: str = "test accuracy (%)", xlabel: str = "round", logy: bool = False) -> str:
    """For each label, its seeds' curves (``{label: {seed: Series indexed by round}}``) as their mean with a shaded
    95 % t band (one seed: its curve alone); rounds where a seed was not evaluated are left out of that round's
    mean. Returns the seeds note for the title (:func:`seeds_note`)."""
    seeds: set[int] = set()
    counts: list[int] = []
    observed: list[float] = []
    for label, by_seed in runs.items():
        if not by_seed:
            continue
        seeds |= set(by_seed)
        counts.append(len(by_seed))
        frame = pd.concat({s: c for s, c in by_seed.items()}, axis=1).sort_index() * (100 if percent else 1)
        observed += [v for v in frame.to_numpy().ravel() if np.isfinite(v) and v > 0]
        stats_ = [t_interval(row) for row in frame.to_numpy()]
        mean = np.array([m for m, _, _ in stats_])
        half = np.array([h for _, h, _ in stats_])
        style = method_style(label)
        n = len(by_seed)
        ax.plot(frame.index, mean, label=f"{label} (n={n})" if n > 1 else label,
                markevery=max(1, len(frame) // 10), ms=4, **style)
        if n > 1:
            ax.fill_between(frame.index, mean - half, mean + half, color=style["color"], alpha=0.18, lw=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    if seeds:
        ax.legend(fontsize=8)
    lo, hi = ax.get_ylim()
    if percent and seeds:  # a 95 % t band of few seeds can reach past 0-100 %: the axis stays on accuracies
        ax.set_ylim(max(lo, 0.0), min(hi, 100.0))
    elif logy and observed:  # on a log axis such a band reaches decades below any seed: stay within 2x of them
        ax.set_ylim(max(lo, min(observed) / 2), min(hi, max(observed) * 2))
    return seeds_note(seeds, "band", counts, "curve")


def _drawn(values: Mapping[Any, Sequence[float]]) -> dict[Any, tuple[float, float, int]]:
    return {k: st for k, v in values.items() if (st := t_interval(v))[2] > 0}


def group_panels(fig: plt.Figure | Any, groups: Mapping[str, Mapping[str, Mapping[int, float]]], *,
                 ylabel: str = "final test accuracy (%)",
                 off: Mapping[str, Mapping[str, Iterable[int]]] | None = None,
                 diverged: Mapping[str, Mapping[str, int]] | None = None) -> str:
    """Values by group and method (``{group: {method: {seed: value}}}``), one panel per group in a row of ``fig`` (a
    figure or subfigure): each method's seeds' mean as a point in its colour with its 95 % t interval, and each seed
    as a dot beside it. Each panel's y-axis spans its own values (the differences the claims are about are a point or
    two; bars from zero would hide them), so levels compare within a panel, not across. A group with no value yet
    gets no panel: the returned note names it ("not run yet: ...") after the seeds note. ``off`` (``{group:
    {method: seeds}}``): seeds off their plateau, drawn as red rings (the note says so). ``diverged`` (``{group:
    {method: count}}``): seeds that diverged; such a method gets no mean (as its table cell), its finished seeds grey
    dots and a × at the panel's foot with the count (the note says so)."""
    div = {g: {k: n for k, n in d.items() if n} for g, d in (diverged or {}).items()}
    drawn = {g: m for g, m in groups.items() if any(len(v) for v in m.values()) or div.get(g)}
    axes = fig.subplots(1, max(1, len(drawn)), squeeze=False)[0]
    seeds: set[int] = set()
    counts: list[int] = []
    ringed = crossed = False
    for ax, (g, m) in zip(axes, drawn.items()):
        dg = div.get(g, {})
        methods = [k for k, v in m.items() if len(v) or dg.get(k)]
        for x, method in enumerate(methods):
            vals = m[method]
            seeds |= set(vals)
            if nd := dg.get(method, 0):
                ax.plot([x + 0.2] * len(vals), list(vals.values()), ls="none", marker=".", color="grey", ms=4)
                ax.plot(x, 0.04, transform=ax.get_xaxis_transform(), marker="x", ms=8, mew=2,
                        color=method_style(method)["color"], clip_on=False)
                ax.annotate(f"{nd}", (x, 0.04), xycoords=ax.get_xaxis_transform(), xytext=(7, 0),
                            textcoords="offset points", ha="left", va="center", fontsize=8)
                crossed = True
                continue
            mean, half, n = t_interval(vals.values())
            counts.append(n)
            ax.errorbar(x, mean, yerr=half if n > 1 else None, color=method_style(method)["color"], marker="o",
                        ms=7, capsize=4, lw=1.5)
            ax.plot([x + 0.2] * n, list(vals.values()), ls="none", marker=".", color="black", ms=3)
            off_seeds = set((off or {}).get(g, {}).get(method, ()))
            bad = [v for sd, v in vals.items() if sd in off_seeds]
            if bad:
                ringed = True
                ax.plot([x + 0.2] * len(bad), bad, ls="none", marker="o", mfc="none", mec="tab:red", ms=6, mew=1.2)
        ax.set_xticks(range(len(methods)), methods, rotation=30, ha="right", fontsize=8)
        ax.set_xlim(-0.6, len(methods) - 0.4)
        ax.set_title(g, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel(ylabel)
    missing = [g for g in groups if g not in drawn]
    return seeds_note(seeds, "bars", counts, "point") + (f"; not run yet: {', '.join(missing)}" if missing else "") \
        + (f"; {DIVERGED_NOTE}" if crossed else "") + ("\n" + OFF_SEEDS_NOTE if ringed else "")


OFF_NOTE = "ringed: runs still rising over their last 20 % of rounds (off their plateau: their claims not testable)"
DIVERGED_NOTE = "×: seeds that diverged, how many beside it (no mean; the others' seeds in grey)"
OFF_SEEDS_NOTE = "red rings: seeds still rising over their last 20 % of rounds (off their plateau)"


def sweep(ax: plt.Axes, points: Mapping[str, Mapping[float, Mapping[int, float]]], *, xlabel: str,
          ylabel: str = "final test accuracy (%)", off: Mapping[str, Mapping[float, int]] | None = None) -> str:
    """Values along a swept setting (``{method: {x: {seed: value}}}``): the seeds' mean with 95 % t error bars.
    A method with fewer than three settings run is drawn as dots without a connecting line (two points are not a
    trend); x ticks are the settings that were run. ``off`` (``{method: {x: count}}``): how many of a point's runs
    are off their plateau; such a point is ringed and labelled "k of n still rising" (outwards of the other methods:
    the last method's to the right), and the note says so."""
    seeds: set[int] = set()
    xs: set[float] = set()
    drawn: list[tuple[float, float, int]] = []
    ringed = False
    for i, (method, by_x) in enumerate(points.items()):
        stats_ = {x: st for x, v in sorted(by_x.items()) if (st := t_interval(v.values()))[2] > 0}
        for v in by_x.values():
            seeds |= set(v)
        if not stats_:
            continue
        xs |= set(stats_)
        drawn += stats_.values()
        style = method_style(method)
        if len(stats_) < 3:
            style["ls"] = "none"
        x = list(stats_)
        ax.errorbar(x, [m for m, _, _ in stats_.values()],
                    yerr=[0 if not np.isfinite(h) else h for _, h, _ in stats_.values()], capsize=3, label=method,
                    **{k: v for k, v in style.items() if k != "marker"}, marker=style.get("marker") or "o")
        right = i == len(points) - 1 or len(points) == 1
        for xv, (mean, _, n) in stats_.items():
            if k := (off or {}).get(method, {}).get(xv, 0):
                ringed = True
                ax.plot(xv, mean, marker="o", ms=14, mfc="none", mec="0.3", ls="none")
                ax.annotate(f"{k} of {n} still rising", (xv, mean), xytext=(10 if right else -10, -3),
                            textcoords="offset points", fontsize=7, color="0.3", ha="left" if right else "right")
    ax.set_xticks(sorted(xs))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if xs:
        ax.legend(fontsize=8)
    return seeds_note(seeds, "bars", [n for _, _, n in drawn], "point") + ("\n" + OFF_NOTE if ringed else "")


def similarity_heatmap(ax: plt.Axes, matrix: np.ndarray, labels: Sequence[str] | None = None, title: str = "",
                       annotate: bool = True) -> Any:
    """A CKA (or other [0, 1] similarity) matrix on the fixed scale 0-1, each cell annotated with its value, so a
    spread of a few hundredths is read from the numbers, not from a stretched colour scale."""
    m = np.asarray(matrix, dtype=float)
    im = ax.imshow(m, vmin=0.0, vmax=1.0, cmap="viridis")
    if labels is not None:
        ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
    if annotate and m.size <= 400:
        for (i, j), v in np.ndenumerate(m):
            if np.isfinite(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=5 if m.shape[0] > 8 else 7,
                        color="black" if v > 0.6 else "white")
    ax.set_title(title, fontsize=9)
    return im


def paper_panel(ax: plt.Axes, rows: Sequence[Sequence[Any]], columns: Sequence[str], title: str) -> None:
    """The papers' numbers as a small table in a panel of their own (``title`` names the paper's dataset, model and
    scale): never drawn on our axes, where a value from another setup would read as comparable."""
    ax.axis("off")
    table = ax.table(cellText=[[str(c) for c in r] for r in rows], colLabels=list(columns), loc="upper center",
                     cellLoc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    table.auto_set_column_width(list(range(len(columns))))  # each column as wide as its longest text
    table.scale(1.0, 1.25)
    ax.set_title(title, fontsize=9)
