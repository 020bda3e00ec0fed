"""Notebook 07: FedER thesis Table 4.2, Figs. 4.1–4.15 and Fig. A.1 as tables, figures and verdicts, with the
thesis's numbers beside ours and FedER's floored share.

    df = runs_frame(records)                     # records: {artifact: {run name: run}} or {run name: run}
    mean_table(df); versus_paper(df, scale)      # Table 4.2 (ours), Table 4.2 (CIFAR-100) beside ours
    training_curves(first_seed(records, 0), dataset, scale, 0)
    rank_weights(record, dataset, scale, 0); floored_share_figure(records, dataset, scale)

Runs come as ``{run name: Record | Pending | Diverged}`` (:func:`fedlib.grid.fetch_runs` over
:func:`fedlib.plans.feder_plan`). The thesis reports each run's final top-1 test accuracy. FedER's claims against
FedAvg are only testable where FedER does something else than FedAvg: when EVBMF keeps no component of a layer (a
weight near its random initialization) every client sits at Alg. 4's 0.001 floor and the layer is averaged
uniformly. :data:`FLOORED_MAX` bounds the share of such client-layers (mean over rounds, every seed) above which
those claims are not testable.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from ..grid import DIVERGED, Diverged, cell, offs
from ..plans.feder import split_name
from ..report import compare
from ..results import Pending, Record
from ..style import dataset_name, method_style
from ..verdicts import Verdict, decide, not_testable, off_plateau, pending
from ..verdicts import plateau_rise as verdict_rise

__all__ = ["PAPER", "SETTINGS", "FLOORED_MAX", "FLOOR", "SOURCE", "runs_frame", "mean_table", "versus_paper",
           "scale_note", "setup_line", "first_seed", "stored", "runs_table", "invariants", "plateau_rise", "verdicts",
           "training_curves", "floored_share_figure", "rank_weights", "stable_rank_figure"]

PAPER = {  # Table 4.2, CIFAR-100: non-federated / FedAvg / FedER
    "Adam": (71.71, 76.87, 77.05), "Adam + StepLR": (74.54, 75.71, 75.97), "AdamP": (70.06, 50.89, 49.43),
    "AdamP + StepLR": (76.39, 71.85, 72.68), "RMSGD": (60.22, 60.07, 60.52)}
SETTINGS = ("non-federated", "FedAvg", "FedER")
FLOOR = 1e-3  # Alg. 4: er <- max(0.001, er)
FLOORED_MAX = 0.25  # above this mean share of floored client-layers, FedER is (mostly) FedAvg: nothing to compare
SOURCE = "FedER thesis"
_CLASSES = {"cifar100": 100, "tinyimagenet": 200}

Run = Record | Pending | Diverged
Runs = Mapping[str, Run] | Mapping[str, Mapping[str, Run]]


def chance(dataset: str) -> float:
    """Chance accuracy (%) of ``dataset``'s classes."""
    return 100.0 / _CLASSES.get(dataset, 10)


def floored(record: Record) -> float:
    """FedER's mean floored share over its rounds (NaN for a run that is not FedER)."""
    xs = [h["feder_floored"] for h in record.history if "feder_floored" in h]
    return float(np.mean(xs)) if xs else math.nan


def plateau_rise(record: Record) -> float:
    """The rise (points) of the test accuracy over the last 20 % of the rounds (:func:`fedlib.verdicts.plateau_rise`:
    at most 1 on a plateau); NaN when the rounds it reads were not evaluated."""
    acc = {int(h["round"]): 100 * float(h["test_acc"]) for h in record.history if h.get("test_acc") is not None}
    rise = verdict_rise(acc, int(record.cfg.rounds))
    return math.nan if rise is None else float(rise)


def _flat(runs: Runs) -> dict[str, Run]:
    """``{run name: run}`` from itself or from ``{artifact: {run name: run}}``."""
    return {n: r for k, v in runs.items() for n, r in (v.items() if isinstance(v, Mapping) else [(k, v)])}


def runs_frame(runs: Runs) -> pd.DataFrame:
    """One row per run: ``name, row, setting, seed, pending, diverged, acc`` (final test accuracy, %), ``floored``
    (FedER's mean floored share) and ``rise`` (:func:`plateau_rise`)."""
    rows = []
    for name, r in _flat(runs).items():
        row, setting, seed = split_name(name)
        ok = isinstance(r, Record)
        rows.append({"name": name, "row": row, "setting": setting, "seed": seed, "pending": isinstance(r, Pending),
                     "diverged": isinstance(r, Diverged), "acc": 100 * r.final("test_acc") if ok else np.nan,
                     "floored": floored(r) if ok else np.nan, "rise": plateau_rise(r) if ok else np.nan,
                     "off": off_plateau(r) if ok else None})
    return pd.DataFrame(rows, columns=["name", "row", "setting", "seed", "pending", "diverged", "acc", "floored",
                                       "rise", "off"])


def mean_table(df: pd.DataFrame, value: str = "acc") -> pd.DataFrame:
    """Optimizer row × setting: "mean ± std" of ``value`` over seeds ("pending", "diverged")."""
    cells = {(r, s): cell(g[value].mean(), g[value].std(ddof=1), g[value].count(), bool(g["pending"].any()),
                          bool(g["diverged"].any())) for (r, s), g in df.groupby(["row", "setting"], sort=False)}
    return pd.Series(cells, dtype=object).unstack().reindex(index=list(dict.fromkeys(df["row"])),
                                                            columns=list(dict.fromkeys(df["setting"])))


def _compare(claim: str, source: str, df: pd.DataFrame, a: tuple[str, str], b: tuple[str, str], kind: str,
             margin: float, paper: str, chance_acc: float, why_missing: str, feder: bool = False) -> Verdict:
    """``why_missing``: why this scale cannot test the claim (then not testable, with the floored share of any
    FedER run it did train)."""
    A = df[(df["row"] == a[0]) & (df["setting"] == a[1])]
    B = df[(df["row"] == b[0]) & (df["setting"] == b[1])]
    if why_missing or A.empty or B.empty:
        share = A["floored"].max() if feder and not A.empty else math.nan
        seen = f"; this scale's FedER run(s): floored share {share:.2f}" if math.isfinite(share) else ""
        return not_testable(claim, source, (why_missing or "not run") + seen, paper)
    if A["pending"].any() or B["pending"].any():
        return pending(claim, source)
    if feder:
        share = float(A["floored"].max())  # the most floored seed of FedER
        if share > FLOORED_MAX:
            return not_testable(claim, source, f"FedER is FedAvg on {100 * share:.0f} % of its client-layers (EVBMF "
                                               f"keeps no component: Alg. 4's floor; > {100 * FLOORED_MAX:.0f} %)",
                                paper)
    names = (" · ".join(a), " · ".join(b))
    return decide(claim, source, dict(zip(A["seed"], A["acc"])), dict(zip(B["seed"], B["acc"])), kind=kind,
                  margin=margin, names=names, chance=chance_acc, paper=paper,
                  diverged=list(A.loc[A["diverged"], "name"]) + list(B.loc[B["diverged"], "name"]),
                  off=offs(pd.concat([A, B])))


def verdicts(df: pd.DataFrame, dataset: str, left_out: Mapping[str, str] | None = None) -> list[Verdict]:
    """The thesis's claims on Table 4.2 and Fig. A.1, decided over seeds. ``left_out``: why a scale cannot test
    ``"table4.2"`` / ``"figA1"`` (their claims are then not testable, with that reason, whatever it ran)."""
    left_out = left_out or {}
    c = chance(dataset)
    kw: dict[str, Any] = dict(chance_acc=c)
    miss = left_out.get("table4.2", "")
    out = []
    t42 = f"{SOURCE} Table 4.2, §4.4"
    for row, (_, avg, er) in PAPER.items():
        if row == "AdamP":
            claim, kind = "FedER under-performs FedAvg with AdamP without StepLR", "less"
            src = f"{t42}: 'the Federated Effective Rank method under-performs quite a lot using AdamP and no StepLR'"
        else:
            claim, kind = f"FedER out-performs FedAvg with {row}", "greater"
            src = f"{t42}: 'it out-performs in every other configuration'"
        out.append(_compare(claim, src, df, (row, "FedER"), (row, "FedAvg"), kind, 0.0,
                            f"FedER − FedAvg = {er - avg:+.2f}", why_missing=miss, feder=True, **kw))
    out.append(_compare("FedAvg with Adam out-performs the non-federated ResNet-18", f"{SOURCE} §4.3.2, Fig. 4.6: "
                        "'Adam without StepLR is out-performing plain ResNet18'", df, ("Adam", "FedAvg"),
                        ("Adam", "non-federated"), "greater", 0.0,
                        f"{PAPER['Adam'][1] - PAPER['Adam'][0]:+.2f}", why_missing=miss, **kw))
    out.append(_compare("StepLR lowers FedAvg's test accuracy with Adam", f"{SOURCE} §4.3.2, Fig. 4.7: 'an "
                        "under-performing test-accuracy' (vs Fig. 4.6)", df, ("Adam + StepLR", "FedAvg"),
                        ("Adam", "FedAvg"), "less", 0.0,
                        f"{PAPER['Adam + StepLR'][1] - PAPER['Adam'][1]:+.2f}", why_missing=miss, **kw))
    out.append(_compare("FedAvg with AdamP without StepLR ends below its non-federated baseline", f"{SOURCE} Table "
                        "4.2; §4.3.2, Fig. 4.8: 'an incredibly rapid growth ... then a come-down in accuracy'", df,
                        ("AdamP", "FedAvg"), ("AdamP", "non-federated"), "less", 0.0,
                        f"{PAPER['AdamP'][1] - PAPER['AdamP'][0]:+.2f}", why_missing=miss, **kw))
    out.append(_compare("FedER with the stable rank is competitive with FedER with the effective rank (Adam; "
                        "'competitive' read as within 2 points)", f"{SOURCE} Appendix A, Fig. A.1: 'the "
                        "test-accuracy is competitive using stable-rank'", df, ("Adam", "FedER (stable rank)"),
                        ("Adam", "FedER"), "within", 2.0, "", why_missing=left_out.get("figA1", ""), **kw))
    return out


# ----------------------------------------------------------------------------------------------------- tables
def versus_paper(df: pd.DataFrame, scale: str) -> pd.DataFrame:
    """Table 4.2 (CIFAR-100, one run each) beside ours (mean over seeds), one row per "optimizer · setting"; a cell
    this scale did not run says so."""
    paper = {f"{row} · {s}": PAPER[row][i] for row in PAPER for i, s in enumerate(SETTINGS)}
    ours: dict[str, Any] = {}
    for (row, s), g in df.groupby(["row", "setting"], sort=False):
        done = g.loc[~g["diverged"], "acc"]
        ours[f"{row} · {s}"] = ("pending" if g["pending"].any() else DIVERGED if done.isna().all() and
                                g["diverged"].any() else float(done.mean()))
    return compare(paper, ours, not_run=f"not run at scale={scale}")


def scale_note(scale: str, dataset: str) -> str:
    """How far this scale's numbers may be read against the thesis's."""
    return f"scale={scale}, dataset={dataset_name(dataset)}: " + (
        "the thesis's setup except the dataset" if scale == "paper"
        else "NOT the thesis's setup; compare the pattern, not the numbers")


def setup_line(runs: Mapping[str, Mapping[str, Any]], scale: str, dataset: str,
               left_out: Mapping[str, str]) -> str:
    """The planned setup in one line (model, clients, rounds, optimizer settings, runs, what the scale leaves out)."""
    c = next(iter(runs["table4.2"].values()))
    seeds = sorted({x.seed for rs in runs.values() for x in rs.values()})
    return (f"{dataset_name(dataset)}, scale={scale}, seeds {seeds}: {c.model} {c.model_kw}, {c.num_clients} "
            f"clients, {c.rounds} rounds x {c.local_epochs} local epoch(s), batch {c.batch_size}, lr {c.lr}, wd "
            f"{c.weight_decay}, augment {c.augment}, n_train {c.n_train}; runs: "
            f"{({a: len(r) for a, r in runs.items()})}; left out: {list(left_out) or 'nothing'}")


def first_seed(records: Runs, seed: int) -> dict[tuple[str, str], Run]:
    """``{(optimizer row, setting): run}`` of one seed (the runs the figures draw)."""
    return {split_name(n)[:2]: r for n, r in _flat(records).items() if split_name(n)[2] == seed}


def stored(runs: Mapping[Any, Run | None]) -> bool:
    """Whether any of ``runs`` is a stored record (a figure of pending runs only is shown, not saved)."""
    return any(isinstance(r, Record) for r in runs.values())


def runs_table(df: pd.DataFrame, records: Runs) -> pd.DataFrame:
    """One row per run: final accuracy, FedER's floored share, the plateau rise, status and record key."""
    keys = {n: r.key for n, r in _flat(records).items()}
    out = df.assign(acc=df["acc"].round(2), floored=df["floored"].round(2), rise=df["rise"].round(2),
                    record=df["name"].map(keys)).set_index("name")
    return out[["acc", "floored", "rise", "pending", "diverged", "record"]].rename(columns={
        "acc": "final test acc (%)", "floored": "FedER floored share", "rise": "rise, last 20 % (points)"})


def _feder_entropy_runs(records: Runs) -> list[Record]:
    return [r for n, r in _flat(records).items() if isinstance(r, Record) and split_name(n)[1] == "FedER"
            and r.config.get("strategy_kw", {}).get("metric", "entropy") == "entropy"]


def invariants(records: Runs) -> dict[str, bool]:
    """Invariants of our FedER (the stored effective-rank runs): Eq. 3.1's weights sum to 1 per conv layer, and the
    floored share is recorded every round, in [0, 1]."""
    fr = _feder_entropy_runs(records)
    return {"FedER records a weight per client for every conv layer each round, summing to 1":
            all(abs(sum(a) - 1) < 1e-9 for r in fr for e in r.history for a in e["feder_alpha"].values()),
            "FedER records its floored share every round, in [0, 1]":
            all(0 <= e.get("feder_floored", -1) <= 1 for r in fr for e in r.history)}


# ---------------------------------------------------------------------------------------------------- figures
# the single model on all the data: a colour no FedER-notebook method uses, solid (the thesis's values are dashed)
_NON_FEDERATED = dict(color="#b07aa1", ls="-", marker="s")
_CLIENT_LS = ("-", "--", "-.", ":", (0, (5, 1)), (0, (1, 3)))
_PAPER_LINE = dict(color="black", ls=(0, (4, 2)), lw=1.1)


def _style(setting: str) -> dict[str, Any]:
    st = dict(_NON_FEDERATED) if setting == "non-federated" else method_style(setting)
    if setting == "FedER (stable rank)":  # FedER's colour, its own dash and marker
        st.update(ls="--", marker="D")
    return st


def _plain_log(ax: plt.Axes) -> None:
    """A log y-axis with plain tick labels (0.5, 1, 2) instead of 6×10⁻¹; denser ticks on a narrow range."""
    lo, hi = ax.get_ylim()
    subs = (1.0, 2.0, 5.0) if hi / lo > 10 else (1.0, 1.5, 2.0, 3.0, 5.0, 7.0) if hi / lo > 2 else "all"
    ax.yaxis.set_major_locator(LogLocator(subs=subs))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def training_curves(records: Mapping[tuple[str, str], Run], dataset: str, scale: str, seed: int) -> plt.Figure:
    """Figs. 4.1–4.15: one panel per (optimizer row, setting of Table 4.2): each client's mean training loss per
    round (grey, one dash per client; left, log) and the global model's test accuracy (right, the method's style),
    with Table 4.2's final CIFAR-100 accuracy of that cell as a dashed line; one legend for the figure."""
    records = {k: r for k, r in records.items() if k[1] in SETTINGS}
    rows = list(dict.fromkeys(k[0] for k in records)) or ["Adam"]
    cols = [s for s in SETTINGS if any(k[1] == s for k in records)] or ["FedER"]
    fig, axes = plt.subplots(len(rows), len(cols), figsize=(4.6 * len(cols) + 2.2, 2.6 * len(rows) + 0.8),
                             layout="constrained", sharex=True, squeeze=False)
    handles: dict[str, Any] = {}
    n_clients = 1
    for (i, row), (j, s) in ((a, b) for a in enumerate(rows) for b in enumerate(cols)):
        ax, r, st = axes[i, j], records.get((row, s)), _style(s)
        tw = ax.twinx()
        tw.set_ylim(0, 100)
        tw.set_ylabel("test accuracy (%)", fontsize=7)
        ax.set_ylabel("train loss (log)", fontsize=7)
        for a in (ax, tw):
            a.tick_params(labelsize=6)
        if i == len(rows) - 1:
            ax.set_xlabel("round (= epoch)", fontsize=7)
        if row in PAPER:
            p = PAPER[row][SETTINGS.index(s)]
            handles["paper"] = tw.axhline(p, **_PAPER_LINE, label="thesis Table 4.2: final test accuracy\n"
                                                                   "(CIFAR-100, 250 epochs)")
            tw.text(0.99, p + 1.5, f"thesis: {p:.2f} %", transform=tw.get_yaxis_transform(), ha="right",
                    va="bottom", fontsize=6)
        if not isinstance(r, Record):
            what = "not run" if r is None else "pending" if isinstance(r, Pending) else "diverged"
            ax.text(0.5, 0.5, what, ha="center", va="center", transform=ax.transAxes, color="0.5")
            ax.set_yticks([])
            ax.set_title(f"{s} · {row}: {what}", fontsize=8)
            continue
        h = r.frame()
        losses = np.array(h["client_loss"].tolist(), float).reshape(len(h), -1)
        n_clients = max(n_clients, losses.shape[1])
        for k in range(losses.shape[1]):
            ax.plot(h["round"], losses[:, k], color="0.45", lw=0.9, ls=_CLIENT_LS[k % len(_CLIENT_LS)])
        ax.set_yscale("log")
        _plain_log(ax)
        handles[s] = tw.plot(h["round"], 100 * h["test_acc"], ms=3, lw=1.6, label=f"{s}: test accuracy", **st)[0]
        ax.set_title(f"{s} · {row}: {100 * r.final('test_acc'):.2f} %", fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    clients = [Line2D([], [], color="0.45", lw=0.9, ls=_CLIENT_LS[k % len(_CLIENT_LS)],
                      label=f"client {k}: train loss" if n_clients > 1 else "train loss") for k in range(n_clients)]
    paper = [handles["paper"]] if "paper" in handles else []
    ordered = [handles[s] for s in SETTINGS if s in handles] + clients + paper
    fig.legend(handles=ordered, loc="outside right center", fontsize=7, frameon=False)
    fig.suptitle(f"FedER thesis Figs. 4.1–4.15 — ResNet-18 on {dataset_name(dataset)} (thesis: CIFAR-100), "
                 f"scale={scale}, seed {seed}", fontsize=9)
    return fig


def floored_share_figure(records: Runs, dataset: str, scale: str) -> plt.Figure | None:
    """FedER's floored share per round of every stored FedER run (one marker per seed), with the share above which
    the FedER-vs-FedAvg claims are not testable; ``None`` before a FedER run is stored."""
    runs = {n: r for n, r in _flat(records).items() if isinstance(r, Record) and split_name(n)[1] == "FedER"}
    if not runs:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 3.6), layout="constrained")
    markers = ("X", "o", "s", "^", "D", "v")
    for i, (n, r) in enumerate(runs.items()):
        row, _, seed = split_name(n)
        sh = r.metric("feder_floored")
        ax.plot(sh.index, sh.values, **{**method_style("FedER"), "marker": markers[i % len(markers)]}, ms=4,
                label=f"FedER · {row} · seed {seed}")
    ax.axhline(FLOORED_MAX, color="0.4", ls="--", lw=0.9,
               label=f"{100 * FLOORED_MAX:.0f} %: above it the FedER-vs-FedAvg claims are not testable")
    ax.set(xlabel="round", ylabel="floored share of client-layers", ylim=(-0.02, 1.02))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")
    ax.set_title(f"FedER: client-layers at Alg. 4's floor — {dataset_name(dataset)}, scale={scale}", fontsize=9)
    return fig


def _layer_round(record: Record, key: str) -> tuple[list[str], np.ndarray]:
    h = [e for e in record.history if key in e]
    layers = list(h[0][key])
    return layers, np.array([[e[key][name] for name in layers] for e in h], float)  # (round, layer, client)


def rank_weights(record: Record, dataset: str, scale: str, seed: int) -> plt.Figure:
    """Eq. 3.1's inputs and outputs per conv layer, client and round: the effective rank er (top; grey where it is
    at Alg. 4's floor, i.e. EVBMF kept at most one component) and the weight α relative to FedAvg's 1/K (bottom,
    log scale from ½ to 2: white = uniform, red = more, blue = less), with the floored share per round in the title."""
    layers, er = _layer_round(record, "feder_rank")
    _, alpha = _layer_round(record, "feder_alpha")
    R, _, K = er.shape
    fig, axes = plt.subplots(2, K, figsize=(2.9 * K + 1.5, 0.22 * len(layers) * 2 + 2.2), layout="constrained",
                             sharey=True, squeeze=False)
    extent = (0.5, R + 0.5, len(layers) - 0.5, -0.5)
    kept = np.ma.masked_less_equal(er, FLOOR)
    cmap = plt.get_cmap("viridis").with_extremes(bad="0.85")
    vmax = float(kept.max()) if kept.count() else 1.0
    ratio = np.clip(alpha * K, 1e-6, None)
    for k in range(K):
        im0 = axes[0, k].imshow(kept[:, :, k].T, aspect="auto", cmap=cmap, vmin=0, vmax=vmax, extent=extent,
                                interpolation="nearest")
        im1 = axes[1, k].imshow(ratio[:, :, k].T, aspect="auto", cmap="RdBu_r", norm=LogNorm(1 / 2, 2),
                                extent=extent, interpolation="nearest")
        axes[0, k].set_title(f"client {k}: er", fontsize=8)
        axes[1, k].set_title(f"client {k}: α / (1/K)", fontsize=8)
        axes[1, k].set_xlabel("round", fontsize=8)
        for a in axes[:, k]:
            a.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=6))
            a.tick_params(labelsize=7)
    for a in axes[:, 0]:
        a.set_yticks(range(len(layers)), [name.replace(".weight", "") for name in layers], fontsize=6)
        a.set_ylabel("conv layer", fontsize=8)
    cb0 = fig.colorbar(im0, ax=axes[0, :], shrink=0.9)
    cb0.set_label(f"er: entropy of EVBMF-kept singular values (nats)\ngrey: at Alg. 4's floor ({FLOOR:g})", fontsize=7)
    ticks = [0.5, 2 / 3, 0.8, 1, 1.25, 1.5, 2]
    cb1 = fig.colorbar(im1, ax=axes[1, :], shrink=0.9, extend="both", ticks=ticks)
    cb1.minorticks_off()
    cb1.ax.set_yticklabels([f"{t:.2g}" for t in ticks])
    cb1.set_label(f"α × K: weight relative to FedAvg's 1/K = {1 / K:.2f}\n(log scale; 1 = uniform; ends: ≤ ½, "
                  "≥ 2)",
                  fontsize=7)
    share = [e["feder_floored"] for e in record.history if "feder_floored" in e]
    shares = (" ".join(f"{x:.2f}" for x in share) if len(share) <= 12 else
              f"{share[0]:.2f} (round 1) → {share[-1]:.2f} (round {len(share)}), mean {np.mean(share):.2f}")
    fig.suptitle(f"FedER (Adam) per-layer effective ranks and weights — ResNet-18 on {dataset_name(dataset)}, "
                 f"scale={scale}, seed {seed}\nfloored share per round: {shares}", fontsize=9)
    return fig


def stable_rank_figure(records: Mapping[tuple[str, str], Run], dataset: str, scale: str,
                       seed: int) -> plt.Figure | None:
    """Fig. A.1: test accuracy per round with Adam of FedAvg, FedER with the effective rank and with the stable
    rank, and the non-federated model; dashed: Table 4.2's final CIFAR-100 accuracies of the Adam row (the thesis
    gives no number for the stable rank). ``None`` before any of these runs is stored."""
    labels = {"FedAvg": "FedAvg", "FedER": "FedER (effective rank)", "FedER (stable rank)": "FedER (stable rank)",
              "non-federated": "non-federated"}
    runs = {s: records.get(("Adam", s)) for s in labels}
    if not stored(runs):
        return None
    fig, ax = plt.subplots(figsize=(9.5, 4.4), layout="constrained")
    for i, (s, r) in enumerate(runs.items()):  # each drawn thinner than the last: equal curves all show
        if isinstance(r, Record):
            acc = 100 * r.metric("test_acc")
            ax.plot(acc.index, acc.values, ms=7 - 1.3 * i, lw=3.2 - 0.7 * i, markevery=max(1, len(acc) // 12),
                    **_style(s), label=f"{labels[s]}: {100 * r.final('test_acc'):.2f} %")
    for s in SETTINGS:
        p = PAPER["Adam"][SETTINGS.index(s)]
        ax.axhline(p, color=_style(s)["color"], ls=(0, (4, 2)), lw=1.0,
                   label=f"thesis (CIFAR-100, 250 epochs): {labels[s]} {p:.2f} %")
    ax.set(xlabel="round", ylabel="test accuracy (%)", ylim=(0, 100))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    ax.set_title(f"FedER thesis Fig. A.1 — stable rank vs effective rank, Adam, ResNet-18 on "
                 f"{dataset_name(dataset)}, scale={scale}, seed {seed}", fontsize=9)
    return fig
