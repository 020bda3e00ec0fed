"""How often the plateau rule calls a run off its plateau, on simulated curves whose truth is known.

    python benchmarks/plateau_rule.py

Curves: ``a(r) = top - gap * exp(-r / tau) + noise``, with round-to-round noise independent and normal (sd ``sd``,
points), evaluated every round to ``R``. ``gap`` and ``tau`` set how much the curve still rises over its last 20 %
of rounds (the truth, ``true rise``); ``gap = 0`` is a run on its plateau, whose only movement is noise. Two
readings, both against the rule's 1 point:

* ``medians`` — the rule's earlier form (:func:`median_rise`): the median of the last 3 rounds minus that of the 3
  ending at round(0.8 R);
* ``fit`` — the rule now (:func:`fedlib.companion.verdicts.plateau_rise`): a least-squares line through rounds (R/2, R], read
  as its rise over the last 20 % of rounds.

Printed: per noise level and true rise, the share of 4,000 simulated runs each reading calls off the plateau, and
the share of a 10-run comparison (5 seeds a side) that would read "not testable" for noise alone (1 - (1 - p)^10).
The noise levels are the residual spreads measured about the fitted lines of the quick records (0.2-0.5 points for
most setups; about 1.5 for FedAvg at s = 5 and 2 for FedCKA at α = 0.1).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from fedlib.companion.verdicts import PLATEAU_RISE, plateau_rise


def median_rise(acc: dict[int, float], rounds: int) -> float:
    """The plateau rule's earlier form: the median of rounds R-2..R minus that of the 3 rounds ending at round(0.8 R)
    (``acc``: ``{round: accuracy}``; NaN where a round is missing)."""
    end, start = rounds, max(3, round(0.8 * rounds))
    med = lambda r: float(np.median([acc.get(i, np.nan) for i in range(r - 2, r + 1)]))  # noqa: E731
    return med(end) - med(start)


def simulate(rounds: int, sd: float, rise: float, n: int, rng: np.random.Generator) -> tuple[float, float]:
    """Shares of ``n`` runs that each reading calls off the plateau, for a curve whose true rise over its last 20 %
    of rounds is ``rise`` (tau = R / 3: a concave approach)."""
    r = np.arange(1, rounds + 1)
    tau = rounds / 3
    start = round(0.8 * rounds)
    gap = rise / (math.exp(-start / tau) - math.exp(-rounds / tau)) if rise else 0.0
    base = 80.0 - gap * np.exp(-r / tau)
    med = fit = 0
    for _ in range(n):
        acc = dict(zip(r.tolist(), (base + rng.normal(0.0, sd, rounds)).tolist()))
        med += median_rise(acc, rounds) > PLATEAU_RISE
        fit += plateau_rise(acc, rounds) > PLATEAU_RISE
    return med / n, fit / n


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=4000)
    ap.add_argument("--rounds", type=int, nargs="+", default=[20, 40, 80])
    ap.add_argument("--sd", type=float, nargs="+", default=[0.3, 0.5, 1.0, 1.5, 2.0])
    ap.add_argument("--rise", type=float, nargs="+", default=[0.0, 0.5, 1.5, 3.0])
    a = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"Share called off the plateau (> {PLATEAU_RISE} point), {a.runs} simulated runs a cell; "
          "\"10 runs\": a 5-seed-a-side comparison reading not testable\n")
    print("| R | noise sd | true rise | medians | fit | medians, 10 runs | fit, 10 runs |")
    print("|--:|--:|--:|--:|--:|--:|--:|")
    for rounds in a.rounds:
        for sd in a.sd:
            for rise in a.rise:
                m, f = simulate(rounds, sd, rise, a.runs, rng)
                ten = lambda p: 1 - (1 - p) ** 10  # noqa: E731
                print(f"| {rounds} | {sd:g} | {rise:g} | {m:.1%} | {f:.1%} | {ten(m):.0%} | {ten(f):.0%} |")


if __name__ == "__main__":
    main()
