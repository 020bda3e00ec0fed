"""Two execution choices for the quick scale on a CPU, each measured as a ratio within one run.

    python benchmarks/cpu_choices.py                  # both measurements, 5 interleaved repeats
    python benchmarks/cpu_choices.py --only precision --repeats 7

* ``precision``: one round of FedAvg (one local epoch) in each quick setup with ``precision="fp32"`` and ``"bf16"``
  (autocast forward), alternating, on all of this machine's threads; prints each repeat's bf16/fp32 time ratio and
  their median and min-max.
* ``processes``: two independent quick runs (``--rounds`` rounds each) as two single-thread processes at once vs one
  after the other with two threads; each child reports its training time (process start and data loading are paid
  once per worker in a campaign, so they are left out), and the ratio is the parallel pair's slower training time
  over the sum of the sequential pair's.

bf16 is adopted for a scale only if it is faster here *and* trains like fp32 (accuracy within the seed spread);
the faster way to run independent runs becomes the default of the campaign on a CPU. benchmarks/RESULTS.md has the
numbers.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import torch

from fedlib.companion.papers import preset
from fedlib.engine import Engine

SETUPS = {"fedintr (IntR CNN)": "fedintr", "fedcka (simple CNN)": "fedcka"}


def one_round(paper: str, precision: str, threads: int, seed: int = 0, rounds: int = 1) -> float:
    """Seconds of ``Engine.run`` for ``rounds`` one-epoch rounds of FedAvg in ``paper``'s quick setup."""
    torch.set_num_threads(threads)
    cfg = preset(paper, "quick", dataset="fmnist", precision=precision, rounds=rounds, local_epochs=1, seed=seed)
    eng = Engine(cfg, progress=False)
    t0 = time.perf_counter()
    eng.run()
    return time.perf_counter() - t0


def precision(repeats: int) -> None:
    threads = torch.get_num_threads()
    for name, paper in SETUPS.items():
        one_round(paper, "fp32", threads)  # warm-up (data load, kernels)
        ratios = []
        for _ in range(repeats):
            t32 = one_round(paper, "fp32", threads)
            t16 = one_round(paper, "bf16", threads)
            ratios.append(t16 / t32)
            print(f"  {name}: fp32 {t32:.2f} s, bf16 {t16:.2f} s, bf16/fp32 {t16 / t32:.2f}", flush=True)
        print(f"{name}: bf16/fp32 time median {statistics.median(ratios):.2f} (min {min(ratios):.2f}, max "
              f"{max(ratios):.2f}, {repeats} repeats, {threads} threads)", flush=True)


def _child(paper: str, seed: int, threads: int, rounds: int) -> list[str]:
    code = (f"import sys; sys.path.insert(0, 'benchmarks'); from cpu_choices import one_round; "
            f"print(one_round({paper!r}, 'fp32', {threads}, {seed}, {rounds}))")
    return [sys.executable, "-c", code]


def _train_s(p: subprocess.Popen) -> float:
    out, _ = p.communicate()
    if p.returncode:
        raise SystemExit(f"a benchmark child failed (exit {p.returncode})")
    return float(out.strip().splitlines()[-1])


def processes(repeats: int, rounds: int) -> None:
    for name, paper in SETUPS.items():
        ratios = []
        for _ in range(repeats):
            par = max(_train_s(p) for p in [subprocess.Popen(_child(paper, s, 1, rounds), stdout=subprocess.PIPE,
                                                             text=True) for s in (0, 1)])
            seq = sum(_train_s(subprocess.Popen(_child(paper, s, 2, rounds), stdout=subprocess.PIPE, text=True))
                      for s in (0, 1))
            ratios.append(par / seq)
            print(f"  {name}: 2 x 1-thread processes {par:.1f} s, 2 runs x 2 threads {seq:.1f} s "
                  f"(training, {rounds} rounds each)", flush=True)
        print(f"{name}: parallel/sequential training time median {statistics.median(ratios):.2f} "
              f"(min {min(ratios):.2f}, max {max(ratios):.2f}, {repeats} repeats)", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["precision", "processes"], default=None)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3, help="rounds per run in the processes measurement")
    a = ap.parse_args(argv)
    if a.repeats < 1:
        ap.error("--repeats must be >= 1")
    if a.only in (None, "precision"):
        precision(a.repeats)
    if a.only in (None, "processes"):
        processes(a.repeats, a.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
