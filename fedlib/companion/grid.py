"""Grids of runs as tables: one row per run, seeds summarized as mean ± std, the best μ per method,
"pending" cells.

:func:`fetch_runs` gets ``{run id: Record | Pending | Diverged}`` through
:func:`fedlib.companion.results.fetch` (a plan's run ids, :class:`fedlib.companion.common.RunId`, or
any other keys); :func:`runs_frame` reads each run's setting from its config (strategy and its
options, Dirichlet α, local epochs, seed), so tables group by what was run, not by names. A
:class:`~fedlib.companion.results.Pending` run has no numbers: its cells read "pending". A run that
stopped with a non-finite loss is a result, :class:`Diverged`: its cells read "diverged", and it is
never the best μ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Mapping, Sequence, TypeVar

import numpy as np
import pandas as pd

from fedlib.config import Config
from fedlib.companion.costs import check_runs, no_check
from fedlib.data import chance
from fedlib.errors import OneLineError
from fedlib.companion.results import Pending, Record, Store, fetch
from fedlib.schedule import NonFiniteLossError
from fedlib.companion.plots import t_interval
from fedlib.companion.verdicts import PENDING, off_plateau

__all__ = ["method_name", "runs_frame", "offs", "seed_summary", "cell", "summary_cell",
           "fmt_interval", "seed_values", "DIVERGED", "Diverged", "Run", "Runs", "Records",
           "fetch_runs", "DuplicateSeedError", "check_distinct_seeds", "minus_fedavg"]

DIVERGED = "diverged"


@dataclass(frozen=True)
class Diverged:
    """A planned run that stopped with a non-finite loss (the store's ``failed/<key>.json``): a
    result, not a gap."""

    key: str
    config: dict[str, Any]
    failed_round: int
    message: str

    @property
    def cfg(self) -> Config:
        return Config.from_dict(self.config, migrate=True)


# what fetching a planned run gives: its record, or a placeholder saying why not
Run = Record | Pending | Diverged
Runs = Mapping[Hashable, Run]  # one artifact's runs, fetched (keys: a plan's RunId, or e.g. seeds)
Records = Mapping[str, Runs]  # a plan's runs, fetched: {artifact: {RunId: Run}}
# a run's key: a plan's RunId (its str() is the run's name), or e.g. a seed
K = TypeVar("K", bound=Hashable)


def _diverged(store: Store, cfg: Config) -> Diverged | None:
    f = store.last_failure(cfg)
    if f is None or f.get("error", {}).get("type") != NonFiniteLossError.__name__:
        return None
    return Diverged(cfg.key(), cfg.to_dict(), int(f.get("failed_round", 0)),
                    f["error"].get("message", ""))


def _stored(store: Store, cfg: Config) -> Record | None:
    try:
        return store.get(cfg)
    except Exception:  # noqa: BLE001
        return None  # unreadable or another config's: fetch says which and what it does


def fetch_runs(runs: Mapping[K, Config], *, store: Store, train: bool = True,
               artifacts: Callable[[Config],
                                   bool] = lambda c: False, **run_kw: Any) -> dict[K, Run]:
    """:func:`~fedlib.companion.results.fetch` every run (``artifacts(cfg)``: keep its models). A
    run whose last attempt stopped with a non-finite loss is :class:`Diverged` (training is
    deterministic: it is not retried), and so is a stored record with non-finite metrics; one that
    diverges now is recorded as such by :func:`~fedlib.companion.results.run` and returned as
    :class:`Diverged`. Before training anything, the runs to train are checked together
    (:func:`fedlib.companion.costs.check_runs`: at paper scale on a CPU, over an hour stops unless
    ``allow_long``)."""
    out: dict[K, Run] = {}
    if train:
        todo = [
            c for c in runs.values() if _stored(store, c) is None and _diverged(store, c) is None
        ]
        check_runs(todo, allow_long=run_kw.get("allow_long"))
        run_kw = {**run_kw, "guard": no_check}
    for name, cfg in runs.items():
        if store.get(cfg) is None and (d := _diverged(store, cfg)) is not None:
            out[name] = d
            continue
        try:
            out[name] = rec = fetch(cfg, store=store, train=train, artifacts=train and
                                    artifacts(cfg), **run_kw)
            # non-finite metrics: flagged by the store, not a result
            if isinstance(rec, Record) and rec.problems():
                out[name] = Diverged(rec.key, rec.config, len(rec.history),
                                     "; ".join(rec.problems()))
        except NonFiniteLossError:
            d = _diverged(store, cfg)
            if d is None:
                raise
            print(f"{name}: diverged in round {d.failed_round} ({d.message})")
            out[name] = d
    check_distinct_seeds([r for r in out.values() if isinstance(r, Record)], store)
    return out


class DuplicateSeedError(OneLineError, ValueError):
    """Two records of different seeds that ended with the same weights: one is a copy of the other's
    run."""


def check_distinct_seeds(records: Sequence[Record], store: Store) -> None:
    """Raise :class:`DuplicateSeedError` naming both files when two of ``records`` have different
    seeds but the same final weights hash (a record copied under another seed would count one run
    twice in an interval)."""
    seen: dict[str, Record] = {}
    for r in records:
        if not r.final_params_hash:
            continue
        first = seen.setdefault(r.final_params_hash, r)
        if first.cfg.seed != r.cfg.seed:
            raise DuplicateSeedError(
                f"{store.record_path(first.key)} (seed {first.cfg.seed}) and "
                f"{store.record_path(r.key)} (seed {r.cfg.seed}) end with the same weights "
                f"({r.final_params_hash}): one is a copy of the other's run. Delete the copied one "
                "(git checkout restores a committed record); it is then trained or pending.")


_LABEL = {
    "fedavg": "FedAvg", "fedprox": "FedProx", "scaffold": "SCAFFOLD", "moon": "MOON",
    "fedcka": "FedCKA", "centralized": "centralized", "fedintr": "FedIntR"
}


def method_name(strategy: str, kw: Mapping[str, Any] | None = None) -> str:
    """``"FedProx (μ=0.001)"``, ``"FedCKA (μ=3, M=1)"``, ``"SCAFFOLD"``: a run's method as the
    tables name it."""
    kw = kw or {}
    parts = [f"μ={kw['mu']:g}"] if "mu" in kw else []
    parts += [f"M={kw['M']}"] if "M" in kw else []
    parts += [f"sim={kw['sim']}"] if "sim" in kw else []
    return _LABEL.get(strategy, strategy) + (f" ({', '.join(parts)})" if parts else "")


def runs_frame(runs: Mapping[Any, Run], metric: str = "test_acc") -> pd.DataFrame:
    """One row per run: ``name`` (``str`` of its run id), ``method, strategy, mu, M, sim, alpha, E,
    seed, pending, diverged``, ``off`` (why it is off its plateau,
    :func:`fedlib.companion.verdicts.off_plateau`; None when on it), ``chance`` (its dataset's
    chance accuracy, %, :func:`fedlib.data.chance`), the final ``acc`` (%, NaN when pending or
    diverged) and ``s / round`` (median local-training seconds per round, as recorded)."""
    rows = []
    for rid, r in runs.items():
        cfg = r.cfg
        kw = dict(cfg.strategy_kw)
        pending, diverged = isinstance(r, Pending), isinstance(r, Diverged)
        times = [] if pending or diverged else [
            h["train_time_s"] for h in r.history if "train_time_s" in h
        ]
        rows.append({
            "name": str(rid), "method": _LABEL.get(cfg.strategy,
                                                   cfg.strategy), "strategy": cfg.strategy,
            "mu": kw.get("mu", np.nan), "M": kw.get("M", 2 if cfg.strategy == "fedcka" else np.nan),
            "sim": kw.get("sim", "linear_cka" if cfg.strategy == "fedcka" else ""),
            "alpha": cfg.partition_kw.get("beta", np.inf), "E": cfg.local_epochs, "seed": cfg.seed,
            "rounds": cfg.rounds, "pending": pending, "diverged": diverged, "chance": chance(
                cfg.dataset), "off": None if pending or diverged else off_plateau(r, metric),
            "acc": np.nan if pending or diverged else 100 * r.final(metric),
            "s / round": float(np.median(times)) if times else np.nan
        })
    return pd.DataFrame(rows)


def is_off(df: pd.DataFrame) -> pd.Series:
    """Which rows of ``df`` (a :func:`runs_frame`) are runs off their plateau (their ``off`` column
    says why)."""
    return df["off"].map(lambda w: isinstance(w, str) and bool(w)) if "off" in df else pd.Series(
        False, df.index)


def offs(df: pd.DataFrame, name: str = "name") -> list[str]:
    """``"<run>: <why>"`` for every row of ``df`` whose run is off its plateau (its ``off`` column):
    the ``off`` argument of :func:`fedlib.companion.verdicts.decide`."""
    if "off" not in df:
        return []
    return [f"{n}: {w}" for n, w in zip(df[name], df["off"]) if isinstance(w, str) and w]


def spoilt(df: pd.DataFrame) -> bool:
    """Whether a finished run among ``df``'s rows diverged or ended off its plateau: every claim
    over them is then not testable whatever the runs still to train read, so it is decided now, not
    left pending on them (the campaign trains those runs last:
    :func:`fedlib.companion.campaign.defer_moot`)."""
    done = df[~df["pending"].astype(bool)]
    return bool(done["diverged"].astype(bool).any()) or bool(offs(done))


def seed_summary(df: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Per group of ``by``: ``mean``, ``std`` (over seeds, ddof 1; NaN for one seed), ``n`` finished
    seeds, ``pending`` (some seed has no record), ``diverged`` (some seed diverged: no mean), ``n
    diverged`` (how many) and the median ``s / round``."""
    g = df.groupby(list(by), dropna=False, sort=False)
    out = pd.DataFrame({"mean": g["acc"].mean(), "std": g["acc"].std(ddof=1), "n": g["acc"].count(),
                        "pending": g["pending"].any(), "diverged": g["diverged"].any(),
                        "n diverged": g["diverged"].sum().astype(int),
                        "s / round": g["s / round"].median()})
    out.loc[out["diverged"], ["mean", "std"]] = np.nan
    return out.reset_index()


def cell(mean: float, std: float = float("nan"), n: int = 1, pending: bool = False,
         diverged: bool = False, n_diverged: int = 0) -> str:
    """A table cell: "pending", "diverged", "64.37" (one seed) or "64.37 ± 0.12" (mean ± std over n
    seeds). ``n_diverged`` of the seeds diverged beside ``n`` finished ones: "diverged (1 of 5
    seeds)"."""
    if diverged and not pending:
        return (f"{DIVERGED} ({n_diverged} of {n + n_diverged} seeds)" if n_diverged and n
                else DIVERGED)
    if pending or mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return PENDING
    return f"{mean:.2f}" if n <= 1 or math.isnan(std) else f"{mean:.2f} ± {std:.2f}"


def fmt_interval(values: Mapping[Any, float] | Sequence[float], sign: str = "") -> str:
    """``"85.56 ± 1.04 (5 seeds)"``: the mean and half-width of the 95 % t interval; one seed: no
    interval."""
    mean, half, n = t_interval(list(values.values()) if isinstance(values, Mapping) else values)
    if n == 0:
        return PENDING
    return f"{mean:{sign}.2f}" + (f" ± {half:.2f} ({n} seeds)" if n > 1 else " (1 seed)")


def summary_cell(row: Mapping[str, Any]) -> str:
    """:func:`cell` of one :func:`seed_summary` row."""
    return cell(row["mean"], row["std"], row["n"], row["pending"], row["diverged"],
                row["n diverged"])


def seed_values(df: pd.DataFrame, col: str = "acc", **where: Any) -> dict[int, float]:
    """``{seed: value of col}`` over the rows of ``df`` matching every ``column=value`` of ``where``
    (numbers compare as floats, so ``μ=10`` matches 10.0): the per-seed input of
    :func:`fedlib.companion.verdicts.decide`."""
    sel = pd.Series(True, index=df.index)
    for k, v in where.items():
        col_k = df[k]
        number = isinstance(v, (int, float)) and not isinstance(v, bool)
        sel &= (col_k.astype(float) == float(v)) if number else (col_k == v)
    return {int(s): float(x) for s, x in zip(df.loc[sel, "seed"], df.loc[sel, col])}


def minus_fedavg(curves: Mapping[str, Mapping[int, pd.Series]]
                 ) -> dict[str, dict[int, pd.Series]]:
    """``{"<label> − FedAvg": {seed: difference per round}}`` of every method but FedAvg (the label
    starting "FedAvg"), on the seeds both ran: the paired differences a spread of a point or two is
    read from."""
    ref = next((k for k in curves if k.split(" (")[0] == "FedAvg"), None)
    base = curves.get(ref, {}) if ref else {}
    return {f"{k} − FedAvg": {s: (c - base[s]).dropna() for s, c in v.items() if s in base}
            for k, v in curves.items() if k != ref and any(s in base for s in v)}
