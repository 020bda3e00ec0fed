"""FedCKA's between-client similarity at the end of training (notebook 04), FedAvg beside FedCKA:
per layer, the variance of linear CKA over client pairs (Appl. Sci. Fig. 6 right) and its mean
level beside the similarity to the global model (:func:`similarity_levels`) — each a tidy table and
a figure over the stored seeds.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from fedlib.companion.plots import sweep, t_interval
from fedlib.companion.results import Pending
from fedlib.companion.similarity import LayerSimilarity
from fedlib.companion.style import dataset_name
from fedlib.companion.verdicts import PENDING

__all__ = ["REGULARIZED", "layer_variance", "describe_variance", "similarity_levels",
           "describe_levels"]

# Appl. Sci. Fig. 6: "the third layer [has] the highest variance of non-similarity" (0-based)
PAPER_TOP_LAYER = 2
# the simple CNN's layers ℓ_cka regularizes at M = 2 ("the first two layers")
REGULARIZED = ("conv1", "conv2")


def _seed_label(name: str, done: int, total: int) -> str:
    return f"{name} (n={done} of {total} planned)" if done < total else f"{name} (n={done})"


def layer_variance(sims: Mapping[str, Mapping[int, LayerSimilarity | Pending]], dataset: str
                   ) -> tuple[pd.DataFrame, plt.Figure | None]:
    """Per layer, the variance (and mean) over client pairs of the linear CKA between the clients'
    final local models, averaged over the stored seeds; the figure draws the variance per layer (log
    scale: the seeds' mean with the 95 % t interval over them), marks the layer the paper finds most
    variable, and says in its title how much lower each run's mean similarity is (a lower similarity
    spreads more over the pairs)."""
    done = {k: [s for s in v.values() if not isinstance(s, Pending)] for k, v in sims.items()}
    var = {k: pd.Series(np.mean([s.pair_var() for s in v], 0), v[0].taps)
           for k, v in done.items() if v}
    mean = {k: pd.Series(np.mean([s.pair_mean() for s in v], 0), v[0].taps)
            for k, v in done.items() if v}
    if not var:
        return pd.DataFrame({"variance": [PENDING]}), None
    table = pd.DataFrame({**{f"{k}: variance": v for k, v in var.items()},
                          **{f"{k}: mean": v for k, v in mean.items()}}).rename_axis("layer")
    fig, ax = plt.subplots(figsize=(7.5, 4.4), layout="constrained")
    taps = list(next(iter(var.values())).index)
    ax.axvspan(PAPER_TOP_LAYER - 0.3, PAPER_TOP_LAYER + 0.3, color="0.9", lw=0,
               label=f"paper: highest variance (third layer, {taps[PAPER_TOP_LAYER]})")
    points = {_seed_label(k, len(v), len(sims[k])):
              {float(i): {s: float(x.pair_var()[i])
                          for s, x in sims[k].items() if not isinstance(x, Pending)}
               for i in range(len(taps))}
              for k, v in done.items() if v}
    note = sweep(ax, points, xlabel="layer (input → output)",
                 ylabel="variance of CKA over client pairs", logy=True)
    ax.set_xticks(range(len(taps)), taps)
    n = len(done[next(iter(var))][0].clients)
    levels = "; ".join(f"{k.split(' (')[0]}: mean CKA {m.min():.2f}–{m.max():.2f}"
                       for k, m in mean.items())
    ax.set_title(f"FedCKA Appl. Sci. Fig. 6 (right): variance over the {n * (n - 1) // 2} client "
                 f"pairs of the between-client CKA, α = 5 — {dataset_name(dataset)}\n{note} (a "
                 f"seed's point: its variance over pairs)\n{levels}: the less similar the pairs, "
                 "the larger their spread", fontsize=9)
    return table.apply(lambda c: c.map(lambda x: float(f"{x:.6g}"))), fig


def describe_variance(table: pd.DataFrame) -> str:
    """What the variance figure shows: each run's layer of highest variance against the paper's
    third layer, and the ratio of FedCKA's variance to FedAvg's per layer with the mean CKA that
    explains it; or that it is pending."""
    runs = [c[: -len(": variance")] for c in table.columns if c.endswith(": variance")]
    if not runs:
        return "The between-client variance is pending: no run's clients' models are stored yet."
    top = "; ".join(f"{r}: highest at {table[f'{r}: variance'].idxmax()} "
                    f"({table[f'{r}: variance'].max():.2g})"
                    for r in runs)
    out = (f"Variance of CKA over client pairs (mean over seeds) — {top}; the paper: the third "
           f"layer ({table.index[PAPER_TOP_LAYER]}).")
    avg = next((r for r in runs if r.startswith("FedAvg")), None)
    cka = next((r for r in runs if r.startswith("FedCKA")), None)
    if avg and cka:
        ratio = table[f"{cka}: variance"] / table[f"{avg}: variance"]
        out += (f" FedCKA's variance is {ratio.min():.2g}× FedAvg's at {ratio.idxmin()} and "
                f"{ratio.max():.2g}× at {ratio.idxmax()}, "
                "because its clients are less alike: mean CKA between clients "
                f"{table[f'{cka}: mean'].min():.2f}–{table[f'{cka}: mean'].max():.2f} against "
                f"FedAvg's {table[f'{avg}: mean'].min():.2f}–{table[f'{avg}: mean'].max():.2f}.")
    return out


_LEVELS = (("between clients", "mean over client pairs"),
           ("client to global", "mean over clients"))


def similarity_levels(sims: Mapping[str, Mapping[int, LayerSimilarity | Pending]], dataset: str,
                      regularized: Sequence[str] = REGULARIZED
                      ) -> tuple[pd.DataFrame, plt.Figure | None]:
    """Per layer, the mean linear CKA between the clients' final local models (over client pairs)
    and from each client's final local model to the final global model (over clients), one line per
    run label of ``sims`` (run label → seed → LayerSimilarity or Pending: FedAvg beside FedCKA);
    ``regularized``: the layers ℓ_cka acts on, shaded. Each point is the seeds' mean with the 95 % t
    interval over the stored seeds.

    The table is tidy: one row per comparison, layer and run, with the mean over the seeds whose
    similarity is stored, their standard deviation (ddof 1; NaN for one seed), the half-width of the
    95 % t interval, and how many seeds are stored and pending. No stored seed at all: a "pending"
    table and no figure."""
    done = {k: {s: v for s, v in by.items() if not isinstance(v, Pending)}
            for k, by in sims.items()}
    if not any(done.values()):
        return pd.DataFrame({"CKA": [PENDING]}), None
    per_seed = {name: {_LEVELS[0][0]: {s: v.pair_mean() for s, v in ss.items()},
                       _LEVELS[1][0]: {s: v.to_global.mean(0) for s, v in ss.items()}}
                for name, ss in done.items() if ss}
    rows = []
    for name, by in per_seed.items():
        taps = next(iter(done[name].values())).taps
        for comparison, values in by.items():
            for i, layer in enumerate(taps):
                col = np.array([v[i] for v in values.values()])
                rows.append({"comparison": comparison, "layer": layer, "run": name,
                             "mean CKA": float(col.mean()),
                             "std over seeds": float(col.std(ddof=1)) if len(col) > 1 else np.nan,
                             "95 % t (±)": t_interval(col)[1], "seeds": len(col),
                             "pending seeds": len(sims[name]) - len(col),
                             "regularized by ℓ_cka": layer in regularized})
    table = pd.DataFrame(rows)
    cols = ["mean CKA", "std over seeds", "95 % t (±)"]
    table[cols] = table[cols].map(lambda x: float(f"{x:.6g}") if np.isfinite(x) else x)
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.3), layout="constrained", sharey=True)
    notes = []
    for ax, (comparison, over) in zip(axes, _LEVELS):
        taps = list(dict.fromkeys(table.loc[table["comparison"] == comparison, "layer"]))
        first = next((x for x in taps if x in regularized), None)
        for j, t in enumerate(taps):
            if t in regularized:
                ax.axvspan(j - 0.35, j + 0.35, color="0.92", lw=0,
                           label="regularized by ℓ_cka" if t == first else None)
        notes.append(sweep(ax, {_seed_label(name, len(by[comparison]), len(sims[name])):
                                {float(i): {s: float(v[i]) for s, v in by[comparison].items()}
                                 for i in range(len(taps))} for name, by in per_seed.items()},
                           xlabel="layer (input → output)",
                           ylabel="linear CKA at the end of training"))
        ax.set_xticks(range(len(taps)), taps)
        ax.set_title(f"{comparison} ({over})", fontsize=9)
        ax.legend(fontsize=8, loc="lower right")
    axes[1].set_ylabel("")
    fig.suptitle("Mean layer similarity, FedAvg beside FedCKA, α = 5 — "
                 f"{dataset_name(dataset)}\n{notes[0]} (a seed's point: its mean over pairs / "
                 "clients)", fontsize=10)
    return table, fig


def describe_levels(table: pd.DataFrame, regularized: Sequence[str] = REGULARIZED) -> str:
    """What the similarity-level figure shows: per run, the mean CKA of the regularized layers
    between clients and to the global model (mean over seeds), and FedCKA − FedAvg there; or that it
    is pending."""
    if "run" not in table:
        return "The similarity levels are pending: no run's clients' models are stored yet."
    reg = table[table["regularized by ℓ_cka"]]
    parts = []
    for comparison, g in reg.groupby("comparison", sort=False):
        by = {r: d.set_index("layer")["mean CKA"] for r, d in g.groupby("run", sort=False)}
        parts.append(f"{comparison}: " + ", ".join(
            f"{r} " + "/".join(f"{v[t]:.3f}" for t in regularized if t in v)
            for r, v in by.items()))
    return (f"Mean linear CKA of the layers ℓ_cka regularizes ({' / '.join(regularized)}), "
            "mean over the stored seeds — " + "; ".join(parts)
            + ". The paper's premise is that these stay as similar as without ℓ_cka (FedAvg).")
