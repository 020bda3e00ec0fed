"""Do the quick presets end on their plateau? FedAvg's learning curve in each paper's quick setup, past its end.

    python benchmarks/quick_scale.py                        # every setup, seeds 0-2, to 1.5x the quick rounds
    python benchmarks/quick_scale.py --setups fedintr --seeds 0 --horizon 2.0 --out curves.json
    python benchmarks/quick_scale.py --table benchmarks/quick_scale.json   # the table again, from stored curves

For each setup, FedAvg is trained with the quick preset's settings (global test accuracy after every round) for
``horizon`` times its rounds; with a constant learning rate the first R rounds are exactly the quick run. The
table gives, at the quick preset's last round R: local SGD steps per client in round 1 and in all, sample-passes,
FedAvg's accuracy (mean over seeds of the median of the last 3 rounds), the rise over the last 20 % of its rounds
(:func:`fedlib.companion.verdicts.plateau_rise`, the line through the second half; the plateau criterion: at most 1 point;
tables in benchmarks/RESULTS.md before 2026-11-26 used the 3-round medians at each end), what the longer horizon
would still add, and seconds per round.
Curves are written to ``--out`` (JSON) after every run, so an interrupted measurement keeps what finished.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from fedlib.companion.papers.fedcka.plans import QUICK_EPOCH_ROUNDS, QUICK_ROUNDS
from fedlib.companion.papers.fedintr.plans import FEDINTR_FIG5_ROUNDS, FEDINTR_TABLE3_ROUNDS
from fedlib.companion.papers.fedshibu.plans import FEDSHIBU_QUICK_ROUNDS as FEDSHIBU_ROUNDS
from fedlib.companion.presets import preset
from fedlib.engine import Engine
from fedlib.schedule import num_batches
from fedlib.companion.verdicts import plateau_rise

# the setup each paper's global-model claims use; FedSHIBU's claims are on personalized accuracy (FedBABU with
# FedSHIBU's head at s = 5, as notebook 08 runs it): its curve is the mean accuracy over clients after fine-tuning
SETUPS: dict[str, dict[str, Any]] = {
    "fedintr": dict(dataset="fmnist"),
    "fedcka": dict(dataset="fmnist"),
    "fedshibu": dict(dataset="fmnist", strategy="fedbabu", strategy_kw={"head": "dense"}),
    "feder": dict(dataset="fmnist"),
    # Table 4.2's AdamP row (FedAvg): the thesis's curve rises fast, then falls (Fig. 4.8)
    "feder-adamp": dict(preset="feder", dataset="fmnist", optimizer="adamp"),
    # notebook 03's Table 2 columns α = 0.1, 0.5, 1 with FedCKA's preset: FedAvg, and at α = 0.1 MOON (μ = 10),
    # the method furthest from its plateau at α = 5 (the same configs as the plan's runs: the curve says the key)
    "fedcka-a0.1": dict(preset="fedcka", dataset="fmnist", partition_kw={"beta": 0.1}, rounds=QUICK_ROUNDS[0.1]),
    "fedcka-a0.5": dict(preset="fedcka", dataset="fmnist", partition_kw={"beta": 0.5}, rounds=QUICK_ROUNDS[0.5]),
    "fedcka-a1": dict(preset="fedcka", dataset="fmnist", partition_kw={"beta": 1.0}, rounds=QUICK_ROUNDS[1.0]),
    "moon-a0.1": dict(preset="fedcka", dataset="fmnist", partition_kw={"beta": 0.1}, strategy="moon",
                      strategy_kw={"mu": 10.0}),
    # notebook 03's Table 2: MOON (μ = 10) at α = 5 and 0.5, the one method whose runs end off their plateau there
    "moon-a5": dict(preset="fedcka", dataset="fmnist", partition_kw={"beta": 5.0}, strategy="moon",
                    strategy_kw={"mu": 10.0}, rounds=QUICK_ROUNDS[5.0]),
    "moon-a0.5": dict(preset="fedcka", dataset="fmnist", partition_kw={"beta": 0.5}, strategy="moon",
                      strategy_kw={"mu": 10.0}, rounds=QUICK_ROUNDS[0.5]),
    # notebook 05's Table III at β = 0.1 (FedIntR's preset, Dirichlet β = 0.1): the rounds that plan runs at β = 0.1
    "fedintr-b0.1": dict(preset="fedintr", dataset="fmnist", partition_kw={"beta": 0.1, "convention": "fedintr"},
                         rounds=FEDINTR_TABLE3_ROUNDS["quick"][0.1]),
    # notebook 06's Fig. 5 at E = 1 (FedIntR's preset, one local epoch): the rounds that plan runs at E = 1
    "fedintr-e1": dict(preset="fedintr", dataset="fmnist", local_epochs=1,
                       rounds=FEDINTR_FIG5_ROUNDS["quick"][1]),
    # notebook 03's local-epoch sweep below the preset's E (FedCKA's preset at α = 5, one and two local epochs), and
    # FedCKA (μ = 3) itself at E = 1, the sweep's slowest setting: the rounds that plan runs them
    **{f"fedcka-e{e}": dict(preset="fedcka", dataset="fmnist", partition_kw={"beta": 5.0}, local_epochs=e,
                            rounds=r) for e, r in QUICK_EPOCH_ROUNDS.items()},
    "fedcka-cka-e1": dict(preset="fedcka", dataset="fmnist", partition_kw={"beta": 5.0}, local_epochs=1,
                          rounds=QUICK_EPOCH_ROUNDS[1], strategy="fedcka", strategy_kw={"mu": 3.0}),
    # notebook 08's Table 1 at s = 2 shards per user: FedAvg (personalized accuracy of the global model), the one
    # method of that level whose runs end off their plateau (the plan's config: the curve says the key)
    "fedshibu-avg-s2": dict(preset="fedshibu", dataset="fmnist", strategy="fedavg", strategy_kw={},
                            partition_kw={"shards_per_user": 2}, rounds=FEDSHIBU_ROUNDS[2], eval_every=1),
    # and FedBABU at s = 5 and 10, where one seed of five ends just off its plateau
    **{f"fedbabu-s{s}": dict(preset="fedshibu", dataset="fmnist", strategy="fedbabu",
                            strategy_kw={"head": "dense", "ft_select": "best"}, partition_kw={"shards_per_user": s},
                            rounds=FEDSHIBU_ROUNDS[s], eval_every=1) for s in (5, 10)},
}


def smooth(acc: list[float], i: int) -> float:
    """Median of the 3 rounds ending at index ``i`` (fewer at the start)."""
    return statistics.median(acc[max(0, i - 2): i + 1])


def quick_config(setup: str, seed: int):
    """The quick run a setup measures (its preset: the setup's name unless it names one)."""
    kw = dict(SETUPS[setup])
    return preset(kw.pop("preset", setup), "quick", seed=seed, **kw)


def measure(setup: str, seed: int, horizon: float, threads: int) -> dict[str, Any]:
    torch.set_num_threads(threads)
    q = quick_config(setup, seed)
    long = q.replace(rounds=math.ceil(q.rounds * horizon), eval_every=1, lr_milestones=q.lr_milestones)
    eng = Engine(long)  # one line per round: a curve to 120 rounds takes most of an hour on one thread
    sizes = [len(ix) for ix in eng.partition.client_indices]
    steps = statistics.median(num_batches(n, q.batch_size, q.drop_last) for n in sizes) * q.local_epochs
    t0 = time.perf_counter()
    eng.run()
    return {"setup": setup, "seed": seed, "quick_rounds": q.rounds, "rounds": long.rounds, "key": q.key(),
            "precision": q.precision, "steps_round1": steps, "sample_passes_per_round": q.local_epochs * sum(sizes),
            "acc": [100 * h["personal_acc_mean" if q.personal_eval else "test_acc"] for h in eng.history],
            "wall_s": time.perf_counter() - t0,
            "threads": threads, "lr_milestones": list(q.lr_milestones)}


def table(curves: list[dict[str, Any]], at: dict[str, int] | None = None) -> str:
    """The table of ``curves``; ``at={setup: R}`` reads a setup's stored curves at R rounds instead of their quick
    rounds (a constant learning rate makes the first R rounds of a longer curve exactly the R-round run)."""
    at = at or {}
    curves = [{**c, "quick_rounds": at.get(c["setup"], c["quick_rounds"])} for c in curves
              if at.get(c["setup"], c["quick_rounds"]) <= len(c["acc"])]
    rows = ["| setup | precision | seeds | steps/client: round 1 | all | sample-passes | FedAvg at R (%) | rise over "
            "last 20 % (points) | plateau | +to horizon | s / round |", "|" + "---|" * 11]
    for setup, r in dict.fromkeys((c["setup"], c["quick_rounds"]) for c in curves):
        cs = [c for c in curves if (c["setup"], c["quick_rounds"]) == (setup, r)]
        at = [statistics.median(c["acc"][r - 3: r]) for c in cs]
        rise = [plateau_rise(dict(enumerate(c["acc"][:r], start=1)), r) for c in cs]
        more = [smooth(c["acc"], len(c["acc"]) - 1) - smooth(c["acc"], r - 1) for c in cs]
        ok = max(rise) <= 1.0
        spr = sum(c["wall_s"] / c["rounds"] for c in cs) / len(cs)
        rows.append(f"| {setup} (R = {r}) | {cs[0]['precision']} | {len(cs)} | {cs[0]['steps_round1']:.0f} | "
                    f"{cs[0]['steps_round1'] * r:.0f} | {cs[0]['sample_passes_per_round'] * r / 1e3:.0f}k | "
                    f"{statistics.mean(at):.2f} ± {statistics.pstdev(at):.2f} | {max(rise):+.2f} (max) | "
                    f"{'yes' if ok else 'NO'} | {statistics.mean(more):+.2f} by round {cs[0]['rounds']} | {spr:.1f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--setups", default=",".join(SETUPS), help=f"comma-separated, from {sorted(SETUPS)}")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--horizon", type=float, default=1.5, help="train this many times the quick rounds (>= 1)")
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--out", type=Path, default=None, help="JSON file of curves (appended, resumable)")
    ap.add_argument("--table", nargs="*", type=Path, default=None, help="print the table of stored curves and exit")
    ap.add_argument("--at", nargs="*", default=[], help="with --table: read setups at other rounds, e.g. fedintr=30")
    a = ap.parse_args(argv)
    if a.table is not None:
        at = {k: int(v) for k, v in (x.split("=") for x in a.at)}
        print(table([c for p in a.table for c in json.loads(p.read_text())], at))
        return 0
    setups = a.setups.split(",")
    bad = [s for s in setups if s not in SETUPS]
    if bad or a.horizon < 1:
        ap.error(f"--setups {bad} unknown (valid: {sorted(SETUPS)})" if bad else "--horizon must be >= 1")
    curves = json.loads(a.out.read_text()) if a.out and a.out.exists() else []
    done = {(c["setup"], c["seed"], c["key"]) for c in curves}
    for setup in setups:
        for seed in map(int, a.seeds.split(",")):
            if (setup, seed, quick_config(setup, seed).key()) in done:
                continue
            c = measure(setup, seed, a.horizon, a.threads)
            print(f"{setup} seed {seed}: " + " ".join(f"{x:.1f}" for x in c["acc"]) + f" ({c['wall_s']:.0f} s)",
                  flush=True)
            curves.append(c)
            if a.out:
                a.out.write_text(json.dumps(curves, indent=1))
    print(table(curves))
    return 0


if __name__ == "__main__":
    sys.exit(main())
