"""Experiment records: config → per-round metrics + provenance, stored atomically under
``results/``.

``run(cfg)`` is the one entry point notebooks use. A record is keyed by ``cfg.key()`` (the hash of
every field that changes the numbers); running a stored config again returns the stored record
unless ``recompute=True``. A run with ``checkpoint_every > 0`` resumes from its last checkpoint
("resuming from round N of M") and ends with the same record as an uninterrupted run (wall-clock
fields aside); by default (``None``) a run estimated over a minute checkpoints every round. ``run``
prints its estimate and whether it checkpoints before the first round; on a CPU, paper-scale work
over an hour stops unless told to go on (:func:`fedlib.companion.costs.before_run`).

Nothing is lost when a run fails: ``run`` checks that the store is writable before it trains; a run
that raises (e.g. a non-finite loss in round k) leaves ``failed/<key>.json`` with its finished
rounds and the error (a Ctrl-C that its checkpoint holds leaves none), and the next ``run`` warns
what happened before it retries. A run that ends at chance accuracy is flagged (a warning and
``provenance["warnings"]``; a stored record is judged again by the current rule when it is loaded).
Unreadable records are named; listing skips them with a warning. Every record is checked when it is
read: its key and its config's key must be its file name (else :class:`RecordMismatchError`), and
non-finite metrics are flagged (:meth:`Record.problems`). A record is rewritten only when its result
changed. An unreadable checkpoint is moved to ``failed/`` and the run starts over. Temporary files
of writes killed midway are removed by the next ``run``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import pandas as pd
import torch

from fedlib.atomic import (  # noqa: F401  (re-exported)
    atomic_save, atomic_write, atomic_write_text, orphaned)
from fedlib.config import Config, device_problem
from fedlib.companion.costs import before_run
from fedlib.companion.record import (CorruptRecordError, Record, RecordMismatchError, check_key,
                                     read_json, shown_result)
from fedlib.data import CLASSES, canonical_name
from fedlib.engine import Engine
from fedlib.companion.provenance import (  # noqa: F401  (re-exported)
    REPO, device_name, git_commit, params_hash, provenance)
from fedlib.companion.scales import scale_of
from fedlib.companion.run_checks import learning_warnings  # noqa: F401  (re-exported)

DEFAULT_ROOT = Path(os.environ.get("FEDLIB_RESULTS", REPO / "results"))


class StoreNotWritableError(PermissionError):
    """The results store cannot be written; raised before any training."""


class Store:
    """Records under ``root/records/<key>.json``; checkpoints and model artifacts under
    ``root/checkpoints/`` and ``root/artifacts/`` (not committed)."""

    def __init__(self, root: str | Path = DEFAULT_ROOT) -> None:
        self.root = Path(root)

    @classmethod
    def for_scale(cls, scale: str) -> "Store":
        """The scale's store: ``results/`` or its folder there (:attr:`Scale.store
        <fedlib.companion.scales.Scale.store>`: ``results/smoke/``, not committed)."""
        return cls(DEFAULT_ROOT / scale_of(scale).store)

    def record_path(self, key: str) -> Path:
        return self.root / "records" / f"{key}.json"

    def failed_path(self, key: str) -> Path:
        """The last failed run of ``key``: its finished rounds and the error (never a finished
        record)."""
        return self.root / "failed" / f"{key}.json"

    def checkpoint_path(self, key: str) -> Path:
        return self.root / "checkpoints" / f"{key}.pt"

    def set_aside(self, path: Path, tag: str = "") -> Path:
        """Move an unreadable checkpoint, artifact or record ``path`` to
        ``failed/<stem><tag><suffix>`` (kept for inspection; ``tag`` keeps it apart from the failure
        record ``failed/<key>.json``)."""
        dest = self.root / "failed" / f"{path.stem}{tag}{path.suffix}"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(path), dest)
        return dest

    def checkpoint_round(self, key: str) -> int:
        """The rounds finished in ``key``'s checkpoint (0 when there is none or it cannot be read:
        the run starts over, :func:`run` decides)."""
        path = self.checkpoint_path(key)
        if not path.exists():
            return 0
        try:
            return int(torch.load(path, map_location="cpu", weights_only=False)["round"])
        except Exception:  # noqa: BLE001 — an unreadable checkpoint
            return 0

    def artifact_path(self, key: str) -> Path:
        return self.root / "artifacts" / f"{key}.pt"

    def analysis_path(self, key: str, name: str) -> Path:
        """``analysis/<key>.<name>.json``: a small result computed from a run's saved models
        (committed, unlike the models), e.g. its layer similarity, so that a fresh checkout renders
        it without the models."""
        return self.root / "analysis" / f"{key}.{name}.json"

    def artifacts(self, key: str, device: str = "cpu") -> dict[str, Any]:
        """``{"global": Params, "clients": {cid: Params}}`` saved by ``run(...,
        artifacts=True)``."""
        return torch.load(self.artifact_path(key), map_location=device, weights_only=True)

    def get(self, cfg_or_key: Config | str) -> Record | None:
        """The finished record of a config or key, or None. An unreadable file raises
        :class:`CorruptRecordError` (:class:`RecordMismatchError` when it holds another config's
        record)."""
        key = cfg_or_key if isinstance(cfg_or_key, str) else cfg_or_key.key()
        p = self.record_path(key)
        return self._load(p) if p.exists() else None

    @staticmethod
    def _load(p: Path) -> Record | None:
        """The record in ``p`` once its key and its config's key are checked against the file name;
        a record with non-finite metrics is returned with a warning naming them
        (:meth:`Record.problems`)."""
        d = read_json(p)
        if d.get("status", "finished") != "finished":  # a failed run is never a result
            return None
        check_key(p, d)
        try:
            rec = Record.from_json(d)
        except TypeError as e:
            raise CorruptRecordError(f"{p} is not a record of this fedlib version ({e}); delete it "
                                     "or read it with json.load.") from e
        for why in rec.problems():
            warnings.warn(f"Stored record {p}: {why}. It is a diverged run, not a result.",
                          RuntimeWarning, stacklevel=3)
        return rec

    def put(self, record: Record) -> Path:
        """Write ``record``, unless the file already holds the same result (the same config, history
        up to wall-clock times, and final weights): rerunning a deterministic run leaves its record
        untouched."""
        p = self.record_path(record.key)
        try:
            old = Record.from_json(read_json(p)) if p.exists() else None
        except (CorruptRecordError, TypeError):
            old = None
        if old is None or shown_result(old) != shown_result(record):
            atomic_write_text(p, json.dumps(record.to_json(), indent=1, default=str))
        return p

    def last_failure(self, cfg_or_key: Config | str) -> dict[str, Any] | None:
        """What the last failed run of a config left (see :func:`run`), or None."""
        key = cfg_or_key if isinstance(cfg_or_key, str) else cfg_or_key.key()
        p = self.failed_path(key)
        try:
            return read_json(p) if p.exists() else None
        except CorruptRecordError as e:
            warnings.warn(str(e), RuntimeWarning, stacklevel=2)
            return None

    def records(self) -> Iterable[Record]:
        """Every finished record; unreadable files are skipped with a warning that names them."""
        for p in sorted((self.root / "records").glob("*.json")):
            try:
                r = self._load(p)
            except CorruptRecordError as e:
                warnings.warn(f"Skipping {p.name}: {e}", RuntimeWarning, stacklevel=2)
                continue
            if r is not None:
                yield r

    def check_writable(self, *subdirs: str) -> None:
        """Create ``root/<subdir>`` and write a probe file in each, or raise
        :class:`StoreNotWritableError`."""
        for sub in subdirs or ("records",):
            d = self.root / sub
            try:
                d.mkdir(parents=True, exist_ok=True)
                probe = d / f".probe.tmp{os.getpid()}"
                probe.write_text("")
                probe.unlink()
            except OSError as e:
                raise StoreNotWritableError(
                    f"Cannot write results to {d} ({type(e).__name__}: {e.strerror or e}); nothing "
                    "was trained. Make it writable, pass store=Store(<writable folder>) or set "
                    "FEDLIB_RESULTS=<folder>, or run(..., save=False) to keep the record in memory "
                    "only.") from e

    def clean_temp(self, min_age_s: float = 60.0) -> list[Path]:
        """Remove temporary files of writes whose process died (older than ``min_age_s``); returns
        them."""
        removed = []
        now = time.time()
        for sub in ("records", "failed", "checkpoints", "artifacts", "summary"):
            for p in (self.root / sub).glob("*.tmp*"):
                if not orphaned(p):
                    continue
                try:
                    if now - p.stat().st_mtime >= min_age_s:
                        p.unlink()
                        removed.append(p)
                except OSError:
                    pass
        return removed

    def frame(self, records: Iterable[Record] | None = None) -> pd.DataFrame:
        """All records' per-round metrics with their config fields as columns."""
        rows = []
        for r in records if records is not None else self.records():
            df = r.frame()
            for k, v in r.config.items():
                df[k] = [v] * len(df) if isinstance(v, (dict, list, tuple)) else v
            rows.append(df)
        return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


@dataclass(frozen=True)
class Pending:
    """A planned run whose record is not in the store yet: what :func:`fetch` returns with
    ``train=False``, so a notebook can render the records that exist and mark the others "pending"
    instead of training them."""

    key: str
    config: dict[str, Any]

    @property
    def cfg(self) -> Config:
        return Config.from_dict(self.config, migrate=True)

    def __repr__(self) -> str:
        label, strategy = self.config.get("label", ""), self.config.get("strategy")
        return f"Pending({label}, {strategy}, key={self.key})"


def fetch(cfg: Config, *, store: Store | None = None, train: bool = True,
          **run_kw: Any) -> Record | Pending:
    """The stored record of ``cfg``; if there is none, train it (``train=True``, i.e. :func:`run`)
    or return a :class:`Pending` placeholder (``train=False``: render what a batch job such as the
    campaign has produced)."""
    store = store or Store()
    cfg = cfg.validate()
    if train:
        return run(cfg, store=store, **run_kw)
    rec = store.get(cfg)
    return rec if rec is not None else Pending(cfg.key(), cfg.to_dict())


def is_pending(x: Any) -> bool:
    """True for a :class:`Pending` placeholder (or a collection containing one)."""
    if isinstance(x, Pending):
        return True
    if isinstance(x, dict):
        return any(is_pending(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return any(is_pending(v) for v in x)
    return False


def run(cfg: Config, *, store: Store | None = None, recompute: bool = False,
        progress: bool | None = None, save: bool = True, data: Any = None, callback: Any = None,
        artifacts: bool = False, allow_long: bool | None = None,
        guard: Callable[[Config], None] | None = None) -> Record:
    """Run ``cfg`` (or return its stored record). Resumes from a checkpoint when one exists.

    ``progress``: a line or bar per round (:mod:`fedlib.progress`; None: what the terminal or
    Jupyter shows best, False: none). ``allow_long=True`` (or ``FEDLIB_ALLOW_LONG=1``) starts
    paper-scale work estimated longer than an hour on a CPU, which otherwise raises
    :class:`fedlib.companion.costs.LongRunError` before training; ``guard`` replaces that check
    (:func:`fedlib.companion.costs.before_run`) for a caller that holds its own (a whole artifact
    checked at once, a campaign's budget).

    With ``artifacts=True`` the final global model and every client's latest local model are saved
    too (``Store.artifacts(key)``; not committed), and a stored record without them is recomputed
    for its models (the stored record is kept as it is). If training raises, the finished rounds and
    the error are written to ``Store.failed_path(key)`` and the error is re-raised; the next run of
    the config warns about it and retries."""
    store = store or Store()
    cfg = cfg.validate()
    key = cfg.key()
    if (why := device_problem(cfg.device)) is not None:
        raise ValueError(f"Config device {cfg.device!r}: {why}.")
    if save:
        store.clean_temp()
    found = None
    if not recompute and save:
        try:
            found = store.get(cfg)
        except RecordMismatchError:
            raise
        except CorruptRecordError as e:
            # never overwritten: kept beside the store for whoever can read it
            dest = store.set_aside(store.record_path(key), ".unreadable-record")
            warnings.warn(f"{e} Moved it to {dest}; recomputing it.", RuntimeWarning, stacklevel=2)
            found = None
        if found is not None and (not artifacts or store.artifact_path(found.key).exists()):
            for w in learning_warnings(found.cfg, found.history,
                                       CLASSES[canonical_name(found.cfg.dataset)]):
                warnings.warn(f"Stored record {found.key}: {w}", RuntimeWarning, stacklevel=2)
            return found
    # long work on a CPU stops here; the estimate and whether it checkpoints are printed before the
    # first round
    every = before_run(cfg, allow_long=allow_long, guard=guard,
                       announce=progress is not False).checkpoint_every
    if save:
        store.check_writable("records", "failed", *(["checkpoints"] if every else []),
                             *(["artifacts"] if artifacts else []))
    t0 = time.perf_counter()
    engine = Engine(cfg.replace(checkpoint_every=every), data=data, progress=progress,
                    keep_client_models=artifacts)
    ckpt = store.checkpoint_path(key) if (save and every) else None
    if ckpt is not None and ckpt.exists() and not recompute:
        try:
            engine.load_checkpoint(ckpt)
        except Exception as e:  # noqa: BLE001
            # truncated, from another version or config: start from round 0
            dest = store.set_aside(ckpt)
            warnings.warn(f"Checkpoint {ckpt} cannot be resumed ({type(e).__name__}: "
                          f"{str(e)[:200]}); moved it to {dest} and training {cfg.label or key} "
                          "from round 1.", RuntimeWarning, stacklevel=2)
            engine = Engine(cfg, data=data, progress=progress, keep_client_models=artifacts)
    start_round = engine.round
    failure = store.last_failure(key) if save else None
    if start_round and progress is not False:
        print(f"[fedlib] {cfg.label or key}: resuming from round {start_round} of {cfg.rounds} "
              f"({ckpt})", flush=True)
    elif failure is not None and not start_round:
        err = failure.get("error", {})
        warnings.warn(f"The last run of this config ({key}) failed in round "
                      f"{failure.get('failed_round')} with {err.get('type')}: "
                      f"{err.get('message')}. Its finished rounds are in {store.failed_path(key)}. "
                      "Running it again.", RuntimeWarning, stacklevel=2)
    try:
        engine.run(checkpoint=ckpt, callback=callback)
    except (Exception, KeyboardInterrupt) as e:
        # a Ctrl-C its checkpoint holds is no failure: the run resumes
        if save and not (isinstance(e, KeyboardInterrupt) and ckpt is not None and ckpt.exists()):
            _save_failure(store, cfg, engine, e, time.perf_counter() - t0)
        raise
    prov = {**provenance(cfg), "executor": engine.executor_name,  # what executor "auto" resolved to
            "wall_time_s": round(time.perf_counter() - t0, 3), "resumed_from_round": start_round,
            "checkpoint_every": every}  # what checkpoint_every=None (auto) resolved to
    notes = learning_warnings(cfg, engine.history, engine.data.num_classes)
    for w in notes:
        warnings.warn(f"{cfg.label or key}: {w}", RuntimeWarning, stacklevel=2)
    if notes:
        prov["warnings"] = notes
    record = Record(key=key, config=cfg.to_dict(), history=engine.history, provenance=prov,
                    partition_hash=engine.partition.hash,
                    final_params_hash=params_hash(engine.global_params),
                    strategy=engine.strategy.describe())
    if save and artifacts:
        cpu = lambda p: {k: v.detach().cpu() for k, v in p.items()}  # noqa: E731
        blob = {"global": cpu(engine.global_params),
                "clients": {c: cpu(p) for c, p in engine.client_models.items()}}
        atomic_save(store.artifact_path(key), blob)
    if save and found is None:
        store.put(record)
        store.failed_path(key).unlink(missing_ok=True)
    # after the record is safe: finished, its checkpoint is spent
    if ckpt is not None and ckpt.exists():
        ckpt.unlink()
    # trained again only for its models: the stored record stays as it was
    if save and found is not None:
        if record.final_params_hash != found.final_params_hash:
            warnings.warn(f"{cfg.label or key}: trained again for its models, it ended with other "
                          "weights than the stored record (threads or hardware change float "
                          "sums); the models saved are this run's, the record is kept as stored.",
                          RuntimeWarning, stacklevel=2)
        return found
    return record


def _save_failure(store: Store, cfg: Config, engine: Any, err: BaseException, wall: float) -> None:
    """Write the rounds finished before ``err`` to ``store.failed_path``; never masks ``err``."""
    path = store.failed_path(cfg.key())
    doc = {"key": cfg.key(), "status": "failed", "config": cfg.to_dict(),
           "history": list(engine.history), "failed_round": len(engine.history) + 1,
           "error": {"type": type(err).__name__, "message": str(err)},
           "provenance": {**provenance(cfg), "wall_time_s": round(wall, 3)},
           "partition_hash": engine.partition.hash}
    try:
        atomic_write_text(path, json.dumps(doc, indent=1, default=str))
    except OSError as e:
        warnings.warn(f"Could not save the failed run's {len(engine.history)} rounds to {path}: "
                      f"{e}", RuntimeWarning)
        return
    if hasattr(err, "add_note"):
        err.add_note(f"fedlib: the {len(engine.history)} finished round(s) and this error are "
                     f"saved in {path}.")
