"""What a batch of notebook renders writes into ``notebooks/``, done so that nothing is lost: each
executed notebook's outputs copied into the committed one (:func:`write_back`, atomically, only when
its cells are the ones executed; a notebook with uncommitted changes is copied to
``.render-backup/`` first), every notebook checked writable before any executes
(:func:`notebook_problems`), and one batch at a time per tree (:func:`batch_lock`: a second one
refuses with one line)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from fedlib.atomic import atomic_write_text, writable_problem

try:
    import fcntl
except ImportError:  # not a POSIX system: batches are not locked
    fcntl = None  # type: ignore[assignment]

__all__ = ["write_back", "merged_streams", "edited", "backup", "notebook_problems", "batch_lock",
           "BatchRunningError"]


def write_back(executed: Path, source: Path) -> Path | None:
    """Put ``executed``'s outputs into the notebook ``source`` (the committed one), so that a reader
    sees its tables, figures and claims without running it: papermill's injected-parameters cell is
    dropped (the parameters cell keeps its defaults), papermill's cell metadata and stderr streams
    (warnings naming local paths) are left out, and every code cell's outputs and execution count
    are copied by position. A ``source`` whose cells are not the ones executed (edited meanwhile) is
    left as it is: ValueError. A ``source`` with uncommitted changes is first copied to
    ``.render-backup/<time>/`` at the top of its git tree: that copy is returned (else None)."""
    ran, nb = json.loads(executed.read_text()), json.loads(source.read_text())
    cells = [
        c for c in ran["cells"]
        if "injected-parameters" not in c.get("metadata", {}).get("tags", [])
    ]
    text = lambda c: "".join(c["source"]) if isinstance(c["source"], list) else c["source"
                                                                                  ]  # noqa: E731
    if [text(c) for c in cells] != [text(c) for c in nb["cells"]]:
        raise ValueError(f"{executed} was not executed from the current {source} (edited "
                         f"meanwhile?); {source} was left as it is: render it again.")
    for mine, out in zip(nb["cells"], cells):
        if mine["cell_type"] == "code":
            mine["outputs"] = merged_streams(
                [o for o in out.get("outputs", []) if o.get("name") != "stderr"])
            mine["execution_count"] = out.get("execution_count")
    text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    kept = backup(source) if text != source.read_text() and edited(source) else None
    atomic_write_text(source, text)
    return kept


def _git(folder: Path, *args: str) -> str | None:
    """``git args`` run in ``folder``: its output, or None outside a git tree (or without git)."""
    try:
        out = subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def edited(path: Path) -> bool:
    """Whether ``path`` has changes git has not committed (modified, staged or untracked, not
    ignored)."""
    return bool((_git(path.parent, "status", "--porcelain", "--", path.name) or "").strip())


def backup(path: Path) -> Path:
    """Copy ``path`` to ``.render-backup/<time>/<its path in the tree>`` at the top of its git tree;
    the copy."""
    top = Path((_git(path.parent, "rev-parse", "--show-toplevel") or str(path.parent)).strip())
    rel = path.resolve().relative_to(top.resolve()) if path.resolve().is_relative_to(
        top.resolve()) else path.name
    dest = top / ".render-backup" / time.strftime("%Y%m%d-%H%M%S") / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(path, dest)
    return dest


def merged_streams(outputs: list[dict]) -> list[dict]:
    """``outputs`` with each run of consecutive stream outputs of one name as one (how a kernel
    splits a cell's prints into messages depends on timing: merged, the same prints give the same
    bytes)."""
    out: list[dict] = []
    for o in outputs:
        last = out[-1] if out else {}
        if o.get("output_type") == "stream" and last.get(
                "output_type") == "stream" and last["name"] == o["name"]:
            joined = "".join(last["text"]) + "".join(o["text"])
            out[-1] = {**last, "text": joined.splitlines(keepends=True)}
        else:
            out.append(o)
    return out


def notebook_problems(nbs: list[Path]) -> list[str]:
    """Why write-back could not replace each of ``nbs`` (read-only files, a folder where no file can
    be written), checked before any notebook executes."""
    bad = [f"{nb} is read-only" for nb in nbs  # its mode, not only access: root may write any file
           if nb.exists() and not (os.access(nb, os.W_OK) and nb.stat().st_mode & stat.S_IWUSR)]
    for folder in sorted({nb.parent for nb in nbs}):
        if (why := writable_problem(folder)) is not None:
            bad.append(f"cannot write to {folder} ({why})")
    return bad


class BatchRunningError(RuntimeError):
    """Another batch of renders holds this tree's lock."""


@contextmanager
def batch_lock(folder: Path) -> Iterator[None]:
    """Hold ``folder/.reproduce.lock`` while a batch runs (released when the process ends, however
    it ends); raise :class:`BatchRunningError` naming the other batch's process when one holds
    it."""
    if fcntl is None:  # not a POSIX system: no lock
        yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".reproduce.lock", "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            pid = f.read().strip() or "?"
            raise BatchRunningError(f"another render batch (process {pid}) is writing {folder} in "
                                    "this tree; nothing was run. Wait for it to finish, then run "
                                    "this again.") from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        yield
