"""One stored experiment: :class:`Record` (a config, its per-round metrics, provenance) and the
checks its file passes when read (valid JSON, its key and its config's key its file name)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from fedlib.config import Config, ConfigError


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
        return Config.from_dict(self.config, migrate=True)

    def metric(self, name: str = "test_acc") -> pd.Series:
        h = self.frame()
        return h.set_index("round")[name].dropna() if name in h else pd.Series(dtype=float)

    def final(self, name: str = "test_acc", last: int = 1) -> float:
        """Median of the last ``last`` evaluated values of ``name``, as stored: an accuracy is a
        fraction (0.89)."""
        s = self.metric(name)
        return float(s.iloc[-last:].median()) if len(s) else float("nan")

    def frame(self) -> pd.DataFrame:
        df = pd.DataFrame([{k: v for k, v in h.items() if k != "clients"} for h in self.history])
        df.insert(0, "key", self.key)
        return df

    def problems(self) -> list[str]:
        """Non-finite metrics (NaN or inf) in the history, e.g. ``"test_acc is nan in round(s) 3"``:
        such a record is a diverged run, not a result (empty for a sound record)."""
        bad: dict[str, list[Any]] = {}
        for h in self.history:
            for k, v in h.items():
                if isinstance(v, float) and not math.isfinite(v):
                    bad.setdefault(k, []).append((h.get("round"), v))
        return [f"{k} is {vs[-1][1]} in round(s) {', '.join(str(r) for r, _ in vs)}"
                for k, vs in bad.items()]

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "config": self.config, "history": self.history,
                "provenance": self.provenance, "partition_hash": self.partition_hash,
                "final_params_hash": self.final_params_hash, "strategy": self.strategy}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Record":
        return cls(**d)


class CorruptRecordError(ValueError):
    """A stored record that cannot be read; the message names the file and the fix."""


class RecordMismatchError(CorruptRecordError):
    """A stored record whose key, or its config's key, is not its file name (a copied or renamed
    file)."""


def read_json(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; :class:`CorruptRecordError` naming the file and the fix if it is
    not one."""
    try:
        d = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CorruptRecordError(f"{path} is not valid JSON ({e}): cut short by a crash or a bad "
                                 "merge? Delete it (run() then recomputes that config) or restore "
                                 "it with git.") from e
    if not isinstance(d, dict):
        raise CorruptRecordError(f"{path} holds a JSON {type(d).__name__}, not a record; "
                                 "delete it.")
    return d


def check_key(p: Path, d: dict[str, Any]) -> None:
    """Raise :class:`RecordMismatchError` unless ``p``'s name, the record's ``key`` and its config's
    key agree (a config of an older version, which only ``Config.from_dict(..., migrate=True)``
    reads, keeps its stored key)."""
    key = d.get("key")
    try:
        cfg_key = Config.from_dict(d.get("config") or {}).key()
    except (ConfigError, TypeError):
        cfg_key = key
    if key == p.stem == cfg_key:
        return
    what = f"its key field is {key!r}" if key != p.stem else f"its config's key is {cfg_key!r}"
    fix = (f"move it to {p.with_name(f'{cfg_key}.json')} if that config's record belongs there, "
           "or delete it" if key == cfg_key
           else "delete it (its key field and its config disagree)")
    raise RecordMismatchError(f"{p} is not the record of {p.stem}: {what} (a copied or renamed "
                              f"file?). Nothing was read from it. Fix: {fix}; run() then "
                              f"recomputes {p.stem}.")


def shown_result(r: Record) -> tuple:
    """What a record shows, without the wall-clock fields and provenance of the run that produced
    it."""
    hist = [{k: v for k, v in h.items() if k not in ("time_s", "train_time_s")} for h in r.history]
    shown = json.dumps([r.config, hist, r.strategy], sort_keys=True, default=str)
    return (r.key, shown, r.partition_hash, r.final_params_hash)
