"""FedCKA's layer similarity (notebook 02, §3.1 of both versions): linear CKA per layer between each client's final
local model and the global model (arXiv Fig. 2), between the clients (Appl. Sci. Fig. 2, the simple CNN and
ResNet-50) and its variance across client pairs (Appl. Sci. Fig. 6) — tables and figures.

    table = layer_table(sims); print(layer_orders(table))
    to_global_figure(sim, setup); between_figure(sim, setup); client_matrices_figure(sim, setup)

Neither version prints CKA values (the figures are the result), so there is no paper column: the papers' statement
is qualitative — early layers are similar across clients, later layers less (:data:`PAPER_SIMILAR_LAYERS`).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..grid import PENDING
from ..results import Pending, Record
from ..similarity import LayerSimilarity, cka_heatmap
from ..style import dataset_name

__all__ = ["PAPER_SIMILAR_LAYERS", "R50_TAPS", "N_EVAL", "layer_table", "layer_orders", "setup_text",
           "describe_runs", "to_global_figure", "between_figure", "client_matrices_figure", "resnet50_left_out",
           "resnet50_artifact",
           "runs_table"]

# §3.1 (both versions): "the first two naturally similar layers are the two layers closest to the input"; for
# ResNets (Appl. Sci.) "the initial convolutional layer and the first post-residual block"
PAPER_SIMILAR_LAYERS = {"simple CNN": ("conv1", "conv2"), "ResNet-50": ("stem", "layer1")}
# Appl. Sci. Fig. 2 (ResNet-50): the initial convolution, the four blocks, the two projector layers, the output
R50_TAPS = ("stem", "layer1", "layer2", "layer3", "layer4", "l1", "l2", "l3")
N_EVAL = {"smoke": 200, "quick": 2000, "paper": 10_000}  # test images for CKA per scale (paper: the whole test set)
PAPER_DATASET = "CIFAR-10"
# two distinct looks for the two comparisons, kept across the figures
_TO_CLIENTS = dict(color="#4e79a7", marker="o", ls="-")
_TO_GLOBAL = dict(color="#f28e2b", marker="s", ls="--")

Sims = Mapping[int, "LayerSimilarity | Pending"]


def layer_table(sims: Sims) -> pd.DataFrame:
    """Per layer, CKA(client, global) mean and std over the clients and CKA(client, client) mean and variance over
    the client pairs, averaged over the seeds; one "pending" cell while a seed's similarity is missing."""
    done = [s for s in sims.values() if not isinstance(s, Pending)]
    if not done or len(done) < len(sims):
        return pd.DataFrame({"CKA": [PENDING]})
    return (sum(s.frame() for s in done) / len(done)).round(6)


def layer_orders(table: pd.DataFrame) -> str:
    """The papers' statement and our layers ranked from the most similar, to the global model and between clients."""
    def order(col: str) -> str:
        return " > ".join(table[col].sort_values(ascending=False).index)

    first = " and ".join(PAPER_SIMILAR_LAYERS["simple CNN"])
    return "\n".join([f"Paper (§3.1, both versions): the first two layers ({first}) are the most similar; late "
                      "layers are not.",
                      f"Ours, most similar to the global model first:  {order('CKA(client, global) mean')}",
                      f"Ours, most similar between clients first:      {order('CKA(client, client) mean')}"])


def setup_text(cfg: Any, dataset: str, seed: int) -> str:
    """The run's setup for the figures' titles."""
    return (f"{dataset_name(dataset)}, IID, {cfg.num_clients} clients, {cfg.rounds} rounds × {cfg.local_epochs} "
            f"local epoch(s), seed {seed}")


def describe_runs(records: Mapping[int, Any], sim: LayerSimilarity | None, dataset: str, n_eval: int) -> str:
    """One line per stored run (rounds, epochs, global test accuracy, minutes, device) and what CKA is computed on
    (or that it is pending)."""
    lines = [f"seed {s}: {r.cfg.rounds} rounds × {r.cfg.local_epochs} local epoch(s) of FedAvg on {dataset}: global "
             f"test accuracy {100 * r.final('test_acc'):.2f} % ({r.provenance['wall_time_s'] / 60:.1f} min on "
             f"{r.provenance['device']})" for s, r in records.items() if isinstance(r, Record)]
    if sim is None:
        return "\n".join(lines + ["pending: a run or its clients' models are not in the store (train=False)"])
    n_test = next((r.cfg.n_test for r in records.values() if isinstance(r, Record)), None)
    n = n_eval if n_test is None else min(n_eval, n_test)
    return "\n".join(lines + [f"linear CKA on {n} test images · {len(sim.clients)} clients · layers "
                              f"{', '.join(sim.taps)}"])


def _range(values: np.ndarray) -> tuple[float, float]:
    """A colour range set by the data: from a little under its lowest value to its highest (at most 1)."""
    lo, hi = float(np.nanmin(values)), float(np.nanmax(values))
    pad = 0.08 * max(hi - lo, 1e-3)
    return lo - pad, min(1.0, hi + pad)


def to_global_figure(sim: LayerSimilarity, setup: str) -> plt.Figure:
    """arXiv Fig. 2: CKA(local, global) per client and layer, annotated with 3 decimals; the colour scale spans the
    data's range (not 0–1), so the fall from the early layers to the late ones shows."""
    fig, ax = plt.subplots(figsize=(8, 5.2), layout="constrained")
    vmin, vmax = _range(sim.to_global)
    im = cka_heatmap(ax, sim.to_global, [f"client {c}" for c in sim.clients], list(sim.taps), vmin=vmin, vmax=vmax,
                     fmt="{:.3f}", colorbar=False)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.02,
                 label=f"linear CKA(local, global) — colour scale {vmin:.3f} to {vmax:.3f}")
    ax.set_xlabel("layer (input → output)")
    ax.set_ylabel("local model (final round, before aggregation)")
    ax.set_title(f"FedCKA arXiv Fig. 2: CKA(local, global) per layer (3 decimals; colours span the data's range)\n"
                 f"{setup} — the paper used {PAPER_DATASET}", fontsize=10)
    return fig


def _mean_panel(ax: plt.Axes, frame: pd.DataFrame, n_clients: int) -> None:
    """Mean ± std of CKA per layer, between clients and to the global model (Appl. Sci. Fig. 2)."""
    x = range(len(frame))
    n_pairs = n_clients * (n_clients - 1) // 2
    ax.errorbar(x, frame["CKA(client, client) mean"], yerr=frame["CKA(client, client) var"] ** 0.5, capsize=3,
                label=f"between clients (mean ± std over {n_pairs} pairs)", **_TO_CLIENTS)
    ax.errorbar(x, frame["CKA(client, global) mean"], yerr=frame["CKA(client, global) std"], capsize=3,
                label=f"client vs global (mean ± std over {n_clients} clients)", **_TO_GLOBAL)
    ax.set_xticks(list(x), list(frame.index))
    ax.set_xlabel("layer (input → output)")
    ax.set_ylabel("linear CKA")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def between_figure(sim: LayerSimilarity, setup: str) -> plt.Figure:
    """Appl. Sci. Fig. 2 and Fig. 6: the mean (± std) CKA per layer between clients and to the global model, and
    its variance across client pairs (log scale)."""
    frame, n = sim.frame(), len(sim.clients)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    _mean_panel(ax1, frame, n)
    ax1.set_title("mean similarity per layer (Appl. Sci. Fig. 2)", fontsize=10)
    x = range(len(frame))
    ax2.plot(x, frame["CKA(client, client) var"], label=f"between clients ({n * (n - 1) // 2} pairs)", **_TO_CLIENTS)
    ax2.plot(x, frame["CKA(client, global) std"] ** 2, label=f"client vs global ({n} clients)", **_TO_GLOBAL)
    ax2.set_yscale("log")
    ax2.set_xticks(list(x), list(frame.index))
    ax2.set_xlabel("layer (input → output)")
    ax2.set_ylabel("variance of linear CKA")
    ax2.set_title("variance of similarity per layer (Appl. Sci. Fig. 6)", fontsize=10)
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=8)
    fig.suptitle(f"FedCKA (Appl. Sci.): CKA similarity between clients at the end of training\n{setup} — the paper "
                 f"used {PAPER_DATASET}", fontsize=11)
    return fig


def client_matrices_figure(sim: LayerSimilarity, setup: str, taps: Sequence[str] | None = None) -> plt.Figure:
    """Appl. Sci. Fig. 2 (simple CNN, every layer): the clients × clients CKA matrix per layer on one colour scale
    set by the off-diagonal values (the diagonal, a client with itself, is left blank), so the early layers' near-1
    similarity stands apart from the later layers' lower one; each panel's title gives its mean and minimum."""
    taps = list(taps or sim.taps)
    off = ~np.eye(len(sim.clients), dtype=bool)
    mats = {t: np.where(off, sim.between[sim.taps.index(t)], np.nan) for t in taps}
    vmin, vmax = _range(np.stack(list(mats.values())))
    cols = min(4, len(taps))
    rows = int(np.ceil(len(taps) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.1 * cols + 1, 3.0 * rows + 0.6), layout="constrained",
                             squeeze=False)
    ticks = list(map(str, sim.clients))
    for ax, (t, m) in zip(axes.flat, mats.items()):
        im = cka_heatmap(ax, m, ticks, ticks, vmin=vmin, vmax=vmax, annotate=False, colorbar=False)
        ax.set_title(f"{t}: mean {np.nanmean(m):.3f}, min {np.nanmin(m):.3f}", fontsize=9)
        ax.set_xlabel("client", fontsize=8)
        ax.set_ylabel("client", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in axes.flat[len(taps):]:
        ax.set_visible(False)
    fig.colorbar(im, ax=axes, fraction=0.025, pad=0.02,
                 label=f"linear CKA between two clients — colour scale {vmin:.3f} to {vmax:.3f}")
    fig.suptitle(f"FedCKA Appl. Sci. Fig. 2: CKA between clients per layer (diagonal blank) — {setup}; the paper "
                 f"used {PAPER_DATASET}", fontsize=10)
    return fig


R50_PART = "Appl. Sci. Fig. 2: FedAvg on IID clients, ResNet-50"  # its name in the plan's scope


def resnet50_left_out(sims50: Sims, left_out: Mapping[str, str], scale: str) -> str | None:
    """Why the ResNet-50 panel is not drawn (not run at this scale, with the plan's reason, or pending), or None."""
    if not sims50:
        return f"not run at scale={scale}: {left_out.get(R50_PART, next(iter(left_out.values()), ''))}"
    if any(isinstance(v, Pending) for v in sims50.values()):
        return "pending (a run or its clients' models are not in the store)"
    return None


def resnet50_artifact(sim: LayerSimilarity, record: Record, dataset: str) -> tuple[pd.DataFrame, plt.Figure]:
    """Appl. Sci. Fig. 2's ResNet-50 panel: the per-layer table and the mean CKA per layer between clients and to
    the global model, the two layers the paper names as similar shaded."""
    frame = sim.frame()
    fig, ax = plt.subplots(figsize=(7.5, 3.9), layout="constrained")
    for t in PAPER_SIMILAR_LAYERS["ResNet-50"]:
        if t in frame.index:
            i = list(frame.index).index(t)
            ax.axvspan(i - 0.35, i + 0.35, color="0.92", lw=0)
    _mean_panel(ax, frame, len(sim.clients))
    ax.set_title(f"FedCKA Appl. Sci. Fig. 2 (ResNet-50): CKA between clients — {dataset_name(dataset)}, IID, seed "
                 f"{record.cfg.seed}, test acc {100 * record.final('test_acc'):.1f} %\n(shaded: the stem and the "
                 f"first post-residual block, the paper's similar layers on {PAPER_DATASET})", fontsize=9)
    return frame.round(6), fig


def runs_table(records: Mapping[int, Any], n_eval: int) -> pd.DataFrame:
    """One row per seed: rounds, local epochs, the global model's final test accuracy, ``n_eval``, wall time, the
    record's key ("pending" where a run is not stored)."""
    rows = [{"seed": s, "rounds": r.cfg.rounds, "local epochs": r.cfg.local_epochs,
             "test acc (%)": round(100 * r.final("test_acc"), 2) if isinstance(r, Record) else PENDING,
             "n_eval": n_eval, "wall time (s)": r.provenance["wall_time_s"] if isinstance(r, Record) else PENDING,
             "record": r.key} for s, r in records.items()]
    return pd.DataFrame(rows).set_index("seed")
