"""Notebook 05's figures (FedIntR Tables I–III) and the sentences that say what each shows, from the numbers.

    fig = mu_figure(t1, scale); describe_mu(t1)
    cv = t1.curves(records["table1"]); fig = curves_figure(cv, dataset, scale); describe_curves(cv)
    fig = table3_figure(t3, scale); describe_table3(t3)

Our runs are drawn with the shared kinds of :mod:`fedlib.plots`: means over seeds with 95 % t intervals (none for
one seed), a setting run at fewer than three values as dots. The paper's numbers come from 100 rounds on the full
data (Table III: CIFAR-10 and CIFAR-100), so they stand in a panel of their own (:func:`fedlib.plots.paper_panel`),
never on our axes.
"""

from __future__ import annotations

from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..grid import is_off, seed_values
from ..plans.fedintr import FEDINTR_BEST_MU, FEDINTR_METHODS
from ..plots import mean_curves, paper_panel, seeds_note, sweep, t_interval
from ..style import dataset_name, method_style
from .fedintr import PAPER_T1, PAPER_T2, Table1, Table3, round_ticks

__all__ = ["mu_points", "mu_figure", "describe_mu", "curves_phrase", "curves_figure", "describe_curves", "table3_figure",
           "describe_table3", "fmt"]

Curves = Mapping[str, Mapping[int, pd.Series]]


def fmt(values: Mapping[int, float] | list[float], sign: str = "") -> str:
    """``"85.56 ± 1.04 (5 seeds)"``: the mean and half-width of the 95 % t interval; one seed: no interval."""
    mean, half, n = t_interval(list(values.values()) if isinstance(values, Mapping) else values)
    if n == 0:
        return "pending"
    return f"{mean:{sign}.2f}" + (f" ± {half:.2f} ({n} seeds)" if n > 1 else " (1 seed)")


def _finite(values: Mapping[int, float]) -> dict[int, float]:
    return {s: v for s, v in values.items() if np.isfinite(v)}


def mu_points(t1: Table1) -> dict[str, dict[float, dict[int, float]]]:
    """``{method: {μ: {seed: median}}}`` of every regularized method, a (method, μ) with a diverged seed left out
    (as in :attr:`Table1.all`): the input of :func:`fedlib.plots.sweep`."""
    out: dict[str, dict[float, dict[int, float]]] = {}
    for m in [m for m in FEDINTR_METHODS if m != "FedAvg"]:
        d = t1.long[t1.long["method"] == m]
        pts = {float(mu): _finite(seed_values(g, "median (%)")) for mu, g in d.groupby(d["μ"].astype(float))
               if not g["diverged"].any()}
        if any(pts.values()):
            out[m] = {mu: v for mu, v in pts.items() if v}
    return out


def _paper_t1(ax: plt.Axes, dataset: str, what: str) -> None:
    paper = PAPER_T1[dataset]
    paper_panel(ax, [[m, "—" if mu is None else f"{mu:g}", f"{acc:.2f}"] for m, (acc, mu) in paper.items()],
                ["method", "best μ", "acc. (%)"], f"paper, Table I ({dataset_name(dataset)}):\n{what}")


def _not_run(t1: Table1, drawn: set[str]) -> str:
    left = [m for m in FEDINTR_METHODS if m in t1.left_out]
    pend = [m for m in FEDINTR_METHODS if m not in drawn and m not in left]
    return (f"; not run at this scale: {', '.join(left)}" if left else "") + \
        (f"; not run yet: {', '.join(pend)}" if pend else "")


def mu_figure(t1: Table1, scale: str) -> plt.Figure:
    """Tables I–II: each regularized method's median accuracy by μ (mean over seeds, 95 % t error bars, dots while a
    method has fewer than three μ), FedAvg (no μ) as a line with its 95 % t band; the paper's Table I and Table II
    for the dataset in panels of their own."""
    data, paper = dataset_name(t1.dataset), t1.paper is not None
    fig = plt.figure(figsize=(11.5 if paper else 8, 5), layout="constrained")
    gs = fig.add_gridspec(2, 2 if paper else 1, width_ratios=[2.6, 1] if paper else [1], height_ratios=[1.25, 1])
    ax = fig.add_subplot(gs[:, 0])
    fa = _finite(t1.per_seed("FedAvg"))
    mean, half, n = t_interval(fa.values())
    if n:
        st = method_style("FedAvg")
        rising = int((is_off(t1.long) & (t1.long["method"] == "FedAvg")).sum())
        ax.axhline(mean, color=st["color"], ls="-", lw=1.4,
                   label=f"FedAvg (no μ, n={n}" + (f"; {rising} still rising" if rising else "") + ")")
        if n > 1:
            ax.axhspan(mean - half, mean + half, color=st["color"], alpha=0.12, lw=0)
    points = mu_points(t1)
    bad = t1.long[is_off(t1.long)]
    _, _, ringed = sweep(ax, points, xlabel="μ", ylabel=f"median test accuracy, last {t1.last} rounds (%)",
                         off={m: {float(mu): int(((bad["method"] == m) & (bad["μ"].astype(float) == mu)).sum())
                                  for mu in p} for m, p in points.items()}).partition("\n")
    mus = sorted({mu for p in points.values() for mu in p})
    ax.set_xscale("log")
    ax.set_xticks(mus, [f"{mu:g}" for mu in mus])
    ax.minorticks_off()
    seeds = set(fa) | {s for p in points.values() for v in p.values() for s in v}
    counts = [len(v) for p in points.values() for v in p.values()] + ([n] if n else [])
    note = seeds_note(seeds, "bars", counts) + ("; FedAvg: line and band" if n > 1 else "")
    ax.set_title(f"FedIntR Tables I–II: ours by μ — {data}, scale={scale}\n{note}"
                 f"{_not_run(t1, set(points) | ({'FedAvg'} if n else set()))}" + (f"\n{ringed}" if ringed else ""),
                 fontsize=9)
    if paper:
        _paper_t1(fig.add_subplot(gs[0, 1]), t1.dataset, "each method at its best μ,\n100 rounds × 10 epochs")
        paper_panel(fig.add_subplot(gs[1, 1]), [[f"{mu:g}", f"{v[t1.dataset]:.2f}"] for mu, v in PAPER_T2.items()],
                    ["μ", "FedIntR (%)"], f"paper, Table II ({data}): FedIntR by μ")
    return fig


def describe_mu(t1: Table1) -> str:
    """What the μ figure shows: each method at its μ (:attr:`Table1.mu_phrase`; mean ± 95 % t), the span of the
    means against the intervals, or what is pending."""
    vals = {m: _finite(t1.per_seed(m)) for m in FEDINTR_METHODS if m not in t1.left_out}
    done = {m: v for m, v in vals.items() if v}
    if not done:
        return "Table I's runs are pending: no figure yet."
    label = {m: m if m == "FedAvg" else f"{m} (μ={float(t1.best.loc[m, 'μ']):g})" for m in done}
    stats_ = {m: t_interval(v.values()) for m, v in done.items()}
    hi, lo = max(stats_, key=lambda m: stats_[m][0]), min(stats_, key=lambda m: stats_[m][0])
    span = stats_[hi][0] - stats_[lo][0]
    halves = [h for _, h, _ in stats_.values() if np.isfinite(h)]
    out = (f"Each method at {t1.mu_phrase} (median of the last {t1.last} rounds, mean ± 95 % t interval): "
           + ", ".join(f"{label[m]} {fmt(v)}" for m, v in done.items()) + ". "
           f"The means span {span:.2f} points ({label[lo]} to {label[hi]})")
    if halves:
        out += f", while the intervals' half-widths are {min(halves):.2f}–{max(halves):.2f} points"
        out += ": these seeds do not separate the methods." if span < min(halves) else "."
    else:
        out += "."
    pend = [m for m in vals if m not in done]
    return out + (f" Pending: {', '.join(pend)}." if pend else "")


def curves_phrase(curves: Curves, dataset: str) -> str:
    """How the μ of ``curves``' labels (``"FedIntR (μ=10)"``) reads: "the paper's μ" when each is the one Table I
    states for ``dataset``, else "the μ in its label" (the curves alone do not say whether a μ search ran)."""
    paper = FEDINTR_BEST_MU.get(dataset, {})
    mus = {k.split(" (")[0]: k.partition("μ=")[2].rstrip(")") for k in curves if "μ=" in k}
    ok = bool(mus) and all(m in paper and float(mu) == float(paper[m]) for m, mu in mus.items())
    return "the paper's μ" if ok else "the μ in its label"


def curves_figure(curves: Curves, dataset: str, scale: str) -> plt.Figure:
    """Table I's runs per round (each method at :func:`curves_phrase`), the mean over seeds with a 95 % t band, and a zoom on the last third of the
    rounds (where the statistic is taken); the paper's Table I values for the dataset in a panel of their own."""
    paper = dataset in PAPER_T1
    fig = plt.figure(figsize=(13 if paper else 11, 4.6), layout="constrained")
    gs = fig.add_gridspec(1, 3 if paper else 2, width_ratios=[3, 2.2, 1.5] if paper else [3, 2.2])
    ax, zoom = fig.add_subplot(gs[0]), fig.add_subplot(gs[1])
    note = mean_curves(ax, curves, percent=False, xlabel="communication round")
    rounds = max((int(s.index.max()) for c in curves.values() for s in c.values() if len(s)), default=1)
    round_ticks(ax, rounds)
    if ax.get_legend_handles_labels()[0]:  # no run stored yet: nothing to name (and no warning on stderr)
        ax.legend(fontsize=8, loc="lower right")
    start = max(1, round(2 * rounds / 3))
    mean_curves(zoom, {k: {s: c[c.index >= start] for s, c in v.items()} for k, v in curves.items()},
                percent=False, xlabel="communication round")
    if zoom.get_legend():
        zoom.get_legend().remove()
    zoom.set_title(f"zoom: rounds {start}–{rounds}", fontsize=9)
    if paper:
        _paper_t1(fig.add_subplot(gs[2]), dataset, "median of the last 10\nof 100 rounds")
    fig.suptitle(f"FedIntR Table I: each method at {curves_phrase(curves, dataset)}, per round — {dataset_name(dataset)}, "
                 f"scale={scale}\n{note}", fontsize=10)
    return fig


def describe_curves(curves: Curves) -> str:
    """What the curves show: each method's mean at the last round and the largest gap between two methods' means
    at any round."""
    means = {k: pd.concat(v, axis=1).mean(axis=1) for k, v in curves.items() if v}
    if not means:
        return "Table I's runs are pending: no curves yet."
    frame = pd.DataFrame(means).dropna()
    last = frame.index.max()
    n = sorted({len(v) for v in curves.values() if v})
    seeds = f"{n[0]} seeds" if len(n) == 1 else f"{n[0]}–{n[-1]} seeds"
    end = frame.loc[last].sort_values(ascending=False)
    gap = frame.max(axis=1) - frame.min(axis=1)
    r = gap.idxmax()
    return (f"At round {last} the means over {seeds} read " + ", ".join(f"{k} {v:.2f} %" for k, v in end.items())
            + f" ({end.iloc[0] - end.iloc[-1]:.2f} points apart). The largest gap between two methods' means at any "
            f"round is {gap.max():.2f} points, at round {r} ({frame.loc[r].idxmax()} {frame.loc[r].max():.2f} % vs "
            f"{frame.loc[r].idxmin()} {frame.loc[r].min():.2f} %).")


def table3_figure(t3: Table3, scale: str) -> plt.Figure:
    """Table III: FedIntR's gain over FedAvg by β (mean over the seeds both ran, 95 % t error bars); the paper's
    CIFAR-10 and CIFAR-100 gains in a panel of their own."""
    gains = t3.gains()
    mu = "Table I's μ" if t3.t1.mu_phrase == "the paper's μ" else t3.t1.mu_phrase  # the paper tunes μ per β
    fig = plt.figure(figsize=(10, 4.4), layout="constrained")
    gs = fig.add_gridspec(1, 2, width_ratios=[2.4, 1])
    ax = fig.add_subplot(gs[0])
    ax.axhline(0, color="0.5", lw=0.8)
    note = sweep(ax, {"FedIntR − FedAvg": gains}, xlabel="Dirichlet β (right: more heterogeneous)",
                 ylabel=f"FedIntR − FedAvg, each at {mu} (points)")
    xs = sorted(b for b, v in gains.items() if v)
    ax.set_xscale("log")
    ax.set_xticks(xs, [f"{x:g}" for x in xs])
    ax.minorticks_off()
    ax.invert_xaxis()
    pend = [f"β={b:g}" for b, v in gains.items() if not v]
    ax.set_title(f"FedIntR Table III: gain over FedAvg by β — {dataset_name(t3.t1.dataset)}, scale={scale}\n{note}"
                 + (f"; not run yet: {', '.join(pend)}" if pend else ""), fontsize=9)
    g10, g100 = t3.paper_gain("cifar10"), t3.paper_gain("cifar100")
    paper_panel(fig.add_subplot(gs[1]), [[f"{b:g}", f"{g10[b]:+.2f}", f"{g100[b]:+.2f}"] for b in g10],
                ["β", "CIFAR-10", "CIFAR-100"], "paper, Table III: FedIntR − FedAvg\n(points, 100 rounds)")
    return fig


def describe_table3(t3: Table3) -> str:
    """What the Table III figure shows: FedIntR's gain over FedAvg at each β (mean ± 95 % t) and the paper's."""
    gains = t3.gains()
    ref = dataset_name(t3.reference)
    paper = ", ".join(f"β={b:g} {v:+.2f}" for b, v in t3.paper_gain().items())
    if not any(gains.values()):
        return f"Table III's runs are pending: no gains yet (the paper, {ref}: {paper})."
    return ("FedIntR − FedAvg (points, mean ± 95 % t interval over the seeds both ran): "
            + ", ".join(f"β={b:g} {fmt(v, '+')}" for b, v in gains.items())
            + f"; the paper ({ref}, 100 rounds): {paper}.")
