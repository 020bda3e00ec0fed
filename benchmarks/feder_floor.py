"""Does FedER differ from FedAvg at quick scale? Its floored share and FedAvg's plateau, round by round.

    python benchmarks/feder_floor.py --out benchmarks/feder_floor.json            # the quick preset, Adam, seed 0
    python benchmarks/feder_floor.py --rounds 12 --set n_train=25600 model_kw.width=8 --out candidate.json
    python benchmarks/feder_floor.py --table benchmarks/feder_floor.json          # the table again

FedER's Alg. 4 floors each client's effective rank of a conv layer at 0.001. Where EVBMF keeps no singular value
of a layer (a weight near its random initialization: pure noise has EVBMF rank 0) or keeps one (entropy 0), the
client sits at the floor; where every client of a layer sits there, the layer is averaged uniformly, as FedAvg
does. The floored share (``feder_floored`` in FedER's history: the share of client-layers at the floor) says how
much of a run is FedAvg in disguise. This trains FedER and FedAvg (Adam, no StepLR: Table 4.2's first row) with
the same seed and prints, per round: both test accuracies, the floored share, and local SGD steps per client so
far. The plateau criterion is quick_scale.py's: FedAvg rises by at most 1 point (median of 3 rounds) over the
last 20 % of its rounds. Curves go to ``--out`` (JSON) after every run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from fedlib.companion.papers import preset
from fedlib.engine import Engine
from fedlib.schedule import num_batches


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def overrides(pairs: list[str]) -> dict[str, Any]:
    """``["n_train=25600", "model_kw.width=8"]`` → ``{"n_train": 25600, "model_kw": {"width": 8}}``."""
    out: dict[str, Any] = {}
    for p in pairs:
        key, eq, val = p.partition("=")
        if not eq:
            raise SystemExit(f"--set {p!r}: expected NAME=VALUE, e.g. n_train=25600 or model_kw.width=8")
        head, _, sub = key.partition(".")
        if sub:
            out.setdefault(head, {})[sub] = _value(val)
        else:
            out[head] = _value(val)
    return out


def measure(strategy: str, seed: int, rounds: int | None, threads: int, over: dict[str, Any]) -> dict[str, Any]:
    torch.set_num_threads(threads)
    q = preset("feder", "quick", dataset="fmnist", strategy=strategy, seed=seed)
    over = {**over, "model_kw": {**q.model_kw, **over.get("model_kw", {})}}
    cfg = q.replace(**over, eval_every=1, **({"rounds": rounds} if rounds else {}))
    eng = Engine(cfg, progress=False)
    sizes = [len(ix) for ix in eng.partition.client_indices]
    steps = statistics.median(num_batches(n, cfg.batch_size, cfg.drop_last) for n in sizes) * cfg.local_epochs
    t0 = time.perf_counter()
    eng.run()
    return {"strategy": strategy, "seed": seed, "rounds": cfg.rounds, "key": cfg.key(), "overrides": over,
            "steps_per_round": steps, "acc": [100 * h["test_acc"] for h in eng.history],
            "floored": [h.get("feder_floored") for h in eng.history], "wall_s": time.perf_counter() - t0,
            "threads": threads}


def table(curves: list[dict[str, Any]]) -> str:
    rows = []
    for c in curves:
        r = c["rounds"]
        med = [statistics.median(c["acc"][max(0, i - 2): i + 1]) for i in range(r)]
        rise = med[-1] - med[max(0, round(0.8 * r) - 1)]
        fl = "" if c["floored"][0] is None else " floored " + " ".join(f"{f:.2f}" for f in c["floored"])
        rows.append(f"{c['strategy']} seed {c['seed']} {c['overrides']}: {c['steps_per_round']:.0f} steps/round, "
                    f"{c['wall_s'] / r:.1f} s/round; acc " + " ".join(f"{a:.1f}" for a in c["acc"])
                    + f"; rise over last 20 %: {rise:+.2f}" + fl)
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strategies", default="feder,fedavg")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=None, help="default: the quick preset's")
    ap.add_argument("--set", nargs="*", default=[], help="Config overrides NAME=VALUE (model_kw.width=8)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--table", nargs="*", type=Path, default=None)
    a = ap.parse_args(argv)
    if a.table is not None:
        print(table([c for p in a.table for c in json.loads(p.read_text())]))
        return 0
    curves = json.loads(a.out.read_text()) if a.out and a.out.exists() else []
    for s in a.strategies.split(","):
        c = measure(s, a.seed, a.rounds, a.threads, overrides(a.set))
        print(table([c]), flush=True)
        curves.append(c)
        if a.out:
            a.out.write_text(json.dumps(curves, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
