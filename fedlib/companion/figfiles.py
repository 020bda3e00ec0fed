"""A figure's files, stamped with what produced it.

Every figure saved with :func:`save_figure` carries a provenance footer and is written as PNG and
PDF to ``figures/<scale>/``, with a JSON sidecar holding the same provenance. The sidecar also
records what the figure draws (its texts, axes and series:
:func:`fedlib.companion.figcheck.figure_facts`), which the figure check reads. The footer of a
figure that shows runs comes from their records (``provenance_line(..., runs=records)``): the
commits, devices and seeds that trained them, and, separately, the commit that rendered it. Files
are written deterministically (no dates in their metadata) and only when their bytes change, so
rendering the same records again leaves them untouched.
"""

from __future__ import annotations

import io
import json
import os
import re
import textwrap
from pathlib import Path
from typing import Any, Sequence

import matplotlib.pyplot as plt

from fedlib.atomic import atomic_write_bytes, atomic_write_text
from fedlib.companion.figcheck import MIN_FONT, figure_facts
from fedlib.companion.provenance import (REPO, code_commit, device_name, runs_provenance,
                                         short_commit)
from fedlib.companion.scales import scale_of

# figures/ beside the package, or $FEDLIB_FIGURES (as $FEDLIB_RESULTS for the results)
FIGURES = Path(os.environ.get("FEDLIB_FIGURES", REPO / "figures"))

# no creation dates or versions in the files: the same figure gives the same bytes
_METADATA = {"png": {"Software": None},
             "pdf": {"Creator": None, "Producer": None, "CreationDate": None}}


class Provenance(str):
    """A footer line that also carries its fields (``.fields``), which :func:`save_figure` writes to
    the sidecar."""

    fields: dict[str, Any]

    def __new__(cls, text: str, fields: dict[str, Any]) -> "Provenance":
        obj = super().__new__(cls, text)
        obj.fields = fields
        return obj


def provenance_line(scale: str, dataset: str, device: str, seeds: Sequence[int] | int, *,
                    runs: Any = None, **extra: Any) -> Provenance:
    """One line naming how a figure was produced; the paper's setup is only ever called 'paper'
    scale.

    ``runs`` (the Records behind the figure, or nested dicts / lists of them, pending and diverged
    placeholders included, or a :class:`~fedlib.companion.report.Report` whose ``runs`` were
    registered) gives the seeds, commits and devices of the runs that made it; the rendering commit
    is stated after them. Without ``runs`` (a figure computed while rendering, e.g. the partitions)
    the line gives ``seeds``, and the commit and ``device`` of the rendering."""
    seeds = [seeds] if isinstance(seeds, int) else list(seeds)
    fields: dict[str, Any] = {"scale": scale, "dataset": dataset, "rendered_commit": code_commit()}
    parts = [f"scale={scale}", f"dataset={dataset}"]
    if runs is None:
        # the rendering machine without its thread count: the same records rendered on it give
        # the same stamp
        fields.update(seeds=seeds, device=re.sub(r", \d+ threads?\)$", ")", device_name(device)))
        parts += [f"seeds={','.join(map(str, seeds))}"] * bool(seeds) + [
            f"rendered at commit={fields['rendered_commit']} on device={fields['device']}"]
    else:
        prov = dict(runs.provenance) if hasattr(runs, "table_provenance") else runs_provenance(runs)
        keys = ("runs", "pending", "diverged", "seeds", "rounds", "commits", "devices")
        fields["runs"] = {k: prov.get(k) for k in keys}
        n, pend, div = prov.get("runs", 0), prov.get("pending", 0), prov.get("diverged", 0)
        count = (f"runs={n}" + (f" ({pend} pending)" if pend else "")
                 + (f" ({div} diverged)" if div else ""))
        commits = ",".join(short_commit(str(c)) for c in prov.get("commits") or [])
        parts += [count, f"seeds={','.join(map(str, prov.get('seeds') or [])) or 'none yet'}",
                  f"trained at commit={commits or '—'}",
                  f"on device={'; '.join(map(str, prov.get('devices') or [])) or '—'}",
                  f"rendered at commit={short_commit(fields['rendered_commit'])}"]
    parts += [f"{k}={v}" for k, v in extra.items()]
    fields.update(extra={k: str(v) for k, v in extra.items()})
    note = scale_of(scale).stamp
    return Provenance("fedlib · " + " · ".join(parts) + note, fields)


def save_figure(fig: plt.Figure, name: str, provenance: str, scale: str,
                directory: Path | None = None) -> list[Path]:
    """Stamp ``provenance`` under the figure and write ``figures/<scale>/<name>.{png,pdf,json}``; a
    file whose bytes would not change is left as it is.

    Each scale has its own folder, so a smoke or quick run never overwrites a paper-scale figure
    (``figures/smoke/`` is not committed)."""
    directory = Path(directory or FIGURES) / scale
    directory.mkdir(parents=True, exist_ok=True)
    # below the axes, wrapped to the figure's width; bbox_inches="tight" grows the saved canvas
    # to include it
    width = max(60, int(fig.get_figwidth() * 72 / 4.5))
    stamp = "\n".join(textwrap.wrap(str(provenance), width=width, break_on_hyphens=False))
    fig.text(0.5, -0.01, stamp, ha="center", va="top", fontsize=MIN_FONT, color="0.35")
    out = []
    for ext in ("png", "pdf"):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, dpi=150 if ext == "png" else None, bbox_inches="tight",
                    metadata=_METADATA[ext])
        out.append(atomic_write_bytes(directory / f"{name}.{ext}", buf.getvalue()))
    # what the figure draws (texts, axes, series), for the figure check (fedlib.companion.figcheck)
    side = {"figure": name, "provenance": str(provenance), **getattr(provenance, "fields", {}),
            **figure_facts(fig)}
    atomic_write_text(directory / f"{name}.json", json.dumps(side, indent=1, default=str))
    return out
