"""The local-regularization strategies side by side in FedIntR's setup (Fashion-MNIST), test accuracy per round.

    python scripts/strategies_quick.py [--scale quick|smoke] [--executor auto|sequential|vectorized]

Runs FedAvg, FedProx, SCAFFOLD, MOON, FedCKA and FedIntR with ``preset("fedintr", scale)`` and, for the methods
with a μ, the value FedIntR Table I found best on Fashion-MNIST; each run is a record in ``results/records/``
(reused when it exists, like every ``fedlib.companion.results.run``: all but SCAFFOLD are notebook 05's Table I runs at the
same scale, where notebook 05's plan keeps them), and the table goes to ``results/strategies-<scale>.md``
(``results/smoke/`` for smoke). Quick scale is the preset's 40 rounds of 6 local epochs on 12,000 training images at
batch 64: about 7 min on a 2-core CPU, SCAFFOLD's run (the other five are notebook 05's committed records; all six
from scratch, about 1.3 h). The numbers are not the paper's 100 rounds of 10 on 60000.
"""

from __future__ import annotations

import argparse
import os
import sys

import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fedlib.companion.papers import preset  # noqa: E402
from fedlib.companion.papers.fedintr.plans import FEDINTR_LAST  # noqa: E402
from fedlib.companion.results import Store, run  # noqa: E402

# name: (strategy, strategy_kw, FedIntR Table I on Fashion-MNIST, 100 rounds × 10 epochs; None: not in the table)
METHODS = {
    "FedAvg": ("fedavg", {}, 88.90),
    "FedProx (μ=0.001)": ("fedprox", {"mu": 0.001}, 88.95),
    "SCAFFOLD": ("scaffold", {}, None),
    "MOON (μ=1)": ("moon", {"mu": 1.0}, 89.15),
    "FedCKA (μ=3)": ("fedcka", {"mu": 3.0}, 88.85),
    "FedIntR (μ=10)": ("fedintr", {"mu": 10.0}, 89.15),
}


def markdown(df: pd.DataFrame) -> str:
    """A DataFrame as a markdown table, index first (no optional dependency)."""
    cols = [df.index.name or ""] + [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join([str(i)] + [str(v) for v in row]) + " |" for i, row in zip(df.index, df.values)]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", default="quick", choices=["smoke", "quick"])
    ap.add_argument("--executor", default="auto", choices=["auto", "sequential", "vectorized"])
    args = ap.parse_args()
    store = Store.for_scale(args.scale)
    last = FEDINTR_LAST[args.scale]
    acc, rows = {}, []
    for name, (strategy, kw, paper) in METHODS.items():
        cfg = preset("fedintr", args.scale, strategy=strategy, strategy_kw=kw, executor=args.executor)
        rec = run(cfg, store=store)
        acc[name] = 100 * rec.metric("test_acc")
        rows.append({"method": name, f"median of the last {last} rounds (%)": round(100 * rec.final(last=last), 2),
                     "final test acc (%)": round(float(acc[name].iloc[-1]), 2),
                     "best (%)": round(float(acc[name].max()), 2),
                     "FedIntR Table I (%)": "—" if paper is None else paper,
                     "s / round": round(float(rec.frame()["time_s"].mean()), 1),
                     "executor": rec.provenance["executor"], "record": f"`{rec.key}`"})
        print(f"{name:>18}: {rows[-1]['final test acc (%)']:.2f} % after {cfg.rounds} rounds "
              f"({rows[-1]['s / round']} s/round, record {rec.key})", flush=True)
    per_round = pd.DataFrame(acc).round(2)
    per_round.index = range(1, len(per_round) + 1)
    per_round.index.name = "round"
    c = preset("fedintr", args.scale)
    text = "\n".join([
        f"# Local-regularization strategies in FedIntR's setup — scale `{args.scale}`",
        "",
        f"Fashion-MNIST, FedIntR CNN, {c.num_clients} clients (Dirichlet β = {c.partition_kw['beta']}, FedIntR's "
        f"split), SGD lr {c.lr}, momentum {c.momentum}, weight decay {c.weight_decay}, "
        f"horizontal flips; **{c.rounds} rounds × {c.local_epochs} local epochs**, "
        f"{c.n_train or 'all'} training / {c.n_test or 'all'} test images, batch {c.batch_size} (the paper: 100 × 10 "
        "on all 60000, batch 512), so the "
        "paper column is context, not a target. μ: FedIntR Table I's best per method on Fashion-MNIST. Written by "
        "`python scripts/strategies_quick.py`; each row is a record in `results/records/`.",
        "",
        markdown(pd.DataFrame(rows).set_index("method")),
        "",
        "## Test accuracy of the global model per round (%)",
        "",
        markdown(per_round),
        "",
    ])
    out = store.root / f"strategies-{args.scale}.md"
    out.write_text(text)
    print(f"\n{per_round.to_string()}\n\nwrote {out}")


if __name__ == "__main__":
    main()
