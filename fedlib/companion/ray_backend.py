"""``python -m fedlib.companion.campaign run --backend ray``: the campaign's runs as Ray tasks, one
GPU each on CUDA.

Connects to ``--ray-address`` / ``$RAY_ADDRESS`` (a cluster started with ``ray start --head`` on one
node and ``ray start --address=<head>:6379`` on the others), or starts a local Ray instance. Each
task trains one run with :func:`fedlib.companion.results.run` into the results folder (a path every
node sees, e.g. a shared file system, so its checkpoints survive a killed task) and returns the
record; the driver writes it into its own store too if it is not there (atomically), so a cluster
without a shared file system still ends with every record on the driver.

Tasks are submitted in the campaign's priority order, as many at a time as the cluster has GPUs
(CUDA) or CPUs (``num_cpus`` per task otherwise), and a run is submitted only while its estimate
fits the remaining budget. Every node needs fedlib and its dependencies (``pip install -e .``, or
the offline bundle: docs/campaign.md) and, for datasets, ``FEDLIB_DATA``. Ray is the optional extra
``fedlib[ray]``.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import torch

from fedlib.config import Config
from fedlib.progress import fmt_s
from fedlib.companion.results import Record, Store, git_commit, run

__all__ = ["train_on_ray", "RAY_VERSION", "require_ray"]

RAY_VERSION = "2.60.0"  # the version pinned in pyproject.toml's `ray` extra and environment.yml


def require_ray() -> Any:
    """The ``ray`` module, or one error naming the fix."""
    try:
        import ray
    except ImportError as e:
        raise SystemExit("--backend ray needs Ray, which is not installed: pip install "
                         f"'fedlib[ray]' (or pip install ray=={RAY_VERSION}); or use --backend "
                         "local.") from e
    return ray


def _ray_task(cfg_dict: dict[str, Any], root: str, threads: int | None) -> dict[str, Any]:
    """One run on a Ray worker: its record as JSON (stored under ``root`` on the worker too)."""
    if threads:
        torch.set_num_threads(threads)
    rec = run(Config.from_dict(cfg_dict), store=Store(root), progress=False, allow_long=True)
    return rec.to_json()


def train_on_ray(items: list[Any], store: Store, budget_s: float, booking: Any, *,
                 address: str | None = None, num_cpus: int | None = None,
                 threads: int | None = None,
                 log: Callable[[str], None] = print) -> dict[str, list[str]]:
    """Train the pending items as Ray tasks within ``budget_s`` seconds (see the module docstring);
    ``booking`` admits and books each run as for
    :func:`fedlib.companion.workers.train_on_workers`."""
    ray = require_ray()
    address = address or os.environ.get("RAY_ADDRESS")
    started = not ray.is_initialized()
    if started:
        env = {"env_vars": {"FEDLIB_COMMIT": git_commit()}}
        ray.init(address=address, num_cpus=None if address else num_cpus, runtime_env=env,
                 include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    try:
        res = ray.cluster_resources()
        cuda = any(it.cfg.device.startswith("cuda") for it in items)
        per_cpu = 1
        slots = int(res.get("GPU", 0)) if cuda else max(1, int(res.get("CPU", 1)) // per_cpu)
        if cuda and slots == 0:
            raise SystemExit("--backend ray --device cuda: the Ray cluster has no GPU "
                             "(ray.cluster_resources() shows none); start the workers on GPU nodes "
                             "or use --device cpu.")
        task = ray.remote(num_gpus=1 if cuda else 0, num_cpus=per_cpu, max_retries=0)(_ray_task)
        log(f"[campaign] ray: {slots} task slot(s) ({'GPUs' if cuda else 'CPUs'}) on {res}")
        t0 = time.monotonic()
        out: dict[str, list[str]] = {"done": [], "skipped": [], "failed": []}
        queue = [it for it in items if it.status in ("pending", "partial")]
        running: dict[Any, tuple[Any, float]] = {}
        while queue or running:
            while queue and len(running) < slots:
                it = queue.pop(0)
                left = booking.admit(it, budget_s - (time.monotonic() - t0), out)
                if left is None:
                    continue
                log(f"[campaign] ray task {it.what}: estimated {fmt_s(it.estimate_s)}; "
                    f"{fmt_s(left)} left")
                running[task.remote(it.cfg.to_dict(), str(store.root.resolve()),
                                    threads)] = (it, time.monotonic())
            if not running:
                break
            ready, _ = ray.wait(list(running), num_returns=1)
            it, t = running.pop(ready[0])
            try:
                rec = Record.from_json(ray.get(ready[0]))
            except Exception as e:  # noqa: BLE001
                # a failed task: its rounds are in failed/<key>.json
                out["failed"].append(it.key)
                log(f"[campaign] FAILED {it.what}: {type(e).__name__}: "
                    f"{str(e).splitlines()[0][:200]}")
                booking.failed(it, queue)
                continue
            if store.get(rec.key) is None:  # no shared file system: the driver keeps the record
                store.put(rec)
            booking.finish(rec, it, time.monotonic() - t, out, queue)
        return out
    finally:
        if started:
            ray.shutdown()
