"""Notebook 08: FedSHIBU Table 1 / Fig. 4, Fig. 1, Fig. 3 and Fig. 5 as tables (their figures:
:mod:`fedlib.companion.papers.fedshibu.figures`; their verdicts:
:mod:`fedlib.companion.papers.fedshibu.claims`).

Runs come as ``{FedSHIBURunId: Record | Pending | Diverged}``
(:func:`fedlib.companion.grid.fetch_runs` over
:func:`fedlib.companion.papers.fedshibu.plans.fedshibu_plan`); :func:`personal_frame` reads method,
s and seed from the run ids (:class:`fedlib.companion.common.FedSHIBURunId`). Accuracies are
personalized: the mean over clients of each client's accuracy on its own test split (FedBABU and
FedSHIBU after fine-tuning the head). Chance is what a constant prediction reaches
(:func:`personal_chance`): for a model per client the share of its client's most frequent test class
(50 % for a client holding two classes), for FedAvg's one global model the best single class,
averaged over clients. A run with a CRSM carries how far its weights stray from uniform over its
second half (:func:`fedlib.crsm.crsm_reading`).
"""

from __future__ import annotations

import json
from typing import Any, Mapping

import numpy as np
import pandas as pd
import torch

from fedlib.config import Config
from fedlib.crsm import crsm_reading, label_overlap, offdiag_corr
from fedlib.engine import build_partition, load_data
from fedlib.companion.grid import Diverged, Run, Runs
from fedlib.companion.common import FedSHIBURunId, Plan
from fedlib.companion.papers.fedshibu.plans import AVG, BABU, IDENTITY, LINEAR
from fedlib.companion.report import compare
from fedlib.companion.results import Pending, Record
from fedlib.strategies import Strategy, build_strategy
from fedlib.companion.verdicts import off_plateau

__all__ = ["FEDSHIBU_T1", "PAPER_ORDER", "T1", "paper_column", "shards_setup", "personal_chance",
           "overlap", "personal_frame", "seed_cells", "wide", "table1", "table1_versus",
           "crsm_rounds", "invariants", "personal_table"]

PAPER_ORDER = (LINEAR, "FedSHIBU (CKA RBF)", BABU, AVG)
FEDSHIBU_T1 = {  # FedSHIBU Table 1: s -> (linear, RBF, FedBABU, FedAvg)
    "cifar10": {2: (94.04, 90.69, 68.43, 58.13), 3: (81.12, 78.62, 77.74, 69.58),
                4: (85.07, 85.9, 84.06, 83.88), 5: (89.26, 88.18, 86.93, 85.96),
                8: (89.32, 89.92, 89.38, 89.01), 10: (90.34, 90.28, 90.24, 89.67),
                20: (90.64, 90.93, 90.85, 90.58), 50: (90.88, 90.94, 91.03, 91.28),
                100: (90.93, 91.23, 90.87, 90.94)},
    "cifar100": {2: (91.12, 41.65, 15.55, 24.92), 3: (54.12, 41.95, 33.03, 37.98),
                 4: (57.96, 49.47, 47.22, 47.27), 5: (59.48, 53.62, 53.88, 52.36),
                 8: (63.63, 62.71, 60.77, 60.36), 10: (69.72, 66.07, 66.46, 62.45),
                 20: (72.33, 69.97, 71.86, 67.31), 50: (73.88, 70.93, 73.44, 69.01),
                 100: (72.97, 71.31, 73.37, 70.17)},
}
T1 = "FedSHIBU Table 1 / Fig. 4"
_LABELS: dict[str, tuple[np.ndarray, np.ndarray]] = {}
_DATA: dict[tuple, Any] = {}


def _counts(cfg: Config) -> tuple[np.ndarray, np.ndarray]:
    """(train, test) label histograms of ``cfg``'s clients (clients × classes), cached per
    partition."""
    key = json.dumps([
        cfg.dataset, cfg.n_train, cfg.n_test, cfg.partition, cfg.partition_kw, cfg.num_clients,
        cfg.seed
    ], sort_keys=True)
    if key not in _LABELS:
        dkey = (cfg.dataset, cfg.n_train, cfg.n_test)
        if dkey not in _DATA:
            _DATA[dkey] = load_data(cfg.replace(device="cpu"))
        data = _DATA[dkey]
        part = build_partition(cfg, data, build_strategy(cfg.strategy, **cfg.strategy_kw))
        split = ((data.y_train, part.client_indices), (data.y_test, part.test_indices or
                                                       part.client_indices))
        _LABELS[key] = tuple(
            np.stack([np.bincount(y.numpy()[ix], minlength=data.num_classes) for ix in ixs])
            for y, ixs in split)
    return _LABELS[key]


def personal_chance(cfg: Config) -> float:
    """Personalized chance (%): the best a constant prediction does on the clients' test splits,
    mean over clients. A model per client (fine-tuned, mixed or local) can learn its client's
    majority class: per client the share of its most frequent class. The one global model that
    FedAvg tests on every split predicts alike for all clients: the single class whose mean share is
    largest (at s = 2 about 10 %, not the 50 % of a two-class client)."""
    test = _counts(cfg)[1]
    share = test / test.sum(1, keepdims=True).clip(1)
    return float(100 * (share.mean(0).max() if one_model(cfg) else share.max(1).mean()))


def one_model(cfg: Config) -> bool:
    """Whether ``cfg``'s personalized evaluation tests the one global model on every client (no
    per-client model, no fine-tuning: FedAvg)."""
    s = build_strategy(cfg.strategy, **cfg.strategy_kw)
    return type(s).eval_params is Strategy.eval_params and s.finetune() is None


def overlap(cfg: Config) -> torch.Tensor:
    """The clients' label overlap (cosine of their training label histograms): what a CRSM tracking
    data similarity should find (Fig. 3)."""
    return label_overlap(torch.as_tensor(_counts(cfg)[0]))


def paper_column(dataset: str) -> str:
    """The Table 1 column set beside ``dataset``: its own, else CIFAR-10 (the closer one to 10-class
    data)."""
    return dataset if dataset in FEDSHIBU_T1 else "cifar10"


def shards_setup(runs: Plan) -> str:
    """Runs per artifact and Table 1's setup (clients, rounds by shard level × local epochs, batch,
    images)."""
    c = next(iter(runs["table1"].values()))
    by_s: dict[int, set[int]] = {}
    for rid, cfg in runs["table1"].items():
        by_s.setdefault(rid.s, set()).add(cfg.rounds)
    levels: dict[int, list[int]] = {}
    for s, r in sorted(by_s.items()):
        levels.setdefault(max(r), []).append(s)
    rounds = ", ".join(f"{r} rounds at s = {', '.join(map(str, ss))}" for r, ss in levels.items())
    return (f"{dict((a, len(r)) for a, r in runs.items())} runs; {c.num_clients} clients, "
            f"{rounds}; {c.local_epochs} local epochs, batch {c.batch_size}, "
            f"{c.n_train or 'all'} training images")


def _last(r: Record, key: str) -> float:
    h = [e[key] for e in r.history if key in e]
    return float(h[-1]) if h else np.nan


def kept_lrs(r: Run) -> dict[str, float]:
    """The last round's fine-tuning, as the share of clients (%) that kept the fine-tuning lr
    (``ft_lr``, the papers'), a lower lr of the ladder, or their un-fine-tuned model (NaN for a run
    that does not fine-tune or has no record)."""
    history = r.history if isinstance(r, Record) else []
    lrs = next((e["personal_ft_lr"] for e in reversed(history) if "personal_ft_lr" in e), None)
    names = ("kept ft_lr (%)", "kept a lower lr (%)", "kept no fine-tuning (%)")
    if not lrs:
        return dict.fromkeys(names, np.nan)
    top = getattr(r.cfg.strategy_options(), "ft_lr", max(lrs))
    share = lambda keep: 100.0 * sum(map(keep, lrs)) / len(lrs)  # noqa: E731
    return dict(
        zip(names, (share(lambda lr: lr == top), share(lambda lr: 0 < lr < top),
                    share(lambda lr: lr == 0))))


def personal_frame(runs: Runs) -> pd.DataFrame:
    """One row per run: ``name, method, s, seed, rounds, pending, diverged``, final personalized
    ``acc`` and ``acc (no ft)`` (%), ``chance`` (%), the last round's ``self-weight`` and
    ``off-diagonal`` of its CRSM, over its second half the largest ``crsm deviation`` of a weight
    from 1/N (a share of it) and the ``self-weight min`` / ``max`` of any client
    (:func:`fedlib.crsm.crsm_reading`; NaN without a CRSM), its ``clients``, the lr its clients kept
    when fine-tuning (:func:`kept_lrs`), and ``s / round``."""
    rows = []
    for rid, r in runs.items():
        done = isinstance(r, Record)
        crsm = (crsm_reading(r.history, int(r.cfg.rounds)) if done else None) or {}
        rows.append({
            "name": str(rid), "method": rid.method, "s": rid.s, "seed": rid.seed,
            "rounds": int(getattr(r.cfg, "rounds", 0) or 0), "pending": isinstance(r, Pending),
            "diverged": isinstance(r, Diverged), "chance": personal_chance(r.cfg),
            "off": off_plateau(r, "personal_acc_mean") if done else None,
            "acc": 100 * _last(r, "personal_acc_mean") if done else np.nan,
            "acc (no ft)": 100 * _last(r, "personal_noft_acc_mean") if done else np.nan,
            "self-weight": _last(r, "crsm_self") if done else np.nan,
            "off-diagonal": _last(r, "crsm_offdiag") if done else np.nan,
            "crsm deviation": crsm.get("deviation",
                                       np.nan), "self-weight min": crsm.get("self_min", np.nan),
            "self-weight max": crsm.get("self_max", np.nan), "clients": r.cfg.num_clients,
            **kept_lrs(r), "s / round": float(np.median([h["train_time_s"]
                                                         for h in r.history])) if done else np.nan
        })
    return pd.DataFrame(rows)


def _seed_cell(g: pd.DataFrame, col: str) -> str:
    v = g[col].dropna()
    if g["pending"].any() or (v.empty and not g["diverged"].any()):
        return "pending"
    if g["diverged"].any():
        return "diverged"
    d = 3 if col in ("self-weight", "off-diagonal") else 2
    return f"{v.mean():.{d}f}" + (f" ± {v.std(ddof=1):.{d}f}" if len(v) > 1 else "")


def seed_cells(
    frame: pd.DataFrame, cols: tuple[str,
                                     ...] = ("acc", "acc (no ft)", "self-weight", "off-diagonal")
) -> pd.DataFrame:
    """One row per (method, s): ``n`` finished seeds and, per column of ``cols``, mean ± std over
    seeds ("pending", "diverged"; "–" where a run has no such number, e.g. no CRSM)."""
    rows = []
    for (m, s), g in frame.groupby(["method", frame["s"].fillna(-1)], sort=False):
        rows.append({
            "method": m, "s": None if s == -1 else int(s), "n": int(g["acc"].notna().sum()), **{
                c: _seed_cell(g, c) if g[c].notna().any() or g["pending"].any() else "–"
                for c in cols
            }
        })
    return pd.DataFrame(rows)


def wide(summary: pd.DataFrame, col: str = "acc") -> pd.DataFrame:
    """s × method: the column ``col`` of :func:`seed_cells` ("not run" where a scale leaves a pair
    out)."""
    methods = list(dict.fromkeys(summary["method"]))
    return summary.pivot(index="s", columns="method", values=col)[methods].fillna("not run")


def table1(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table 1 from Table 1's runs: s × method personalized accuracy (mean ± std over seeds), and
    per (s, method) the accuracy before fine-tuning and the last round's CRSM self-weight and
    off-diagonal."""
    summary = seed_cells(frame)
    return wide(summary), summary.set_index(["s", "method"])


def table1_versus(frame: pd.DataFrame, column: str = "cifar10") -> pd.DataFrame:
    """FedSHIBU Table 1 (the paper's ``column``) beside our seed means, per "method | s=s" ("not run
    at this scale" for the RBF column and the levels of s a scale leaves out)."""
    means = frame.groupby(["method", "s"])["acc"].mean()
    paper = {f"{m} | s={s}": v[i] for s, v in FEDSHIBU_T1[column].items()
             for i, m in enumerate(PAPER_ORDER)}
    return compare(paper, {f"{m} | s={s}": v for (m, s), v in means.items()},
                   not_run="not run at this scale")


def crsm_rounds(runs: Runs) -> pd.DataFrame:
    """Per method (run kind) and round: the CRSM's mean self-weight, mean off-diagonal and the
    correlation of its off-diagonal with the clients' label overlap, each averaged over the stored
    seeds."""
    rows = []
    for rid, r in runs.items():
        if isinstance(r, Record):
            ov = overlap(r.cfg)
            rows += [{"method": rid.method, "round": e["round"], "self-weight": e["crsm_self"],
                      "off-diagonal": e["crsm_offdiag"],
                      "corr. with label overlap": offdiag_corr(torch.tensor(e["crsm"]), ov)}
                     for e in r.history if "crsm" in e]
    if not rows:
        return pd.DataFrame()
    return pd.DataFrame(rows).groupby(["method", "round"], sort=False).mean().round(3)


def invariants(frames: Mapping[str, pd.DataFrame]) -> dict[str, bool]:
    """Checks of our own code over the stored runs: finite accuracies; the identity CRSM keeps each
    body whole."""
    done = pd.concat(frames.values()).query("not pending and not diverged")
    ident = done[done["method"] == IDENTITY]
    return {
        "every stored run reports a finite personalized accuracy": bool(done["acc"].notna().all()),
        "the identity CRSM leaves every client all of its own body (self-weight 1, "
        "off-diagonal 0)": bool(((ident["self-weight"] == 1) & (ident["off-diagonal"] == 0)).all())
    }


def personal_table(frames: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Every run of every artifact, one row each (:func:`personal_frame`), indexed by artifact and
    name."""
    return pd.concat(frames, names=["artifact"]).droplevel(1).set_index("name",
                                                                        append=True).round(3)
