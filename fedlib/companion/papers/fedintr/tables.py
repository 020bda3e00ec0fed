"""FedIntR's benchmark artifacts (notebook 05): Table I (each method at its best μ), Table II
(FedIntR's μ sweep), Table III (the Dirichlet β) and Table V (α-weighted vs uniform layer weights) —
each a tidy table beside the paper's numbers — and the claims of §IV-B, §IV-C and §IV-F. Their
figures are drawn by :mod:`fedlib.companion.papers.fedintr.figures`.

    t1 = Table1.from_records(records["table1"], last, dataset, left_out)
    t1.versus_paper(); t1.table2(mus); t1.curves(records["table1"])
    t3 = Table3.from_records(records["table3"], t1); t3.table(); t3.gains()

The statistic is the paper's: the median test accuracy of the global model over the last rounds
(``last``; the paper: 10). Runs come as ``{FedIntRRunId: Record | Pending | Diverged}``
(:func:`fedlib.companion.grid.fetch_runs` over
:func:`fedlib.companion.papers.fedintr.plans.fedintr_benchmarks_plan`); a pending run's cells read
"pending", a diverged one's "diverged".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from fedlib.companion.grid import DIVERGED, Diverged, Runs, offs, seed_values
from fedlib.companion.common import FedIntRRunId, Plan
from fedlib.companion.papers.fedintr.plans import FEDINTR_BEST_MU, FEDINTR_METHODS
from fedlib.companion.report import compare
from fedlib.companion.results import Pending, Record
from fedlib.companion.style import dataset_name
from fedlib.companion.verdicts import PENDING, off_plateau

__all__ = ["FEDINTR_DATASETS", "FEDINTR_T1", "FEDINTR_T2", "FEDINTR_T3", "FEDINTR_T5",
           "median_frame", "readable", "table1_setup", "round_ticks", "Table1", "Table3", "table5",
           "median_table"]

FEDINTR_DATASETS = ("fmnist", "svhn", "cifar10", "cifar100")  # the columns of Tables I, II and V
# FedIntR Table I (10 clients, β = 0.5, 100 rounds): dataset → {method: (accuracy, best μ)}
FEDINTR_T1: dict[str, dict[str, tuple[float, float | None]]] = {
    "fmnist": {
        "FedAvg": (88.90, None), "FedCKA": (88.85, 3), "FedProx": (88.95, 0.001),
        "MOON": (89.15, 1), "FedIntR": (89.15, 10)
    },
    "svhn": {
        "FedAvg": (86.04, None), "FedCKA": (86.47, 1), "FedProx": (86.42, 0.01),
        "MOON": (86.61, 10), "FedIntR": (87.17, 10)
    },
    "cifar10": {
        "FedAvg": (65.82, None), "FedCKA": (66.55, 0.1), "FedProx": (65.03, 0.01),
        "MOON": (66.35, 5), "FedIntR": (67.23, 3)
    },
    "cifar100": {
        "FedAvg": (40.43, None), "FedCKA": (41.91, 10), "FedProx": (39.91, 0.1),
        "MOON": (40.46, 0.1), "FedIntR": (41.48, 10)
    },
}
# FedIntR Table II: FedIntR's accuracy at each μ, μ → {dataset: accuracy}
FEDINTR_T2: dict[float, dict[str, float]] = {
    mu: dict(zip(FEDINTR_DATASETS, v))
    for mu, v in {
        0.1: (88.87, 86.85, 65.23, 41.00), 1: (89.07, 85.89, 65.66,
                                               40.43), 3: (88.67, 87.05, 67.23,
                                                           40.99), 5: (89.13, 87.01, 66.99,
                                                                       41.21), 10: (89.15, 87.17,
                                                                                    65.89, 41.48)
    }.items()
}
# FedIntR Table III (CIFAR-10 and CIFAR-100, 10 clients): dataset → β → {method: (accuracy, best μ)}
FEDINTR_T3: dict[str, dict[float, dict[str, tuple[float, float | None]]]] = {
    "cifar10": {
        5: {
            "FedAvg": (68.69, None), "FedCKA": (68.62, 1), "FedProx": (70.03, 0.01),
            "MOON": (69.34, 1), "FedIntR": (70.66, 5)
        }, 0.5: {
            "FedAvg": (65.82, None), "FedCKA": (66.55, 0.1), "FedProx": (65.03, 0.01),
            "MOON": (66.35, 5), "FedIntR": (67.23, 3)
        }, 0.1: {
            "FedAvg": (55.62, None), "FedCKA": (55.64, 0.1), "FedProx": (56.55, 0.01),
            "MOON": (57.60, 1), "FedIntR": (58.32, 10)
        }
    },
    "cifar100": {
        5: {
            "FedAvg": (40.62, None), "FedCKA": (40.40, 0.1), "FedProx": (40.00, 0.001),
            "MOON": (40.23, 0.1), "FedIntR": (40.06, 0.1)
        }, 0.5: {
            "FedAvg": (40.43, None), "FedCKA": (41.91, 10), "FedProx": (39.91, 0.1),
            "MOON": (40.46, 0.1), "FedIntR": (41.48, 10)
        }, 0.1: {
            "FedAvg": (37.48, None), "FedCKA": (35.73, 10), "FedProx": (37.38, 0.1),
            "MOON": (37.16, 5), "FedIntR": (38.24, 0.5)
        }
    },
}
# FedIntR Table V: dataset → (α-weighted, Eq. 5; uniform, Eq. 6) at Table I's μ
FEDINTR_T5 = {
    "fmnist": (89.15, 89.03), "svhn": (87.17, 85.62), "cifar10": (67.23, 64.20),
    "cifar100": (41.48, 40.33)
}
_FLAGS = ["pending", "diverged", "off"]


def median_frame(runs: Runs, last: int) -> pd.DataFrame:
    """One row per run: its name (``run``) and its id's fields (μ; β, N or E where they lead its
    name; method, seed), its ``rounds``, ``pending``, ``diverged``, the median test accuracy over
    the ``last`` rounds (the paper's statistic), the last round's, seconds per round, the record."""
    rows = []
    for rid, r in runs.items():
        ok = isinstance(r, Record)
        h = r.frame() if ok else pd.DataFrame()
        lead = {k: v for k, v in rid.settings().items() if k != "μ"}
        rows.append({
            "run": str(rid), "μ": rid.mu, **lead, "method": rid.method, "seed": rid.seed,
            "rounds": int(getattr(r.cfg, "rounds", 0) or 0) if hasattr(r, "cfg") else 0,
            "pending": isinstance(r, Pending), "diverged": isinstance(r, Diverged),
            "off": off_plateau(r) if ok else None,
            "median (%)": 100 * r.final("test_acc", last=last) if ok else np.nan,
            "last round (%)": 100 * r.final("test_acc") if ok else np.nan,
            "s / round": round(h["time_s"].mean(), 1) if "time_s" in h else np.nan, "record": r.key
        })
    return pd.DataFrame(rows)


def readable(df: pd.DataFrame) -> pd.DataFrame:
    """For display: empty cells read "pending" (a run not stored yet), a spread over one seed reads
    "—"."""
    df = df.astype(object).where(df.notna(), PENDING)
    if "seeds" in df.columns:
        for c in ("std", "± std"):
            if c in df.columns:
                df.loc[[v == 1 for v in df["seeds"]], c] = "—"
    return df


def table1_setup(runs: Plan, dataset: str, scale: str, last: int) -> str:
    """The setup of Table I's runs in one line (model, clients, β, rounds × epochs, batch, data,
    statistic)."""
    c = next(iter(runs["table1"].values()))
    return (f"{dataset_name(dataset)}, scale={scale}: {c.model}, {c.num_clients} clients, "
            f"β={c.partition_kw['beta']}, {c.rounds} rounds x {c.local_epochs} local epochs, "
            f"batch {c.batch_size}, n_train={c.n_train}, n_test={c.n_test}; statistic: median of "
            f"the last {last} round(s)")


def round_ticks(ax: plt.Axes, rounds: int) -> None:
    """Rounds are 1-based: ticks at 1 and at round multiples of a step (1, 5, 10, … or 1, 200, 400,
    …)."""
    step = next(s for s in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000) if rounds / s <= 8)
    ax.set_xticks(sorted({1, *range(step, rounds + 1, step)}))
    ax.set_xlim(0.5 - 0.01 * rounds, rounds + 0.5 + 0.01 * rounds)


def _by_mu(long: pd.DataFrame) -> pd.DataFrame:
    """Per (method, μ): mean and std over seeds of the median, finished seeds, mean last round; no
    mean when a seed diverged."""
    g = long.assign(μ=long["μ"].astype(float)).groupby(["method", "μ"], dropna=False, sort=False)
    out = g.agg(**{"median (%)": ("median (%)", "mean"), "std": ("median (%)", "std"),
                   "seeds": ("median (%)", "count"), "last round (%)": ("last round (%)", "mean")})
    out.loc[g["diverged"].any(), ["median (%)", "std", "last round (%)"]] = np.nan
    return out


def _best_mu(agg: pd.DataFrame, methods: Sequence[str] = tuple(FEDINTR_METHODS)) -> pd.DataFrame:
    """Per method the μ with the highest mean, as the paper reports it (NaN while none has a
    mean)."""
    rows = {}
    for m in methods:
        a = agg.loc[m] if m in agg.index.get_level_values(0) else None
        if a is None or a["median (%)"].isna().all():
            rows[m] = {"μ": np.nan, "median (%)": np.nan, "std": np.nan, "seeds": 0,
                       "last round (%)": np.nan}
            continue
        mu = a["median (%)"].idxmax()
        rows[m] = {"μ": mu, **a.loc[mu].to_dict()}
    return pd.DataFrame(rows).T


@dataclass
class Table1:
    """Table I's runs (``long``: one row per run), each (method, μ) over seeds (``all``) and each
    method at its best μ (``best``), with the dataset's paper column and the methods a scale leaves
    out (``left_out``: why)."""

    long: pd.DataFrame
    last: int
    dataset: str
    left_out: Mapping[str, str]

    @classmethod
    def from_records(cls, runs: Runs, last: int, dataset: str,
                     left_out: Mapping[str, str] | None = None) -> "Table1":
        return cls(median_frame(runs, last), last, dataset, dict(left_out or {}))

    @property
    def all(self) -> pd.DataFrame:
        return _by_mu(self.long)

    @property
    def best(self) -> pd.DataFrame:
        return _best_mu(self.all)

    @property
    def mu_phrase(self) -> str:
        """How each method's μ reads in titles and claims: "its best μ" when some method ran several
        μ (a search), "the paper's μ" when each ran the one Table I states for the dataset, else
        "the μ it was run at"."""
        reg = self.long[self.long["method"] != "FedAvg"]
        mus = {m: set(g["μ"].astype(float)) for m, g in reg.groupby("method")}
        if any(len(v) > 1 for v in mus.values()):
            return "its best μ"
        paper = FEDINTR_BEST_MU.get(self.dataset, {})
        stated = mus and all(m in paper and v == {float(paper[m])} for m, v in mus.items())
        return "the paper's μ" if stated else "the μ it was run at"

    @property
    def paper(self) -> dict[str, tuple[float, float | None]] | None:
        return FEDINTR_T1.get(self.dataset)

    def runs(self) -> pd.DataFrame:
        """Every run: median over the last rounds, last round, seconds per round, record."""
        return self.long.set_index("run").drop(columns=["method", "μ", "seed", *_FLAGS]).round(2)

    def common_seeds(self) -> list[int]:
        """The seeds every (method, μ) was run with."""
        g = self.long.groupby(["method", self.long["μ"].astype(float)], dropna=False)["seed"]
        return sorted(set.intersection(*(set(s) for _, s in g))) if len(self.long) else []

    def versus_paper(self) -> pd.DataFrame:
        """Table I: the paper's column for the dataset (accuracy, best μ) beside ours at our best μ
        (one μ run: "our μ"; ± std over seeds, seeds, last round, and the best μ over the seeds
        every run has); without a paper column, ours."""
        best = self.best
        if self.paper is None:
            return best
        div = self.long.groupby("method")["diverged"].all()
        ours = {m: DIVERGED if div.get(m, False) else v for m, v in best["median (%)"].items()
                if m not in self.left_out}
        out = compare({m: v[0] for m, v in self.paper.items()}, ours,
                      not_run="not run at this scale")
        common = self.common_seeds()
        alike = _best_mu(_by_mu(self.long[self.long["seed"].isin(common)]))
        out.insert(1, "paper μ", ["—" if m == "FedAvg" else self.paper[m][1] for m in out.index])
        out.insert(3, "our best μ" if self.mu_phrase == "its best μ" else "our μ",
                   ["—" if m == "FedAvg" else best.loc[m, "μ"] for m in out.index])
        out.insert(4, "± std", best.loc[out.index, "std"].astype(float).round(2).values)
        out.insert(5, "seeds", best.loc[out.index, "seeds"].values)
        out["last round (%)"] = best.loc[out.index, "last round (%)"].astype(float).round(2).values
        out[f"seeds {common} only (%)"] = alike.loc[out.index,
                                                    "median (%)"].astype(float).round(2).values
        return out

    def table2(self, mus_run: Sequence[float]) -> pd.DataFrame:
        """Table II: FedIntR at each μ of the paper (its column for the dataset) and ours; "—": μ
        not run."""
        intr = self.all.loc["FedIntR"] if "FedIntR" in self.all.index.get_level_values(
            0) else pd.DataFrame(columns=["median (%)", "std", "seeds"])
        t2 = pd.DataFrame({
            "paper (%)": {mu: v.get(self.dataset, np.nan)
                          for mu, v in FEDINTR_T2.items()}, "ours (%)": intr["median (%)"],
            "± std": intr["std"], "seeds": intr["seeds"]
        })
        t2.index.name = "μ"
        t2["diff"] = t2["ours (%)"] - t2["paper (%)"]
        t2 = t2.astype(float).round(2).astype(object)
        t2.loc[[mu not in mus_run for mu in t2.index], ["ours (%)", "± std", "seeds", "diff"]] = "—"
        return t2

    def per_seed(self, method: str, df: pd.DataFrame | None = None) -> dict[int, float]:
        """``{seed: median}`` of ``method`` at its best μ (of Table I) in ``df`` (default: Table I's
        runs)."""
        mu = {} if method == "FedAvg" else {"μ": float(self.best.loc[method, "μ"])}
        return seed_values(self.long if df is None else df, "median (%)", method=method, **mu)

    def off(self, method: str, df: pd.DataFrame | None = None) -> list[str]:
        """The runs of ``method`` at its best μ (in ``df``, default Table I's) that are off their
        plateau."""
        df = self.long if df is None else df
        sel = df["method"] == method
        if method != "FedAvg":
            sel &= df["μ"].astype(float) == float(self.best.loc[method, "μ"])
        return offs(df[sel], "run")

    def curves(self, runs: Runs) -> dict[str, dict[int, pd.Series]]:
        """Test accuracy (%) per round of each method at its best μ, every finished seed: ``{label:
        {seed: series}}`` (the input of :func:`fedlib.companion.plots.mean_curves`)."""
        out: dict[str, dict[int, pd.Series]] = {}
        for m, mu in self.best["μ"].items():
            label = m if m == "FedAvg" else f"{m} (μ={float(mu):g})"
            for rid, r in runs.items():
                if isinstance(r, Record) and rid.method == m and (m == "FedAvg" or
                                                                  rid.mu == float(mu)):
                    out.setdefault(label, {})[rid.seed] = 100 * r.metric("test_acc")
        return out


@dataclass
class Table3:
    """Table III's runs (``runs3``: one row per run at each β) beside Table I's (``t1``, at its β
    ``beta``), whose best μ and seeds they share."""

    runs3: pd.DataFrame
    t1: Table1
    beta: float = 0.5

    @classmethod
    def from_records(cls, runs: Runs, t1: Table1, beta: float = 0.5) -> "Table3":
        return cls(median_frame(runs, t1.last), t1, beta)

    @property
    def long(self) -> pd.DataFrame:
        """Table III's runs and Table I's runs of the same methods (at β = ``beta``)."""
        base = self.t1.long[self.t1.long["method"].isin(set(
            self.runs3["method"]))].assign(β=self.beta)
        return pd.concat([base, self.runs3], ignore_index=True)

    @property
    def betas(self) -> list[float]:
        return sorted(set(self.long["β"]), reverse=True)

    @property
    def reference(self) -> str:
        """The paper's Table III column compared with: the dataset's, else CIFAR-10."""
        return self.t1.dataset if self.t1.dataset in FEDINTR_T3 else "cifar10"

    def paper_gain(self, dataset: str | None = None) -> dict[float, float]:
        p = FEDINTR_T3[dataset or self.reference]
        return {b: p[b]["FedIntR"][0] - p[b]["FedAvg"][0] for b in p}

    def table(self) -> pd.DataFrame:
        """Each method at its best μ per β (mean over seeds), FedIntR's gain over FedAvg, and the
        paper's gain."""
        methods = [m for m in FEDINTR_METHODS if m in set(self.long["method"])]
        t3 = pd.DataFrame({
            b: _best_mu(_by_mu(self.long[self.long["β"] == b]), methods)["median (%)"]
            for b in self.betas
        }).astype(float)
        t3.columns = [f"β={b:g}" for b in t3.columns]
        t3.loc["FedIntR − FedAvg"] = t3.loc["FedIntR"] - t3.loc["FedAvg"]
        gain = self.paper_gain()
        t3.loc[f"paper FedIntR − FedAvg ({self.reference})"] = [
            gain.get(b, np.nan) for b in self.betas
        ]
        return t3.round(2)

    def gains(self) -> dict[float, dict[int, float]]:
        """Per β, FedIntR's gain over FedAvg on each seed both finished (points), FedIntR at its
        best μ at that β (as in :meth:`table`): ``{β: {seed: gain}}``, the input of
        :func:`fedlib.companion.plots.sweep`."""
        out: dict[float, dict[int, float]] = {}
        for b in self.betas:
            df = self.long[self.long["β"] == b]
            mu = _best_mu(_by_mu(df), ["FedIntR"]).loc["FedIntR", "μ"]
            intr = {} if pd.isna(mu) else seed_values(df, "median (%)", method="FedIntR",
                                                      μ=float(mu))
            avg = seed_values(df, "median (%)", method="FedAvg")
            out[b] = {s: v - avg[s] for s, v in intr.items() if np.isfinite(v - avg.get(s, np.nan))}
        return out


def table5(runs: Runs, t1: Table1, mu: float) -> pd.DataFrame:
    """Table V: FedIntR with α-weighted layers (Eq. 5: Table I's runs at μ) and each variant of
    ``runs`` (uniform, Eq. 6; α per sample), over the seeds the variants were run with, beside the
    paper's two numbers."""
    long5 = median_frame(runs, t1.last).rename(columns={"method": "variant"})
    seeds = sorted(set(long5["seed"]))
    l1 = t1.long
    alpha = l1[(l1["method"] == "FedIntR") & (l1["μ"].astype(float) == mu) & l1["seed"].isin(seeds)]
    t5 = pd.concat([alpha.assign(variant="α (Eq. 5)"), long5]).groupby("variant", sort=False).agg(
        **{
            "median (%)": ("median (%)", "mean"), "± std": ("median (%)", "std"), "seeds": (
                "median (%)", "count"), "last round (%)": ("last round (%)", "mean")
        })
    if t1.dataset in FEDINTR_T5:
        t5.insert(0, "paper (%)", [*FEDINTR_T5[t1.dataset], *[np.nan] * (len(t5) - 2)][:len(t5)])
        t5["diff"] = t5["median (%)"] - t5["paper (%)"]
    t5 = t5.round(2)
    t5.attrs["seeds"] = seeds
    return t5


def median_table(records: Mapping[str, Runs], last: int) -> pd.DataFrame:
    """Every run of every table: the statistic, the last round, seconds per round and the record."""
    frames = [median_frame(rs, last).drop(columns=_FLAGS).assign(table=a)
              for a, rs in records.items()]
    return pd.concat(frames).set_index("run").round(2)
