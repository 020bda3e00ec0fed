"""FedCKA's accuracy artifacts (notebook 03): Table 2 across heterogeneity (its α = 5 column is Table 1's CIFAR-10
column), Appl. Sci. Fig. 5's accuracy per round and its local-epoch sweep — each a tidy table and a figure with the
papers' numbers beside ours.

    t2 = Table2.from_records(records["table2"])
    t2.table(); t2.versus_paper()["arXiv"]; t2.figure(dataset, title)
    rounds_figure(t2.curves(records["table2"], seed), dataset)

The papers' numbers are CIFAR-10 after 100 rounds; ours are the dataset and scale the caller names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from .fedcka import PAPER_T2 as T2_TUPLES, T2_METHODS
from ..grid import DIVERGED, best_mu, cell, runs_frame, seed_summary
from ..report import compare
from ..results import Pending, Record
from ..style import PAPER_STYLE, dataset_name, method_style

__all__ = ["PAPER_T2", "PAPER_METHODS", "VERSIONS", "Table2", "rounds_figure", "epochs_artifact", "seed_curves"]

PAPER_METHODS = T2_METHODS
# FedCKA Table 2 (CIFAR-10, 10 clients, 100 rounds; best μ per method), both versions: α -> {method: accuracy}
PAPER_T2: dict[float, dict[str, float]] = {a: dict(zip(PAPER_METHODS, v)) for a, v in T2_TUPLES.items()}
VERSIONS = {"arXiv": (5.0, 0.5, 0.1), "Appl. Sci.": (5.0, 1.0, 0.1)}  # Table 2's α columns in each version

Runs = Mapping[str, Record | Pending]


def _cells(df: pd.DataFrame) -> list[str]:
    return [cell(r["mean"], r["std"], r["n"], r["pending"], r["diverged"]) for _, r in df.iterrows()]


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

    def figure(self, dataset: str, setup: str = "") -> plt.Figure:
        """Grouped bars per α of both versions (5, 1, 0.5, 0.1): ours at the best μ (error bars: std over seeds,
        drawn only with ≥ 2 seeds), the papers' CIFAR-10 numbers as hollow stars on each bar's position; an α
        this scale did not run is labelled so."""
        alphas = sorted(PAPER_T2, reverse=True)
        methods = [m for m in PAPER_METHODS if m in self.methods] + [m for m in self.methods if m not in PAPER_METHODS]
        fig, ax = plt.subplots(figsize=(8, 4.2), layout="constrained")
        w = 0.8 / max(len(methods), 1)
        best = self.best.set_index(["method", "alpha"])
        for i, m in enumerate(methods):
            x = np.arange(len(alphas)) + (i - (len(methods) - 1) / 2) * w
            rows = [best.loc[(m, a)] if (m, a) in best.index else None for a in alphas]
            mean = np.array([np.nan if r is None else r["mean"] for r in rows], float)
            err = np.array([r["std"] if r is not None and r["n"] >= 2 else np.nan for r in rows], float)
            st = method_style(m)
            ax.bar(x, mean, w, color=st["color"], label=m, edgecolor="white", lw=0.5)
            if np.isfinite(err).any():
                ax.errorbar(x, mean, yerr=np.nan_to_num(err), fmt="none", ecolor="black", capsize=2, lw=0.8)
            if m in PAPER_METHODS:
                ax.plot(x, [PAPER_T2[a][m] for a in alphas], **PAPER_STYLE,
                        label="paper (CIFAR-10, 100 rounds)" if i == 0 else None)
        for j, a in enumerate(alphas):
            if a not in self.alphas:
                ax.text(j, 3, "not run\nat this scale", ha="center", va="bottom", fontsize=7, color="0.4")
        ax.set_xticks(range(len(alphas)), [f"α = {a:g}" + ("" if a in (5.0, 0.1) else " (arXiv)" if a == 0.5
                                                            else " (Appl. Sci.)") for a in alphas])
        ax.set_ylim(0, 100)
        ax.set_ylabel("final test accuracy (%)")
        ax.set_title(f"FedCKA Table 2: best μ per method — ours: {dataset_name(dataset)}{', ' + setup if setup else ''}",
                     fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8, ncol=3, loc="lower center", bbox_to_anchor=(0.5, 1.08), frameon=False)
        return fig

    def curves(self, records: Runs, seed: int, alpha: float | None = None) -> dict[str, pd.Series]:
        """Test accuracy (%) per round of each method at its best μ at ``alpha`` (default: the largest), one seed."""
        alpha = max(self.alphas) if alpha is None else alpha
        out = {}
        for _, r in self.best[self.best.alpha == alpha].iterrows():
            if r["pending"] or r["diverged"]:
                continue
            g = self.grid
            sel = (g.method == r.method) & (g.alpha == alpha) & ((g.mu == r.mu) | g.mu.isna()) & (g.seed == seed)
            if sel.any():
                label = r.method + (f" (μ={r.mu:g})" if not np.isnan(r.mu) else "")
                out[label] = 100 * records[g[sel]["name"].iloc[0]].metric("test_acc")
        return out


def seed_curves(records: Runs, names: Mapping[str, str], seeds: Sequence[int], alpha: float = 5.0
                ) -> dict[int, dict[str, pd.Series]]:
    """``{seed: {method: accuracy per round (%)}}`` for the runs named ``f"{names[method]} | α=... | seed=..."``,
    only for seeds where every one of them is stored (the input of Fig. 5's 40-round verdict)."""
    out = {}
    for s in seeds:
        pair = {m: records.get(f"{n} | α={alpha:g} | seed={s}") for m, n in names.items()}
        if all(isinstance(r, Record) for r in pair.values()):
            out[s] = {m: 100 * r.metric("test_acc") for m, r in pair.items()}
    return out


def rounds_figure(curves: Mapping[str, pd.Series], dataset: str, alpha: float = 5.0) -> plt.Figure:
    """Appl. Sci. Fig. 5 (left): test accuracy per communication round, one line per method (each its own colour,
    dash and marker, so overlapping methods stay visible)."""
    fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
    for label, s in curves.items():
        st = method_style(label)
        ax.plot(s.index, s.values, ms=4, lw=1.4, markevery=max(1, len(s) // 10), label=label, alpha=0.9, **st)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("communication round")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(f"FedCKA Appl. Sci. Fig. 5: accuracy per round, α = {alpha:g} — {dataset_name(dataset)}",
                 fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def epochs_artifact(records: Runs, dataset: str, rounds: int) -> tuple[pd.DataFrame, plt.Figure | None]:
    """Appl. Sci. Fig. 5 (right): final accuracy per method and local epochs E (a table, and a figure with a log
    E axis when there are records)."""
    if not records:
        return pd.DataFrame(), None
    ep = seed_summary(runs_frame(records), ["method", "E"])
    if ep.empty:
        return pd.DataFrame(), None
    table = ep.assign(cell=_cells(ep)).pivot(index="method", columns="E", values="cell") \
        .rename(columns=lambda e: f"E = {e}")
    fig, ax = plt.subplots(figsize=(5.5, 3.8), layout="constrained")
    for m, g in ep.groupby("method", sort=False):
        st = method_style(m)
        ax.errorbar(g["E"], g["mean"], yerr=g["std"].fillna(0), capsize=3, label=m, **st)
    epochs = sorted(ep["E"].unique())
    ax.set_xscale("log")
    ax.set_xticks(epochs, [str(e) for e in epochs])
    ax.minorticks_off()
    ax.set_xlabel("local epochs E")
    ax.set_ylabel("final test accuracy (%)")
    ax.set_title(f"FedCKA Appl. Sci. Fig. 5: local epochs, α = 5 — {dataset_name(dataset)}, {rounds} rounds",
                 fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return table, fig
