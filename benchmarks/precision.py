"""Accuracy and speed of the opt-in execution switches against float32.

    python benchmarks/precision.py                                  # CPU: FedIntR setup on Fashion-MNIST, shortened
    python benchmarks/precision.py --device cuda --paper \\
        --variants fp32,graph,bf16+graph,compile --time-limit 90 --out prec.json   # GPU: 100 rounds x 10 epochs
    python benchmarks/precision.py --table prec.json [more.json]    # the table again, from the stored histories

FedAvg in the FedIntR setup (Fashion-MNIST, FedIntR CNN, 10 clients, Dirichlet β=0.5, batch 512, SGD lr 0.01,
momentum 0.9, wd 1e-5) is trained once per variant with the same seed:

* ``fp32``        — the reference (executor ``auto``: sequential on the CPU, vectorized on a GPU; eager steps,
  ``cuda_graph=False``);
* ``bf16``        — ``Config(precision="bf16")``: forward pass under bf16 autocast (eager);
* ``graph``       — ``Config(cuda_graph=True)``: the vectorized executor's fixed-shape steps replayed from a CUDA
  graph (same training up to float rounding);
* ``bf16+graph``  — both;
* ``compile``     — ``Config(compile=True)`` with the vectorized executor (slow to warm up; meant for a GPU);
* ``other``       — float32 with the executor ``auto`` did not pick: the two executors differ only by float rounding,
  so this row is the gap that rounding alone opens over the run (SGD amplifies it), the yardstick for the others.

Each variant stops after the first round that ends past ``--time-limit`` seconds (a slow variant then covers the
first rounds only; it is compared with the reference on the rounds both ran, and its full-run time is
extrapolated from its seconds per round, marked ``~``). With ``--out`` every round's entry is written at once
(atomically), so an interrupted run keeps what finished. The table gives each variant's last test accuracy, the
reference's at the same round, the largest per-round gap, the wall time and the speed against the reference.
Runs are not stored in ``results/``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fedlib.config import Config  # noqa: E402
from fedlib.companion.papers import preset  # noqa: E402
from fedlib.data import load_dataset  # noqa: E402
from fedlib.engine import Engine  # noqa: E402
from fedlib.companion.results import device_name, git_commit  # noqa: E402

VARIANTS = ("fp32", "bf16", "graph", "bf16+graph", "compile", "other")


def variant_config(name: str, base: Config) -> Config:
    if name == "fp32":
        return base.replace(cuda_graph=False)
    if name == "bf16":
        return base.replace(precision="bf16", cuda_graph=False)
    if name == "graph":
        return base.replace(executor="vectorized", cuda_graph=True)
    if name == "bf16+graph":
        return base.replace(executor="vectorized", cuda_graph=True, precision="bf16")
    if name == "compile":
        return base.replace(executor="vectorized", compile=True)
    if name == "other":
        return base.replace(executor="sequential" if torch.device(base.device).type == "cuda" else "vectorized")
    raise ValueError(f"Unknown variant {name!r}; valid variants: {', '.join(VARIANTS)}.")


def _write(path: Path | None, doc: dict[str, Any]) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, path)


def table(doc: dict[str, Any]) -> str:
    runs = doc["variants"]
    ref_name = "fp32" if "fp32" in runs else next(iter(runs))
    ref = {e["round"]: e["test_acc"] for e in runs[ref_name]["history"]}
    ref_spr = runs[ref_name]["wall_s"] / max(len(runs[ref_name]["history"]), 1)
    total = doc["rounds"]
    lines = [f"| variant | executor | rounds run | test acc | {ref_name} at that round | Δ (pp) | last common round: "
             f"acc, {ref_name}, Δ (pp) | max per-round abs Δ (pp) | wall s | s / round | {total}-round s | "
             f"speed vs {ref_name} |",
             "|:--|:--|--:|--:|--:|--:|:--|--:|--:|--:|--:|--:|"]
    for name, r in runs.items():
        h = r["history"]
        if not h:
            lines.append(f"| {name} | {r['executor']} | 0 | | | | | | | | | |")
            continue
        last = h[-1]
        spr = r["wall_s"] / len(h)
        common = [e for e in h if e["round"] in ref]
        gap = max((abs(e["test_acc"] - ref[e["round"]]) for e in common), default=float("nan"))
        at = ref.get(last["round"])
        d = f"{100 * (last['test_acc'] - at):+.2f}" if at is not None else ""
        full = f"{r['wall_s']:.1f}" if len(h) == total else f"~{spr * total:.0f}"
        c = common[-1] if common else None
        lc = (f"{c['round']}: {c['test_acc']:.4f}, {ref[c['round']]:.4f}, "
              f"{100 * (c['test_acc'] - ref[c['round']]):+.2f}") if c else ""
        lines.append(f"| {name} | {r['executor']} | {len(h)} | {last['test_acc']:.4f} | "
                     f"{'' if at is None else f'{at:.4f}'} | {d} | {lc} | {100 * gap:.2f} | {r['wall_s']:.1f} | "
                     f"{spr:.3f} | {full} | {ref_spr / spr:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--paper", action="store_true", help="the paper's 100 rounds x 10 local epochs (GPU)")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--variants", default="fp32,bf16", help=f"comma-separated, from {', '.join(VARIANTS)}")
    ap.add_argument("--compile", action="store_true", help="add the 'compile' variant")
    ap.add_argument("--other-executor", action="store_true", help="add the 'other' variant")
    ap.add_argument("--time-limit", type=float, default=None, help="seconds per variant (stops after that round)")
    ap.add_argument("--out", type=Path, default=None, help="write every round's results to this JSON file")
    ap.add_argument("--table", type=Path, nargs="+", default=None,
                    help="print the table of stored --out files (their variants merged) and exit")
    args = ap.parse_args()
    if args.table is not None:
        docs = [json.loads(p.read_text()) for p in args.table]
        doc = {**docs[0], "variants": {k: v for d in docs for k, v in d["variants"].items()}}
        print("\n".join(dict.fromkeys(d["header"] for d in docs)) + "\n\n" + table(doc))
        return
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    names += [v for v, on in (("other", args.other_executor), ("compile", args.compile)) if on and v not in names]
    scale = "paper" if args.paper else "quick"
    over = {} if args.paper else dict(rounds=args.rounds, local_epochs=args.epochs)
    base = preset("fedintr", scale, device=args.device, **over)
    variants = {n: variant_config(n, base) for n in names}
    data = load_dataset("fmnist", device=args.device)
    header = (f"fedlib precision check — {datetime.date.today()}, commit {git_commit()}, torch {torch.__version__}, "
              f"{device_name(args.device)}; FedAvg, FedIntR setup on Fashion-MNIST, {base.rounds} rounds x "
              f"{base.local_epochs} local epochs, seed {base.seed}"
              + (f", at most ~{args.time_limit:.0f} s per variant" if args.time_limit else ""))
    print(header + "\n", flush=True)
    doc: dict[str, Any] = {"header": header, "rounds": base.rounds, "variants": {}}
    for name, cfg in variants.items():
        eng = Engine(cfg, data=data, progress=False)
        run = doc["variants"][name] = {"executor": eng.executor_name, "config": cfg.to_dict(), "history": [],
                                       "wall_s": 0.0}
        t0 = time.perf_counter()
        for rnd in range(cfg.rounds):
            entry = eng.run_round(rnd)
            run["history"].append(entry)
            run["wall_s"] = time.perf_counter() - t0
            _write(args.out, doc)
            if args.time_limit is not None and run["wall_s"] > args.time_limit:
                break
        h = run["history"]
        print(f"  {name}: {run['executor']} executor, {len(h)} rounds in {run['wall_s']:.1f} s, "
              f"test acc {h[-1]['test_acc']:.4f}", flush=True)
    print("\n" + table(doc))


if __name__ == "__main__":
    main()
