"""Notebook 08's figures: FedSHIBU Fig. 4 (the shard sweep), Fig. 1 (two label groups), Fig. 3 (the
CRSM) and Fig. 5 (FedAvg+CRSM), drawn with the shared figure kinds of :mod:`fedlib.companion.plots`,
and the sentences that say what each shows.

Accuracies are personalized (:mod:`fedlib.companion.papers.fedshibu.tables`), after fine-tuning the
head and, where a method fine-tunes (FedSHIBU, FedBABU, the identity CRSM), before it too. Curves
are the mean over seeds with a 95 % t band, points the seeds' mean with a 95 % t interval (none for
one seed). The paper's numbers (CIFAR-10, ResNet-18, 100 clients) are never drawn on our axes: they
sit in a panel of their own (:func:`fedlib.companion.plots.paper_panel`). Each ``describe_*``
returns one or two sentences with the numbers of its figure, or says which runs are pending.
"""

from __future__ import annotations

from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator
import pandas as pd
import torch

from fedlib.crsm import offdiag_corr
from fedlib.companion.papers.fedshibu.plans import AVG, BABU, IDENTITY, LINEAR
from fedlib.companion.plots import (mean_curves, offdiag_range, paper_panel, similarity_heatmap,
                                    sweep, t_interval)
from fedlib.companion.results import Record
from fedlib.companion.style import dataset_name
from fedlib.companion.papers.fedshibu.tables import (PAPER_ORDER, FEDSHIBU_T1, Runs, crsm_rounds,
                                                     overlap, personal_frame, seed_cells)

__all__ = ["FIG1_LABELS", "ACC", "metric_curves", "plot_shards", "fig1", "fig3", "fig5",
           "describe_fig1", "describe_fig3", "describe_shards", "describe_fedavg_crsm"]

# Fig. 1's runs under names that start with the method whose style they take
# (fedlib.companion.style.method_style)
GROUPED, EVERYTHING = "aggregated within each group", "all bodies aggregated (FedBABU)"
FIG1_LABELS = {EVERYTHING: "FedBABU (all bodies aggregated)", GROUPED: "FedSHIBU (group CRSM: "
                                                                       "within each label group)"}
# the two personalized accuracies: (personal_frame column, history metric, panel name)
ACC = {"after": ("acc", "personal_acc_mean", "after fine-tuning the head"),
       "before": ("acc (no ft)", "personal_noft_acc_mean", "before fine-tuning")}
SAME = 1.0  # points: two mean curves closer than this at every round are said to coincide


def _percent_axis(ax: plt.Axes) -> None:
    """Keep an accuracy axis within 0-100 %, where a 95 % t band of few seeds would reach past it;
    whole rounds."""
    lo, hi = ax.get_ylim()
    ax.set_ylim(max(lo, 0.0), min(hi, 100.0))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def metric_curves(runs: Runs, metric: str = "personal_acc_mean",
                  labels: Mapping[str, str] | None = None) -> dict[str, dict[int, pd.Series]]:
    """``{method: {seed: metric per round}}`` of the stored runs (fractions, as recorded), for
    :func:`fedlib.companion.plots.mean_curves`; ``labels`` renames methods. Runs without ``metric``
    are left out."""
    out: dict[str, dict[int, pd.Series]] = {}
    for rid, r in runs.items():
        if isinstance(r, Record) and len(s := r.metric(metric)):
            label = (labels or {}).get(rid.method, rid.method)
            out.setdefault(label, {})[rid.seed] = s
    return out


def _stat(frame: pd.DataFrame, method: str, col: str = "acc",
          s: int | None = None) -> tuple[float, float, int]:
    """(mean, 95 % t half-width, seeds) of ``col`` over the finished runs of ``method`` (at
    ``s``)."""
    f = frame[frame["method"] == method]
    f = f if s is None else f[f["s"] == s]
    return t_interval(f[col].dropna())


def _paired(frame: pd.DataFrame, a: str, b: str, s: int | None = None) -> tuple[float, float, int]:
    """The difference ``a`` − ``b`` of final accuracy, paired by seed: (mean, 95 % t half-width,
    seeds)."""
    f = frame if s is None else frame[frame["s"] == s]
    x, y = (f[f["method"] == m].set_index("seed")["acc"] for m in (a, b))
    return t_interval((x - y).dropna())


def _pm(mean: float, half: float, unit: str = "%") -> str:
    """``"80.9 ± 3.6 %"``; a difference in points is signed: ``"+1.1 ± 4.1 points"``; one seed: no ±
    part."""
    return (f"{mean:+.1f}" if unit == "points" else f"{mean:.1f}") + (
        f" ± {half:.1f}" if np.isfinite(half) else "") + f" {unit}"


def _stored_count(frame: pd.DataFrame) -> str:
    return f"{int(frame['acc'].notna().sum())} of {len(frame)} runs stored"


def _seeds_range(points: Mapping[float, Mapping[int, float]]) -> str:
    """``"n=5"``, or ``"n=2-5"`` where the levels of s have different numbers of seeds."""
    n = sorted(len(v) for v in points.values())
    return f"n={n[0]}" if n[0] == n[-1] else f"n={n[0]}-{n[-1]}"


def no_ft_anywhere(frame: pd.DataFrame, methods: list[str], pending: list[str]) -> list[str]:
    """The methods with a final personalized accuracy but none before fine-tuning: they do not
    fine-tune (FedAvg)."""
    return [
        m for m in methods
        if m not in pending and not frame.loc[frame["method"] == m, "acc (no ft)"].notna().any()
    ]


def plot_shards(frame: pd.DataFrame, dataset: str, num_clients: int,
                column: str = "cifar10") -> plt.Figure:
    """Fig. 4: personalized accuracy against shards per user s after and before fine-tuning (seeds'
    mean, 95 % t interval; fewer than three levels of s run: dots), the methods nudged apart around
    each s, each s's rounds under its tick, seeds off their plateau ringed, and the paper's Table 1
    ``column`` in a panel of its own."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), layout="constrained",
                             width_ratios=[1, 1, 1.05])
    levels = sorted(int(s) for s in frame["s"].dropna().unique())
    run = sorted(int(s) for s in frame.loc[frame["acc"].notna(), "s"].unique())
    methods = list(dict.fromkeys(frame["method"]))
    nudge = {m: 10 ** (0.012 * (j - (len(methods) - 1) / 2)) for j, m in enumerate(methods)}
    rounds = ({s: sorted(r for r in set(g["rounds"]) if r > 0)
               for s, g in frame[frame["acc"].notna()].groupby("s")}
              if "rounds" in frame else {})
    for ax, (col, _, what) in zip(axes, ACC.values()):
        done = {m: frame[(frame["method"] == m) & frame[col].notna()] for m in methods}
        points = {m: {s * nudge[m]: dict(zip(g["seed"], g[col])) for s, g in d.groupby("s")}
                  # nudged apart (log x: a factor) so no interval hides another
                  for m, d in done.items()}
        labels = {m: f"{m} ({_seeds_range(p)})" for m, p in points.items() if p}
        off = {labels[m]: {s * nudge[m]: int(g["off"].notna().sum()) for s, g in d.groupby("s")}
               for m, d in done.items() if m in labels and col == "acc" and "off" in d}
        note = sweep(ax, {labels[m]: p for m, p in points.items() if p},
                     xlabel="shards per user s (lower: more heterogeneous)",
                     ylabel="personalized test accuracy (%)", off=off, label_rounds=False,
                     rounds={labels[m]: {s * nudge[m]: rounds.get(int(s), [])
                                         for s in d["s"].unique()}
                             for m, d in done.items() if m in labels})
        ax.set_xscale("log")
        ax.set_xticks(run,
                      [str(s) + ''.join(f'\n{r} rounds' for r in rounds.get(s, [])) for s in run],
                      fontsize=8)
        ax.xaxis.set_minor_locator(plt.NullLocator())
        if run:
            ax.set_xlim(run[0] / 1.6, run[-1] * 1.6)
        pending = [m for m in methods if not _stat(frame, m)[2]]
        no_ft = [m for m in methods if m not in pending and not points[m]]
        own = [m for m in methods if col == "acc" and m in no_ft_anywhere(frame, methods, pending)]
        notes = (("pending", pending), ("does not fine-tune", no_ft),
                 ("not fine-tuned (no head of its own; its global model, drawn for reference)",
                  own))
        ax.set_title(f"{what}\n{note}"
                     + "".join(f"\n{k}: {', '.join(v)}" for k, v in notes if v), fontsize=9)
    pend = [s for s in levels if s not in run]
    rows = [[s, *(f"{v:.2f}" for v in FEDSHIBU_T1[column][s])] for s in sorted(FEDSHIBU_T1[column])]
    short = [m.replace("FedSHIBU (CKA linear)", "SHIBU lin.").replace("FedSHIBU (CKA RBF)",
                                                                      "SHIBU RBF")
             for m in PAPER_ORDER]
    paper_panel(axes[2], rows, ["s", *short],
                f"paper, Table 1 (%): {dataset_name(column)}, ResNet-18, 100 clients\n"
                "(SHIBU lin. / RBF: FedSHIBU with linear / RBF CKA)")
    fig.suptitle("FedSHIBU Fig. 4: personalized accuracy by shards per user "
                 f"({dataset_name(dataset)}, {num_clients} clients)"
                 + (f"; not run yet: s = {', '.join(map(str, pend))}" if pend else ""),
                 fontsize=11)
    return fig


def _curves_pair(runs: Runs, labels: Mapping[str, str] | None, title: str) -> plt.Figure | None:
    """Mean personalized accuracy per round after (left) and before (right) fine-tuning, mean over
    seeds with a 95 % t band; None while no run is stored."""
    after, before = (metric_curves(runs, metric, labels) for _, metric, _ in ACC.values())
    if not after:
        return None
    # own y range: before is far lower
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
    for ax, curves, (_, _, what) in zip(axes, (after, before), ACC.values()):
        note = mean_curves(ax, curves, ylabel="mean personalized accuracy (%)")
        _percent_axis(ax)
        ax.set_title(f"{what}; {note}" if curves else f"{what}: not recorded", fontsize=9)
    fig.suptitle(title, fontsize=10)
    return fig


def fig1(runs: Runs, dataset: str) -> tuple[pd.DataFrame, plt.Figure | None]:
    """FedSHIBU Fig. 1 (two label groups): the final personalized accuracy per method (mean ± std
    over seeds) and the curves per round after and before fine-tuning. The paper (CIFAR-10) draws
    curves and prints no values."""
    frame = personal_frame(runs)
    a, b = _stat(frame, GROUPED), _stat(frame, EVERYTHING)
    found = (f"final, after fine-tuning: within groups {a[0]:.1f} %, all bodies {b[0]:.1f} %"
             if a[2] and b[2] else _stored_count(frame))
    fig = _curves_pair(runs, FIG1_LABELS, "FedSHIBU Fig. 1: clients 0–4 hold labels 0–4, clients "
                                          f"5–9 labels 5–9 ({dataset_name(dataset)}); {found}")
    return seed_cells(frame).set_index("method"), fig


def describe_fig1(frame: pd.DataFrame) -> str:
    """Fig. 1 in numbers: each method's final accuracy after and before fine-tuning, and the paired
    difference."""
    grouped, everything = GROUPED, EVERYTHING
    (ga, gh, gn), (ea, eh, en) = _stat(frame, grouped), _stat(frame, everything)
    if not gn or not en:
        return f"Fig. 1 is pending ({_stored_count(frame)}): " + ", ".join(
            f"{m}: {n} seed(s)" for m, n in ((grouped, gn), (everything, en))) + "."
    gb, eb = _stat(frame, grouped, "acc (no ft)")[0], _stat(frame, everything, "acc (no ft)")[0]
    d, h, n = _paired(frame, grouped, everything)
    return (f"Aggregating the bodies within each label group ends at {_pm(ga, gh)} personalized "
            f"accuracy after fine-tuning ({gb:.1f} % before), aggregating all of them (FedBABU) at "
            f"{_pm(ea, eh)} ({eb:.1f} % before); within groups minus all: {_pm(d, h, 'points')} "
            f"over {n} paired seed(s) (± 95 % t).")


def fig3(runs: Runs, dataset: str) -> tuple[pd.DataFrame, plt.Figure | None]:
    """FedSHIBU Fig. 3: the CRSM per round
    (:func:`~fedlib.companion.papers.fedshibu.tables.crsm_rounds`) and, per reading of D̂_i (a row),
    the first stored seed's CRSM at four rounds beside the clients' label overlap: the diagonal
    blank, each panel coloured on its own off-diagonal range (its colour bar's ends); their
    correlation with the label overlap is in :func:`describe_fig3`'s text, with its interval. No
    figure while no run is stored."""
    table = crsm_rounds(runs)
    if table.empty:
        return table, None
    first = {}
    for rid, r in runs.items():
        if isinstance(r, Record):
            first.setdefault(rid.method, (rid, r))
    seeds = sorted({rid.seed for rid, r in runs.items() if isinstance(r, Record)})
    fig, axes = plt.subplots(len(first), 5, figsize=(16, 3.4 * len(first)), layout="constrained",
                             squeeze=False)
    for ax, (method, (rid, r)) in zip(axes, first.items()):
        hist, ov = [e for e in r.history if "crsm" in e], overlap(r.cfg)
        picks = sorted({int(round(q * (len(hist) - 1))) for q in (0, 1 / 3, 2 / 3, 1)})
        mats = {i: np.array(hist[i]["crsm"]) for i in picks}
        for a, i in zip(ax, picks + [None] * (4 - len(picks))):
            if i is None:
                a.axis("off")
                continue
            clients = hist[i].get("crsm_clients") or range(len(mats[i]))
            # each panel its own range: a round's pattern, not the first round's spread
            vr = offdiag_range([mats[i]])
            im = similarity_heatmap(a, mats[i], [str(c) for c in clients],
                                    f"{method.split(' (')[0]} · round {hist[i]['round']}",
                                    annotate=False, vrange=vr)
            cb = fig.colorbar(im, ax=a, fraction=0.046, pad=0.02, ticks=[vr[0], vr[1]],
                              format="%.3f")
            cb.ax.tick_params(labelsize=8)
        ovm = similarity_heatmap(ax[4], ov.numpy(), [str(c) for c in range(len(ov))],
                                 f"label overlap (seed {rid.seed})", annotate=False)
        for a in ax:
            drawn = bool(a.collections)
            a.set(xlabel="client" if drawn else "", ylabel="client" if drawn else "")
        fig.colorbar(ovm, ax=ax[4], fraction=0.05, pad=0.01).set_label(
            "label overlap (cosine),\noff-diagonal range", fontsize=8)
    fig.suptitle(f"FedSHIBU Fig. 3: CRSM of 10 clients at s = 5 ({dataset_name(dataset)}), each "
                 "row the first stored seed of a reading; diagonal blank, each panel coloured on "
                 "its own off-diagonal range (its colour bar's ends)\nits correlation with the "
                 f"label overlap, over {len(seeds)} seed(s) ({', '.join(map(str, seeds))}), is in "
                 "the text below the figure", fontsize=10)
    return table, fig


def _last_r(runs: Runs) -> dict[str, list[float]]:
    """``{method: [r per stored seed]}``: the last stored CRSM's off-diagonal correlation with the
    label overlap."""
    out: dict[str, list[float]] = {}
    for rid, r in runs.items():
        hist = [e for e in r.history if "crsm" in e] if isinstance(r, Record) else []
        if hist:
            r_ = offdiag_corr(torch.tensor(np.array(hist[-1]["crsm"])), overlap(r.cfg))
            out.setdefault(rid.method, []).append(float(r_))
    return out


def describe_fig3(runs: Runs) -> str:
    """Fig. 3 in numbers: per reading of D̂_i, the CRSM's correlation with the label overlap at the
    first and last round and the weight a client keeps of its own body at the last (mean over the
    stored seeds)."""
    table, n = crsm_rounds(runs), sum(isinstance(r, Record) for r in runs.values())
    if table.empty:
        return f"Fig. 3 is pending: none of its {len(runs)} runs is stored yet."
    parts = []
    for method, t in table.groupby(level="method", sort=False):
        (r0, first), (r1, last) = ((i[1], t.loc[i]) for i in (t.index[0], t.index[-1]))
        parts.append(f"{method}: r = {first['corr. with label overlap']:+.2f} at round {r0}, "
                     f"{last['corr. with label overlap']:+.2f} at round {r1}, self-weight "
                     f"{last['self-weight']:.2f}")
    last = []
    for m, v in _last_r(runs).items():
        mean, half, k = t_interval(v)
        last.append(f"{m} {mean:+.2f}" + (f" ± {half:.2f}" if k > 1 else "") +
                    f" ({k} seed{'s' * (k > 1)})")
    return ("Correlation r of the CRSM's off-diagonal with the clients' label overlap and the "
            "mean self-weight (1: each client keeps its own body; 0.1: uniform over 10 clients), "
            f"mean over {n} stored run(s) of {len(runs)}: " + "; ".join(parts)
            + ". At the last round, r with its 95 % t interval over seeds: " + "; ".join(last)
            + ". The CRSM's off-diagonal cells span a few hundredths (the figure colours that "
            "range), so r reads a pattern in small differences.")


SHORT = {LINEAR: "FedSHIBU", BABU: "FedBABU", IDENTITY: "identity CRSM", AVG: "FedAvg"}


def describe_shards(frame: pd.DataFrame) -> str:
    """Fig. 4 in numbers: per level of s run, its rounds, each method's final accuracy after (and
    before) fine-tuning, the runs still rising at the end, the FedSHIBU − FedBABU difference paired
    by seed, and what is pending."""
    levels = sorted(int(s) for s in frame["s"].dropna().unique())
    run = [s for s in levels if frame.loc[frame["s"] == s, "acc"].notna().any()]
    if not run:
        return f"Fig. 4 is pending: none of Table 1's {len(frame)} runs is stored yet."
    parts = []
    for s in run:
        have, missing = [], []
        for m in dict.fromkeys(frame["method"]):
            mean, _, n = _stat(frame, m, s=s)
            pre = _stat(frame, m, "acc (no ft)", s)[0]
            (have if n else
             missing).append(f"{SHORT.get(m, m)} {mean:.1f} %" +
                             (f" ({pre:.1f} % before fine-tuning)" if np.isfinite(pre) else "") +
                             f", {n} seed(s)" if n else SHORT.get(m, m))
        d, h, n = _paired(frame, LINEAR, BABU, s)
        at = frame[(frame["s"] == s) & frame["acc"].notna()]
        rounds = sorted(r for r in set(at["rounds"]) if r > 0) if "rounds" in at else []
        rising = [
            f"{SHORT.get(m, m)} {int(g['off'].notna().sum())} of {len(g)}"
            for m, g in at.groupby("method", sort=False) if "off" in g and g["off"].notna().any()
        ]
        head = f"at s = {s}" + (f" ({', '.join(f'{r} rounds' for r in rounds)})" if rounds else "")
        parts.append(
            head + ", " + "; ".join(have) +
            (f"; still rising at the end (ringed): {', '.join(rising)}" if rising else "") +
            (f"; FedSHIBU − FedBABU {_pm(d, h, 'points')} over {n} paired seed(s)" if n else "") +
            (f"; pending: {', '.join(missing)}" if missing else ""))
    pend = [s for s in levels if s not in run]
    return (f"Final personalized accuracy, mean over seeds ({_stored_count(frame)}; ± 95 % t): " +
            ". ".join(parts) + "." +
            (f" Not run yet: s = {', '.join(map(str, pend))}." if pend else ""))


# drawn in this order: local-only under, FedAvg on top
FIG5 = ("Local only", "FedAvg+CRSM", "FedAvg")


def _max_gap(curves: Mapping[str, Mapping[int, pd.Series]], a: str, b: str) -> float:
    """The largest |difference| (points) of the seed-mean accuracy curves of ``a`` and ``b`` over
    the rounds both have."""
    if not curves.get(a) or not curves.get(b):
        return float("nan")
    d = (pd.concat(curves[a], axis=1).mean(axis=1) -
         pd.concat(curves[b], axis=1).mean(axis=1)).dropna()
    return float(100 * d.abs().max()) if len(d) else float("nan")


def _fig5_finding(frame: pd.DataFrame, runs: Runs) -> str:
    """Which control FedAvg+CRSM's curve coincides with (within :data:`SAME` points at every round),
    with the self-weight its CRSM keeps; the run count while a side is pending."""
    curves = metric_curves(runs)
    sw = _stat(frame, "FedAvg+CRSM", "self-weight")[0]
    local = _max_gap(curves, "FedAvg+CRSM", "Local only")
    avg = _max_gap(curves, "FedAvg+CRSM", "FedAvg")
    if not (np.isfinite(sw) and np.isfinite(local) and np.isfinite(avg)):
        return _stored_count(frame)
    m = next(r.cfg.num_clients for r in runs.values() if isinstance(r, Record))
    text = f"FedAvg+CRSM's CRSM keeps a self-weight of {sw:.2f} (identity: 1, uniform: 1/{m})"
    (near, a), (far, b) = sorted([(local, "local-only training"), (avg, "FedAvg")])
    if near < SAME:
        return text + f", and its curve stays within {near:.1f} points of {a}'s at every round"
    if near < far / 4:
        return text + (f", and its curve follows {a}'s (at most {near:.1f} points apart; {b}'s: "
                       f"up to {far:.1f})")
    return text + (f"; its curve is up to {local:.1f} points from local-only training's and "
                   f"{avg:.1f} from FedAvg's")


def fig5(runs: Runs, dataset: str,
         column: str = "cifar10") -> tuple[pd.DataFrame, plt.Figure | None]:
    """FedSHIBU Fig. 5 (s = 5): the final personalized accuracy and CRSM per method (mean ± std over
    seeds) and the curves per round with local-only training (the identity CRSM; FedAvg is the
    uniform one), titled with the control FedAvg+CRSM coincides with; the paper's FedAvg at s = 5
    (Table 1 ``column``) in a panel of its own."""
    frame = personal_frame(runs)
    table, curves = seed_cells(frame).set_index("method"), metric_curves(runs)
    if not curves:
        return table, None
    fig, (ax, pax) = plt.subplots(1, 2, figsize=(11, 4.4), layout="constrained",
                                  width_ratios=[2.3, 1])
    note = mean_curves(ax, {m: curves[m] for m in (*FIG5, *curves) if m in curves},
                       ylabel="mean personalized accuracy (%)")
    # local-only wide and light beneath: a curve drawn over it stays visible
    for line in ax.get_lines():
        if line.get_label().startswith("Local only"):
            line.set(lw=3.5, alpha=0.6)
    ax.legend(fontsize=8, loc="lower right")
    _percent_axis(ax)
    ax.set_title("no fine-tuning in these methods: each client's model on its own test "
                 f"split\n{note}", fontsize=9)
    paper_panel(pax, [["FedAvg (Table 1)", f"{FEDSHIBU_T1[column][5][3]:.2f}"],
                      ["FedAvg+CRSM", "no value printed"]], ["method", "s = 5 (%)"],
                f"paper: {dataset_name(column)}, ResNet-18,\n100 clients")
    fig.suptitle(f"FedSHIBU Fig. 5: FedAvg vs FedAvg+CRSM at s = 5 ({dataset_name(dataset)})\n"
                 f"{_fig5_finding(frame, runs)}", fontsize=10)
    return table, fig


def describe_fedavg_crsm(frame: pd.DataFrame, runs: Runs) -> str:
    """Fig. 5 in numbers: each method's final personalized accuracy, FedAvg+CRSM − FedAvg paired by
    seed, and which control FedAvg+CRSM's curve coincides with."""
    stats_ = {m: _stat(frame, m) for m in FIG5}
    if not all(n for _, _, n in stats_.values()):
        return f"Fig. 5 is pending ({_stored_count(frame)}): " + ", ".join(
            f"{m}: {n} seed(s)" for m, (_, _, n) in stats_.items()) + "."
    d, h, n = _paired(frame, "FedAvg+CRSM", "FedAvg")
    return ("Final personalized accuracy (mean over seeds ± 95 % t): " + ", ".join(
        f"{m} {_pm(mean, half)}" for m, (mean, half, _) in stats_.items()) +
        f"; FedAvg+CRSM − FedAvg {_pm(d, h, 'points')} over {n} paired seed(s). "
        f"{_fig5_finding(frame, runs)}.")
