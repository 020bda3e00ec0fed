"""The first thing to run on a GPU (``make gpu-check``): every strategy on its paper model, three paths, one table.

    python benchmarks/gpu_check.py                    # on a GPU: at most ~8 minutes on an H100; writes results/costs.json
    python benchmarks/gpu_check.py --smoke            # the same code on a CPU in seconds (tiny data, no graph path)
    python benchmarks/gpu_check.py --datasets fmnist  # only the campaign's default dataset

The cases are the paper plans' (``fedlib.companion.common``, scale ``paper``): one per (cost key, strategy) — model and its
options, input shape, strategy, batch size, optimizer, clients — in the campaign's priority order, for the datasets
given (default ``fmnist cifar100``: the campaign's default, and the CIFAR-100 setups that use ResNet-20 and
ResNet-50). That covers the simple CNN, the FedIntR CNN and ResNet-18/20/50 with every strategy the plans train.
Each case trains 2 rounds of 1 local epoch on synthetic data of its dataset's shape (about 2 batches per client,
the paper's clients and batch size) on three paths:

* ``sequential`` — the reference loop;
* ``eager`` — the vectorized executor without CUDA graphs (``cuda_graph=False``);
* ``graph`` — the vectorized executor replaying a captured CUDA graph (``cuda_graph=True``; where the graph does
  not apply the row says why, and ``--smoke`` skips it).

A path that does not apply to a case (e.g. a package optimizer that only the sequential executor runs) says why.
The vectorized paths must equal the sequential one within ``tests/test_cuda.py``'s tolerances (parameters:
``|a - b| <= ATOL + RTOL |b|``; same clients; training losses within RTOL), with TF32 off as there. The table
gives each path's seconds per round, the largest parameter difference, the peak GPU memory and the sample-passes
per second of the path ``executor="auto"`` takes, timed again with PyTorch's default TF32 settings (round 2's
training time over its training sample-passes: the round's fixed costs weigh more than in a paper run, so the
rate errs low). Those rates are written to the cost table (``--costs``, default ``results/costs.json``) as
measurements of this GPU by its device name (the slowest strategy of a cost family), so that ``python -m
fedlib.companion.campaign plan --device cuda`` then states "measured on <GPU>" instead of the default model; with ``--smoke``
nothing is written unless ``--costs`` is given.

A vectorized path that differs from the sequential one in float32 is trained again, with the sequential path, in
float64 (the same case, data cast to float64): BatchNorm ResNets amplify rounding about 1e4-fold within a few steps
(docs/campaign.md), so a float32 mismatch alone does not tell a rounding difference from an executor bug. If the
two agree in float64 (``|a - b| <= ATOL64 + RTOL64 |b|``) the cell reads ``rounding: float32 Δ …, float64 Δ …``
and the case passes; otherwise it stays a MISMATCH that names both differences.

Exit status: 0 all paths agree (in float64 where float32 differed); 1 a mismatch or an error (named in the
table); 2 the ``--budget`` ran out before every case ran (the rest are listed as not run).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fedlib.companion.campaign import collect, parse_budget  # noqa: E402
from fedlib.config import Config  # noqa: E402
from fedlib.errors import as_typed  # noqa: E402
from fedlib.companion.costs import DEFAULT_COSTS, CostTable, cost_key, device_type, sample_passes  # noqa: E402
from fedlib.progress import fmt_s  # noqa: E402
from fedlib.data import DEFAULT_AUGMENT, load_dataset  # noqa: E402
from fedlib.engine import Engine  # noqa: E402
from fedlib.executors import VectorizedExecutor  # noqa: E402
from fedlib.companion.results import Store, device_name, git_commit  # noqa: E402

ATOL, RTOL = 1e-5, 1e-4  # tests/test_cuda.py's close()
ATOL64, RTOL64 = 1e-9, 1e-7  # float64: the same mathematics to rounding (the smoke ResNets agree within ~1e-15)
SHAPES = {"fmnist": ((1, 28, 28), 10), "cifar10": ((3, 32, 32), 10), "cifar100": ((3, 32, 32), 100),
          "svhn": ((3, 32, 32), 10), "tinyimagenet": ((3, 64, 64), 200), "synthetic": ((3, 32, 32), 10)}
PATHS: dict[str, dict[str, Any]] = {"sequential": dict(executor="sequential"),
                                    "eager": dict(executor="vectorized", cuda_graph=False),
                                    "graph": dict(executor="vectorized", cuda_graph=True)}
BATCHES_PER_CLIENT = 2


@dataclass
class PathResult:
    status: str = "ok"  # ok | n/a: why | error: what | MISMATCH: what | rounding: float32 and float64 differences
    s_per_round: float = float("nan")
    max_diff: float = 0.0
    peak_mb: float = float("nan")
    engine: Any = None


@dataclass
class CaseResult:
    name: str
    plan_cfg: Config
    cfg: Config
    paths: dict[str, PathResult] = field(default_factory=dict)
    rate: float = float("nan")  # sample-passes per second, executor="auto" with default TF32
    auto: str = ""

    @property
    def failed(self) -> bool:
        return any(p.status.startswith(("error", "MISMATCH")) for p in self.paths.values())


def cases(datasets: list[str]) -> list[tuple[str, Config]]:
    """One paper-plan config per (cost key, strategy), in the campaign's priority order, for each dataset."""
    import tempfile

    out: dict[tuple[str, str], tuple[str, Config]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for ds in datasets:
            for it in collect("paper", "cpu", store=Store(tmp), costs=CostTable(None), dataset=ds):
                nb, art, name = it.uses[0]
                out.setdefault((cost_key(it.cfg), it.cfg.strategy), (f"{nb[:2]} · {art} · {name}", it.cfg))
    return list(out.values())


def shrink(cfg: Config, smoke: bool) -> tuple[Config, tuple[int, int, int], int]:
    """The 2-round check of a paper config: ``(config, input shape, classes)`` (synthetic data of that shape)."""
    shape, classes = SHAPES[cfg.dataset]
    kw: dict[str, Any] = {}
    clients, batch = cfg.num_clients, cfg.batch_size
    if smoke:  # seconds on a CPU: few clients (shards: whole shards per class), small batches, narrow ResNets on 16x16
        s = cfg.partition_kw.get("shards_per_user", 1) if cfg.partition == "shards" else 1
        clients = next((n for n in range(2, clients) if n * s % classes == 0), clients) if s > 1 else min(clients, 2)
        batch = min(batch, 8)
        if cfg.model.startswith("resnet"):
            shape = (shape[0], 16, 16)
        if cfg.model in ("resnet18", "resnet50"):
            kw["model_kw"] = {**cfg.model_kw, "width": 8}
    n_train = clients * batch * BATCHES_PER_CLIENT
    small = cfg.replace(num_clients=clients, batch_size=batch, rounds=2, local_epochs=1, eval_every=1,
                        n_train=n_train, n_test=min(512, n_train), augment=cfg.augment or DEFAULT_AUGMENT[cfg.dataset],
                        checkpoint_every=0, chunk_size=None, **kw)
    return small, shape, classes


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def train(cfg: Config, data: Any) -> Engine:
    """Two rounds of ``cfg`` (what each path runs; tests replace it to inject a mismatch)."""
    eng = Engine(cfg, data=data, progress=False)
    eng.run()
    _sync(cfg.device)
    return eng


def why_not(path: str, eng: Engine) -> str:
    """Why ``eng`` did not run ``path`` ("" when it did)."""
    if path == "sequential":
        return ""
    if eng.executor_name != "vectorized":
        return VectorizedExecutor.can_run(eng.task())[1] or "the vectorized executor does not run it"
    if path == "graph" and not (eng.executor.static and getattr(eng.executor, "capture", False)):
        return "the CUDA graph does not apply (fedlib/executors/fast/static.py: padded mode, SGD, no taps/references)"
    return ""


def compare(ref: Engine, eng: Engine, atol: float = ATOL, rtol: float = RTOL) -> tuple[bool, float, str]:
    """``(equal within the tolerances, largest |difference|, what differs first)``."""
    worst, first = 0.0, ""
    for k, v in ref.global_params.items():
        w = eng.global_params[k]
        if not torch.is_floating_point(v):
            if not torch.equal(v, w) and not first:
                first = f"{k} differs"
            continue
        d = (w.double() - v.double()).abs()
        worst = max(worst, float(d.max()) if d.numel() else 0.0)
        if not bool((d <= atol + rtol * v.double().abs()).all()) and not first:
            first = f"{k}: max |diff| {float(d.max()):.3g}"
    for a, b in zip(ref.history, eng.history):
        if a["clients"] != b["clients"] and not first:
            first = f"round {a['round']}: clients {a['clients']} vs {b['clients']}"
        if abs(a["train_loss"] - b["train_loss"]) > atol + rtol * abs(a["train_loss"]) and not first:
            first = f"round {a['round']}: train loss {a['train_loss']:.6g} vs {b['train_loss']:.6g}"
    return not first, worst, first


def recheck_float64(cfg: Config, data: Any, path: str) -> tuple[bool, float, str]:
    """``compare`` of ``path`` against the sequential path, both trained in float64 on ``data`` cast to float64."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        d64 = dataclasses.replace(data, x_train=data.x_train.double(), x_test=data.x_test.double())
        ref = train(cfg.replace(**PATHS["sequential"]), d64)
        eng = train(cfg.replace(**PATHS[path]), d64)
        if (why := why_not(path, eng)):
            return False, float("nan"), f"the {path} path does not run in float64 ({why})"
        return compare(ref, eng, ATOL64, RTOL64)
    finally:
        torch.set_default_dtype(old)


def check(name: str, plan_cfg: Config, device: str, smoke: bool) -> CaseResult:
    cfg, shape, classes = shrink(plan_cfg, smoke)
    res = CaseResult(name, plan_cfg, cfg.replace(device=device))
    data = load_dataset("synthetic", n_train=cfg.n_train, n_test=cfg.n_test, shape=shape, num_classes=classes,
                        seed=1, signal=2.0, device=device)
    cuda = device.startswith("cuda")
    pending64: list[str] = []  # paths that differ in float32: rechecked in float64
    old_tf32 = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for path, kw in PATHS.items():
            if path == "graph" and not cuda:
                continue  # the CUDA graph needs a GPU (--smoke)
            r = res.paths[path] = PathResult()
            if cuda:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            try:
                eng = train(res.cfg.replace(**kw), data)
            except Exception as e:  # noqa: BLE001 — an error (e.g. out of memory) is this path's result
                r.status = f"error: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
                continue
            r.peak_mb = torch.cuda.max_memory_allocated() / 2**20 if cuda else float("nan")
            r.s_per_round = sum(h["time_s"] for h in eng.history) / len(eng.history)
            if (why := why_not(path, eng)):
                r.status = f"n/a: {why}"
                continue
            r.engine = eng
            if path != "sequential" and res.paths["sequential"].engine is not None:
                ok, r.max_diff, first = compare(res.paths["sequential"].engine, eng)
                if not ok:
                    r.status = f"MISMATCH: {first}"
                    pending64.append(path)
        if pending64:  # after every float32 path: their engines are no longer needed
            for p in res.paths.values():
                p.engine = None
        for path in pending64:
            r = res.paths[path]
            try:
                ok, d64, first = recheck_float64(res.cfg, data, path)
            except Exception as e:  # noqa: BLE001 — e.g. out of memory: the float32 mismatch stands
                r.status += f"; float64 recheck: {type(e).__name__}: {str(e).splitlines()[0][:80]}"
                continue
            r.status = (f"rounding: float32 Δ {r.max_diff:.1e}, float64 Δ {d64:.1e}" if ok
                        else f"{r.status}; float64 too: {first}")
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = old_tf32
    # what the campaign runs (executor="auto", default TF32), timed: round 2's training over its sample-passes. On
    # the CPU "auto" is the sequential executor, just run (TF32 plays no part there).
    try:
        seq = res.paths["sequential"].engine
        eng = seq if not cuda and seq is not None else train(res.cfg.replace(executor="auto", cuda_graph=None), data)
        res.auto = eng.executor_name + ("+graph" if getattr(eng.executor, "capture", False) else "")
        res.rate = sample_passes(cfg)[0] / eng.history[-1]["train_time_s"]
    except Exception as e:  # noqa: BLE001
        res.paths["auto"] = PathResult(status=f"error: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
    for p in res.paths.values():
        p.engine = None
    return res


def _row(r: CaseResult, order: list[str]) -> str:
    c = r.plan_cfg
    model = c.model + ("{" + ",".join(f"{k}={v}" for k, v in c.model_kw.items()) + "}" if c.model_kw else "")
    cells = []
    for p in order:
        x = r.paths.get(p)
        if x is None:
            cells.append("—")
        elif x.status == "ok":
            cells.append(f"{x.s_per_round:.3f} s" + (f", Δ {x.max_diff:.1e}" if p != "sequential" else ""))
        else:
            cells.append(x.status.replace("|", "/"))
    mem = max((x.peak_mb for x in r.paths.values() if x.peak_mb == x.peak_mb), default=float("nan"))
    return (f"| {r.name} | {model} | {c.dataset} | {c.strategy} | {c.optimizer} | {c.num_clients}x{c.batch_size} | "
            + " | ".join(cells) + f" | {'—' if mem != mem else f'{mem:,.0f} MB'} | {r.auto} | "
            f"{'—' if r.rate != r.rate else f'{r.rate:,.0f}'} | {'FAIL' if r.failed else 'ok'} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="a CPU, tiny data, no graph path: the code path in seconds")
    ap.add_argument("--device", default=None, help="default: cuda, or cpu with --smoke")
    ap.add_argument("--datasets", nargs="+", default=None, help="default: fmnist cifar100 (--smoke: fmnist)")
    ap.add_argument("--only", nargs="*", default=None, help="strategies to check (default: all)")
    ap.add_argument("--budget", default="7m", help="start no case after this much time, e.g. 7m (exit status 2)")
    ap.add_argument("--costs", default=None, help=f"cost table to write (default {DEFAULT_COSTS}; --smoke: none)")
    a = ap.parse_args(argv)
    device = a.device or ("cpu" if a.smoke else "cuda")
    if device.startswith("cuda") and not torch.cuda.is_available():
        ap.error(f"--device {device!r}: CUDA is not available on this machine; run "
                 f"{as_typed('--smoke', 'make gpu-check SMOKE=1')} for the CPU check.")
    budget = parse_budget(a.budget)
    datasets = a.datasets or (["fmnist"] if a.smoke else ["fmnist", "cifar100"])
    todo = [(n, c) for n, c in cases(datasets) if not a.only or c.strategy in a.only]
    name = device_name(device)
    print(f"# gpu-check on {name}: {len(todo)} cases x {len(PATHS) - (not device.startswith('cuda'))} paths, "
          f"torch {torch.__version__}, commit {git_commit()}" + (" — SMOKE (tiny models and data)" if a.smoke else ""),
          flush=True)
    t0, results, not_run = time.monotonic(), [], []
    for n, c in todo:
        if time.monotonic() - t0 > budget:
            not_run.append(f"{n} ({c.strategy})")
            continue
        r = check(n, c, device, a.smoke)
        results.append(r)
        print(f"[gpu-check] {fmt_s(time.monotonic() - t0)}: {n} · {c.model} · {c.strategy}: "
              f"{'FAIL' if r.failed else 'ok'}", flush=True)
    order = [p for p in PATHS if device.startswith("cuda") or p != "graph"]
    print("\n| case | model | dataset | strategy | optimizer | clients x batch | "
          + " | ".join(f"{p} (s/round, Δ vs sequential)" for p in order)
          + " | peak GPU memory | auto path | sample-passes/s | verdict |")
    print("|" + ":--|" * 6 + ":--|" * len(order) + "--:|:--|--:|:--|")
    for r in results:
        print(_row(r, order))
    failed = [r for r in results if r.failed]
    rounding = sum(any(p.status.startswith("rounding") for p in r.paths.values()) for r in results)
    print(f"\n{len(results) - len(failed)} of {len(todo)} cases agree on every path; tolerances atol {ATOL}, rtol "
          f"{RTOL} (tests/test_cuda.py)" + (f"; {rounding} of them only in float64 (atol {ATOL64}, rtol {RTOL64}): "
                                            f"float32 rounding" if rounding else "")
          + f"; {fmt_s(time.monotonic() - t0)} in all.")
    if not_run:
        print(f"not run (budget {a.budget}): " + "; ".join(not_run))
    path = a.costs or (None if a.smoke else str(DEFAULT_COSTS))
    if path is not None:
        table = CostTable(path)
        stamp = f"gpu-check{' --smoke' if a.smoke else ''} {_dt.date.today().isoformat()} {git_commit()}"
        slowest: dict[str, tuple[float, Config]] = {}
        for r in results:
            if r.rate == r.rate and r.rate > 0 and not r.failed:
                k = cost_key(r.plan_cfg)
                if k not in slowest or 1 / r.rate > slowest[k][0]:
                    slowest[k] = (1 / r.rate, r.plan_cfg)
        added = [cost_key(cfg) for s, cfg in slowest.values() if table.add(name, device_type(device), cfg, s, stamp)]
        table.save()
        print(f"cost table {path}: {len(added)} measurement(s) of {name} ({', '.join(sorted(added))}); "
              f"{len(slowest) - len(added)} key(s) keep the times of finished runs")
    return 1 if failed else (2 if not_run else 0)


if __name__ == "__main__":
    sys.exit(main())
