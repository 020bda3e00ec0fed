"""Notebook 06: FedIntR Table IV / Fig. 4 (many clients) and Fig. 5 (local epochs) as tables and figures; their
verdicts are in :mod:`fedlib.artifacts.fedintr_scaling_claims`.

Runs come as ``{FedIntRRunId: Record | Pending | Diverged}`` (:func:`fedlib.grid.fetch_runs` over
:func:`fedlib.plans.fedintr_scaling_plan`); :func:`values_frame` reads each run's method, N, E and seed from its id.
The figures draw our runs with the shared kinds of :mod:`fedlib.plots` (means over seeds, 95 % t intervals) and the
paper's numbers only in a panel of their own: Table IV's CIFAR-10 accuracies beside Fig. 4, Table I's accuracy of
each method for the dataset (its default E = 10, 100 rounds) beside Fig. 5; :func:`describe_fig4` and
:func:`describe_fig5` say what each figure shows, from the numbers.
"""

from __future__ import annotations

import textwrap
from typing import Any, Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..data import chance
from ..grid import Diverged, Run, cell, is_off
from ..plans import FedIntRRunId
from ..results import Pending, Record
from ..plots import mean_curves, paper_panel, sweep, t_interval
from ..style import dataset_name, method_style
from ..verdicts import off_plateau
from .fedintr import PAPER_T1, round_ticks
from .fedintr_figures import fmt

__all__ = ["PAPER_T4", "PAPER_T4_AT", "accuracy_at", "values_frame", "table4_frame", "curves", "mean_table",
           "paper_table4", "series_style", "fig4_figure", "describe_fig4", "fig5_frame", "fig5_equal", "fig5_figure",
           "fig5_points", "fig5_off", "describe_fig5", "setup_table", "T4_SOURCE", "FIG5_SOURCE", "INTR"]

T4_SOURCE = "FedIntR §IV-D, Table IV"
FIG5_SOURCE = "FedIntR §IV-E, Fig. 5 (CIFAR-10)"

PAPER_T4 = {  # FedIntR Table IV, CIFAR-10: N → {method: accuracy at each reported T}
    50: {"FedAvg": (49.41, 57.79, 65.26, 64.62), "FedCKA (μ=1)": (45.28, 56.76, 64.90, 63.96),
         "FedCKA (μ=10)": (44.45, 53.83, 58.69, 59.08), "FedProx (μ=0.01)": (46.17, 58.12, 65.44, 65.75),
         "MOON (μ=1)": (48.25, 57.98, 64.24, 64.23), "MOON (μ=10)": (42.71, 55.83, 64.52, 65.18),
         "FedIntR (μ=1)": (47.02, 58.01, 63.89, 63.75), "FedIntR (μ=10)": (46.63, 56.39, 65.48, 66.94)},
    100: {"FedAvg": (37.98, 50.69, 61.00, 63.64, 64.90), "FedCKA (μ=1)": (36.81, 47.10, 60.43, 64.30, 64.41),
          "FedCKA (μ=10)": (36.68, 46.85, 56.51, 59.91, 60.49), "FedProx (μ=0.01)": (37.79, 50.37, 61.08, 64.48, 64.75),
          "MOON (μ=1)": (38.08, 47.98, 60.08, 63.66, 64.85), "MOON (μ=10)": (34.34, 46.81, 61.68, 63.97, 65.12),
          "FedIntR (μ=1)": (35.87, 48.15, 60.59, 63.46, 64.26), "FedIntR (μ=10)": (32.13, 49.76, 61.31, 65.55, 66.57)},
}
PAPER_T4_AT = {50: (100, 200, 500, 800), 100: (100, 200, 500, 800, 1000)}
INTR = "FedIntR (μ=10)"
Runs = Mapping[FedIntRRunId, Run]


def accuracy_at(record: Record, T: int, window: int = 10) -> float:
    """Table IV's statistic: the median test accuracy (%) of the evaluated rounds T − window + 1 … T."""
    s = record.metric("test_acc")
    s = s[(s.index > T - window) & (s.index <= T)]
    return 100 * float(s.median()) if len(s) else np.nan


def values_frame(runs: Runs, values: Mapping[str, Callable[[Record], float]]) -> pd.DataFrame:
    """One row per run and value: ``name, method, N, E, seed, pending, diverged, off, what, acc`` (``method``: the
    id's label, ``"FedIntR (μ=10)"``; ``off``: why the run is off its plateau or None; ``acc``: ``values[what]`` of
    the record, NaN when pending or diverged)."""
    rows = []
    for rid, r in runs.items():
        p, dv = isinstance(r, Pending), isinstance(r, Diverged)
        for what, f in values.items():
            rows.append({"name": str(rid), "method": rid.label, "N": rid.N, "E": rid.E, "seed": rid.seed,
                         "pending": p, "diverged": dv, "off": off_plateau(r) if isinstance(r, Record) else None, "what": what,
                         "acc": np.nan if p or dv else f(r), "chance": chance(r.cfg.dataset)})
    return pd.DataFrame(rows, columns=["name", "method", "N", "E", "seed", "pending", "diverged", "off", "what",
                                       "acc", "chance"])


def table4_frame(runs: Runs, at: Mapping[int, tuple[int, ...]]) -> pd.DataFrame:
    """:func:`values_frame` of Table IV's runs with ``what`` = ``"T=<round>"`` for the rounds ``at[N]`` of each N."""
    parts = [values_frame({rid: r for rid, r in runs.items() if rid.N == n},
                          {f"T={T}": (lambda r, T=T: accuracy_at(r, T)) for T in ts}) for n, ts in at.items()]
    return pd.concat(parts, ignore_index=True) if parts else values_frame({}, {})


def curves(runs: Runs, **where: Any) -> dict[str, dict[int, pd.Series]]:
    """Test accuracy (%) per round of the finished runs whose id has every ``field=value`` of ``where`` (e.g.
    ``N=100``), ``{label: {seed: series}}`` (the input of :func:`fedlib.plots.mean_curves`)."""
    out: dict[str, dict[int, pd.Series]] = {}
    for rid, r in runs.items():
        if isinstance(r, Record) and all(getattr(rid, k) == v for k, v in where.items()):
            out.setdefault(rid.label, {})[rid.seed] = 100 * r.metric("test_acc")
    return out


def mean_table(df: pd.DataFrame, index: str, columns: str) -> pd.DataFrame:
    """``index`` × ``columns`` cells "mean ± std" over seeds ("pending", "diverged")."""
    g = df.groupby([index, columns], sort=False)
    cells = {k: cell(x["acc"].mean(), x["acc"].std(ddof=1), x["acc"].count(), bool(x["pending"].any()),
                     bool(x["diverged"].any()), int(x["diverged"].sum())) for k, x in g}
    out = pd.Series(cells).unstack()
    return out.loc[list(dict.fromkeys(df[index])), list(dict.fromkeys(df[columns]))]


def paper_table4() -> dict[int, pd.DataFrame]:
    """FedIntR Table IV (CIFAR-10) as printed: per N, one row per method, one column per reported round T."""
    return {n: pd.DataFrame({m: dict(zip([f"T={T}" for T in PAPER_T4_AT[n]], v)) for m, v in rows.items()}).T
            for n, rows in PAPER_T4.items()}


def series_style(name: str) -> dict[str, Any]:
    """:func:`fedlib.style.method_style` of a run's label; a method's μ = 10 is dashed (dotted where its μ = 1 is
    dashed) with hollow markers, so that both of its μ show."""
    st = method_style(name)
    if "μ=10" in name:
        st.update(ls=":" if st["ls"] == "--" else "--", mfc="none")
    return st


def fig4_figure(cv: Mapping[str, Mapping[int, pd.Series]], n: int, dataset: str, scale: str) -> plt.Figure:
    """Fig. 4: test accuracy per round of every method with N clients, 20 % per round: the mean over seeds with a
    95 % t band (a method's μ = 10 dashed with hollow markers); the paper's Table IV (CIFAR-10) in a panel below."""
    fig = plt.figure(figsize=(10, 7.4), layout="constrained")
    gs = fig.add_gridspec(2, 1, height_ratios=[2.3, 1])
    ax = fig.add_subplot(gs[0])
    note = mean_curves(ax, cv, percent=False, xlabel="communication round")
    for ln in ax.get_lines():
        if "μ=10" in str(ln.get_label()):
            ln.set_linestyle(series_style(str(ln.get_label()))["ls"])
            ln.set_markerfacecolor("none")
    if cv:
        ax.legend(fontsize=7, ncol=4, loc="lower right")
    rounds = max((int(s.index.max()) for c in cv.values() for s in c.values() if len(s)), default=1)
    round_ticks(ax, rounds)
    ax.set_title(f"FedIntR Fig. 4: N = {n} clients, {round(0.2 * n)} per round — {dataset_name(dataset)}, "
                 f"scale={scale}\n{note}", fontsize=10)
    pn = n if n in PAPER_T4 else 100
    paper_panel(fig.add_subplot(gs[1]), [[m, *(f"{v:.2f}" for v in vs)] for m, vs in PAPER_T4[pn].items()],
                ["method", *(f"T = {T}" for T in PAPER_T4_AT[pn])],
                f"paper, Table IV (CIFAR-10, N = {pn}): median test accuracy (%) of the 10 rounds ending at T")
    return fig


def describe_fig4(cv: Mapping[str, Mapping[int, pd.Series]] | None, n: int | None,
                  left_out: str | None = None) -> str:
    """What Fig. 4 shows: the leading method early (the paper's first T, else a fifth of the rounds) and at the last
    round, with FedAvg's and FedIntR's (μ = 10) means; or why there is no figure."""
    if left_out:
        return f"Fig. 4 is not run at this scale: {left_out}."
    means = pd.DataFrame({m: pd.concat(v, axis=1).mean(axis=1) for m, v in (cv or {}).items() if v}).dropna()
    if means.empty:
        return f"Fig. 4's runs (N = {n}) are pending: no curves yet."
    last = int(means.index.max())
    early = next((T for T in PAPER_T4_AT.get(n or 0, PAPER_T4_AT[100]) if T < last), max(1, last // 5))
    early = int(means.index[means.index <= early].max())

    def at(r: int) -> str:
        row = means.loc[r].sort_values(ascending=False)
        own = ", ".join(f"{m} {row[m]:.2f} %" for m in ("FedAvg", INTR) if m in row and m != row.index[0])
        return f"round {r}: {row.index[0]} leads with {row.iloc[0]:.2f} %" + (f" ({own})" if own else "")

    seeds = sorted({len(v) for v in cv.values() if v})
    return f"Means over {seeds[0]}{'–' + str(seeds[-1]) if len(seeds) > 1 else ''} seed(s) — {at(early)}; {at(last)}."


def fig5_frame(runs: Runs, last: int, at: int | None = None) -> pd.DataFrame:
    """:func:`values_frame` of Fig. 5's runs: ``acc`` is the median test accuracy (%) of the ``last`` rounds, or with
    ``at`` of the ``last`` rounds up to round ``at`` (the same rounds for every E, as the paper runs them; NaN for a
    run shorter than ``at``)."""
    if at is None:
        return values_frame(runs, {"acc": lambda r: 100 * r.final("test_acc", last=last)})
    return values_frame(runs, {"acc": lambda r: accuracy_at(r, at, last) if r.config["rounds"] >= at else np.nan})


def fig5_equal(runs: Runs, last: int, rounds: Mapping[int, int], default_e: int) -> pd.DataFrame | None:
    """:func:`fig5_frame` of the Fig. 5 runs longer than the default E's (``rounds``: ``{E: rounds}``) at the default
    E's last round, as the paper runs every E (None when every E has the same rounds)."""
    longer = {e for e, r in rounds.items() if r > rounds[default_e]}
    if not longer:
        return None
    return fig5_frame({rid: r for rid, r in runs.items() if rid.E in longer}, last, at=rounds[default_e])


def fig5_points(df: pd.DataFrame) -> dict[str, dict[float, dict[int, float]]]:
    """``{method: {E: {seed: accuracy}}}`` of Fig. 5's finished runs, an (E, method) with a diverged seed left out:
    the input of :func:`fedlib.plots.sweep`."""
    out: dict[str, dict[float, dict[int, float]]] = {m: {} for m in dict.fromkeys(df["method"])}
    for (m, e), g in df.groupby(["method", "E"], sort=False):
        v = {int(s): float(a) for s, a in zip(g["seed"], g["acc"]) if np.isfinite(a)}
        if v and not g["diverged"].any():
            out[m][float(e)] = v
    return out


def fig5_off(df: pd.DataFrame) -> dict[tuple[str, float], list[int]]:
    """``{(method, E): seeds}`` of Fig. 5's finished runs that are off their plateau (``df``'s ``off`` column)."""
    out: dict[tuple[str, float], list[int]] = {}
    for r in df[is_off(df)].itertuples():
        out.setdefault((r.method, float(r.E)), []).append(int(r.seed))
    return out


def fig5_figure(df: pd.DataFrame, dataset: str, scale: str, last: int, equal: pd.DataFrame | None = None,
                equal_rounds: int | None = None, left_out: str = "") -> plt.Figure:
    """Fig. 5: accuracy by local epochs E per method (mean over seeds, 95 % t error bars; dots while fewer than three
    E are run; the methods offset slightly along E so that their bars stay apart; a point whose runs are off their
    plateau is ringed and labelled with how many are still rising); the paper's Table I values for the dataset (its
    E = 10, 100 rounds) in a panel of their own: its Fig. 5 (CIFAR-10) gives no numbers. ``equal``
    (:func:`fig5_frame` ``at=equal_rounds`` of the runs with more rounds than the default E's): those runs at the
    default E's rounds, as hollow markers (the paper's reading: the same rounds for every E). ``left_out``: the E this
    scale does not run, and why (in the title)."""
    paper, data = PAPER_T1.get(dataset), dataset_name(dataset)
    fig = plt.figure(figsize=(10 if paper else 7, 4.4), layout="constrained")
    gs = fig.add_gridspec(1, 2 if paper else 1, width_ratios=[2.4, 1] if paper else [1])
    ax = fig.add_subplot(gs[0])
    points, off = fig5_points(df), fig5_off(df)
    k = len(points)
    shift = {m: 2 ** (0.07 * (i - (k - 1) / 2)) for i, m in enumerate(points)}
    note = sweep(ax, {m: {e * shift[m]: v for e, v in p.items()} for m, p in points.items()},
                 xlabel="local epochs E", ylabel=f"median test accuracy, last {last} rounds (%)",
                 off={m: {e * shift[m]: len(v) for (mm, e), v in off.items() if mm == m} for m in points})
    hollow = fig5_points(equal) if equal is not None else {}
    for m, p in hollow.items():
        for e, v in p.items():
            mean, half, _ = t_interval(v.values())
            ax.errorbar([e * shift.get(m, 1.0)], [mean], yerr=[half if np.isfinite(half) else 0], capsize=3,
                        color=method_style(m)["color"], marker="o", mfc="white", ls="none",
                        label=f"{m}, E = {e:g} at round {equal_rounds}")
    if any(hollow.values()):
        ax.legend(fontsize=8)
    es = sorted({e for p in points.values() for e in p})
    ax.set_xscale("log", base=2)
    if es:
        ax.set_xticks(es, [f"{e:g}" for e in es])
        ax.set_xlim(min(es) / 1.6, max(es) * 1.6)
    ax.minorticks_off()
    pend = [f"E = {e:g}" for e in sorted(set(df["E"])) if e not in es]
    note, _, ringed = note.partition("\n")
    ax.set_title(f"FedIntR Fig. 5: local epochs — {data}, scale={scale}\n{note}"
                 + ("; methods offset slightly along E" if k > 1 else "")
                 + (f"\nnot run yet: {', '.join(pend)}" if pend else "")
                 + (f"\nnot run at this scale: {textwrap.fill(left_out, 100)}" if left_out else "")
                 + (f"\nhollow: the same runs at round {equal_rounds}, the default E's last (the paper's: the same "
                    f"rounds for every E)" if any(hollow.values()) else "")
                 + (f"\n{ringed}" if ringed else ""),
                 fontsize=9)
    if paper:
        rows = [[m, f"{paper[m.split(' (')[0]][0]:.2f}"] for m in points if m.split(" (")[0] in paper]
        paper_panel(fig.add_subplot(gs[1]), rows, ["method", "E = 10 (%)"],
                    f"paper, Table I ({data}):\nE = 10, 100 rounds\n(its Fig. 5, on CIFAR-10,\ngives no numbers)")
    return fig


def describe_fig5(df: pd.DataFrame, default_e: int, equal: pd.DataFrame | None = None,
                  equal_rounds: int | None = None) -> str:
    """What Fig. 5 shows: each method's accuracy at each E run (mean ± 95 % t), the paired differences E = 1 − the
    default E and FedIntR − FedAvg at each E, the runs longer than the default E's at its rounds (``equal``), and
    the E still pending."""
    points = fig5_points(df)
    es = sorted({e for p in points.values() for e in p})
    pend = sorted(e for e in set(df["E"]) if e not in es)
    tail = f" Pending: E = {', '.join(f'{e:g}' for e in pend)}." if pend else ""
    if not es:
        return "Fig. 5's runs are pending: no figure yet." if not pend else f"Fig. 5's runs are pending.{tail}"
    parts = [f"E = {e:g}: " + ", ".join(f"{m} {fmt(p[e])}" for m, p in points.items() if e in p) for e in es]
    diffs = []
    for m, p in points.items():
        if 1.0 in p and float(default_e) in p and default_e != 1:
            d = [p[1.0][s] - p[float(default_e)][s] for s in p[1.0] if s in p[float(default_e)]]
            diffs.append(f"{m}: E = 1 − E = {default_e} {fmt(d, '+')}")
    intr, avg = next((m for m in points if m.startswith("FedIntR")), None), points.get("FedAvg")
    for e in es if intr and avg else []:
        a, b = points[intr].get(e, {}), avg.get(e, {})
        if a and b:
            diffs.append(f"{intr} − FedAvg at E = {e:g}: {fmt([a[s] - b[s] for s in a if s in b], '+')}")
    out = "Median accuracy (%), mean ± 95 % t interval over seeds — " + "; ".join(parts) + "."
    if diffs:
        out += " Paired over seeds (points): " + "; ".join(diffs) + "."
    at = []
    for m, p in (fig5_points(equal) if equal is not None else {}).items():
        ref = points.get(m, {}).get(float(default_e), {})
        at += [f"{m} {fmt(v)} (E = {e:g} − E = {default_e}: {fmt([v[s] - ref[s] for s in v if s in ref], '+')})"
               for e, v in p.items()]
    if at:
        out += (f" In the same {equal_rounds} rounds as E = {default_e} (the paper runs every E for the same "
                f"rounds): " + "; ".join(at) + ".")
    if off := fig5_off(df):
        out += (" Off their plateau (still rising over their last 20 % of rounds; the claims on them are not "
                "testable): " + "; ".join(f"{m} at E = {e:g}, seed{'s' * (len(v) > 1)} {', '.join(map(str, v))}"
                                          for (m, e), v in off.items()) + ".")
    return out + tail


def setup_table(records: Mapping[str, Runs]) -> pd.DataFrame:
    """Every run by name: rounds, clients, local epochs, seed, seconds per round ("pending", "diverged") and its
    record."""
    return pd.DataFrame({str(rid): {"rounds": r.config["rounds"], "clients": r.config["num_clients"],
                             "local epochs": r.config["local_epochs"], "seed": r.config["seed"],
                             "s / round": round(r.frame()["time_s"].mean(), 2) if isinstance(r, Record)
                             else "pending" if isinstance(r, Pending) else "diverged", "record": r.key}
                         for rs in records.values() for rid, r in rs.items()}).T
