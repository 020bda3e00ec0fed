"""FedCKA's ablations (notebook 04): the M-layer ablation with the centralized bound (arXiv Fig. 5 /
Appl. Sci. Fig. 6 left), Table 3 (the similarity inside ℓ_cka) and Table 4 (training cost per
round) — each a tidy table and a figure with the papers' numbers. The between-client similarity
per layer (its variance and mean level) is in
:mod:`~fedlib.companion.papers.fedcka.client_similarity`.

The papers' accuracies are CIFAR-10 after 100 rounds and their durations a Titan V's; ours are the
dataset, scale and device the caller names (Tables 3–4's timings: synthetic data of the papers'
shapes, :mod:`fedlib.companion.timing`).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from fedlib.companion.papers.fedcka.claims import FEDCKA_T3, FEDCKA_T4
from fedlib.companion.papers.fedcka.client_similarity import (  # noqa: F401
    REGULARIZED, describe_levels, describe_variance, layer_variance, similarity_levels)
from fedlib.companion.grid import (DIVERGED, Diverged, Runs, fmt_interval, is_off, runs_frame,
                                   seed_summary, summary_cell)
from fedlib.companion.plots import paper_panel, sweep, t_interval
from fedlib.companion.verdicts import PENDING
from fedlib.companion.report import compare
from fedlib.companion.results import Pending, Record
from fedlib.companion.style import dataset_name, method_style
from fedlib.companion.timing import repeat_times

__all__ = ["PAPER_M", "M_RANGE", "m_points", "m_layers", "describe_m_layers", "metrics_frame",
           "table3", "describe_table3", "ratio_bars", "table4", "describe_table4"]

# arXiv Fig. 5 / Appl. Sci. Fig. 6 (left), CIFAR-10: only these are printed (text); the other M are
# a figure
PAPER_M = {"FedCKA, M = 2": 67.86, "FedAvg": 64.37, "centralized": 70.0}
M_RANGE = range(1, 8)  # the papers sweep the first M = 1..7 layers of the simple CNN


def _score(r: pd.Series) -> float:
    """A summary row's accuracy for the comparisons: NaN pending, -inf diverged."""
    return np.nan if r["pending"] else -np.inf if r["diverged"] else r["mean"]


def _accs(runs: Runs) -> dict[str, dict[int, float]]:
    """``{run label: {seed: final accuracy (%)}}`` of the stored runs that did not diverge (label:
    the run id's method)."""
    out: dict[str, dict[int, float]] = {}
    for rid, r in runs.items():
        by = out.setdefault(rid.method, {})
        if isinstance(r, Record) and np.isfinite(acc := 100 * r.final("test_acc")):
            by[int(r.cfg.seed)] = float(acc)
    return out


def m_points(m_runs: Runs) -> dict[float, dict[int, float]]:
    """``{M: {seed: final accuracy (%)}}`` of the stored M-layer runs (an M with none stored left
    out)."""
    cols = ["M", "seed", "acc", "pending", "diverged"]
    df = runs_frame(m_runs) if m_runs else pd.DataFrame(columns=cols)
    out: dict[float, dict[int, float]] = {}
    for m, s, a, p, d in df[cols].itertuples(index=False):
        if not p and not d:
            out.setdefault(float(m), {})[int(s)] = float(a)
    return dict(sorted(out.items()))


def m_layers(m_runs: Runs, bound_runs: Runs, dataset: str, mu: float
             ) -> tuple[pd.DataFrame, pd.DataFrame, plt.Figure]:
    """The M-layer ablation: a table of ours (FedCKA per M, FedAvg, centralized), the papers'
    printed numbers beside ours, and a figure: ours per M run (the seeds' mean with the 95 % t
    interval; dots without a line while fewer than three M are stored; the M not run yet named in
    the title) with FedAvg and the centralized model as lines with their 95 % t bands, and the
    papers' printed CIFAR-10 numbers in a panel of their own."""
    mf = runs_frame(m_runs)
    mdf = seed_summary(mf, ["M"])
    bdf = seed_summary(runs_frame(bound_runs), ["method"]).set_index("method")
    rows = ({f"FedCKA, M = {int(r['M'])}": r for _, r in mdf.iterrows()}
            | {n: bdf.loc[n] for n in bdf.index})
    table = pd.DataFrame({"final test accuracy (%)": [summary_cell(r) for r in rows.values()]},
                         index=pd.Index(list(rows), name="run"))
    ours = {k: _score(r) for k, r in rows.items() if k in PAPER_M}
    versus = compare(PAPER_M, {k: DIVERGED if v == -np.inf else v for k, v in ours.items()},
                     not_run="not run at this scale")
    fig = plt.figure(figsize=(10, 4.2), layout="constrained")
    gs = fig.add_gridspec(1, 2, width_ratios=(2.2, 1))
    ax = fig.add_subplot(gs[0])
    points = m_points(m_runs)
    label = f"FedCKA (μ={mu:g})"
    rising_m = mf[is_off(mf)].groupby("M").size().items()
    off = {float(m): int(n) for m, n in rising_m} if points else {}
    note, _, ringed = sweep(ax, {label: points} if points else {},
                            xlabel="M: layers regularized, from the input",
                            off={label: off}).partition("\n")
    bounds = _accs(bound_runs)
    bf = runs_frame(bound_runs) if bound_runs else pd.DataFrame(columns=["method", "off"])
    for name, label in (("FedAvg", "FedAvg (M = 0)"),
                        ("centralized", "centralized (same rounds × epochs)")):
        mean, half, n = t_interval(bounds.get(name, {}).values())
        if n:
            st = method_style("Centralized" if name == "centralized" else name)
            rising = int((is_off(bf) & (bf["method"].str.lower() == name.lower())).sum())
            ax.axhline(mean, color=st["color"], ls=st["ls"], lw=1.2,
                       label=f"{label}, n={n}" + (f", {rising} still rising" if rising else ""))
            if n > 1:
                ax.axhspan(mean - half, mean + half, color=st["color"], alpha=0.12, lw=0)
    planned = sorted({int(m) for m in mdf["M"]})
    missing = [m for m in planned if float(m) not in points]
    ax.set_xlim(min(M_RANGE) - 0.5, max(M_RANGE) + 0.5)
    ax.set_ylabel("final test accuracy (%)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="lower right")
    rounds = sorted({int(r) for f in (mf, bf) if "rounds" in f
                     for r in f.loc[~f["pending"], "rounds"]})
    ax.set_title(f"ours — {dataset_name(dataset)}, α = 5" + "".join(f", {r} rounds" for r in rounds)
                 + (" every run" if len(rounds) == 1 else "")
                 + f"\n{note}; lines: means, bands: 95 % t interval"
                 + (f"\nnot run yet: M = {_ranges(missing)}" if missing else "")
                 + (f"\n{ringed}" if ringed else ""),
                 fontsize=9)
    paper_panel(fig.add_subplot(gs[1]),
                [[k, f"{v:g}"] for k, v in PAPER_M.items()] + [["other M", "figure only"]],
                ["run", "accuracy (%)"], "paper — CIFAR-10, 100 rounds\n(printed values only)")
    fig.suptitle("FedCKA arXiv Fig. 5 / Appl. Sci. Fig. 6 (left): how many layers to regularize",
                 fontsize=10)
    return table, versus, fig


def _ranges(ms: Sequence[int]) -> str:
    """``[1, 3, 4, 5, 6, 7]`` → ``"1, 3-7"``."""
    out: list[list[int]] = []
    for m in ms:
        if out and m == out[-1][-1] + 1:
            out[-1].append(m)
        else:
            out.append([m])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in out)


def describe_m_layers(m_runs: Runs, bound_runs: Runs) -> str:
    """What the M-layer figure shows: FedCKA's accuracy per M stored, FedAvg's and the centralized
    model's (mean ± 95 % t interval over seeds), and the M not run yet."""
    points, bounds = m_points(m_runs), _accs(bound_runs)
    planned = sorted({int(r.cfg.strategy_kw.get("M", 2)) for r in m_runs.values()})
    missing = [m for m in planned if float(m) not in points]
    parts = [f"M = {m:g}: {fmt_interval(v)}" for m, v in points.items()]
    parts += [f"{k} {fmt_interval(v)}" for k, v in bounds.items() if v]
    if not parts:
        return "The M-layer ablation is pending: no run stored yet."
    return ("Final test accuracy (%), mean ± 95 % t interval over seeds — FedCKA "
            + "; ".join(parts) + "."
            + (f" Not run yet: M = {_ranges(missing)}." if missing else "")
            + (" With fewer than three M stored the figure draws dots, not a trend."
               if len(points) < 3 else ""))


def metrics_frame(metric_runs: Runs) -> pd.DataFrame:
    """Table 3's runs (:func:`fedlib.companion.grid.runs_frame`) with a ``metric`` column: the
    similarity inside ℓ_cka."""
    df = runs_frame(metric_runs)
    return df.assign(metric=[rid.method for rid in metric_runs])


T3_COLUMNS = ("paper acc (%)", "ours acc (%)", "paper s / round", "paper × FedAvg",
              "ours × FedAvg (runs)", "ours × FedAvg (timed)")


def table3(metric_runs: Runs, timed: pd.DataFrame | None, timing_planned: bool) -> pd.DataFrame:
    """Table 3 beside ours, one row per metric of the paper (index ``metric``, columns
    :data:`T3_COLUMNS`), then one per metric run that the paper does not have (its paper cells "—"):
    accuracy, and the duration per round as a ratio to FedAvg's — from the runs' own records (a cell
    says why there is no ratio: not run, pending, diverged) and from the interleaved timing
    (``timed``; None: pending)."""
    t3 = (seed_summary(metrics_frame(metric_runs), ["metric"]).set_index("metric")
          if metric_runs else pd.DataFrame())
    fedavg = t3.loc["None (FedAvg)"] if "None (FedAvg)" in t3.index else None
    base = fedavg["s / round"] if fedavg is not None and not fedavg["pending"] else np.nan
    rows = []
    extra = {m: ("—", "—") for m in t3.index if m not in FEDCKA_T3}
    for m, (p_acc, p_s) in {**FEDCKA_T3, **extra}.items():
        r = t3.loc[m] if m in t3.index else None
        ours = "not run at this scale" if r is None else summary_cell(r)
        runs = ours if r is None or r["pending"] or r["diverged"] else \
            PENDING if not np.isfinite(base) else round(float(r["s / round"] / base), 2)
        timed_ = PENDING if timing_planned and timed is None else \
            round(float(timed.loc[m, "× FedAvg"]), 2) \
            if timed is not None and m in timed.index else "not timed"
        ratio = "—" if m in extra else round(p_s / FEDCKA_T3["None (FedAvg)"][1], 2)
        rows.append([m, p_acc, ours, p_s, ratio, runs, timed_])
    return pd.DataFrame(rows, columns=["metric", *T3_COLUMNS]).set_index("metric")


def describe_table3(metric_runs: Runs) -> str:
    """What Table 3's runs show: each metric's final accuracy (mean ± 95 % t interval over seeds)
    and its paired difference to FedAvg, the metrics whose runs diverged (in which round, how many
    seeds), and what is pending."""
    if not metric_runs:
        return "Table 3's metrics are not run at this scale."
    accs = _accs(metric_runs)
    base = accs.get("None (FedAvg)", {})
    parts, broke, pend = [], [], []
    for m in dict.fromkeys(rid.method for rid in metric_runs):
        runs = [r for rid, r in metric_runs.items() if rid.method == m]
        div = [r for r in runs if isinstance(r, Diverged)]
        if div:
            rounds = sorted({r.failed_round for r in div})
            broke.append(f"{m} in {len(div)} of {len(runs)} seeds (round{'s' * (len(rounds) > 1)} "
                         f"{', '.join(map(str, rounds))}: a non-finite loss)")
        elif any(isinstance(r, Pending) for r in runs):
            pend.append(m)
        elif v := accs.get(m):
            d = [v[k] - base[k] for k in v if k in base]
            against = d and m != "None (FedAvg)"
            parts.append(f"{m} {fmt_interval(v)}"
                         + (f" ({fmt_interval(d, '+')} against FedAvg)" if against else ""))
    out = ("Final test accuracy (%), mean ± 95 % t interval over seeds — " + "; ".join(parts)
           + ".") if parts else ""
    if broke:
        out += " Diverged (the claims on them are not testable): " + "; ".join(broke) + "."
    if any(b.startswith("Frobenius norm in") for b in broke):
        out += (" The squared Frobenius norm summed over a batch's activation maps reaches "
                "thousands; an independent loop of this setup (benchmarks/fedcka_reference.py "
                "--sim frobenius) diverges in the same round, so it is the metric as printed, not "
                "our code. The per-entry form (not the paper's) shows what the metric does when it "
                "trains.")
    if pend:
        out += f" Pending: {', '.join(pend)}."
    return out.strip()


def _ratios(costs: pd.DataFrame, methods: Sequence[str]) -> pd.DataFrame:
    """Per interleaved repeat (row) each method's seconds over FedAvg's in the same repeat."""
    t = repeat_times(costs)
    return t[list(methods)].div(t["FedAvg"], axis=0)


def ratio_bars(ax: plt.Axes, ratios: pd.DataFrame) -> str:
    """Each method's time per round over FedAvg's (``ratios``: repeat × method) as a bar at the
    median of the interleaved repeats, a whisker from their minimum to their maximum (the spread
    :func:`fedlib.companion.verdicts.decide_ratio` judges) and each repeat a dot, in the method's
    colour. Timing repeats are not seeds, so this is not
    :func:`fedlib.companion.plots.group_panels`; returns the note for the title."""
    for i, m in enumerate(ratios.columns):
        v = ratios[m].to_numpy(dtype=float)
        med = float(np.median(v))
        ax.bar(i, med, 0.6, color=method_style(m)["color"], alpha=0.85)
        ax.errorbar(i, med, yerr=[[med - v.min()], [v.max() - med]], color="black", capsize=3, lw=1)
        ax.plot([i] * len(v), v, ls="none", marker=".", color="black", ms=3)
    ax.set_xticks(range(len(ratios.columns)), list(ratios.columns), fontsize=8)
    ax.axhline(1, color="0.4", lw=0.8)
    ax.grid(axis="y", alpha=0.3)
    return (f"bars: median of {len(ratios)} interleaved repeats, whiskers: their min–max, "
            "dots: each repeat")


def table4(costs: Mapping[str, pd.DataFrame | None], setups: Mapping[str, Mapping[str, Any]],
           device: str) -> tuple[pd.DataFrame, plt.Figure | None]:
    """Table 4 beside ours: seconds per round and the ratio to FedAvg per model and method (ours:
    synthetic data of the papers' shapes on ``device``); a figure when both models were timed: our
    ratios per model (:func:`ratio_bars`) and the paper's (Titan V; simple CNN on CIFAR-10,
    ResNet-50 on Tiny ImageNet) in a panel of their own."""
    models = (("simple CNN", "cnn"), ("ResNet-50", "r50"))
    rows = []
    for model, key in models:
        c = costs.get(key)
        for m, p in FEDCKA_T4[model].items():
            def ours(col: str, nd: int) -> Any:
                return "not timed at this scale" if key not in costs else PENDING if c is None \
                    else round(c.loc[m, col], nd)
            rows.append({"model": model, "method": m, "paper s / round": p,
                         "paper × FedAvg": round(p / FEDCKA_T4[model]["FedAvg"], 2),
                         "ours s / round": ours("s / round", 3),
                         "ours × FedAvg": ours("× FedAvg", 2)})
    table = pd.DataFrame(rows).set_index(["model", "method"])
    if any(costs.get(k) is None for _, k in models):
        return table, None
    fig = plt.figure(figsize=(11, 4.2), layout="constrained")
    gs = fig.add_gridspec(1, 3, width_ratios=(1, 1, 0.9))
    note = ""
    for j, (model, key) in enumerate(models):
        ax = fig.add_subplot(gs[j])
        note = ratio_bars(ax, _ratios(costs[key], list(FEDCKA_T4[model])))
        ax.set_ylabel("time per round / FedAvg's" if j == 0 else "")
        ax.set_title(f"ours: {setups[key]['title']}\nsynthetic data, {device}", fontsize=8)
    cnn, r50 = FEDCKA_T4["simple CNN"], FEDCKA_T4["ResNet-50"]
    paper_panel(fig.add_subplot(gs[2]),
                [[m, f"{cnn[m] / cnn['FedAvg']:.2f}", f"{r50[m] / r50['FedAvg']:.2f}"]
                 for m in cnn],
                ["method", "7 layers", "ResNet-50"],
                "paper, Table 4 (Titan V, real data):\ntime per round / FedAvg's\n"
                "(7 layers: CIFAR-10; ResNet-50: Tiny ImageNet)")
    fig.suptitle("FedCKA Table 4: training cost per round relative to FedAvg — ours on synthetic "
                 "data of the papers' shapes (ResNet-50: "
                 f"{setups['r50']['title'].split(', ')[-1]}, the paper: Tiny ImageNet)\n{note}",
                 fontsize=9)
    return table, fig


def describe_table4(costs: Mapping[str, pd.DataFrame | None],
                    setups: Mapping[str, Mapping[str, Any]]) -> str:
    """What Table 4's figure shows: per model timed, each method's median ratio to FedAvg with the
    min–max over the repeats, beside the paper's ratio; or what is pending or not timed."""
    parts = []
    for model, key in (("simple CNN", "cnn"), ("ResNet-50", "r50")):
        if key not in costs:
            parts.append(f"{model}: not timed at this scale")
            continue
        if costs[key] is None:
            parts.append(f"{model}: timing pending")
            continue
        r = _ratios(costs[key], list(FEDCKA_T4[model]))
        p = FEDCKA_T4[model]
        parts.append(f"{model} ({setups[key]['title'].split(', ')[-1]}): " + ", ".join(
            f"{m} {r[m].median():.2f} [{r[m].min():.2f}, {r[m].max():.2f}] (paper "
            f"{p[m] / p['FedAvg']:.2f})"
            for m in r.columns if m != "FedAvg"))
    return ("Time per round / FedAvg's, median [min, max] over the interleaved repeats — "
            + "; ".join(parts) + ".")
