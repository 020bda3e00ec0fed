"""Figures and paper-vs-ours tables that always say what produced them.

Every figure saved with :func:`save_figure` carries a provenance footer and is written as PNG and PDF to
``figures/<scale>/``, with a JSON sidecar holding the same provenance. The footer of a figure that shows runs comes
from their records (``provenance_line(..., runs=records)``): the commits, devices and seeds that trained them, and,
separately, the commit that rendered it. Files are written deterministically (no dates in their metadata) and only
when their bytes change, so rendering the same records again leaves them untouched.
"""

from __future__ import annotations

import io
import re
import textwrap
import json
from pathlib import Path
from typing import Any, Iterable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .atomic import atomic_write_bytes, atomic_write_text
from .provenance import code_commit, device_name, runs_provenance, short_commit

FIGURES = Path(__file__).resolve().parent.parent / "figures"

# no creation dates or versions in the files: the same figure gives the same bytes
_METADATA = {"png": {"Software": None}, "pdf": {"Creator": None, "Producer": None, "CreationDate": None}}


class Provenance(str):
    """A footer line that also carries its fields (``.fields``), which :func:`save_figure` writes to the sidecar."""

    fields: dict[str, Any]

    def __new__(cls, text: str, fields: dict[str, Any]) -> "Provenance":
        obj = super().__new__(cls, text)
        obj.fields = fields
        return obj


def provenance_line(scale: str, dataset: str, device: str, seeds: Sequence[int] | int, *, runs: Any = None,
                    **extra: Any) -> Provenance:
    """One line naming how a figure was produced; the paper's setup is only ever called 'paper' scale.

    ``runs`` (the Records behind the figure, or nested dicts / lists of them, pending and diverged placeholders
    included, or a :class:`~fedlib.report.Report` whose ``runs`` were registered) gives the seeds, commits and
    devices of the runs that made it; the rendering commit is stated after them. Without ``runs`` (a figure
    computed while rendering, e.g. the partitions) the line gives ``seeds``, and the commit and ``device`` of the
    rendering."""
    seeds = [seeds] if isinstance(seeds, int) else list(seeds)
    fields: dict[str, Any] = {"scale": scale, "dataset": dataset, "rendered_commit": code_commit()}
    parts = [f"scale={scale}", f"dataset={dataset}"]
    if runs is None:
        # the rendering machine without its thread count: rendering the same records on it gives the same stamp
        fields.update(seeds=seeds, device=re.sub(r", \d+ threads?\)$", ")", device_name(device)))
        parts += [f"seeds={','.join(map(str, seeds))}"] * bool(seeds) + [
            f"rendered at commit={fields['rendered_commit']} on device={fields['device']}"]
    else:
        prov = dict(runs.provenance) if hasattr(runs, "table_provenance") else runs_provenance(runs)
        fields["runs"] = {k: prov.get(k) for k in ("runs", "pending", "diverged", "seeds", "commits", "devices")}
        n, pend, div = prov.get("runs", 0), prov.get("pending", 0), prov.get("diverged", 0)
        count = f"runs={n}" + (f" ({pend} pending)" if pend else "") + (f" ({div} diverged)" if div else "")
        parts += [count, f"seeds={','.join(map(str, prov.get('seeds') or [])) or 'none yet'}",
                  f"trained at commit={','.join(short_commit(str(c)) for c in prov.get('commits') or []) or '—'}",
                  f"on device={'; '.join(map(str, prov.get('devices') or [])) or '—'}",
                  f"rendered at commit={short_commit(fields['rendered_commit'])}"]
    parts += [f"{k}={v}" for k, v in extra.items()]
    fields.update(extra={k: str(v) for k, v in extra.items()})
    note = "" if scale == "paper" else "  [NOT paper scale]"
    return Provenance("fedlib · " + " · ".join(parts) + note, fields)


def save_figure(fig: plt.Figure, name: str, provenance: str, scale: str, directory: Path | None = None) -> list[Path]:
    """Stamp ``provenance`` under the figure and write ``figures/<scale>/<name>.{png,pdf,json}``; a file whose
    bytes would not change is left as it is.

    Each scale has its own folder, so a smoke or quick run never overwrites a paper-scale figure
    (``figures/smoke/`` is not committed)."""
    directory = Path(directory or FIGURES) / scale
    directory.mkdir(parents=True, exist_ok=True)
    # below the axes, wrapped to the figure's width; bbox_inches="tight" grows the saved canvas to include it
    stamp = "\n".join(textwrap.wrap(str(provenance), width=max(60, int(fig.get_figwidth() * 72 / 3.3)),
                                     break_on_hyphens=False))
    fig.text(0.5, -0.01, stamp, ha="center", va="top", fontsize=6, color="0.35")
    out = []
    for ext in ("png", "pdf"):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, dpi=150 if ext == "png" else None, bbox_inches="tight",
                    metadata=_METADATA[ext])
        out.append(atomic_write_bytes(directory / f"{name}.{ext}", buf.getvalue()))
    side = {"figure": name, "provenance": str(provenance), **getattr(provenance, "fields", {})}
    atomic_write_text(directory / f"{name}.json", json.dumps(side, indent=1, default=str))
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
    """Test accuracy per round for several runs, optionally with a reference line (e.g. an upper bound). Each method
    keeps its colour and line style (:func:`fedlib.style.method_style`), so overlapping curves stay visible, and the
    y-axis leaves room above the highest curve or line."""
    from .style import method_style

    top = hline if hline is not None else 0.0
    for label, s in curves:
        n = len(s)
        ax.plot(s.index, 100 * s.values, ms=4, markevery=max(1, n // 10), label=label, **method_style(label))
        top = max(top, float(np.nanmax(100 * s.values)) if n else 0.0)
    if hline is not None:
        ax.axhline(hline, ls=(0, (2, 2)), color="0.3", lw=1, label=hline_label)
    if top > 0:
        ax.set_ylim(top=min(100.0, top + 0.08 * max(top - ax.get_ylim()[0], 10.0)))
    ax.set_xlabel("round")
    ax.set_ylabel("test accuracy (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
