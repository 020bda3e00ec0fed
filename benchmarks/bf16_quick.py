"""bf16 against fp32 for the strategies with projection heads (FedIntR, MOON) and FedAvg, in FedIntR's quick setup.

    python benchmarks/bf16_quick.py [--reps 5] [--threads 1]

The quick setup at one local epoch (FedIntR CNN, Fashion-MNIST, 12,000 training images, 10 clients, Dirichlet
β = 0.5, batch 64; one thread, as a campaign worker trains): each (strategy, precision) runs two rounds and its
second round's local-training time (``train_time_s``: the first round holds the warm-up and MOON's and FedIntR's
first-round branch, no previous model yet) is recorded; repeats are interleaved over every row, so load on the
machine hits them alike. The table gives the median seconds and the median of the per-repeat bf16 / fp32 ratios.

bf16 is adopted for a comparison only at >= 1.25x faster and training the same, and then for every run of that
comparison (precision is part of a run's key); its accuracy is measured only when the speed passes that bar.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fedlib.data import load_dataset  # noqa: E402
from fedlib.engine import Engine  # noqa: E402
from fedlib.companion.papers import preset  # noqa: E402
from fedlib.companion.provenance import device_name, git_commit  # noqa: E402

STRATEGIES = {"FedAvg": ("fedavg", {}), "MOON (μ=1)": ("moon", {"mu": 1.0}), "FedIntR (μ=10)": ("fedintr", {"mu": 10.0})}


def round_seconds(strategy: str, kw: dict, precision: str, data) -> float:
    """The second round's local-training seconds of ``strategy`` in FedIntR's quick setup at one local epoch."""
    cfg = preset("fedintr", "quick", strategy=strategy, strategy_kw=kw, rounds=2, local_epochs=1, eval_every=2,
                 precision=precision, executor="sequential", checkpoint_every=0)
    eng = Engine(cfg, data=data, progress=False)
    eng.run()
    return float(eng.history[1]["train_time_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = preset("fedintr", "quick")
    data = load_dataset("fmnist").subset(cfg.n_train, cfg.n_test)
    print(f"bf16 vs fp32, FedIntR's quick setup at 1 local epoch — commit {git_commit()}, torch {torch.__version__}, "
          f"{device_name('cpu')}, threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}, "
          f"reps={args.reps} (interleaved)\n")
    t0 = time.perf_counter()
    secs = {(s, p): [] for s in STRATEGIES for p in ("fp32", "bf16")}
    for rep in range(args.reps):
        for name, (strategy, kw) in STRATEGIES.items():
            for p in ("fp32", "bf16"):
                secs[(name, p)].append(round_seconds(strategy, kw, p, data))
        print(f"  repeat {rep + 1}/{args.reps} done ({time.perf_counter() - t0:.0f} s)", flush=True)
    print("\n| strategy | fp32 s / round (median) | bf16 s / round (median) | bf16 / fp32 time: median | min-max |")
    print("|:--|--:|--:|--:|:--|")
    for name in STRATEGIES:
        f, b = secs[(name, "fp32")], secs[(name, "bf16")]
        ratios = [y / x for x, y in zip(f, b)]
        print(f"| {name} | {statistics.median(f):.2f} | {statistics.median(b):.2f} | {statistics.median(ratios):.2f} | "
              f"{min(ratios):.2f}-{max(ratios):.2f} |")
    print(f"\nAdopt bf16 only at a time ratio <= 0.80 (>= 1.25x faster). Total {time.perf_counter() - t0:.0f} s.")


if __name__ == "__main__":
    main()
