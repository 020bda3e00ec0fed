"""FedCKA's accuracy artifacts (notebook 03): Table 2 across heterogeneity (its α = 5 column is Table 1's CIFAR-10
column), Appl. Sci. Fig. 5's accuracy per round and its local-epoch sweep — each a tidy table and a figure with the
papers' numbers beside ours.

    t2 = Table2.from_records(records["table2"])
    t2.table(); t2.versus_paper()["arXiv"]; t2.figure(dataset, setup); describe_table2(t2)
    rounds_figure(t2.curves(records["table2"]), dataset); describe_rounds(t2.curves(records["table2"]))

The papers' numbers are CIFAR-10 after 100 rounds; ours are the dataset and scale the caller names: the figures
put the papers' numbers in a panel of their own, never on our axes.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from .fedcka import FIG5_ROUNDS, PAPER_T2 as T2_TUPLES, T2_METHODS
from ..config import Config
from ..figcheck import note_series
from ..grid import DIVERGED, best_mu, is_off, runs_frame, seed_summary, summary_cell
from ..plans import FedCKARunId, RunId
from ..plots import group_panels, mean_curves, paper_panel, sweep, t_interval
from ..report import compare
from ..results import Pending, Record
from ..style import dataset_name, method_style

__all__ = ["PAPER_T2", "PAPER_METHODS", "VERSIONS", "ALPHA_LABELS", "Table2", "table2_setup", "describe_table2", "fmt",
           "seed_curves", "rounds_figure", "mean_rounds", "describe_rounds", "epochs_points", "epochs_at",
           "epoch_rounds", "epochs_artifact", "describe_epochs"]

PAPER_METHODS = T2_METHODS
# FedCKA Table 2 (CIFAR-10, 10 clients, 100 rounds; best μ per method), both versions: α -> {method: accuracy}
PAPER_T2: dict[float, dict[str, float]] = {a: dict(zip(PAPER_METHODS, v)) for a, v in T2_TUPLES.items()}
VERSIONS = {"arXiv": (5.0, 0.5, 0.1), "Appl. Sci.": (5.0, 1.0, 0.1)}  # Table 2's α columns in each version
ALPHA_LABELS = {5.0: "α = 5", 1.0: "α = 1 (Appl. Sci.)", 0.5: "α = 0.5 (arXiv)", 0.1: "α = 0.1"}

Runs = Mapping[RunId, Record | Pending]


def _cells(df: pd.DataFrame) -> list[str]:
    return [summary_cell(r) for _, r in df.iterrows()]


@dataclass
class Table2:
    """Table 2's runs: ``grid`` (one row per run), ``summary`` (per method, μ, α over seeds) and ``best`` (the μ
    with the best mean per method and α, as the papers report)."""

    grid: pd.DataFrame
    summary: pd.DataFrame
    best: pd.DataFrame

    @classmethod
    def from_records(cls, records: Runs) -> "Table2":
        grid = runs_frame(records)
        summary = seed_summary(grid, ["method", "mu", "alpha"])
        return cls(grid, summary, best_mu(summary, ["method", "alpha"]))

    @property
    def methods(self) -> list[str]:
        return list(dict.fromkeys(self.grid["method"]))

    @property
    def alphas(self) -> list[float]:
        return sorted(self.grid["alpha"].unique(), reverse=True)

    def accuracy(self) -> dict[tuple[str, float], float]:
        """``{(method, α): best mean}``: NaN when pending, -inf when every μ diverged."""
        return {(r.method, r.alpha): np.nan if r.pending else -np.inf if r.diverged else r["mean"]
                for _, r in self.best.iterrows()}

    def table(self) -> pd.DataFrame:
        """Final test accuracy (mean ± std over seeds) per method and α at the best μ, and the best μ per α."""
        out = pd.DataFrame({f"α = {a:g}": _cells(self.best[self.best.alpha == a].set_index("method").loc[self.methods])
                            for a in self.alphas}, index=pd.Index(self.methods, name="method"))
        mus = self.best.set_index(["method", "alpha"])["mu"]
        out["best μ (α order)"] = [", ".join("–" if np.isnan(mus[m, a]) else f"{mus[m, a]:g}" for a in self.alphas)
                                   for m in self.methods]
        return out

    def full(self) -> pd.DataFrame:
        """Every μ run: one row per method and μ, one column per α."""
        s = self.summary.assign(run=[m if np.isnan(mu) else f"{m} (μ={mu:g})"
                                     for m, mu in zip(self.summary["method"], self.summary["mu"])],
                                cell=_cells(self.summary))
        out = s.pivot(index="run", columns="alpha", values="cell").loc[list(dict.fromkeys(s["run"]))]
        return out[sorted(out.columns, reverse=True)].rename(columns=lambda a: f"α = {a:g}")

    def versus_paper(self) -> dict[str, pd.DataFrame]:
        """Per version of the paper, its Table 2 (CIFAR-10) beside ours (method | α), with the difference."""
        ours = {f"{m} | α={a:g}": DIVERGED if v == -np.inf else v for (m, a), v in self.accuracy().items()}
        return {version: compare({f"{m} | α={a:g}": PAPER_T2[a][m] for a in cols for m in PAPER_METHODS}, ours,
                                 not_run="not run at this scale") for version, cols in VERSIONS.items()}

    def _mu(self, method: str, alpha: float) -> float | None:
        """The μ whose seeds the figures show: the best μ (NaN for a method without μ); while the best is not
        known yet (a seed pending), the μ when only one was tried; else None."""
        b = self.best[(self.best.method == method) & (self.best.alpha == alpha)]
        if b.empty:
            return None
        if not b["pending"].iloc[0] and not b["diverged"].iloc[0]:
            return float(b["mu"].iloc[0])
        mus = self.grid[(self.grid.method == method) & (self.grid.alpha == alpha)]["mu"].unique()
        return float(mus[0]) if len(mus) == 1 else None

    def _runs(self, method: str, alpha: float) -> pd.DataFrame:
        """The grid's runs of ``method`` at ``alpha`` at its μ (:meth:`_mu`; none while it is not known)."""
        mu, g = self._mu(method, alpha), self.grid
        if mu is None:
            return g.iloc[:0]
        return g[(g.method == method) & np.isclose(g.alpha, alpha) & (g.mu.isna() if np.isnan(mu) else g.mu == mu)]

    def label(self, method: str, alpha: float) -> str:
        """``"FedCKA (μ=3)"``: the method with the μ it is shown at."""
        mu = self._mu(method, alpha)
        return method + ("" if mu is None or np.isnan(mu) else f" (μ={mu:g})")

    def seed_values(self) -> dict[str, dict[str, dict[int, float]]]:
        """``{α label: {method: {seed: final accuracy (%)}}}`` of the stored runs that did not diverge, every α of
        both versions (one not run: no methods) at each method's μ: the input of :func:`fedlib.plots.group_panels`."""
        out: dict[str, dict[str, dict[int, float]]] = {}
        order = [m for m in PAPER_METHODS if m in self.methods] + [m for m in self.methods if m not in PAPER_METHODS]
        for a in sorted(PAPER_T2, reverse=True):
            out[ALPHA_LABELS[a]] = {m: {int(s): float(v) for s, v, p, d in r[["seed", "acc", "pending",
                                                                              "diverged"]].itertuples(index=False)
                                        if not p and not d}
                                    for m in order if not (r := self._runs(m, a)).empty}
        return out

    def seed_off(self) -> dict[str, dict[str, list[int]]]:
        """``{α label: {method: seeds}}`` of the runs :meth:`seed_values` draws that are off their plateau."""
        return {ALPHA_LABELS[a]: {m: [int(x) for x in r.loc[is_off(r), "seed"]] for m in self.methods
                                  if not (r := self._runs(m, a)).empty} for a in sorted(PAPER_T2, reverse=True)}

    def seed_diverged(self) -> dict[str, dict[str, int]]:
        """``{α label: {method: seeds diverged}}`` at each method's μ (:meth:`_runs`)."""
        return {ALPHA_LABELS[a]: {m: int(r["diverged"].sum()) for m in self.methods
                                  if not (r := self._runs(m, a)).empty} for a in sorted(PAPER_T2, reverse=True)}

    def incomplete(self) -> list[str]:
        """``"FedAvg at α = 5: 3 of 5 seeds"`` (``"... (2 diverged)"``) for each method at an α with stored runs
        whose seeds are not all stored (pending or diverged); when none is, ``"... : pending"``, ``"... : 4 diverged, 1
        pending"`` or ``"... : all 5 diverged"``."""
        out = []
        for a in self.alphas:
            g = self.grid[np.isclose(self.grid.alpha, a)]
            if (g["pending"] | g["diverged"]).all():  # an α not run yet: the figure's title names it
                continue
            for m in self.methods:
                r = self._runs(m, a)
                n, nd = int((~r["pending"] & ~r["diverged"]).sum()), int(r["diverged"].sum())
                if 0 < n < len(r):
                    out.append(f"{m} at α = {a:g}: {n} of {len(r)} seeds" + f" ({nd} diverged)" * bool(nd))
                elif n == 0 and len(self.grid[(self.grid.method == m) & (self.grid.alpha == a)]):
                    npend = len(r) - nd  # no μ known yet (r empty): pending
                    what = f"all {nd} diverged" if nd and not npend else "pending" if not nd else \
                        f"{nd} diverged, {npend} pending"
                    out.append(f"{m} at α = {a:g}: {what}")
        return out

    def figure(self, dataset: str, setup: str = "") -> plt.Figure:
        """A panel per α of both versions (5, 1, 0.5, 0.1; each its own y-axis): ours at each method's μ (named), the
        seeds' mean with the 95 % t interval and each seed a dot (an α not run is left out and named in the title, a
        method still pending named below it); the papers' CIFAR-10 Table 2 in a panel of its own."""
        fig = plt.figure(figsize=(10, 7.2), layout="constrained")
        gs = fig.add_gridspec(2, 1, height_ratios=[3.2, 1])
        top = fig.add_subfigure(gs[0])
        alpha = {v: k for k, v in ALPHA_LABELS.items()}
        named = lambda d: {g: {self.label(m, alpha[g]): v for m, v in by.items()} for g, by in d.items()}  # noqa
        note, _, ringed = group_panels(top, named(self.seed_values()), off=named(self.seed_off()),
                                       diverged=named(self.seed_diverged())).partition("\n")
        waiting = self.incomplete()
        lines = [f"FedCKA Table 2: final test accuracy, each method at the μ under its name (each α on its own "
                 f"y-scale) — ours: "
                 f"{dataset_name(dataset)}{', ' + setup if setup else ''}", note,
                 *(["incomplete: " + "; ".join(waiting)] if waiting else []),
                 *([ringed] if ringed else [])]
        top.suptitle("\n".join(textwrap.fill(ln, 130) for ln in lines), fontsize=9)
        alphas = sorted(PAPER_T2, reverse=True)
        paper_panel(fig.add_subplot(gs[1]), [[m, *(f"{PAPER_T2[a][m]:.2f}" for a in alphas)] for m in PAPER_METHODS],
                    ["method", *(ALPHA_LABELS[a] for a in alphas)],
                    "paper, Table 2 (α = 5: also Table 1): CIFAR-10, 10 clients, 100 rounds, each method at the μ "
                    "of its search — not our setup")
        return fig

    def curves(self, records: Runs, alpha: float | None = None) -> dict[str, dict[int, pd.Series]]:
        """Test accuracy (%) per round of each method at its μ at ``alpha`` (default: the largest), every stored
        seed: ``{label: {seed: Series}}`` (the input of :func:`fedlib.plots.mean_curves`)."""
        alpha = max(self.alphas) if alpha is None else alpha
        by_name = {str(rid): r for rid, r in records.items()}
        out = {}
        for m in self.methods:
            r = self._runs(m, alpha)
            r = r[~r["pending"] & ~r["diverged"]]
            if len(r):
                out[self.label(m, alpha)] = {int(s): 100 * by_name[n].metric("test_acc")
                                             for s, n in zip(r["seed"], r["name"])}
        return out

    def curve_records(self, records: Runs, alpha: float | None = None) -> Runs:
        """The runs behind :meth:`curves` at ``alpha`` (default: the largest), pending and diverged seeds included:
        a figure of those curves states their seeds, commits and devices, not those of every α."""
        alpha = max(self.alphas) if alpha is None else alpha
        names = {str(n) for m in self.methods for n in self._runs(m, alpha)["name"]}
        return {rid: r for rid, r in records.items() if str(rid) in names}


def table2_setup(configs: Iterable[Config]) -> str:
    """The setup line of Table 2's runs: ``"25 rounds at α = 5, 35 rounds at α = 1 and 0.5, 120 rounds at α = 0.1;
    5 local epochs, 15000 images, batch 64"`` (at quick the rounds depend on α), ``"100 rounds; ..."`` when equal."""
    configs = list(configs)
    alphas: dict[int, set[float]] = {}
    for c in configs:
        alphas.setdefault(c.rounds, set()).add(c.partition_kw["beta"])
    rounds = f"{configs[0].rounds} rounds" if len(alphas) == 1 else ", ".join(
        f"{r} rounds at α = {' and '.join(f'{a:g}' for a in sorted(al, reverse=True))}"
        for r, al in sorted(alphas.items(), key=lambda x: -max(x[1])))
    b = configs[0]
    return f"{rounds}; {b.local_epochs} local epochs, {b.n_train or 'all'} images, batch {b.batch_size}"


def describe_table2(t2: Table2) -> str:
    """What Table 2's figure shows: per α run, each method's mean with its 95 % t interval over the seeds (a method
    with diverged seeds gets no mean, as in the figure: its count and its other seeds), FedCKA − FedAvg paired by
    seed, and the α and methods still pending."""
    vals, div = t2.seed_values(), t2.seed_diverged()
    parts, pairs = [], []
    for a, by in vals.items():
        if not any(by.values()):
            continue
        dv = {m: n for m, n in div.get(a, {}).items() if n}  # no mean of a method with diverged seeds (as the figure)
        ranked = sorted(((m, v) for m, v in by.items() if v and m not in dv),
                        key=lambda mv: -np.mean(list(mv[1].values())))
        gone = [f"{m} {n} of {n + len(by.get(m, {}))} diverged" + (
            f" (the other seed{'s' * (len(by[m]) > 1)}: {', '.join(f'{x:.2f}' for x in by[m].values())})"
            if by.get(m) else "") for m, n in dv.items()]
        parts.append(f"{a}: " + ", ".join(f"{m} {fmt(v)}" for m, v in ranked)
                     + (f"; no mean: {', '.join(gone)}" if gone else ""))
        cka, avg = by.get("FedCKA", {}), by.get("FedAvg", {})
        if common := [s for s in cka if s in avg]:
            pairs.append(f"{a}: {fmt([cka[s] - avg[s] for s in common], '+')}")
    if not parts:
        return "Table 2's runs are pending: no bar to draw yet."
    missing = [a for a, by in vals.items() if not any(by.values())]
    out = "Final test accuracy (%), mean ± 95 % t interval over seeds — " + "; ".join(parts) + "."
    out += (" FedCKA − FedAvg, paired by seed — " + "; ".join(pairs) + ".") if pairs else ""
    out += f" Not run yet: {', '.join(missing)}." if missing else ""
    waiting = t2.incomplete()
    return out + (f" Incomplete: {'; '.join(waiting)}." if waiting else "")


def fmt(values: Mapping[int, float] | Sequence[float], sign: str = "") -> str:
    """``"85.56 ± 1.04 (5 seeds)"``: the mean and half-width of the 95 % t interval; one seed: no interval."""
    mean, half, n = t_interval(list(values.values()) if isinstance(values, Mapping) else values)
    if n == 0:
        return "pending"
    return f"{mean:{sign}.2f}" + (f" ± {half:.2f} ({n} seeds)" if n > 1 else " (1 seed)")


def seed_curves(records: Runs, names: Mapping[str, str], seeds: Sequence[int], alpha: float = 5.0
                ) -> dict[int, dict[str, pd.Series]]:
    """``{seed: {method: accuracy per round (%)}}`` for the runs ``FedCKARunId(names[method], seed, alpha=alpha)``,
    only for seeds where every one of them is stored (the input of Fig. 5's 40-round verdict)."""
    out = {}
    for s in seeds:
        pair = {m: records.get(FedCKARunId(n, s, alpha=alpha)) for m, n in names.items()}
        if all(isinstance(r, Record) for r in pair.values()):
            out[s] = {m: 100 * r.metric("test_acc") for m, r in pair.items()}
    return out


def rounds_figure(curves: Mapping[str, Mapping[int, pd.Series]], dataset: str, alpha: float = 5.0) -> plt.Figure:
    """Appl. Sci. Fig. 5 (left): test accuracy per communication round, one line per method (its own colour, dash
    and marker): the mean over the seeds with the 95 % t band (``curves``: :meth:`Table2.curves`)."""
    fig, ax = plt.subplots(figsize=(7.5, 4.4), layout="constrained")
    note = mean_curves(ax, curves, percent=False, xlabel="communication round")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    last = max((int(s.index.max()) for c in curves.values() for s in c.values() if len(s)), default=0)
    short = (f"; the paper's crossover at round 40 of its {FIG5_ROUNDS} needs its schedule ({last} rounds here)"
             if 0 < last != FIG5_ROUNDS else "")
    ax.set_title(f"FedCKA Appl. Sci. Fig. 5 (left): accuracy per round, α = {alpha:g} — {dataset_name(dataset)}\n"
                 f"{note}{short}", fontsize=9)
    return fig


def mean_rounds(curves: Mapping[str, Mapping[int, pd.Series]]) -> pd.DataFrame:
    """Per round, each method's mean accuracy (%) over its seeds (the line of :func:`rounds_figure`)."""
    return pd.DataFrame({m: pd.concat(v, axis=1).mean(axis=1) for m, v in curves.items() if v}).round(2)


def describe_rounds(curves: Mapping[str, Mapping[int, pd.Series]]) -> str:
    """What Fig. 5 (left) shows: each method's mean accuracy at a fifth of the rounds and at the last round (95 %
    t interval over seeds), and which leads at each."""
    if not curves:
        return "Fig. 5 (left) is pending: no run at α = 5 is stored yet."
    last = min(int(s.index.max()) for c in curves.values() for s in c.values())
    early = max(1, last // 5)

    def at(r: int) -> str:
        vals = {m: [float(s.loc[r]) for s in c.values() if r in s.index] for m, c in curves.items()}
        ranked = sorted(vals, key=lambda m: -np.mean(vals[m]))
        return f"round {r}: " + ", ".join(f"{m} {fmt(vals[m])}" for m in ranked)

    return f"Test accuracy (%), mean ± 95 % t interval over seeds — {at(early)}; {at(last)}."


def epochs_points(records: Runs, df: pd.DataFrame | None = None) -> dict[str, dict[float, dict[int, float]]]:
    """``{method (μ): {E: {seed: final accuracy (%)}}}`` of the stored runs of the local-epoch sweep that did not
    diverge (``df``: their frame, by default :func:`runs_frame`; :func:`epochs_at` reads them at other rounds): the
    input of :func:`fedlib.plots.sweep`."""
    out: dict[str, dict[float, dict[int, float]]] = {}
    df = df if df is not None else runs_frame(records) if records else pd.DataFrame()
    for _, r in df.iterrows():
        label = r["method"] + ("" if np.isnan(r["mu"]) else f" (μ={r['mu']:g})")
        by_e = out.setdefault(label, {})
        if not r["pending"] and not r["diverged"]:
            by_e.setdefault(float(r["E"]), {})[int(r["seed"])] = float(r["acc"])
    return out


def epochs_at(records: Runs, rounds: int) -> pd.DataFrame:
    """:func:`runs_frame` of the local-epoch sweep's runs with each finished run's ``acc`` read at round ``rounds``
    (the sweep's common rounds, as the paper runs every E; a run trained longer, to its plateau, is read before its
    end)."""
    if not records:
        return pd.DataFrame()
    df = runs_frame(records)
    acc = [np.nan if not isinstance(r, Record) or p or d else 100 * float(r.metric("test_acc").loc[:rounds].iloc[-1])
           for r, p, d in zip(records.values(), df["pending"], df["diverged"])]
    return df.assign(acc=acc)


def epoch_rounds(records: Runs) -> dict[int, int]:
    """``{E: rounds}`` of the sweep's runs."""
    return {r.cfg.local_epochs: r.cfg.rounds for r in records.values()}


def _early(records: Runs, rounds: int | None) -> tuple[dict[int, int], dict[str, dict[float, dict[int, float]]]]:
    """The E trained longer than ``rounds`` (``{E: rounds}``) and their :func:`epochs_points` read at ``rounds``."""
    if rounds is None:
        return {}, {}
    longer = {e: r for e, r in sorted(epoch_rounds(records).items()) if r > rounds}
    at = {rid: r for rid, r in records.items() if r.cfg.rounds > rounds}
    return longer, ({m: p for m, p in epochs_points(at, epochs_at(at, rounds)).items() if p} if at else {})


def _pending_epochs(records: Runs) -> list[int]:
    """The E of the sweep with no stored run yet (of any method)."""
    done = {int(e) for p in epochs_points(records).values() for e in p}
    return sorted({int(e) for e in (runs_frame(records)["E"] if records else [])} - done)


def epochs_artifact(records: Runs, dataset: str, rounds: int) -> tuple[pd.DataFrame, plt.Figure | None]:
    """Appl. Sci. Fig. 5 (right): final accuracy per method and local epochs E (a table; and a figure when a run is
    stored: each E the seeds' mean with the 95 % t interval, dots without a line while fewer than three E are run,
    the methods offset slightly along the log E axis, the E still pending named in the title). ``rounds``: the
    sweep's common rounds, at which every E is drawn solid (the paper's comparison: the same rounds for every E);
    an E trained longer (to its plateau) is also drawn at its own last round as hollow markers labelled with its
    rounds."""
    if not records:
        return pd.DataFrame(), None
    ep, (longer, hollow) = seed_summary(runs_frame(records), ["method", "E"]), _early(records, rounds)
    table = ep.assign(cell=_cells(ep)).pivot(index="method", columns="E", values="cell") \
        .rename(columns=lambda e: f"E = {e}" + (f" ({longer[e]} rounds)" if e in longer else ""))
    full = {m: p for m, p in epochs_points(records).items() if p}
    if not full:
        return table, None
    solid = {m: {**p, **hollow.get(m, {})} for m, p in full.items()}  # every E at the sweep's common rounds
    long = {m: {e: v for e, v in p.items() if int(e) in longer} for m, p in full.items()}
    fig, ax = plt.subplots(figsize=(7.6, 5), layout="constrained")
    k = len(solid)
    df = runs_frame(records)
    bad = df[is_off(df)].assign(label=lambda d: [m + ("" if np.isnan(mu) else f" (μ={mu:g})")
                                                 for m, mu in zip(d["method"], d["mu"])])
    n_off = lambda m, e: int(((bad["label"] == m) & (bad["E"] == e)).sum())  # noqa: E731
    shift = {m: 2 ** (0.05 * (i - (k - 1) / 2)) for i, m in enumerate(solid)}
    note, _, ringed = sweep(ax, {m: {e * shift[m]: v for e, v in p.items()} for m, p in solid.items()},
                            xlabel="local epochs E",
                            off={m: {e * shift[m]: n_off(m, e) for e in p if int(e) not in longer}
                                 for m, p in solid.items()},
                            rounds={m: {e * shift[m]: [rounds] for e in p} for m, p in solid.items()}
                            ).partition("\n")
    for m, p in long.items():
        for e, v in sorted(p.items()):
            mean, half, n = t_interval(v.values())
            label = f"{m}, E = {e:g} at {longer[int(e)]} rounds (n={n})"
            ax.errorbar([e * shift[m]], [mean], yerr=[half if np.isfinite(half) else 0], capsize=3,
                        color=method_style(m)["color"], marker="o", mfc="white", ls="none", label=label)
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
    ax.set_title(f"FedCKA Appl. Sci. Fig. 5 (right): local epochs, α = 5 — {dataset_name(dataset)}\n"
                 f"solid: every E at {rounds} rounds (the paper's comparison: the same rounds for every E)"
                 + (f"\nhollow: the same runs trained longer, each to its plateau ({more})" if more else "")
                 + f"\n{note}" + (f"; not run yet: E = {', '.join(map(str, pend))}" if pend else "")
                 + (f"\n{ringed}" if ringed else ""), fontsize=9)
    return table, fig


def describe_epochs(records: Runs, rounds: int | None = None) -> str:
    """What Fig. 5 (right) shows: each method's accuracy at each E run (mean ± 95 % t interval over seeds) and the
    E still pending; with ``rounds`` (the sweep's common rounds), every E at that round first (the comparison), then
    the E trained longer at their own rounds."""
    points = {m: p for m, p in epochs_points(records).items() if p}
    pend = _pending_epochs(records)
    tail = f" Not run yet: E = {', '.join(map(str, pend))}." if pend else ""
    if not points:
        return "The local-epoch sweep is pending." + tail
    longer, early = _early(records, rounds)
    line = lambda pts, es: "; ".join(f"E = {e:g}: " + ", ".join(f"{m} {fmt(p[e])}" for m, p in pts.items()  # noqa
                                                                if e in p) for e in es)
    if not longer:
        es = sorted({e for p in points.values() for e in p})
        return "Final test accuracy (%), mean ± 95 % t interval over seeds — " + line(points, es) + "." + tail
    solid = {m: {**p, **early.get(m, {})} for m, p in points.items()}
    out = (f"Test accuracy (%) at round {rounds} for every E, as the paper runs them (the solid points), mean ± 95 % t "
           f"interval over seeds — " + line(solid, sorted({e for p in solid.values() for e in p})) + ".")
    long = {m: {e: v for e, v in p.items() if int(e) in longer} for m, p in points.items()}
    out += (f" Trained longer, each to its plateau (hollow; not the paper's comparison): "
            + "; ".join(f"E = {e} at {r} rounds: " + ", ".join(f"{m} {fmt(p[float(e)])}" for m, p in long.items()
                                                              if float(e) in p) for e, r in longer.items()) + ".")
    return out + tail
