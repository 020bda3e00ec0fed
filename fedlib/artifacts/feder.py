"""Notebook 07: FedER thesis Table 4.2 and Fig. A.1 as tables and verdicts, with FedER's floored share.

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

import numpy as np
import pandas as pd

from ..grid import Diverged, cell
from ..plans.feder import split_name
from ..results import Pending, Record
from ..verdicts import Verdict, decide, not_testable, pending

__all__ = ["PAPER", "FLOORED_MAX", "SOURCE", "runs_frame", "mean_table", "plateau_rise", "verdicts"]

PAPER = {  # Table 4.2, CIFAR-100: non-federated / FedAvg / FedER
    "Adam": (71.71, 76.87, 77.05), "Adam + StepLR": (74.54, 75.71, 75.97), "AdamP": (70.06, 50.89, 49.43),
    "AdamP + StepLR": (76.39, 71.85, 72.68), "RMSGD": (60.22, 60.07, 60.52)}
SETTINGS = ("non-federated", "FedAvg", "FedER")
FLOORED_MAX = 0.25  # above this mean share of floored client-layers, FedER is (mostly) FedAvg: nothing to compare
SOURCE = "FedER thesis"
_CLASSES = {"cifar100": 100, "tinyimagenet": 200}

Run = Record | Pending | Diverged


def chance(dataset: str) -> float:
    """Chance accuracy (%) of ``dataset``'s classes."""
    return 100.0 / _CLASSES.get(dataset, 10)


def floored(record: Record) -> float:
    """FedER's mean floored share over its rounds (NaN for a run that is not FedER)."""
    xs = [h["feder_floored"] for h in record.history if "feder_floored" in h]
    return float(np.mean(xs)) if xs else math.nan


def plateau_rise(record: Record) -> float:
    """The rise (points) of the test accuracy, a median of 3 rounds, over the last 20 % of the rounds: at most 1 on
    a plateau."""
    acc = 100 * record.metric("test_acc").to_numpy()
    if len(acc) < 2:
        return math.nan
    med = lambda i: float(np.median(acc[max(0, i - 2): i + 1]))  # noqa: E731
    return med(len(acc) - 1) - med(max(0, round(0.8 * len(acc)) - 1))


def runs_frame(runs: Mapping[str, Run]) -> pd.DataFrame:
    """One row per run: ``name, row, setting, seed, pending, diverged, acc`` (final test accuracy, %), ``floored``
    (FedER's mean floored share) and ``rise`` (:func:`plateau_rise`)."""
    rows = []
    for name, r in runs.items():
        row, setting, seed = split_name(name)
        ok = isinstance(r, Record)
        rows.append({"name": name, "row": row, "setting": setting, "seed": seed, "pending": isinstance(r, Pending),
                     "diverged": isinstance(r, Diverged), "acc": 100 * r.final("test_acc") if ok else np.nan,
                     "floored": floored(r) if ok else np.nan, "rise": plateau_rise(r) if ok else np.nan})
    return pd.DataFrame(rows, columns=["name", "row", "setting", "seed", "pending", "diverged", "acc", "floored",
                                       "rise"])


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
                  diverged=list(A.loc[A["diverged"], "name"]) + list(B.loc[B["diverged"], "name"]))


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


# ---------------------------------------------------------------------------------------------------- figures
def training_curves(records: Mapping[tuple[str, str], Run], title: str):
    """Figs. 4.1–4.15: one panel per (optimizer row, setting): each client's mean training loss per round (left,
    log) and the global model's test accuracy (right, pink), as the thesis's figures."""
    import matplotlib.pyplot as plt

    rows, cols = list(dict.fromkeys(k[0] for k in records)), list(dict.fromkeys(k[1] for k in records))
    fig, axes = plt.subplots(len(rows), len(cols), figsize=(3.7 * len(cols), 2.4 * len(rows) + 0.6),
                             layout="constrained", sharex=True, squeeze=False)
    for (i, row), (j, s) in ((a, b) for a in enumerate(rows) for b in enumerate(cols)):
        ax, r = axes[i, j], records.get((row, s))
        if not isinstance(r, Record):
            what = "not run" if r is None else "pending" if isinstance(r, Pending) else "diverged"
            ax.text(0.5, 0.5, what, ha="center", va="center", transform=ax.transAxes, color="0.5")
            ax.set_title(f"{s} · {row}: {what}", fontsize=8)
            continue
        h = r.frame()
        losses = np.array(h["client_loss"].tolist())
        for k in range(losses.shape[1]):
            ax.plot(h["round"], losses[:, k], lw=1, label=f"client {k}" if s != "non-federated" else "train")
        ax.set_yscale("log")
        tw = ax.twinx()
        tw.plot(h["round"], 100 * h["test_acc"], color="deeppink", marker="o", ms=2, lw=1.2)
        tw.set_ylim(0, 100)
        ax.set_title(f"{s} · {row}: {100 * r.final('test_acc'):.2f} %", fontsize=8)
        ax.set_ylabel("train loss" if j == 0 else "", fontsize=7)
        tw.set_ylabel("test acc (%)" if j == len(cols) - 1 else "", fontsize=7)
        ax.set_xlabel("round (= epoch)" if i == len(rows) - 1 else "", fontsize=7)
        ax.tick_params(labelsize=6)
        tw.tick_params(labelsize=6)
    if axes[0, -1].lines:
        axes[0, -1].legend(fontsize=6, loc="upper right")
    fig.suptitle(title, fontsize=9)
    return fig


def _layer_round(record: Record, key: str) -> tuple[list[str], np.ndarray]:
    h = [e for e in record.history if key in e]
    layers = list(h[0][key])
    return layers, np.array([[e[key][name] for name in layers] for e in h])  # (round, layer, client)


def rank_weights(record: Record, title: str):
    """Each conv layer's rank (EVBMF-kept entropy) per client and round (top) and the weight α each client gets
    (bottom; 1/K is FedAvg's), with the floored share per round in the figure's title."""
    import matplotlib.pyplot as plt

    layers, er = _layer_round(record, "feder_rank")
    _, alpha = _layer_round(record, "feder_alpha")
    K, R = er.shape[2], er.shape[0]
    fig, axes = plt.subplots(2, K, figsize=(3 * K, 8), layout="constrained", sharey=True, squeeze=False)
    extent = (0.5, R + 0.5, len(layers) - 0.5, -0.5)
    for k in range(K):
        im0 = axes[0, k].imshow(er[:, :, k].T, aspect="auto", cmap="viridis", vmin=0, vmax=max(er.max(), 1e-3),
                                extent=extent)
        im1 = axes[1, k].imshow(alpha[:, :, k].T, aspect="auto", cmap="RdBu_r", vmin=0, vmax=2 / K, extent=extent)
        axes[0, k].set_title(f"client {k}: er (entropy, nats)", fontsize=8)
        axes[1, k].set_title(f"client {k}: α (uniform = {1 / K:.2f})", fontsize=8)
        axes[1, k].set_xlabel("round")
    for a in axes[:, 0]:
        a.set_yticks(range(len(layers)), [name.replace(".weight", "") for name in layers], fontsize=6)
    fig.colorbar(im0, ax=axes[0, :], shrink=0.8)
    fig.colorbar(im1, ax=axes[1, :], shrink=0.8)
    share = [e["feder_floored"] for e in record.history if "feder_floored" in e]
    fig.suptitle(f"{title}\nfloored share per round: " + " ".join(f"{x:.2f}" for x in share), fontsize=9)
    return fig
