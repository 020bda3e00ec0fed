"""The campaign's plan: its items (one per distinct planned run) and the plan as text, the table
`python -m fedlib.companion.campaign plan` prints and the numbers
`python -m fedlib.companion.campaign doc` writes into docs/campaign.md's generated block."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from fedlib.atomic import atomic_write_text
from fedlib.config import Config
from fedlib.companion.common import RunId
from fedlib.companion.costs import CostTable
from fedlib.progress import fmt_s as _fmt_s
from fedlib.companion.papers import DATASET_FIRST, DEFAULT_PRIORITY, priority
from fedlib.companion.provenance import REPO, device_name, git_commit

__all__ = ["Item", "format_plan", "matching", "plan_doc", "write_plan_doc", "DOC_BEGIN", "DOC_END"]


@dataclass
class Item:
    """One planned run, however many artifacts need it."""

    key: str
    cfg: Config
    uses: list[tuple[str, str, RunId]] = field(default_factory=list)  # (notebook, artifact, run id)
    priority: int = DEFAULT_PRIORITY
    order: int = 0  # declaration order (ties)
    status: str = "pending"  # done | diverged | pending | partial | blocked
    why: str = ""
    rounds_done: int = 0
    estimate_s: float = 0.0
    source: str = ""
    retry: bool = False  # train it again even if it diverged (--retry-diverged)
    recompute: bool = False  # its stored record is a diverged one: retrying replaces it
    off: str = ""  # done, but off its plateau (verdicts.off_plateau_by_every_metric): why
    moot: str = ""  # why no verdict can depend on it (defer_moot): trained last

    @property
    def what(self) -> str:
        """``notebook · artifact · run name [key]`` of its first use (the name: ``str`` of its run
        id): how the campaign's log names it."""
        nb, art, name = self.uses[0]
        return f"{nb} · {art} · {name} [{self.key}]"

    @property
    def sort_key(self) -> tuple:
        """A moot run last (:func:`fedlib.companion.campaign.defer_moot`); a run a checkpoint holds
        rounds of first, whatever its priority (what an earlier slice began ends before new work
        starts: its checkpoint is on this machine only), then priority, Fashion-MNIST first, the
        shortest estimate first (the most runs, and the cheapest settings' columns complete, per
        slice), then declaration order."""
        return (bool(self.moot), self.status != "partial", self.priority,
                self.cfg.dataset != DATASET_FIRST, self.estimate_s, self.order)

    @property
    def setting(self) -> str:
        """The key of its config but for the seed: the runs whose seeds a comparison pools."""
        return self.cfg.replace(seed=0).key()


def _no_pipes(text: str) -> str:
    """Text for a markdown table cell (no column separators)."""
    return text.replace("|", "/")


def matching(items: list[Item], texts: list[str]) -> list[Item]:
    """The items one of whose uses, written ``notebook · artifact · name`` as ``plan`` prints it (a
    name's ``|`` as ``/``), contains one of ``texts``."""
    says = lambda it: [_no_pipes(f"{nb} · {art} · {rid}") for nb, art, rid in it.uses]  # noqa: E731
    return [it for it in items if any(_no_pipes(t) in u for u in says(it) for t in texts)]


def format_plan(items: list[Item], scale: str, device: str) -> str:
    """The plan as a table: one row per run, highest priority first, with totals."""
    rows = [f"# Campaign plan — scale `{scale}`, device `{device}` ({len(items)} runs)", "",
            "| # | priority | status | est. | source | dataset | strategy | run (notebook · "
            "artifact · name) | key |",
            "|--:|--:|:--|--:|:--|:--|:--|:--|:--|"]
    for i, it in enumerate(items, 1):
        nb, art, name = it.uses[0]
        more = f" (+{len(it.uses) - 1} more)" if len(it.uses) > 1 else ""
        done = f" {it.rounds_done}/{it.cfg.rounds}" if it.status == "partial" else ""
        status = it.status + done + (" (moot)" if it.moot else "")
        est, src = ((_fmt_s(it.estimate_s), _short_source(it.source)) if it.status != "done"
                    else ("", ""))
        rows.append(f"| {i} | {it.priority} | {status} | {est} | {_no_pipes(src)} | "
                    f"{it.cfg.dataset} | {it.cfg.strategy} | "
                    f"{_no_pipes(f'{nb} · {art} · {name}')}{more} | {it.key} |")
    by = {s: [i for i in items if i.status.startswith(s)]
          for s in ("done", "diverged", "pending", "partial", "blocked")}
    todo = by["pending"] + by["partial"]
    rows += ["", f"done {len(by['done'])}, diverged {len(by['diverged'])} (finished: not retried "
                 f"unless --retry-diverged), pending {len(todo)} "
                 f"({_fmt_s(sum(i.estimate_s for i in todo))} estimated on {device}), blocked "
                 f"{len(by['blocked'])} ({_fmt_s(sum(i.estimate_s for i in by['blocked']))} once "
                 "their data is present)."]
    if moot := [i for i in todo if i.moot]:
        rows += [f"moot {len(moot)} of the pending ({_fmt_s(sum(i.estimate_s for i in moot))}): "
                 "another seed of their setting diverged or ended off its plateau, so no verdict "
                 "depends on them; trained last."]
    rows += [f"diverged: {i.key}: {i.why}" for i in by["diverged"]]
    rows += [
        f"unreadable record (pending: training it moves the file aside): {i.why}" for i in todo
        if i.why
    ]
    blocked = sorted({i.why for i in by["blocked"]})
    rows += [f"blocked: {w}" for w in blocked]
    sources = sorted({i.source for i in todo + by["blocked"]})
    rows += ["", "Estimates: " + "; ".join(sources) if sources else ""]
    return "\n".join(rows)


def _short_source(source: str) -> str:
    """``measured on <device>`` or ``default`` (the full text is under the plan)."""
    return source.split(" (")[0] if source.startswith("measured") else source.split(":")[0]


def plan_doc(items: list[Item], costs: CostTable, scale: str, device: str) -> str:
    """The plan in numbers for docs/campaign.md: runs and estimated hours by notebook and by
    priority (every run, whatever its status here), and where the estimates come from."""

    dev_name = device_name(device)
    est = {it.key: costs.estimate(it.cfg, device, device_name=dev_name) for it in items}
    hours = lambda its: sum(est[i.key].seconds for i in its) / 3600  # noqa: E731
    measured = sum(e.source.startswith("measured") for e in est.values())
    out = [f"_Generated by `python -m fedlib.companion.campaign doc` at commit {git_commit()}: the "
           f"plans at scale `{scale}` costed on `{device}` with the cost table "
           f"`{_rel(costs.path)}` ({measured} of {len(items)} estimates measured, the others the "
           "stated default model)._", "",
           f"**{len(items)} distinct runs, {hours(items):.1f} h** estimated on `{device}` (a run "
           "that several artifacts or notebooks share counts once, under the first notebook that "
           "lists it).", "",
           "| notebook | runs | datasets | estimated hours |", "|:--|--:|:--|--:|"]
    by_nb: dict[str, list[Item]] = {}
    for it in items:
        by_nb.setdefault(it.uses[0][0], []).append(it)
    for nb, its in sorted(by_nb.items()):
        out.append(f"| {nb} | {len(its)} | {', '.join(sorted({i.cfg.dataset for i in its}))} | "
                   f"{hours(its):.1f} |")
    out += [
        "", "| priority | artifacts | runs | estimated hours | cumulative hours |",
        "|--:|:--|--:|--:|--:|"
    ]
    by_p: dict[int, list[Item]] = {}
    for it in items:
        by_p.setdefault(it.priority, []).append(it)
    total = 0.0
    for p, its in sorted(by_p.items()):
        arts = sorted(
            {f"{nb[:2]} · {art}"
             for i in its
             for nb, art, _ in i.uses if priority(nb, art) == p})
        total += hours(its)
        out.append(f"| {p} | {_no_pipes(', '.join(arts))} | {len(its)} | {hours(its):.1f} | "
                   f"{total:.1f} |")
    sources = sorted({e.source for e in est.values()})
    return "\n".join(out + ["", "Estimate sources: " + "; ".join(sources) + "."])


def _rel(path: Path | None) -> str:
    root = REPO
    return "none" if path is None else str(
        path.relative_to(root) if path.is_relative_to(root) else path)


DOC_BEGIN, DOC_END = "<!-- campaign plan: begin -->", "<!-- campaign plan: end -->"


def write_plan_doc(path: Path, text: str) -> None:
    """Replace the block between :data:`DOC_BEGIN` and :data:`DOC_END` in ``path`` with ``text``."""
    doc = path.read_text()
    if DOC_BEGIN not in doc or DOC_END not in doc:
        raise SystemExit(f"{path} has no block to regenerate: put the lines {DOC_BEGIN!r} and "
                         f"{DOC_END!r} where the plan's numbers go.")
    head, rest = doc.split(DOC_BEGIN, 1)
    atomic_write_text(path, f"{head}{DOC_BEGIN}\n{text}\n{DOC_END}{rest.split(DOC_END, 1)[1]}")
