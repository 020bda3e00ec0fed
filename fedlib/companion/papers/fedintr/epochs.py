"""FedIntR Fig. 5 (local epochs, notebook 06): each run's values as a frame, and the figure and its
description.

:func:`values_frame` reads each run's method, N, E, seed and rounds from its id and config (Table
IV's frame is built from it too). Fig. 5 compares every E at the same rounds, as the paper runs
them: where E = 1 is trained longer (quick: to its plateau), the figure's solid points are those
runs at the default E's rounds, and the same runs at their own last round are hollow, labelled with
their rounds.
"""

from __future__ import annotations

import textwrap
from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from fedlib.data import chance
from fedlib.companion.figcheck import note_series
from fedlib.companion.grid import Diverged, Runs, fmt_interval, is_off
from fedlib.companion.plots import paper_panel, sweep, t_interval
from fedlib.companion.results import Pending, Record
from fedlib.companion.style import dataset_name, method_style
from fedlib.companion.verdicts import off_plateau
from fedlib.companion.papers.fedintr.tables import FEDINTR_T1

__all__ = [
    "accuracy_at", "values_frame", "fig5_frame", "fig5_equal", "fig5_points", "fig5_off",
    "fig5_solid", "fig5_figure", "describe_fig5"
]


def accuracy_at(record: Record, T: int, window: int = 10) -> float:
    """Table IV's statistic: the median test accuracy (%) of the evaluated rounds T − window + 1 …
    T."""
    s = record.metric("test_acc")
    s = s[(s.index > T - window) & (s.index <= T)]
    return 100 * float(s.median()) if len(s) else np.nan


def values_frame(runs: Runs, values: Mapping[str, Callable[[Record], float]]) -> pd.DataFrame:
    """One row per run and value: ``name, method, N, E, seed, rounds, pending, diverged, off, what,
    acc`` (``method``: the id's label, ``"FedIntR (μ=10)"``; ``off``: why the run is off its plateau
    or None; ``acc``: ``values[what]`` of the record, NaN when pending or diverged)."""
    rows = []
    for rid, r in runs.items():
        p, dv = isinstance(r, Pending), isinstance(r, Diverged)
        for what, f in values.items():
            rounds = int((getattr(r, "config", None) or {}).get("rounds", 0) or 0)
            rows.append({"name": str(rid), "method": rid.label, "N": rid.N, "E": rid.E,
                         "seed": rid.seed, "rounds": rounds, "pending": p, "diverged": dv,
                         "off": off_plateau(r) if isinstance(r, Record) else None, "what": what,
                         "acc": np.nan if p or dv else f(r), "chance": chance(r.cfg.dataset)})
    return pd.DataFrame(rows, columns=["name", "method", "N", "E", "seed", "rounds", "pending",
                                       "diverged", "off", "what", "acc", "chance"])


def fig5_frame(runs: Runs, last: int, at: int | None = None) -> pd.DataFrame:
    """:func:`values_frame` of Fig. 5's runs: ``acc`` is the median test accuracy (%) of the
    ``last`` rounds, or with ``at`` of the ``last`` rounds up to round ``at`` (the same rounds for
    every E, as the paper runs them; NaN for a run shorter than ``at``)."""
    if at is None:
        return values_frame(runs, {"acc": lambda r: 100 * r.final("test_acc", last=last)})
    return values_frame(
        runs, {"acc": lambda r: accuracy_at(r, at, last) if r.config["rounds"] >= at else np.nan})


def fig5_equal(runs: Runs, last: int, rounds: Mapping[int, int],
               default_e: int) -> pd.DataFrame | None:
    """:func:`fig5_frame` of the Fig. 5 runs longer than the default E's (``rounds``: ``{E:
    rounds}``) at the default E's last round, as the paper runs every E (None when every E has the
    same rounds)."""
    longer = {e for e, r in rounds.items() if r > rounds[default_e]}
    if not longer:
        return None
    return fig5_frame({rid: r for rid, r in runs.items() if rid.E in longer}, last,
                      at=rounds[default_e])


def fig5_points(df: pd.DataFrame) -> dict[str, dict[float, dict[int, float]]]:
    """``{method: {E: {seed: accuracy}}}`` of Fig. 5's finished runs, an (E, method) with a diverged
    seed left out: the input of :func:`fedlib.companion.plots.sweep`."""
    out: dict[str, dict[float, dict[int, float]]] = {m: {} for m in dict.fromkeys(df["method"])}
    for (m, e), g in df.groupby(["method", "E"], sort=False):
        v = {int(s): float(a) for s, a in zip(g["seed"], g["acc"]) if np.isfinite(a)}
        if v and not g["diverged"].any():
            out[m][float(e)] = v
    return out


def fig5_off(df: pd.DataFrame) -> dict[tuple[str, float], list[int]]:
    """``{(method, E): seeds}`` of Fig. 5's finished runs that are off their plateau (``df``'s
    ``off`` column)."""
    out: dict[tuple[str, float], list[int]] = {}
    for r in df[is_off(df)].itertuples():
        out.setdefault((r.method, float(r.E)), []).append(int(r.seed))
    return out


def _rounds(df: pd.DataFrame) -> dict[str, dict[float, list[int]]]:
    """``{method: {E: rounds}}`` of ``df``'s runs."""
    return {m: {float(e): sorted(set(map(int, g["rounds"]))) for e, g in d.groupby("E")}
            for m, d in df.groupby("method", sort=False)}


Points = dict[str, dict[float, dict[int, float]]]


def fig5_solid(df: pd.DataFrame, equal: pd.DataFrame | None = None,
               equal_rounds: int | None = None
               ) -> tuple[Points, dict[str, dict[float, list[int]]], Points]:
    """The comparison Fig. 5 draws: ``(points, rounds, longer)``. ``points`` (``{method: {E: {seed:
    accuracy}}}``) has every E at the same rounds where ``equal`` gives the longer runs at the
    default E's rounds (the paper runs every E for the same rounds); ``rounds`` the rounds of each
    point; ``longer`` those longer runs at their own last rounds (hollow in the figure)."""
    points, rounds = fig5_points(df), _rounds(df)
    same = fig5_points(equal) if equal is not None else {}
    longer: dict[str, dict[float, dict[int, float]]] = {}
    for m, p in same.items():
        for e, v in p.items():
            if e in points.get(m, {}):
                longer.setdefault(m, {})[e] = points[m][e]
            points.setdefault(m, {})[e] = v
            rounds.setdefault(m, {})[e] = [int(equal_rounds)] if equal_rounds else []
    return points, rounds, longer


def fig5_figure(df: pd.DataFrame, dataset: str, scale: str, last: int,
                equal: pd.DataFrame | None = None, equal_rounds: int | None = None,
                left_out: str = "") -> plt.Figure:
    """Fig. 5: accuracy by local epochs E per method, every E at the same rounds as the paper runs
    them (solid: mean over seeds, 95 % t error bars; dots while fewer than three E are run; the
    methods offset slightly along E; a point whose runs are off their plateau is ringed). ``equal``
    (:func:`fig5_frame` ``at=equal_rounds`` of the runs with more rounds than the default E's) gives
    those E at the default E's rounds; the same runs at their own last round are hollow, labelled
    with their rounds. The paper's Table I values for the dataset (its E = 10, 100 rounds) stand in
    a panel of their own: its Fig. 5 (CIFAR-10) gives no numbers. ``left_out``: the E this scale
    does not run, and why (in the title)."""
    paper, data = FEDINTR_T1.get(dataset), dataset_name(dataset)
    fig = plt.figure(figsize=(10.5 if paper else 7.5, 5), layout="constrained")
    gs = fig.add_gridspec(1, 2 if paper else 1, width_ratios=[2.4, 1] if paper else [1])
    ax = fig.add_subplot(gs[0])
    points, rounds, longer = fig5_solid(df, equal, equal_rounds)
    off = fig5_off(df)
    k = len(points)
    shift = {m: 2 ** (0.07 * (i - (k - 1) / 2)) for i, m in enumerate(points)}
    note = sweep(ax, {m: {e * shift[m]: v for e, v in p.items()} for m, p in points.items()},
                 xlabel="local epochs E", ylabel=f"median test accuracy, last {last} rounds (%)",
                 off={m: {e * shift[m]: len(v) for (mm, e), v in off.items()
                          if mm == m and e not in longer.get(m, {})}
                      for m in points},
                 rounds={m: {e * shift[m]: r for e, r in p.items()} for m, p in rounds.items()})
    for m, p in longer.items():
        for e, v in p.items():
            mean, half, n = t_interval(v.values())
            r = ", ".join(f"{x} rounds" for x in _rounds(df)[m][e])
            label = f"{m}, E = {e:g} at {r} (n={n})"
            ax.errorbar([e * shift.get(m, 1.0)], [mean], yerr=[half if np.isfinite(half) else 0],
                        capsize=3, color=method_style(m)["color"], marker="o", mfc="white",
                        ls="none", label=label)
            bad = len(off.get((m, e), []))
            if bad:
                ax.plot(e * shift.get(m, 1.0), mean, marker="o", ms=14, mfc="none", mec="0.3",
                        ls="none")
            note_series(ax, label, n=n, interval="t" if n > 1 else None, legend=True, xs=[e],
                        rounds=_rounds(df)[m][e], off=bad, ringed=True)
    if longer:
        ax.legend(fontsize=8, loc="lower right")
    es = sorted({e for p in points.values() for e in p})
    ax.set_xscale("log", base=2)
    if es:
        ax.set_xticks(es, [f"{e:g}" for e in es])
        ax.set_xlim(min(es) / 1.6, max(es) * 1.6)
    ax.minorticks_off()
    pend = [f"E = {e:g}" for e in sorted(set(df["E"])) if e not in es]
    note, _, ringed = note.partition("\n")
    common = sorted({r for p in rounds.values() for v in p.values() for r in v})
    ax.set_title(f"FedIntR Fig. 5: local epochs — {data}, scale={scale}\n{note}"
                 + ("; methods offset slightly along E" if k > 1 else "")
                 + (f"\nsolid: every E at {common[0]} rounds (the paper's comparison: the same "
                    "rounds for every E)"
                    if len(common) == 1 else "")
                 + ("\nhollow: the same E = 1 runs trained longer, to their plateau (not the "
                    "paper's comparison)"
                    if longer else "")
                 + (f"\nnot run yet: {', '.join(pend)}" if pend else "")
                 + (f"\nnot run at this scale: {textwrap.fill(left_out, 100)}" if left_out else "")
                 + (f"\n{ringed}" if ringed else ""),
                 fontsize=9)
    if paper:
        rows = [[m, f"{paper[m.split(' (')[0]][0]:.2f}"] for m in points
                if m.split(" (")[0] in paper]
        paper_panel(fig.add_subplot(gs[1]), rows, ["method", "E = 10 (%)"],
                    f"paper, Table I ({data}):\nE = 10, 100 rounds\n(its Fig. 5, on "
                    "CIFAR-10,\ngives no numbers)")
    return fig


def describe_fig5(df: pd.DataFrame, default_e: int, equal: pd.DataFrame | None = None,
                  equal_rounds: int | None = None) -> str:
    """What Fig. 5 shows: each method's accuracy at each E at the same rounds (mean ± 95 % t), the
    paired differences E = 1 − the default E and FedIntR − FedAvg at each E, then the longer runs at
    their own rounds (hollow), and the E still pending."""
    points, rounds, longer = fig5_solid(df, equal, equal_rounds)
    es = sorted({e for p in points.values() for e in p})
    pend = sorted(e for e in set(df["E"]) if e not in es)
    tail = f" Pending: E = {', '.join(f'{e:g}' for e in pend)}." if pend else ""
    if not es:
        return ("Fig. 5's runs are pending: no figure yet." if not pend
                else f"Fig. 5's runs are pending.{tail}")
    same = sorted({r for p in rounds.values() for v in p.values() for r in v})
    at = f" at {same[0]} rounds for every E" if len(same) == 1 else ""
    parts = [f"E = {e:g}: "
             + ", ".join(f"{m} {fmt_interval(p[e])}" for m, p in points.items() if e in p)
             for e in es]
    diffs = []
    for m, p in points.items():
        if 1.0 in p and float(default_e) in p and default_e != 1:
            d = [p[1.0][s] - p[float(default_e)][s] for s in p[1.0] if s in p[float(default_e)]]
            diffs.append(f"{m}: E = 1 − E = {default_e} {fmt_interval(d, '+')}")
    intr, avg = next((m for m in points if m.startswith("FedIntR")), None), points.get("FedAvg")
    for e in es if intr and avg else []:
        a, b = points[intr].get(e, {}), avg.get(e, {})
        if a and b:
            diffs.append(f"{intr} − FedAvg at E = {e:g}: "
                         f"{fmt_interval([a[s] - b[s] for s in a if s in b], '+')}")
    out = (f"Median accuracy (%){at}, mean ± 95 % t interval over seeds (the solid points) — "
           + "; ".join(parts) + ".")
    if diffs:
        out += " Paired over seeds (points): " + "; ".join(diffs) + "."
    hollow = []
    for m, p in longer.items():
        ref = points.get(m, {}).get(float(default_e), {})
        hollow += [f"{m} at E = {e:g}, {', '.join(map(str, _rounds(df)[m][e]))} rounds: "
                   f"{fmt_interval(v)} (− E = {default_e} at its rounds: "
                   f"{fmt_interval([v[s] - ref[s] for s in v if s in ref], '+')})"
                   for e, v in p.items()]
    if hollow:
        out += (" Trained longer, to their plateau (hollow; more rounds than the other E, so not "
                "the paper's comparison): " + "; ".join(hollow) + ".")
    if off := fig5_off(df):
        out += (" Off their plateau (still rising over their last 20 % of rounds; the claims on "
                "them are not testable): "
                + "; ".join(f"{m} at E = {e:g}, seed{'s' * (len(v) > 1)} {', '.join(map(str, v))}"
                            for (m, e), v in off.items()) + ".")
    return out + tail
