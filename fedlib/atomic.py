"""Atomic writes: a file is either its old version or its complete new one, never half written.

Each writer writes a hidden temporary file next to the target (``.<name>.tmp<pid>``) and renames it over the
target (``os.replace`` is atomic on POSIX); a writer that fails removes its temporary file, and one left by a killed
process is removed by :meth:`fedlib.results.Store.clean_temp`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import torch

__all__ = ["atomic_write", "atomic_write_text", "atomic_save", "temporary_name"]


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


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write(path, lambda tmp: tmp.write_text(text))


def atomic_save(path: str | Path, obj: Any) -> Path:
    """``torch.save(obj, path)``, atomically."""
    return atomic_write(path, lambda tmp: torch.save(obj, tmp))
