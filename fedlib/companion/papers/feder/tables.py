"""Notebook 07: FedER thesis Table 4.2, Figs. 4.1–4.15 and Fig. A.1 as tables, figures and verdicts,
with the thesis's numbers beside ours and FedER's floored share.

    df = grid_frame(records)  # records: {artifact: {run id: run}} or {run id: run}
    grid_means(df); grid_versus_paper(df, scale)  # Table 4.2 (ours); the thesis's beside ours
    verdicts(df, dataset, left_out); grid_invariants(records)

The figures and the sentences that describe them are in
:mod:`fedlib.companion.papers.feder.figures`.

Runs come as ``{FedERRunId: Record | Pending | Diverged}`` (:func:`fedlib.companion.grid.fetch_runs`
over :func:`fedlib.companion.papers.feder.plans.feder_plan`). The thesis reports each run's final
top-1 test accuracy. FedER's claims against FedAvg are only testable where FedER does something else
than FedAvg: when EVBMF keeps no component of a layer (a weight near its random initialization)
every client sits at Alg. 4's 0.001 floor and the layer is averaged uniformly. :data:`FLOORED_MAX`
bounds the share of such client-layers (mean over rounds; the most floored FedER run stored,
:func:`floor_share`) above which those claims are not testable, the row giving the share it
measured.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping

import numpy as np
import pandas as pd

from fedlib.data import chance
from fedlib.companion.papers.feder.preset import FEDER_SETTINGS
from fedlib.companion.grid import DIVERGED, Diverged, Records, Run, Runs, cell, offs, spoilt
from fedlib.companion.common import FedERRunId, Plan
from fedlib.companion.report import compare
from fedlib.companion.results import Pending, Record
from fedlib.companion.style import dataset_name
from fedlib.companion.scales import scale_of
from fedlib.companion.verdicts import Verdict, decide, not_testable, off_plateau, pending
from fedlib.companion.verdicts import plateau_rise as verdict_rise

__all__ = ["FEDER_T42", "FLOORED_MAX", "FLOOR", "SOURCE", "grid_frame", "grid_means",
           "grid_versus_paper", "scale_note", "grid_setup", "first_seed", "any_stored",
           "grid_table", "grid_invariants", "record_rise", "comedown", "floor_share", "verdicts"]

FEDER_T42 = {  # Table 4.2, CIFAR-100: non-federated / FedAvg / FedER
    "Adam": (71.71, 76.87, 77.05), "Adam + StepLR": (74.54, 75.71, 75.97),
    "AdamP": (70.06, 50.89, 49.43), "AdamP + StepLR": (76.39, 71.85, 72.68),
    "RMSGD": (60.22, 60.07, 60.52)}
FLOOR = 1e-3  # Alg. 4: er <- max(0.001, er)
# above this mean share of floored client-layers, FedER is (mostly) FedAvg: nothing to compare
FLOORED_MAX = 0.25
SOURCE = "FedER thesis"


def floored(record: Record) -> float:
    """FedER's mean floored share over its rounds (NaN for a run that is not FedER)."""
    xs = [h["feder_floored"] for h in record.history if "feder_floored" in h]
    return float(np.mean(xs)) if xs else math.nan


def record_rise(record: Record) -> float:
    """The rise (points) of the test accuracy over the last 20 % of the rounds
    (:func:`fedlib.companion.verdicts.plateau_rise`: at most 1 on a plateau); NaN when the rounds it
    reads were not evaluated."""
    acc = {int(h["round"]): 100 * float(h["test_acc"])
           for h in record.history if h.get("test_acc") is not None}
    rise = verdict_rise(acc, int(record.cfg.rounds))
    return math.nan if rise is None else float(rise)


def flat_runs(runs: Runs | Records) -> dict[FedERRunId, Run]:
    """``{run id: run}`` from itself or from ``{artifact: {run id: run}}``."""
    return {n: r for k, v in runs.items()
            for n, r in (v.items() if isinstance(v, Mapping) else [(k, v)])}


def comedown(record: Record, last: int = 3) -> float:
    """How far (points) the test accuracy came down from its peak: the highest round's minus the
    median of the ``last`` rounds (Fig. 4.8's "rapid growth ... then a come-down")."""
    s = record.metric("test_acc")
    return 100 * (float(s.max()) - float(s.iloc[-last:].median())) if len(s) else math.nan


def grid_frame(runs: Runs | Records) -> pd.DataFrame:
    """One row per run of the optimizer grid: ``name, row`` (the optimizer), ``setting`` (the id's
    method), ``seed, pending, diverged, acc`` (final test accuracy, %), ``train_acc`` (final train
    accuracy, %; NaN where the history records none), ``gap`` (the generalization gap, train −
    test), ``comedown`` (:func:`comedown`), ``floored`` (FedER's mean floored share), ``rise``
    (:func:`record_rise`) and ``off``."""
    rows = []
    for rid, r in flat_runs(runs).items():
        ok = isinstance(r, Record)
        acc, train = ((100 * r.final("test_acc"), 100 * r.final("train_acc")) if ok
                      else (np.nan, np.nan))
        rows.append({"name": str(rid), "row": rid.optimizer, "setting": rid.method,
                     "seed": rid.seed, "pending": isinstance(r, Pending),
                     "diverged": isinstance(r, Diverged), "acc": acc, "train_acc": train,
                     "gap": train - acc, "comedown": comedown(r) if ok else np.nan,
                     "floored": floored(r) if ok else np.nan,
                     "rise": record_rise(r) if ok else np.nan,
                     "off": off_plateau(r) if ok else None})
    return pd.DataFrame(rows, columns=["name", "row", "setting", "seed", "pending", "diverged",
                                       "acc", "train_acc", "gap", "comedown", "floored", "rise",
                                       "off"])


def grid_means(df: pd.DataFrame, value: str = "acc") -> pd.DataFrame:
    """Optimizer row × setting: "mean ± std" of ``value`` over seeds ("pending", "diverged")."""
    cells = {(r, s): cell(g[value].mean(), g[value].std(ddof=1), g[value].count(),
                          bool(g["pending"].any()), bool(g["diverged"].any()))
             for (r, s), g in df.groupby(["row", "setting"], sort=False)}
    return pd.Series(cells, dtype=object).unstack().reindex(
        index=list(dict.fromkeys(df["row"])), columns=list(dict.fromkeys(df["setting"])))


def floor_share(df: pd.DataFrame, row: str) -> tuple[float, str]:
    """The floored share of the most floored FedER (effective rank) run of ``row``, else of any
    stored FedER run (the precondition of every FedER-vs-FedAvg claim, read from the records), and
    the run it was measured on."""
    fe = df[(df["setting"] == "FedER") & df["floored"].notna()]
    use = fe[fe["row"] == row] if (fe["row"] == row).any() else fe
    if use.empty:
        return math.nan, ""
    i = use["floored"].idxmax()
    return float(use.loc[i, "floored"]), str(use.loc[i, "name"])


def _cell_rows(df: pd.DataFrame, cell: tuple[str, str]) -> pd.DataFrame:
    return df[(df["row"] == cell[0]) & (df["setting"] == cell[1])]


def _compare(claim: str, source: str, df: pd.DataFrame, a: tuple[str, str], b: tuple[str, str],
             kind: str, paper: str, chance_acc: float, why_missing: str, feder: str = "",
             cols: tuple[str, str] = ("acc", "acc"), paper_d: float = math.nan, rule: str = "",
             left_out: str = "") -> Verdict:
    """``a``'s ``cols[0]`` against ``b``'s ``cols[1]`` over seeds. Not testable, saying why:
    ``why_missing`` (this scale cannot test it), where ``feder`` names an optimizer row whose claim
    needs FedER to differ from FedAvg and the measured floored share (:func:`floor_share`) is above
    :data:`FLOORED_MAX`, ``left_out`` (the scale leaves the FedER runs out), or where a cell or a
    recorded value it needs is missing. ``rule``: how the values are read (said in the row's
    why)."""
    A, B = _cell_rows(df, a), _cell_rows(df, b)

    def nt(why: str) -> Verdict:
        return replace(not_testable(claim, source, why, paper), paper_d=paper_d)

    if why_missing:
        return nt(why_missing)
    share, where = floor_share(df, feder) if feder else (math.nan, "")
    if share > FLOORED_MAX:
        other = ("" if where.startswith(f"{feder} · ")
                 else f", for want of {feder} · FedER (not run at this scale)")
        return nt(f"FedER is FedAvg on {100 * share:.0f} % of its client-layers in {where}{other}: "
                  "EVBMF keeps no component there (Alg. 4's floor), and above "
                  f"{100 * FLOORED_MAX:.0f} % there is nothing to compare")
    seen = (f"; the FedER runs' floored share: {share:.2f} ({where})"
            if feder and math.isfinite(share) else "")
    if left_out:
        return nt(left_out + seen)
    missing = [f"{' · '.join(c)} is not run at this scale" for c, d in ((a, A), (b, B)) if d.empty]
    gone = [f"{' · '.join(c)}'s runs record no train accuracy"
            for c, d, col in ((a, A, cols[0]), (b, B, cols[1]))
            if col in ("train_acc", "gap") and not d[~d["pending"]].empty and d[col].isna().all()]
    if missing or gone:
        return nt("; ".join(dict.fromkeys(missing + gone)) + seen)
    if A["pending"].any() or B["pending"].any():
        if not spoilt(pd.concat([A, B])):
            return pending(claim, source)
        # a finished run spoils it: decided on what finished
        A, B = A[~A["pending"]], B[~B["pending"]]
    names = (" · ".join(a), " · ".join(b)) if a != b else (f"{' · '.join(a)} {cols[0]}", cols[1])
    both = pd.concat([A, B]).drop_duplicates("name")
    return decide(claim, source, dict(zip(A["seed"], A[cols[0]])), dict(zip(B["seed"], B[cols[1]])),
                  kind=kind, names=names, chance=chance_acc, runs=list(both["acc"]), paper=paper,
                  paper_d=paper_d, diverged=list(both.loc[both["diverged"], "name"]),
                  off=offs(both)).noted(rule)


def verdicts(df: pd.DataFrame, dataset: str,
             left_out: Mapping[str, str] | None = None) -> list[Verdict]:
    """The thesis's claims on Table 4.2, its figures' sentences and Fig. A.1, decided over seeds at
    the margin policy, each with the thesis's effect where it gives one. ``left_out``: why a scale
    cannot test ``"table4.2"`` (every claim of the table), ``"feder"`` (the FedER column) or
    ``"figA1"``. A FedER-vs-FedAvg claim is not testable where the records' floored share says FedER
    is FedAvg (:func:`floor_share`), else where the FedER column is left out or not run."""
    left_out = left_out or {}
    kw: dict[str, Any] = dict(chance_acc=chance(dataset))
    miss = left_out.get("table4.2", "")
    no_feder = left_out.get("feder", "")
    out = []
    t42 = f"{SOURCE} Table 4.2, §4.4"

    def feder_row(claim: str, src: str, row: str, kind: str, paper: str, paper_d: float = math.nan,
                  cols: tuple[str, str] = ("acc", "acc"), b: str = "FedAvg",
                  rule: str = "") -> Verdict:
        return _compare(claim, src, df, (row, "FedER"), (row, b), kind, paper, why_missing=miss,
                        feder=row, cols=cols, paper_d=paper_d, rule=rule, left_out=no_feder, **kw)

    for row, (_, avg, er) in FEDER_T42.items():
        if row == "AdamP":
            claim, kind = "FedER under-performs FedAvg with AdamP without StepLR", "less"
            src = (f"{t42}: 'the Federated Effective Rank method under-performs quite a lot using "
                   "AdamP and no StepLR'")
        else:
            claim, kind = f"FedER out-performs FedAvg with {row}", "greater"
            src = f"{t42}: 'it out-performs in every other configuration'"
        out.append(feder_row(claim, src, row, kind, f"FedER − FedAvg = {er - avg:+.2f}", er - avg))
    p = {r: v for r, v in FEDER_T42.items()}
    out.append(_compare(
        "FedAvg with Adam out-performs the non-federated ResNet-18",
        f"{SOURCE} §4.3.2, Fig. 4.6: 'Adam without StepLR is out-performing plain ResNet18'",
        df, ("Adam", "FedAvg"), ("Adam", "non-federated"), "greater",
        f"{p['Adam'][1] - p['Adam'][0]:+.2f}", why_missing=miss,
        paper_d=p["Adam"][1] - p["Adam"][0], **kw))
    out.append(_compare(
        "StepLR lowers FedAvg's test accuracy with Adam",
        f"{SOURCE} §4.3.2, Fig. 4.7: 'an under-performing test-accuracy' (vs Fig. 4.6)",
        df, ("Adam + StepLR", "FedAvg"), ("Adam", "FedAvg"), "less",
        f"{p['Adam + StepLR'][1] - p['Adam'][1]:+.2f}", why_missing=miss,
        paper_d=p["Adam + StepLR"][1] - p["Adam"][1], **kw))
    out.append(_compare(
        "FedAvg with AdamP without StepLR ends below its non-federated baseline",
        f"{SOURCE} Table 4.2 (AdamP: non-federated 70.06, FedAvg 50.89)",
        df, ("AdamP", "FedAvg"), ("AdamP", "non-federated"), "less",
        f"{p['AdamP'][1] - p['AdamP'][0]:+.2f}", why_missing=miss,
        paper_d=p["AdamP"][1] - p["AdamP"][0], **kw))
    out.append(_compare(
        "FedAvg with AdamP comes down from an early peak: its drop from its best round to its end "
        "exceeds FedAvg with Adam's",
        f"{SOURCE} §4.3.2, Fig. 4.8: 'an incredibly rapid growth within the first regime "
        "(first 15 epochs) then a come-down in accuracy'",
        df, ("AdamP", "FedAvg"), ("Adam", "FedAvg"), "greater", "", why_missing=miss,
        cols=("comedown", "comedown"),
        rule="come-down: the highest round's test accuracy minus the median of the last 3 "
             "rounds, against FedAvg with Adam's (Fig. 4.6's 'traditional' curves), so that "
             "round-to-round noise cancels", **kw))
    out.append(_compare(
        "FedAvg's train accuracy stays below its test accuracy with AdamP without StepLR",
        f"{SOURCE} §4.3.2, Fig. 4.8: 'further supported by the train accuracy being lower than "
        "the test-accuracy'; §4.4: 'the train-accuracy is never able to overtake the "
        "test-accuracy'",
        df, ("AdamP", "FedAvg"), ("AdamP", "FedAvg"), "less", "", why_missing=miss,
        cols=("train_acc", "acc"),
        rule="final train accuracy against final test accuracy, per seed", **kw))
    out.append(_compare(
        "StepLR lifts FedAvg's test accuracy with AdamP",
        f"{SOURCE} §4.3.2, Fig. 4.9: 'Using StepLR has a significant change to AdamP's usage in "
        "a federated setting ... to get to a competitive test-accuracy'",
        df, ("AdamP + StepLR", "FedAvg"), ("AdamP", "FedAvg"), "greater",
        f"{p['AdamP + StepLR'][1] - p['AdamP'][1]:+.2f}", why_missing=miss,
        paper_d=p["AdamP + StepLR"][1] - p["AdamP"][1], **kw))
    gaps = df[df["row"] != "RMSGD"].groupby(["row", "setting"], sort=False)["gap"].mean().dropna()
    other = tuple(gaps.idxmin()) if not gaps.empty else ("Adam", "FedAvg")
    out.append(_compare(
        "FedAvg with RMSGD has the lowest generalization gap of every configuration",
        f"{SOURCE} §4.3.2, Fig. 4.10: 'it simultaneously has the lowest generalization-gap "
        "across all possible variations'",
        df, ("RMSGD", "FedAvg"), other, "less", "", why_missing=miss, cols=("gap", "gap"),
        rule="the gap: final train − test accuracy; against the smallest other mean gap "
             f"({' · '.join(other)})", **kw))
    out.append(feder_row(
        "FedER overfits like FedAvg with Adam + StepLR: its generalization gap is comparable to "
        "FedAvg's",
        f"{SOURCE} §4.3.3, Fig. 4.12: 'the same issue of over-fitting plagues the FedER as did "
        "in FedAvg in Figure 4.7 such as the large generalization gap'",
        "Adam + StepLR", "within", "", cols=("gap", "gap"),
        rule="the gap: final train − test accuracy"))
    stable = _compare(
        "FedER with the stable rank is competitive with FedER with the effective rank "
        "(Adam; 'competitive' read as comparable, the margin policy)",
        f"{SOURCE} Appendix A, Fig. A.1: 'the test-accuracy is competitive using stable-rank'",
        df, ("Adam", "FedER (stable rank)"), ("Adam", "FedER"), "within", "", why_missing=miss,
        feder="Adam", left_out=left_out.get("figA1", ""), **kw)
    return out + [stable]


# ---------------------------------------------------------------------------------------- tables
def grid_versus_paper(df: pd.DataFrame, scale: str) -> pd.DataFrame:
    """Table 4.2 (CIFAR-100, one run each) beside ours (mean over seeds), one row per "optimizer ·
    setting"; a cell this scale did not run says so."""
    paper = {f"{row} · {s}": FEDER_T42[row][i] for row in FEDER_T42
             for i, s in enumerate(FEDER_SETTINGS)}
    ours: dict[str, Any] = {}
    for (row, s), g in df.groupby(["row", "setting"], sort=False):
        done = g.loc[~g["diverged"], "acc"]
        ours[f"{row} · {s}"] = ("pending" if g["pending"].any()
                                else DIVERGED if done.isna().all() and g["diverged"].any()
                                else float(done.mean()))
    return compare(paper, ours, not_run=f"not run at scale={scale}")


def scale_note(scale: str, dataset: str) -> str:
    """How far this scale's numbers may be read against the thesis's."""
    return f"scale={scale}, dataset={dataset_name(dataset)}: " + (
        "the thesis's setup except the dataset" if scale_of(scale).exact
        else "NOT the thesis's setup; compare the pattern, not the numbers")


def grid_setup(runs: Plan, scale: str, dataset: str, left_out: Mapping[str, str]) -> str:
    """The planned setup in one line (model, clients, rounds, optimizer settings, runs, what the
    scale leaves out)."""
    c = next(iter(runs["table4.2"].values()))
    seeds = sorted({x.seed for rs in runs.values() for x in rs.values()})
    by_rounds: dict[int, list[str]] = {}
    for rid, cfg in runs["table4.2"].items():
        if rid.optimizer not in by_rounds.setdefault(cfg.rounds, []):
            by_rounds[cfg.rounds].append(rid.optimizer)
    rounds = (f"{c.rounds} rounds" if len(by_rounds) == 1 else ", ".join(
        f"{n} rounds ({', '.join(rows)})" for n, rows in sorted(by_rounds.items(), reverse=True)))
    return (f"{dataset_name(dataset)}, scale={scale}, seeds {seeds}: {c.model} {c.model_kw}, "
            f"{c.num_clients} clients, {rounds} x {c.local_epochs} local epoch(s), batch "
            f"{c.batch_size}, lr {c.lr}, wd {c.weight_decay}, augment {c.augment}, n_train "
            f"{c.n_train}; runs: {({a: len(r) for a, r in runs.items()})}; left out: "
            f"{list(left_out) or 'nothing'}")


def first_seed(records: Runs | Records, seed: int) -> dict[tuple[str, str], Run]:
    """``{(optimizer row, setting): run}`` of one seed (the runs the figures draw)."""
    return {(rid.optimizer, rid.method): r
            for rid, r in flat_runs(records).items() if rid.seed == seed}


def any_stored(runs: Mapping[Any, Run | None]) -> bool:
    """Whether any of ``runs`` is a stored record (a figure of pending runs only is shown, not
    saved)."""
    return any(isinstance(r, Record) for r in runs.values())


def grid_table(df: pd.DataFrame, records: Runs | Records) -> pd.DataFrame:
    """One row per run by name (``df``: :func:`grid_frame`): final accuracy, FedER's floored share,
    the plateau rise, status and record key."""
    keys = {str(rid): r.key for rid, r in flat_runs(records).items()}
    out = df.assign(acc=df["acc"].round(2), floored=df["floored"].round(2),
                    rise=df["rise"].round(2), record=df["name"].map(keys)).set_index("name")
    return out[["acc", "floored", "rise", "pending", "diverged", "record"]].rename(columns={
        "acc": "final test acc (%)", "floored": "FedER floored share",
        "rise": "rise, last 20 % (points)"})


def _feder_entropy_runs(records: Runs | Records) -> list[Record]:
    return [r for rid, r in flat_runs(records).items()
            if isinstance(r, Record) and rid.method == "FedER"
            and r.config.get("strategy_kw", {}).get("metric", "entropy") == "entropy"]


def grid_invariants(records: Runs | Records) -> dict[str, bool]:
    """Invariants of our FedER (the stored effective-rank runs): Eq. 3.1's weights sum to 1 per conv
    layer, and the floored share is recorded every round, in [0, 1]."""
    fr = _feder_entropy_runs(records)
    return {
        "FedER records a weight per client for every conv layer each round, summing to 1": all(
            abs(sum(a) - 1) < 1e-9 for r in fr for e in r.history
            for a in e["feder_alpha"].values()),
        "FedER records its floored share every round, in [0, 1]": all(
            0 <= e.get("feder_floored", -1) <= 1 for r in fr for e in r.history)
    }
