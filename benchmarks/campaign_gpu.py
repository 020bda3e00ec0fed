"""The paper-scale speed targets, measured with the defaults a notebook or the campaign gets (no flags).

    python benchmarks/campaign_gpu.py --device cuda                 # the three targets on a GPU (a few minutes)
    python benchmarks/campaign_gpu.py --device cpu --quick          # the same code path on a CPU, tiny (seconds)

(a) FedAvg in FedIntR's setup on Fashion-MNIST at paper scale (100 rounds x 10 local epochs, batch 512): the whole
    run, default config (``executor="auto"``, ``cuda_graph=None``: the CUDA graph where it applies). Target on one
    H100: <= 50 s (a plain single model at batch 5120 does the same 60 M sample-passes in about 37 s).
(b) MOON, FedCKA and FedIntR per round against FedAvg, same setup (``--rounds-b`` timed rounds after one untimed
    round). Target: <= 2x FedAvg each.
(c) FedIntR Table I's Fashion-MNIST column at the best mu, 3 seeds of FedAvg, FedProx, MOON, FedCKA and FedIntR
    (15 runs): projected from (a) and (b)'s seconds per round. Target: <= 25 min on one H100. The runs themselves
    are the campaign's: ``python -m fedlib.companion.campaign run --scale paper --device cuda --only 05 01 --budget 25m``.

Prints one table; nothing is stored in results/.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fedlib.engine import Engine  # noqa: E402
from fedlib.companion.papers import preset  # noqa: E402
from fedlib.companion.results import device_name, git_commit  # noqa: E402

METHODS = {"FedAvg": ("fedavg", {}), "FedProx": ("fedprox", {"mu": 0.001}), "MOON": ("moon", {}),
           "FedCKA": ("fedcka", {}), "FedIntR": ("fedintr", {})}


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="2 rounds of 1 epoch on 1200 images: the code path only")
    ap.add_argument("--rounds-b", type=int, default=3, help="timed rounds per method in (b)")
    a = ap.parse_args()
    shrink = dict(rounds=2, local_epochs=1, n_train=1200, n_test=400) if a.quick else {}
    base = preset("fedintr", "paper", device=a.device, **shrink)
    print(f"# campaign speed targets: {device_name(a.device)}, torch {torch.__version__}, commit {git_commit()}"
          + (" — QUICK (not paper scale)" if a.quick else ""))

    eng = Engine(base, progress=False)  # (a): the whole run, data already on the device
    sync(a.device)
    t = time.perf_counter()
    eng.run()
    sync(a.device)
    wall = time.perf_counter() - t
    acc = statistics.median([h["test_acc"] for h in eng.history[-10:]])
    per_round = {"FedAvg": statistics.median(h["time_s"] for h in eng.history[1:] or eng.history)}
    print(f"\n(a) FedAvg, {base.rounds} rounds x {base.local_epochs} epochs: {wall:.1f} s "
          f"({eng.executor_name}{'+graph' if getattr(eng.executor, 'capture', False) else ''}), test acc "
          f"{100 * acc:.2f} % (median of the last 10 rounds; FedIntR Table I 88.90 %); target <= 50 s on an H100\n")

    print("| method | executor | s / round | vs FedAvg | target |\n|:--|:--|--:|--:|:--|")
    print(f"| FedAvg | {eng.executor_name} | {per_round['FedAvg']:.3f} | 1.00x | |")
    for name, (strategy, kw) in METHODS.items():
        if name == "FedAvg":
            continue
        e = Engine(base.replace(strategy=strategy, strategy_kw=kw, rounds=1 + a.rounds_b), progress=False)
        e.run_round(0)  # untimed: set-up, capture
        e.round = 1
        ts = []
        for r in range(1, 1 + a.rounds_b):
            sync(a.device)
            t = time.perf_counter()
            e.history.append(e.run_round(r))
            sync(a.device)
            ts.append(time.perf_counter() - t)
        per_round[name] = statistics.median(ts)
        target = "<= 2x" if name in ("MOON", "FedCKA", "FedIntR") else ""
        print(f"| {name} | {e.executor_name}{'+graph' if getattr(e.executor, 'capture', False) else ''} | "
              f"{per_round[name]:.3f} | {per_round[name] / per_round['FedAvg']:.2f}x | {target} |")

    rounds = preset("fedintr", "paper").rounds
    total = 3 * sum(rounds * s for s in per_round.values())
    print(f"\n(c) FedIntR Table I, Fashion-MNIST column, 3 seeds x {len(per_round)} methods = "
          f"{3 * len(per_round)} runs: {total / 60:.1f} min projected from the seconds per round above "
          f"({rounds} rounds each; set-up not counted); target <= 25 min on one H100")


if __name__ == "__main__":
    main()
