"""Notebook 05's figures (FedIntR Tables I–III) and the sentences that say what each shows, from the
numbers.

    fig = mu_figure(t1, scale); describe_mu(t1)
    cv = t1.curves(records["table1"]); fig = curves_figure(cv, dataset, scale); describe_curves(cv)
    fig = table3_figure(t3, scale); describe_beta(t3)

Our runs are drawn with the shared kinds of :mod:`fedlib.companion.plots`: means over seeds with 95
% t intervals (none for one seed), a setting run at fewer than three values as dots. The paper's
numbers come from 100 rounds on the full data (Table III: CIFAR-10 and CIFAR-100), so they stand in
a panel of their own (:func:`fedlib.companion.plots.paper_panel`), never on our axes.
"""

from __future__ import annotations

from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from fedlib.companion.grid import fmt_interval, is_off, minus_fedavg, seed_values
from fedlib.companion.papers.fedintr.plans import FEDINTR_BEST_MU, FEDINTR_METHODS
from fedlib.companion.plots import group_panels, mean_curves, paper_panel, sweep, t_interval
from fedlib.companion.style import dataset_name
from fedlib.companion.papers.fedintr.tables import (FEDINTR_T1, FEDINTR_T2, Table1, Table3,
                                                    round_ticks)

__all__ = [
    "mu_points", "mu_figure", "describe_mu", "curves_phrase", "curves_figure", "describe_curves",
    "table3_figure", "describe_beta"
]

Curves = Mapping[str, Mapping[int, pd.Series]]


def _finite(values: Mapping[int, float]) -> dict[int, float]:
    return {s: v for s, v in values.items() if np.isfinite(v)}


def mu_points(t1: Table1) -> dict[str, dict[float, dict[int, float]]]:
    """``{method: {μ: {seed: median}}}`` of every regularized method, a (method, μ) with a diverged
    seed left out (as in :attr:`Table1.all`): the input of :func:`fedlib.companion.plots.sweep`."""
    out: dict[str, dict[float, dict[int, float]]] = {}
    for m in [m for m in FEDINTR_METHODS if m != "FedAvg"]:
        d = t1.long[t1.long["method"] == m]
        pts = {
            float(mu): _finite(seed_values(g, "median (%)"))
            for mu, g in d.groupby(d["μ"].astype(float)) if not g["diverged"].any()
        }
        if any(pts.values()):
            out[m] = {mu: v for mu, v in pts.items() if v}
    return out


def _paper_t1(ax: plt.Axes, dataset: str, what: str) -> None:
    paper = FEDINTR_T1[dataset]
    paper_panel(ax, [[m, "—" if mu is None else f"{mu:g}", f"{acc:.2f}"]
                     for m, (acc, mu) in paper.items()], ["method", "its μ", "acc. (%)"],
                f"paper, Table I ({dataset_name(dataset)}):\n{what}")


def _not_drawn(t1: Table1, drawn: set[str]) -> str:
    left = [m for m in FEDINTR_METHODS if m in t1.left_out]
    pend = [m for m in FEDINTR_METHODS if m not in drawn and m not in left]
    return (f"; not run at this scale: {', '.join(left)}" if left else "") + \
        (f"; not run yet: {', '.join(pend)}" if pend else "")


def mu_figure(t1: Table1, scale: str) -> plt.Figure:
    """Tables I–II on a method axis: each method at each μ run (FedAvg: no μ) as its seeds' mean
    with the 95 % t interval and each seed a dot (:func:`fedlib.companion.plots.group_panels`; seeds
    off their plateau ringed); a μ axis is only for a μ sweep, and the methods' μ are different
    hyperparameters. The paper's Table I beside it, and its Table II (FedIntR by μ) marked "not run
    at this scale" while FedIntR has fewer than two μ of ours."""
    data, paper = dataset_name(t1.dataset), t1.paper is not None
    fig = plt.figure(figsize=(11.5 if paper else 8, 5.2), layout="constrained")
    gs = fig.add_gridspec(2, 2 if paper else 1, width_ratios=[2.6, 1] if paper else [1],
                          height_ratios=[1.25, 1])
    sub = fig.add_subfigure(gs[:, 0])
    points = mu_points(t1)
    values = {"FedAvg (no μ)": fa} if (fa := _finite(t1.per_seed("FedAvg"))) else {}
    values |= {f"{m} (μ={mu:g})": v for m, p in points.items() for mu, v in p.items()}
    bad = t1.long[is_off(t1.long)]
    by_mu = bad.assign(μ=bad["μ"].astype(float)).groupby(["method", "μ"], dropna=False)
    off = {f"{m} (μ={float(mu):g})" if m != "FedAvg" else "FedAvg (no μ)": list(g["seed"])
           for (m, mu), g in by_mu}
    rounds = (sorted(set(t1.long.loc[t1.long["median (%)"].notna(), "rounds"]))
              if "rounds" in t1.long else [])
    key = (f"each method at its μ, {', '.join(f'{r} rounds' for r in rounds)}" if rounds
           else "each method at its μ")
    note, _, ringed = group_panels(sub, {key: values},
                                   ylabel=f"median test accuracy, last {t1.last} rounds (%)",
                                   off={key: off}).partition("\n")
    intr_mus = len(points.get("FedIntR", {}))
    drawn = set(points) | ({"FedAvg"} if fa else set())
    sub.suptitle(f"FedIntR Tables I–II: ours, each method at the μ the paper gives for {data} "
                 f"(one μ each: no μ search at this scale) — scale={scale}\n{note}"
                 f"{_not_drawn(t1, drawn)}" + (f"\n{ringed}" if ringed else ""), fontsize=9)
    if paper:
        _paper_t1(fig.add_subplot(gs[0, 1]), t1.dataset,
                  "each method at the μ of its search,\n100 rounds × 10 epochs")
        paper_panel(fig.add_subplot(gs[1, 1]),
                    [[f"{mu:g}", f"{v[t1.dataset]:.2f}"] for mu, v in FEDINTR_T2.items()],
                    ["μ", "FedIntR (%)"],
                    f"paper, Table II ({data}): FedIntR by μ"
                    + ("\nours: not run at this scale (one μ)" if intr_mus < 2 else ""))
    return fig


def describe_mu(t1: Table1) -> str:
    """What the μ figure shows: each method at its μ (:attr:`Table1.mu_phrase`; mean ± 95 % t), the
    span of the means against the intervals, or what is pending."""
    vals = {m: _finite(t1.per_seed(m)) for m in FEDINTR_METHODS if m not in t1.left_out}
    done = {m: v for m, v in vals.items() if v}
    if not done:
        return "Table I's runs are pending: no figure yet."
    label = {m: m if m == "FedAvg" else f"{m} (μ={float(t1.best.loc[m, 'μ']):g})" for m in done}
    stats_ = {m: t_interval(v.values()) for m, v in done.items()}
    hi, lo = max(stats_, key=lambda m: stats_[m][0]), min(stats_, key=lambda m: stats_[m][0])
    span = stats_[hi][0] - stats_[lo][0]
    halves = [h for _, h, _ in stats_.values() if np.isfinite(h)]
    out = (f"Each method at {t1.mu_phrase} (median of the last {t1.last} rounds, mean ± 95 % t "
           "interval): " + ", ".join(f"{label[m]} {fmt_interval(v)}" for m, v in done.items())
           + f". The means span {span:.2f} points ({label[lo]} to {label[hi]})")
    if halves:
        out += f", while the intervals' half-widths are {min(halves):.2f}–{max(halves):.2f} points"
        out += ": these seeds do not separate the methods." if span < min(halves) else "."
    else:
        out += "."
    pend = [m for m in vals if m not in done]
    return out + (f" Pending: {', '.join(pend)}." if pend else "")


def curves_phrase(curves: Curves, dataset: str) -> str:
    """How the μ of ``curves``' labels (``"FedIntR (μ=10)"``) reads: "the paper's μ" when each is
    the one Table I states for ``dataset``, else "the μ in its label" (the curves alone do not say
    whether a μ search ran)."""
    paper = FEDINTR_BEST_MU.get(dataset, {})
    mus = {k.split(" (")[0]: k.partition("μ=")[2].rstrip(")") for k in curves if "μ=" in k}
    ok = bool(mus) and all(m in paper and float(mu) == float(paper[m]) for m, mu in mus.items())
    return "the paper's μ" if ok else "the μ in its label"


def curves_figure(curves: Curves, dataset: str, scale: str) -> plt.Figure:
    """Table I's runs per round (each method at :func:`curves_phrase`), the mean over seeds with a
    95 % t band, and beside them each method minus FedAvg, paired by seed (mean and 95 % t band of
    the paired differences) over the last third of the rounds, where the statistic is taken and the
    methods lie within a point or two; the paper's Table I values for the dataset in a panel of
    their own."""
    paper = dataset in FEDINTR_T1
    fig = plt.figure(figsize=(14 if paper else 12, 4.8), layout="constrained")
    gs = fig.add_gridspec(1, 3 if paper else 2, width_ratios=[3, 2.6, 1.5] if paper else [3, 2.6])
    ax, diff = fig.add_subplot(gs[0]), fig.add_subplot(gs[1])
    note = mean_curves(ax, curves, percent=False, xlabel="communication round")
    rounds = max((int(s.index.max()) for c in curves.values() for s in c.values() if len(s)),
                 default=1)
    round_ticks(ax, rounds)
    # no run stored yet: nothing to name (and no warning on stderr)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="lower right")
    start = max(1, round(2 * rounds / 3))
    gaps = {k: {s: c[c.index >= start] for s, c in v.items()}
            for k, v in minus_fedavg(curves).items()}
    mean_curves(diff, gaps, percent=False, xlabel="communication round",
                ylabel="minus FedAvg, paired (points)")
    diff.axhline(0, color="0.4", lw=0.9)
    for band in diff.collections:
        band.set_alpha(0.1)
    if diff.get_legend():
        diff.legend(fontsize=8, loc="lower left")
    diff.set_title(f"each method − FedAvg, paired by seed: rounds {start}–{rounds}", fontsize=9)
    if paper:
        _paper_t1(fig.add_subplot(gs[2]), dataset, "median of the last 10\nof 100 rounds")
    fig.suptitle(f"FedIntR Table I: each method at {curves_phrase(curves, dataset)}, per round — "
                 f"{dataset_name(dataset)}, scale={scale}\n{note}", fontsize=10)
    return fig


def describe_curves(curves: Curves) -> str:
    """What the curves show: each method's mean at the last round and the largest gap between two
    methods' means at any round."""
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
    return (f"At round {last} the means over {seeds} read " + ", ".join(f"{k} {v:.2f} %"
                                                                        for k, v in end.items()) +
            f" ({end.iloc[0] - end.iloc[-1]:.2f} points apart). The largest gap between two "
            "methods' means at any "
            f"round is {gap.max():.2f} points, at round {r} ({frame.loc[r].idxmax()} "
            f"{frame.loc[r].max():.2f} % vs {frame.loc[r].idxmin()} {frame.loc[r].min():.2f} %).")


def table3_figure(t3: Table3, scale: str) -> plt.Figure:
    """Table III: FedIntR's gain over FedAvg by β (mean over the seeds both ran, 95 % t error bars);
    the paper's CIFAR-10 and CIFAR-100 gains in a panel of their own."""
    gains = t3.gains()
    # the paper tunes μ per β
    mu = "Table I's μ" if t3.t1.mu_phrase == "the paper's μ" else t3.t1.mu_phrase
    fig = plt.figure(figsize=(10, 4.4), layout="constrained")
    gs = fig.add_gridspec(1, 2, width_ratios=[2.4, 1])
    ax = fig.add_subplot(gs[0])
    ax.axhline(0, color="0.5", lw=0.8)
    long = t3.long
    rounds = ({b: sorted(set(g.loc[g["median (%)"].notna(), "rounds"]))
               for b, g in long.groupby("β")} if "rounds" in long else {})
    note = sweep(ax, {"FedIntR − FedAvg": gains}, xlabel="Dirichlet β (right: more heterogeneous)",
                 ylabel=f"FedIntR − FedAvg, each at {mu} (points)",
                 rounds={"FedIntR − FedAvg": {b: rounds.get(b, []) for b in gains}})
    xs = sorted(b for b, v in gains.items() if v)
    ax.set_xscale("log")
    ax.set_xticks(xs, [f"{x:g}" for x in xs])
    ax.minorticks_off()
    ax.invert_xaxis()
    pend = [f"β={b:g}" for b, v in gains.items() if not v]
    ax.set_title(f"FedIntR Table III: gain over FedAvg by β — {dataset_name(t3.t1.dataset)}, "
                 f"scale={scale}\n{note}"
                 + (f"; not run yet: {', '.join(pend)}" if pend else ""), fontsize=9)
    g10, g100 = t3.paper_gain("cifar10"), t3.paper_gain("cifar100")
    paper_panel(fig.add_subplot(gs[1]),
                [[f"{b:g}", f"{g10[b]:+.2f}", f"{g100[b]:+.2f}"] for b in g10],
                ["β", "CIFAR-10", "CIFAR-100"],
                "paper, Table III: FedIntR − FedAvg\n(points, 100 rounds)")
    return fig


def describe_beta(t3: Table3) -> str:
    """What the Table III figure shows: FedIntR's gain over FedAvg at each β (mean ± 95 % t) and the
    paper's."""
    gains = t3.gains()
    ref = dataset_name(t3.reference)
    paper = ", ".join(f"β={b:g} {v:+.2f}" for b, v in t3.paper_gain().items())
    if not any(gains.values()):
        return f"Table III's runs are pending: no gains yet (the paper, {ref}: {paper})."
    return ("FedIntR − FedAvg (points, mean ± 95 % t interval over the seeds both ran): "
            + ", ".join(f"β={b:g} {fmt_interval(v, '+')}" for b, v in gains.items())
            + f"; the paper ({ref}, 100 rounds): {paper}.")
