"""How far a notebook's stored runs are from their plateau, read from their records (nothing is trained).

    python benchmarks/plateau_records.py 08                  # the plan's runs as planned
    python benchmarks/plateau_records.py 08 --rounds 40      # the same runs as stored at 40 rounds (an older plan)

For every planned run whose record is stored (``--rounds R``: the run's config at R rounds, the key a shorter plan
had), one line per artifact and method, per seed, sorted: the verdicts' plateau rule (:func:`fedlib.companion.verdicts.
plateau_rise`: a least-squares line through the second half of the curve, read as its rise over the last 20 % of
rounds; off the plateau above 1 point), the rule's earlier form (the median of the last 3 rounds minus that of the 3
ending at 80 %), and the residual spread about the line (the round-to-round noise). Personalized runs are read on
``personal_acc_mean``, the others on ``test_acc``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fedlib.companion.papers import PLANS, plan  # noqa: E402
from fedlib.companion.results import Store  # noqa: E402
from fedlib.companion.verdicts import PLATEAU_RISE, plateau_rise  # noqa: E402
from plateau_rule import median_rise  # noqa: E402 — the rule's earlier form, beside this script


def curve(record) -> dict[int, float]:
    metric = "personal_acc_mean" if any("personal_acc_mean" in h for h in record.history) else "test_acc"
    return {int(h["round"]): 100 * float(h[metric]) for h in record.history if h.get(metric) is not None}


def noise(acc: dict[int, float], rounds: int) -> float:
    """The residual spread about a least-squares line through rounds > R/2."""
    xs = np.array([r for r in sorted(acc) if r > rounds / 2], dtype=float)
    ys = np.array([acc[int(r)] for r in xs])
    if len(xs) < 3:
        return float("nan")
    slope, icpt = np.polyfit(xs, ys, 1)
    return float(np.std(ys - (slope * xs + icpt)))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebook", help=f"a notebook name or number prefix ({', '.join(sorted(PLANS))})")
    ap.add_argument("--scale", default="quick")
    ap.add_argument("--rounds", type=int, default=None, help="read the runs as stored at this many rounds")
    a = ap.parse_args(argv)
    name = next((n for n in sorted(PLANS) if n.startswith(a.notebook)), None)
    if name is None:
        ap.error(f"notebook {a.notebook!r}: none of {sorted(PLANS)} starts with it")
    store = Store.for_scale(a.scale)
    rows: dict[tuple[str, str], list[tuple[float, float, float]]] = defaultdict(list)
    for art, runs in plan(name, a.scale).items():
        for rid, cfg in runs.items():
            cfg = cfg.replace(rounds=a.rounds) if a.rounds else cfg
            rec = store.get(cfg)
            if rec is None:
                continue
            acc = curve(rec)
            rule = plateau_rise(acc, cfg.rounds)
            group = str(rid).rsplit("seed=", 1)[0].rstrip(" |/")
            rows[(art, group)].append((float("nan") if rule is None else rule, median_rise(acc, cfg.rounds),
                                       noise(acc, cfg.rounds)))
    print(f"{name} at {a.scale}" + (f", stored at {a.rounds} rounds" if a.rounds else "") +
          f": off the plateau above {PLATEAU_RISE} point(s); **bold** = off\n")
    print("| artifact | run | the rule (line): rise per seed | earlier form (3-round medians) | noise (median) |")
    print("|---|---|---|---|--:|")
    bold = lambda x: f"**{x:.2f}**" if x > PLATEAU_RISE else f"{x:.2f}"  # noqa: E731
    for (art, group), vals in sorted(rows.items()):
        vals.sort()
        rule = ", ".join(bold(r) for r, _, _ in vals)
        med = ", ".join(bold(m) for _, m, _ in sorted(vals, key=lambda v: v[1]))
        print(f"| {art} | {group} | {rule} | {med} | {np.median([n for *_, n in vals]):.2f} |")


if __name__ == "__main__":
    main()
