"""Training a campaign's runs on this machine: one after another, or as single-thread worker processes on a CPU.

Independent runs on a CPU finish sooner side by side than one after another with every thread each: on the 2-core
CPU this project is developed on, two single-thread processes trained a pair of FedIntR quick runs in 0.60x the
time that two threads took for the same runs one after the other (``python benchmarks/cpu_choices.py --only
processes``; benchmarks/RESULTS.md). Small convolutions at batch 64 do not keep two threads busy. So on a CPU the
default is one single-thread worker per core (:func:`default_jobs`); on a GPU runs go one after another.

Workers are spawned processes that call :func:`fedlib.results.run` and write their records to the store as any run
does; the parent admits each run against the budget before it starts and learns its time into the cost table.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing import get_context
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from .campaign import Item
    from .costs import CostTable
    from .results import Store

__all__ = ["default_jobs", "run_local"]


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_jobs(device: str) -> int:
    """Runs trained at once by default: one single-thread worker per core on a CPU, one run at a time on a GPU."""
    return cores() if device == "cpu" else 1


def _exit_with_parent(parent: int, every_s: float = 1.0) -> None:
    """Exit this worker as soon as its parent process is gone (killed, even with SIGKILL): a daemon thread polls
    the parent's pid; an orphan would otherwise train on, unseen. The run's checkpoint keeps its finished rounds."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _init_worker(threads: int, parent: int | None = None) -> None:
    import torch

    torch.set_num_threads(threads)
    if parent is not None:
        _exit_with_parent(parent)


def _train(cfg_dict: dict[str, Any], root: str, progress: bool, recompute: bool, artifacts: bool) -> str:
    """One run in a worker process: its record as JSON (the record is stored under ``root`` as well)."""
    from .config import Config
    from .results import Store, run

    rec = run(Config.from_dict(cfg_dict), store=Store(root), progress=progress, recompute=recompute,
              allow_long=True, artifacts=artifacts)  # admitted by the budget
    return rec.to_json()


def run_local(items: list[Item], store: Store, budget_s: float, costs: CostTable, *, jobs: int = 1,
              progress: bool = False, log: Callable[[str], None] = print) -> dict[str, list[str]]:
    """Train the pending ``items`` in order within ``budget_s`` seconds, ``jobs`` at a time (``jobs > 1``: that
    many worker processes with ``cores() // jobs`` threads each); returns the keys done, skipped and failed."""
    import time

    from .campaign import _fmt_s, _what, admit, finish, keeps_models
    from .results import Record, run

    if jobs < 1:
        raise ValueError(f"jobs={jobs!r}: give at least 1 (runs trained at once).")
    t0 = time.monotonic()
    out: dict[str, list[str]] = {"done": [], "skipped": [], "failed": []}
    queue = [it for it in items if it.status in ("pending", "partial")]

    def failed(it: Item, e: BaseException) -> None:  # the failure is in results/failed/<key>.json; go on
        out["failed"].append(it.key)
        log(f"[campaign] FAILED {_what(it)}: {type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}")

    def next_admitted() -> tuple[Item, float] | None:
        while queue:
            it = queue.pop(0)
            left = admit(it, store, costs, budget_s - (time.monotonic() - t0), out, log)
            if left is not None:
                return it, left
        return None

    if jobs == 1:
        while (nxt := next_admitted()) is not None:
            it, left = nxt
            log(f"[campaign] run  {_what(it)}: estimated {_fmt_s(it.estimate_s)} ({it.source}); {_fmt_s(left)} left")
            t = time.monotonic()
            try:
                rec = run(it.cfg, store=store, progress=progress, recompute=it.recompute, allow_long=True,
                          artifacts=keeps_models(it.cfg))
            except Exception as e:  # noqa: BLE001
                failed(it, e)
                continue
            finish(rec, it, costs, out, time.monotonic() - t, log)
        return out

    threads = max(1, cores() // jobs)
    running: dict[Future, tuple[Item, float]] = {}
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn"), initializer=_init_worker,
                             initargs=(threads, os.getpid())) as pool:
        while queue or running:
            while len(running) < jobs and (nxt := next_admitted()) is not None:
                it, left = nxt
                log(f"[campaign] run  {_what(it)} (worker, {threads} thread{'s' * (threads > 1)}): estimated "
                    f"{_fmt_s(it.estimate_s)} ({it.source}); {_fmt_s(left)} left")
                fut = pool.submit(_train, it.cfg.to_dict(), str(store.root.resolve()), progress, it.recompute,
                                  keeps_models(it.cfg))
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
                finish(rec, it, costs, out, time.monotonic() - t, log)
    return out
