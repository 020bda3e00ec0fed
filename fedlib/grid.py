"""Grids of runs as tables: one row per run, seeds summarized as mean ± std, the best μ per method, "pending" cells.

A notebook gets ``{run name: Record | Pending}`` from :func:`fedlib.results.fetch`; :func:`runs_frame` reads each
run's setting from its config (strategy and its options, Dirichlet α, local epochs, seed), so tables group by what
was run, not by parsing names. A :class:`~fedlib.results.Pending` run has no numbers: its cells read "pending".
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from .results import Pending, Record

__all__ = ["method_name", "runs_frame", "seed_summary", "best_mu", "cell", "paper_vs_ours", "PENDING"]

PENDING = "pending"
_LABEL = {"fedavg": "FedAvg", "fedprox": "FedProx", "scaffold": "SCAFFOLD", "moon": "MOON", "fedcka": "FedCKA",
          "centralized": "centralized", "fedintr": "FedIntR"}


def method_name(strategy: str, kw: Mapping[str, Any] | None = None) -> str:
    """``"FedProx (μ=0.001)"``, ``"FedCKA (μ=3, M=1)"``, ``"SCAFFOLD"``: a run's method as the tables name it."""
    kw = kw or {}
    parts = [f"μ={kw['mu']:g}"] if "mu" in kw else []
    parts += [f"M={kw['M']}"] if "M" in kw else []
    parts += [f"sim={kw['sim']}"] if "sim" in kw else []
    return _LABEL.get(strategy, strategy) + (f" ({', '.join(parts)})" if parts else "")


def runs_frame(runs: Mapping[str, Record | Pending], metric: str = "test_acc") -> pd.DataFrame:
    """One row per run: ``name, method, strategy, mu, M, sim, alpha, E, seed, pending``, the final ``acc`` (%, NaN
    when pending) and ``s / round`` (median local-training seconds per round, as recorded)."""
    rows = []
    for name, r in runs.items():
        cfg = r.cfg
        kw = dict(cfg.strategy_kw)
        pending = isinstance(r, Pending)
        times = [] if pending else [h["train_time_s"] for h in r.history if "train_time_s" in h]
        rows.append({"name": name, "method": _LABEL.get(cfg.strategy, cfg.strategy), "strategy": cfg.strategy,
                     "mu": kw.get("mu", np.nan), "M": kw.get("M", 2 if cfg.strategy == "fedcka" else np.nan),
                     "sim": kw.get("sim", "linear_cka" if cfg.strategy == "fedcka" else ""),
                     "alpha": cfg.partition_kw.get("beta", np.inf), "E": cfg.local_epochs, "seed": cfg.seed,
                     "pending": pending, "acc": np.nan if pending else 100 * r.final(metric),
                     "s / round": float(np.median(times)) if times else np.nan})
    return pd.DataFrame(rows)


def seed_summary(df: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Per group of ``by``: ``mean``, ``std`` (over seeds, ddof 1; NaN for one seed), ``n`` finished seeds,
    ``pending`` (some seed has no record) and the median ``s / round``."""
    g = df.groupby(list(by), dropna=False, sort=False)
    out = pd.DataFrame({"mean": g["acc"].mean(), "std": g["acc"].std(ddof=1), "n": g["acc"].count(),
                        "pending": g["pending"].any(), "s / round": g["s / round"].median()})
    return out.reset_index()


def best_mu(summary: pd.DataFrame, by: Sequence[str] = ("method", "alpha")) -> pd.DataFrame:
    """Per group of ``by`` the row (μ) with the highest mean accuracy, as the papers report ("the best μ"); a group
    with a pending run is pending (its best is not known yet)."""
    rows = []
    for _, grp in summary.groupby(list(by), sort=False):
        if grp["pending"].any() or grp["mean"].isna().all():
            row = grp.iloc[0].copy()
            row["mean"], row["std"], row["pending"] = np.nan, np.nan, True
            row["mu"] = np.nan
        else:
            row = grp.loc[grp["mean"].idxmax()].copy()
        row["μ tried"] = ", ".join(f"{m:g}" for m in grp["mu"].dropna()) if "mu" in grp else ""
        rows.append(row)
    return pd.DataFrame(rows).reset_index(drop=True)


def cell(mean: float, std: float = float("nan"), n: int = 1, pending: bool = False) -> str:
    """A table cell: "pending", "64.37" (one seed) or "64.37 ± 0.12" (mean ± std over n seeds)."""
    if pending or mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return PENDING
    return f"{mean:.2f}" if n <= 1 or math.isnan(std) else f"{mean:.2f} ± {std:.2f}"


def paper_vs_ours(paper: Mapping[str, float], ours: Mapping[str, float | None], unit: str = "%",
                  not_run: str = "not run at this scale") -> pd.DataFrame:
    """The paper's numbers beside ours with the difference (ours − paper), like :func:`fedlib.report.compare`, but a
    setting without a number of ours reads "pending" (a planned run not in the store) or ``not_run`` (absent)."""
    rows = []
    for k, p in paper.items():
        o = ours.get(k, not_run)
        if o is None or (isinstance(o, float) and math.isnan(o)):
            o = PENDING
        num = not isinstance(o, str)
        rows.append({"setting": k, f"paper ({unit})": float(p), f"ours ({unit})": round(float(o), 2) if num else o,
                     "diff": round(float(o) - float(p), 2) if num else ""})
    return pd.DataFrame(rows).set_index("setting")
