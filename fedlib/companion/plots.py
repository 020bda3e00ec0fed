"""Figures and paper-vs-ours panels: the figure kinds every artifact draws with.

Curves over rounds, values by group or along a sweep, similarity heatmaps, and the papers' numbers
in a panel of their own. Error bars and bands are always the 95 % t interval over seeds (none for
one seed), and every function returns the note that says so, for the figure's title. A figure is
saved, with its provenance stamp, by :func:`fedlib.companion.figfiles.save_figure`.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from scipy import stats

from fedlib.companion.figcheck import note_series
from fedlib.companion.figfiles import (FIGURES, Provenance, provenance_line,  # noqa: F401
                                      save_figure)
from fedlib.companion.style import method_style
from fedlib.companion.verdicts import CONFIDENCE


def class_heatmap(ax: plt.Axes, counts: np.ndarray, title: str = "",
                  annotate: bool = False) -> None:
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
                ax.text(i, j, int(counts[i, j]), ha="center", va="center", fontsize=8,
                        color="white" if counts[i, j] > counts.max() / 2 else "black")
    plt.colorbar(im, ax=ax, fraction=0.046, pad=0.02)


def t_interval(values: Iterable[float]) -> tuple[float, float, int]:
    """(mean, half-width of the 95 % t interval of the mean, n) of the finite ``values``; the
    half-width is NaN for fewer than two values (one seed has no interval) and the mean NaN for
    none."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if len(v) == 0:
        return float("nan"), float("nan"), 0
    if len(v) == 1:
        return float(v[0]), float("nan"), 1
    half = stats.t.ppf(0.5 + CONFIDENCE / 2, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return float(v.mean()), float(half), len(v)


def seeds_note(seeds: Iterable[int], what: str = "bars", counts: Iterable[int] = (),
               per: str = "point") -> str:
    """``"5 seeds (0-4); bars: 95 % t interval"``, or ``"1 seed (0), no interval"``: what a figure's
    title says about its seeds and error bars. ``counts``: the number of seeds behind each drawn
    point (or bar, or curve: ``per``); where they differ, the note says so (``"5 seeds (0-4), 2 to 5
    per point; ..."``), so a title never reads as if every point had all the seeds."""
    s = sorted(set(int(x) for x in seeds))
    if not s:
        return "no runs yet"
    run = len(s) > 2 and s == list(range(s[0], s[-1] + 1))
    names = f"{s[0]}-{s[-1]}" if run else ",".join(map(str, s))
    if len(s) == 1:
        return f"1 seed ({names}), no interval"
    n = sorted(set(int(c) for c in counts if c > 0))
    uneven = (f", {n[0]} to {n[-1]} per {per}" if len(n) > 1
              else f", {n[0]} per {per}" if n and n[0] < len(s) else "")
    return f"{len(s)} seeds ({names}){uneven}; {what}: 95 % t interval of the mean"


def log_t_interval(values: Iterable[float]) -> tuple[float, float, float, int]:
    """(geometric mean, lower, upper, n) of the positive finite ``values``: the 95 % t interval of
    the mean of their logarithms, taken back (asymmetric, never below zero: the interval a log axis
    can carry); the bounds are NaN for fewer than two values."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x) and x > 0], dtype=float)
    m, half, n = t_interval(np.log(v))
    if n == 0:
        return float("nan"), float("nan"), float("nan"), 0
    return float(np.exp(m)), float(np.exp(m - half)), float(np.exp(m + half)), n


def _mean_interval(values: Iterable[float], log: bool) -> tuple[float, float, float, int]:
    """(centre, lower, upper, n): the mean and its t interval, or on a log scale
    :func:`log_t_interval`."""
    if log:
        return log_t_interval(values)
    m, half, n = t_interval(values)
    return m, m - half, m + half, n


def _planned(planned: int | Mapping[str, int] | None, label: str, n: int) -> int:
    p = planned.get(label) if isinstance(planned, Mapping) else planned
    return max(n, int(p)) if p is not None else n


def _with_n(label: str, n: int, planned: int, ns: Sequence[int] = ()) -> str:
    """``"FedAvg (n=5)"``, ``"FedER (n=1)"``, ``"MOON (n=4 of 5 planned)"``, ``"X (n=3–5)"``: a
    legend entry that gives its seeds; a label that already gives them is kept."""
    if re.search(r"\bn\s*=", label):
        return label
    lo, hi = (min(ns), max(ns)) if ns else (n, n)
    count = f"{lo}–{hi}" if hi > lo else f"{lo}"
    return f"{label} (n={count}{f' of {planned} planned' if lo < planned else ''})"


def mean_curves(ax: plt.Axes, runs: Mapping[str, Mapping[int, pd.Series]], *, percent: bool = True,
                ylabel: str = "test accuracy (%)", xlabel: str = "round", logy: bool = False,
                planned: int | Mapping[str, int] | None = None, hline: float | None = None,
                hline_label: str = "") -> str:
    """For each label, its seeds' curves (``{label: {seed: Series indexed by round}}``) as their
    mean with a shaded 95 % t band (seaborn's line plot of the tidy frame, with the t interval as
    its error bar); on a log axis (``logy``) the geometric mean with the t band of the logs. Each
    legend entry gives its seeds (``planned``: the seeds planned per label, or for all; fewer say
    "n=k of m planned"). One seed: its curve alone, dashed, no band. Rounds where a seed was not
    evaluated are left out of that round's mean. Returns the seeds note for the title
    (:func:`seeds_note`). ``hline``: a reference line (e.g. an upper bound, labelled
    ``hline_label``) with room left above it and above the highest curve."""
    seeds: set[int] = set()
    counts: list[int] = []
    observed: list[float] = []
    for label, by_seed in runs.items():
        if not by_seed:
            continue
        seeds |= set(by_seed)
        n = len(by_seed)
        counts.append(n)
        frame = pd.concat(dict(by_seed), axis=1).sort_index() * (100 if percent else 1)
        observed += [v for v in frame.to_numpy().ravel() if np.isfinite(v) and v > 0]
        style = method_style(label)
        if n == 1 and style.get("ls") in ("-", "solid"):
            style["ls"] = "--"  # one seed: dashed, and no band
        p = _planned(planned, label, n)
        shown = _with_n(label, n, p)
        tidy = frame.rename_axis("round").reset_index().melt("round", var_name="seed").dropna()
        sns.lineplot(tidy, x="round", y="value", ax=ax, label=shown,
                     markevery=max(1, len(frame) // 10), ms=4,
                     estimator=lambda v: _mean_interval(v, logy)[0], err_kws=dict(alpha=0.18, lw=0),
                     errorbar=(lambda v: _mean_interval(v, logy)[1:3]) if n > 1 else None,
                     color=style["color"], linestyle=style["ls"], marker=style.get("marker"))
        note_series(ax, shown, n=n, planned=p,
                    interval=("log-t" if logy else "t") if n > 1 else None, marked=n < p,
                    legend=True, curve=True, dashed=style.get("ls") not in ("-", "solid"))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    if hline is not None:
        ax.axhline(hline, ls=(0, (2, 2)), color="0.3", lw=1, label=hline_label)
    if seeds:
        ax.legend(fontsize=8)
    lo, hi = ax.get_ylim()
    # a 95 % t band of few seeds can reach past 0-100 %: the axis stays on accuracies
    if percent and seeds:
        ax.set_ylim(max(lo, 0.0), min(hi, 100.0))
    elif logy and observed:
        ax.set_ylim(max(lo, min(observed) / 2), min(hi, max(observed) * 2))
    if hline is not None:
        top, lo = max([hline, *observed]), ax.get_ylim()[0]
        ax.set_ylim(top=min(100.0 if percent else np.inf, top + 0.08 * max(top - lo, 10.0)))
    return seeds_note(seeds, "band" + " (of the logs, about the geometric mean)" * logy, counts,
                      "curve")


def group_panels(fig: plt.Figure | Any, groups: Mapping[str, Mapping[str, Mapping[int, float]]], *,
                 ylabel: str = "final test accuracy (%)",
                 off: Mapping[str, Mapping[str, Iterable[int]]] | None = None,
                 diverged: Mapping[str, Mapping[str, int]] | None = None) -> str:
    """Values by group and method (``{group: {method: {seed: value}}}``), one panel per group in a
    row of ``fig`` (a figure or subfigure): each method's seeds' mean as a point in its colour with
    its 95 % t interval (seaborn's point plot of the tidy frame), and each seed as a dot beside it.
    Each panel's y-axis spans its own values (the differences the claims are about are a point or
    two; bars from zero would hide them), so levels compare within a panel, not across. A group with
    no value yet gets no panel: the returned note names it ("not run yet: ...") after the seeds
    note. ``off`` (``{group: {method: seeds}}``): seeds off their plateau, drawn as red rings (the
    note says so). ``diverged`` (``{group: {method: count}}``): seeds that diverged; such a method
    gets no mean (as its table cell), its finished seeds grey dots, and its tick label says "× k of
    n diverged" (off the data axis, where a mark would read as a value)."""
    div = {g: {k: n for k, n in d.items() if n} for g, d in (diverged or {}).items()}
    drawn = {g: m for g, m in groups.items() if any(len(v) for v in m.values()) or div.get(g)}
    axes = fig.subplots(1, max(1, len(drawn)), squeeze=False)[0]
    seeds: set[int] = set()
    counts: list[int] = []
    ringed = crossed = False
    for ax, (g, m) in zip(axes, drawn.items()):
        dg = div.get(g, {})
        methods = [k for k, v in m.items() if len(v) or dg.get(k)]
        ticks, tidy = [], []
        for x, method in enumerate(methods):
            vals = m[method]
            seeds |= set(vals)
            if nd := dg.get(method, 0):
                ax.plot([x + 0.2] * len(vals), list(vals.values()), ls="none", marker=".",
                        color="grey", ms=5)
                ticks.append(f"{method}: × {nd} of {nd + len(vals)} diverged")
                note_series(ax, method, n=len(vals), planned=nd + len(vals), marked=True, xs=[x])
                crossed = True
                continue
            ticks.append(method)
            mean, half, n = t_interval(vals.values())
            counts.append(n)
            tidy.append(pd.DataFrame({"method": method, "value": list(vals.values())}))
            ax.plot([x + 0.2] * n, list(vals.values()), ls="none", marker=".", color="black", ms=3)
            off_seeds = set((off or {}).get(g, {}).get(method, ()))
            bad = [v for sd, v in vals.items() if sd in off_seeds]
            if bad:
                ringed = True
                ax.plot([x + 0.2] * len(bad), bad, ls="none", marker="o", mfc="none", mec="tab:red",
                        ms=6, mew=1.2)
            note_series(ax, method, n=n, interval="t" if n > 1 else None, xs=[x], off=len(bad),
                        ringed=True)
        # the means and their 95 % t intervals: seaborn's point plot of the tidy frame, at each
        # method's slot
        if tidy:
            sns.pointplot(pd.concat(tidy), x="method", y="value", hue="method", order=methods,
                          ax=ax, legend=False,
                          palette={m: method_style(m)["color"] for m in methods},
                          estimator="mean",
                          errorbar=lambda v: (lambda m, h, n: (m - h, m + h))(*t_interval(v)),
                          capsize=0.15, linestyle="none", marker="o", markersize=7,
                          err_kws=dict(linewidth=1.5))
        ax.set_xlabel("")
        ax.set_ylabel("")
        ax.set_xticks(range(len(methods)), ticks, rotation=30, ha="right", fontsize=8)
        ax.set_xlim(-0.6, len(methods) - 0.4)
        ax.set_title(g, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel(ylabel)
    missing = [g for g in groups if g not in drawn]
    return seeds_note(seeds, "bars", counts, "point") \
        + (f"; not run yet: {', '.join(missing)}" if missing else "") \
        + (f"; {DIVERGED_NOTE}" if crossed else "") + ("\n" + OFF_SEEDS_NOTE if ringed else "")


OFF_NOTE = ("ringed: runs still rising over their last 20 % of rounds "
            "(off their plateau: their claims not testable)")
DIVERGED_NOTE = "× k of n diverged: no mean drawn (its finished seeds in grey)"
OFF_SEEDS_NOTE = "red rings: seeds still rising over their last 20 % of rounds (off their plateau)"


def _rounds_of(rounds: Any) -> list[int]:
    if rounds is None:
        return []
    return sorted({int(r) for r in (rounds if isinstance(rounds, Iterable) else [rounds])})


def sweep(ax: plt.Axes, points: Mapping[str, Mapping[float, Mapping[int, float]]], *, xlabel: str,
          ylabel: str = "final test accuracy (%)",
          off: Mapping[str, Mapping[float, int]] | None = None,
          rounds: Mapping[str, Mapping[float, Any]] | None = None,
          planned: int | Mapping[str, int] | None = None, logy: bool = False,
          label_rounds: bool = True) -> str:
    """Values along a swept setting (``{method: {x: {seed: value}}}``): the seeds' mean with 95 % t
    error bars (with ``logy``, on a log axis, the geometric mean and the t interval of the logs). A
    method with fewer than three settings run is drawn as dots without a connecting line (two points
    are not a trend); x ticks are the settings that were run; each legend entry gives its seeds.
    ``off`` (``{method: {x: count}}``): how many of a point's runs are off their plateau; such a
    point is ringed and labelled "k of n still rising" (outwards of the other methods: the last
    method's to the right), and the note says so. ``rounds`` (``{method: {x: rounds}}``): the rounds
    of a point's runs; where they differ, each point off the most common count is hollow and
    labelled with its rounds, and the note names the common one (``label_rounds=False``: the caller
    states them, e.g. in the x tick labels)."""
    seeds: set[int] = set()
    xs: set[float] = set()
    drawn: list[int] = []
    ringed = False
    rmap = {m: {x: _rounds_of(r) for x, r in by.items()} for m, by in (rounds or {}).items()}
    every = [tuple(r) for by in rmap.values() for r in by.values() if r]
    common = max(set(every), key=every.count) if len(set(every)) > 1 else None
    lowest = min((float(x) for by in points.values() for x, v in by.items() if v),
                 default=0.0) * 1.15
    for i, (method, by_x) in enumerate(points.items()):
        stats_ = {x: st for x, v in sorted(by_x.items())
                  if (st := _mean_interval(v.values(), logy))[3] > 0}
        for v in by_x.values():
            seeds |= set(v)
        if not stats_:
            continue
        xs |= set(stats_)
        ns = [n for *_, n in stats_.values()]
        drawn += ns
        style = method_style(method)
        if len(stats_) < 3:
            style["ls"] = "none"
        x = list(stats_)
        y = np.array([c for c, *_ in stats_.values()])
        err = np.array([[c - lo, hi - c] for c, lo, hi, _ in stats_.values()]).T
        p = _planned(planned, method, max(ns))
        label = _with_n(method, min(ns), p, ns)
        ax.errorbar(x, y, yerr=np.nan_to_num(err), capsize=3, label=label,
                    **{k: v for k, v in style.items() if k != "marker"},
                    marker=style.get("marker") or "o")
        last = i == len(points) - 1 or len(points) == 1
        n_off = 0
        for xv, (mean, _, _, n) in stats_.items():
            if k := (off or {}).get(method, {}).get(xv, 0):
                ringed, n_off = True, n_off + k
                ax.plot(xv, mean, marker="o", ms=14, mfc="none", mec="0.3", ls="none")
                # the leftmost setting's label goes right, inside the axes
                right = last or xv <= lowest
                ax.annotate(f"{k} of {n} still rising", (xv, mean),
                            xytext=(10 if right else -10, -3), textcoords="offset points",
                            fontsize=8, color="0.3", ha="left" if right else "right")
            r = rmap.get(method, {}).get(xv, [])
            if label_rounds and common is not None and r and tuple(r) != common:
                ax.plot(xv, mean, ls="none", marker=style.get("marker") or "o", ms=7, mfc="white",
                        mec=style["color"], zorder=3)  # hollow: not the common rounds
                ax.annotate(", ".join(f"{v} rounds" for v in r), (xv, mean), xytext=(0, 9),
                            textcoords="offset points", fontsize=8, ha="center",
                            color=style["color"])
        note_series(ax, label, n=min(ns), planned=p,
                    interval=("log-t" if logy else "t") if max(ns) > 1 else None,
                    marked=min(ns) < p, legend=True, xs=x, off=n_off, ringed=True,
                    rounds=[v for xv in x for v in rmap.get(method, {}).get(xv, [])])
    ax.set_xticks(sorted(xs))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    if xs:
        ax.legend(fontsize=8)
    what = "bars" + " (of the logs, about the geometric mean)" * logy
    return seeds_note(seeds, what, drawn, "point") \
        + (f"; {common[0]} rounds unless labelled (hollow)" if label_rounds and common is not None
           and len(common) == 1 else "") \
        + ("\n" + OFF_NOTE if ringed else "")


def offdiag_range(matrices: Iterable[np.ndarray]) -> tuple[float, float]:
    """(min, max) of the finite off-diagonal cells of the square ``matrices`` (every cell of
    others): the colour range of heatmaps that share a colourbar."""
    vals = []
    for m in matrices:
        m = np.asarray(m, dtype=float)
        square = m.ndim == 2 and m.shape[0] == m.shape[1]
        keep = ~np.eye(*m.shape, dtype=bool) if square else np.ones(m.shape, bool)
        vals.append(m[keep & np.isfinite(m)])
    v = np.concatenate(vals) if vals else np.array([])
    if not len(v):
        return 0.0, 1.0
    lo, hi = float(v.min()), float(v.max())
    return (lo, hi) if hi > lo else (lo - 0.005, hi + 0.005)


def similarity_heatmap(ax: plt.Axes, matrix: np.ndarray, labels: Sequence[str] | None = None,
                       title: str = "", annotate: bool = True,
                       vrange: tuple[float, float] | None = None, digits: int = 2) -> Any:
    """A CKA (or other similarity) matrix as a seaborn heatmap: a square matrix's diagonal (a client
    with itself) blank, the colours spanning ``vrange`` (default: this matrix's own off-diagonal
    range, :func:`offdiag_range`; the colourbar should say so), each cell's value written at 8 pt
    where there is room (at most 10 × 10 cells), none otherwise. Returns the mappable for a
    colourbar."""
    m = np.asarray(matrix, dtype=float).copy()
    if m.ndim == 2 and m.shape[0] == m.shape[1]:
        np.fill_diagonal(m, np.nan)
    lo, hi = vrange or offdiag_range([m])
    ticks = list(labels) if labels is not None else False
    sns.heatmap(m, ax=ax, mask=~np.isfinite(m), vmin=lo, vmax=hi, cmap="viridis", cbar=False,
                annot=annotate and max(m.shape) <= 10, fmt=f".{digits}f", annot_kws={"fontsize": 8},
                xticklabels=ticks, yticklabels=ticks, linewidths=0.3, linecolor="white")
    ax.set_facecolor("white")
    ax.tick_params(labelsize=8)
    if labels is not None:
        ax.set_xticklabels(ax.get_xticklabels(), rotation=45, ha="right")
        ax.set_yticklabels(ax.get_yticklabels(), rotation=0)
    ax.set_title(title, fontsize=9)
    return ax.collections[0]


def paper_panel(ax: plt.Axes, rows: Sequence[Sequence[Any]], columns: Sequence[str],
                title: str) -> None:
    """The papers' numbers as a small table in a panel of their own (``title`` names the paper's
    dataset, model and scale): never drawn on our axes, where a value from another setup would read
    as comparable."""
    ax.axis("off")
    table = ax.table(cellText=[[str(c) for c in r] for r in rows], colLabels=list(columns),
                     loc="upper center", cellLoc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    # each column as wide as its longest text
    table.auto_set_column_width(list(range(len(columns))))
    table.scale(1.0, 1.25)
    ax.set_title(title, fontsize=9)
