"""One full federated round (local training, aggregation, evaluation) of two versions of fedlib, interleaved.

    python benchmarks/round_versus.py --base ../wt-base [--new .] [--rounds 6] [--setup c] [--quick]

Two worker processes, one importing each tree (``PYTHONPATH``), build the same setup from their own
``benchmarks/engine.py`` (default (c): Fashion-MNIST, FedIntR CNN, 100 clients, 20 % sampled, batch 512, one local
epoch), evaluated on the whole test set (10,000 images for Fashion-MNIST, as FedIntR's runs are; ``engine.py``
keeps 1,000 since it times local training only), run round 1 untimed (warm-up), then time ``Engine.run_round`` for rounds 2, 3, … on command, alternating
which version goes first. Both versions train the same clients on the same batches each round, so a round's two
times compare like with like; the speed-up is the median of the per-round ratios (old time / new time), which
cancels a drift in the machine's speed. ``train_time_s`` is the part before evaluation (local training and
aggregation).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

WORKER = r"""
import importlib.util, json, sys, time, torch
spec = importlib.util.spec_from_file_location("bench_engine", sys.argv[1] + "/benchmarks/engine.py")
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
from fedlib.engine import Engine
from fedlib.data import load_dataset
name, cfg, data_fn = [s for s in mod.setups(sys.argv[2] == "1", "cpu") if s[0][1] == sys.argv[3]][0]
data = data_fn()
if cfg.dataset == "fmnist":  # the whole test set
    full = load_dataset("fmnist")
    data = full.subset(len(data.y_train), None) if len(data.y_train) < len(full.y_train) else full
eng = Engine(cfg.replace(rounds=int(sys.argv[4]) + 1), data=data, progress=False)
eng.run_round(0)
print(json.dumps({"ready": name, "test": len(data.y_test), "file": sys.modules["fedlib"].__file__}), flush=True)
for line in sys.stdin:
    r = int(line)
    t0 = time.perf_counter()
    e = eng.run_round(r)
    t = time.perf_counter() - t0
    print(json.dumps({"s": t, "train_s": e["train_time_s"], "acc": e.get("test_acc"), "loss": e.get("test_loss")}),
          flush=True)
"""


def worker(tree: str, quick: bool, setup: str, rounds: int) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    p = subprocess.Popen([sys.executable, "-c", WORKER, os.path.abspath(tree), "1" if quick else "0", setup,
                          str(rounds)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                         cwd=os.path.abspath(tree))
    return p


def ask(p: subprocess.Popen, msg: str | None = None) -> dict:
    if msg is not None:
        p.stdin.write(msg + "\n")
        p.stdin.flush()
    line = p.stdout.readline()
    if not line:
        raise RuntimeError(f"worker exited with code {p.wait()}")
    return json.loads(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the old tree (a git worktree of the commit to compare with)")
    ap.add_argument("--new", default=".", help="the new tree (default: this one)")
    ap.add_argument("--rounds", type=int, default=6, help="timed rounds (default 6)")
    ap.add_argument("--setup", default="c", choices=["a", "b", "c"])
    ap.add_argument("--quick", action="store_true", help="20%% of the training data")
    args = ap.parse_args()
    procs = {"old": worker(args.base, args.quick, args.setup, args.rounds),
             "new": worker(args.new, args.quick, args.setup, args.rounds)}
    for k, p in procs.items():
        print(k, ask(p), flush=True)
    print(f"\nload average at start {os.getloadavg()[0]:.1f}\n")
    print("| round | first | old s | new s | old / new | old train s | new train s | old acc | new acc |")
    print("|--:|:--|--:|--:|--:|--:|--:|--:|--:|")
    ratios, train_ratios = [], []
    for r in range(1, args.rounds + 1):
        order = ["old", "new"] if r % 2 else ["new", "old"]
        out = {k: ask(procs[k], str(r)) for k in order}
        o, n = out["old"], out["new"]
        ratios.append(o["s"] / n["s"])
        train_ratios.append(o["train_s"] / n["train_s"])
        print(f"| {r + 1} | {order[0]} | {o['s']:.3f} | {n['s']:.3f} | {ratios[-1]:.2f}x | {o['train_s']:.3f} | "
              f"{n['train_s']:.3f} | {o['acc']:.4f} | {n['acc']:.4f} |", flush=True)
    for p in procs.values():
        p.stdin.close()
        p.wait()
    print(f"\nround (training + aggregation + evaluation), old / new: median {statistics.median(ratios):.2f}x; "
          f"training + aggregation alone: {statistics.median(train_ratios):.2f}x; load average at end "
          f"{os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
