"""Benchmarks for fedlib.kernels (ratios measured in one process; not a test).

    python benchmarks/kernels.py [--quick]

(1) linear CKA gram vs feature form over n x d, and whether form="auto" picks the faster one;
(2) all-pairs ``cka_matrix`` vs the pairwise Python loop of ``linear_cka`` (12 reps, n = 512);
(3) EVBMF + effective rank over every conv layer of a CIFAR ResNet-18.
Timings: one warmup call, then the median of round-robin ``time.perf_counter`` measurements.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fedlib import kernels as K  # noqa: E402


def _sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def compare(fns: dict[str, Callable[[], object]], min_rounds: int = 3, budget_s: float = 0.3,
            max_rounds: int = 50, warmup: bool = True) -> dict[str, float]:
    """Median seconds per call of each function, measured round-robin (one call of each per round, so
    background load hits all of them alike) after one warmup call each; at least ``min_rounds`` rounds,
    more while the total stays under ``budget_s``.  ``warmup=False`` when the caller already warmed up."""
    for f in fns.values() if warmup else ():
        f()
    times: dict[str, list[float]] = {k: [] for k in fns}
    start = time.perf_counter()
    rounds = 0
    while rounds < min_rounds or (time.perf_counter() - start < budget_s and rounds < max_rounds):
        for k, f in fns.items():
            _sync()
            t0 = time.perf_counter()
            f()
            _sync()
            times[k].append(time.perf_counter() - t0)
        rounds += 1
    return {k: statistics.median(v) for k, v in times.items()}


def bench_forms(quick: bool, device: torch.device) -> None:
    print("## (1) linear_cka: gram vs feature form (x, y both n x d, float64)\n")
    print("|    n |    d | gram ms | feature ms | faster  | auto picks | auto/best |")
    print("|-----:|-----:|--------:|-----------:|:--------|:-----------|----------:|")
    ratios = []
    for n in (128, 512, 2048):
        for d in (64, 512, 4096):
            if quick and n * d > 2048 * 512:
                continue
            g = torch.Generator().manual_seed(n + d)
            x = torch.randn(n, d, generator=g).to(device)
            y = (x[:, : d // 2].repeat(1, 2) + torch.randn(n, d, generator=g).to(device))
            t = compare(
                {f: (lambda f=f: K.linear_cka(x, y, form=f)) for f in ("gram", "feature", "auto")},
                min_rounds=5, budget_s=0.5 if quick else 2.0,
            )
            best = min(t["gram"], t["feature"])
            faster = "gram" if t["gram"] <= t["feature"] else "feature"
            picked = K.choose_cka_form(n, d, d)
            ratios.append(t["auto"] / best)
            print(
                f"| {n:4d} | {d:4d} | {1e3 * t['gram']:7.2f} | {1e3 * t['feature']:10.2f} | {faster:7s} "
                f"| {picked:10s} | {t['auto'] / best:9.2f} |"
            )
    print(f"\nauto / best: median {statistics.median(ratios):.2f}, max {max(ratios):.2f}\n")


def bench_matrix(quick: bool, device: torch.device) -> None:
    n = 512
    widths = [64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 4096]
    g = torch.Generator().manual_seed(0)
    base = torch.randn(n, 64, generator=g)
    reps = [(base @ torch.randn(64, w, generator=g) + torch.randn(n, w, generator=g)).to(device) for w in widths]
    r = len(reps)

    def full_loop() -> torch.Tensor:
        return torch.stack([torch.stack([K.linear_cka(a, b) for b in reps]) for a in reps])

    def upper_loop() -> torch.Tensor:
        out = torch.zeros(r, r, dtype=torch.float64, device=device)
        for i in range(r):
            for j in range(i, r):
                out[i, j] = out[j, i] = K.linear_cka(reps[i], reps[j])
        return out

    mat = K.cka_matrix(reps)
    err = (mat - full_loop()).abs().max().item()
    t = compare({"matrix": lambda: K.cka_matrix(reps), "full": full_loop, "upper": upper_loop},
                min_rounds=2 if quick else 5, budget_s=0.0, warmup=False)  # warmed up just above
    t_mat, t_full, t_upper = t["matrix"], t["full"], t["upper"]
    print(f"## (2) cka_matrix: {r} reps x {n} samples, widths {widths[0]}..{widths[-1]} (float64)\n")
    print("| method                         | seconds | cka_matrix speed-up |")
    print("|:-------------------------------|--------:|--------------------:|")
    print(f"| cka_matrix (one batched matmul) | {t_mat:7.3f} |                1.0x |")
    print(f"| loop over all {r * r} pairs          | {t_full:7.3f} | {t_full / t_mat:18.1f}x |")
    print(f"| loop over {r * (r + 1) // 2} pairs i <= j       | {t_upper:7.3f} | {t_upper / t_mat:18.1f}x |")
    print(f"\nmax |cka_matrix - loop| = {err:.1e}\n")


def _resnet18() -> tuple[torch.nn.Module, str]:
    try:
        from fedlib.models import build_model

        return build_model("resnet18", (3, 32, 32), 10), "fedlib.models resnet18"
    except Exception:  # noqa: BLE001 - fall back to torchvision
        import torchvision

        return torchvision.models.resnet18(num_classes=10), "torchvision resnet18"


def bench_evbmf(quick: bool) -> None:
    model, name = _resnet18()
    convs = [(n, m.weight.detach()) for n, m in model.named_modules() if isinstance(m, torch.nn.Conv2d)]
    def run_all() -> list[float]:
        return [K.layer_metric(w, "erank", denoise="evbmf") for _, w in convs]

    def svd_only() -> None:
        for _, w in convs:
            for mode in ("input", "output"):
                m = K.unfold_conv(w.double(), mode)
                K._svdvals(m if m.shape[0] <= m.shape[1] else m.T)  # the SVD evbmf runs

    values = run_all()
    svd_only()
    t = compare({"all": run_all, "svd": svd_only}, min_rounds=1 if quick else 3, budget_s=0.0, warmup=False)
    t_all, t_svd = t["all"], t["svd"]
    per = [compare({"one": lambda w=w: K.layer_metric(w, "erank")}, 1, 0.0, warmup=False)["one"] for _, w in convs]
    worst = max(range(len(convs)), key=per.__getitem__)
    print(f"## (3) EVBMF + effective rank, every conv layer of {name} (random init)\n")
    print("| conv layers | total s | per layer ms | slowest layer (ms)                 | SVD share |")
    print("|------------:|--------:|-------------:|:-----------------------------------|----------:|")
    slow = f"{convs[worst][0]} {tuple(convs[worst][1].shape)} {1e3 * per[worst]:.0f}"
    print(f"| {len(convs):11d} | {t_all:7.2f} | {1e3 * t_all / len(convs):12.1f} | {slow:34s} | {t_svd / t_all:9.0%} |")
    print(f"\nEVBMF-denoised erank at init: {sum(v == 0 for v in values)}/{len(values)} layers are 0 (pure noise)\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller grid and fewer repeats (< 60 s)")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    device = torch.device(args.device)
    print(f"torch {torch.__version__}, device {device}, threads {torch.get_num_threads()}, quick={args.quick}\n")
    t0 = time.perf_counter()
    bench_forms(args.quick, device)
    bench_matrix(args.quick, device)
    bench_evbmf(args.quick)
    print(f"total benchmark time {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
