"""How long a run takes: measured seconds per round on a device, or a stated default model from sample-passes.

A run's work is counted in *sample-passes*: one training sample through one forward and backward pass. A round of
``cfg`` trains ``sample_fraction × n_train × local_epochs`` of them (all clients together) and evaluates the test
set (a forward pass, counted as a third of a sample-pass) every ``eval_every`` rounds.

Measurements live in a small JSON table (``results/costs.json``; :class:`CostTable`), keyed by the device's name
and ``(model, dataset, strategy family, batch, precision)``: seconds per sample-pass, averaged over the rounds of
finished runs (the first round, which holds set-up and CUDA-graph capture, is left out when there are more).
``fedlib.campaign`` updates it after every run it finishes and can learn it from stored records. An estimate uses
a measurement of the same key on a device of the same name, then of the same type, and otherwise the stated
default model (:data:`DEFAULT_THROUGHPUT` × :data:`FAMILY_FACTOR`, plus :data:`RUN_OVERHEAD_S` per run).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from .atomic import atomic_write_text
from .config import Config

__all__ = ["CostTable", "Estimate", "DEFAULT_COSTS", "cost_key", "family", "sample_passes", "split_sizes",
           "DEFAULT_THROUGHPUT", "FAMILY_FACTOR", "RUN_OVERHEAD_S"]

DEFAULT_COSTS = Path(os.environ.get("FEDLIB_COSTS", Path(__file__).resolve().parent.parent / "results" / "costs.json"))

# Training / test split sizes of each dataset (what n_train / n_test = None mean).
_SPLITS = {"fmnist": (60_000, 10_000), "cifar10": (50_000, 10_000), "cifar100": (50_000, 10_000),
           "svhn": (73_257, 26_032), "tinyimagenet": (100_000, 10_000), "synthetic": (50_000, 10_000)}

# Stated default model: training sample-passes per second of FedAvg on one device of each type, per model.
# cuda: one H100 (benchmarks/RESULTS.md: IntR CNN on Fashion-MNIST 60 M sample-passes in 75 s with the CUDA
# graph; simple CNN 394 k/s one-epoch graph benchmark); ResNets from their FLOPs at ~30 % of the card (not
# measured). cpu: this project's 2-core CPU (quick-scale records: IntR CNN 20 k/s, simple CNN 12 k/s,
# quarter-width ResNet-18 ~270/s); full-width ResNets from their FLOPs.
DEFAULT_THROUGHPUT: dict[str, dict[str, float]] = {
    "cuda": {"intr_cnn": 800_000, "simple_cnn": 400_000, "resnet20": 60_000, "resnet18": 15_000,
             "resnet50": 6_000, "*": 10_000},
    "cpu": {"intr_cnn": 20_000, "simple_cnn": 12_000, "resnet20": 800, "resnet18": 60, "resnet50": 20, "*": 50},
}
# Cost of a strategy family relative to FedAvg: the contrastive methods run the global and previous models'
# forward passes beside the local one (the target is <= 2x FedAvg); FedER computes EVBMF ranks every round.
FAMILY_FACTOR = {"fedavg": 1.0, "prox": 1.1, "contrastive": 2.0, "feder": 1.3, "personal": 1.1}
_FAMILY = {"fedavg": "fedavg", "centralized": "fedavg", "local_only": "fedavg", "fedbabu": "personal",
           "fedshibu": "personal", "fedavg_crsm": "personal", "fedprox": "prox", "scaffold": "prox",
           "moon": "contrastive", "fedcka": "contrastive", "fedintr": "contrastive", "feder": "feder"}
RUN_OVERHEAD_S = {"cuda": 15.0, "cpu": 3.0}  # data to the device, model set-up, CUDA-graph capture


def family(strategy: str) -> str:
    """The cost family of a strategy (strategies of one family cost about the same per sample-pass)."""
    return _FAMILY.get(strategy, strategy)


def split_sizes(cfg: Config) -> tuple[int, int]:
    """``(training, test)`` samples the run uses."""
    full = _SPLITS.get(cfg.dataset, (50_000, 10_000))
    return (min(cfg.n_train, full[0]) if cfg.n_train else full[0]), (min(cfg.n_test, full[1]) if cfg.n_test
                                                                     else full[1])


def sample_passes(cfg: Config) -> tuple[float, float]:
    """``(training sample-passes per round, test samples per evaluated round)``."""
    n_train, n_test = split_sizes(cfg)
    frac = 1.0 if cfg.strategy == "centralized" else cfg.sample_fraction
    return frac * n_train * cfg.local_epochs, float(n_test)


def _work(cfg: Config, rounds: Iterable[int]) -> float:
    """Sample-passes of the given rounds (1-based), test forwards counted as a third."""
    train, test = sample_passes(cfg)
    return sum(train + (test / 3 if r % cfg.eval_every == 0 or r == cfg.rounds else 0.0) for r in rounds)


def cost_key(cfg: Config) -> str:
    """What a measurement is keyed by: model (and its options), dataset, strategy family, batch, precision."""
    kw = ",".join(f"{k}={cfg.model_kw[k]}" for k in sorted(cfg.model_kw))
    return f"{cfg.model}{'{' + kw + '}' if kw else ''}|{cfg.dataset}|{family(cfg.strategy)}|b{cfg.batch_size}|" \
           f"{cfg.precision}"


def _device_type(device: str) -> str:
    return "cuda" if str(device).startswith("cuda") else "cpu"


@dataclass(frozen=True)
class Estimate:
    seconds: float
    source: str  # "measured on <device> (n runs)" or "default: ..."


class CostTable:
    """Measured seconds per sample-pass by device name and :func:`cost_key`; a JSON file written atomically."""

    def __init__(self, path: str | Path | None = DEFAULT_COSTS) -> None:
        self.path = Path(path) if path is not None else None
        self.table: dict[str, dict[str, dict[str, Any]]] = {}
        if self.path is not None and self.path.exists():
            try:
                self.table = json.loads(self.path.read_text()).get("devices", {})
            except (json.JSONDecodeError, AttributeError) as e:
                raise ValueError(f"{self.path} is not a cost table ({e}); delete it (it is rebuilt from runs and "
                                 f"records).") from e

    def save(self) -> None:
        if self.path is not None:
            doc = {"about": "seconds per training sample-pass (eval included) by device and "
                            "model|dataset|strategy family|batch|precision; written by fedlib.costs",
                   "devices": self.table}
            atomic_write_text(self.path, json.dumps(doc, indent=1, sort_keys=True))

    def learn(self, record: Any) -> bool:
        """Add a finished record's measured time (``record.history[*]['time_s']``) to the table."""
        cfg = Config.from_dict(record.config, migrate=True)
        timed = [(h["round"], h["time_s"]) for h in record.history if isinstance(h.get("time_s"), (int, float))]
        timed = timed[1:] if len(timed) > 1 else timed
        work = _work(cfg, [r for r, _ in timed])
        if work <= 0:
            return False
        per_pass = sum(t for _, t in timed) / work
        device = str(record.provenance.get("device", "unknown"))
        entry = self.table.setdefault(device, {}).get(cost_key(cfg), {"s_per_pass": 0.0, "runs": 0, "records": []})
        if record.key in entry["records"]:
            return False  # learnt once
        n = entry["runs"]
        self.table[device][cost_key(cfg)] = {
            "s_per_pass": (entry["s_per_pass"] * n + per_pass) / (n + 1), "runs": n + 1,
            "records": sorted([*entry["records"], record.key]),
            "type": "cuda" if record.config.get("device", "cpu").startswith("cuda") else "cpu"}
        return True

    def learn_all(self, records: Iterable[Any]) -> int:
        return sum(self.learn(r) for r in records)

    def measured(self, cfg: Config, device: str, device_name: str | None = None) -> tuple[float, str] | None:
        """``(seconds per sample-pass, where)`` for ``cfg``'s key: this device's name first, then the same type."""
        key, kind = cost_key(cfg), _device_type(device)
        if device_name and key in self.table.get(device_name, {}):
            e = self.table[device_name][key]
            return e["s_per_pass"], f"measured on {device_name} ({e['runs']} run{'s' * (e['runs'] != 1)})"
        for name, entries in sorted(self.table.items()):
            e = entries.get(key)
            if e is not None and e.get("type", _device_type(name)) == kind:
                return e["s_per_pass"], f"measured on {name} ({e['runs']} run{'s' * (e['runs'] != 1)})"
        return None

    def estimate(self, cfg: Config, device: str, *, rounds_left: int | None = None,
                 device_name: str | None = None) -> Estimate:
        """Seconds to train ``rounds_left`` (default: all) rounds of ``cfg`` on ``device``."""
        kind = _device_type(device)
        rounds = cfg.rounds if rounds_left is None else rounds_left
        work = _work(cfg, range(cfg.rounds - rounds + 1, cfg.rounds + 1))
        over = RUN_OVERHEAD_S[kind]
        m = self.measured(cfg, device, device_name)
        if m is not None:
            return Estimate(over + work * m[0], m[1])
        rates = DEFAULT_THROUGHPUT[kind]
        rate = rates.get(cfg.model, rates["*"])
        width = cfg.model_kw.get("width")
        if isinstance(width, (int, float)) and width > 0 and cfg.model.startswith("resnet"):
            rate *= (64 / width) ** 2  # convolution FLOPs scale with the square of the width
        if cfg.dataset == "tinyimagenet":
            rate /= 4  # 64x64 images
        fam = family(cfg.strategy)
        secs = work * FAMILY_FACTOR.get(fam, 1.5) / rate
        if not math.isfinite(secs):
            secs = math.inf
        return Estimate(over + secs, f"default: {rate:,.0f} sample-passes/s for {cfg.model} on {kind} x "
                                     f"{FAMILY_FACTOR.get(fam, 1.5)} ({fam})")
