"""Local-training throughput: plain PyTorch loops vs fedlib's sequential and vectorized executors, fp32 and bf16.

    python benchmarks/engine.py [--quick] [--device cpu|cuda] [--reps N] [--setups a,b,c] [--precisions fp32,bf16]
    python benchmarks/engine.py --eval [--reps N]          # the test-set evaluation batch (fedlib.engine.EVAL_BATCH)
    python benchmarks/engine.py --eval-precision [--reps N] # evaluation in bf16 vs fp32 of bf16-trained models

The second round's local training (1 local epoch; the first round runs once, untimed, so the start is a real
aggregated global model) of the round's sampled clients, timed these ways in one process:

* ``reference``  — what the papers' code does: for every client a fresh ``copy.deepcopy`` of the model and a new
  ``torch.optim.SGD``, a ``DataLoader`` over a ``Subset`` of a CPU ``TensorDataset`` (shuffle, batches moved to the
  device), cross-entropy, a batch-wise random horizontal flip where the setup augments (the papers use per-sample
  PIL transforms, which are slower still);
* ``plain, channels_last`` — the best single-model step plain PyTorch gives here: one model converted to
  channels_last (oneDNN's fast layout on the CPU) and one ``torch.optim.SGD`` reused for every client (weights
  loaded, momentum cleared), batches as index lookups into the on-device tensors, the same flip;
* ``sequential`` — :class:`fedlib.executors.SequentialExecutor`, one client after another (fedlib's default on the CPU);
* ``vectorized`` — :class:`fedlib.executors.VectorizedExecutor`, all sampled clients in one chunk;
* ``vectorized+graph`` (CUDA only) — the same with ``Config(cuda_graph=True)``: fixed-shape steps replayed from a
  captured CUDA graph (captured during the warm-up, which is untimed).

Each row runs in float32 and under bf16 autocast (``--precisions``; fedlib: ``Config(precision="bf16")``, the plain
loops: ``torch.autocast``). "of best" is the row's speed as a fraction of the best single-model step of the same
precision measured in the same repeat: the faster of the two plain loops (``reference``, ``plain,
channels_last``); the median over repeats.

Setups: (a) FedCKA — simple CNN, 10 clients (Dirichlet β=5), batch 128, synthetic CIFAR-shaped data, 50,000
images (lr 0.01 as in MOON's code: at the paper's 0.1 the simple CNN diverges on this synthetic data, which does not
change the timing but makes the Δ column meaningless); (b) FedIntR — Fashion-MNIST, FedIntR CNN, 10 clients
(Dirichlet β=0.5), batch 512; (c) Fashion-MNIST, FedIntR CNN, 100 clients (Dirichlet β=0.5), 20% sampled,
batch 512; (d) and (e) the quick presets of FedIntR and FedCKA as the campaign trains them (batch 64, 12,000 and
15,000 Fashion-MNIST images). ``--quick`` trains (a)-(c) on a 20% stratified subset; ``--setups b,c`` runs only
those.

Timing: each executor first trains one client (warm-up: allocator, oneDNN/cuDNN primitives), then the whole round
``--reps`` times, round-robin over the rows and precisions so background load hits them alike. Seconds per round
are medians; the ratios are medians of the per-repeat ratios (each repeat's rows ran back to back, so a drift in
the machine's speed — this VM's varies by ±15 % over minutes — cancels).
"client-samples/s" counts every sample of every sampled client once per local epoch. The last column is the largest
difference between the vectorized and sequential executors' trained parameters in float32 (the same training, so
only float32 rounding).

``--eval``: :meth:`fedlib.engine.Engine.evaluate` of the FedIntR CNN on Fashion-MNIST's 10,000 test images at
several batch sizes, interleaved, float32: the measurement behind ``fedlib.engine.EVAL_BATCH``.
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
from fedlib.companion.papers import preset  # noqa: E402
from fedlib.companion.results import device_name, git_commit  # noqa: E402
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
    quick = {p: preset(p, "quick").replace(**{**common, "eval_every": 1}) for p in ("fedintr", "fedcka")}
    synth = lambda: load_dataset("synthetic", n_train=int(50_000 * frac), n_test=1000, signal=2.0)  # noqa: E731
    fmnist = lambda: load_dataset("fmnist").subset(int(60_000 * frac), 1000)  # noqa: E731
    return [
        ("(a) FedCKA: simple CNN, 10 clients, B=128, synthetic 3x32x32", cka, synth),
        ("(b) FedIntR: FMNIST, IntR CNN, 10 clients, B=512", intr, fmnist),
        ("(c) FMNIST, IntR CNN, 100 clients, 20% sampled, B=512", intr.replace(num_clients=100, sample_fraction=0.2),
         fmnist),
        # the quick presets as the campaign trains them (batch 64), one local epoch
        ("(d) FedIntR quick: FMNIST, IntR CNN, 10 clients, B=64, 12,000 images", quick["fedintr"],
         lambda: load_dataset("fmnist").subset(12_000, 1000)),
        ("(e) FedCKA quick: FMNIST, simple CNN, 10 clients, B=64, 15,000 images", quick["fedcka"],
         lambda: load_dataset("fmnist").subset(15_000, 1000)),
    ]


def reference_loop(eng: Engine, cids: list[int], amp: bool = False) -> Callable[[], None]:
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
                    with torch.autocast(eng.device.type, dtype=torch.bfloat16, enabled=amp):
                        logits = model(x)
                    loss = F.cross_entropy(logits.float(), y)
                    loss.backward()
                    opt.step()
        _sync(eng.device)
    return run


def plain_loop(eng: Engine, cids: list[int], amp: bool = False) -> Callable[[], None]:
    """One channels_last model and one SGD reused for every client, batches by index (see the module docstring)."""
    cfg, data = eng.cfg, eng.data
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model, data.in_shape, data.num_classes, **cfg.model_kw).to(eng.device)
    model = model.to(memory_format=torch.channels_last).train()
    start = copy.deepcopy(model.state_dict())
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    flip, B = eng.augment != "none", cfg.batch_size

    def run() -> None:
        for cid in cids:
            model.load_state_dict(start)
            opt.state.clear()
            idx = eng.client_idx[cid]
            for _ in range(cfg.local_epochs):
                order = idx[torch.randperm(len(idx), device=idx.device)]
                stop = len(order) - len(order) % B if cfg.drop_last else len(order)
                for b in range(0, stop, B):
                    x, y = data.x_train[order[b:b + B]], data.y_train[order[b:b + B]]
                    if flip:
                        x = torch.where(torch.rand(len(x), 1, 1, 1, device=x.device) < 0.5, x.flip(-1), x)
                    opt.zero_grad(set_to_none=True)
                    with torch.autocast(eng.device.type, dtype=torch.bfloat16, enabled=amp):
                        logits = model(x)
                    F.cross_entropy(logits.float(), y).backward()
                    opt.step()
        _sync(eng.device)
    return run


BASELINES = ("reference", "plain, channels_last")


def bench_setup(name: str, cfg: Config, data_fn: Callable, reps: int, precisions: list[str]) -> list[dict]:
    data = data_fn()
    eng = Engine(cfg.replace(rounds=2), data=data, progress=False)
    eng.run_round(0)  # time round 2: its start is a real aggregate (layout included), as in every later round
    cids = [int(c) for c in sample_clients(eng.n_clients, cfg.sample_fraction, cfg.seed, 1)]
    ctxs = [eng.context(c, 1) for c in cids]
    starts = [eng.global_params] * len(ctxs)
    samples = sum(c.n_samples for c in ctxs) * cfg.local_epochs
    jobs = [ClientJob(ctx=c, start=s) for c, s in zip(ctxs, starts)]
    small = min(range(len(ctxs)), key=lambda i: ctxs[i].n_samples)
    last: dict[tuple[str, str], list] = {}
    fns: dict[tuple[str, str], Callable[[], None]] = {}
    for prec in precisions:
        amp = prec == "bf16"
        task = eng.task(precision=prec)
        execs = {"sequential": SequentialExecutor(task),
                 "vectorized": VectorizedExecutor(task, eng.device, cuda_graph=False)}  # eager: graph is next
        if eng.device.type == "cuda":
            execs["vectorized+graph"] = VectorizedExecutor(task, eng.device, static=True)

        def timed(key: tuple[str, str], ex: Callable, task=task) -> Callable[[], None]:
            def run() -> None:
                last[key] = [r.params for r in ex(task, jobs)]
                _sync(eng.device)
            return run

        fns[(prec, "reference")] = reference_loop(eng, cids, amp)
        fns[(prec, "plain, channels_last")] = plain_loop(eng, cids, amp)
        # warm-up on the smallest client (the graph executor: the whole round, so its graph is captured untimed)
        reference_loop(eng, [cids[small]], amp)()
        plain_loop(eng, [cids[small]], amp)()
        for k, ex in execs.items():
            ex(task, jobs if k == "vectorized+graph" else [jobs[small]])
            if k == "vectorized+graph" and not ex.capture:
                print(f"  {name} {prec}: graph capture failed; the vectorized+graph row runs the static steps eagerly")
            fns[(prec, k)] = timed((prec, k), ex)
    times: dict[tuple[str, str], list[float]] = {k: [] for k in fns}
    for _ in range(reps):
        for k, f in fns.items():
            _sync(eng.device)
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}

    def ratio(base: list[float], k: tuple[str, str]) -> float:
        return statistics.median(b / t for b, t in zip(base, times[k]))

    rows = []
    for ex in dict.fromkeys(k for _, k in fns):
        row = dict(setup=name, executor=ex, clients=len(ctxs), samples=samples, runs={})
        for prec in precisions:
            k = (prec, ex)
            best = [min(ts) for ts in zip(*(times[(prec, b)] for b in BASELINES))]  # per repeat: the faster loop
            row[prec] = dict(s=med[k], sps=samples / med[k], of_best=ratio(best, k),
                             vs_ref=ratio(times[(prec, "reference")], k))
            row["runs"][prec] = times[k]
            if ex.startswith("vec") and prec == "fp32":
                row["diff"] = max(float((a[n].double() - b[n].double()).abs().max())
                                  for a, b in zip(last[("fp32", "sequential")], last[k]) for n in a)
        if "fp32" in precisions and "bf16" in precisions:
            row["bf16_speedup"] = ratio(times[("fp32", ex)], ("bf16", ex))
        rows.append(row)
    return rows


def bench_eval(reps: int, device: str, sizes: tuple[int, ...] = (256, 512, 1024, 2048)) -> None:
    """Engine.evaluate on Fashion-MNIST's 10,000 test images with the FedIntR CNN at each batch size, interleaved."""
    cfg = setups(False, device)[1][1]
    eng = Engine(cfg, data=load_dataset("fmnist", device=device), progress=False)
    x, y, params = eng.data.x_test, eng.data.y_test, eng.global_params
    for b in sizes:  # warm-up: oneDNN primitives for every shape
        eng.evaluate(params, x, y, batch_size=b)
    times: dict[int, list[float]] = {b: [] for b in sizes}
    for _ in range(reps):
        for b in sizes:
            _sync(eng.device)
            t0 = time.perf_counter()
            eng.evaluate(params, x, y, batch_size=b)
            _sync(eng.device)
            times[b].append(time.perf_counter() - t0)
    print("| evaluation batch | s per evaluation (10,000 images) | vs 2048 | runs (s) |")
    print("|--:|--:|--:|:--|")
    for b in sizes:
        r = statistics.median(t2 / t for t2, t in zip(times[2048], times[b])) if 2048 in times else float("nan")
        print(f"| {b} | {statistics.median(times[b]):.3f} | {r:.2f}x | {'/'.join(f'{t:.2f}' for t in times[b])} |")


def bench_eval_precision(reps: int, device: str, rounds: int = 8) -> None:
    """FedAvg in FedIntR's quick setup trained in bf16; after each round its global model is evaluated on the test
    set in fp32 and in bf16 (autocast): accuracy and loss of both, and their times interleaved over ``reps``."""
    cfg = preset("fedintr", "quick", dataset="fmnist", device=device, precision="bf16", rounds=rounds, seed=0)
    eng = Engine(cfg, progress=False)
    x, y = eng.data.x_test, eng.data.y_test
    print("| round | fp32 acc (%) | bf16 acc (%) | Δ acc (points) | fp32 loss | bf16 loss | bf16 / fp32 time |")
    print("|--:|--:|--:|--:|--:|--:|--:|")
    worst = 0.0

    def each_round(e: Engine, entry: dict) -> None:
        nonlocal worst
        p = e.global_params
        (a32, l32), (a16, l16) = e.evaluate(p, x, y, precision="fp32"), e.evaluate(p, x, y, precision="bf16")
        ratios = []
        for _ in range(reps):
            ts = []
            for prec in ("fp32", "bf16"):
                _sync(e.device)
                t0 = time.perf_counter()
                e.evaluate(p, x, y, precision=prec)
                _sync(e.device)
                ts.append(time.perf_counter() - t0)
            ratios.append(ts[1] / ts[0])
        worst = max(worst, abs(a16 - a32) * 100)
        print(f"| {entry['round']} | {100 * a32:.2f} | {100 * a16:.2f} | {100 * (a16 - a32):+.2f} | {l32:.4f} | "
              f"{l16:.4f} | {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) |", flush=True)

    eng.run(callback=each_round)
    print(f"largest |Δ acc|: {worst:.2f} points over {rounds} rounds ({len(y)} test images)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="20%% of the data")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--reps", type=int, default=None, help="timed repeats per row (default 3)")
    ap.add_argument("--setups", default="a,b,c,d,e", help="which setups to run, e.g. 'b' or 'a,c' (default all)")
    ap.add_argument("--precisions", default="fp32,bf16", help="'fp32', 'bf16' or both (default 'fp32,bf16')")
    ap.add_argument("--eval", action="store_true", help="time the test-set evaluation at several batch sizes")
    ap.add_argument("--eval-precision", action="store_true",
                    help="evaluate bf16-trained models in fp32 and in bf16: accuracy, loss and time")
    args = ap.parse_args()
    reps = args.reps or 3
    precisions = [p.strip() for p in args.precisions.split(",")]
    bad = [p for p in precisions if p not in ("fp32", "bf16")]
    if bad or not precisions:
        ap.error(f"--precisions {args.precisions!r}: valid values are 'fp32', 'bf16' or 'fp32,bf16'.")
    dev = torch.device(args.device)
    print(f"fedlib engine benchmark — {datetime.date.today()}, commit {git_commit()}, torch {torch.__version__}, "
          f"{device_name(dev)}, threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}, "
          f"quick={args.quick}, reps={reps} (median), 1 round x 1 local epoch\n")
    t0 = time.perf_counter()
    if args.eval_precision:
        bench_eval_precision(reps, args.device)
        print(f"total benchmark time {time.perf_counter() - t0:.1f} s")
        return
    if args.eval:
        bench_eval(reps, args.device)
        print(f"total benchmark time {time.perf_counter() - t0:.1f} s")
        return
    rows = []
    want = {s.strip().lower() for s in args.setups.split(",")}
    for name, cfg, data_fn in setups(args.quick, args.device):
        if name[1] in want:
            rows += bench_setup(name, cfg, data_fn, reps, precisions)
    head = "| setup | executor | clients | client-samples |"
    rule = "|:--|:--|--:|--:|"
    for p in precisions:
        head += f" {p} s / round | {p} client-samples / s | {p} of best | {p} vs reference |"
        rule += "--:|--:|--:|--:|"
    both = len(precisions) == 2
    print(head + (" bf16 speed-up |" if both else "") + " max abs Δ vs sequential (fp32) |")
    print(rule + ("--:|" if both else "") + "--:|")
    for r in rows:
        cells = "".join(f" {r[p]['s']:.3f} | {r[p]['sps']:.0f} | {r[p]['of_best']:.0%} | {r[p]['vs_ref']:.2f}x |"
                        for p in precisions)
        sp = f" {r['bf16_speedup']:.2f}x |" if both else ""
        d = f"{r['diff']:.1e}" if "diff" in r else ""
        print(f"| {r['setup']} | {r['executor']} | {r['clients']} | {r['samples']} |{cells}{sp} {d} |")
    runs = "; ".join(f"{r['setup'][:3]} {r['executor']} {p} " + "/".join(f"{t:.2f}" for t in r["runs"][p])
                     for r in rows for p in precisions)
    print(f"\n'of best': speed as a fraction of the faster plain loop (reference, plain channels_last) of the same "
          f"precision in the same repeat; ratios are medians of per-repeat ratios. Individual runs (s): {runs}")
    print(f"total benchmark time {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
