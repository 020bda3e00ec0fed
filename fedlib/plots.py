"""Figures and paper-vs-ours tables that always say what produced them.

Every figure saved with :func:`save_figure` carries a provenance footer (scale, dataset, device, seeds, commit)
and is written as PNG and PDF to ``figures/<scale>/``, with a JSON sidecar holding the same provenance.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .results import atomic_write_text, device_name, git_commit

FIGURES = Path(__file__).resolve().parent.parent / "figures"


def provenance_line(scale: str, dataset: str, device: str, seeds: Sequence[int] | int, **extra: Any) -> str:
    """One line naming how a figure was produced; the paper's setup is only ever called 'paper' scale."""
    seeds = [seeds] if isinstance(seeds, int) else list(seeds)
    parts = [f"scale={scale}", f"dataset={dataset}", f"device={device_name(device)}",
             f"seeds={','.join(map(str, seeds))}", f"commit={git_commit()}"]
    parts += [f"{k}={v}" for k, v in extra.items()]
    note = "" if scale == "paper" else "  [NOT paper scale]"
    return "fedlib · " + " · ".join(parts) + note


def save_figure(fig: plt.Figure, name: str, provenance: str, scale: str, directory: Path | None = None) -> list[Path]:
    """Stamp ``provenance`` under the figure and write ``figures/<scale>/<name>.{png,pdf,json}``.

    Each scale has its own folder, so a smoke or quick run never overwrites a paper-scale figure
    (``figures/smoke/`` is not committed)."""
    directory = Path(directory or FIGURES) / scale
    directory.mkdir(parents=True, exist_ok=True)
    # below the axes; bbox_inches="tight" grows the saved canvas to include it
    fig.text(0.5, -0.01, provenance, ha="center", va="top", fontsize=6, color="0.35")
    out = []
    for ext in ("png", "pdf"):
        p = directory / f"{name}.{ext}"
        tmp = p.with_name(f".{p.stem}.tmp.{ext}")
        fig.savefig(tmp, dpi=150 if ext == "png" else None, bbox_inches="tight")
        tmp.replace(p)
        out.append(p)
    atomic_write_text(directory / f"{name}.json", json.dumps({"figure": name, "provenance": provenance}, indent=1))
    return out


def class_heatmap(ax: plt.Axes, counts: np.ndarray, title: str = "", annotate: bool = False) -> None:
    """Client × class sample counts (FedCKA Fig. 4, FedIntR Fig. 3): x = client, y = class."""
    im = ax.imshow(counts.T, aspect="auto", cmap="Blues", origin="lower")
    ax.set_xlabel("client")
    ax.set_ylabel("class")
    ax.set_title(title)
    n_c, n_k = counts.shape
    ax.set_xticks(range(n_c) if n_c <= 20 else np.linspace(0, n_c - 1, 6, dtype=int))
    ax.set_yticks(range(n_k) if n_k <= 20 else np.linspace(0, n_k - 1, 6, dtype=int))
    if annotate and n_c * n_k <= 200:
        for i in range(n_c):
            for j in range(n_k):
                ax.text(i, j, int(counts[i, j]), ha="center", va="center", fontsize=5,
                        color="white" if counts[i, j] > counts.max() / 2 else "black")
    plt.colorbar(im, ax=ax, fraction=0.046, pad=0.02)


def accuracy_curves(ax: plt.Axes, curves: Iterable[tuple[str, pd.Series]], hline: float | None = None,
                    hline_label: str = "") -> None:
    """Test accuracy per round for several runs, optionally with a reference line (e.g. an upper bound)."""
    for label, s in curves:
        ax.plot(s.index, 100 * s.values, marker="o", ms=3, label=label)
    if hline is not None:
        ax.axhline(hline, ls="--", color="0.4", label=hline_label)
    ax.set_xlabel("round")
    ax.set_ylabel("test accuracy (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
