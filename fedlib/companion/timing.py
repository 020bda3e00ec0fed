"""Training cost per round of the local-regularization strategies (FedCKA Table 3's durations and
Table 4).

FedCKA reports "average training duration per communication round": the local training of all
clients, measured on one GPU (Titan V). :func:`round_costs` measures the same quantity for several
strategies on one setup: a first round (one local epoch, untimed) gives every client a previous
local model and SCAFFOLD non-zero control variates, then one round of local training of all clients
(the executor call only: no aggregation, no evaluation) is timed ``reps`` times, round-robin over
the strategies so that background load hits them alike. The ratio to the first strategy (FedAvg) is
the median over repeats of (time / FedAvg's time in the same repeat); :func:`repeat_times` gives
every repeat, so that a cost claim is decided on the ratios of the same repeats
(:func:`fedlib.companion.verdicts.decide_ratio`: the median of at least 5, and their spread).

Timing needs the images' shape and count, not their content: :func:`synthetic_like` builds
deterministic synthetic data shaped as a real dataset (CIFAR-100: 3×32×32, 100 classes; Tiny
ImageNet: 3×64×64, 200 classes).

:func:`cached_costs` stores a measurement under ``<store>/costs/<key>.json`` (keyed by the setups,
the strategies, the data shape and the device), so a notebook renders a stored measurement without
timing again, or returns ``None`` (pending) with ``train=False``.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import time
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import torch

from fedlib.config import Config
from fedlib.data import FedDataset, load_dataset
from fedlib.engine import Engine, sample_clients
from fedlib.companion.results import Store, atomic_write_text, device_name, git_commit

__all__ = [
    "SYNTHETIC_SHAPES", "synthetic_like", "prepare_round", "round_costs", "cached_costs",
    "repeat_times"
]

SYNTHETIC_SHAPES: dict[str, tuple[tuple[int, int, int], int, int]] = {
    # dataset: (image shape, classes, training images)
    "cifar10": ((3, 32, 32), 10, 50_000),
    "cifar100": ((3, 32, 32), 100, 50_000),
    "tinyimagenet": ((3, 64, 64), 200, 100_000),
    "fmnist": ((1, 28, 28), 10, 60_000),
}


def synthetic_like(dataset: str, n_train: int | None = None, n_test: int = 64) -> FedDataset:
    """Deterministic synthetic images shaped as ``dataset`` (:data:`SYNTHETIC_SHAPES`): for timing
    only."""
    if dataset not in SYNTHETIC_SHAPES:
        raise ValueError(f"synthetic_like: unknown dataset {dataset!r}; valid: "
                         f"{sorted(SYNTHETIC_SHAPES)}.")
    shape, k, n = SYNTHETIC_SHAPES[dataset]
    return load_dataset("synthetic", n_train=n_train or n, n_test=n_test, shape=shape,
                        num_classes=k, signal=2.0)


def prepare_round(cfg: Config, data: FedDataset) -> tuple[Engine, list, list]:
    """An engine after one untimed round of one local epoch (not evaluated), with round 2's client
    contexts and starts."""
    rounds = max(cfg.rounds, 2)
    eng = Engine(cfg.replace(local_epochs=1, rounds=rounds, eval_every=rounds), data=data,
                 progress=False)
    eng.run_round(0)
    eng.cfg = cfg  # the timed round trains the configured number of local epochs
    cids = [int(c) for c in sample_clients(eng.n_clients, cfg.sample_fraction, cfg.seed, 1)]
    ctxs = [eng.context(c, 1) for c in cids]
    return eng, ctxs, [eng.strategy.client_start(c, eng.global_params) for c in ctxs]


def round_costs(configs: Mapping[str, Config], data: FedDataset, reps: int = 2) -> pd.DataFrame:
    """Seconds of local training per round for each of ``configs`` (label → Config; the first is the
    baseline, FedAvg) on ``data``, timed ``reps`` times round-robin; one row per label: ``s /
    round`` (median), ``× FedAvg`` (median of the per-repeat ratios) and every repeat (``repeats
    (s)``, in order: :func:`repeat_times`)."""
    if not configs:
        raise ValueError("round_costs needs at least one config (the first is the baseline).")
    if reps < 1:
        raise ValueError(f"round_costs: reps={reps} must be >= 1.")
    prepared = {label: prepare_round(cfg.validate(), data) for label, cfg in configs.items()}
    times: dict[str, list[float]] = {label: [] for label in prepared}
    for _ in range(reps):
        for label, (eng, ctxs, starts) in prepared.items():
            cuda = eng.device.type == "cuda"
            if cuda:
                torch.cuda.synchronize(eng.device)
            t0 = time.perf_counter()
            eng.train(ctxs, starts)
            if cuda:
                torch.cuda.synchronize(eng.device)
            times[label].append(time.perf_counter() - t0)
    base = times[next(iter(times))]
    return pd.DataFrame([{"method": label, "s / round": statistics.median(ts),
                          "× FedAvg": statistics.median(t / b for t, b in zip(ts, base)),
                          "repeats (s)": [round(t, 6) for t in ts]}
                         for label, ts in times.items()]).set_index("method")


def _key(configs: Mapping[str, Config], data_spec: Mapping[str, Any], reps: int) -> str:
    blob = json.dumps(
        {
            "configs": {k: c.key()
                        for k, c in configs.items()}, "data": dict(data_spec), "reps": reps,
            "device": device_name(next(iter(configs.values())).device)
        }, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _same_device_other_threads(configs: Mapping[str, Config], spec: Mapping[str, Any], reps: int,
                               folder: Path) -> dict[str, Any] | None:
    """A stored measurement of the same configs, data and repeats on this device with another thread
    count (a CPU's name carries its threads), or None."""
    base = device_name(next(iter(configs.values())).device).split(",")[0]
    keys = {k: c.key() for k, c in configs.items()}
    for p in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        doc = json.loads(p.read_text())
        if (doc.get("data") == dict(spec) and doc.get("reps") == reps and
                str(doc.get("provenance", {}).get("device", "")).split(",")[0] == base and
            {k: Config.from_dict(c).key()
             for k, c in doc.get("configs", {}).items()} == keys):
            return doc
    return None


def cached_costs(configs: Mapping[str, Config], dataset: str, n_train: int, *, reps: int = 2,
                 store: Store | None = None, train: bool = True) -> pd.DataFrame | None:
    """:func:`round_costs` on :func:`synthetic_like` ``(dataset, n_train)``, stored in
    ``<store>/costs/``; a stored measurement is returned as is. ``train=False`` and nothing stored:
    ``None`` (pending)."""
    store = store or Store()
    spec = {"synthetic_like": dataset, "n_train": int(n_train)}
    path = store.root / "costs" / f"{_key(configs, spec, reps)}.json"
    if path.exists():
        doc = json.loads(path.read_text())
        return pd.DataFrame(doc["rows"]).set_index("method")
    # rendering never times: a measurement of this device with another thread count stands in
    if not train:
        same = _same_device_other_threads(configs, spec, reps, store.root / "costs")
        return None if same is None else pd.DataFrame(same["rows"]).set_index("method")
    df = round_costs(configs, synthetic_like(dataset, n_train), reps=reps)
    first = next(iter(configs.values()))
    doc = {
        "data": spec, "reps": reps, "configs": {k: c.to_dict()
                                                for k, c in configs.items()},
        "provenance": {
            "device": device_name(first.device), "commit": git_commit(), "torch": torch.__version__
        }, "rows": json.loads(df.reset_index().to_json(orient="records"))
    }
    atomic_write_text(path, json.dumps(doc, indent=1))
    return df


def repeat_times(costs: pd.DataFrame) -> pd.DataFrame:
    """The repeats of :func:`round_costs` / :func:`cached_costs` as a (repeat × method) table of
    seconds: row ``i`` holds every method's time in the ``i``-th round-robin pass, so ``t["FedCKA"]
    / t["FedAvg"]`` are the ratios of interleaved repeats."""
    reps = {m: list(r) for m, r in costs["repeats (s)"].items()}
    if len({len(r) for r in reps.values()}) != 1:
        raise ValueError(f"repeat_times: the methods have different numbers of repeats "
                         f"({ {m: len(r) for m, r in reps.items()} }); time them together with "
                         "round_costs.")
    return pd.DataFrame(reps).rename_axis("repeat")
