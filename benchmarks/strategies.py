"""Cost of the local-regularization strategies: seconds per round of local training, as a ratio to FedAvg's.

    python benchmarks/strategies.py [--frac 0.1] [--epochs 10] [--reps 2] [--device cpu|cuda]
                                    [--executors sequential,vectorized] [--flops]

FedCKA's setup (a) of ``benchmarks/engine.py`` (simple CNN, 10 clients, Dirichlet β = 5, batch 128, SGD lr 0.01,
no augmentation, synthetic CIFAR-shaped data) with FedCKA's 10 local epochs per round, on ``--frac`` of the 50,000
images. Each strategy trains the same round in both executors: a first round (1 local epoch, untimed) gives every
client a previous local model and SCAFFOLD non-zero control variates, then round 2's local training of all ten
clients (the executor call only: no aggregation, no evaluation) is timed ``--reps`` times, round-robin over
strategies and executors so that background load hits them alike. The ratio is the median over repeats of
(strategy's time / FedAvg's time in the same repeat and executor). FedIntR needs per-layer projection heads: it
runs the same CNN with ``intr_heads=True`` (256-d heads on conv1, conv2, fc1, fc2).

Targets (the FedCKA paper, Table 4, measured 1.04 / 1.04 / 1.78 / 1.90 for FedProx / SCAFFOLD / MOON / FedCKA on
a Titan V): FedProx, SCAFFOLD ≤ 1.05; MOON ≤ 1.6; FedCKA (M = 2, linear CKA) ≤ 1.15; FedIntR ≤ 1.6. The reference
models' taps are computed once per client and round (``fedlib/executors/refcache.py``), so the ratios of MOON,
FedCKA and FedIntR fall as the number of local epochs grows.

``--flops`` also counts the floating-point operations of one client's round (``torch.utils.flop_counter``:
matmuls and convolutions, forward and backward, reference taps included) in the sequential executor, as a ratio to
FedAvg's: the cost each method's equations imply, independent of the machine and of background load.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fedlib.config import Config  # noqa: E402
from fedlib.data import load_dataset  # noqa: E402
from fedlib.companion.results import device_name, git_commit  # noqa: E402
from fedlib.companion.timing import prepare_round  # noqa: E402

STRATEGIES = {  # label: (strategy, strategy_kw, model_kw, target ratio)
    "FedAvg": ("fedavg", {}, {}, None),
    "FedProx": ("fedprox", {"mu": 0.01}, {}, 1.05),
    "SCAFFOLD": ("scaffold", {}, {}, 1.05),
    "MOON": ("moon", {"mu": 1.0}, {}, 1.6),
    "FedCKA (M=2, linear)": ("fedcka", {"mu": 3.0}, {}, 1.15),
    "FedIntR": ("fedintr", {"mu": 10.0}, {"intr_heads": True}, 1.6),
}


def setup_a(device: str, epochs: int) -> Config:
    """``benchmarks/engine.py``'s setup (a) with ``epochs`` local epochs."""
    return Config(dataset="synthetic", model="simple_cnn", partition="dirichlet", partition_kw={"beta": 5.0},
                  num_clients=10, batch_size=128, lr=0.01, momentum=0.9, weight_decay=1e-5, augment="none",
                  rounds=2, local_epochs=epochs, device=device, seed=0)



def flop_ratios(base: Config, data) -> dict[str, float]:
    """FLOPs of client 0's round-2 local training per strategy (sequential executor), divided by FedAvg's."""
    from torch.utils.flop_counter import FlopCounterMode

    flops = {}
    for label, (name, kw, model_kw, _) in STRATEGIES.items():
        cfg = base.replace(strategy=name, strategy_kw=kw, model_kw=model_kw, executor="sequential")
        eng, ctxs, starts = prepare_round(cfg, data)
        with FlopCounterMode(display=False) as counter:
            eng.train(ctxs[:1], starts[:1])
        flops[label] = counter.get_total_flops()
    return {label: f / flops["FedAvg"] for label, f in flops.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frac", type=float, default=0.1, help="fraction of setup (a)'s 50,000 images (default 0.1)")
    ap.add_argument("--epochs", type=int, default=10, help="local epochs per round (FedCKA: 10)")
    ap.add_argument("--reps", type=int, default=2, help="timed repeats (default 2)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--executors", default="sequential,vectorized")
    ap.add_argument("--flops", action="store_true", help="also count each method's FLOPs relative to FedAvg's")
    args = ap.parse_args()
    dev = torch.device(args.device)
    executors = [e.strip() for e in args.executors.split(",")]
    data = load_dataset("synthetic", n_train=int(50_000 * args.frac), n_test=1000, signal=2.0)
    base = setup_a(args.device, args.epochs)
    print(f"fedlib strategy benchmark — {datetime.date.today()}, commit {git_commit()}, torch {torch.__version__}, "
          f"{device_name(dev)}; setup (a), {len(data.y_train)} images, {args.epochs} local epochs, "
          f"{args.reps} repeats\n", flush=True)
    t_all = time.perf_counter()
    runs = {}
    for label, (name, kw, model_kw, _) in STRATEGIES.items():
        for ex in executors:
            cfg = base.replace(strategy=name, strategy_kw=kw, model_kw=model_kw, executor=ex)
            runs[label, ex] = prepare_round(cfg, data)
            assert runs[label, ex][0].executor.name == ex, f"{label}: the {ex} executor did not take this strategy"
    times: dict[tuple[str, str], list[float]] = {k: [] for k in runs}
    for _ in range(args.reps):
        for key, (eng, ctxs, starts) in runs.items():
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            t0 = time.perf_counter()
            eng.train(ctxs, starts)
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            times[key].append(time.perf_counter() - t0)
    fl = flop_ratios(base, data) if args.flops else {}
    print("| strategy | executor | s / round | × FedAvg | target | FLOPs × FedAvg | runs (s) |")
    print("|:--|:--|--:|--:|--:|--:|:--|")
    for (label, ex), ts in times.items():
        base_ts = times["FedAvg", ex]
        ratio = statistics.median(t / b for t, b in zip(ts, base_ts))
        target = STRATEGIES[label][3]
        mark = "" if target is None else (f"≤ {target:.2f} " + ("✓" if ratio <= target else "✗"))
        flops = f"{fl[label]:.2f}" if label in fl else "—"
        print(f"| {label} | {ex} | {statistics.median(ts):.2f} | {ratio:.2f} | {mark} | {flops} | "
              f"{' / '.join(f'{t:.2f}' for t in ts)} |", flush=True)
    print(f"\ntotal benchmark time {time.perf_counter() - t_all:.0f} s")


if __name__ == "__main__":
    main()
