"""The reference tables' forward chunk: seconds to build one round's tables at several chunk sizes.

    OMP_NUM_THREADS=1 python benchmarks/ref_chunk.py [--reps 7] [--chunks 128,256,512,1024]

MOON's, FedCKA's and FedIntR's reference models (global and previous) run once a round over every client's samples
(`fedlib.executors.refcache`, forward only, eval mode, in chunks of `_CHUNK[device]` samples). This times that pass
with the models and taps of the quick setups — FedIntR's CNN with its five projection taps (FedIntR), with
MOON's one, and the simple CNN with FedCKA's first two layers — over 12,000 Fashion-MNIST images in channels_last,
one thread as a campaign worker trains, chunk sizes interleaved within each repeat. Prints the median seconds per
chunk size and each median's ratio to the current chunk's, measured in the same repeats.

    OMP_NUM_THREADS=1 python benchmarks/ref_chunk.py --round [--reps 3] [--chunks 512]

`--round`: FedCKA (μ = 3) and MOON (μ = 10) in FedCKA's quick setup, two rounds at each chunk size (interleaved),
the second round's local-training seconds (it holds one reference pass and five local epochs).
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
from fedlib.executors import refcache  # noqa: E402
from fedlib.local import forward  # noqa: E402
from fedlib.engine import Engine  # noqa: E402
from fedlib.models import build_model  # noqa: E402
from fedlib.companion.papers import preset  # noqa: E402
from fedlib.companion.provenance import device_name, git_commit  # noqa: E402


def cases(shape: tuple[int, int, int]) -> dict[str, tuple[torch.nn.Module, dict, tuple[str, ...]]]:
    out = {}
    for name, model, taps in (("FedIntR (IntR CNN, 5 projection taps)", "intr_cnn", None),
                              ("MOON (IntR CNN, proj:fc2)", "intr_cnn", ("proj:fc2",)),
                              ("FedCKA (simple CNN, conv1-2)", "simple_cnn", ("conv1", "conv2"))):
        m = build_model(model, shape, 10).to(memory_format=torch.channels_last).eval()
        params = {k: v.detach() for k, v in [*m.named_parameters(), *m.named_buffers()]}
        out[name] = (m, params, taps or tuple(m.intr_taps))
    return out


@torch.no_grad()
def pass_seconds(model, params, taps, x: torch.Tensor, chunk: int) -> float:
    t0 = time.perf_counter()
    for lo in range(0, len(x), chunk):
        forward(model, params, x[lo:lo + chunk], taps, False)
    return time.perf_counter() - t0


def round_seconds(strategy: str, mu: float, chunk: int, data) -> float:
    refcache._CHUNK["cpu"] = chunk
    cfg = preset("fedcka", "quick", dataset="fmnist", strategy=strategy, strategy_kw={"mu": mu}, rounds=2, eval_every=2,
                 executor="sequential", checkpoint_every=0)
    eng = Engine(cfg, data=data, progress=False)
    eng.run()
    return float(eng.history[1]["train_time_s"])


def rounds(a, chunks: list[int], current: int) -> None:
    cfg = preset("fedcka", "quick", dataset="fmnist")
    data = load_dataset(cfg.dataset).subset(cfg.n_train, cfg.n_test)
    secs = {(s, k): [] for s in ("fedcka", "moon") for k in chunks}
    for rep in range(a.reps):
        for s, mu in (("fedcka", 3.0), ("moon", 10.0)):
            for k in (chunks if rep % 2 == 0 else chunks[::-1]):
                secs[(s, k)].append(round_seconds(s, mu, k, data))
    refcache._CHUNK["cpu"] = current
    print("| FedCKA's quick setup, round 2 | " + " | ".join(f"chunk {k}" for k in chunks) + " |")
    print("|:--|" + "--:|" * len(chunks))
    for s in ("fedcka", "moon"):
        base = statistics.median(secs[(s, current)])
        print(f"| {s} | " + " | ".join(f"{statistics.median(secs[(s, k)]):.2f} s "
                                        f"({base / statistics.median(secs[(s, k)]):.2f}x)" for k in chunks) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--chunks", default="128,256,512,1024")
    ap.add_argument("--n", type=int, default=12000)
    ap.add_argument("--round", action="store_true")
    a = ap.parse_args()
    chunks = [int(c) for c in a.chunks.split(",")]
    current = refcache._CHUNK["cpu"]
    if current not in chunks:
        chunks.append(current)
    if a.round:
        print(f"round time by reference chunk — commit {git_commit()}, {device_name('cpu')}, threads "
              f"{torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}, reps={a.reps}\n")
        return rounds(a, chunks, current)
    data = load_dataset("fmnist")
    x = data.x_train[: a.n].contiguous(memory_format=torch.channels_last)
    print(f"reference-table pass, {a.n} images — commit {git_commit()}, torch {torch.__version__}, "
          f"{device_name('cpu')}, threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}, "
          f"reps={a.reps} (chunks interleaved); current chunk {current}\n")
    cs = cases(tuple(x.shape[1:]))
    secs = {(c, k): [] for c in cs for k in chunks}
    for name, (m, p, taps) in cs.items():
        pass_seconds(m, p, taps, x, 512)  # warm-up
    for rep in range(a.reps):
        for name, (m, p, taps) in cs.items():
            for k in (chunks if rep % 2 == 0 else chunks[::-1]):
                secs[(name, k)].append(pass_seconds(m, p, taps, x, k))
    print("| case | " + " | ".join(f"chunk {k}" for k in chunks) + " |")
    print("|:--|" + "--:|" * len(chunks))
    for name in cs:
        base = statistics.median(secs[(name, current)])
        cells = [f"{statistics.median(secs[(name, k)]):.3f} s ({base / statistics.median(secs[(name, k)]):.2f}x)"
                 for k in chunks]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"\nload average at end {os.getloadavg()[0]:.1f}; ratios: the current chunk's median / this chunk's "
          f"(above 1: faster than {current})")


if __name__ == "__main__":
    main()
