"""Does batching several runs that share a model and shapes (seeds, μ values) into one computation pay?

    python benchmarks/batching.py [--device cpu|cuda] [--runs 3] [--reps 3]

Batching R runs of N clients each into one computation is what the vectorized executor does for R·N clients of one
run: the clients' parameters stacked, one vmapped step. So the question is answered by timing one local epoch of
N clients and of R·N clients (equal client sizes: IID shards of the same size, FedIntR's setup otherwise: the
FedIntR CNN on Fashion-MNIST, batch 512), and comparing R·N clients in one computation with R separate rounds of N
clients, each run on the executor ``auto`` picks for a single run (sequential on the CPU; vectorized, with the CUDA
graph, on a GPU) and, on the CPU, also on the vectorized executor (so the executor's own difference is not credited
to batching). Batching pays where ``batched / separate`` is clearly below 1.

Timing: one untimed warm-up of each, then ``--reps`` repeats round-robin; medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fedlib.config import Config  # noqa: E402
from fedlib.data import load_dataset  # noqa: E402
from fedlib.engine import Engine  # noqa: E402
from fedlib.executors import make_executor  # noqa: E402
from fedlib.local import ClientJob  # noqa: E402
from fedlib.companion.results import device_name, git_commit  # noqa: E402


def epoch_timer(n_clients: int, per_client: int, device: str, executor: str, data) -> tuple:
    cfg = Config(dataset="fmnist", model="intr_cnn", partition="iid", partition_kw={}, num_clients=n_clients,
                 rounds=1, local_epochs=1, batch_size=512, lr=0.01, momentum=0.9, weight_decay=1e-5,
                 n_train=n_clients * per_client, n_test=100, device=device, executor=executor)
    eng = Engine(cfg, data=data.subset(n_clients * per_client, 100, seed=0), progress=False)
    ctxs = [eng.context(c, 0) for c in range(n_clients)]
    jobs = [ClientJob(ctx=c, start=eng.global_params) for c in ctxs]
    task = eng.task()
    exe = make_executor(task, eng.device, executor, notice=lambda s: None)

    def once() -> float:
        if eng.device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        exe(task, jobs)
        if eng.device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t
    return once, exe.name + ("+graph" if getattr(exe, "capture", False) else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--runs", type=int, default=3, help="runs batched together (e.g. 3 seeds)")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--per-client", type=int, default=1536, help="training samples per client (3 batches of 512)")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    data = load_dataset("fmnist", device=a.device)
    auto = "auto"
    single, single_name = epoch_timer(a.clients, a.per_client, a.device, auto, data)
    rows = {f"{a.runs} runs separately ({a.clients} clients each, {{}})": (single, a.runs)}
    names = [single_name]
    if single_name.split("+")[0] != "vectorized":  # the same executor as the batched row, one run at a time
        vec, vec_name = epoch_timer(a.clients, a.per_client, a.device, "vectorized", data)
        rows[f"{a.runs} runs separately ({a.clients} clients each, {{}}) "] = (vec, a.runs)
        names.append(vec_name)
    batched, batched_name = epoch_timer(a.runs * a.clients, a.per_client, a.device, "vectorized", data)
    rows[f"{a.runs} runs batched ({a.runs * a.clients} clients in one computation, {{}})"] = (batched, 1)
    names.append(batched_name)
    for fn, _ in rows.values():
        fn()  # warm-up
    times: dict[str, list[float]] = {k: [] for k in rows}
    for _ in range(a.reps):
        for k, (fn, mult) in rows.items():
            times[k].append(mult * fn())
    print(f"# batching runs: {device_name(a.device)}, torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"commit {git_commit()}")
    print(f"FedIntR CNN, Fashion-MNIST, batch 512, one local epoch, {a.per_client} samples per client, "
          f"median of {a.reps}\n")
    print("| computation | s per epoch of all runs | vs separately |\n|:--|--:|--:|")
    base = statistics.median(next(iter(times.values())))
    for (k, ts), name in zip(times.items(), names):
        med = statistics.median(ts)
        print(f"| {k.format(name)} | {med:.3f} | {med / base:.2f}x |")


if __name__ == "__main__":
    main()
