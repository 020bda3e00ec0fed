"""One experiment from the command line, and a stored record at a glance.

    python -m fedlib.companion run fedintr --scale quick strategy=fedprox \
        'strategy_kw={"mu": 0.01}' seed=1
    python -m fedlib.companion run fedcka --scale smoke rounds=3 --tensorboard runs/
    python -m fedlib.companion show 1a7a9801                 # a key or a unique prefix of one

``run`` starts from a paper's preset (:func:`fedlib.companion.papers.preset`) at ``--scale``,
applies ``key=value`` overrides (values read as JSON, then as Python literals, else as a string:
``lr=1e-3``, ``augment=none``, ``partition_kw={"beta": 0.1}``), validates the whole config before
anything trains, and calls :func:`fedlib.companion.results.run`: one line per round, the record
stored under its key as any run stores it, and a stored record returned without training
(``--recompute`` trains it again). ``--tensorboard DIR`` writes every numeric metric of each round
to ``DIR/<key>/`` (``pip install 'fedlib[tensorboard]'``).
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import sys
import warnings
from pathlib import Path
from typing import Any

from fedlib.config import SCALES
from fedlib.companion.papers import PRESETS, preset
from fedlib.companion.results import Store, run

__all__ = ["main", "parse_overrides", "HELP"]

# the presets' names are filled in: HELP holds JSON braces
HELP = """One experiment from the command line, and a stored record at a glance.

  python -m fedlib.companion run fedintr --scale quick strategy=fedprox \
'strategy_kw={"mu": 0.01}' seed=1
  python -m fedlib.companion show <key>              a record's config, provenance and final \
metrics (a key or its prefix)

run starts from a paper's preset (PRESETS) at --scale, applies key=value overrides
(JSON, then Python literals, else a string), checks the whole config, prints its estimate and \
whether it
checkpoints, then one line per round; the record is stored under its key. A stored record comes \
back without
training (--recompute trains it again). Ctrl-C keeps the checkpointed rounds: the same command \
resumes.

Every entry point of fedlib:
  make reproduce          render every notebook from the committed records (trains nothing; minutes)
  make test               unit tests, then the notebooks under nbval
  make lab                JupyterLab on notebooks/
  make campaign           train the planned runs within a budget (SCALE=, DEVICE=, BUDGET=)
  make bundle             an offline bundle in bundle/
  make gpu-check          on a GPU first: every strategy and path agree (SMOKE=1: the same on a CPU)
  python -m fedlib.companion run | show              this command
  python -m fedlib.companion.reproduce --help        execute or render the notebooks, write the \
summaries
  python -m fedlib.companion.campaign --help         plan, run and ledger of every planned run
  python -m fedlib.companion.papers --help           the papers, their notebooks, and a \
notebook's verdicts (claims NN)
  scripts/render-head.sh                   render HEAD's records in a clean worktree and copy the \
outputs here
  python scripts/strategies_quick.py       six strategies in FedIntR's setup, one table
""".replace("(PRESETS)", f"({', '.join(PRESETS)})")


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["rounds=3", "strategy_kw={\"mu\": 0.5}"]`` -> ``{"rounds": 3, "strategy_kw": {"mu":
    0.5}}``."""
    out: dict[str, Any] = {}
    for item in items:
        key, eq, text = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"override {item!r}: write key=value, e.g. rounds=3 or "
                             "'strategy_kw={\"mu\": 0.5}'.")
        try:
            value: Any = json.loads(text)
        except ValueError:
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                value = text
        if key.strip() in out:
            raise ValueError(f"override {key.strip()!r} is given twice "
                             f"({key.strip()}={out[key.strip()]!r} and {item!r}); give each field "
                             "once.")
        out[key.strip()] = value
    return out


class _Scalars:
    """Per-round scalars to TensorBoard: every finite number in a round's history entry."""

    def __init__(self, root: Path, key: str) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(root / key))
        self.rounds: set[int] = set()

    def __call__(self, _engine: Any, entry: dict[str, Any]) -> None:
        rnd = int(entry["round"])
        for name, v in entry.items():
            if name != "round" and isinstance(
                    v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                self.writer.add_scalar(name, v, rnd)
        self.rounds.add(rnd)

    def close(self, history: list[dict[str, Any]]) -> None:
        for entry in history:  # a stored record (no training): its rounds, replayed
            if int(entry["round"]) not in self.rounds:
                self(None, entry)
        self.writer.close()


def _run(a: argparse.Namespace) -> int:
    try:
        cfg = preset(a.paper, a.scale, **parse_overrides(a.overrides)).validate()
    except (ValueError, TypeError) as e:
        print(f"fedlib run: {e}", file=sys.stderr)
        return 2
    scalars = None
    if a.tensorboard:
        try:
            scalars = _Scalars(Path(a.tensorboard), cfg.key())
        except ImportError:
            print("fedlib run: --tensorboard needs the tensorboard package: pip install "
                  "'fedlib[tensorboard]'.",
                  file=sys.stderr)
            return 2
    store = Store(a.store) if a.store else Store.for_scale(a.scale)
    try:
        rec = run(cfg, store=store, recompute=a.recompute, progress=a.progress, callback=scalars)
    except KeyboardInterrupt:
        done = store.checkpoint_round(cfg.key())
        print(
            f"\nfedlib run: interrupted after {done} checkpointed round(s) of {cfg.rounds}; run "
            "the same command "
            f"to resume" + ("." if done else " (this run had not checkpointed a round yet)."),
            file=sys.stderr)
        return 130
    if scalars is not None:
        scalars.close(rec.history)
        print(f"tensorboard: {Path(a.tensorboard) / rec.key}")
    print(_last_round(rec))
    print(f"record {rec.key}: {store.record_path(rec.key)}")
    return 0


def _last_round(rec: Any) -> str:
    last = rec.history[-1] if rec.history else {}
    nums = {
        k: v
        for k, v in last.items()
        if k != "round" and isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    return f"round {last.get('round', '?')}: " + ", ".join(
        f"{k} {100 * v:.2f} %" if k.endswith("_acc") or "_acc_" in k else f"{k} {v:.4g}"
        for k, v in nums.items())


def _show(a: argparse.Namespace) -> int:
    store = Store(a.store) if a.store else Store.for_scale(a.scale)
    folder = store.root / "records"
    keys = sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []
    hits = [k for k in keys if k.startswith(a.key)]
    if len(hits) != 1:
        why = "no record has" if not hits else f"{len(hits)} records have"
        print(f"fedlib show: {why} a key starting {a.key!r} in {folder} ({len(keys)} records; "
              f"`python -m fedlib.companion.campaign plan --scale {a.scale}` lists the planned keys"
              + (f"; matches: {', '.join(hits[:10])}" if hits else "") + ").", file=sys.stderr)
        return 2
    rec = store.get(hits[0])
    print(f"record {rec.key} ({store.record_path(rec.key)})\n\nconfig (identity):")
    for k, v in rec.cfg.identity().items():
        print(f"  {k} = {v!r}")
    print("\nprovenance:")
    for k, v in rec.provenance.items():
        print(f"  {k} = {v}")
    print(f"\nfinal metrics ({len(rec.history)} rounds): {_last_round(rec)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fedlib.companion", description=HELP,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="one experiment from a paper's preset, with key=value overrides")
    r.add_argument("paper", help=f"{', '.join(PRESETS)} (the papers' presets)")
    r.add_argument("overrides", nargs="*", help="Config fields as key=value")
    r.add_argument("--scale", default="quick", choices=SCALES)
    r.add_argument("--store", default=None, help="results folder (default: results/, "
                                                 "results/smoke/ at smoke)")
    r.add_argument("--recompute", action="store_true", help="train again even if the record is "
                                                            "stored")
    r.add_argument("--no-progress", dest="progress", action="store_false", help="no line per round")
    r.add_argument("--tensorboard", default=None, metavar="DIR", help="write per-round scalars "
                                                                      "under DIR/<key>/")
    s = sub.add_parser("show", help="a stored record's config, provenance and final metrics")
    s.add_argument("key", help="a record's key or a unique prefix of one")
    s.add_argument("--scale", default="quick", choices=SCALES, help="which store (default: "
                                                                    "quick's, results/)")
    s.add_argument("--store", default=None, help="results folder")
    for p in (r, s):
        p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    a, rest = ap.parse_known_args(argv)  # overrides may come before or after the options
    bad = [x for x in rest if x.startswith("-") or "=" not in x or a.cmd != "run"]
    if bad:
        ap.error(f"unrecognized arguments: {' '.join(bad)} (overrides are key=value, after `run "
                 "PAPER`)")
    if a.cmd == "run":
        a.overrides = list(a.overrides) + rest
    try:
        # a warning is one line, without the source line that raised it
        with warnings.catch_warnings():
            if not a.debug:
                warnings.showwarning = lambda msg, cat, *_, **__: print(  # noqa: E731
                    f"fedlib {a.cmd}: {cat.__name__}: {msg}", file=sys.stderr)
            return _run(a) if a.cmd == "run" else _show(a)
    except Exception as e:  # noqa: BLE001 — one line for the user; --debug shows where
        if a.debug:
            raise
        print(f"fedlib {a.cmd}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} "
              "(--debug shows the traceback)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
