"""FedCKA Appl. Sci. Fig. 5 (notebook 03): accuracy per communication round (with each method minus
FedAvg, paired by seed, where the methods lie within a point or two) and the local-epoch sweep,
every E at the sweep's common rounds as the comparison and the runs trained longer hollow, labelled
with their rounds.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from fedlib.companion.papers.fedcka.claims import FIG5_ROUNDS
from fedlib.companion.figcheck import note_series
from fedlib.companion.grid import (Runs, fmt_interval, is_off, minus_fedavg, runs_frame,
                                   seed_summary, summary_cell)
from fedlib.companion.common import FedCKARunId
from fedlib.companion.plots import mean_curves, sweep, t_interval
from fedlib.companion.results import Record
from fedlib.companion.style import dataset_name, method_style

__all__ = ["seed_curves", "rounds_figure", "mean_rounds", "describe_rounds",
           "epochs_points", "epochs_at", "epoch_rounds", "epochs_artifact", "describe_epochs"]


def _cells(df: pd.DataFrame) -> list[str]:
    return [summary_cell(r) for _, r in df.iterrows()]


def seed_curves(records: Runs, names: Mapping[str, str], seeds: Sequence[int], alpha: float = 5.0
                ) -> dict[int, dict[str, pd.Series]]:
    """``{seed: {method: accuracy per round (%)}}`` for the runs ``FedCKARunId(names[method], seed,
    alpha=alpha)``, only for seeds where every one of them is stored (the input of Fig. 5's 40-round
    verdict)."""
    out = {}
    for s in seeds:
        pair = {m: records.get(FedCKARunId(n, s, alpha=alpha)) for m, n in names.items()}
        if all(isinstance(r, Record) for r in pair.values()):
            out[s] = {m: 100 * r.metric("test_acc") for m, r in pair.items()}
    return out


def rounds_figure(curves: Mapping[str, Mapping[int, pd.Series]], dataset: str,
                  alpha: float = 5.0) -> plt.Figure:
    """Appl. Sci. Fig. 5 (left): test accuracy per communication round, one line per method (its own
    colour, dash and marker): the mean over the seeds with the 95 % t band (``curves``:
    :meth:`Table2.curves`); beside it each method minus FedAvg, paired by seed, over the second half
    of the rounds, where the methods lie within a point or two on an axis of tens."""
    fig, (ax, diff) = plt.subplots(1, 2, figsize=(12.5, 4.6), layout="constrained",
                                   width_ratios=[1.2, 1])
    note = mean_curves(ax, curves, percent=False, xlabel="communication round")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    last = max((int(s.index.max()) for c in curves.values() for s in c.values() if len(s)),
               default=0)
    short = (f"; the paper's crossover at round 40 of its {FIG5_ROUNDS} needs its schedule ({last} "
             "rounds here)"
             if 0 < last != FIG5_ROUNDS else "")
    start = max(1, last // 2)
    gaps = {k: {s: c[c.index >= start] for s, c in v.items()}
            for k, v in minus_fedavg(curves).items()}
    mean_curves(diff, gaps, percent=False, xlabel="communication round",
                ylabel="minus FedAvg, paired (points)")
    diff.axhline(0, color="0.4", lw=0.9)
    diff.xaxis.set_major_locator(MaxNLocator(integer=True))
    for band in diff.collections:
        band.set_alpha(0.1)
    diff.set_title(f"each method − FedAvg, paired by seed: rounds {start}–{last}", fontsize=9)
    fig.suptitle(f"FedCKA Appl. Sci. Fig. 5 (left): accuracy per round, α = {alpha:g} — "
                 f"{dataset_name(dataset)}\n{note}{short}", fontsize=9)
    return fig


def mean_rounds(curves: Mapping[str, Mapping[int, pd.Series]]) -> pd.DataFrame:
    """Per round, each method's mean accuracy (%) over its seeds (the line of
    :func:`rounds_figure`)."""
    return pd.DataFrame({m: pd.concat(v, axis=1).mean(axis=1)
                         for m, v in curves.items() if v}).round(2)


def describe_rounds(curves: Mapping[str, Mapping[int, pd.Series]]) -> str:
    """What Fig. 5 (left) shows: each method's mean accuracy at a fifth of the rounds and at the
    last round (95 % t interval over seeds), and which leads at each."""
    if not curves:
        return "Fig. 5 (left) is pending: no run at α = 5 is stored yet."
    last = min(int(s.index.max()) for c in curves.values() for s in c.values())
    early = max(1, last // 5)

    def at(r: int) -> str:
        vals = {m: [float(s.loc[r]) for s in c.values() if r in s.index] for m, c in curves.items()}
        ranked = sorted(vals, key=lambda m: -np.mean(vals[m]))
        return f"round {r}: " + ", ".join(f"{m} {fmt_interval(vals[m])}" for m in ranked)

    return f"Test accuracy (%), mean ± 95 % t interval over seeds — {at(early)}; {at(last)}."


def epochs_points(records: Runs,
                  df: pd.DataFrame | None = None) -> dict[str, dict[float, dict[int, float]]]:
    """``{method (μ): {E: {seed: final accuracy (%)}}}`` of the stored runs of the local-epoch sweep
    that did not diverge (``df``: their frame, by default :func:`runs_frame`; :func:`epochs_at`
    reads them at other rounds): the input of :func:`fedlib.companion.plots.sweep`."""
    out: dict[str, dict[float, dict[int, float]]] = {}
    df = df if df is not None else runs_frame(records) if records else pd.DataFrame()
    for _, r in df.iterrows():
        label = r["method"] + ("" if np.isnan(r["mu"]) else f" (μ={r['mu']:g})")
        by_e = out.setdefault(label, {})
        if not r["pending"] and not r["diverged"]:
            by_e.setdefault(float(r["E"]), {})[int(r["seed"])] = float(r["acc"])
    return out


def epochs_at(records: Runs, rounds: int) -> pd.DataFrame:
    """:func:`runs_frame` of the local-epoch sweep's runs with each finished run's ``acc`` read at
    round ``rounds`` (the sweep's common rounds, as the paper runs every E; a run trained longer, to
    its plateau, is read before its end)."""
    if not records:
        return pd.DataFrame()
    df = runs_frame(records)
    acc = [
        np.nan if not isinstance(r, Record) or p or d else 100 *
        float(r.metric("test_acc").loc[:rounds].iloc[-1])
        for r, p, d in zip(records.values(), df["pending"], df["diverged"])
    ]
    return df.assign(acc=acc)


def epoch_rounds(records: Runs) -> dict[int, int]:
    """``{E: rounds}`` of the sweep's runs."""
    return {r.cfg.local_epochs: r.cfg.rounds for r in records.values()}


def _early(records: Runs,
           rounds: int | None) -> tuple[dict[int, int], dict[str, dict[float, dict[int, float]]]]:
    """The E trained longer than ``rounds`` (``{E: rounds}``) and their :func:`epochs_points` read
    at ``rounds``."""
    if rounds is None:
        return {}, {}
    longer = {e: r for e, r in sorted(epoch_rounds(records).items()) if r > rounds}
    at = {rid: r for rid, r in records.items() if r.cfg.rounds > rounds}
    return longer, ({m: p
                     for m, p in epochs_points(at, epochs_at(at, rounds)).items()
                     if p} if at else {})


def _pending_epochs(records: Runs) -> list[int]:
    """The E of the sweep with no stored run yet (of any method)."""
    done = {int(e) for p in epochs_points(records).values() for e in p}
    return sorted({int(e) for e in (runs_frame(records)["E"] if records else [])} - done)


def epochs_artifact(records: Runs, dataset: str,
                    rounds: int) -> tuple[pd.DataFrame, plt.Figure | None]:
    """Appl. Sci. Fig. 5 (right): final accuracy per method and local epochs E (a table; and a
    figure when a run is stored: each E the seeds' mean with the 95 % t interval, dots without a
    line while fewer than three E are run, the methods offset slightly along the log E axis, the E
    still pending named in the title). ``rounds``: the sweep's common rounds, at which every E is
    drawn solid (the paper's comparison: the same rounds for every E); an E trained longer (to its
    plateau) is also drawn at its own last round as hollow markers labelled with its rounds."""
    if not records:
        return pd.DataFrame(), None
    ep, (longer, hollow) = seed_summary(runs_frame(records),
                                        ["method", "E"]), _early(records, rounds)
    table = ep.assign(cell=_cells(ep)).pivot(index="method", columns="E", values="cell") \
        .rename(columns=lambda e: f"E = {e}" + (f" ({longer[e]} rounds)" if e in longer else ""))
    full = {m: p for m, p in epochs_points(records).items() if p}
    if not full:
        return table, None
    # every E at the sweep's common rounds
    solid = {m: {**p, **hollow.get(m, {})} for m, p in full.items()}
    long = {m: {e: v for e, v in p.items() if int(e) in longer} for m, p in full.items()}
    fig, ax = plt.subplots(figsize=(7.6, 5), layout="constrained")
    k = len(solid)
    df = runs_frame(records)
    bad = df[is_off(df)].assign(label=lambda d: [m + ("" if np.isnan(mu) else f" (μ={mu:g})")
                                                 for m, mu in zip(d["method"], d["mu"])])
    n_off = lambda m, e: int(((bad["label"] == m) & (bad["E"] == e)).sum())  # noqa: E731
    shift = {m: 2 ** (0.05 * (i - (k - 1) / 2)) for i, m in enumerate(solid)}
    note, _, ringed = sweep(
        ax, {m: {e * shift[m]: v
                 for e, v in p.items()}
             for m, p in solid.items()}, xlabel="local epochs E", off={
                 m: {e * shift[m]: n_off(m, e)
                     for e in p if int(e) not in longer}
                 for m, p in solid.items()
             }, rounds={m: {e * shift[m]: [rounds]
                            for e in p}
                        for m, p in solid.items()}).partition("\n")
    for m, p in long.items():
        for e, v in sorted(p.items()):
            mean, half, n = t_interval(v.values())
            label = f"{m}, E = {e:g} at {longer[int(e)]} rounds (n={n})"
            ax.errorbar([e * shift[m]], [mean], yerr=[half if np.isfinite(half) else 0], capsize=3,
                        color=method_style(m)["color"], marker="o", mfc="white", ls="none",
                        label=label)
            if bad_n := n_off(m, e):
                ax.plot(e * shift[m], mean, marker="o", ms=14, mfc="none", mec="0.3", ls="none")
            note_series(ax, label, n=n, interval="t" if n > 1 else None, legend=True, xs=[e],
                        rounds=[longer[int(e)]], off=bad_n, ringed=True)
    if longer:
        ax.legend(fontsize=8)
    es = sorted({e for p in solid.values() for e in p})
    ax.set_xscale("log", base=2)
    ax.set_xticks(es, [f"{e:g}" for e in es])
    ax.set_xlim(min(es) / 1.6, max(es) * 1.6)
    ax.minorticks_off()
    pend = _pending_epochs(records)
    more = ", ".join(f"E = {e}: {r} rounds" for e, r in longer.items())
    ax.set_title(
        "FedCKA Appl. Sci. Fig. 5 (right): local epochs, α = 5 — "
        f"{dataset_name(dataset)}\nsolid: every E at {rounds} rounds (the paper's "
        "comparison: the same rounds for every E)" +
        (f"\nhollow: the same runs trained longer, each to its plateau ({more})" if more else "") +
        f"\n{note}" + (f"; not run yet: E = {', '.join(map(str, pend))}" if pend else "") +
        (f"\n{ringed}" if ringed else ""), fontsize=9)
    return table, fig


def describe_epochs(records: Runs, rounds: int | None = None) -> str:
    """What Fig. 5 (right) shows: each method's accuracy at each E run (mean ± 95 % t interval over
    seeds) and the E still pending; with ``rounds`` (the sweep's common rounds), every E at that
    round first (the comparison), then the E trained longer at their own rounds."""
    points = {m: p for m, p in epochs_points(records).items() if p}
    pend = _pending_epochs(records)
    tail = f" Not run yet: E = {', '.join(map(str, pend))}." if pend else ""
    if not points:
        return "The local-epoch sweep is pending." + tail
    longer, early = _early(records, rounds)
    line = lambda pts, es: "; ".join(f"E = {e:g}: " + ", ".join(f"{m} {fmt_interval(p[e])}"
                                                                for m, p in pts.items()  # noqa
                                                                if e in p) for e in es)
    if not longer:
        es = sorted({e for p in points.values() for e in p})
        return "Final test accuracy (%), mean ± 95 % t interval over seeds — " + line(
            points, es) + "." + tail
    solid = {m: {**p, **early.get(m, {})} for m, p in points.items()}
    out = (f"Test accuracy (%) at round {rounds} for every E, as the paper runs them (the solid "
           "points), mean ± 95 % t "
           f"interval over seeds — " + line(solid, sorted({e
                                                           for p in solid.values()
                                                           for e in p})) + ".")
    long = {m: {e: v for e, v in p.items() if int(e) in longer} for m, p in points.items()}
    out += (
        f" Trained longer, each to its plateau (hollow; not the paper's comparison): " +
        "; ".join(f"E = {e} at {r} rounds: " + ", ".join(f"{m} {fmt_interval(p[float(e)])}"
                                                         for m, p in long.items() if float(e) in p)
                  for e, r in longer.items()) + ".")
    return out + tail
