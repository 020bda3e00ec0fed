"""Progress of a run, one round at a time: what a terminal, JupyterLab and a batch runner each show.

:class:`RoundProgress` is what :meth:`fedlib.engine.Engine.run` reports each finished round to.
Where it goes (:func:`progress_mode`):

* a terminal (``python -m fedlib.companion.campaign``, scripts): one line per round on stdout,
  ``[fedlib] fedintr/paper fedavg · round 3/100 · acc 71.23 % · loss 0.8123 · 2.10 s/round · ETA 3.4
  min``;
* JupyterLab: a tqdm widget bar when ``ipywidgets`` is installed (a dev dependency), otherwise the
  same line rewritten in place (a carriage return), never tqdm's "IProgress not found" warning;
* ``progress=False``: nothing.

Independently, ``$FEDLIB_ROUND_LOG=<file>`` appends every round's line to that file whatever
``progress`` says: ``python -m fedlib.companion.reproduce`` sets it for the notebooks it executes
and prints the lines in its terminal.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from typing import Any, TextIO

import math

__all__ = ["RoundProgress", "progress_mode", "in_jupyter", "format_round", "ROUND_LOG_ENV"]

ROUND_LOG_ENV = "FEDLIB_ROUND_LOG"


def in_jupyter() -> bool:
    """Whether this code runs in a Jupyter kernel (JupyterLab, papermill)."""
    ip = sys.modules.get("IPython")
    shell = ip.get_ipython() if ip is not None and hasattr(ip, "get_ipython") else None
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def progress_mode(progress: bool | None) -> str:
    """``"off"`` (``progress=False``), else ``"bar"`` (Jupyter with ipywidgets), ``"text"`` (Jupyter
    without) or ``"lines"`` (anywhere else)."""
    if progress is False:
        return "off"
    if in_jupyter():
        return "bar" if importlib.util.find_spec("ipywidgets") is not None else "text"
    return "lines"


def format_round(what: str, entry: dict[str, Any], total: int, s_per_round: float,
                 left: int) -> str:
    """One round's line: round, test accuracy (when evaluated), loss (test, else training), s/round,
    ETA."""
    parts = [f"[fedlib] {what}", f"round {entry['round']}/{total}"]
    if "test_acc" in entry:
        parts.append(f"acc {100 * entry['test_acc']:.2f} %")
    if "personal_acc_mean" in entry:
        parts.append(f"personal acc {100 * entry['personal_acc_mean']:.2f} %")
    loss = entry.get("test_loss", entry.get("train_loss"))
    if isinstance(loss, (int, float)):
        parts.append(f"{'test' if 'test_loss' in entry else 'train'} loss {loss:.4f}")
    parts += [f"{s_per_round:.2f} s/round", f"ETA {fmt_s(s_per_round * left)}"]
    return " · ".join(parts)


class RoundProgress:
    """Reports rounds ``start+1 .. total`` of a run labelled ``what`` in ``mode``
    (:func:`progress_mode`)."""

    def __init__(self, what: str, start: int, total: int, mode: str, *,
                 stream: TextIO | None = None, log_path: str | None = None) -> None:
        self.what, self.start, self.total, self.mode = what, start, total, mode
        self.stream = stream
        self.log_path = log_path
        self.t0 = time.perf_counter()
        self.bar = None
        if mode == "bar":
            from tqdm.notebook import tqdm  # ipywidgets is importable (progress_mode checked)

            self.bar = tqdm(total=total, initial=start, desc=what, leave=False)

    def update(self, entry: dict[str, Any]) -> str:
        """Report a finished round (an :class:`~fedlib.engine.Engine` history entry); returns its
        line."""
        done = entry["round"] - self.start
        s_per_round = (time.perf_counter() - self.t0) / max(done, 1)
        line = format_round(self.what, entry, self.total, s_per_round, self.total - entry["round"])
        if self.mode == "lines":
            print(line, file=self.stream or sys.stdout, flush=True)
        elif self.mode == "text":
            print("\r" + line, end="", file=self.stream or sys.stdout, flush=True)
        elif self.bar is not None:
            self.bar.update(1)
            post = {
                k: v
                for k, v in (("acc", entry.get("test_acc")), ("loss", entry.get("train_loss")))
                if isinstance(v, float)
            }
            self.bar.set_postfix({k: f"{v:.4f}" for k, v in post.items()}, refresh=True)
        if self.log_path:
            with open(self.log_path, "a") as f:
                f.write(line + "\n")
        return line

    def close(self) -> None:
        if self.mode == "text":
            print(file=self.stream or sys.stdout, flush=True)
        if self.bar is not None:
            self.bar.close()


def fmt_s(s: float) -> str:
    """Seconds as ``42 s``, ``3.5 min`` or ``2.1 h``."""
    if not math.isfinite(s):
        return "inf"
    return f"{s / 3600:.1f} h" if s >= 5400 else (f"{s / 60:.1f} min" if s >= 90 else f"{s:.0f} s")
