"""Where numbers come from: the code's commit, the device, the run's provenance, and that of a set
of runs.

A record's provenance (:func:`provenance`) is written when it is trained. A figure or table that
renders records takes its provenance from them (:func:`runs_provenance`: their commits, devices and
seeds), never from the machine that renders it; the rendering commit is stated separately.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import platform
import subprocess
from pathlib import Path
from typing import Any, Iterator

import torch

from fedlib import __version__

# the repository this package sits in: its results/, figures/, notebooks/ and docs/
REPO = Path(__file__).resolve().parents[2]

__all__ = ["REPO", "git_commit", "running_commit", "code_commit", "device_name", "host_cpu",
           "params_hash", "provenance", "flatten_runs", "unique_runs", "runs_provenance",
           "short_commit", "worker_seconds"]

# The code that produces numbers. The notebooks are left out: they hold no algorithm code
# (parameters and calls on fedlib), and they are committed with their outputs, so a commit of a
# render must not change the code's identity.
_CODE_PATHS = ("fedlib", "benchmarks/*.py", "pyproject.toml")


def git_commit(path: Path | None = None) -> str:
    """``$FEDLIB_COMMIT`` if set (a copy of the tree run elsewhere, e.g. on a GPU machine), else the
    repository's HEAD commit, or ``"unknown"``; ``-dirty`` when code that produces numbers (the
    package, the benchmark scripts, pyproject.toml) differs from HEAD. Regenerated outputs
    (figures/, results/) do not count: a batch run rewrites them while it runs."""
    cwd = path or Path(__file__).resolve().parent
    if os.environ.get("FEDLIB_COMMIT"):
        return os.environ["FEDLIB_COMMIT"]
    try:
        sha = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=cwd,
                             capture_output=True, text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--",
                                *(f":(top){p}" for p in _CODE_PATHS)],
                               cwd=cwd, capture_output=True, text=True, timeout=5).stdout.strip()
        return (sha + ("-dirty" if dirty else "")) if sha else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def code_commit(path: Path | None = None) -> str:
    """The commit that last changed the code that produces numbers (:func:`git_commit`'s paths),
    ``-dirty`` when that code differs from it; ``$FEDLIB_COMMIT`` if set. What a rendered figure or
    summary is stamped with: a commit that only adds records, figures or summaries does not change
    it, so rendering the same records again gives the same bytes."""
    cwd = path or Path(__file__).resolve().parent
    if os.environ.get("FEDLIB_COMMIT"):
        return os.environ["FEDLIB_COMMIT"]
    head = git_commit(path)
    try:
        sha = subprocess.run(
            ["git", "log", "-1", "--format=%H", "--", *(f":(top){p}" for p in _CODE_PATHS)],
            cwd=cwd, capture_output=True, text=True, timeout=5).stdout.strip()[:12]
    except (OSError, subprocess.SubprocessError):
        return head
    return (sha + ("-dirty" if head.endswith("-dirty") else "")) if sha else head


def short_commit(commit: str) -> str:
    """``"a18ab63"`` for ``"a18ab63f0c1d"``, keeping a ``-dirty`` suffix; other strings
    unchanged."""
    sha, dirty, rest = commit.partition("-dirty")
    if len(sha) > 7 and all(c in "0123456789abcdef" for c in sha):
        return sha[:7] + dirty + rest
    return commit


def device_name(device: str | torch.device, threads: int | None = None) -> str:
    """The name measurements are filed under: the GPU's name, ``"cuda (none on this machine)"`` for
    a CUDA device this machine lacks (never the CPU's name: a CPU's timings must not stand for a
    GPU's), or the CPU's with the threads a run trains on (``threads``; default: this process's)."""
    device = torch.device(device)
    if device.type == "cuda":
        if torch.cuda.is_available():
            return torch.cuda.get_device_name(device)
        return "cuda (none on this machine)"
    cpu = platform.processor() or platform.machine()
    return f"cpu ({cpu}, {threads or torch.get_num_threads()} threads)"


# The instruction sets that change how fast torch trains on a CPU (bf16 and int8 matrix units, wide
# vectors).
_CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def host_cpu(cpuinfo: str | None = None) -> str:
    """The CPU that ran this process, e.g. ``"Intel(R) Xeon(R) Processor @ 2.50GHz [avx2 avx512f
    amx_bf16 amx_tile]"``: the model name and the speed-relevant flags of ``/proc/cpuinfo`` (given
    as text, or read). Two hosts of one model name can differ in their instruction sets and in speed
    (benchmarks/RESULTS.md, "Two hosts of one CPU name")."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    name = fields.get("model name") or platform.processor() or platform.machine()
    flags = set(fields.get("flags", "").split())
    return f"{name} [{' '.join(f for f in _CPU_FLAGS if f in flags)}]" if flags else name


def params_hash(params: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for k in sorted(params):
        h.update(k.encode())
        h.update(params[k].detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


_IMPORTED = git_commit()  # the code this process imported
_HOST_CPU = host_cpu()


def running_commit() -> str:
    """:func:`git_commit` as it read when this process imported fedlib (``$FEDLIB_COMMIT`` where
    set): the code a run executes. A long-lived process (a campaign worker, a notebook kernel) keeps
    the code it imported, so a commit made while it trains is not its code."""
    return os.environ.get("FEDLIB_COMMIT") or _IMPORTED


def provenance(cfg: Any) -> dict[str, Any]:
    """What a run records about the code and machine that trained it."""
    return {"fedlib": __version__, "commit": running_commit(), "torch": torch.__version__,
            "device": device_name(cfg.device), "cpu": _HOST_CPU, "executor": cfg.executor,
            "python": platform.python_version(),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}


def flatten_runs(x: Any) -> Iterator[Any]:
    """The leaves of nested dicts / lists / tuples (records, pending and diverged placeholders);
    None is skipped."""
    if isinstance(x, dict):
        for v in x.values():
            yield from flatten_runs(v)
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from flatten_runs(v)
    elif x is not None:
        yield x


def unique_runs(x: Any) -> dict[Any, Any]:
    """The leaves of ``x`` (:func:`flatten_runs`) by run key, a run behind two artifacts once (no
    key: by identity)."""
    return {getattr(r, "key", None) or id(r): r for r in flatten_runs(x)}


def _is_record(r: Any) -> bool:
    return hasattr(r, "history") and isinstance(getattr(r, "provenance", None), dict)


def worker_seconds(record: Any) -> float:
    """The seconds of one worker a stored run took over all its slices: its provenance's
    ``wall_time_s`` (the last slice, setup included), plus, for a run resumed from a checkpoint
    (``resumed_from_round``), the measured ``time_s`` of the rounds its earlier slices trained
    (their setup is not counted)."""
    prov = getattr(record, "provenance", None) or {}
    before = int(prov.get("resumed_from_round") or 0)
    earlier = sum(float(h.get("time_s") or 0.0) for h in getattr(record, "history", ()) or ()
                  if isinstance(h.get("round"), int) and h["round"] <= before)
    return float(prov.get("wall_time_s") or 0.0) + earlier


def runs_provenance(runs: Any) -> dict[str, Any]:
    """The provenance of the runs behind a figure or table (a Record, Pending or Diverged
    placeholder, or nested dicts / lists of them): how many there are, pending and diverged, and the
    seeds, rounds, commits, devices and precisions of the records among them, with their total
    training minutes. A run that appears more than once (one record behind two artifacts, same key)
    counts once."""
    flat = list(unique_runs(runs).values())
    recs = [r for r in flat if _is_record(r)]
    pending = sum(type(r).__name__ == "Pending" for r in flat)
    diverged = sum(hasattr(r, "failed_round") for r in flat)
    diverged += sum(bool(r.problems()) for r in recs if hasattr(r, "problems"))
    uniq = lambda vals: sorted({v for v in vals if v is not None}, key=str)  # noqa: E731
    return {
        "runs": len(flat), "pending": pending, "diverged": diverged,
        "seeds": uniq(r.config.get("seed") for r in recs),
        "rounds": sorted({int(r.config["rounds"])
                          for r in recs if r.config.get("rounds")}),
        "commits": uniq(r.provenance.get("commit") for r in recs), "devices": uniq(
            r.provenance.get("device_name") or r.provenance.get("device")
            for r in recs), "precisions": uniq(r.config.get("precision", "fp32") for r in recs),
        "training_minutes": round(sum(worker_seconds(r) for r in recs) / 60, 2)
    }
