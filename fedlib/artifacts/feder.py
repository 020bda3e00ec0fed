"""Notebook 07: FedER thesis Table 4.2, Figs. 4.1–4.15 and Fig. A.1 as tables, figures and verdicts, with the
thesis's numbers beside ours and FedER's floored share.

    df = grid_frame(records)                     # records: {artifact: {run id: run}} or {run id: run}
    mean_table(df); versus_paper(df, scale)      # Table 4.2 (ours), Table 4.2 (CIFAR-100) beside ours
    verdicts(df, dataset, left_out); invariants(records)

The figures and the sentences that describe them are in :mod:`fedlib.artifacts.feder_figures`.

Runs come as ``{FedERRunId: Record | Pending | Diverged}`` (:func:`fedlib.grid.fetch_runs` over
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

from ..data import chance
from ..grid import DIVERGED, Diverged, Run, cell, offs, spoilt
from ..plans import FedERRunId, Plan
from ..report import compare
from ..results import Pending, Record
from ..style import dataset_name
from ..verdicts import Verdict, decide, not_testable, off_plateau, pending
from ..verdicts import plateau_rise as verdict_rise

__all__ = ["PAPER", "SETTINGS", "FLOORED_MAX", "FLOOR", "SOURCE", "grid_frame", "mean_table", "versus_paper",
           "scale_note", "grid_setup", "first_seed", "stored", "grid_table", "invariants", "plateau_rise", "verdicts"]

PAPER = {  # Table 4.2, CIFAR-100: non-federated / FedAvg / FedER
    "Adam": (71.71, 76.87, 77.05), "Adam + StepLR": (74.54, 75.71, 75.97), "AdamP": (70.06, 50.89, 49.43),
    "AdamP + StepLR": (76.39, 71.85, 72.68), "RMSGD": (60.22, 60.07, 60.52)}
SETTINGS = ("non-federated", "FedAvg", "FedER")
FLOOR = 1e-3  # Alg. 4: er <- max(0.001, er)
FLOORED_MAX = 0.25  # above this mean share of floored client-layers, FedER is (mostly) FedAvg: nothing to compare
SOURCE = "FedER thesis"

Runs = Mapping[FedERRunId, Run] | Mapping[str, Mapping[FedERRunId, Run]]


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


def flat_runs(runs: Runs) -> dict[FedERRunId, Run]:
    """``{run id: run}`` from itself or from ``{artifact: {run id: run}}``."""
    return {n: r for k, v in runs.items() for n, r in (v.items() if isinstance(v, Mapping) else [(k, v)])}


def grid_frame(runs: Runs) -> pd.DataFrame:
    """One row per run of the optimizer grid: ``name, row`` (the optimizer), ``setting`` (the id's method), ``seed,
    pending, diverged, acc`` (final test accuracy, %), ``floored`` (FedER's mean floored share) and ``rise``
    (:func:`plateau_rise`)."""
    rows = []
    for rid, r in flat_runs(runs).items():
        ok = isinstance(r, Record)
        rows.append({"name": str(rid), "row": rid.optimizer, "setting": rid.method, "seed": rid.seed,
                     "pending": isinstance(r, Pending),
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
        if not spoilt(pd.concat([A, B])):
            return pending(claim, source)
        A, B = A[~A["pending"]], B[~B["pending"]]  # a finished run spoils it: decided on what finished
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
    ``"table4.2"`` (every claim of the table), ``"feder"`` (its FedER-vs-FedAvg claims) or ``"figA1"``; those claims
    are then not testable, with that reason, whatever it ran."""
    left_out = left_out or {}
    c = chance(dataset)
    kw: dict[str, Any] = dict(chance_acc=c)
    miss = left_out.get("table4.2", "")
    miss_feder = miss or left_out.get("feder", "")
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
                            f"FedER − FedAvg = {er - avg:+.2f}", why_missing=miss_feder, feder=True, **kw))
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


def grid_setup(runs: Plan, scale: str, dataset: str, left_out: Mapping[str, str]) -> str:
    """The planned setup in one line (model, clients, rounds, optimizer settings, runs, what the scale leaves out)."""
    c = next(iter(runs["table4.2"].values()))
    seeds = sorted({x.seed for rs in runs.values() for x in rs.values()})
    by_rounds: dict[int, list[str]] = {}
    for rid, cfg in runs["table4.2"].items():
        if rid.optimizer not in by_rounds.setdefault(cfg.rounds, []):
            by_rounds[cfg.rounds].append(rid.optimizer)
    rounds = (f"{c.rounds} rounds" if len(by_rounds) == 1 else
              ", ".join(f"{n} rounds ({', '.join(rows)})" for n, rows in sorted(by_rounds.items(), reverse=True)))
    return (f"{dataset_name(dataset)}, scale={scale}, seeds {seeds}: {c.model} {c.model_kw}, {c.num_clients} "
            f"clients, {rounds} x {c.local_epochs} local epoch(s), batch {c.batch_size}, lr {c.lr}, wd "
            f"{c.weight_decay}, augment {c.augment}, n_train {c.n_train}; runs: "
            f"{({a: len(r) for a, r in runs.items()})}; left out: {list(left_out) or 'nothing'}")


def first_seed(records: Runs, seed: int) -> dict[tuple[str, str], Run]:
    """``{(optimizer row, setting): run}`` of one seed (the runs the figures draw)."""
    return {(rid.optimizer, rid.method): r for rid, r in flat_runs(records).items() if rid.seed == seed}


def stored(runs: Mapping[Any, Run | None]) -> bool:
    """Whether any of ``runs`` is a stored record (a figure of pending runs only is shown, not saved)."""
    return any(isinstance(r, Record) for r in runs.values())


def grid_table(df: pd.DataFrame, records: Runs) -> pd.DataFrame:
    """One row per run by name (``df``: :func:`grid_frame`): final accuracy, FedER's floored share, the plateau rise,
    status and record key."""
    keys = {str(rid): r.key for rid, r in flat_runs(records).items()}
    out = df.assign(acc=df["acc"].round(2), floored=df["floored"].round(2), rise=df["rise"].round(2),
                    record=df["name"].map(keys)).set_index("name")
    return out[["acc", "floored", "rise", "pending", "diverged", "record"]].rename(columns={
        "acc": "final test acc (%)", "floored": "FedER floored share", "rise": "rise, last 20 % (points)"})


def _feder_entropy_runs(records: Runs) -> list[Record]:
    return [r for rid, r in flat_runs(records).items() if isinstance(r, Record) and rid.method == "FedER"
            and r.config.get("strategy_kw", {}).get("metric", "entropy") == "entropy"]


def invariants(records: Runs) -> dict[str, bool]:
    """Invariants of our FedER (the stored effective-rank runs): Eq. 3.1's weights sum to 1 per conv layer, and the
    floored share is recorded every round, in [0, 1]."""
    fr = _feder_entropy_runs(records)
    return {"FedER records a weight per client for every conv layer each round, summing to 1":
            all(abs(sum(a) - 1) < 1e-9 for r in fr for e in r.history for a in e["feder_alpha"].values()),
            "FedER records its floored share every round, in [0, 1]":
            all(0 <= e.get("feder_floored", -1) <= 1 for r in fr for e in r.history)}
