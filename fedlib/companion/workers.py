"""Training a campaign's runs on this machine: one after another, or as single-thread worker
processes on a CPU.

Independent runs on a CPU finish sooner side by side than one after another with every thread
each: small convolutions at batch 64 do not keep two threads busy (``python
benchmarks/cpu_choices.py --only processes``; benchmarks/RESULTS.md). So on a CPU the default is one
single-thread worker per core (:func:`default_jobs`); on a GPU runs go one after another.

Workers are spawned processes that call :func:`fedlib.companion.results.run` and write their records
to the store as any run does; the parent admits each run against the budget before it starts and
learns its time into the cost table.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing import get_context
from typing import Any, Callable

import torch

from fedlib.config import Config
from fedlib.progress import fmt_s
from fedlib.companion.papers.fedcka.plans import keeps_models
from fedlib.companion.results import Record, Store, run

__all__ = ["default_jobs", "train_on_workers"]


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_jobs(device: str) -> int:
    """Runs trained at once by default: one single-thread worker per core on a CPU, one run at a
    time on a GPU."""
    return cores() if device == "cpu" else 1


def worker_threads(jobs: int) -> int | None:
    """The threads each of ``jobs`` worker processes trains on (None for ``jobs = 1``: runs train in
    this process, on its threads)."""
    return max(1, cores() // jobs) if jobs > 1 else None


def _exit_with_parent(parent: int, every_s: float = 1.0) -> None:
    """Exit this worker as soon as its parent process is gone (killed, even with SIGKILL): a daemon
    thread polls the parent's pid; an orphan would otherwise train on, unseen. The run's checkpoint
    keeps its finished rounds."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _init_worker(threads: int, parent: int | None = None) -> None:
    torch.set_num_threads(threads)
    if parent is not None:
        _exit_with_parent(parent)


def _train(cfg_dict: dict[str, Any], root: str, progress: bool, recompute: bool,
           artifacts: bool) -> str:
    """One run in a worker process: its record as JSON (the record is stored under ``root`` as
    well)."""
    rec = run(Config.from_dict(cfg_dict), store=Store(root), progress=progress, recompute=recompute,
              allow_long=True, artifacts=artifacts)  # admitted by the budget
    return rec.to_json()


def train_on_workers(items: list[Any], store: Store, budget_s: float, booking: Any, *,
                     jobs: int = 1, progress: bool = False,
                     log: Callable[[str], None] = print) -> dict[str, list[str]]:
    """Train the pending ``items`` (a campaign's, :class:`fedlib.companion.plan_text.Item`) in order
    within ``budget_s`` seconds, ``jobs`` at a time (``jobs > 1``: that many worker processes with
    ``cores() // jobs`` threads each); ``booking`` (:class:`fedlib.companion.booking.Booking`)
    admits each run before it starts (``admit(item, seconds left, out)``: the seconds left, or None
    to skip it) and books it when it ends (``finish(record, item, seconds, out, queue)``) or stops
    (``failed(item, queue)``): either may reorder the items still queued. Returns the keys done,
    skipped and failed."""
    if jobs < 1:
        raise ValueError(f"jobs={jobs!r}: give at least 1 (runs trained at once).")
    t0 = time.monotonic()
    out: dict[str, list[str]] = {"done": [], "skipped": [], "failed": []}
    queue = [it for it in items if it.status in ("pending", "partial")]

    # the failure is in results/failed/<key>.json; go on
    def failed(it: Any, e: BaseException) -> None:
        out["failed"].append(it.key)
        log(f"[campaign] FAILED {it.what}: {type(e).__name__}: "
            f"{(str(e).splitlines() or [''])[0][:200]}")
        booking.failed(it, queue)

    def next_admitted() -> tuple[Any, float] | None:
        while queue:
            it = queue.pop(0)
            left = booking.admit(it, budget_s - (time.monotonic() - t0), out)
            if left is not None:
                return it, left
        return None

    if jobs == 1:
        while (nxt := next_admitted()) is not None:
            it, left = nxt
            log(f"[campaign] run  {it.what}: estimated {fmt_s(it.estimate_s)} ({it.source}); "
                f"{fmt_s(left)} left")
            t = time.monotonic()
            try:
                rec = run(it.cfg, store=store, progress=progress, recompute=it.recompute,
                          allow_long=True, artifacts=keeps_models(it.cfg))
            except Exception as e:  # noqa: BLE001
                failed(it, e)
                continue
            booking.finish(rec, it, time.monotonic() - t, out, queue)
        return out

    threads = worker_threads(jobs) or 1
    running: dict[Future, tuple[Any, float]] = {}
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn"), initializer=_init_worker,
                             initargs=(threads, os.getpid())) as pool:
        while queue or running:
            while len(running) < jobs and (nxt := next_admitted()) is not None:
                it, left = nxt
                log(f"[campaign] run  {it.what} (worker, {threads} thread{'s' * (threads > 1)}): "
                    f"estimated {fmt_s(it.estimate_s)} ({it.source}); {fmt_s(left)} left")
                fut = pool.submit(_train, it.cfg.to_dict(), str(store.root.resolve()), progress,
                                  it.recompute, keeps_models(it.cfg))
                running[fut] = (it, time.monotonic())
            if not running:
                break
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for fut in done:
                it, t = running.pop(fut)
                try:
                    rec = Record.from_json(fut.result())
                except Exception as e:  # noqa: BLE001
                    failed(it, e)
                    continue
                booking.finish(rec, it, time.monotonic() - t, out, queue)
    return out
