"""FedCKA's layer similarity (notebook 02, §3.1 of both versions): linear CKA per layer between each
client's final local model and the global model (arXiv Fig. 2), between the clients (Appl. Sci. Fig.
2, the simple CNN and ResNet-50) and its variance across client pairs (Appl. Sci. Fig. 6) — tables
and figures.

    table = layer_table(sims); print(layer_orders(table))
    done = stored(sims)  # the seeds whose clients' models are stored
    to_global_figure(done[s], setup); between_figure(done, setup)
    client_matrices_figure(done[s], setup)
    describe_to_global(done[s], s); describe_between(sims); describe_matrices(done[s], s)

Neither version prints CKA values (the figures are the result), so there is no paper column: the
papers' statement is qualitative — early layers are similar across clients, later layers less
(:data:`PAPER_SIMILAR_LAYERS`).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from fedlib.companion.verdicts import PENDING
from fedlib.companion.plots import offdiag_range, similarity_heatmap, sweep
from fedlib.companion.provenance import worker_seconds
from fedlib.companion.results import Pending, Record
from fedlib.companion.similarity import LayerSimilarity
from fedlib.companion.style import dataset_name

__all__ = [
    "PAPER_SIMILAR_LAYERS", "R50_TAPS", "N_EVAL", "layer_table", "layer_orders", "setup_text",
    "describe_runs", "stored", "to_global_figure", "describe_to_global", "between_figure",
    "describe_between", "client_matrices_figure", "describe_matrices", "resnet50_left_out",
    "resnet50_artifact", "seed_table"
]

# §3.1 (both versions): "the first two naturally similar layers are the two layers closest to the
# input"; for ResNets (Appl. Sci.) "the initial convolutional layer and the first post-residual
# block"
PAPER_SIMILAR_LAYERS = {"simple CNN": ("conv1", "conv2"), "ResNet-50": ("stem", "layer1")}
# Appl. Sci. Fig. 2 (ResNet-50): the initial convolution, the four blocks, the two projector layers,
# the output
R50_TAPS = ("stem", "layer1", "layer2", "layer3", "layer4", "l1", "l2", "l3")
# test images for CKA per scale (paper: the whole test set)
N_EVAL = {"smoke": 200, "quick": 2000, "paper": 10_000}
PAPER_DATASET = "CIFAR-10"
# two distinct looks for the two comparisons, kept across the figures
_TO_CLIENTS = dict(color="#4e79a7", marker="o", ls="-")
_TO_GLOBAL = dict(color="#f28e2b", marker="s", ls="--")

Sims = Mapping[int, "LayerSimilarity | Pending"]


def layer_table(sims: Sims) -> pd.DataFrame:
    """Per layer, CKA(client, global) mean and std over the clients and CKA(client, client) mean and
    variance over the client pairs, averaged over the seeds; one "pending" cell while a seed's
    similarity is missing."""
    done = [s for s in sims.values() if not isinstance(s, Pending)]
    if not done or len(done) < len(sims):
        return pd.DataFrame({"CKA": [PENDING]})
    return (sum(s.frame() for s in done) / len(done)).round(6)


def layer_orders(table: pd.DataFrame) -> str:
    """The papers' statement and our layers ranked from the most similar, to the global model and
    between clients."""
    def order(col: str) -> str:
        return " > ".join(table[col].sort_values(ascending=False).index)

    first = " and ".join(PAPER_SIMILAR_LAYERS["simple CNN"])
    return "\n".join([f"Paper (§3.1, both versions): the first two layers ({first}) are the most "
                      "similar; late layers are not.",
                      "Ours, most similar to the global model first:  "
                      f"{order('CKA(client, global) mean')}",
                      "Ours, most similar between clients first:      "
                      f"{order('CKA(client, client) mean')}"])


def setup_text(cfg: Any, dataset: str, seed: int | None = None) -> str:
    """The run's setup for the figures' titles (with ``seed`` for a figure that shows one seed)."""
    return (f"{dataset_name(dataset)}, IID, {cfg.num_clients} clients, {cfg.rounds} rounds × "
            f"{cfg.local_epochs} local epoch(s)" + ("" if seed is None else f", seed {seed}"))


def describe_runs(records: Mapping[int, Any], sim: LayerSimilarity | None, dataset: str,
                  n_eval: int) -> str:
    """One line per stored run (rounds, epochs, global test accuracy, minutes, device) and what CKA
    is computed on (or that it is pending)."""
    lines = [f"seed {s}: {r.cfg.rounds} rounds × {r.cfg.local_epochs} local epoch(s) of FedAvg on "
             f"{dataset}: global test accuracy {100 * r.final('test_acc'):.2f} % "
             f"({worker_seconds(r) / 60:.1f} min on "
             f"{r.provenance['device']})" for s, r in records.items() if isinstance(r, Record)]
    if sim is None:
        return "\n".join(
            lines + ["pending: a run or its clients' models are not in the store (train=False)"])
    n_test = next((r.cfg.n_test for r in records.values() if isinstance(r, Record)), None)
    n = n_eval if n_test is None else min(n_eval, n_test)
    return "\n".join(lines + [f"linear CKA on {n} test images · {len(sim.clients)} clients · "
                              f"layers {', '.join(sim.taps)}"])


def stored(sims: Sims) -> dict[int, LayerSimilarity]:
    """The seeds whose similarity is stored (a pending seed left out), in seed order."""
    return {s: sims[s] for s in sorted(sims) if not isinstance(sims[s], Pending)}


def _seeds_text(sims: Sims) -> str:
    """``"seeds 0, 1, 2 (3, 4 pending)"``: the stored seeds a figure or sentence averages over."""
    done, waiting = list(stored(sims)), [s for s in sorted(sims) if isinstance(sims[s], Pending)]
    return (f"seed{'s' if len(done) != 1 else ''} {', '.join(map(str, done))}"
            + (f" ({', '.join(map(str, waiting))} pending)" if waiting else ""))


def _heatmap_colorbar(fig: plt.Figure, im: Any, ax: Any, what: str, lo: float, hi: float) -> None:
    fig.colorbar(im, ax=ax, fraction=0.046 if not isinstance(ax, np.ndarray) else 0.025,
                 pad=0.02).set_label(
                     f"linear CKA {what}\ncolours span the cells' range {lo:.3f}–{hi:.3f}",
                     fontsize=8)


def to_global_figure(sim: LayerSimilarity, setup: str) -> plt.Figure:
    """arXiv Fig. 2 for one seed (``setup`` names it): CKA(local, global) per client and layer, the
    colours spanning the cells' own range (on 0–1 every cell would read alike) with each value
    written in its cell; the title gives the fall of the mean over clients from the first layer to
    the least similar one."""
    fig, ax = plt.subplots(figsize=(8.5, 5.4), layout="constrained")
    lo, hi = offdiag_range([sim.to_global])
    im = similarity_heatmap(ax, sim.to_global, annotate=len(sim.clients) <= 10 and
                            len(sim.taps) <= 10, digits=3)
    ax.set_xticks(np.arange(len(sim.taps)) + 0.5, list(sim.taps), rotation=0, ha="center")
    ax.set_yticks(
        np.arange(len(sim.clients)) + 0.5, [f"client {c}" for c in sim.clients], fontsize=8)
    _heatmap_colorbar(fig, im, ax, "(local, global)", lo, hi)
    mean = sim.to_global.mean(0)
    low = int(np.argmin(mean))
    ax.set_xlabel("layer (input → output)")
    ax.set_ylabel("local model (final round, before aggregation)")
    ax.set_title(
        f"FedCKA arXiv Fig. 2: CKA(local, global) per layer — {setup}\nmean over clients "
        f"{mean[0]:.3f} at {sim.taps[0]}, lowest {mean[low]:.3f} at {sim.taps[low]}; "
        f"every cell ≥ {sim.to_global.min():.2f} (the paper used {PAPER_DATASET})", fontsize=9)
    return fig


def describe_to_global(sim: LayerSimilarity | None, seed: int | None) -> str:
    """What the arXiv Fig. 2 heatmap shows, for its one seed: CKA(local, global) per layer, the mean
    and range over the clients, and the layers ranked; or that it is pending."""
    if sim is None:
        return "arXiv Fig. 2 is pending: no seed's clients' models are stored yet."
    mean, lo, hi = sim.to_global.mean(0), sim.to_global.min(0), sim.to_global.max(0)
    parts = ", ".join(f"{t} {m:.3f} [{a:.3f}, {b:.3f}]"
                      for t, m, a, b in zip(sim.taps, mean, lo, hi))
    order = " > ".join(np.array(sim.taps)[np.argsort(-mean)])
    return (f"Seed {seed}: CKA(local, global) per layer, mean [min, max] over the "
            f"{len(sim.clients)} clients — {parts}. Most similar first: {order}.")


def _per_layer(values: Mapping[int, np.ndarray]) -> dict[float, dict[int, float]]:
    """``{seed: value per layer}`` → ``{layer index: {seed: value}}``: the points of
    :func:`fedlib.companion.plots.sweep`."""
    n = len(next(iter(values.values())))
    return {float(i): {s: float(v[i]) for s, v in values.items()} for i in range(n)}


def _restyle(ax: plt.Axes, styles: Sequence[Mapping[str, Any]]) -> None:
    """Give each series :func:`fedlib.companion.plots.sweep` drew (in order) its own look, kept
    across the panels."""
    for cont, st in zip(ax.containers, styles):
        line, caps, bars = cont.lines
        line.set(color=st["color"], ls=st["ls"], marker=st["marker"])
        for artist in (*caps, *bars):
            artist.set_color(st["color"])
        for cap in caps:
            cap.set_markeredgecolor(st["color"])
    ax.legend(fontsize=8)


def between_figure(sims: Mapping[int, LayerSimilarity], setup: str) -> plt.Figure:
    """Appl. Sci. Fig. 2 and Fig. 6 over the stored seeds (``sims``: seed → LayerSimilarity): per
    layer, the mean CKA between clients (over the client pairs) and to the global model (over the
    clients), and the variance of each (log scale: the geometric mean over the seeds with the t
    interval of the logs); each other point the mean over the seeds with the 95 % t interval over
    them."""
    first = next(iter(sims.values()))
    taps, n = list(first.taps), len(first.clients)
    who = (f"between clients ({n * (n - 1) // 2} pairs)", f"client vs global ({n} clients)")
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10.5, 4.3), layout="constrained")
    note = sweep(ax1, {who[0]: _per_layer({s: v.pair_mean() for s, v in sims.items()}),
                       who[1]: _per_layer({s: v.to_global.mean(0) for s, v in sims.items()})},
                 xlabel="layer (input → output)", ylabel="linear CKA (mean over pairs / clients)")
    sweep(
        ax2, {
            who[0]: _per_layer({s: v.pair_var()
                                for s, v in sims.items()}), who[1]: _per_layer(
                {s: v.to_global.var(0)
                 for s, v in sims.items()})
        }, xlabel="layer (input → output)", ylabel="variance of linear CKA over pairs / clients",
        logy=True)
    for ax, title in ((ax1, "mean similarity per layer (Appl. Sci. Fig. 2)"),
                      (ax2, "its spread per layer (Appl. Sci. Fig. 6)")):
        _restyle(ax, (_TO_CLIENTS, _TO_GLOBAL))
        ax.set_xticks(range(len(taps)), taps)
        ax.set_title(title, fontsize=10)
    fig.suptitle("FedCKA (Appl. Sci.): CKA similarity between clients at the end of training — "
                 f"{setup}\n{note} (a seed's point: its mean or variance over pairs / clients); "
                 f"the paper used {PAPER_DATASET}", fontsize=10)
    return fig


def describe_between(sims: Sims) -> str:
    """What the between-client figure shows over the stored seeds: the mean CKA between clients per
    layer (mean over seeds), the two most similar layers against the paper's, and the layer of
    highest variance; or that it is pending."""
    done = stored(sims)
    if not done:
        return "Appl. Sci. Fig. 2 and 6 are pending: no seed's clients' models are stored yet."
    first = next(iter(done.values()))
    mean = np.mean([v.pair_mean() for v in done.values()], 0)
    var = np.mean([v.pair_var() for v in done.values()], 0)
    glob = np.mean([v.to_global.mean(0) for v in done.values()], 0)
    taps = np.array(first.taps)
    top = list(taps[np.argsort(-mean)[:2]])
    paper = list(PAPER_SIMILAR_LAYERS["simple CNN"])
    same = "as the paper says" if sorted(top) == sorted(
        paper) else f"the paper's are {' and '.join(paper)}"
    return (f"Mean over {_seeds_text(sims)}: CKA between clients falls from {mean[0]:.3f} "
            f"({taps[0]}) to {mean.min():.3f} ({taps[int(np.argmin(mean))]}), to the global model "
            f"from {glob[0]:.3f} to {glob.min():.3f} ({taps[int(np.argmin(glob))]}); the two most "
            f"similar layers between clients are {' and '.join(top)} ({same}). The variance over "
            f"client pairs is highest at {taps[int(np.argmax(var))]} ({var.max():.2g}; the paper: "
            f"the third layer, {taps[2]}) and lowest at {taps[int(np.argmin(var))]} "
            f"({var.min():.2g}).")


def client_matrices_figure(sim: LayerSimilarity, setup: str,
                           taps: Sequence[str] | None = None) -> plt.Figure:
    """Appl. Sci. Fig. 2 (simple CNN, every layer) for one seed (``setup`` names it): the clients ×
    clients CKA matrix per layer, the diagonal (a client with itself) blank and the colours spanning
    the off-diagonal range of all the panels (on 0–1 every cell would read alike), no numbers in the
    cells (too small to read); each panel's title gives its mean and minimum."""
    taps = list(taps or sim.taps)
    off = ~np.eye(len(sim.clients), dtype=bool)
    mats = {t: np.where(off, sim.between[sim.taps.index(t)], np.nan) for t in taps}
    cols = min(4, len(taps))
    rows = int(np.ceil(len(taps) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols + 1, 3.3 * rows + 0.7),
                             layout="constrained", squeeze=False)
    ticks = list(map(str, sim.clients))
    lo, hi = offdiag_range(mats.values())  # one range for every panel: the layers compare by colour
    for ax, (t, m) in zip(axes.flat, mats.items()):
        im = similarity_heatmap(ax, m, ticks,
                                f"{t}: mean {np.nanmean(m):.3f}, min {np.nanmin(m):.3f}",
                                annotate=False, vrange=(lo, hi))
        ax.set_xlabel("client", fontsize=8)
        ax.set_ylabel("client", fontsize=8)
    for ax in axes.flat[len(taps):]:
        ax.set_visible(False)
    _heatmap_colorbar(fig, im, axes, "between two clients (diagonal blank)", lo, hi)
    low = min(mats, key=lambda t: np.nanmean(mats[t]))
    fig.suptitle(
        "FedCKA Appl. Sci. Fig. 2: CKA between clients per layer (diagonal blank) — "
        f"{setup}\nmean over pairs {np.nanmean(mats[taps[0]]):.3f} at {taps[0]}, lowest "
        f"{np.nanmean(mats[low]):.3f} at {low}; the paper used {PAPER_DATASET}", fontsize=10)
    return fig


def describe_matrices(sim: LayerSimilarity | None, seed: int | None) -> str:
    """What the client-matrix figure shows for its one seed: per layer the range of CKA over the
    client pairs and the least similar pair; or that it is pending."""
    if sim is None:
        return "The client matrices are pending: no seed's clients' models are stored yet."
    iu = np.triu_indices(len(sim.clients), 1)
    parts = [f"{t} [{m[iu].min():.3f}, {m[iu].max():.3f}]" for t, m in zip(sim.taps, sim.between)]
    layer = int(np.argmin([m[iu].min() for m in sim.between]))
    k = int(np.argmin(sim.between[layer][iu]))
    a, b = sim.clients[iu[0][k]], sim.clients[iu[1][k]]
    return (f"Seed {seed}: CKA between the {len(iu[0])} client pairs, [min, max] per layer — "
            f"{'; '.join(parts)}. The least similar pair is clients {a} and {b} at "
            f"{sim.taps[layer]} ({sim.between[layer][iu].min():.3f}).")


R50_PART = "Appl. Sci. Fig. 2: FedAvg on IID clients, ResNet-50"  # its name in the plan's scope


def resnet50_left_out(sims50: Sims, left_out: Mapping[str, str], scale: str) -> str | None:
    """Why the ResNet-50 panel is not drawn (not run at this scale, with the plan's reason, or
    pending), or None."""
    if not sims50:
        why = left_out.get(R50_PART, next(iter(left_out.values()), ""))
        return f"not run at scale={scale}: {why}"
    if any(isinstance(v, Pending) for v in sims50.values()):
        return "pending (a run or its clients' models are not in the store)"
    return None


def resnet50_artifact(sims: Mapping[int, LayerSimilarity], records: Mapping[int, Record],
                      dataset: str) -> tuple[pd.DataFrame, plt.Figure]:
    """Appl. Sci. Fig. 2's ResNet-50 panel over the stored seeds (``sims``, their ``records``): the
    per-layer table (mean over the seeds) and the mean CKA per layer between clients and to the
    global model (the seeds' mean with its 95 % t interval), the two layers the paper names as
    similar shaded."""
    frame = sum(v.frame() for v in sims.values()) / len(sims)
    first = next(iter(sims.values()))
    taps, n = list(first.taps), len(first.clients)
    fig, ax = plt.subplots(figsize=(7.5, 4.1), layout="constrained")
    for t in PAPER_SIMILAR_LAYERS["ResNet-50"]:
        if t in taps:
            ax.axvspan(taps.index(t) - 0.35, taps.index(t) + 0.35, color="0.92", lw=0)
    note = sweep(
        ax, {
            f"between clients ({n * (n - 1) // 2} pairs)": _per_layer(
                {s: v.pair_mean()
                 for s, v in sims.items()}), f"client vs global ({n} clients)": _per_layer(
                     {s: v.to_global.mean(0)
                      for s, v in sims.items()})
        }, xlabel="layer (input → output)", ylabel="linear CKA (mean over pairs / clients)")
    _restyle(ax, (_TO_CLIENTS, _TO_GLOBAL))
    ax.set_xticks(range(len(taps)), taps)
    acc = np.mean([100 * records[s].final("test_acc") for s in sims])
    ax.set_title(
        "FedCKA Appl. Sci. Fig. 2 (ResNet-50): CKA between clients — "
        f"{dataset_name(dataset)}, IID, test acc {acc:.1f} %\n{note}; shaded: the stem "
        f"and the first post-residual block, the paper's similar layers on {PAPER_DATASET}",
        fontsize=9)
    return frame.round(6), fig


def seed_table(records: Mapping[int, Any], n_eval: int) -> pd.DataFrame:
    """One row per seed: rounds, local epochs, the global model's final test accuracy, ``n_eval``,
    wall time, the record's key ("pending" where a run is not stored)."""
    rows = [{
        "seed": s, "rounds": r.cfg.rounds, "local epochs": r.cfg.local_epochs,
        "test acc (%)": round(100 * r.final("test_acc"), 2) if isinstance(r, Record) else PENDING,
        "n_eval": n_eval, "wall time (s)": worker_seconds(r) if isinstance(r, Record) else PENDING,
        "record": r.key
    } for s, r in records.items()]
    return pd.DataFrame(rows).set_index("seed")
