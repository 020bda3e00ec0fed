"""Local-training throughput: a reference-style loop vs fedlib's sequential and vectorized executors.

    python benchmarks/engine.py [--quick] [--device cpu|cuda] [--reps N] [--setups a,b,c]

The second round's local training (1 local epoch; the first round runs once, untimed, so the start is a real
aggregated global model) of the round's sampled clients, timed three ways in one process:

* ``reference``  — what the papers' code does: for every client a fresh ``copy.deepcopy`` of the model and a new
  ``torch.optim.SGD``, a ``DataLoader`` over a ``Subset`` of a CPU ``TensorDataset`` (shuffle, batches moved to the
  device), cross-entropy, a batch-wise random horizontal flip where the setup augments (the papers use per-sample
  PIL transforms, which are slower still);
* ``sequential`` — :class:`fedlib.executors.SequentialExecutor`, one client after another (fedlib's default on the CPU);
* ``vectorized`` — :class:`fedlib.executors.VectorizedExecutor`, all sampled clients in one chunk;
* ``vectorized+graph`` (CUDA only) — the same with ``Config(cuda_graph=True)``: fixed-shape steps replayed from a
  captured CUDA graph (captured during the warm-up, which is untimed).

Setups: (a) FedCKA — simple CNN, 10 clients (Dirichlet β=5), batch 128, synthetic CIFAR-shaped data, 50,000
images (lr 0.01 as in MOON's code: at the paper's 0.1 the simple CNN diverges on this synthetic data, which does not
change the timing but makes the Δ column meaningless); (b) FedIntR — Fashion-MNIST, FedIntR CNN, 10 clients
(Dirichlet β=0.5), batch 512; (c) Fashion-MNIST, FedIntR CNN, 100 clients (Dirichlet β=0.5), 20% sampled,
batch 512. ``--quick`` trains on a 20% stratified subset; ``--setups b,c`` runs only those.

Timing: each executor first trains one client (warm-up: allocator, oneDNN/cuDNN primitives), then the whole round
``--reps`` times, round-robin over the executors so background load hits them alike. Seconds per round are
medians; the ratios are medians of the per-repeat ratios (each repeat's executors ran back to back, so a drift in
the machine's speed — this VM's varies by ±15 % over minutes — cancels).
"client-samples/s" counts every sample of every sampled client once per local epoch. The last column is the largest
difference between the vectorized and sequential executors' trained parameters (the same training, so only float32
rounding).
"""

from __future__ import annotations

import argparse
import copy
import datetime
import os
import statistics
import sys
import time
from typing import Callable

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Subset, TensorDataset

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fedlib.config import Config  # noqa: E402
from fedlib.data import load_dataset  # noqa: E402
from fedlib.engine import Engine, sample_clients  # noqa: E402
from fedlib.models import build_model  # noqa: E402
from fedlib.results import device_name, git_commit  # noqa: E402
from fedlib.executors import SequentialExecutor, VectorizedExecutor  # noqa: E402
from fedlib.local import ClientJob  # noqa: E402


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def setups(quick: bool, device: str) -> list[tuple[str, Config, Callable]]:
    frac = 0.2 if quick else 1.0
    common = dict(rounds=1, local_epochs=1, device=device, executor="sequential", eval_every=1, seed=0)
    cka = Config(dataset="synthetic", model="simple_cnn", partition="dirichlet", partition_kw={"beta": 5.0},
                 num_clients=10, batch_size=128, lr=0.01, momentum=0.9, weight_decay=1e-5, augment="none",
                 **common)
    intr = Config(dataset="fmnist", model="intr_cnn", partition="dirichlet", partition_kw={"beta": 0.5},
                  num_clients=10, batch_size=512, lr=0.01, momentum=0.9, weight_decay=1e-5, augment="flip", **common)
    synth = lambda: load_dataset("synthetic", n_train=int(50_000 * frac), n_test=1000, signal=2.0)  # noqa: E731
    fmnist = lambda: load_dataset("fmnist").subset(int(60_000 * frac), 1000)  # noqa: E731
    return [
        ("(a) FedCKA: simple CNN, 10 clients, B=128, synthetic 3x32x32", cka, synth),
        ("(b) FedIntR: FMNIST, IntR CNN, 10 clients, B=512", intr, fmnist),
        ("(c) FMNIST, IntR CNN, 100 clients, 20% sampled, B=512", intr.replace(num_clients=100, sample_fraction=0.2),
         fmnist),
    ]


def reference_loop(eng: Engine, cids: list[int]) -> Callable[[], None]:
    """The papers' per-client loop over a DataLoader (see the module docstring)."""
    cfg, data = eng.cfg, eng.data
    ds = TensorDataset(data.x_train.cpu(), data.y_train.cpu())
    torch.manual_seed(cfg.seed)
    global_model = build_model(cfg.model, data.in_shape, data.num_classes, **cfg.model_kw).to(eng.device)
    flip = eng.augment != "none"

    def run() -> None:
        for cid in cids:
            model = copy.deepcopy(global_model)
            model.train()
            opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
            loader = DataLoader(Subset(ds, list(eng.partition.client_indices[cid])), batch_size=cfg.batch_size,
                                shuffle=True, drop_last=cfg.drop_last)
            for _ in range(cfg.local_epochs):
                for x, y in loader:
                    x, y = x.to(eng.device), y.to(eng.device)
                    if flip:
                        x = torch.where(torch.rand(len(x), 1, 1, 1, device=x.device) < 0.5, x.flip(-1), x)
                    opt.zero_grad()
                    loss = F.cross_entropy(model(x), y)
                    loss.backward()
                    opt.step()
        _sync(eng.device)
    return run


def bench_setup(name: str, cfg: Config, data_fn: Callable, reps: int) -> list[dict]:
    data = data_fn()
    eng = Engine(cfg.replace(rounds=2), data=data, progress=False)
    eng.run_round(0)  # time round 2: its start is a real aggregate (layout included), as in every later round
    cids = [int(c) for c in sample_clients(eng.n_clients, cfg.sample_fraction, cfg.seed, 1)]
    ctxs = [eng.context(c, 1) for c in cids]
    starts = [eng.global_params] * len(ctxs)
    samples = sum(c.n_samples for c in ctxs) * cfg.local_epochs
    task = eng.task()
    jobs = [ClientJob(ctx=c, start=s) for c, s in zip(ctxs, starts)]
    seq = SequentialExecutor(task)
    vec = VectorizedExecutor(task, eng.device, cuda_graph=False)  # eager: the graph is the next row
    graph = VectorizedExecutor(task, eng.device, static=True) if eng.device.type == "cuda" else None
    last: dict[str, list] = {}

    def sequential() -> None:
        last["sequential"] = [r.params for r in seq(task, jobs)]
        _sync(eng.device)

    def vectorized() -> None:
        last["vectorized"] = [r.params for r in vec(task, jobs)]
        _sync(eng.device)

    def graphed() -> None:
        last["vectorized+graph"] = [r.params for r in graph(task, jobs)]  # type: ignore[misc]
        _sync(eng.device)

    fns = {"reference": reference_loop(eng, cids), "sequential": sequential, "vectorized": vectorized}
    if graph is not None:
        fns["vectorized+graph"] = graphed
    # warm-up on the smallest client (the graph executor: the whole round, so its graph is captured untimed)
    small = min(range(len(ctxs)), key=lambda i: ctxs[i].n_samples)
    reference_loop(eng, [cids[small]])()
    seq(task, [jobs[small]])
    vec(task, [jobs[small]])
    if graph is not None:
        graph(task, jobs)
        if not graph.capture:
            print(f"  {name}: graph capture failed; the vectorized+graph row runs the static steps eagerly")
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(reps):
        for k, f in fns.items():
            _sync(eng.device)
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    diff = {v: max(float((a[k].double() - b[k].double()).abs().max())
                   for a, b in zip(last["sequential"], last[v]) for k in a) for v in fns if v.startswith("vec")}
    med = {k: statistics.median(v) for k, v in times.items()}

    def ratio(base: str, k: str) -> float:
        return statistics.median(b / t for b, t in zip(times[base], times[k]))

    rows = []
    for k in fns:
        rows.append(dict(setup=name, executor=k, clients=len(ctxs), samples=samples, s=med[k],
                         sps=samples / med[k], vs_ref=ratio("reference", k), vs_seq=ratio("sequential", k),
                         diff=diff.get(k), runs=times[k]))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="20%% of the data, 3 repeats (< 90 s on a 2-core CPU)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--reps", type=int, default=None, help="timed repeats per executor (default 3)")
    ap.add_argument("--setups", default="a,b,c", help="which setups to run, e.g. 'b' or 'a,c' (default all)")
    args = ap.parse_args()
    reps = args.reps or 3
    dev = torch.device(args.device)
    print(f"fedlib engine benchmark — {datetime.date.today()}, commit {git_commit()}, torch {torch.__version__}, "
          f"{device_name(dev)}, quick={args.quick}, reps={reps} (median), 1 round x 1 local epoch\n")
    t0 = time.perf_counter()
    rows = []
    want = {s.strip().lower() for s in args.setups.split(",")}
    for name, cfg, data_fn in setups(args.quick, args.device):
        if name[1] in want:
            rows += bench_setup(name, cfg, data_fn, reps)
    print("| setup | executor | clients | client-samples | s / round | client-samples / s | vs reference "
          "| vs sequential | max abs Δ vs sequential |")
    print("|:--|:--|--:|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        d = "" if r["diff"] is None else f"{r['diff']:.1e}"
        print(f"| {r['setup']} | {r['executor']} | {r['clients']} | {r['samples']} | {r['s']:.3f} | {r['sps']:.0f} "
              f"| {r['vs_ref']:.2f}x | {r['vs_seq']:.2f}x | {d} |")
    short = {"reference": "ref", "sequential": "seq", "vectorized": "vec", "vectorized+graph": "graph"}
    runs = "; ".join(short[r["executor"]] + " " + "/".join(f"{t:.2f}" for t in r["runs"]) for r in rows)
    print(f"\nRatios: times faster than the reference loop / the sequential executor (medians of per-repeat ratios)."
          f" Individual runs (s): {runs}")
    print(f"total benchmark time {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
