"""How well the cost table estimates the stored runs: measured over estimated time per (strategy, model, E).

Two tables are learnt from the same records (in memory; ``results/costs.json`` is not touched): one counting a
round as its training and test forwards only, one also counting the reference models' forwards
(:func:`fedlib.companion.costs.reference_passes`, ``REF_FORWARD`` each). A ratio of 1.00 is a perfect estimate; each key's
estimate is the median over its runs, so a ratio measures how far a setting sits from the others of its key.

    python benchmarks/cost_model.py [--scale quick]
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from unittest import mock

from fedlib.companion import costs
from fedlib.config import Config
from fedlib.companion.results import Store


def ratios(records: list, ref_forward: float) -> dict[tuple, list[float]]:
    """Per (strategy, model, local epochs): each CPU record's measured over estimated seconds."""
    with mock.patch.object(costs, "REF_FORWARD", ref_forward):
        table = costs.CostTable(None)
        table.learn_all(records)
        out: dict[tuple, list[float]] = defaultdict(list)
        for rec in records:
            cfg = Config.from_dict(rec.config, migrate=True)
            times = [h["time_s"] for h in rec.history if isinstance(h.get("time_s"), (int, float))]
            if costs.device_type(cfg.device) != "cpu" or len(times) < 3:
                continue
            est = table.estimate(cfg, "cpu", device_name=str(rec.provenance.get("device"))).seconds
            out[(cfg.strategy, cfg.model, cfg.local_epochs)].append(statistics.median(times[1:]) * cfg.rounds / est)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", default="quick")
    a = ap.parse_args()
    records = list(Store.for_scale(a.scale).records())
    old, new = ratios(records, 0.0), ratios(records, costs.REF_FORWARD)
    print(f"{len(records)} records at scale {a.scale}; measured / estimated run time (median over runs)\n")
    print(f"| strategy | model | E | runs | training + test only | + reference forwards ({costs.REF_FORWARD:g}) |")
    print("|---|---|--:|--:|--:|--:|")
    for k in sorted(new, key=str):
        print(f"| {k[0]} | {k[1]} | {k[2]} | {len(new[k])} | {statistics.median(old[k]):.2f} | "
              f"{statistics.median(new[k]):.2f} |")


if __name__ == "__main__":
    main()
