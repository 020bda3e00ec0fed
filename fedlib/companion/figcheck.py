"""What a figure draws, recorded in its JSON sidecar, and the checks a reviewer would make of it.

The drawing functions note each series they draw on its axes (:func:`note_series`: label, seeds, the
seeds planned, the rounds behind it, its interval, its marks); :func:`figure_facts` reads those
notes, every visible text with its size and every axis's scale from a drawn figure, and
:func:`figure_problems` lists what would mislead:

- text under :data:`MIN_FONT` points;
- a legend entry of a drawn curve (three points or more: not a reference line) that does not give
  its seeds;
- a series with fewer seeds than planned and no mark saying so; a figure whose runs include diverged
  or pending ones (its sidecar's ``runs``) that does not say so; a legend entry that does not give
  its seeds; a one-seed series with an interval, or a one-seed curve drawn solid;
- rounds that differ between the series of an axis, or within one series, or between the runs behind
  the figure (its sidecar's ``runs.rounds``; a figure with a round axis shows its curves' rounds),
  without each count written on the figure as ``"<r> rounds"``;
- seeds off their plateau that are not ringed;
- "best μ" where no μ search ran; a μ axis on which no method has two μ;
- a log axis carrying symmetric (arithmetic) t intervals.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

import matplotlib.pyplot as plt
from matplotlib.text import Text

__all__ = ["MIN_FONT", "note_series", "flag_figure", "figure_facts", "figure_problems"]

MIN_FONT = 8.0


def note_series(ax: plt.Axes, label: str, *, n: int, planned: int | None = None,
                rounds: Iterable[int] = (), interval: str | None = None, marked: bool = False,
                legend: bool = False, xs: Iterable[Any] = (), curve: bool = False,
                dashed: bool = False, off: int = 0, ringed: bool = False) -> None:
    """Note one drawn series on ``ax`` for the sidecar. ``n``: seeds behind it (the fewest at any
    point); ``planned``: the seeds its plan runs (None: ``n``); ``rounds``: the rounds of its runs
    (each distinct count); ``interval``: ``"t"`` (symmetric 95 % t), ``"log-t"`` (t interval of the
    log values, i.e. around the geometric mean) or None; ``marked``: the figure marks it as short of
    its plan; ``legend``: ``label`` is a legend entry; ``xs``: its x values; ``curve``/``dashed``: a
    line over rounds, and whether it is dashed; ``off``/``ringed``: seeds off their plateau, and
    whether they are ringed."""
    ax.__dict__.setdefault("_fedlib_series", []).append(
        dict(label=str(label), n=int(n), planned=int(planned if planned is not None else n),
             rounds=sorted({int(r)
                            for r in rounds}), interval=interval, marked=bool(marked),
             legend=bool(legend),
             xs=[float(x) if isinstance(x, (int, float)) else str(x) for x in xs],
             curve=bool(curve), dashed=bool(dashed), off=int(off), ringed=bool(ringed)))


def flag_figure(fig: Any, **flags: Any) -> None:
    """Figure-wide facts for the check, e.g. ``mu_search=True`` where a μ search ran."""
    root = fig.figure if hasattr(fig, "figure") and fig.figure is not None else fig
    root.__dict__.setdefault("_fedlib_flags", {}).update(flags)


def _texts(fig: plt.Figure) -> list[tuple[str, float]]:
    out: dict[tuple[str, float], None] = {}
    for t in fig.findobj(Text):
        s = t.get_text().strip()
        if s and t.get_visible() and (t.axes is None or t.axes.get_visible()):
            out[(s, round(float(t.get_fontsize()), 2))] = None
    return list(out)


def figure_facts(fig: plt.Figure) -> dict[str, Any]:
    """The drawn figure's texts (``[text, points]``), axes (title, labels, scales, noted series) and
    flags; call it after the figure is drawn (tick labels exist only then)."""
    axes = []
    for ax in fig.get_axes():
        if not ax.get_visible():
            continue
        legend = {t.get_text() for t in ax.get_legend().get_texts()} if ax.get_legend() else set()
        curves = [str(ln.get_label()) for ln in ax.get_lines()
                  # data curves, not reference lines
                  if str(ln.get_label()) in legend and len(ln.get_xdata()) >= 3]
        axes.append(dict(title=ax.get_title(), xlabel=ax.get_xlabel(), ylabel=ax.get_ylabel(),
                         xscale=ax.get_xscale(), yscale=ax.get_yscale(), legend_curves=curves,
                         series=list(ax.__dict__.get("_fedlib_series", []))))
    return dict(texts=[[s, z] for s, z in _texts(fig)], axes=axes,
                flags=dict(fig.__dict__.get("_fedlib_flags", {})))


def _stated(rounds: int, text: str) -> bool:
    return re.search(rf"(?<![\d.]){rounds} rounds\b", text) is not None


def figure_problems(side: Mapping[str, Any]) -> list[str]:
    """What in the figure described by ``side`` (a sidecar with :func:`figure_facts`' fields) would
    mislead a reader; empty when nothing does. A sidecar without those fields is itself a
    problem."""
    if "texts" not in side or "axes" not in side:
        return ["the sidecar does not record what the figure draws (texts, axes, series)"]
    out: list[str] = []
    texts = [(str(s), float(z)) for s, z in side["texts"]]
    alltext = "\n".join(s for s, _ in texts)
    flags = side.get("flags", {})
    small = sorted({(z, s[:40]) for s, z in texts if z < MIN_FONT - 1e-6})
    if small:
        out.append(f"{len(small)} text(s) under {MIN_FONT:g} pt, e.g. {small[0][1]!r} at "
                   f"{small[0][0]:g} pt")
    if re.search(r"best\s*μ", alltext) and not flags.get("mu_search"):
        out.append("says 'best μ' where no μ search ran")
    runs = side.get("runs") or {}
    if runs.get("diverged") and "diverged" not in alltext:
        out.append(f"{runs['diverged']} of its runs diverged and the figure does not say so")
    if runs.get("pending") and not re.search(r"pending|not run yet|incomplete|planned", alltext):
        out.append(f"{runs['pending']} of its runs are pending and the figure does not say so")
    run_rounds = sorted(runs.get("rounds") or [])
    over_rounds = any("round" in str(ax.get("xlabel", "")) for ax in side["axes"])
    if len(run_rounds) > 1 and not over_rounds and not all(_stated(r, alltext) for r in run_rounds):
        out.append(f"its runs differ in rounds ({run_rounds}) and the figure does not state each")
    for ax in side["axes"]:
        series = ax.get("series", [])
        where = ax.get("title", "").split("\n")[0][:50] or "an axis"
        for s in series:
            lab = s["label"]
            if s["n"] < s["planned"] and not s["marked"]:
                out.append(f"{where}: {lab} has {s['n']} of {s['planned']} planned seeds, not "
                           "marked")
            if s["legend"] and not re.search(rf"n\s*=\s*{s['n']}\b", lab):
                out.append(f"{where}: legend entry {lab!r} does not give its seeds (n={s['n']})")
            if s["n"] == 1 and s["interval"]:
                out.append(f"{where}: {lab} is one seed but has an interval")
            if s["n"] == 1 and s["curve"] and not s["dashed"]:
                out.append(f"{where}: {lab} is a one-seed curve drawn solid")
            if s["off"] and not s["ringed"]:
                out.append(f"{where}: {lab} has {s['off']} seed(s) off their plateau, not ringed")
            if len(s["rounds"]) > 1 and not all(_stated(r, alltext) for r in s["rounds"]):
                out.append(f"{where}: {lab} mixes {s['rounds']} rounds without saying so")
            for kind, key in ((ax.get("yscale"), "y"), (ax.get("xscale"), "x")):  # axis scales
                if kind == "log" and s["interval"] == "t" and key == s.get("interval_axis", "y"):
                    out.append(f"{where}: {lab} has symmetric t intervals on a log axis")
        for lab in ax.get("legend_curves", []):
            if not re.search(r"\bn\s*=\s*\d", lab):
                out.append(f"{where}: legend entry {lab!r} of a curve does not give its seeds")
        rounds = {r for s in series for r in s["rounds"]}
        if len(rounds) > 1 and not all(_stated(r, alltext) for r in rounds):
            out.append(f"{where}: its series differ in rounds ({sorted(rounds)}) without saying so")
        if re.fullmatch(r"\s*μ(\s*\(.*\))?\s*", ax.get("xlabel", "")) and series \
                and not any(len(set(s["xs"])) > 1 for s in series):
            out.append(f"{where}: a μ axis where no method has two μ")
    return out
