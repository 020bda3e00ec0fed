"""Experiment records: config → per-round metrics + provenance, stored atomically under ``results/``.

``run(cfg)`` is the one entry point notebooks use. A record is keyed by ``cfg.key()`` (the hash of every field
that changes the numbers); running a stored config again returns the stored record unless ``recompute=True``.
A run with ``checkpoint_every > 0`` resumes from its last checkpoint after an interruption and ends with the same
record as an uninterrupted run (the wall-clock fields aside).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import pandas as pd
import torch

from . import __version__
from .config import Config

DEFAULT_ROOT = Path(os.environ.get("FEDLIB_RESULTS", Path(__file__).resolve().parent.parent / "results"))


# ---------------------------------------------------------------------------------------- provenance

_CODE_PATHS = ("fedlib", "notebooks/*.ipynb", "benchmarks", "pyproject.toml")


def git_commit(path: Path | None = None) -> str:
    """``$FEDLIB_COMMIT`` if set (a copy of the tree run elsewhere, e.g. on a GPU machine), else the repository's HEAD
    commit, or ``"unknown"``; ``-dirty`` when code that produces numbers (the package,
    the notebooks, the benchmarks, pyproject.toml) differs from HEAD. Regenerated outputs (figures/, results/)
    do not count: a batch run rewrites them while it runs."""
    cwd = path or Path(__file__).resolve().parent
    if os.environ.get("FEDLIB_COMMIT"):
        return os.environ["FEDLIB_COMMIT"]
    try:
        sha = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=cwd, capture_output=True,
                             text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--",
                                *(f":(top){p}" for p in _CODE_PATHS)],
                               cwd=cwd, capture_output=True, text=True, timeout=5).stdout.strip()
        return (sha + ("-dirty" if dirty else "")) if sha else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def device_name(device: str | torch.device) -> str:
    device = torch.device(device)
    if device.type == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name(device)
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def params_hash(params: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for k in sorted(params):
        h.update(k.encode())
        h.update(params[k].detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def provenance(cfg: Config) -> dict[str, Any]:
    return {"fedlib": __version__, "commit": git_commit(), "torch": torch.__version__,
            "device": device_name(cfg.device), "executor": cfg.executor, "python": platform.python_version(),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}


# -------------------------------------------------------------------------------------------- record

@dataclass
class Record:
    """One finished experiment."""

    key: str
    config: dict[str, Any]
    history: list[dict[str, Any]]
    provenance: dict[str, Any]
    partition_hash: str
    final_params_hash: str
    strategy: dict[str, Any] = field(default_factory=dict)

    @property
    def cfg(self) -> Config:
        return Config.from_dict(self.config)

    @property
    def scale(self) -> str:
        return self.config.get("label", "").split("/")[-1] or "custom"

    def metric(self, name: str = "test_acc") -> pd.Series:
        h = self.frame()
        return h.set_index("round")[name].dropna() if name in h else pd.Series(dtype=float)

    def final(self, name: str = "test_acc", last: int = 1) -> float:
        """Median of the last ``last`` evaluated values of ``name`` (FedIntR reports the median of the last 10)."""
        s = self.metric(name)
        return float(s.iloc[-last:].median()) if len(s) else float("nan")

    def frame(self) -> pd.DataFrame:
        df = pd.DataFrame([{k: v for k, v in h.items() if k != "clients"} for h in self.history])
        df.insert(0, "key", self.key)
        return df

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "config": self.config, "history": self.history, "provenance": self.provenance,
                "partition_hash": self.partition_hash, "final_params_hash": self.final_params_hash,
                "strategy": self.strategy}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Record":
        return cls(**d)


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


class Store:
    """Records under ``root/records/<key>.json``; checkpoints and model artifacts under ``root/checkpoints/`` and
    ``root/artifacts/`` (not committed)."""

    def __init__(self, root: str | Path = DEFAULT_ROOT) -> None:
        self.root = Path(root)

    @classmethod
    def for_scale(cls, scale: str) -> "Store":
        """``results/`` for quick and paper runs; ``results/smoke/`` (not committed) for smoke runs."""
        return cls(DEFAULT_ROOT / "smoke" if scale == "smoke" else DEFAULT_ROOT)

    def record_path(self, key: str) -> Path:
        return self.root / "records" / f"{key}.json"

    def checkpoint_path(self, key: str) -> Path:
        return self.root / "checkpoints" / f"{key}.pt"

    def artifact_path(self, key: str) -> Path:
        return self.root / "artifacts" / f"{key}.pt"

    def artifacts(self, key: str, device: str = "cpu") -> dict[str, Any]:
        """``{"global": Params, "clients": {cid: Params}}`` saved by ``run(..., artifacts=True)``."""
        return torch.load(self.artifact_path(key), map_location=device, weights_only=True)

    def get(self, cfg_or_key: Config | str) -> Record | None:
        key = cfg_or_key if isinstance(cfg_or_key, str) else cfg_or_key.key()
        p = self.record_path(key)
        return Record.from_json(json.loads(p.read_text())) if p.exists() else None

    def put(self, record: Record) -> Path:
        p = self.record_path(record.key)
        atomic_write_text(p, json.dumps(record.to_json(), indent=1, default=str))
        return p

    def records(self) -> Iterable[Record]:
        for p in sorted((self.root / "records").glob("*.json")):
            yield Record.from_json(json.loads(p.read_text()))

    def frame(self, records: Iterable[Record] | None = None) -> pd.DataFrame:
        """All records' per-round metrics with their config fields as columns."""
        rows = []
        for r in records if records is not None else self.records():
            df = r.frame()
            for k, v in r.config.items():
                df[k] = [v] * len(df) if isinstance(v, (dict, list, tuple)) else v
            rows.append(df)
        return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def run(cfg: Config, *, store: Store | None = None, recompute: bool = False, progress: bool = True,
        save: bool = True, data: Any = None, callback: Any = None, artifacts: bool = False) -> Record:
    """Run ``cfg`` (or return its stored record). Resumes from a checkpoint when one exists.

    With ``artifacts=True`` the final global model and every client's latest local model are saved too
    (``Store.artifacts(key)``; not committed), and a stored record without them is recomputed."""
    from .engine import Engine

    store = store or Store()
    if not recompute and save:
        found = store.get(cfg)
        if found is not None and (not artifacts or store.artifact_path(found.key).exists()):
            return found
    t0 = time.perf_counter()
    engine = Engine(cfg, data=data, progress=progress, keep_client_models=artifacts)
    ckpt = store.checkpoint_path(cfg.key()) if (save and cfg.checkpoint_every) else None
    if ckpt is not None and ckpt.exists() and not recompute:
        engine.load_checkpoint(ckpt)
    start_round = engine.round
    engine.run(checkpoint=ckpt, callback=callback)
    prov = provenance(cfg)
    prov["executor"] = engine.executor_name  # what "auto" resolved to
    prov["wall_time_s"] = round(time.perf_counter() - t0, 3)
    prov["resumed_from_round"] = start_round
    record = Record(key=cfg.key(), config=cfg.to_dict(), history=engine.history, provenance=prov,
                    partition_hash=engine.partition.hash, final_params_hash=params_hash(engine.global_params),
                    strategy=engine.strategy.describe())
    record.engine = engine  # type: ignore[attr-defined]  # in-memory access to the trained models
    if save and artifacts:
        path = store.artifact_path(record.key)
        path.parent.mkdir(parents=True, exist_ok=True)
        cpu = lambda p: {k: v.detach().cpu() for k, v in p.items()}  # noqa: E731
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        torch.save({"global": cpu(engine.global_params),
                    "clients": {c: cpu(p) for c, p in engine.client_models.items()}}, tmp)
        os.replace(tmp, path)
    if save:
        store.put(record)
        if ckpt is not None and ckpt.exists():
            ckpt.unlink()
    return record
