"""Atomic writes: a file is either its old version or its complete new one, never half written.

Each writer writes a hidden temporary file next to the target (``.<name>.tmp<pid>``) and renames it
over the target (``os.replace`` is atomic on POSIX); a writer that fails removes its temporary file,
and one left by a killed process is removed by :meth:`fedlib.companion.results.Store.clean_temp`.

Text and bytes writers leave a file alone when it already holds exactly the new content:
regenerating outputs that did not change (figures, summaries, ledgers) leaves ``git status`` clean
and the file's mtime as it was.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Callable

import torch

__all__ = [
    "atomic_write", "atomic_write_text", "atomic_write_bytes", "atomic_save", "temporary_name",
    "writable_problem", "orphaned"
]


def temporary_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a temporary file next to ``path``, then rename it to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def _same(path: Path, data: bytes) -> bool:
    try:
        return path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data
    except OSError:
        return False


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically, unless ``path`` already holds exactly ``data``."""
    path = Path(path)
    if not _same(path, data):
        atomic_write(path, lambda tmp: tmp.write_bytes(data))
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically, unless ``path`` already holds exactly that
    text."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_save(path: str | Path, obj: Any) -> Path:
    """``torch.save(obj, path)``, atomically."""
    return atomic_write(path, lambda tmp: torch.save(obj, tmp))


def writable_problem(folder: str | Path) -> str | None:
    """Why files cannot be written in ``folder`` (created if missing), or None: a probe file is
    written and removed."""
    d = Path(folder)
    try:
        d.mkdir(parents=True, exist_ok=True)
        probe = temporary_name(d / ".probe")
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        return f"{type(e).__name__}: {e.strerror or e}"
    return None


# ".<name>.tmp<pid>" (here) and "<name>.tmp<pid>"
_TMP = re.compile(r"^\.?(?P<name>.+)\.tmp(?P<pid>\d+)$")


def orphaned(path: Path) -> bool:
    """Whether ``path`` is a temporary file of a writer process that no longer exists (not this
    one)."""
    m = _TMP.match(Path(path).name)
    if m is None or int(m["pid"]) == os.getpid():
        return False
    try:
        os.kill(int(m["pid"]), 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists but is not ours, or cannot tell
        return False
    return False
