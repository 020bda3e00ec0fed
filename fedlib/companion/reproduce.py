"""Execute every numbered notebook headlessly with papermill and summarize what each showed.

    python -m fedlib.companion.reproduce --scale quick                # the README's main job (CPU)
    python -m fedlib.companion.reproduce --scale paper --device cuda  # the papers' setups, on a GPU
    python -m fedlib.companion.reproduce --only 01 --scale smoke
    python -m fedlib.companion.reproduce --scale paper --no-train     # the campaign's records
    python -m fedlib.companion.reproduce --collect --scale quick      # the stored summaries only
    python -m fedlib.companion.reproduce --scale paper --allow-long   # on a CPU even if > 1 h each

Executed copies go to ``notebooks/executed/<scale>/``; figures to ``figures/``; each notebook's
tables and claims to ``results/summary/``; the combined summary to ``results/summary-<scale>.md``
(and stdout), with the ledger's runs-by-artifact and seed sections (:mod:`fedlib.companion.ledger`).
``--no-train`` passes ``train=False``: the notebooks render the stored records and show missing runs
as pending (a notebook without a ``train`` parameter is skipped then, not trained).

On a CPU, a notebook's missing runs are first trained side by side by the campaign's worker
processes (one single-thread worker per core, :mod:`fedlib.companion.workers`; ``--jobs 1`` trains
them inside the notebook instead); the notebook then renders what they stored. While a notebook
trains, its rounds are printed here, one line each (round, accuracy, loss, s/round, ETA; the kernels
append them to ``$FEDLIB_ROUND_LOG``, :mod:`fedlib.progress`). At paper scale each notebook's
estimate is printed before it starts, and on a CPU a notebook estimated longer than an hour is not
started unless ``--allow-long`` (:func:`fedlib.companion.costs.check_long`).

Before anything runs, ``--device`` and ``--dataset`` are checked (a CUDA device on a machine without
one is named with the fix), every parameter passed is checked against each notebook's ``parameters``
cell, and the results folder must be writable (with ``--write-back``, every notebook too). One batch
runs at a time in a tree (a second refuses, naming the first's process); each kernel has its own
sockets (:mod:`fedlib.companion.ipc_kernel`). The committed ``results/summary-<scale>.md`` is
replaced only by a batch that covers every notebook without a failure (and only when its text
changed); any other batch writes ``results/summary-<scale>.partial.md`` (not committed) and leaves
the committed summary as it was.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from contextlib import nullcontext
from pathlib import Path

from fedlib.atomic import atomic_write_text, writable_problem
from fedlib.companion.campaign import collect, run_local
from fedlib.config import device_problem, field_problem
from fedlib.companion.findings import load as load_claims, readme_block, write_readme
from fedlib.companion.papers import PLANS
from fedlib.companion.costs import (ALLOW_LONG_ENV, DEFAULT_COSTS, CostTable, LongRunError,
                                    check_long)
from fedlib.progress import fmt_s
from fedlib.companion.ledger import runs_section, seeds_section
from fedlib.companion.plots import FIGURES
from fedlib.progress import ROUND_LOG_ENV
from fedlib.companion.provenance import REPO, code_commit, worker_seconds
from fedlib.companion.claims_page import (VERDICT_COLUMNS, claim_figures,  # noqa: F401
                                          claims_overview, findings, md_cell)
from fedlib.companion.report import CLAIM_COLUMNS, claim_rows
from fedlib.companion import results
from fedlib.companion.results import Store
from fedlib.companion.scales import scale_of
from fedlib.companion.workers import default_jobs, worker_threads
from fedlib.companion.writeback import (BatchRunningError, batch_lock,  # noqa: F401
                                        merged_streams, notebook_problems, write_back)

NOTEBOOK_DIR = REPO / "notebooks"

def notebooks(only: list[str] | None = None) -> list[Path]:
    found = sorted(p for p in NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))
    if only:
        found = [p for p in found if any(p.name.startswith(o) or p.stem == o for o in only)]
        if not found:
            raise SystemExit(f"No notebook matches {only}; available: "
                             f"{[p.stem for p in notebooks()]}")
    return found

def execute(nb: Path, scale: str, device: str, dataset: str | None, out_dir: Path,
            train: bool = True) -> tuple[str, float]:
    import papermill as pm

    params: dict = {"scale": scale, "device": device}
    if dataset:
        params["dataset"] = dataset
    if not train:
        if "train" in pm.inspect_notebook(str(nb)):
            params["train"] = False
        elif nb.stem in PLANS:  # a notebook that plans runs but cannot be told not to train them
            return "skipped (no train parameter: it would train)", 0.0
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        quiet = {"kernel_manager_class": "fedlib.companion.ipc_kernel.IPCKernelManager"
                 } if os.name == "posix" else {}
        pm.execute_notebook(str(nb), str(out_dir / nb.name), parameters=params,
                            cwd=str(NOTEBOOK_DIR), kernel_name="python3", progress_bar=False,
                            log_output=False, **quiet)
        status = "ok"
    # papermill wraps the cell's exception; keep going with the other notebooks
    except Exception as e:
        name = getattr(e, "ename", type(e).__name__)
        status = f"FAILED ({name}: {' '.join(str(getattr(e, 'evalue', e)).split())[:400]})"
    return status, time.perf_counter() - t0


def _echo_rounds(path: Path, stop: threading.Event) -> None:
    """Print the lines the kernel appends to ``path`` until ``stop`` is set (then the rest)."""
    pos = 0
    while True:
        done = stop.wait(0.5)
        if path.exists():
            with open(path) as f:
                f.seek(pos)
                chunk = f.read()
                pos = f.tell()
            for line in chunk.splitlines():
                print(f"  {line}", flush=True)
        if done:
            return

def execute_logged(nb: Path, scale: str, device: str, dataset: str | None, out_dir: Path,
                   train: bool = True) -> tuple[str, float]:
    """:func:`execute`, printing the rounds its runs report (:data:`fedlib.progress.ROUND_LOG_ENV`)
    as they come."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "rounds.log"
        old = os.environ.get(ROUND_LOG_ENV)
        os.environ[ROUND_LOG_ENV] = str(log)
        stop = threading.Event()
        echo = threading.Thread(target=_echo_rounds, args=(log, stop), daemon=True)
        echo.start()
        try:
            return execute(nb, scale, device, dataset, out_dir, train=train)
        finally:
            stop.set()
            echo.join()
            if old is None:
                os.environ.pop(ROUND_LOG_ENV, None)
            else:
                os.environ[ROUND_LOG_ENV] = old

def too_long(nb: Path, scale: str, device: str, dataset: str | None) -> str | None:
    """At a scale meant for a GPU (paper): print the notebook's estimate; why it must not start (a
    CPU, over an hour, not allowed), else None."""
    if not scale_of(scale).gpu:
        return None
    items = [
        i for i in collect(scale, device, only=[nb.stem], dataset=dataset)
        if i.status in ("pending", "partial")
    ]
    if not items:
        return None
    sources = "; ".join(sorted({i.source for i in items}))
    try:
        check_long(sum(i.estimate_s for i in items), device, f"{nb.stem}: {len(items)} run(s) to "
                   "train", sources, flag="--allow-long",
                   log=lambda s: print(s.replace("[fedlib]", "[reproduce]"), flush=True))
    except LongRunError as e:
        return str(e)
    return None

def pretrain(nb: Path, scale: str, device: str, dataset: str | None, jobs: int) -> None:
    """Train ``nb``'s pending runs ``jobs`` at a time with the campaign's workers (``jobs > 1``),
    before the notebook renders them; a run that fails is left for the notebook, which reports
    it."""
    if jobs < 2:
        return
    items = [
        i for i in collect(scale, device, only=[nb.stem], dataset=dataset, threads=worker_threads(
            jobs)) if i.status in ("pending", "partial")
    ]
    if items:
        est = sum(i.estimate_s for i in items) / jobs
        print(f"[reproduce] {nb.stem}: {len(items)} run(s) to train, {jobs} at a time, about "
              f"{fmt_s(est)}: their records are not in results/records yet (--no-train renders "
              "without them, as pending)", flush=True)
        costs = CostTable(DEFAULT_COSTS if scale_of(scale).learns_costs else None)
        run_local(items, Store.for_scale(scale), float("inf"), costs, jobs=jobs, progress=True,
                  log=lambda s: print(s.replace("[campaign]", "[reproduce]"), flush=True))


def _md_table(cols: list[str], rows: list[list[object]]) -> list[str]:
    return ["| " + " | ".join(map(md_cell, cols)) + " |", "|" + "---|" * len(cols),
            *("| " + " | ".join(md_cell(c) for c in r) + " |" for r in rows)]

def campaign_progress(scale: str, device: str = "cpu") -> dict[str, dict[str, float]]:
    """Per notebook: its planned runs (``planned``), those stored (``done``), the single-thread
    worker-hours the stored ones took (``hours_done``: their records' wall time over all their
    slices, :func:`fedlib.companion.provenance.worker_seconds`) and the estimate for the rest
    (``hours_left``, whole runs: a local checkpoint does not count). A run several notebooks share
    counts in each."""
    store, out = Store.for_scale(scale), {}
    # the campaign's single-thread workers
    for it in collect(scale, device, store=store, threads=1):
        rec = store.get(it.key) if it.status in ("done", "diverged") else None
        for nb in {u[0] for u in it.uses}:
            p = out.setdefault(nb, {"planned": 0, "done": 0, "hours_done": 0.0, "hours_left": 0.0})
            p["planned"] += 1
            if it.status in ("done", "diverged"):
                p["done"] += 1
                p["hours_done"] += (worker_seconds(rec) if rec else 0.0) / 3600
            else:  # the whole run's estimate: a checkpoint here must not change the summary
                p["hours_left"] += it.estimate_s * it.cfg.rounds / max(
                    1, it.cfg.rounds - it.rounds_done) / 3600
    return out


def summarize(rows: list[dict], scale: str,
              progress: dict[str, dict[str, float]] | None = None) -> str:
    """The batch's summary (valid markdown): per notebook its runs done / planned, worker-hours done
    / left (``progress``: :func:`campaign_progress`) and the count of each verdict, then each
    notebook's claims (the papers') and controls (ours) as tables and its paper-vs-ours tables."""
    head = [
        "notebook", "status", "runs done / planned", "worker-hours done / left", "seeds",
        *VERDICT_COLUMNS
    ]
    body = []
    for r in rows:
        n = {s: sum(c.get("status") == s for c in r.get("claims", [])) for s in VERDICT_COLUMNS}
        p = (progress or {}).get(r["notebook"])
        body.append([r["notebook"], r["status"], f"{p['done']} / {p['planned']}" if p else "—",
                     f"{p['hours_done']:.1f} / {p['hours_left']:.1f}" if p else "—",
                     ", ".join(map(str, r.get("seeds", []))) or "—", *n.values()])
    lines = [f"# fedlib reproduction summary — scale `{scale}`", "", *_md_table(head, body), ""]
    if not scale_of(scale).exact:
        lines += [f"_Scale `{scale}` is not the papers' setup: these numbers are not paper-scale "
                  "results. Verdicts: 95 % t intervals over seeds against each claim's margin "
                  "(fedlib.companion.verdicts); the verdict counts are the papers' claims only "
                  "(the project's controls are listed apart). Worker-hours done add up the wall "
                  "time of every stored run a notebook plans, over all its slices (a run shared by "
                  "notebooks counts in each, under whatever load it trained); hours left are the "
                  "campaign's estimate for the rest, from the median times of the stored runs on "
                  f"the hosts that trained them (`make campaign SCALE={scale}` trains them, two "
                  "single-thread workers: about half of it in wall time)._", ""]
    else:
        lines += ["_Scale `paper`: the papers' setups. Verdicts: 95 % t intervals over seeds "
                  "against each claim's margin (fedlib.companion.verdicts); the counts are the "
                  "papers' claims only. Hours done add up the wall time of every stored run a "
                  "notebook plans, over all its slices (the device of each is in its runs table); "
                  "hours left are the campaign's GPU estimate for the rest, every dataset column "
                  "the papers report (`python -m fedlib.companion.campaign plan --scale paper "
                  "--device cuda`; docs/campaign.md)._", ""]
    details = []
    for r in rows:
        if not (r.get("claims") or r.get("tables")):
            continue
        details += ["", f"### {r['notebook']}", ""]
        if r.get("claims"):
            details += _md_table(list(CLAIM_COLUMNS), claim_rows(r["claims"]))
        if r.get("controls"):
            details += [
                "", "**Controls** (the project's own comparisons, not claims of the papers)", ""
            ]
            details += _md_table(list(CLAIM_COLUMNS), claim_rows(r["controls"]))
        for name, table in r.get("tables", {}).items():
            details += ["", f"**{md_cell(name)}**", ""]
            if table:
                cols = list(table[0])
                details += _md_table(cols, [[t[c] for c in cols] for t in table])
    return "\n".join(lines + ["## Claims and tables", *details, ""])


def stale_figures(rows: list[dict], folder: Path) -> list[str]:
    """The figures in ``folder`` that no notebook of a whole batch drew (each notebook's summary
    lists its figures)."""
    drawn = {f for r in rows for f in r.get("figures") or []}
    return sorted(p.stem for p in folder.glob("*.json") if p.stem not in drawn)

def _ledger(scale: str, only: list[str] | None) -> str:
    """The ledger's runs-by-artifact and seed sections for the summary (empty if the plans cannot be
    listed)."""
    store = Store.for_scale(scale)
    try:
        items = collect(scale, "cpu", store=store, costs=CostTable(None), only=only)
    except Exception as e:  # noqa: BLE001 — the notebooks' summary stands without it
        return f"\n_(ledger unavailable: {type(e).__name__}: {e})_\n"
    return "\n" + "\n".join(runs_section(items) + seeds_section(items, store, scale))

def parameter_problems(nbs: list[Path], args: argparse.Namespace) -> list[str]:
    """What is wrong with the options and the parameters they pass, before any notebook runs:
    ``--device`` and ``--dataset`` values, and parameters a notebook's ``parameters`` cell does not
    define (papermill would only warn and run with the notebook's defaults)."""
    bad = []
    if why := field_problem("device", args.device) or device_problem(args.device):
        bad.append(f"--device {args.device!r}: {why}")
    if args.dataset is not None and (why := field_problem("dataset", args.dataset)):
        bad.append(f"--dataset {args.dataset!r}: {why}")
    if bad or args.collect:
        return bad
    import papermill as pm

    passed = ["scale", "device"] + (["dataset"] if args.dataset else [])
    for nb in nbs:
        known = set(pm.inspect_notebook(str(nb)))
        missing = [p for p in passed if p not in known]
        if missing:
            bad.append(f"{nb.name} has no parameter {', '.join(missing)} (its parameters: "
                       f"{', '.join(sorted(known))})")
    return bad

def main(argv: list[str] | None = None) -> int:
    """Every notebook of the batch is stamped with the code as it was when the batch started
    (``--write-back`` changes notebooks/ as it goes, which must not make the later notebooks
    "-dirty")."""
    before = os.environ.get("FEDLIB_COMMIT")
    os.environ["FEDLIB_COMMIT"] = before or code_commit()
    try:
        return _main(argv)
    finally:
        if before is None:
            os.environ.pop("FEDLIB_COMMIT", None)

def _main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="quick", choices=["smoke", "quick", "paper"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dataset", default=None, help="override every notebook's dataset (default: "
                                                    "each one's own)")
    ap.add_argument("--only", nargs="*", help="notebook numbers or names, e.g. 00 01")
    ap.add_argument("--no-train", dest="train", action="store_false",
                    help="render stored records only (train=False); missing runs are shown as "
                         "pending")
    ap.add_argument("--allow-long", action="store_true",
                    help="start paper-scale notebooks estimated longer than an hour on a CPU")
    ap.add_argument("--jobs", type=int, default=None,
                    help="runs trained at once before each notebook renders them (default: one "
                         "single-thread worker per core on a CPU, 1 on a GPU; 1: the notebook "
                         "trains them itself)")
    ap.add_argument("--write-back", action="store_true",
                    help="copy each executed notebook's outputs into notebooks/ (the committed "
                         "copies a reader sees)")
    ap.add_argument("--collect", action="store_true",
                    help="execute nothing: rebuild summary-<scale>.md from "
                         "results/summary/<notebook>.<scale>.json")
    args = ap.parse_args(argv)

    if args.allow_long:
        os.environ[ALLOW_LONG_ENV] = "1"  # the kernels inherit it

    nbs = notebooks(args.only)
    if not args.train and not field_problem("device", args.device) and (why := device_problem(
            args.device)):
        print(f"[reproduce] --device {args.device}: {why}; --no-train trains nothing, so the "
              "notebooks render the stored records on the CPU.", flush=True)
        args.device = "cpu"
    if args.jobs is not None and args.jobs < 1:
        ap.error(f"--jobs {args.jobs}: give at least 1 (runs trained at once), or leave it out for "
                 "the default.")
    if bad := parameter_problems(nbs, args):
        ap.error("nothing was run:\n  - " + "\n  - ".join(bad))
    root = results.DEFAULT_ROOT
    for d in [root] + ([] if args.collect else
                       [root / "summary", NOTEBOOK_DIR / "executed", FIGURES / args.scale]):
        if (why := writable_problem(d)) is not None:
            env = "FEDLIB_FIGURES" if d.is_relative_to(FIGURES) else "FEDLIB_RESULTS"
            ap.error(f"cannot write to {d} ({why}); nothing was run. Make it writable, or set "
                     f"{env} to a writable folder.")
    if args.write_back and (bad := notebook_problems(nbs)):
        ap.error(f"--write-back: {'; '.join(bad)}; nothing was run. Make them writable (chmod "
                 "u+w), or leave out --write-back.")
    try:
        with nullcontext() if args.collect else batch_lock(NOTEBOOK_DIR / "executed"):
            return _report(nbs, _batch(nbs, args), args)
    except BatchRunningError as e:
        print(f"[reproduce] {e}", file=sys.stderr)
        return 2


def _batch(nbs: list[Path], args: argparse.Namespace) -> list[dict]:
    """Execute (or, with ``--collect``, read the stored summary of) every notebook of the batch: one
    row each."""
    rows = []
    for nb in nbs:
        summary = results.DEFAULT_ROOT / "summary" / f"{nb.stem}.{args.scale}.json"
        if args.collect:
            info = json.loads(summary.read_text()) if summary.exists() else {}
            commit = info.get("commit", "?")[:7]
            status = f"stored (commit {commit})" if info else "no stored summary"
            rows.append({
                "notebook": nb.stem, "status": status, "seconds": info.pop("seconds", float("nan")),
                **info
            })
            continue
        print(f"[reproduce] {nb.name} at scale={args.scale} device={args.device} ...", flush=True)
        why = too_long(nb, args.scale, args.device, args.dataset) if args.train else None
        if why is not None:
            print(f"[reproduce] {why}", flush=True)
            rows.append({"notebook": nb.stem, "status": "not started (estimated > 1 h on a CPU; "
                                                        "--allow-long)",
                         "seconds": float("nan")})
            continue
        if args.train:
            t0 = time.monotonic()
            pretrain(nb, args.scale, args.device, args.dataset,
                     default_jobs(args.device) if args.jobs is None else args.jobs)
            pre = time.monotonic() - t0
        status, secs = execute_logged(nb, args.scale, args.device, args.dataset,
                                      NOTEBOOK_DIR / "executed" / args.scale, train=args.train)
        secs += pre if args.train else 0.0
        if args.write_back and status == "ok":
            try:
                if kept := write_back(NOTEBOOK_DIR / "executed" / args.scale / nb.name, nb):
                    print(f"[reproduce] {nb.name} had uncommitted changes: its copy before the "
                          f"write-back is {kept}")
            except (ValueError, OSError) as e:
                status = f"FAILED (write-back: {e})"
        info = json.loads(summary.read_text()) if summary.exists() and status == "ok" else {}
        # wall time is printed, not stored: an unchanged batch leaves the files unchanged
        info.pop("seconds", None)
        rows.append({"notebook": nb.stem, "status": status, "seconds": secs, **info})
        print(f"[reproduce] {nb.name}: {status} in {secs / 60:.1f} min", flush=True)
    return rows


def _report(nbs: list[Path], rows: list[dict], args: argparse.Namespace) -> int:
    """Write the batch's summary and claims pages (the committed ones only for a whole batch) and
    print its end."""
    at = scale_of(args.scale)
    progress = campaign_progress(args.scale, "cuda" if at.gpu else args.device)  # GPU scale: GPU-h
    text = summarize(rows, args.scale, progress) + _ledger(args.scale, args.only)
    ok = args.collect or all(r["status"] == "ok" or r["status"].startswith("skipped") for r in rows)
    whole = ok and len(nbs) == len(notebooks())
    path = results.DEFAULT_ROOT / f"summary-{args.scale}{'' if whole else '.partial'}.md"
    atomic_write_text(path, text)
    atomic_write_text(results.DEFAULT_ROOT / f"claims-{args.scale}{'' if whole else '.partial'}.md",
                      claims_overview(rows, args.scale))
    if whole and at.readme and results.DEFAULT_ROOT == REPO / "results":  # the README's first page
        write_readme(REPO / "README.md", readme_block(load_claims(args.scale), args.scale))
    print("\n" + "\n".join(text.splitlines()[:len(rows) + 4]) + "\n\nFindings by paper (the "
                                                                "papers' claims; "
          "the project's controls apart):\n" + "\n".join(findings(rows, args.scale))
          + f"\n\nClaims, numbers and tables: {path}")
    if whole and not args.collect and (old := stale_figures(rows, FIGURES / args.scale)):
        print(f"[reproduce] figures/{args.scale}/ holds {len(old)} figure(s) no notebook drew from "
              "the current records and plans (an earlier plan's, or runs no longer planned): "
              f"{', '.join(old)}; remove them (git rm figures/{args.scale}/<name>.*) so that no "
              "reader takes them for current results.")
    if not whole:
        print(f"{results.DEFAULT_ROOT / f'summary-{args.scale}.md'} is left as it was ("
              f"{'a notebook failed' if not ok else 'not every notebook was in this batch'}); "
              f"`python -m fedlib.companion.reproduce --collect --scale {args.scale}` rebuilds it "
              "from every notebook's stored summary.")
    return 0 if ok else 1

if __name__ == "__main__":
    sys.exit(main())
