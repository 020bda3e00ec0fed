"""The partitions and the baselines (notebooks 00 and 01): FedCKA Fig. 4 / FedIntR Fig. 3 (Dirichlet
partitions), FedSHIBU's shards and label groups, and FedIntR Table I's FedAvg and FedProx rows with
FedCKA Fig. 5's centralized upper bound — each a tidy table and a figure, with the papers' numbers
beside ours where they print any.

    stats = dirichlet_stats(parts); partition_figure(parts, dataset, "dirichlet")
    per_run = per_run_frame(records, last); summary_table(per_run); versus_paper(per_run, dataset)
    baseline_curves_figure(records, per_run, dataset, scale); describe_baseline(per_run)
    baseline_verdicts(per_run, scale, dataset, data)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import Normalize
from matplotlib.ticker import MaxNLocator

from fedlib.data import chance
from fedlib.companion.grid import DIVERGED, Diverged, Runs, cell, offs
from fedlib.partition import Partition
from fedlib.companion.papers.baselines.plans import BASELINE_LEFT_OUT
from fedlib.companion.papers.fedintr.tables import FEDINTR_T1
from fedlib.companion.plots import mean_curves, paper_panel, t_interval
from fedlib.companion.report import compare
from fedlib.companion.results import Pending, Record
from fedlib.companion.scales import scale_of
from fedlib.companion.style import dataset_name
from fedlib.companion.verdicts import (PENDING, Verdict, decide, not_testable, off_plateau,
                                       pending as pending_verdict)

__all__ = ["ALPHAS", "BASELINE_T1", "PAPER_T1_DATASET", "PAPER_FIG5", "label_entropy",
           "dirichlet_stats", "partition_figure", "Check", "partition_checks", "per_run_frame",
           "summary_table", "versus_paper", "FEDCKA_SETUP", "baseline_curves_figure",
           "describe_baseline", "baseline_verdicts"]

# FedCKA Fig. 4: arXiv α ∈ {5, 0.5, 0.1}, Appl. Sci. α ∈ {5, 1, 0.1}; FedIntR Fig. 3: β ∈ {5, 0.5,
# 0.1}
ALPHAS = (5.0, 1.0, 0.5, 0.1)
# FedIntR Table I's cells of notebook 01's runs: dataset -> {run: accuracy}. FedProx's best μ is
# 0.001 only on Fashion-MNIST, so only that cell is our FedProx (μ=0.001) run's paper value.
BASELINE_T1: dict[str, dict[str, float]] = {
    d: {"FedAvg": row["FedAvg"][0],
        **({"FedProx (μ=0.001)": row["FedProx"][0]} if row["FedProx"][1] == 0.001 else {})}
    for d, row in FEDINTR_T1.items()}
PAPER_T1_DATASET = "fmnist"  # the column notebook 01's table and fidelity claim compare with
# FedCKA Fig. 5 / §4.4 (CIFAR-10, α = 5): the centralized upper bound and FedAvg
PAPER_FIG5 = {"Centralized": 70.0, "FedAvg": 64.37}


# ------------------------------------------------------------------------------ partitions (00)

def label_entropy(counts: np.ndarray) -> np.ndarray:
    """Per client, the entropy of its label distribution divided by log(classes): 1 uniform, 0 a
    single class."""
    counts = np.asarray(counts, dtype=float)
    p = counts / np.maximum(counts.sum(1, keepdims=True), 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(p > 0, p * np.log(np.where(p > 0, p, 1)), 0.0).sum(1)
    return h / np.log(counts.shape[1])


def dirichlet_stats(parts: Mapping[float, Partition]) -> pd.DataFrame:
    """What FedCKA Fig. 4 / FedIntR Fig. 3 show qualitatively, one row per α: classes per client,
    label entropy, the smallest and largest client, and the partition's hash."""
    stats = pd.DataFrame({a: {"classes per client (mean)": (p.counts > 0).sum(1).mean(),
                              "normalized label entropy (mean)": label_entropy(p.counts).mean(),
                              "smallest client": p.sizes.min(), "largest client": p.sizes.max(),
                              "partition hash": p.hash} for a, p in parts.items()}).T
    stats.index.name = "α"
    return stats


def _panel(ax: plt.Axes, counts: np.ndarray, title: str, norm: Normalize) -> Any:
    """Client × class counts as a heatmap without per-cell labels (x = client, y = class, as the
    papers draw)."""
    im = ax.imshow(counts.T, aspect="auto", cmap="Blues", origin="lower", norm=norm,
                   interpolation="nearest")
    n_c, n_k = counts.shape
    ax.set_xticks(range(0, n_c, 1 if n_c <= 20 else 10 * int(np.ceil(n_c / 60))))
    ax.set_yticks(range(0, n_k, 1 if n_k <= 20 else 10 * int(np.ceil(n_k / 60))))
    ax.set_xlabel("client")
    ax.set_ylabel("class")
    ax.set_title(title, fontsize=10)
    return im


def partition_figure(parts: Mapping[Any, Partition], dataset: str, kind: str = "dirichlet",
                     seed: int | None = None) -> plt.Figure:
    """FedCKA Fig. 4 / FedIntR Fig. 3 (``kind="dirichlet"``, ``parts``: α -> partition; one shared
    colour scale, so the panels compare) or FedSHIBU's partitions (``kind="shards"``, ``parts``:
    panel title -> partition; a colour scale per panel, their sizes differ tenfold). Each panel's
    title gives the mean number of classes per client; the figure's title names the partition
    ``seed`` (one draw: no interval)."""
    shared = kind == "dirichlet"
    n = len(parts)
    cols = 2 if n == 4 else n
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.9 * rows), layout="constrained",
                             squeeze=False)
    top = max(int(p.counts.max()) for p in parts.values())
    for ax, (key, p) in zip(axes.flat, parts.items()):
        k = (p.counts > 0).sum(1).mean()
        title = (f"α = {key:g}" if shared else str(key)) + f" — {k:.1f} classes per client"
        im = _panel(ax, p.counts, title, Normalize(0, top if shared else p.counts.max()))
        if not shared:
            fig.colorbar(im, ax=ax, fraction=0.05, pad=0.02, label="training samples")
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    drawn = "" if seed is None else f"\none draw, partition seed {seed}"
    if shared:
        fig.colorbar(im, ax=axes, fraction=0.03, pad=0.02,
                     label="training samples per client and class")
        fig.suptitle("FedCKA Fig. 4 / FedIntR Fig. 3: client × class counts, Dirichlet over "
                     f"{p.counts.shape[0]} clients — {dataset_name(dataset)} (the papers show "
                     f"CIFAR-10){drawn}", fontsize=11)
    else:
        fig.suptitle("FedSHIBU partitions: shards per user and label groups — "
                     f"{dataset_name(dataset)} (the paper uses CIFAR-10/100){drawn}", fontsize=11)
    return fig


@dataclass(frozen=True)
class Check:
    """An invariant of the partition code, for :meth:`fedlib.companion.report.Report.check`."""

    text: str
    ok: bool
    detail: str = ""


def partition_checks(labels: np.ndarray, test_labels: np.ndarray, parts: Mapping[float, Partition],
                     shard_parts: Mapping[str, Partition], groups: Partition) -> list[Check]:
    """The partitions' invariants: heterogeneity falls with α, the NIID-Bench minimum size, every
    sample assigned once, at most s classes per shard client, a client's test split holding only its
    classes, FedSHIBU Fig. 1's label groups. ``shard_parts`` are named ``"... s = <s>"``."""
    alphas = sorted(parts, reverse=True)
    ent = [label_entropy(parts[a].counts).mean() for a in alphas]
    every = list(parts.values()) + list(shard_parts.values())
    g0, g1 = (set(np.unique(labels[np.concatenate(groups.client_indices[sl])]))
              for sl in (slice(0, 5), slice(5, None)))
    return [
        Check(
            "FedCKA §Experimental Setup / FedIntR §IV-C: a lower Dirichlet α (β) gives more "
            "heterogeneous clients", all(x > y for x, y in zip(ent, ent[1:])),
            f"mean normalized label entropy {np.round(ent, 3)}"),
        Check("MOON/NIID-Bench convention: every client holds at least 10 samples",
              all(p.sizes.min() >= 10 for p in parts.values())),
        Check(
            "Every training sample is assigned to exactly one client",
            all(
                np.array_equal(np.sort(np.concatenate(p.client_indices)), np.arange(len(labels)))
                for p in every)),
        Check(
            "McMahan/FedBABU shards: each client holds at most s classes",
            all(((p.counts > 0).sum(1) <= int(name.split("= ")[1])).all()
                for name, p in shard_parts.items())),
        Check(
            "FedBABU personalized evaluation: a client's test split holds only its own classes",
            all(
                set(np.unique(test_labels[t])) <= set(np.unique(labels[i]))
                for p in shard_parts.values() for i, t in zip(p.client_indices, p.test_indices))),
        Check("FedSHIBU Fig. 1: clients 0-4 draw from labels 0-4, clients 5-9 from labels 5-9",
              g0 == {0, 1, 2, 3, 4} and g1 == {5, 6, 7, 8, 9})
    ]


# ------------------------------------------------------------------------------- baselines (01)

def _status(r: Any) -> str:
    return PENDING if isinstance(r, Pending) else DIVERGED if isinstance(r, Diverged) else "done"


def per_run_frame(records: Runs, last: int) -> pd.DataFrame:
    """One row per run (its id's method and seed, its name): the final accuracy as FedIntR reports
    it (the median of the ``last`` rounds, %; ``last`` kept), the best round, seconds per round,
    executor and device; NaN when pending or diverged."""
    rows = []
    for rid, r in records.items():
        status, done = _status(r), isinstance(r, Record)
        rows.append({
            "method": rid.method, "seed": r.cfg.seed, "rounds": r.cfg.rounds, "last": last,
            "local epochs": r.cfg.local_epochs, "status": status, "name": str(rid),
            "off": off_plateau(r) if done else None,
            "final": 100 * r.final("test_acc", last=last) if done else np.nan,
            "best": 100 * r.metric("test_acc").max() if done else np.nan,
            "s / round": r.frame()["time_s"].mean() if done and "time_s" in r.frame() else np.nan,
            "executor": r.provenance.get("executor", "") if done else status,
            "device": r.provenance.get("device", "") if done else status, "record": r.key
        })
    return pd.DataFrame(rows)


def _mean_std(s: pd.Series) -> str:
    s = s.dropna()
    return PENDING if s.empty else cell(s.mean(), s.std(), len(s))


def summary_table(per_run: pd.DataFrame) -> pd.DataFrame:
    """Per method: final and best test accuracy (mean ± std over the seeds done; "pending", or
    "diverged" when a seed diverged), seeds done of those planned, rounds, local epochs, seconds per
    round, executor and device."""
    g = per_run.groupby("method", sort=False)
    div = g["status"].apply(lambda s: (s == DIVERGED).any())
    return pd.DataFrame({
        "final test acc (%)": g["final"].apply(_mean_std).where(~div, DIVERGED),
        "seeds done / planned": g["final"].apply(lambda s: f"{s.notna().sum()} / {len(s)}"),
        "best test acc (%)": g["best"].apply(_mean_std).where(~div, DIVERGED),
        "rounds": g["rounds"].first(), "local epochs": g["local epochs"].first(),
        "s / round": g["s / round"].mean().round(1), "executor": g["executor"].first(),
        "device": g["device"].first()
    })


def versus_paper(per_run: pd.DataFrame) -> pd.DataFrame:
    """FedIntR Table I (Fashion-MNIST) beside ours: the paper's number, our mean over seeds (as
    "mean ± std", or pending / diverged) and the difference of the means."""
    paper = BASELINE_T1[PAPER_T1_DATASET]
    summary = summary_table(per_run)
    acc = per_run.groupby("method", sort=False)["final"].mean()
    table = compare(paper, {k: acc.get(k, np.nan) for k in paper})
    table["ours (%)"] = [summary["final test acc (%)"].get(k, PENDING) for k in paper]
    return table.astype(object).where(table.notna(), PENDING)


# FedCKA's setup (its simple CNN, α = 5): the centralized upper bound and FedAvg beside it; the rest
# is FedIntR's
FEDCKA_SETUP = ("Centralized", "FedAvg (FedCKA's setup)")


def _seed_curves(records: Runs, methods: Sequence[str]) -> dict[str, dict[int, pd.Series]]:
    """``{method: {seed: test accuracy per round}}`` of the stored runs of ``methods``."""
    out: dict[str, dict[int, pd.Series]] = {}
    for rid, r in records.items():
        if isinstance(r, Record) and rid.method in methods:
            out.setdefault(rid.method, {})[r.cfg.seed] = r.metric("test_acc")
    return {m: out[m] for m in methods if m in out}


def _setup(records: Runs, methods: Sequence[str]) -> str:
    """``"ours: 40 rounds × 6 local epochs, 12,000 training images"``: the setup of the stored runs
    of ``methods`` (each distinct value where they differ; the centralized run's epochs are its
    rounds)."""
    cfgs = [r.cfg for rid, r in records.items() if isinstance(r, Record) and rid.method in methods]
    if not cfgs:
        return ""
    vals = lambda f: "/".join(map(str, sorted({getattr(c, f, None)
                                               for c in cfgs} - {None})))  # noqa: E731
    n = sorted({c.n_train for c in cfgs if getattr(c, "n_train", None)})
    return (f"ours: {vals('rounds')} rounds × {vals('local_epochs')} local epochs"
            + (f", {'/'.join(f'{x:,}' for x in n)} training images" if n
               else ", the full training set"))


def _not_done(per_run: pd.DataFrame, methods: Sequence[str]) -> list[str]:
    """``"<method> <k> of <n> seeds"`` for each of ``methods`` with seeds pending or diverged."""
    g = per_run[per_run["method"].isin(methods)].groupby("method", sort=False)["status"]
    return [
        f"{m} {int((s != 'done').sum())} of {len(s)} seeds" for m, s in g if (s != "done").any()
    ]


def baseline_curves_figure(records: Runs, per_run: pd.DataFrame, dataset: str,
                           scale: str) -> plt.Figure | None:
    """Test accuracy per round, the mean over the seeds done with a 95 % t band: FedIntR's setup
    (FedAvg, FedProx μ = 0.001) and FedCKA's (the centralized upper bound, FedAvg) in panels of
    their own, and the papers' numbers (FedIntR Table I for ``dataset``, after 100 rounds; FedCKA
    Fig. 5 on CIFAR-10) as tables in a third panel, never on our axes. None when no run is
    stored."""
    methods = list(dict.fromkeys(per_run["method"]))
    groups = {
        "FedIntR's setup (FedIntR CNN, β = 0.5)": [m for m in methods if m not in FEDCKA_SETUP],
        "FedCKA's setup (simple CNN, α = 5): the centralized upper bound": [
            m for m in methods if m in FEDCKA_SETUP
        ]
    }
    curves = {title: c for title, ms in groups.items() if (c := _seed_curves(records, ms))}
    if not curves:
        return None
    fig, axes = plt.subplots(1,
                             len(curves) + 1, figsize=(5.2 * len(curves) + 3.6, 4.4),
                             layout="constrained", width_ratios=[1] * len(curves) + [0.75])
    for ax, (title, c) in zip(axes, curves.items()):
        note = mean_curves(ax, c)
        # FedAvg wide underneath: FedProx's equal
        for line in ax.lines[:1] if FEDCKA_SETUP[0] not in c else []:
            # curve on top leaves it visible
            line.set(lw=2.8, alpha=0.8, zorder=1.5)
        ax.legend(fontsize=8, loc="lower right")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        left = _not_done(per_run, groups[title])
        ax.set_title(f"{title}\n{_setup(records, groups[title])}\n{note}"
                     + (f"\npending or diverged: {', '.join(left)}" if left else ""), fontsize=8)
    paper = axes[-1]
    paper.axis("off")
    t1 = BASELINE_T1.get(dataset, {})
    tables = ([(f"FedIntR Table I: {dataset_name(dataset)}, 10 clients,\n"
                "β = 0.5, 100 rounds × 10 epochs", [[m, f"{v:.2f}"] for m, v in t1.items()])]
              if t1 else [])
    tables += [("FedCKA Fig. 5 (arXiv): CIFAR-10, α = 5",
                [[m, f"{v:.2f}"] for m, v in PAPER_FIG5.items()])]
    for k, (title, rows) in enumerate(tables):
        paper_panel(paper.inset_axes((0, 1 - (k + 1) / len(tables), 1, 1 / len(tables) - 0.08)),
                    rows, ["method", "paper: test acc. (%)"], title)
    fig.suptitle(f"Baselines on {dataset_name(dataset)}, scale={scale}: test accuracy per round "
                 "(the papers' numbers, from their own longer setups on the full data, on the "
                 "right: not comparable levels)",
                 fontsize=10)
    return fig


def describe_baseline(per_run: pd.DataFrame) -> str:
    """Each method's final accuracy (mean over the seeds done ± the 95 % t interval) with FedProx −
    FedAvg and Centralized − FedAvg in FedCKA's setup; which seeds are pending. "Pending" alone when
    no run is stored."""
    done = per_run[per_run["status"] == "done"]
    left = _not_done(per_run, list(dict.fromkeys(per_run["method"])))
    if done.empty:
        return "Pending: no baseline run is stored yet" + (f" ({', '.join(left)})"
                                                           if left else "") + "."
    parts = []
    for m, g in done.groupby("method", sort=False):
        mean, half, n = t_interval(g["final"])
        parts.append(f"{m} {mean:.2f} %" + (f" ± {half:.2f}" if n > 1 else "") +
                     f" ({n} seed{'s' * (n > 1)})")
    acc = done.groupby("method")["final"].mean()
    diffs = [
        f"{a} − {b} = {acc[a] - acc[b]:+.2f} points"
        for a, b in (("FedProx (μ=0.001)", "FedAvg"), ("Centralized", "FedAvg (FedCKA's setup)"))
        if a in acc and b in acc
    ]
    return ("Final test accuracy (FedIntR's median of the last rounds; mean over seeds ± 95 % t "
            "interval): "
            + "; ".join(parts) + "." + (f" {'; '.join(diffs)}." if diffs else "")
            + (f" Pending or diverged: {', '.join(left)}." if left else ""))


# FedIntR Table I's rows notebook 01 runs: the paper reports each run's accuracy (a claim of the
# paper: its number)
REPORTED = {"FedAvg": "FedAvg", "FedProx (μ=0.001)": "FedProx (μ = 0.001)"}
# The project's control (no sentence of the paper makes it; FedCKA's centralized bound is judged in
# notebook 04): (claim, source, (ours, theirs), kind, Table I's own difference)
CLAIMS = {
    "FedProx with μ = 0.001 performs like FedAvg (comparable)": (
        "FedIntR Table I (88.95 vs 88.90)", ("FedProx (μ=0.001)", "FedAvg"), "within", 0.05)}


def _rule(per_run: pd.DataFrame, methods: Sequence[str]) -> str:
    """The reading's rule of rows read at a fixed round: FedIntR's statistic at the run's last
    round."""
    g = per_run[per_run["method"].isin(methods)]
    rounds = "-".join(map(str, sorted(set(g["rounds"])))) or "?"
    last = "-".join(map(str, sorted(set(g["last"])))) if "last" in g else "?"
    return (f"read as FedIntR Table I reads it: the median test accuracy of the last {last} of "
            f"{rounds} rounds, each run checked on its plateau")


def _reported(method: str, per_run: pd.DataFrame, scale: str, dataset: str, per_seed: Any,
              with_status: Any, off: list[str]) -> Verdict:
    """FedIntR Table I's number for ``method`` on ``dataset``: our per-seed accuracies against it
    (``d`` = ours − the paper's, "within" at the margin policy's point, the paper's own d 0).
    Decided at paper scale only: elsewhere the budget that number belongs to is not the one
    trained."""
    ref = BASELINE_T1.get(dataset, {}).get(method)
    number = "number" if ref is None else f"{ref:.2f} %"
    claim = f"{REPORTED[method]} reaches FedIntR Table I's {number} on {dataset_name(dataset)}"
    source = "FedIntR Table I"
    if ref is None:
        return not_testable(claim, source,
                            f"FedIntR Table I has no {REPORTED[method]} number for {dataset}")
    if not scale_of(scale).exact:
        return replace(
            not_testable(
                claim, source, f"scale={scale}: Table I's number is an "
                "accuracy of the paper's own budget, which this "
                "scale shrinks (what it is decided on names how)", f"{ref:.2f}"), paper_d=0.0)
    if with_status([method], PENDING):
        return pending_verdict(claim, source)
    return decide(claim, source, {s: v - ref
                                  for s, v in per_seed(method).items()}, kind="within",
                  names=(f"{REPORTED[method]} − {ref:.2f}", ),
                  diverged=with_status([method], DIVERGED), off=off, paper=f"{ref:.2f}",
                  paper_d=0.0, runs=list(per_seed(method).values()), chance=chance(dataset))


def baseline_verdicts(per_run: pd.DataFrame, scale: str, dataset: str,
                      data: str = "") -> list[Verdict]:
    """FedIntR Table I's FedAvg and FedProx (μ = 0.001) numbers (the paper's claims: each run
    reaches the accuracy the paper reports, at paper scale), and the project's control that FedProx
    μ = 0.001 performs like FedAvg (marked ``control``), decided over the seeds at the margin
    policy's point. A run not stored makes one pending, a diverged or off-plateau run not testable;
    each decided row states its reading's rule. ``data``: what the rows were decided on where it
    differs from the paper (:func:`fedlib.companion.report.setup_label`)."""
    def per_seed(m: str) -> dict[int, float]:
        return {r.seed: r.final for r in per_run[per_run["method"] == m].itertuples()}

    def with_status(ms: Sequence[str], status: str) -> list[str]:
        return [m for m in ms if (per_run.loc[per_run["method"] == m, "status"] == status).any()]

    def off(ms: Sequence[str]) -> list[str]:
        return offs(per_run[per_run["method"].isin(ms)])

    exact = scale_of(scale).exact  # the paper's setup: Table I's numbers are decided
    out = [_reported(m, per_run, scale, dataset, per_seed, with_status, off([m])).noted(
        _rule(per_run, [m]) if exact else "") for m in REPORTED if m in set(per_run["method"])]
    for text, (source, (a, b), kind, paper_d) in CLAIMS.items():
        left_out = [
            why for why in BASELINE_LEFT_OUT[scale].values() if not {a, b} <= set(per_run["method"])
        ]
        v = (not_testable(text, source, left_out[0]) if left_out else pending_verdict(
            text, source, f"pending: {with_status((a, b), PENDING)}") if with_status(
                (a,
                 b), PENDING) else decide(text, source, per_seed(a), per_seed(b), kind=kind, names=(
                     a, b), chance=chance(dataset), paper=f"{paper_d:+.2f}", paper_d=paper_d,
                                          diverged=with_status((a, b), DIVERGED), off=off(
                                              (a, b))).noted(_rule(per_run, (a, b))))
        out.append(replace(v, control=True, paper_d=paper_d))
    return [replace(v, data=data) if data and v.verdict != "pending" else v for v in out]
