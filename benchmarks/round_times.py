"""Seconds per round of stored runs, with the machine that trained each (nothing is trained).

    python benchmarks/round_times.py faf61e98251fd31d dcf3c7b73e4344eb 29fb226b602f900d

One row per record key: its run, seed, training date, wall time, the median and the fastest round (the first round,
which includes start-up, is left out) and the device and host CPU its provenance names (records trained before the
host CPU was recorded show "—"). Runs of one config differ here only in the machine and its load, so the ratio of
their fastest rounds is the hosts' speed ratio under the campaign's own work.
"""

from __future__ import annotations

import argparse
import statistics

from fedlib.companion.results import Store


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("keys", nargs="+", help="record keys (results/records/<key>.json)")
    ap.add_argument("--root", default="results", help="the store's directory (default: results)")
    a = ap.parse_args()
    store = Store(a.root)
    rows = []
    for key in a.keys:
        rec = store.get(key)
        if rec is None:
            raise SystemExit(f"{key}: no such record in {a.root}/records; `python -m fedlib.companion.campaign plan` lists "
                             "the keys.")
        t = [h["time_s"] for h in rec.history[1:] if isinstance(h.get("time_s"), (int, float))]
        if not t:
            raise SystemExit(f"{key}: no timed rounds after the first; pass the key of a run of 2 rounds or more.")
        p = rec.provenance
        rows.append((key, rec.config.get("label") or rec.config.get("strategy"), rec.config.get("seed"),
                     str(p.get("date", "—"))[:16], p.get("wall_time_s", float("nan")), statistics.median(t), min(t),
                     p.get("device", "—"), p.get("cpu", "—")))
    fastest = min(r[6] for r in rows)
    print("| key | run | seed | recorded (UTC) | wall (s) | median round (s) | fastest round (s) | × fastest "
          "| device | host CPU |")
    print("|---|---|--:|---|--:|--:|--:|--:|---|---|")
    for key, run, seed, date, wall, med, best, dev, cpu in rows:
        print(f"| {key} | {run} | {seed} | {date} | {wall:.0f} | {med:.1f} | {best:.1f} | {best / fastest:.2f} | "
              f"{dev} | {cpu} |")


if __name__ == "__main__":
    main()
