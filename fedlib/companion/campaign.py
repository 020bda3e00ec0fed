"""The campaign: every run every notebook plans, costed, prioritized and trained within a time
budget.

    python -m fedlib.companion.campaign plan --scale paper --device cuda  # cost, priority, status
    python -m fedlib.companion.campaign run --scale paper --device cuda --budget 25m \
        [--backend local|ray]
    python -m fedlib.companion.campaign ledger --scale paper     # results/ledger-paper.md

The runs come from the notebooks' plans (:data:`fedlib.companion.papers.PLANS`; the notebooks load
the same runs with ``fetch(cfg, train=False)``); a run that several artifacts share (same
:meth:`Config.key`) is one run. Its **priority** is its notebook's
(:attr:`fedlib.companion.papers.Notebook.priorities`, by artifact): the Fashion-MNIST tables with
paper numbers first (FedIntR Table I, II, V), then FedCKA Table 2, and so on; an artifact no
notebook ranks gets :data:`DEFAULT_PRIORITY`. Its **status** is ``done`` (a record is in the store),
``diverged`` (it stopped with a non-finite loss, ``failed/<key>.json``, or its record holds
non-finite metrics: a finished result, never retried unless ``--retry-diverged``), ``pending``
(``partial`` when a checkpoint holds some of its rounds) or ``blocked`` (its dataset's files are not
on this machine, or its record file holds another config's record: named, never attempted). Its
**cost** is :mod:`fedlib.companion.costs`' estimate on the device.

``run`` first finishes the runs a checkpoint holds rounds of (checkpoints live on this machine only:
a begun run left for later may lose its rounds with the machine), then trains the pending runs in
priority order (within one priority, the shortest estimate first: a slice that cannot finish a
priority completes its cheapest settings' columns, so their claims are decided first) and never
starts one whose estimate exceeds the remaining budget (it goes on with the next one that fits, of a
later priority too); once runs have finished, estimates are scaled by the pace they were trained at
(:class:`Booking`). Once a seed of a setting has diverged or ended off its plateau, that setting's
other seeds are trained last, as the run goes and in later ones: every claim and mean over those
seeds is not testable whatever they read (``moot``). Every run checkpoints (``checkpoint_every``),
so a job killed at the end of its slice resumes there next time; records are written atomically by
:func:`fedlib.companion.results.run`; a finished run's time updates the cost table. Run again, it
continues; with everything done it does nothing. After a ``run`` the ledger
``results/ledger-<scale>.md`` (:mod:`fedlib.companion.ledger`; never the batch summary) lists
artifact × runs finished / needed, the claims' verdicts (from the notebooks'
``results/summary/*.<scale>.json``) and mean ± std over seeds where a plan has several.

Runs are trained one after another: batching runs that share a model and shapes (seeds, μ values)
into one computation gains nothing beyond noise on the CPU (``benchmarks/batching.py``,
``docs/campaign.md``).
"""

from __future__ import annotations

import argparse
import inspect
import math
import re
import sys
from pathlib import Path
from typing import Any, Callable

from fedlib.companion.provenance import REPO
from fedlib.companion import papers as registry  # PLANS read at call time: a test may replace them
from fedlib.companion import ray_backend, workers
from fedlib.atomic import writable_problem
from fedlib.config import SCALES, device_problem, field_problem
from fedlib.companion.booking import Booking, defer_moot, refresh  # noqa: F401  (re-exported)
from fedlib.companion.costs import DEFAULT_COSTS, CostTable, LongRunError, check_long
from fedlib.progress import fmt_s as _fmt_s
from fedlib.data import dataset_missing  # noqa: F401  (re-exported)
from fedlib.errors import as_typed
from fedlib.companion.ledger import ledger_path, write_ledger
from fedlib.companion.plan_text import Item, format_plan, matching, plan_doc, write_plan_doc
from fedlib.companion.papers import DEFAULT_PRIORITY, priority
from fedlib.companion.common import Plan
from fedlib.companion.results import Store, device_name
from fedlib.companion.scales import scale_of
from fedlib.companion.workers import default_jobs

__all__ = ["DEFAULT_PRIORITY", "collect", "priority", "dataset_missing", "parse_budget",
           "run_local", "unknown_notebooks", "main"]


def _call_plan(fn: Callable[..., Any], scale: str, dataset: str | None) -> Plan:
    params = inspect.signature(fn).parameters
    takes = "dataset" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    kw = {"dataset": dataset} if dataset and takes else {}
    return fn(scale, **kw)


def collect(scale: str, device: str = "cpu", *, store: Store | None = None,
            costs: CostTable | None = None, only: list[str] | None = None,
            dataset: str | None = None, plans: dict[str, Callable[..., Any]] | None = None,
            errors: list[str] | None = None, retry_diverged: bool = False,
            threads: int | None = None) -> list[Item]:
    """Every run of every plan (``only``: notebook names or number prefixes), deduplicated by key,
    with its priority, status and estimated cost on ``device`` with ``threads`` threads a run
    (default: this process's), in the order ``run`` takes them. A plan that fails to build is
    skipped and its error appended to ``errors``. With ``retry_diverged`` a diverged run is
    pending."""
    store, at = store or Store.for_scale(scale), scale_of(scale)
    costs = costs if costs is not None else CostTable()
    if costs.relearn and at.learns_costs:  # counted another way: learn the stored runs' times again
        costs.learn_all(store.records())
        costs.save()
    items: dict[str, Item] = {}
    for nb, fn in sorted((plans if plans is not None else registry.PLANS).items()):
        if only and not any(nb == o or nb.startswith(o) for o in only):
            continue
        every = at.exact and not dataset and plans is None  # the paper's setup: its every dataset
        datasets = registry.PAPER_DATASETS.get(nb, (None,)) if every else (dataset,)
        try:
            arts = [(a, r) for ds in datasets for a, r in _call_plan(fn, scale, ds).items()]
        except Exception as e:  # noqa: BLE001 — one broken plan must not hide the others
            (errors if errors is not None else []).append(f"{nb}: {type(e).__name__}: {e}")
            continue
        for art, runs in arts:
            for rid, cfg in runs.items():
                k = cfg.key()
                it = items.get(k)
                if it is None:
                    every = cfg.checkpoint_every or max(1, math.ceil(cfg.rounds / 20))
                    it = items[k] = Item(k, cfg.replace(device=device, checkpoint_every=every),
                                         priority=priority(nb, art), order=len(items),
                                         retry=retry_diverged)
                it.uses.append((nb, art, rid))
                it.priority = min(it.priority, priority(nb, art))
    missing: dict[str, str | None] = {}
    # without CUDA here: "cuda (none ...)", never the CPU's name
    dev_name = device_name(device, threads)
    for it in items.values():
        refresh(it, store, costs, missing, dev_name)
    defer_moot(list(items.values()))
    return sorted(items.values(), key=lambda i: i.sort_key)


def unknown_notebooks(only: list[str], plans: dict[str, Any] | None = None) -> str | None:
    """Why some of ``only`` (notebook names or number prefixes) name no notebook with a plan; None
    if all do."""
    names = sorted(plans if plans is not None else registry.PLANS)
    bad = [o for o in only if not any(nb == o or nb.startswith(o) for nb in names)]
    if not bad:
        return None
    return f"no notebook with a plan matches {', '.join(map(repr, bad))}; valid: {', '.join(names)}"


def parse_budget(text: str) -> float:
    """Seconds in a budget such as ``25m``, ``1h30m``, ``90s`` or ``1.5h`` (a bare number is
    seconds)."""
    t = str(text).strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", t):
        return float(t)
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([hms])", t)
    if not parts or re.sub(r"(\d+(?:\.\d+)?)\s*([hms])", "", t).strip():
        raise ValueError(f"Budget {text!r} is not a duration; write e.g. 25m, 1h30m, 90s or 1.5h.")
    return sum(float(v) * {"h": 3600, "m": 60, "s": 1}[u] for v, u in parts)


def run_local(items: list[Item], store: Store, budget_s: float, costs: CostTable, *, jobs: int = 1,
              progress: bool = False, log: Callable[[str], None] = print) -> dict[str, list[str]]:
    """The pending ``items`` trained on this machine within ``budget_s``
    (:func:`fedlib.companion.workers.train_on_workers`)."""
    booking = Booking(store, costs, log, device_name(items[0].cfg.device if items else "cpu",
                                                     workers.worker_threads(jobs)))
    return workers.train_on_workers(items, store, budget_s, booking, jobs=jobs, progress=progress,
                                    log=log)


def run_ray(items: list[Item], store: Store, budget_s: float, costs: CostTable, *,
            address: str | None = None, num_cpus: int | None = None, threads: int | None = None,
            log: Callable[[str], None] = print) -> dict[str, list[str]]:
    """The pending ``items`` trained as Ray tasks within ``budget_s``
    (:func:`fedlib.companion.ray_backend.train_on_ray`)."""
    booking = Booking(store, costs, log,
                      device_name(items[0].cfg.device if items else "cpu", threads))
    return ray_backend.train_on_ray(items, store, budget_s, booking, address=address,
                               num_cpus=num_cpus, threads=threads, log=log)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fedlib.companion.campaign", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("plan", "run", "ledger", "costs", "doc"):
        p = sub.add_parser(name)
        p.add_argument("--scale", default="paper", choices=SCALES)
        p.add_argument("--device", default="cuda" if name == "doc" else "cpu")
        p.add_argument("--only", nargs="*", help="notebook names or number prefixes, e.g. 05 01")
        p.add_argument("--dataset", default=None, help="pass this dataset to every plan that takes "
                                                       "one")
        p.add_argument("--match", nargs="*", default=None,
                       help="only runs whose 'notebook · artifact · name' contains one of these "
                            "texts, e.g. 'table1 · FedAvg' 'FedIntR / μ=5' (as `plan` prints them)")
        p.add_argument("--store", default=None, help="results folder (default: results/, "
                                                     "results/smoke/ at smoke)")
        p.add_argument("--costs", default=str(DEFAULT_COSTS),
                       help="the cost table (JSON; at smoke scale the default one is read, not "
                            "written)")
        if name == "run":
            p.add_argument("--budget", required=True,
                           help="wall-clock budget, e.g. 25m, 1h30m, 90s")
            p.add_argument("--backend", default="local", choices=["local", "ray"])
            p.add_argument("--ray-address", default=None, help="a Ray cluster (default: "
                                                               "$RAY_ADDRESS or local)")
            p.add_argument("--jobs", type=int, default=None,
                           help="runs trained at once by the local backend (default: one "
                                "single-thread worker per core on a CPU, 1 on a GPU; "
                                "fedlib.companion.workers)")
            p.add_argument("--no-progress", dest="progress", action="store_false",
                           help="no line per round (round, accuracy, loss, s/round, ETA)")
            p.add_argument("--allow-long", action="store_true",
                           help="go on when the work within the budget is estimated longer than an "
                                "hour on a CPU")
            p.add_argument("--retry-diverged", action="store_true",
                           help="train the runs that diverged again (by default a diverged run is "
                                "a result)")
        if name == "doc":
            p.add_argument("--file", default=str(REPO / "docs" / "campaign.md"),
                           help="the markdown file whose generated block is rewritten")
        if name == "costs":
            p.add_argument("--learn", action="store_true", help="add the store's records' times to "
                                                                "the table")
    a = ap.parse_args(argv)
    if ((why := field_problem("device", a.device))
            or (a.cmd == "run" and (why := device_problem(a.device)))):
        ap.error(f"--device {a.device!r}: {why}")
    if a.only and (why := unknown_notebooks(a.only)):
        ap.error(f"--only {' '.join(a.only)}: {why}")
    store = Store(a.store) if a.store else Store.for_scale(a.scale)
    if a.cmd in ("run", "ledger"):
        subs = ("records", "failed", "checkpoints") if a.cmd == "run" else ("records",)
        for d in [store.root / sub for sub in subs] + [ledger_path(a.scale, store).parent]:
            if (why := writable_problem(d)) is not None:
                ap.error(f"--store {store.root}: cannot write to {d} ({why}); nothing was trained. "
                         "Make it writable or pass --store <a writable folder>.")
    # smoke runs are all set-up: they would spoil the committed table's estimates (an explicit
    # --costs file learns)
    costs = CostTable(a.costs)
    if not scale_of(a.scale).learns_costs and a.costs == str(DEFAULT_COSTS):
        costs.path = None
    if a.cmd == "costs":
        if a.learn:
            print(f"[campaign] learnt {costs.learn_all(store.records())} record(s) into "
                  f"{costs.path}")
            costs.save()
        for dev, entries in sorted(costs.table.items()):
            for k, e in sorted(entries.items()):
                print(f"{dev} | {k} | {1e6 * e['s_per_pass']:.2f} µs per sample-pass | {e['runs']} "
                      "run(s)")
        return 0
    errors: list[str] = []
    # estimates at the workers' threads
    jobs = default_jobs(a.device) if getattr(a, "jobs", None) is None else a.jobs
    on_ray = getattr(a, "backend", "local") == "ray"
    threads = None if on_ray else workers.worker_threads(max(1, jobs))
    items = collect(a.scale, a.device, store=store, costs=costs, only=a.only, dataset=a.dataset,
                    errors=errors, retry_diverged=getattr(a, "retry_diverged", False),
                    threads=threads)
    for e in errors:
        print(f"[campaign] plan error (skipped): {e}", file=sys.stderr)
    if a.match:
        items = matching(items, a.match)
        if not items:
            ap.error(f"--match {' '.join(map(repr, a.match))}: no run of the plan(s) contains it; "
                     "`python -m fedlib.companion.campaign plan` lists the runs as 'notebook · "
                     "artifact · name'.")
    if a.cmd == "plan":
        print(format_plan(items, a.scale, a.device))
        return 0
    if a.cmd == "doc":
        write_plan_doc(Path(a.file), plan_doc(items, costs, a.scale, a.device))
        print(f"[campaign] {a.file}: the plan's runs and hours at scale {a.scale} on {a.device}")
        return 0
    if a.cmd == "run":
        try:
            budget = parse_budget(a.budget)
        except ValueError as e:
            ap.error(str(e))
        if jobs < 1:
            ap.error(f"--jobs {a.jobs}: give at least 1 (runs trained at once), or leave it out "
                     "for the default.")
        todo = [i for i in items if i.status in ("pending", "partial")]
        if todo and scale_of(a.scale).gpu:  # what this budget would start: stop if hours on a CPU
            need = sum(i.estimate_s for i in todo)
            try:
                what = (f"campaign: {len(todo)} pending run(s) ({_fmt_s(need)} in all), budget "
                        f"{_fmt_s(budget)}")
                check_long(min(need, budget), a.device, what,
                           flag=as_typed("--allow-long", "FEDLIB_ALLOW_LONG=1 make campaign"),
                           allow_long=a.allow_long or None)
            except LongRunError as e:
                print(f"[campaign] {e}", file=sys.stderr)
                return 2
        if not todo:
            n = {s: sum(i.status == s for i in items) for s in ("done", "diverged", "blocked")}
            retry = as_typed("--retry-diverged",
                             "python -m fedlib.companion.campaign run ... --retry-diverged")
            print(f"[campaign] nothing to do: {n['done']} done, {n['diverged']} diverged (a "
                  f"result; {retry} trains them again), {n['blocked']} blocked.")
        elif a.backend == "ray":
            run_ray(items, store, budget, costs, address=a.ray_address)
        else:
            run_local(items, store, budget, costs, jobs=jobs, progress=a.progress)
    every = collect(a.scale, "cpu", store=store, costs=CostTable(None), dataset=a.dataset)
    path = write_ledger(a.scale, every, store=store)  # every plan, whatever --only ran
    print(f"[campaign] ledger: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
