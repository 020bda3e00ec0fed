"""Evaluated and reference models in the model's memory format: a quick round with and without it, on the CPU.

    python benchmarks/layout.py [--reps 3] [--threads 1] [--only fedavg moon ...]

On the CPU the model trains in channels_last, but averaged (or CRSM-mixed) weights come back contiguous, and a
convolution's output takes its weight's format: evaluated as they came, the global model ran every conv and
max-pool in NCHW (max-pooling ~10x slower), and so did the reference taps of MOON, FedIntR and FedCKA (the global
and previous models over every client's samples, once a round). ``fedlib.executors.fast.layout.in_layout`` puts them
back in the model's strides. Here each setup runs two rounds of its quick preset (one thread, as a campaign worker
trains) both ways, interleaved over ``--reps`` repeats: "before" replaces ``in_layout`` in the engine by the
identity. The table gives the second round's seconds (training with the reference tables, and the whole round with
its evaluations), the median ratio before / after, and how far the two ways' final global models are apart (0: the
same numbers; training itself never changes, but NCHW and channels_last convolutions round differently, so
reference taps and everything after them can differ in the last bits).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import fedlib.engine as engine  # noqa: E402
from fedlib.data import load_dataset  # noqa: E402
from fedlib.companion.papers import preset  # noqa: E402
from fedlib.companion.provenance import device_name, git_commit  # noqa: E402

# name: (preset, strategy, strategy_kw, label)
SETUPS = {
    "fedavg": ("fedintr", "fedavg", {}, "FedAvg, FedIntR's setup"),
    "moon": ("fedintr", "moon", {"mu": 1.0}, "MOON (μ = 1), FedIntR's setup"),
    "fedintr": ("fedintr", "fedintr", {"mu": 10.0}, "FedIntR (μ = 10), FedIntR's setup"),
    "fedcka": ("fedcka", "fedcka", {"mu": 3.0}, "FedCKA (μ = 3), FedCKA's setup"),
    "fedbabu": ("fedshibu", "fedbabu", {}, "FedBABU, FedSHIBU's setup (s = 5)"),
}


def two_rounds(name: str, data: dict, before: bool) -> tuple[float, float, dict]:
    """(train seconds, round seconds) of the second round, and the final global model."""
    paper, strategy, kw, _ = SETUPS[name]
    real = engine.in_layout
    engine.in_layout = (lambda p, like: dict(p)) if before else real
    try:
        cfg = preset(paper, "quick", strategy=strategy, strategy_kw=kw, rounds=2, checkpoint_every=0,
                     executor="sequential")
        if paper not in data:
            data[paper] = load_dataset("fmnist").subset(cfg.n_train, cfg.n_test)
        eng = engine.Engine(cfg, data=data[paper], progress=False)
        h = eng.run()
    finally:
        engine.in_layout = real
    return float(h[1]["train_time_s"]), float(h[1]["time_s"]), eng.global_params


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", nargs="*", default=list(SETUPS), choices=list(SETUPS))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"evaluated/reference models in the model's layout — commit {git_commit()}, torch {torch.__version__}, "
          f"{device_name('cpu')}, threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}, "
          f"reps={args.reps} (interleaved)\n", flush=True)
    data: dict = {}
    secs: dict = {(n, b): [] for n in args.only for b in (True, False)}
    gap: dict = {}
    t0 = time.perf_counter()
    for rep in range(args.reps):
        for name in args.only:
            finals = {}
            for before in (True, False):
                tr, tot, finals[before] = two_rounds(name, data, before)
                secs[(name, before)].append((tr, tot))
            gap[name] = max(gap.get(name, 0.0), max(float((finals[True][k] - finals[False][k]).abs().max())
                                                    for k in finals[True]))
        print(f"  repeat {rep + 1}/{args.reps} done ({time.perf_counter() - t0:.0f} s)", flush=True)
    print("\n| setup (quick preset) | before: train s | before: round s | after: train s | after: round s "
          "| round before / after: median | min-max | max abs Δ of the final models |")
    print("|:--|--:|--:|--:|--:|--:|:--|--:|")
    for name in args.only:
        b, a = secs[(name, True)], secs[(name, False)]
        ratios = [x[1] / y[1] for x, y in zip(b, a)]
        med = lambda v, i: statistics.median(x[i] for x in v)  # noqa: E731
        print(f"| {SETUPS[name][3]} | {med(b, 0):.2f} | {med(b, 1):.2f} | {med(a, 0):.2f} | {med(a, 1):.2f} "
              f"| {statistics.median(ratios):.2f}x | {min(ratios):.2f}-{max(ratios):.2f} | {gap[name]:.1e} |")


if __name__ == "__main__":
    main()
