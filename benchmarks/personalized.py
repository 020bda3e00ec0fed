"""The server and evaluation costs of FedSHIBU next to its local training, per round.

    python benchmarks/personalized.py [--device cpu|cuda] [--clients 100] [--reps 3] [--executor auto]
                                      [--ft-select first|best] [--n-train N]

One FedSHIBU round in the paper's shape (100 clients, full participation, shards s = 5, batch 50, one local
epoch) on Fashion-MNIST (the FedIntR CNN on a CPU; ``--model resnet18`` for the paper's network on a GPU). Timed
separately, in the same process:

* ``local training`` — every client's local epoch (the executor ``--executor`` picks);
* ``representations`` — every client's D̂_i (its body's output on n = 100 of its own samples);
* ``CRSM + mixing`` — the all-pairs CKA matrix (one batched call) and every client's body (one weighted sum per
  tensor);
* ``head fine-tuning`` — every client's 5-epoch head fine-tuning before its personalized evaluation (FedBABU's,
  at the papers' lr and ``--ft-select``'s ladder): on the head's input features computed once per client
  (``fedlib.finetune.HeadTuner``, where the model allows: the FedIntR CNN does, batch-normalized ResNets do not),
  one job (client, lr) at a time and all of them stacked (``HeadTuner.many``: one vmapped step for every client
  and lr of the ladder), and through the executor (the whole model's forward pass at every step), with the
  ratios.

Ratios are to local training (medians over ``--reps``). Aggregation runs once a round and must stay small next to
local training; fine-tuning runs at every personalized evaluation.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fedlib.companion.papers import preset  # noqa: E402
from fedlib.crsm import crsm, mix, row_weights  # noqa: E402
from fedlib.engine import Engine  # noqa: E402
from fedlib.finetune import HeadTuner  # noqa: E402
from fedlib.companion.results import device_name, git_commit  # noqa: E402


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


stacked = HeadTuner.many


def one_at_a_time(self: HeadTuner, jobs: list) -> list:
    return [self(*j) for j in jobs]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--model", default="intr_cnn")
    ap.add_argument("--executor", default="auto")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ft-select", default="first", choices=["first", "best"])
    ap.add_argument("--n-train", type=int, default=None, help="training images (default: all)")
    a = ap.parse_args()
    dev = torch.device(a.device)
    print(f"fedlib personalized-aggregation benchmark — {datetime.date.today()}, commit {git_commit()}, torch "
          f"{torch.__version__}, {device_name(dev)}, {a.clients} clients, model {a.model}, reps={a.reps}\n")
    cfg = preset("fedshibu", "paper", dataset="fmnist", model=a.model, num_clients=a.clients, rounds=2,
                 device=a.device, executor=a.executor, lr=0.01, strategy_kw={"ft_select": a.ft_select}, n_train=a.n_train)
    eng = Engine(cfg, progress=False)
    strat, g = eng.strategy, eng.global_params
    ctxs = [eng.context(c, 0) for c in range(eng.n_clients)]
    starts = [strat.client_start(c, g) for c in ctxs]
    times: dict[str, list[float]] = {k: [] for k in ("local training", "representations", "CRSM + mixing",
                                                     "head fine-tuning (cached features, one at a time)",
                                                     "head fine-tuning (cached features)",
                                                     "head fine-tuning (executor)")}

    def timed(name: str, fn):
        _sync(dev)
        t0 = time.perf_counter()
        out = fn()
        _sync(dev)
        times[name].append(time.perf_counter() - t0)
        return out

    eng.train(ctxs[:1], starts[:1])  # warm-up
    for _ in range(a.reps):
        results = timed("local training", lambda: eng.train(ctxs, starts))
        uploads = [r.params for r in results]
        feats = timed("representations", lambda: [c.features(p, (strat._tap,), strat.options.n)[0]
                                                  for c, p in zip(ctxs, uploads)])
        timed("CRSM + mixing", lambda: mix(uploads, row_weights(crsm(feats, "linear")), list(uploads[0])))
        everyone = list(range(eng.n_clients))
        HeadTuner.many = one_at_a_time
        timed("head fine-tuning (cached features, one at a time)", lambda: eng.personalize(everyone))
        HeadTuner.many = stacked
        timed("head fine-tuning (cached features)", lambda: eng.personalize(everyone))
        timed("head fine-tuning (executor)", lambda: eng.personalize(everyone, cached=False))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"executor: {eng.executor_name} (training and the executor's fine-tuning), ft_select {a.ft_select}, "
          f"load average {os.getloadavg()[0]:.1f}\n")
    print("| step | s / round | vs local training |")
    print("|:--|--:|--:|")
    for k, v in med.items():
        print(f"| {k} | {v:.3f} | {v / med['local training']:.3f}x |")
    ft = med["head fine-tuning (executor)"] / med["head fine-tuning (cached features)"]
    one = med["head fine-tuning (cached features, one at a time)"] / med["head fine-tuning (cached features)"]
    print(f"\nhead fine-tuning: cached features {ft:.1f}x faster than the executor's path; stacked {one:.1f}x "
          f"faster than one job at a time")
    print("\nIndividual runs (s): " + "; ".join(f"{k} " + "/".join(f"{t:.2f}" for t in v) for k, v in times.items()))


if __name__ == "__main__":
    main()
