"""How long a run takes: measured seconds per round on a device, or a stated default model from
sample-passes.

A run's work is counted in *sample-passes*: one training sample through one forward and backward
pass. A round of ``cfg`` trains ``sample_fraction × n_train × local_epochs`` of them (all clients
together), runs the frozen reference models of MOON, FedCKA and FedIntR over the clients' samples
(:func:`reference_passes`) and evaluates the test set (a forward pass, counted as a third of a
sample-pass) every ``eval_every`` rounds.

Measurements live in a small JSON table (``results/costs.json``; :class:`CostTable`), keyed by the
device's name and ``(model, dataset, strategy family, batch, precision)``: seconds per sample-pass,
averaged over the rounds of finished runs (the first round, which holds set-up and CUDA-graph
capture, is left out when there are more). ``fedlib.companion.campaign`` updates it after every run
it finishes and can learn it from stored records; ``benchmarks/gpu_check.py`` adds a GPU's
measurements before any run (:meth:`CostTable.add`). An estimate uses a measurement of the same key
on a device of the same type only (a CPU's timings never estimate a CUDA run, nor the reverse): that
device's name first, then any of its type, and otherwise the stated default model
(:data:`DEFAULT_THROUGHPUT` × :data:`FAMILY_FACTOR`, plus :data:`RUN_OVERHEAD_S` per run). Every
:class:`Estimate` says its source.

:func:`check_long` is the guard before long work on a CPU: it prints the estimate and stops above
:data:`LONG_RUN_S` unless told to go on (``allow_long=True``, ``--allow-long`` or
``FEDLIB_ALLOW_LONG=1``).
"""

from __future__ import annotations

import json
import math
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from fedlib.progress import fmt_s
from fedlib.atomic import atomic_write_text
from fedlib.errors import OneLineError
from fedlib.augment import DEFAULT_AUGMENT, VIEWS
from fedlib.config import Config
from fedlib.companion.provenance import REPO, device_name
from fedlib.companion.scales import SCALE
from fedlib.strategies import STRATEGIES

__all__ = [
    "CostTable", "Estimate", "DEFAULT_COSTS", "cost_key", "family", "sample_passes",
    "reference_passes", "split_sizes", "width_speedup", "DEFAULT_THROUGHPUT", "FAMILY_FACTOR",
    "RUN_OVERHEAD_S", "REF_FORWARD", "LONG_RUN_S", "LongRunError", "check_long", "long_allowed",
    "fmt_s", "device_type", "check_runs", "before_run", "no_check"
]

DEFAULT_COSTS = Path(
    os.environ.get("FEDLIB_COSTS",
                   REPO / "results" / "costs.json"))

# Training / test split sizes of each dataset (what n_train / n_test = None mean).
_SPLITS = {
    "fmnist": (60_000, 10_000), "cifar10": (50_000, 10_000), "cifar100": (50_000, 10_000),
    "svhn": (73_257, 26_032), "tinyimagenet": (100_000, 10_000), "synthetic": (50_000, 10_000)
}

# Stated default model: FedAvg's training sample-passes per second on one device of each type, per
# model (cuda: one H100; cpu: one thread at batch 64), read from benchmarks/RESULTS.md.
DEFAULT_THROUGHPUT: dict[str, dict[str, float]] = {
    "cuda": {
        "intr_cnn": 800_000, "simple_cnn": 400_000, "resnet20": 60_000, "resnet18": 15_000,
        "resnet50": 6_000, "*": 10_000
    },
    "cpu": {
        "intr_cnn": 10_000, "simple_cnn": 8_000, "resnet20": 800, "resnet18": 60, "resnet50": 20,
        "*": 50
    },
}
# Cost of a strategy family per sample-pass relative to FedAvg: the contrastive methods' projection
# heads and losses (the target is <= 2x FedAvg; their reference forwards are work of their own,
# :func:`reference_passes`); FedER computes EVBMF ranks every round.
FAMILY_FACTOR = {"fedavg": 1.0, "prox": 1.1, "contrastive": 2.0, "feder": 1.3, "personal": 1.1}
# The cost family of each strategy: "prox" (a term or a correction over the parameters),
# "contrastive" (the global and previous models' forward passes beside the local one), "feder"
# (EVBMF ranks every round), "personal" (per-client fine-tuning or models).
FAMILY = {"fedavg": "fedavg", "centralized": "fedavg", "local_only": "fedavg",
          "fedprox": "prox", "scaffold": "prox",
          "moon": "contrastive", "fedcka": "contrastive", "fedintr": "contrastive",
          "feder": "feder", "fedbabu": "personal", "fedshibu": "personal",
          "fedavg_crsm": "personal"}
RUN_OVERHEAD_S = {"cuda": 15.0, "cpu": 3.0}  # data to the device, model set-up, CUDA-graph capture
# One sample through a frozen reference model (its taps included) as a fraction of a training
# sample-pass: FedIntR's quick rounds on one thread, 6.4-7.9 s at E = 1 and 24.5-26.2 s at E = 6
# (its four reference tables a round), fit 0.2.
REF_FORWARD = 0.2
# How a table's seconds per sample-pass were counted; a table learnt under another count is learnt
# again.
WORK_MODEL = 2


def family(strategy: str) -> str:
    """The cost family of a strategy (:data:`FAMILY`: strategies of one family cost about the same
    per sample-pass); a registered strategy not listed is FedAvg's, an unregistered name its own."""
    return FAMILY.get(strategy, "fedavg" if strategy in STRATEGIES else strategy)


def split_sizes(cfg: Config) -> tuple[int, int]:
    """``(training, test)`` samples the run uses."""
    full = _SPLITS.get(cfg.dataset, (50_000, 10_000))
    return (min(cfg.n_train, full[0]) if cfg.n_train else full[0]), (min(cfg.n_test, full[1])
                                                                     if cfg.n_test else full[1])


def sample_passes(cfg: Config) -> tuple[float, float]:
    """``(training sample-passes per round, test samples per evaluated round)``."""
    n_train, n_test = split_sizes(cfg)
    frac = 1.0 if cfg.strategy == "centralized" else cfg.sample_fraction
    return frac * n_train * cfg.local_epochs, float(n_test)


def reference_passes(cfg: Config) -> float:
    """Sample-pass equivalents a round spends in the frozen reference models (the global and
    previous models of MOON, FedCKA and FedIntR; none when μ = 0): the executors run them once a
    round over every client's samples, for both orientations under ``flip``
    (fedlib.executors.refcache), and with every local batch under crops."""
    cls = STRATEGIES.get(cfg.strategy)
    refs = len(cls.needs.references) if cls is not None else 0
    if not refs or cfg.strategy_kw.get("mu") == 0:
        return 0.0
    aug = cfg.augment or DEFAULT_AUGMENT.get(cfg.dataset, "none")
    tables = VIEWS.get(aug, cfg.local_epochs)
    train = sample_passes(cfg)[0] / cfg.local_epochs
    return REF_FORWARD * refs * tables * train


def _work(cfg: Config, rounds: Iterable[int]) -> float:
    """Sample-passes of the given rounds (1-based): training, the reference models' forwards
    (:func:`reference_passes`) and test forwards counted as a third."""
    train, test = sample_passes(cfg)
    train += reference_passes(cfg)
    return sum(train + (test / 3 if r % cfg.eval_every == 0 or r == cfg.rounds else 0.0)
               for r in rounds)


def cost_key(cfg: Config) -> str:
    """What a measurement is keyed by: model (and its options), dataset, strategy family, batch,
    precision."""
    kw = ",".join(f"{k}={cfg.model_kw[k]}" for k in sorted(cfg.model_kw))
    model = f"{cfg.model}{'{' + kw + '}' if kw else ''}"
    return f"{model}|{cfg.dataset}|{family(cfg.strategy)}|b{cfg.batch_size}|{cfg.precision}"


def width_speedup(cfg: Config) -> float:
    """How much faster than full width (64 base channels) a narrower ResNet trains per sample-pass:
    ``64 / width``. Its convolution FLOPs fall with the square of the width, but one thread of this
    project's CPU at batch 64 gains about linearly: ResNet-18 ~60, ~270 and ~500 sample-passes/s at
    widths 64, 16 and 8 (:data:`DEFAULT_THROUGHPUT`; the quick records of width 8, 2.0 ms a pass).
    Other models, and a ResNet at its full width: 1."""
    width = cfg.model_kw.get("width")
    if isinstance(width, (int, float)) and 0 < width < 64 and cfg.model.startswith("resnet"):
        return 64 / width
    return 1.0


def device_type(device: str) -> str:
    """The cost type of a device string: ``"cuda"`` or ``"cpu"`` (any other device is costed as a
    CPU)."""
    return "cuda" if str(device).startswith("cuda") else "cpu"


def _entry_type(name: str, entry: dict[str, Any]) -> str:
    """The device type a table entry was measured on (entries without one: a name starting with
    "cpu" is a CPU)."""
    return entry.get("type") or ("cpu" if name.startswith("cpu") else "cuda")


def _runs(entry: dict[str, Any]) -> str:
    n = entry.get("runs", 0)
    return f"{n} run{'s' * (n != 1)}" if n else str(entry.get("source", "gpu-check"))


def _snapshot(table: Any) -> dict[tuple[str, str], str]:
    """Each entry of a cost table's ``devices`` mapping by (device, cost key), as canonical JSON."""
    if not isinstance(table, dict):
        return {}
    return {(d, k): json.dumps(v, sort_keys=True)
            for d, e in table.items() if isinstance(e, dict) for k, v in e.items()}


@dataclass(frozen=True)
class Estimate:
    seconds: float
    source: str  # "measured on <device> (<cost key>: n runs)" or "default: ..."


class CostTable:
    """Measured seconds per sample-pass by device name and :func:`cost_key`; a JSON file written
    atomically."""

    def __init__(self, path: str | Path | None = DEFAULT_COSTS) -> None:
        self.path = Path(path) if path is not None else None
        self.table: dict[str, dict[str, dict[str, Any]]] = {}
        # read from a table counted another way: its runs' times must be learnt again
        self.relearn = False
        if self.path is not None and self.path.exists():
            try:
                doc = json.loads(self.path.read_text())
                self.table = doc.get("devices", {})
            except (json.JSONDecodeError, AttributeError) as e:
                raise ValueError(f"{self.path} is not a cost table ({e}); delete it (it is rebuilt "
                                 "from runs and records).") from e
        # each entry as read: what another process changes later is kept on save
        self._read = _snapshot(self.table)
        if self.path is not None and self.table and doc.get("work_model") != WORK_MODEL:
            # keep the measurements that are not runs (a GPU check's); the campaign learns the runs'
            # times again
            self.table = {
                d: {k: e
                    for k, e in es.items() if not e.get("runs")}
                for d, es in self.table.items()
            }
            self.relearn = True

    def save(self) -> None:
        """Write the table. Entries another process added or changed in the file since this table
        read it (e.g. a GPU check or learnt GPU runs beside a CPU campaign) are kept; what this
        table changed or removed wins."""
        if self.path is not None:
            try:
                disk = json.loads(self.path.read_text()).get("devices",
                                                             {}) if self.path.exists() else {}
            except (json.JSONDecodeError, AttributeError):
                disk = {}
            ours = _snapshot(self.table)
            for (dev, key), theirs in _snapshot(disk).items():
                # new there, or changed there only
                if ours.get((dev, key)) == self._read.get((dev, key)) != theirs:
                    self.table.setdefault(dev, {})[key] = disk[dev][key]
            self._read = _snapshot(self.table)
            doc = {"about": "seconds per training sample-pass (eval included) by device and "
                            "model|dataset|strategy family|batch|precision; written by "
                            "fedlib.companion.costs",
                   "work_model": WORK_MODEL, "devices": self.table}
            atomic_write_text(self.path, json.dumps(doc, indent=1, sort_keys=True))

    def learn(self, record: Any) -> bool:
        """Add a finished record's measured time (``record.history[*]['time_s']``) to the table. A
        key's estimate is the median over its records' seconds per sample-pass, so a few runs timed
        under load (a test suite beside the workers) do not pull it up. An entry written before
        per-record values were kept (a running mean) takes them as its records are learnt again
        (``python -m fedlib.companion.campaign costs --learn`` learns the whole store), without
        counting a run twice; its estimate is then the median of the values known."""
        cfg = Config.from_dict(record.config, migrate=True)
        timed = [(h["round"], h["time_s"]) for h in record.history
                 if isinstance(h.get("time_s"), (int, float))]
        timed = timed[1:] if len(timed) > 1 else timed
        work = _work(cfg, [r for r, _ in timed])
        if work <= 0:
            return False
        per_pass = sum(t for _, t in timed) / work
        device = str(record.provenance.get("device", "unknown"))
        entry = self.table.setdefault(device, {}).get(cost_key(cfg),
                                                      {"s_per_pass": 0.0, "runs": 0, "records": []})
        by_record = dict(entry.get("by_record", {}))
        if record.key in by_record:
            return False  # learnt once
        known = record.key in entry["records"]
        n = entry["runs"] + (0 if known else 1)
        by_record[record.key] = per_pass
        self.table[device][cost_key(cfg)] = {
            "s_per_pass": statistics.median(by_record.values()), "runs": n,
            "records": sorted({*entry["records"], record.key}), "by_record": by_record,
            "type": "cuda" if record.config.get("device", "cpu").startswith("cuda") else "cpu"}
        return True

    def learn_all(self, records: Iterable[Any]) -> int:
        self.relearn = False
        return sum(self.learn(r) for r in records)

    def add(self, device_name: str, kind: str, cfg: Config, s_per_pass: float, source: str) -> bool:
        """Record a measurement taken outside a run (``benchmarks/gpu_check.py``): ``s_per_pass``
        seconds of a round's training per training sample-pass of ``cfg`` (reference forwards
        included) for ``cfg``'s key on ``device_name`` (of type ``kind``: "cuda" or "cpu"). It
        counts as no run: the first finished run of that key replaces it, and a key measured by
        finished runs keeps theirs (False)."""
        if kind not in ("cuda", "cpu"):
            raise ValueError(f"kind {kind!r}: the device type is 'cuda' or 'cpu'.")
        if not (isinstance(s_per_pass, (int, float)) and 0 < s_per_pass < math.inf):
            raise ValueError(f"s_per_pass {s_per_pass!r}: a measurement is a positive, finite "
                             "number of seconds.")
        entries = self.table.setdefault(device_name, {})
        if entries.get(cost_key(cfg), {}).get("runs", 0) > 0:
            return False
        train = sample_passes(cfg)[0]
        per_pass = float(s_per_pass) * train / (train + reference_passes(cfg))
        entries[cost_key(cfg)] = {
            "s_per_pass": per_pass, "runs": 0, "records": [], "type": kind, "source": source
        }
        return True

    def measured(self, cfg: Config, device: str,
                 device_name: str | None = None) -> tuple[float, str] | None:
        """``(seconds per sample-pass, where)`` for ``cfg``'s key, from a device of ``device``'s
        type only: the device named ``device_name`` first, then any other of that type."""
        key, kind = cost_key(cfg), device_type(device)
        names = ([device_name] if device_name in self.table else []) + sorted(
            n for n in self.table if n != device_name)
        for name in names:
            e = self.table[name].get(key)
            if e is not None and _entry_type(name, e) == kind:
                return e["s_per_pass"], f"measured on {name} ({key}: {_runs(e)})"
        return None

    def estimate(self, cfg: Config, device: str, *, rounds_left: int | None = None,
                 device_name: str | None = None) -> Estimate:
        """Seconds to train ``rounds_left`` (default: all) rounds of ``cfg`` on ``device``."""
        kind = device_type(device)
        rounds = cfg.rounds if rounds_left is None else rounds_left
        work = _work(cfg, range(cfg.rounds - rounds + 1, cfg.rounds + 1))
        over = RUN_OVERHEAD_S[kind]
        m = self.measured(cfg, device, device_name)
        if m is not None:
            return Estimate(over + work * m[0], m[1])
        rates = DEFAULT_THROUGHPUT[kind]
        rate = rates.get(cfg.model, rates["*"]) * width_speedup(cfg)
        if cfg.dataset == "tinyimagenet":
            rate /= 4  # 64x64 images
        fam = family(cfg.strategy)
        secs = work * FAMILY_FACTOR.get(fam, 1.5) / rate
        if not math.isfinite(secs):
            secs = math.inf
        return Estimate(over + secs, f"default: {rate:,.0f} sample-passes/s for {cfg.model} on "
                                     f"{kind} x {FAMILY_FACTOR.get(fam, 1.5)} ({fam})")


# ----------------------------------------------------------------------- the guard before long work

LONG_RUN_S = 3600.0  # longer than this on a CPU: stop before starting unless told to go on
ALLOW_LONG_ENV = "FEDLIB_ALLOW_LONG"


class LongRunError(OneLineError, RuntimeError):
    """Work estimated longer than :data:`LONG_RUN_S` on a CPU, not started; the message says how to
    go on."""


def long_allowed(allow_long: bool | None = None) -> bool:
    """``allow_long`` if given, else whether ``$FEDLIB_ALLOW_LONG`` is 1 / true / yes."""
    if allow_long is not None:
        return bool(allow_long)
    return os.environ.get(ALLOW_LONG_ENV, "").strip().lower() in ("1", "true", "yes")


def check_long(seconds: float, device: str, what: str, source: str = "", *,
               allow_long: bool | None = None, flag: str = "allow_long=True",
               log: Any = print) -> None:
    """Print the estimate of ``what`` on ``device``; on a CPU above :data:`LONG_RUN_S`, raise
    :class:`LongRunError` before anything starts unless :func:`long_allowed` (``flag`` names the
    caller's switch)."""
    log(f"[fedlib] {what}: estimated {fmt_s(seconds)} on {device}" +
        (f" ({source})" if source else ""))
    if device_type(device) == "cpu" and seconds > LONG_RUN_S and not long_allowed(allow_long):
        raise LongRunError(
            f"{what} is estimated at {fmt_s(seconds)} on this CPU ({device}), more than "
            f"{LONG_RUN_S / 3600:g} h; nothing was started. Run it on a GPU (device='cuda'; "
            f"docs/campaign.md), at scale 'quick', or go on anyway with {flag} (or "
            f"{ALLOW_LONG_ENV}=1). Runs estimated over a minute checkpoint every round, so an "
            "interrupted one resumes.")


# a run estimated longer than this checkpoints every round (checkpoint_every=None)
CHECKPOINT_AFTER_S = 60.0


def check_runs(cfgs: Iterable[Config], *, allow_long: bool | None = None, log: Any = print) -> None:
    """The guard before training ``cfgs`` one after another (e.g. the runs of a notebook's artifact
    that are not stored yet): at a scale meant for a GPU (paper) their estimate together is printed
    and, on a CPU above :data:`LONG_RUN_S`, :func:`check_long` stops before the first one unless
    told to go on. Other scales pass silently."""
    guarded = [c for c in cfgs if c.scale in SCALE and SCALE[c.scale].gpu]
    if not guarded:
        return
    table = CostTable()
    ests = [table.estimate(c, c.device, device_name=device_name(c.device)) for c in guarded]
    check_long(sum(e.seconds for e in ests), guarded[0].device,
               f"{len(guarded)} run(s) to train at scale {guarded[0].scale}",
               "; ".join(sorted({e.source for e in ests})), allow_long=allow_long, log=log)


def before_run(cfg: Config, *, allow_long: bool | None = None, log: Any = print,
               guard: Callable[[Config], None] | None = None, announce: bool = False) -> Config:
    """What :func:`fedlib.companion.results.run` settles before it trains ``cfg``:
    ``checkpoint_every=None`` becomes every round for a run estimated longer than
    :data:`CHECKPOINT_AFTER_S` (else 0); then the guard: ``guard(cfg)`` when the caller holds one (a
    caller that checked all its runs at once, :func:`check_runs`, or a campaign that admitted the
    run against its budget), else :func:`check_runs` of this run alone. ``announce``: ``log`` the
    estimate and whether the run checkpoints first."""
    table = CostTable()
    est = table.estimate(cfg, cfg.device, device_name=device_name(cfg.device))
    if cfg.checkpoint_every is None:
        every = 1 if est.seconds > CHECKPOINT_AFTER_S else 0
        cfg = cfg.replace(checkpoint_every=every)
    if announce:
        k = cfg.checkpoint_every
        log(f"[fedlib] {cfg.label or cfg.key()}: {cfg.rounds} rounds, estimated "
            f"{fmt_s(est.seconds)} on {cfg.device}; "
            + (f"checkpoints every {'round' if k == 1 else f'{k} rounds'}: after Ctrl-C the same "
               "command resumes"
               if k else "no checkpoints (checkpoint_every=0, or estimated under a minute)"))
    if guard is not None:
        guard(cfg)
    elif device_type(cfg.device) == "cpu" and not long_allowed(allow_long):
        check_runs([cfg], allow_long=allow_long, log=log)
    return cfg


def no_check(cfg: Config) -> None:
    """A guard that lets ``cfg`` start: its caller has checked it already."""
