"""Accuracy check of the opt-in numerics switches against float32 (issue #4, item 3).

    python benchmarks/precision.py                          # CPU: FedIntR setup on Fashion-MNIST, shortened
    python benchmarks/precision.py --device cuda --paper    # GPU: the paper's 100 rounds x 10 local epochs

FedAvg in the FedIntR setup (Fashion-MNIST, FedIntR CNN, 10 clients, Dirichlet β=0.5, batch 512, SGD lr 0.01,
momentum 0.9, wd 1e-5) is trained once per variant with the same seed:

* ``fp32``            — the reference;
* ``bf16``            — ``Config(precision="bf16")``: forward pass under bf16 autocast;
* ``fp32+compile``    — ``Config(compile=True)`` with the vectorized executor (``--compile``; slow to warm up on a
  CPU, meant for a GPU);
* ``fp32 sequential`` / ``fp32 vectorized`` — float32 with the executor ``auto`` did not pick (``--other-executor``):
  the two executors differ only by float rounding, so this row is the gap that rounding alone opens over the run
  (SGD amplifies it), the yardstick for the other rows' gaps.

It prints each variant's final test accuracy, the difference to float32, the largest per-round accuracy gap and the
wall time, so a switch's effect on results is recorded next to its speed. Runs are not stored in ``results/``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fedlib.config import preset  # noqa: E402
from fedlib.data import load_dataset  # noqa: E402
from fedlib.engine import Engine  # noqa: E402
from fedlib.results import device_name, git_commit  # noqa: E402
from fedlib.vectorized import VectorizedExecutor  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--paper", action="store_true", help="the paper's 100 rounds x 10 local epochs (GPU)")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--compile", action="store_true", help="also run fp32 with torch.compile (vectorized)")
    ap.add_argument("--other-executor", action="store_true",
                    help="also run fp32 with the executor auto does not pick (the float-rounding yardstick)")
    args = ap.parse_args()
    scale = "paper" if args.paper else "quick"
    over = {} if args.paper else dict(rounds=args.rounds, local_epochs=args.epochs)
    base = preset("fedintr", scale, device=args.device, **over)
    data = load_dataset("fmnist", device=args.device)
    variants = {"fp32": base, "bf16": base.replace(precision="bf16")}
    if args.other_executor:
        other = "sequential" if torch.device(args.device).type == "cuda" else "vectorized"
        variants[f"fp32 {other}"] = base.replace(executor=other)
    if args.compile:
        variants["fp32+compile"] = base.replace(compile=True, executor="vectorized")
    print(f"fedlib precision check — {datetime.date.today()}, commit {git_commit()}, torch {torch.__version__}, "
          f"{device_name(args.device)}; "
          f"FedAvg, FedIntR setup on Fashion-MNIST, {base.rounds} rounds x {base.local_epochs} local epochs, "
          f"seed {base.seed}\n")
    hist = {}
    secs = {}
    for name, cfg in variants.items():
        eng = Engine(cfg, data=data, progress=False)
        t0 = time.perf_counter()
        hist[name] = eng.run()
        secs[name] = time.perf_counter() - t0
        ex = "vectorized" if isinstance(eng._executor, VectorizedExecutor) else "sequential"
        print(f"  {name}: {ex} executor, {secs[name]:.0f} s", flush=True)
    ref = [h["test_acc"] for h in hist["fp32"]]
    print("\n| variant | final test acc | Δ vs fp32 (pp) | max per-round abs Δ (pp) | wall s | speed vs fp32 |")
    print("|:--|--:|--:|--:|--:|--:|")
    for name, h in hist.items():
        acc = [e["test_acc"] for e in h]
        gap = max(abs(a - b) for a, b in zip(acc, ref))
        print(f"| {name} | {acc[-1]:.4f} | {100 * (acc[-1] - ref[-1]):+.2f} | {100 * gap:.2f} | {secs[name]:.0f} | "
              f"{secs['fp32'] / secs[name]:.2f}x |")


if __name__ == "__main__":
    main()
