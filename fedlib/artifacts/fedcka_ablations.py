"""FedCKA's ablations (notebook 04): the M-layer ablation with the centralized bound (arXiv Fig. 5 / Appl. Sci.
Fig. 6 left), the between-client similarity variance per layer (Appl. Sci. Fig. 6 right) and its mean level beside
the similarity to the global model, FedAvg beside FedCKA (:func:`similarity_levels`), Table 3 (the similarity inside
ℓ_cka) and Table 4 (training cost per round) — each a tidy table and a figure with the papers' numbers.

The papers' accuracies are CIFAR-10 after 100 rounds and their durations a Titan V's; ours are the dataset, scale
and device the caller names (Tables 3–4's timings: synthetic data of the papers' shapes, :mod:`fedlib.timing`).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .fedcka import PAPER_T3, PAPER_T4
from ..grid import DIVERGED, PENDING, cell, runs_frame, seed_summary
from ..report import compare
from ..results import Pending, Record
from ..similarity import LayerSimilarity
from ..style import PAPER_STYLE, dataset_name, method_style

__all__ = ["PAPER_M", "M_RANGE", "REGULARIZED", "m_layers", "layer_variance", "similarity_levels", "metrics_frame",
           "table3", "table4"]

# arXiv Fig. 5 / Appl. Sci. Fig. 6 (left), CIFAR-10: only these are printed (text); the other M are a figure
PAPER_M = {"FedCKA, M = 2": 67.86, "FedAvg": 64.37, "centralized": 70.0}
M_RANGE = range(1, 8)  # the papers sweep the first M = 1..7 layers of the simple CNN
PAPER_TOP_LAYER = 2  # Appl. Sci. Fig. 6: "the third layer [has] the highest variance of non-similarity" (0-based)
REGULARIZED = ("conv1", "conv2")  # the simple CNN's layers ℓ_cka regularizes at M = 2 ("the first two layers")

Runs = Mapping[str, Record | Pending]


def _score(r: pd.Series) -> float:
    """A summary row's accuracy for the comparisons: NaN pending, -inf diverged."""
    return -np.inf if r["diverged"] and not r["pending"] else r["mean"]


def m_layers(m_runs: Runs, bound_runs: Runs, dataset: str, mu: float
             ) -> tuple[pd.DataFrame, pd.DataFrame, plt.Figure]:
    """The M-layer ablation: a table of ours (FedCKA per M, FedAvg, centralized), the papers' printed numbers
    beside ours, and a figure with two panels — ours over M = 1..7 (an M this scale left out is marked), and the
    papers' CIFAR-10 numbers."""
    mdf = seed_summary(runs_frame(m_runs), ["M"])
    bdf = seed_summary(runs_frame(bound_runs), ["method"]).set_index("method")
    rows = {f"FedCKA, M = {int(r['M'])}": r for _, r in mdf.iterrows()} | {n: bdf.loc[n] for n in bdf.index}
    table = pd.DataFrame({"final test accuracy (%)": [cell(r["mean"], r["std"], r["n"], r["pending"], r["diverged"])
                                                      for r in rows.values()]}, index=pd.Index(list(rows), name="run"))
    ours = {k: _score(r) for k, r in rows.items() if k in PAPER_M}
    versus = compare(PAPER_M, {k: DIVERGED if v == -np.inf else v for k, v in ours.items()},
                     not_run="not run at this scale")
    fig, (ax, axp) = plt.subplots(1, 2, figsize=(9, 3.8), layout="constrained", width_ratios=(2, 1))
    err = np.where(mdf["n"] >= 2, mdf["std"].fillna(0), 0)
    ax.errorbar(mdf["M"], mdf["mean"], yerr=err, capsize=3, label=f"FedCKA (μ={mu:g})", **method_style("FedCKA"))
    for name, label in (("FedAvg", "FedAvg (M = 0)"), ("centralized", "centralized (same rounds × epochs)")):
        if name in bdf.index and np.isfinite(_score(bdf.loc[name])):
            st = method_style("Centralized" if name == "centralized" else name)
            ax.axhline(bdf.loc[name, "mean"], color=st["color"], ls=st["ls"], lw=1.2, label=label)
    missing = [m for m in M_RANGE if m not in set(mdf["M"].astype(int))]
    for m in missing:
        ax.axvspan(m - 0.4, m + 0.4, color="0.95", lw=0)
    ax.set_xticks(list(M_RANGE))
    ax.set_xlim(0.5, 7.5)
    ax.set_xlabel("M: layers regularized, from the input" + (" (grey: not run at this scale)" if missing else ""))
    ax.set_ylabel("final test accuracy (%)")
    ax.set_title(f"ours — {dataset_name(dataset)}, α = 5", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    axp.plot([2], [PAPER_M["FedCKA, M = 2"]], **{**PAPER_STYLE, "label": f"FedCKA, M = 2: {PAPER_M['FedCKA, M = 2']:g} %"})
    for name in ("FedAvg", "centralized"):
        st = method_style("Centralized" if name == "centralized" else name)
        axp.axhline(PAPER_M[name], color=st["color"], ls=st["ls"], lw=1.2, label=f"{name}: {PAPER_M[name]:g} %")
    axp.set_xticks(list(M_RANGE))
    axp.set_xlim(0.5, 7.5)
    axp.set_ylim(60, 72)
    axp.set_xlabel("M")
    axp.set_title("paper — CIFAR-10 (printed values only)", fontsize=9)
    axp.grid(alpha=0.3)
    axp.legend(fontsize=7, loc="lower right")
    fig.suptitle("FedCKA arXiv Fig. 5 / Appl. Sci. Fig. 6 (left): how many layers to regularize", fontsize=10)
    return table, versus, fig


def layer_variance(sims: Mapping[str, Mapping[int, LayerSimilarity | Pending]], dataset: str
                   ) -> tuple[pd.DataFrame, plt.Figure | None]:
    """Per layer, the variance (and mean) over client pairs of the linear CKA between the clients' final local
    models, averaged over seeds; the figure marks the layer the paper finds most variable."""
    done = {k: [s for s in v.values() if not isinstance(s, Pending)] for k, v in sims.items()}
    var = {k: pd.Series(np.mean([s.pair_var() for s in v], 0), v[0].taps) for k, v in done.items() if v}
    mean = {k: pd.Series(np.mean([s.pair_mean() for s in v], 0), v[0].taps) for k, v in done.items() if v}
    if not var:
        return pd.DataFrame({"variance": [PENDING]}), None
    table = pd.DataFrame({**{f"{k}: variance": v for k, v in var.items()},
                          **{f"{k}: mean": v for k, v in mean.items()}}).rename_axis("layer")
    fig, ax = plt.subplots(figsize=(6.5, 3.8), layout="constrained")
    for name, v in var.items():
        ax.plot(range(len(v)), v.values, label=name, **method_style(name))
    taps = list(next(iter(var.values())).index)
    ax.axvspan(PAPER_TOP_LAYER - 0.3, PAPER_TOP_LAYER + 0.3, color="0.9", lw=0,
               label="paper: highest variance (third layer)")
    ax.set_xticks(range(len(taps)), taps)
    ax.set_yscale("log")
    ax.set_xlabel("layer (input → output)")
    ax.set_ylabel("variance of CKA over client pairs")
    ax.set_title(f"FedCKA Appl. Sci. Fig. 6 (right): between-client similarity variance, α = 5 — "
                 f"{dataset_name(dataset)}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return table.apply(lambda c: c.map(lambda x: float(f"{x:.6g}"))), fig


_LEVELS = (("between clients", "mean over client pairs"), ("client to global", "mean over clients"))


def similarity_levels(sims: Mapping[str, Mapping[int, LayerSimilarity | Pending]], dataset: str,
                      regularized: Sequence[str] = REGULARIZED) -> tuple[pd.DataFrame, plt.Figure | None]:
    """Per layer, the mean linear CKA between the clients' final local models (over client pairs) and from each
    client's final local model to the final global model (over clients), each averaged over the seeds, one line per
    run label of ``sims`` (run label → seed → LayerSimilarity or Pending: FedAvg beside FedCKA); ``regularized``:
    the layers ℓ_cka acts on, shaded.

    The table is tidy: one row per comparison, layer and run, with the mean over the seeds whose similarity is
    stored, their standard deviation (ddof 1; NaN for one seed), and how many seeds are stored and pending. No
    stored seed at all: a "pending" table and no figure."""
    done = {k: [s for s in v.values() if not isinstance(s, Pending)] for k, v in sims.items()}
    n_pending = {k: sum(isinstance(s, Pending) for s in v.values()) for k, v in sims.items()}
    if not any(done.values()):
        return pd.DataFrame({"CKA": [PENDING]}), None
    rows = []
    for name, ss in done.items():
        if not ss:
            continue
        per_seed = {_LEVELS[0][0]: np.array([s.pair_mean() for s in ss]),
                    _LEVELS[1][0]: np.array([s.to_global.mean(0) for s in ss])}
        for comparison, values in per_seed.items():
            for i, layer in enumerate(ss[0].taps):
                col = values[:, i]
                rows.append({"comparison": comparison, "layer": layer, "run": name, "mean CKA": float(col.mean()),
                             "std over seeds": float(col.std(ddof=1)) if len(col) > 1 else np.nan,
                             "seeds": len(col), "pending seeds": n_pending[name],
                             "regularized by ℓ_cka": layer in regularized})
    table = pd.DataFrame(rows)
    table[["mean CKA", "std over seeds"]] = table[["mean CKA", "std over seeds"]].map(
        lambda x: float(f"{x:.6g}") if np.isfinite(x) else x)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.9), layout="constrained", sharey=True)
    for ax, (comparison, over) in zip(axes, _LEVELS):
        part = table[table["comparison"] == comparison]
        taps = list(dict.fromkeys(part["layer"]))
        for j, t in enumerate(taps):
            if t in regularized:
                ax.axvspan(j - 0.35, j + 0.35, color="0.92", lw=0,
                           label="regularized by ℓ_cka" if t == next(x for x in taps if x in regularized) else None)
        for name, run in part.groupby("run", sort=False):
            x = [taps.index(t) for t in run["layer"]]
            err = run["std over seeds"].fillna(0).to_numpy() if (run["seeds"] > 1).all() else None
            n, n_out = int(run["seeds"].iloc[0]), int(run["pending seeds"].iloc[0])
            seeds = f"{n} of {n + n_out} seeds" if n_out else f"{n} seed{'s' if n > 1 else ''}"
            ax.errorbar(x, run["mean CKA"], yerr=err, capsize=3,
                        label=f"{name} ({seeds}{', ± std' if err is not None else ''})", **method_style(name))
        ax.set_xticks(range(len(taps)), taps)
        ax.set_xlabel("layer (input → output)")
        ax.set_title(f"{comparison} ({over})", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("linear CKA at the end of training")
    fig.suptitle(f"Mean layer similarity, FedAvg beside FedCKA, α = 5 — {dataset_name(dataset)}", fontsize=10)
    return table, fig


def metrics_frame(metric_runs: Runs) -> pd.DataFrame:
    """Table 3's runs (:func:`fedlib.grid.runs_frame`) with a ``metric`` column: the similarity inside ℓ_cka."""
    df = runs_frame(metric_runs)
    return df.assign(metric=[n.split(" | ")[0] for n in df["name"]])


def table3(metric_runs: Runs, timed: pd.DataFrame | None, timing_planned: bool) -> pd.DataFrame:
    """Table 3 beside ours: accuracy per similarity metric, and the duration per round as a ratio to FedAvg's —
    from the runs' own records and from the interleaved timing (``timed``; None: pending)."""
    t3 = seed_summary(metrics_frame(metric_runs), ["metric"]).set_index("metric") if metric_runs else pd.DataFrame()
    base = t3.loc["None (FedAvg)", "s / round"] if "None (FedAvg)" in t3.index else np.nan
    rows = []
    for m, (p_acc, p_s) in PAPER_T3.items():
        r = t3.loc[m] if m in t3.index else None
        ran = r is not None and not r["pending"] and not r["diverged"]
        rows.append({"metric": m, "paper acc (%)": p_acc,
                     "ours acc (%)": "not run at this scale" if r is None
                     else cell(r["mean"], r["std"], r["n"], r["pending"], r["diverged"]),
                     "paper s / round": p_s, "paper × FedAvg": round(p_s / PAPER_T3["None (FedAvg)"][1], 2),
                     "ours × FedAvg (runs)": round(r["s / round"] / base, 2) if ran and np.isfinite(base) else "",
                     "ours × FedAvg (timed)": PENDING if timing_planned and timed is None else
                     round(timed.loc[m, "× FedAvg"], 2) if timed is not None else "not timed"})
    return pd.DataFrame(rows).set_index("metric")


def table4(costs: Mapping[str, pd.DataFrame | None], setups: Mapping[str, Mapping[str, Any]], device: str
           ) -> tuple[pd.DataFrame, plt.Figure | None]:
    """Table 4 beside ours: seconds per round and the ratio to FedAvg per model and method (ours: synthetic data
    of the papers' shapes on ``device``); a bar figure of the ratios when both models were timed."""
    models = (("simple CNN", "cnn"), ("ResNet-50", "r50"))
    rows = []
    for model, key in models:
        c = costs.get(key)
        for m, p in PAPER_T4[model].items():
            def ours(col: str, nd: int) -> Any:
                return "not timed at this scale" if key not in costs else PENDING if c is None \
                    else round(c.loc[m, col], nd)
            rows.append({"model": model, "method": m, "paper s / round": p,
                         "paper × FedAvg": round(p / PAPER_T4[model]["FedAvg"], 2),
                         "ours s / round": ours("s / round", 3), "ours × FedAvg": ours("× FedAvg", 2)})
    table = pd.DataFrame(rows).set_index(["model", "method"])
    if any(costs.get(k) is None for _, k in models):
        return table, None
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), layout="constrained")
    for ax, (model, key) in zip(axes, models):
        ms = list(PAPER_T4[model])
        x = np.arange(len(ms))
        ax.bar(x - 0.2, [PAPER_T4[model][m] / PAPER_T4[model]["FedAvg"] for m in ms], 0.4, color="0.75",
               label="paper (Titan V)")
        ax.bar(x + 0.2, [costs[key].loc[m, "× FedAvg"] for m in ms], 0.4,
               color=[method_style(m)["color"] for m in ms], label=f"ours ({device})")
        ax.set_xticks(x, ms, fontsize=8)
        ax.axhline(1, color="0.4", lw=0.8)
        ax.set_ylabel("training time per round / FedAvg's")
        ax.set_title(f"{model} — {setups[key]['title']}", fontsize=9)
        ax.legend(fontsize=8)
    fig.suptitle("FedCKA Table 4: training cost per round relative to FedAvg (synthetic data of the papers' shapes)",
                 fontsize=10)
    return table, fig
