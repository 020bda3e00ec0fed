"""FedCKA's accuracy artifacts (notebook 03): Table 2 across heterogeneity (its α = 5 column is
Table 1's CIFAR-10 column), Appl. Sci. Fig. 5's accuracy per round and its local-epoch sweep — each
a tidy table and a figure with the papers' numbers beside ours.

    t2 = Table2.from_records(records["table2"])
    t2.table(); t2.versus_paper()["arXiv"]; t2.figure(dataset, setup); describe_table2(t2)
    curves = t2.curves(records["table2"])
    rounds_figure(curves, dataset); describe_rounds(curves)

The papers' numbers are CIFAR-10 after 100 rounds; ours are the dataset and scale the caller names:
the figures put the papers' numbers in a panel of their own, never on our axes.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Iterable

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from fedlib.companion.papers.fedcka.claims import FEDCKA_T2, T2_METHODS, paper_mu
from fedlib.companion.papers.fedcka.rounds import (_cells, describe_epochs, describe_rounds,
                                                   epoch_rounds, epochs_artifact, epochs_at,
                                                   epochs_points, mean_rounds, rounds_figure,
                                                   seed_curves)
from fedlib.config import Config
from fedlib.companion.grid import DIVERGED, Runs, fmt_interval, is_off, runs_frame, seed_summary
from fedlib.companion.plots import group_panels, paper_panel
from fedlib.companion.report import compare
from fedlib.companion.style import dataset_name

__all__ = [
    "VERSION_ALPHAS", "ALPHA_LABELS", "Table2", "table2_setup", "describe_table2", "seed_curves",
    "rounds_figure", "mean_rounds", "describe_rounds", "epochs_points", "epochs_at", "epoch_rounds",
    "epochs_artifact", "describe_epochs"
]

# Table 2's α columns in each version
VERSION_ALPHAS = {"arXiv": (5.0, 0.5, 0.1), "Appl. Sci.": (5.0, 1.0, 0.1)}
ALPHA_LABELS = {5.0: "α = 5", 1.0: "α = 1 (Appl. Sci.)", 0.5: "α = 0.5 (arXiv)", 0.1: "α = 0.1"}


def _summary_at_paper_mu(summary: pd.DataFrame) -> pd.DataFrame:
    """Per method and α, the summary row at the paper's μ for the setting (:func:`paper_mu`); a
    method run at one μ only, at that μ."""
    keep = []
    for (m, a), g in summary.groupby(["method", "alpha"], sort=False):
        mu = paper_mu(m, a)
        at = g[np.isclose(g["mu"].astype(float), mu)] if mu is not None else g.iloc[:0]
        keep.append(at.index[0] if len(at) else g.index[0])
    return summary.loc[keep].reset_index(drop=True)


@dataclass
class Table2:
    """Table 2's runs: ``grid`` (one row per run), ``summary`` (per method, μ, α over seeds) and
    ``best`` (per method and α, the summary row at the paper's μ for the setting,
    :func:`~fedlib.companion.papers.fedcka.claims.paper_mu`, or at the one μ run: no μ is picked on
    test accuracy)."""

    grid: pd.DataFrame
    summary: pd.DataFrame
    best: pd.DataFrame

    @classmethod
    def from_records(cls, records: Runs) -> "Table2":
        grid = runs_frame(records)
        summary = seed_summary(grid, ["method", "mu", "alpha"])
        return cls(grid, summary, _summary_at_paper_mu(summary))

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
        """Final test accuracy (mean ± std over seeds) per method and α at the paper's μ for the
        setting, and the μ per α (marked * where the paper's was not run)."""
        out = pd.DataFrame(
            {
                f"α = {a:g}": _cells(
                    self.best[self.best.alpha == a].set_index("method").loc[self.methods])
                for a in self.alphas
            }, index=pd.Index(self.methods, name="method"))
        mus = self.best.set_index(["method", "alpha"])["mu"]
        def mu_text(m: str, a: float) -> str:
            mu, stated = mus[m, a], paper_mu(m, a)
            return "–" if np.isnan(
                mu) else f"{mu:g}" + ("" if stated is None or np.isclose(mu, stated) else "*")

        out["μ (α order; * not the paper's)"] = [
            ", ".join(mu_text(m, a) for a in self.alphas) for m in self.methods
        ]
        return out

    def full(self) -> pd.DataFrame:
        """Every μ run: one row per method and μ, one column per α."""
        s = self.summary.assign(run=[m if np.isnan(mu) else f"{m} (μ={mu:g})"
                                     for m, mu in zip(self.summary["method"], self.summary["mu"])],
                                cell=_cells(self.summary))
        out = s.pivot(index="run", columns="alpha",
                      values="cell").loc[list(dict.fromkeys(s["run"]))]
        return out[sorted(out.columns, reverse=True)].rename(columns=lambda a: f"α = {a:g}")

    def versus_paper(self) -> dict[str, pd.DataFrame]:
        """Per version of the paper, its Table 2 (CIFAR-10) beside ours (method | α), with the
        difference."""
        ours = {
            f"{m} | α={a:g}": DIVERGED if v == -np.inf else v
            for (m, a), v in self.accuracy().items()
        }
        return {
            version: compare({f"{m} | α={a:g}": FEDCKA_T2[a][m]
                              for a in cols
                              for m in T2_METHODS}, ours, not_run="not run at this scale")
            for version, cols in VERSION_ALPHAS.items()
        }

    def _mu(self, method: str, alpha: float) -> float | None:
        """The μ whose seeds the figures show: the paper's μ (NaN for a method without μ); while it
        is not known yet (a seed pending), the μ when only one was tried; else None."""
        b = self.best[(self.best.method == method) & (self.best.alpha == alpha)]
        if b.empty:
            return None
        if not b["pending"].iloc[0] and not b["diverged"].iloc[0]:
            return float(b["mu"].iloc[0])
        mus = self.grid[(self.grid.method == method) & (self.grid.alpha == alpha)]["mu"].unique()
        return float(mus[0]) if len(mus) == 1 else None

    def _runs(self, method: str, alpha: float) -> pd.DataFrame:
        """The grid's runs of ``method`` at ``alpha`` at its μ (:meth:`_mu`; none while it is not
        known)."""
        mu, g = self._mu(method, alpha), self.grid
        if mu is None:
            return g.iloc[:0]
        return g[(g.method == method) & np.isclose(g.alpha, alpha) &
                 (g.mu.isna() if np.isnan(mu) else g.mu == mu)]

    def label(self, method: str, alpha: float) -> str:
        """``"FedCKA (μ=3)"``: the method with the μ it is shown at."""
        mu = self._mu(method, alpha)
        return method + ("" if mu is None or np.isnan(mu) else f" (μ={mu:g})")

    def seed_values(self) -> dict[str, dict[str, dict[int, float]]]:
        """``{α label: {method: {seed: final accuracy (%)}}}`` of the stored runs that did not
        diverge, every α of both versions (one not run: no methods) at each method's μ: the input of
        :func:`fedlib.companion.plots.group_panels`."""
        out: dict[str, dict[str, dict[int, float]]] = {}
        order = [m for m in T2_METHODS if m in self.methods
                 ] + [m for m in self.methods if m not in T2_METHODS]
        for a in sorted(FEDCKA_T2, reverse=True):
            out[ALPHA_LABELS[a]] = {
                m: {
                    int(s): float(v)
                    for s, v, p, d in r[["seed", "acc", "pending", "diverged"]].itertuples(
                        index=False) if not p and not d
                }
                for m in order if not (r := self._runs(m, a)).empty
            }
        return out

    def seed_off(self) -> dict[str, dict[str, list[int]]]:
        """``{α label: {method: seeds}}`` of the runs :meth:`seed_values` draws that are off their
        plateau."""
        return {
            ALPHA_LABELS[a]: {
                m: [int(x) for x in r.loc[is_off(r), "seed"]]
                for m in self.methods if not (r := self._runs(m, a)).empty
            }
            for a in sorted(FEDCKA_T2, reverse=True)
        }

    def seed_diverged(self) -> dict[str, dict[str, int]]:
        """``{α label: {method: seeds diverged}}`` at each method's μ (:meth:`_runs`)."""
        return {
            ALPHA_LABELS[a]: {
                m: int(r["diverged"].sum())
                for m in self.methods if not (r := self._runs(m, a)).empty
            }
            for a in sorted(FEDCKA_T2, reverse=True)
        }

    def incomplete(self) -> list[str]:
        """``"FedAvg at α = 5: 3 of 5 seeds"`` (``"... (2 diverged)"``) for each method at an α with
        stored runs whose seeds are not all stored (pending or diverged); when none is, ``"... :
        pending"``, ``"... : 4 diverged, 1 pending"`` or ``"... : all 5 diverged"``."""
        out = []
        for a in self.alphas:
            g = self.grid[np.isclose(self.grid.alpha, a)]
            # an α not run yet: the figure's title names it
            if (g["pending"] | g["diverged"]).all():
                continue
            for m in self.methods:
                r = self._runs(m, a)
                n, nd = int((~r["pending"] & ~r["diverged"]).sum()), int(r["diverged"].sum())
                if 0 < n < len(r):
                    out.append(f"{m} at α = {a:g}: {n} of {len(r)} seeds" +
                               f" ({nd} diverged)" * bool(nd))
                elif n == 0 and len(self.grid[(self.grid.method == m) & (self.grid.alpha == a)]):
                    npend = len(r) - nd  # no μ known yet (r empty): pending
                    what = f"all {nd} diverged" if nd and not npend else "pending" if not nd else \
                        f"{nd} diverged, {npend} pending"
                    out.append(f"{m} at α = {a:g}: {what}")
        return out

    def figure(self, dataset: str, setup: str = "") -> plt.Figure:
        """A panel per α of both versions (5, 1, 0.5, 0.1; each its own y-axis): ours at each
        method's μ (named), the seeds' mean with the 95 % t interval and each seed a dot (an α not
        run is left out and named in the title, a method still pending named below it); the papers'
        CIFAR-10 Table 2 in a panel of its own."""
        fig = plt.figure(figsize=(10, 7.2), layout="constrained")
        gs = fig.add_gridspec(2, 1, height_ratios=[3.2, 1])
        top = fig.add_subfigure(gs[0])
        alpha = {v: k for k, v in ALPHA_LABELS.items()}
        done = self.grid[~self.grid["pending"]] if "rounds" in self.grid else self.grid.iloc[:0]
        rounds = {
            g: sorted({int(r)
                       for r in done.loc[np.isclose(done["alpha"], a), "rounds"]})
            for g, a in alpha.items()
        }
        # each α its own rounds
        panel = {g: g + "".join(f", {r} rounds" for r in rounds.get(g, [])) for g in alpha}
        named = lambda d: {
            panel[g]: {self.label(m, alpha[g]): v
                       for m, v in by.items()}
            for g, by in d.items()
        }  # noqa
        note, _, ringed = group_panels(top, named(self.seed_values()), off=named(self.seed_off()),
                                       diverged=named(self.seed_diverged())).partition("\n")
        waiting = self.incomplete()
        lines = ["FedCKA Table 2: final test accuracy, each method at the μ under its name (each "
                 "α on its own y-scale) — ours: "
                 f"{dataset_name(dataset)}{', ' + setup if setup else ''}", note,
                 *(["incomplete: " + "; ".join(waiting)] if waiting else []),
                 *([ringed] if ringed else [])]
        top.suptitle("\n".join(textwrap.fill(ln, 130) for ln in lines), fontsize=9)
        alphas = sorted(FEDCKA_T2, reverse=True)
        paper_panel(
            fig.add_subplot(gs[1]), [[m, *(f"{FEDCKA_T2[a][m]:.2f}" for a in alphas)]
                                     for m in T2_METHODS],
            ["method", *(ALPHA_LABELS[a] for a in alphas)],
            "paper, Table 2 (α = 5: also Table 1): CIFAR-10, 10 clients, 100 rounds, each "
            "method at the μ of its search — not our setup")
        return fig

    def curves(self, records: Runs, alpha: float | None = None) -> dict[str, dict[int, pd.Series]]:
        """Test accuracy (%) per round of each method at its μ at ``alpha`` (default: the largest),
        every stored seed: ``{label: {seed: Series}}`` (the input of
        :func:`fedlib.companion.plots.mean_curves`)."""
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
        """The runs behind :meth:`curves` at ``alpha`` (default: the largest), pending and diverged
        seeds included: a figure of those curves states their seeds, commits and devices, not those
        of every α."""
        alpha = max(self.alphas) if alpha is None else alpha
        names = {str(n) for m in self.methods for n in self._runs(m, alpha)["name"]}
        return {rid: r for rid, r in records.items() if str(rid) in names}


def table2_setup(configs: Iterable[Config]) -> str:
    """The setup line of Table 2's runs: ``"25 rounds at α = 5, 35 rounds at α = 1 and 0.5, 120
    rounds at α = 0.1; 5 local epochs, 15000 images, batch 64"`` (at quick the rounds depend on α),
    ``"100 rounds; ..."`` when equal."""
    configs = list(configs)
    alphas: dict[int, set[float]] = {}
    for c in configs:
        alphas.setdefault(c.rounds, set()).add(c.partition_kw["beta"])
    rounds = f"{configs[0].rounds} rounds" if len(alphas) == 1 else ", ".join(
        f"{r} rounds at α = {' and '.join(f'{a:g}' for a in sorted(al, reverse=True))}"
        for r, al in sorted(alphas.items(), key=lambda x: -max(x[1])))
    b = configs[0]
    return (f"{rounds}; {b.local_epochs} local epochs, {b.n_train or 'all'} images, "
            f"batch {b.batch_size}")


def describe_table2(t2: Table2) -> str:
    """What Table 2's figure shows: per α run, each method's mean with its 95 % t interval over the
    seeds (a method with diverged seeds gets no mean, as in the figure: its count and its other
    seeds), FedCKA − FedAvg paired by seed, and the α and methods still pending."""
    vals, div = t2.seed_values(), t2.seed_diverged()
    parts, pairs = [], []
    for a, by in vals.items():
        if not any(by.values()):
            continue
        # no mean of a method with diverged seeds (as the figure)
        dv = {m: n for m, n in div.get(a, {}).items() if n}
        ranked = sorted(((m, v) for m, v in by.items() if v and m not in dv),
                        key=lambda mv: -np.mean(list(mv[1].values())))
        gone = [f"{m} {n} of {n + len(by.get(m, {}))} diverged" + (
            f" (the other seed{'s' * (len(by[m]) > 1)}: "
            f"{', '.join(f'{x:.2f}' for x in by[m].values())})"
            if by.get(m) else "") for m, n in dv.items()]
        parts.append(f"{a}: " + ", ".join(f"{m} {fmt_interval(v)}" for m, v in ranked)
                     + (f"; no mean: {', '.join(gone)}" if gone else ""))
        cka, avg = by.get("FedCKA", {}), by.get("FedAvg", {})
        if common := [s for s in cka if s in avg]:
            pairs.append(f"{a}: {fmt_interval([cka[s] - avg[s] for s in common], '+')}")
    if not parts:
        return "Table 2's runs are pending: no bar to draw yet."
    missing = [a for a, by in vals.items() if not any(by.values())]
    out = "Final test accuracy (%), mean ± 95 % t interval over seeds — " + "; ".join(parts) + "."
    out += (" FedCKA − FedAvg, paired by seed — " + "; ".join(pairs) + ".") if pairs else ""
    out += f" Not run yet: {', '.join(missing)}." if missing else ""
    waiting = t2.incomplete()
    return out + (f" Incomplete: {'; '.join(waiting)}." if waiting else "")
