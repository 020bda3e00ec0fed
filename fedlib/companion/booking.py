"""The campaign's bookkeeping around each run: a planned run's status and remaining cost
(:func:`refresh`), its admission against the budget at this campaign's pace and its booking when it
ends (:class:`Booking`, what the backends call), and the seeds of a spoilt setting put last
(:func:`defer_moot`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from fedlib.config import Config
from fedlib.data import dataset_missing
from fedlib.progress import fmt_s as _fmt_s
from fedlib.schedule import NonFiniteLossError
from fedlib.companion.costs import CostTable
from fedlib.companion.plan_text import Item
from fedlib.companion.results import CorruptRecordError, Record, RecordMismatchError, Store
from fedlib.companion.run_checks import off_plateau_by_every_metric


def defer_moot(items: list[Item]) -> None:
    """Mark the pending runs of a setting one of whose seeds diverged or ended off its plateau (by
    every accuracy a verdict may read) as moot: such a run makes every claim and mean over that
    setting's seeds not testable whatever its other seeds read
    (:func:`fedlib.companion.verdicts.decide`), so they are trained after every run a verdict can
    still depend on (planned all the same: seeds are fixed before any run)."""
    spoilt: dict[str, str] = {}
    for it in sorted(items, key=lambda i: i.cfg.seed):
        if it.status == "diverged" or (it.status == "done" and it.off):
            why = "diverged" if it.status == "diverged" else f"ended off its plateau ({it.off})"
            spoilt.setdefault(it.setting, f"seed {it.cfg.seed} of its setting {why}")
    for it in items:
        if it.status in ("pending", "partial") and (why := spoilt.get(it.setting)) is not None:
            it.moot = f"{why}: no verdict depends on this run (trained last)"


def refresh(it: Item, store: Store, costs: CostTable, missing: dict[str, str | None] | None = None,
            dev_name: str | None = None) -> Item:
    """Update ``it``'s status and remaining cost from the store and the cost table."""
    missing = {} if missing is None else missing
    ds = it.cfg.dataset
    if ds not in missing:
        missing[ds] = dataset_missing(ds)
    it.rounds_done, it.recompute, it.why = 0, False, ""
    try:
        rec = store.get(it.key)
    except RecordMismatchError as e:  # another config's record under this key: the user decides
        it.status, it.why, it.estimate_s, it.source = "blocked", str(e), 0.0, ""
        return it
    except CorruptRecordError as e:  # unreadable: run() recomputes it
        rec, it.why = None, str(e)
    why = "; ".join(rec.problems()) if rec is not None else _divergence(store, it.key)
    if why and not it.retry:
        it.status, it.why, it.estimate_s, it.source = "diverged", why, 0.0, ""
        return it
    if rec is not None and not why:
        it.status, it.estimate_s, it.source = "done", 0.0, ""
        it.off = off_plateau_by_every_metric(rec) or ""
        return it
    it.recompute = rec is not None
    if missing[ds]:
        it.status, it.why = "blocked", missing[ds]
    else:
        it.status = "pending"
        it.rounds_done = store.checkpoint_round(it.key)
        if it.rounds_done:
            it.status = "partial"
    est = costs.estimate(it.cfg, it.cfg.device, rounds_left=it.cfg.rounds - it.rounds_done,
                         device_name=dev_name)
    it.estimate_s, it.source = est.seconds, est.source
    return it


def _divergence(store: Store, key: str) -> str:
    """How the last run of ``key`` diverged (a non-finite loss, in ``failed/<key>.json``), or
    ``""``."""
    f = store.last_failure(key)
    if f is None or f.get("error", {}).get("type") != NonFiniteLossError.__name__:
        return ""
    return f"diverged in round {f.get('failed_round')}: {f['error'].get('message', '')}"


def admit(it: Item, store: Store, costs: CostTable, left: float, out: dict[str, list[str]],
          log: Callable[[str], None], pace: float = 1.0,
          dev_name: str | None = None) -> float | None:
    """The seconds left if ``it`` should start now; None if it is done meanwhile or its estimate
    exceeds ``left`` (then it is listed as skipped). Refreshes its status and estimate first (a
    checkpoint, a newer measurement of ``dev_name`` first); ``pace`` (:attr:`Booking.pace`) scales
    the estimate to this machine's speed so far."""
    refresh(it, store, costs, dev_name=dev_name)
    if it.status not in ("pending", "partial"):
        return None
    if pace != 1.0:
        it.estimate_s *= pace
        it.source += f", × {pace:.2f} (this campaign's pace)"
    if it.estimate_s > left:
        out["skipped"].append(it.key)
        log(f"[campaign] skip {it.what}: estimated {_fmt_s(it.estimate_s)} > {_fmt_s(left)} left")
        return None
    return left


def finish(rec: Record, it: Item, costs: CostTable, out: dict[str, list[str]], secs: float,
           log: Callable[[str], None]) -> None:
    """Book a finished run: the cost table learns its time."""
    if costs.learn(rec):
        costs.save()
    out["done"].append(it.key)
    acc = rec.final("test_acc")
    log(f"[campaign] done {it.what} in {_fmt_s(secs)}" +
        (f": test acc {100 * acc:.2f} %" if acc == acc else ""))


@dataclass
class Booking:
    """What a backend (:func:`fedlib.companion.workers.train_on_workers`,
    :func:`fedlib.companion.ray_backend.train_on_ray`) asks the campaign around each run:
    :func:`admit` before it starts, :func:`finish` when it ends. It keeps this campaign's **pace**:
    the seconds its finished runs took over what the cost table estimates, as it stands now, for the
    rounds they trained. The table holds medians over earlier machines; two CPUs of one model name
    can differ twofold, so a run is admitted on its estimate times the pace (1 until a run has
    finished), and one that cannot end within the budget is not begun. The table learns each
    finished run's time: where this campaign's runs are most of a key's measurements, its estimates
    are already this machine's and the pace stays near 1 (against the estimates they were admitted
    on, it would count this machine's slowness twice). ``dev_name``: the device name the runs'
    records carry (:func:`fedlib.companion.provenance.device_name` with the workers' threads),
    measured first."""

    store: Store
    costs: CostTable
    log: Callable[[str], None] = print
    dev_name: str | None = None
    # key: the rounds it was admitted to train
    _admitted: dict[str, int] = field(default_factory=dict)
    # (config, rounds trained, seconds)
    _finished: list[tuple[Config, int, float]] = field(default_factory=list)

    @property
    def pace(self) -> float:
        est = sum(self.costs.estimate(c, c.device, rounds_left=r, device_name=self.dev_name).seconds
                  for c, r, _ in self._finished)
        return sum(s for *_, s in self._finished) / est if est > 0 else 1.0

    def admit(self, it: Item, left: float, out: dict[str, list[str]]) -> float | None:
        got = admit(it, self.store, self.costs, left, out, self.log, self.pace, self.dev_name)
        if got is not None:
            self._admitted[it.key] = it.cfg.rounds - it.rounds_done
        return got

    def failed(self, it: Item, queue: list[Item]) -> None:
        """``it`` stopped; if it diverged, its setting's seeds still in ``queue`` go last
        (:func:`defer_moot`)."""
        if _divergence(self.store, it.key):
            it.status = "diverged"
            defer_moot([it, *queue])
            queue.sort(key=lambda q: q.sort_key)

    def finish(self, rec: Record, it: Item, secs: float, out: dict[str, list[str]],
               queue: list[Item] | None = None) -> None:
        """Book ``it``'s record; if it ended off its plateau, its setting's seeds still in ``queue``
        go last."""
        rounds = self._admitted.pop(it.key, 0)
        finish(rec, it, self.costs, out, secs, self.log)  # the table learns its time first
        if rounds > 0 and secs > 0:
            self._finished.append((it.cfg, rounds, secs))
        it.status, it.off = "done", off_plateau_by_every_metric(rec) or ""
        if it.off and queue:
            defer_moot([it, *queue])
            queue.sort(key=lambda q: q.sort_key)
