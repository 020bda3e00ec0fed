"""Notebook 07's figures and the sentences that say what they show (FedER thesis Figs. 4.1–4.15 and
A.1, FedER's floored share and its per-layer ranks and weights), drawn with
:mod:`fedlib.companion.plots`' figure kinds.

    training_curves(records, dataset, scale); describe_training_curves(df)
    floored_share_figure(records, dataset, scale); describe_floored(df)
    rank_weights(record, dataset, scale, seed); describe_rank_weights(record, seed)
    stable_rank_figure(records, dataset, scale)

``records``: ``{artifact: {run id: run}}`` or ``{run id: run}``; ``df``:
:func:`fedlib.companion.papers.feder.tables.grid_frame`. Curves are the mean over seeds with a 95 %
t band (one seed: its curve alone); the thesis's numbers (CIFAR-100, 250 epochs, one run each) are
only ever shown in a panel of their own.
"""

from __future__ import annotations

import textwrap
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from fedlib.companion.plots import mean_curves, paper_panel, seeds_note, t_interval
from fedlib.companion.papers.feder.preset import FEDER_OPTIMIZERS, FEDER_SETTINGS
from fedlib.companion.results import Pending, Record
from fedlib.companion.style import dataset_name
from fedlib.companion.verdicts import PLATEAU_RISE
from fedlib.companion.grid import Records, Runs
from fedlib.companion.papers.feder.tables import FEDER_T42, FLOOR, FLOORED_MAX, flat_runs

__all__ = [
    "THESIS_FIGURES", "figure_runs", "training_curves", "describe_training_curves",
    "floored_share_figure", "describe_floored", "rank_weights", "describe_rank_weights",
    "stable_rank_figure"
]

# Figs. 4.1–4.5 non-federated, 4.6–4.10 FedAvg, 4.11–4.15 FedER, each in Table 4.2's row order
# (§4.3; the captions of Figs. 4.3 and 4.15 misname their optimizer, their sections do not)
THESIS_FIGURES = {(row, s): f"4.{1 + 5 * j + i}" for i, row in enumerate(FEDER_OPTIMIZERS)
                  for j, s in enumerate(FEDER_SETTINGS)}
_PAPER_TITLE = "FedER thesis Table 4.2: final test acc. (%)\nCIFAR-100, 250 epochs, one run each"


def _by_setting(records: Runs | Records, row: str, metric: str,
                settings: tuple[str, ...] = tuple(FEDER_SETTINGS)
                ) -> dict[str, dict[int, pd.Series]]:
    """``{setting: {seed: per-round series}}`` of ``row``'s stored runs; ``metric`` "train_loss"
    falls back to the mean of the clients' losses."""
    out: dict[str, dict[int, pd.Series]] = {}
    for rid, r in figure_runs(records, settings).items():
        s = rid.method
        if rid.optimizer != row or not isinstance(r, Record):
            continue
        series = r.metric(metric)
        if series.empty and metric == "train_loss":
            series = r.metric("client_loss").map(np.mean)
        if not series.empty:
            out.setdefault(s, {})[rid.seed] = series.astype(float)
    return {s: out[s] for s in settings if s in out}


def _pending(records: Runs | Records, row: str | None = None) -> list[str]:
    """The runs not stored yet (of optimizer ``row``, or all), one entry per Table 4.2 cell with its
    seeds."""
    by: dict[str, list[int]] = {}
    for rid, r in flat_runs(records).items():
        if isinstance(r, Pending) and (row is None or rid.optimizer == row):
            by.setdefault(f"{rid.optimizer} · {rid.method}", []).append(int(rid.seed))
    return [
        f"{cell} (seed{'s' * (len(s) > 1)} {', '.join(map(str, sorted(s)))})"
        for cell, s in by.items()
    ]


def _plain_log(ax: plt.Axes) -> None:
    """A log y-axis with plain tick labels (0.5, 1, 2) instead of 6×10⁻¹; denser ticks on a narrow
    range."""
    lo, hi = ax.get_ylim()
    subs = ((1.0, 2.0, 5.0) if hi / lo > 10 else (1.0, 1.5, 2.0, 3.0, 5.0, 7.0) if hi / lo > 6 else
            (1.0, 1.2, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0) if hi / lo > 2 else "all")
    ax.yaxis.set_major_locator(LogLocator(subs=subs))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _figures(row: str, settings: list[str], panel: str = "") -> str:
    return "thesis Fig" + "s" * (len(settings) > 1) + ". " + ", ".join(
        f"{THESIS_FIGURES[(row, s)]}{panel} ({s})" for s in settings if (row, s) in THESIS_FIGURES)


def figure_runs(records: Runs | Records,
                settings: tuple[str, ...] = tuple(FEDER_SETTINGS)) -> Runs | Records:
    """The runs of ``settings`` among ``records`` (pending ones included): those a figure of these
    settings draws, so its footer states their seeds, commits and devices and not the whole
    notebook's."""
    return {rid: r for rid, r in flat_runs(records).items() if rid.method in settings}


def training_curves(records: Runs | Records, dataset: str, scale: str) -> plt.Figure | None:
    """Figs. 4.1–4.15 for the Table 4.2 cells that were run: per optimizer row, the test accuracy
    (the thesis's (a) panels), the training loss and the test loss (its (b) panels; log scale) of
    each setting, the mean over seeds with a 95 % t band; beside them Table 4.2's CIFAR-100 numbers
    of those rows in a panel of their own. ``None`` before any run is stored."""
    flat = figure_runs(records)
    accs = {
        row: a
        for row in dict.fromkeys(rid.optimizer for rid in flat)
        if (a := _by_setting(flat, row, "test_acc"))
    }
    rows = list(accs)
    if not rows:
        return None
    mosaic = [[f"acc{i}", f"train{i}", f"test{i}", "paper"] for i in range(len(rows))]
    fig, axes = plt.subplot_mosaic(mosaic, figsize=(15.5, 3.3 * len(rows) + 1.0),
                                   layout="constrained", width_ratios=[1, 1, 1, 0.8])
    shown = []
    for i, row in enumerate(rows):
        acc = accs[row]
        settings = list(acc)
        shown += [(row, s) for s in settings]
        mean_curves(axes[f"acc{i}"], acc)
        axes[f"acc{i}"].set_title(f"{row}: test accuracy\n{_figures(row, settings, 'a')}",
                                  fontsize=8)
        for key, metric, what in (("train", "train_loss", "training loss"), ("test", "test_loss",
                                                                             "test loss")):
            ax, loss = axes[f"{key}{i}"], _by_setting(flat, row, metric)
            mean_curves(ax, loss, percent=False, logy=bool(loss), ylabel=f"{what} (log)")
            if loss:
                _plain_log(ax)
            else:
                ax.text(0.5, 0.5, "not recorded", ha="center", va="center", transform=ax.transAxes,
                        color="0.5")
                ax.set(xticks=[], yticks=[])
            ax.set_title(f"{row}: {what}\n{_figures(row, settings, 'b')}", fontsize=8)
        for key in ("acc", "train", "test"):
            axes[f"{key}{i}"].xaxis.set_major_locator(MaxNLocator(integer=True))
    paper_panel(axes["paper"],
                [[row] + [f"{v:.2f}" for v in FEDER_T42[row]] for row in rows if row in FEDER_T42],
                ["optimizer", "non-fed.", "FedAvg", "FedER"], _PAPER_TITLE)
    pending = _pending(flat)
    planned = {(rid.optimizer, rid.method) for rid in flat}
    # one seeds note for every panel
    curves = [by_seed for acc in accs.values() for by_seed in acc.values()]
    status = [
        seeds_note({s
                    for c in curves
                    for s in c}, "band", [len(c) for c in curves], "curve")
    ] + [f"pending: {', '.join(pending)}"] * bool(pending) + [
        "the other Table 4.2 cells not run at this scale"
    ] * (len(planned) < len(THESIS_FIGURES))
    figs = ", ".join(f"{THESIS_FIGURES[k]} ({k[1]} · {k[0]})" for k in shown)
    head = (f"FedER thesis Fig{'s' * (len(shown) > 1)}. {figs}: (a) accuracy and (b) loss per "
            f"epoch — ours: ResNet-18 on {dataset_name(dataset)}, scale={scale}, one round = one "
            "epoch (thesis: CIFAR-100, 250 epochs)")
    fig.suptitle("\n".join(textwrap.fill(t, 180) for t in (head, "; ".join(status))), fontsize=9)
    return fig


def _mean_text(values: pd.Series) -> str:
    mean, half, n = t_interval(values)
    return f"{mean:.2f} %" + (f" ± {half:.2f}" if n > 1 else "") + f" ({n} seed{'s' * (n > 1)})"


def describe_training_curves(df: pd.DataFrame) -> str:
    """Our runs' final test accuracy per Table 4.2 cell (mean over seeds ± 95 % t interval), FedER −
    FedAvg per optimizer row beside the thesis's, and the runs still rising at the end; what is
    pending."""
    done = df[df["acc"].notna()]
    pending = list(df.loc[df["pending"], "name"])
    tail = f" Pending: {', '.join(pending)}." if pending else ""
    if done.empty:
        return "Pending: no run of Table 4.2 is stored yet." + tail
    cells = [
        f"{s} · {row} {_mean_text(g['acc'])}"
        for (row, s), g in done.groupby(["row", "setting"], sort=False)
    ]
    text = f"Final test accuracy (mean over seeds ± 95 % t interval): {'; '.join(cells)}."
    diffs = []
    for row in dict.fromkeys(done["row"]):
        by = {
            k: dict(zip(g["seed"], g["acc"]))
            for k, g in done[done["row"] == row].groupby("setting")
        }
        er, avg = by.get("FedER", {}), by.get("FedAvg", {})
        paired = [er[sd] - avg[sd] for sd in er if sd in avg]
        if not paired or row not in FEDER_T42:
            continue
        mean, half, n = t_interval(paired)
        diffs.append(f"{row} {mean:+.2f} points" + (f" ± {half:.2f}" if n > 1 else "")
                     + f" ({n} seed{'s' * (n > 1)}{', no interval' if n == 1 else ''}; "
                       f"thesis, CIFAR-100: {FEDER_T42[row][2] - FEDER_T42[row][1]:+.2f})")
    if diffs:
        text += (f" FedER − FedAvg, paired on the seeds both ran: {'; '.join(diffs)}; whether it "
                 "tests FedER at all depends on FedER's floored share (below).")
    rising = [
        f"{r.setting} · {r.row} seed {r.seed} {r.rise:+.1f}" for r in done.itertuples()
        if r.rise > PLATEAU_RISE
    ]
    if rising:
        text += (" Still rising over the last 20 % of the rounds (points; a plateau rises at most "
                 f"{PLATEAU_RISE:g}): {', '.join(rising)}.")
    return text + tail


def floored_share_figure(records: Runs | Records, dataset: str, scale: str) -> plt.Figure | None:
    """FedER's floored share per round, per optimizer row the mean over seeds with a 95 % t band,
    with the share above which the FedER-vs-FedAvg claims are not testable; ``None`` before a FedER
    run is stored. The thesis has no such figure (it is our check of what FedER does)."""
    rows = list(dict.fromkeys(rid.optimizer for rid in flat_runs(records)))
    runs = {f"FedER · {row}": got["FedER"] for row in rows
            if (got := _by_setting(records, row, "feder_floored", ("FedER",)))}
    if not runs:
        return None
    fig, ax = plt.subplots(figsize=(6.8, 3.8), layout="constrained")
    note = mean_curves(ax, runs, percent=False, ylabel="floored share of client-layers")
    ax.axhline(FLOORED_MAX, color="0.4", ls="--", lw=0.9,
               label=f"{100 * FLOORED_MAX:.0f} %: "
                     "above it the FedER-vs-FedAvg claims are not testable")
    ax.set_ylim(-0.02, 1.02)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=8, loc="lower left")
    ax.set_title(f"FedER: share of client-layers at Alg. 4's floor (EVBMF kept ≤ 1 component) — "
                 f"{dataset_name(dataset)}, scale={scale}\n{note}", fontsize=9)
    return fig


def describe_floored(df: pd.DataFrame) -> str:
    """Each FedER run's floored share (mean over its rounds) against :data:`FLOORED_MAX`, and what
    it means for the FedER-vs-FedAvg claims; what is pending."""
    fe = df[df["setting"] == "FedER"]
    done = fe[fe["floored"].notna()]
    pending = list(fe.loc[fe["pending"], "name"])
    tail = f" Pending: {', '.join(pending)}." if pending else ""
    if done.empty:
        return "Pending: no FedER run is stored yet." + tail
    parts = [f"{row}: {', '.join(f'{v:.2f} (seed {s})' for s, v in zip(g['seed'], g['floored']))}"
             for row, g in done.groupby("row", sort=False)]
    above = done["floored"] > FLOORED_MAX
    verdict = (
        "above the bound in every run: FedER is FedAvg on most of its client-layers, so its "
        "claims against FedAvg are not testable here" if above.all() else
        "at most the bound in every run: the FedER-vs-FedAvg claims are judged" if not above.any()
        else f"above the bound in {int(above.sum())} of {len(done)} runs: those rows' "
        "FedER-vs-FedAvg claims are not testable")
    return (f"FedER's floored share, the mean over a run's rounds (bound {FLOORED_MAX:.2f}): "
            f"{'; '.join(parts)} — {verdict}.{tail}")


def _layer_round(record: Record, key: str) -> tuple[list[str], np.ndarray]:
    h = [e for e in record.history if key in e]
    layers = list(h[0][key])
    # (round, layer, client)
    return layers, np.array([[e[key][name] for name in layers] for e in h], float)


def rank_weights(record: Record, dataset: str, scale: str, seed: int) -> plt.Figure:
    """Eq. 3.1's inputs and outputs per conv layer, client and round of one run (a kind of its own:
    layer × round heatmaps per client): the effective rank er (top; grey where it is at Alg. 4's
    floor, i.e. EVBMF kept at most one component) and the weight α relative to FedAvg's 1/K (bottom,
    log scale from ½ to 2: white = uniform, red = more, blue = less), with the floored share per
    round in the title."""
    layers, er = _layer_round(record, "feder_rank")
    _, alpha = _layer_round(record, "feder_alpha")
    R, _, K = er.shape
    fig, axes = plt.subplots(2, K, figsize=(3.4 * K + 2, 0.26 * len(layers) * 2 + 2.4),
                             layout="constrained", sharey=True, squeeze=False)
    extent = (0.5, R + 0.5, len(layers) - 0.5, -0.5)
    kept = np.ma.masked_less_equal(er, FLOOR)
    cmap = plt.get_cmap("viridis").with_extremes(bad="0.85")
    vmax = float(kept.max()) if kept.count() else 1.0
    ratio = np.clip(alpha * K, 1e-6, None)
    for k in range(K):
        im0 = axes[0, k].imshow(kept[:, :, k].T, aspect="auto", cmap=cmap, vmin=0, vmax=vmax,
                                extent=extent, interpolation="nearest")
        im1 = axes[1, k].imshow(ratio[:, :, k].T, aspect="auto", cmap="RdBu_r",
                                norm=LogNorm(1 / 2, 2), extent=extent, interpolation="nearest")
        axes[0, k].set_title(f"client {k}: er", fontsize=8)
        axes[1, k].set_title(f"client {k}: α / (1/K)", fontsize=8)
        axes[1, k].set_xlabel("round", fontsize=8)
        for a in axes[:, k]:
            a.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=6))
            a.tick_params(labelsize=8)
    for a in axes[:, 0]:
        a.set_yticks(range(len(layers)), [name.replace(".weight", "") for name in layers],
                     fontsize=8)
        a.set_ylabel("conv layer", fontsize=8)
    cb0 = fig.colorbar(im0, ax=axes[0, :], shrink=0.9)
    cb0.set_label("er: entropy of EVBMF-kept singular values (nats)\ngrey: at Alg. 4's floor "
                  f"({FLOOR:g})", fontsize=8)
    ticks = [0.5, 2 / 3, 0.8, 1, 1.25, 1.5, 2]
    cb1 = fig.colorbar(im1, ax=axes[1, :], shrink=0.9, extend="both", ticks=ticks)
    cb1.minorticks_off()
    cb1.ax.set_yticklabels([f"{t:.2g}" for t in ticks])
    cb1.set_label(f"α × K: weight relative to FedAvg's 1/K = {1 / K:.2f}\n(log scale; 1 = uniform; "
                  "ends: ≤ ½, ≥ 2)", fontsize=8)
    share = [e["feder_floored"] for e in record.history if "feder_floored" in e]
    shares = (" ".join(f"{x:.2f}" for x in share) if len(share) <= 12 else
              f"{share[0]:.2f} (round 1) → {share[-1]:.2f} (round {len(share)}), mean "
              f"{np.mean(share):.2f}")
    fig.suptitle("FedER (Adam) per-layer effective ranks and weights — ResNet-18 on "
                 f"{dataset_name(dataset)}, scale={scale}, one run: seed {seed} (no "
                 f"interval)\nfloored share per round: {shares}", fontsize=9)
    return fig


def describe_rank_weights(record: Record, seed: int) -> str:
    """How many conv layers FedER leaves at the floor for every client in every round (averaged as
    FedAvg), and the largest and smallest weight any client gets relative to 1/K, with where."""
    layers, er = _layer_round(record, "feder_rank")
    _, alpha = _layer_round(record, "feder_alpha")
    R, _, K = er.shape
    always = int((er <= FLOOR).all(axis=(0, 2)).sum())
    ratio = alpha * K
    hi, lo = (np.unravel_index(f(ratio), ratio.shape) for f in (np.argmax, np.argmin))

    def where(ix: tuple[Any, ...]) -> str:
        return f"{layers[ix[1]].replace('.weight', '')}, client {ix[2]}, round {ix[0] + 1}"

    return (f"Seed {seed}'s FedER · Adam run: {always} of {len(layers)} conv layers stay at the "
            f"floor for all {K} clients in all {R} rounds (averaged uniformly, as FedAvg). The "
            f"largest weight relative to 1/K is {ratio[hi]:.3g}× ({where(hi)}), the smallest "
            f"{ratio[lo]:.3g}× ({where(lo)}).")


_A1 = {
    "FedAvg": "FedAvg", "FedER": "FedER (effective rank)",
    "FedER (stable rank)": "FedER (stable rank)", "non-federated": "non-federated"
}


def stable_rank_figure(records: Runs | Records, dataset: str, scale: str) -> plt.Figure | None:
    """Fig. A.1: test accuracy per round with Adam of FedAvg, FedER with the effective rank and with
    the stable rank, and the non-federated model (mean over seeds, 95 % t band); beside it Table
    4.2's CIFAR-100 numbers of the Adam row (the thesis gives no number for the stable rank).
    ``None`` before any of these runs is stored."""
    acc = _by_setting(records, "Adam", "test_acc", tuple(_A1))
    if not acc:
        return None
    fig, axes = plt.subplot_mosaic([["acc", "paper"]], figsize=(11.0, 4.4), layout="constrained",
                                   width_ratios=[2.2, 1])
    ax = axes["acc"]
    note = mean_curves(ax, {_A1[s]: v for s, v in acc.items()})
    for line in ax.lines:  # the stable rank: FedER's colour, its own dash and marker
        if line.get_label().startswith("FedER (stable rank)"):
            line.set(ls="--", marker="D")
    ax.legend(fontsize=8)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(f"FedER thesis Fig. A.1 — stable rank vs effective rank, Adam, ResNet-18 on "
                 f"{dataset_name(dataset)}, scale={scale}\n{note}", fontsize=9)
    a = FEDER_T42["Adam"]
    paper_panel(axes["paper"],
                [["non-federated", f"{a[0]:.2f}"], ["FedAvg", f"{a[1]:.2f}"],
                 ["FedER (effective rank)", f"{a[2]:.2f}"], ["FedER (stable rank)", "not given"]],
                ["Adam", "final test acc. (%)"],
                _PAPER_TITLE.replace("Table 4.2", "Table 4.2 / Fig. A.1"))
    return fig
