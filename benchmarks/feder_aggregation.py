"""FedER's server-side cost on ResNet-18 against one round of local training (ratios measured in one process).

    python benchmarks/feder_aggregation.py [--steps 3] [--reps 2] [--device cpu]

The thesis's setup (§4.2): CIFAR ResNet-18, CIFAR-100 (3×32×32, 100 classes), 4 clients, batch 128, Adam, one
local epoch per round: 50000 / 4 = 12500 images, 98 steps per client, 392 per round. A round's local training time
is extrapolated from the median of ``--steps`` measured steps (after one warmup step; a full round is ~25 minutes
on a 2-core CPU); the aggregation times are measured whole: FedER (EVBMF + entropy of every conv layer of the 4
clients, both unfoldings, then the layer-wise weighted average), its stable-rank variant, and FedAvg's average.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fedlib.models import build_model  # noqa: E402
from fedlib.params import clone_params  # noqa: E402
from fedlib.companion.results import device_name, git_commit  # noqa: E402
from fedlib.strategies import FedER, weighted_average  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=3, help="measured local steps (batch 128)")
    ap.add_argument("--reps", type=int, default=2, help="measured aggregations of each kind")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    dev = torch.device(args.device)
    torch.manual_seed(0)
    clients, batch, n_train = 4, 128, 50000
    steps_per_round = clients * math.ceil(n_train / clients / batch)

    model = build_model("resnet18", (3, 32, 32), 100).to(dev)
    if dev.type == "cpu":
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    x = torch.randn(batch, 3, 32, 32, device=dev)
    y = torch.randint(0, 100, (batch,), device=dev)
    times = []
    for i in range(args.steps + 1):
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        if i:
            times.append(time.perf_counter() - t0)
    step_s = statistics.median(times)
    round_s = step_s * steps_per_round

    base = clone_params(model.state_dict())
    g = torch.Generator(device="cpu").manual_seed(1)
    uploads = [{k: (v + 0.01 * torch.randn(v.shape, generator=g).to(v) * v.std() if v.is_floating_point()
                    and v.numel() > 1 else v.clone()) for k, v in base.items()} for _ in range(clients)]
    w = torch.full((clients,), 1.0 / clients, dtype=torch.float64, device=dev)
    kinds = {"FedAvg (weighted average)": lambda: weighted_average(uploads, w),
             "FedER, entropy of EVBMF-kept values (Alg. 4)": lambda: FedER().aggregate(0, base, uploads, w, [])[0],
             "FedER, stable rank (Appendix A)": lambda: FedER(metric="stable_rank").aggregate(0, base, uploads, w, [])[0]}
    agg = {}
    for name, fn in kinds.items():
        ts = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        agg[name] = statistics.median(ts)

    n_conv = sum(v.dim() == 4 for v in base.values())
    print(f"# commit {git_commit()} · {device_name(dev)} · torch {torch.__version__} · ResNet-18 (CIFAR, 100 classes), "
          f"{n_conv} conv layers, {clients} clients\n")
    print(f"local step (batch {batch}, Adam): median of {len(times)} = {step_s:.3f} s; round = {steps_per_round} "
          f"steps ≈ {round_s:.0f} s (extrapolated)\n")
    print("| server update | s / round | share of a round's local training |")
    print("|:--|--:|--:|")
    for name, s in agg.items():
        print(f"| {name} | {s:.2f} | {100 * s / round_s:.2f} % |")


if __name__ == "__main__":
    main()
