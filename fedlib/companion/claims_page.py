"""The claims page (``results/claims-<scale>.md``): every paper's claims in one scannable page, and
the few lines per paper a batch of renders ends with (:func:`findings`; notebook 09 reads them at
length: :mod:`fedlib.companion.findings`)."""

from __future__ import annotations

import math
import re
from typing import Any, Mapping, Sequence

from fedlib.companion.paper import ROMAN
from fedlib.companion import papers as registry  # read at call time: a test may register a paper
from fedlib.companion.report import claim_cells
from fedlib.companion.scales import scale_of
from fedlib.companion.verdicts import PENDING, VERDICTS, holm

__all__ = ["VERDICT_COLUMNS", "paper_names", "md_cell", "paper_of", "holm_readings",
           "claim_figures", "claims_overview", "findings"]

VERDICT_COLUMNS = (*VERDICTS, PENDING)


def md_cell(v: object) -> str:
    """A markdown table cell: pipes escaped, newlines flattened."""
    return str(v).replace("|", "\\|").replace("\n", " ")


def holm_readings(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The family-wise reading of each stored claim row of one family (``status`` and ``p``, as
    :meth:`fedlib.companion.verdicts.Verdict.to_dict` holds them): "holds" / "not after Holm" for a
    decided t row (:func:`fedlib.companion.verdicts.holm`), "" else."""
    tested = [
        i for i, r in enumerate(rows) if r.get("status") in VERDICTS[:2] and
        r.get("p") is not None and math.isfinite(float(r["p"]))
    ]
    out = [""] * len(rows)
    for i, held in zip(tested, holm([float(rows[i]["p"]) for i in tested])):
        out[i] = "holds" if held else "not after Holm"
    return out


def claim_figures(source: str, figures: list[str]) -> list[str]:
    """The figures (of the notebook that decided a claim) drawn for the tables and figures its
    ``source`` cites: "Table I" matches ``*_table1_*``, "Fig. 5" ``*_fig5_*``."""
    cited = re.findall(r"\b(Table|Tables|Fig\.|Figs\.|Figure)\s*([IVX]+\b|\d+(?:\.\d+)?)", source)
    tokens = {f"{'table' if kind.lower().startswith('t') else 'fig'}"
              f"{str(ROMAN.get(num.lower(), num)).replace('.', '')}" for kind, num in cited}
    return [f for f in figures if any(re.search(rf"(^|_){t}(_|$)", f) for t in tokens)]


def paper_names() -> tuple[str, ...]:
    """The papers claim rows cite by name (:attr:`fedlib.companion.paper.Paper.cited`), in the
    registry's order."""
    return tuple(p.name for p in registry.PAPERS if p.cited)


def paper_of(source: str) -> str:
    """The paper a claim's ``source`` cites ("thesis": FedER); "other" when none."""
    return next((p for p in paper_names() if source.startswith(p) or f" {p} " in f" {source} "),
                "FedER" if "thesis" in source else "other")


def _by_paper(rows: list[dict]) -> dict[str, list[tuple[str, dict]]]:
    """Every claim of ``rows`` (the batch's notebooks) as ``(notebook, claim)``, grouped by the
    paper that makes it."""
    by_paper: dict[str, list[tuple[str, dict]]] = {p: [] for p in paper_names()}
    for r in rows:
        for c in r.get("claims", []):
            by_paper.setdefault(paper_of(c.get("source", "")), []).append((r["notebook"], c))
    return by_paper


def findings(rows: list[dict], scale: str) -> list[str]:
    """A few lines per paper: how many of its claims each verdict holds, and where to read them."""
    out = []
    for paper, claims in _by_paper(rows).items():
        if not claims:
            continue
        n = {v: sum(c.get("status") == v for _, c in claims) for v in VERDICT_COLUMNS}
        nbs = sorted({nb for nb, _ in claims})
        out += [
            f"{paper}: {len(claims)} claims — " + ", ".join(f"{v} {k}" for k, v in n.items() if v),
            f"  read: results/claims-{scale}.md#{paper.lower()}; " +
            ", ".join(f"notebooks/{nb}.ipynb" for nb in nbs)
        ]
    return out or [f"no claims decided in this batch (results/claims-{scale}.md lists them)"]


def claims_overview(rows: list[dict], scale: str) -> str:
    """The papers' claims in one scannable page (valid markdown), grouped by paper, then by
    notebook: the verdict, its family-wise reading (Holm over the paper's decided rows), the size
    reading, the claim, where the paper makes it, what it was decided on, the effect with its 95 %
    interval, and a link to the notebook that shows it and to the figures drawn for the table or
    figure it cites. The project's controls are not among them."""
    by_paper = _by_paper(rows)
    figures = {r["notebook"]: list(r.get("figures") or []) for r in rows}
    setup = ("the papers' setup, on the dataset each row names" if scale_of(scale).exact else
             "not the papers' setup")
    lines = [f"# The papers' claims at scale `{scale}`", "",
             "_The claims of the four papers that the notebooks decide, by "
             "`fedlib.companion.verdicts` (95 % t interval over seeds against the claim's region, "
             f"one margin policy); scale `{scale}` is {setup}. Two readings per row: the direction "
             "(the verdict) and the size (where the paper's own effect lies against our interval); "
             "the family-wise reading holds a paper's decided rows to Holm's step-down. Read "
             f"[notebook 09](../notebooks/09_findings.ipynb) first; `results/summary-{scale}.md` "
             "has every number._", ""]
    for paper, claims in by_paper.items():
        if not claims:
            continue
        n = {v: sum(c.get("status") == v for _, c in claims) for v in VERDICT_COLUMNS}
        fam = holm_readings([c for _, c in claims])
        lines += [
            f"## {paper}", "",
            ", ".join(f"{k}: {v}" for k, v in n.items() if v) + f"; decided t rows holding "
            f"after Holm: {fam.count('holds')} of {sum(map(bool, fam))}", "",
            "| verdict | Holm | size | claim | source | decided on | d [95 % interval] | "
            "notebook | figure |", "|---|---|---|---|---|---|---|---|---|"
        ]
        for i, (nb, c) in enumerate(claims):
            cells = claim_cells(c)
            figs = claim_figures(c.get("source", ""), figures.get(nb, []))
            lines.append("| " + " | ".join(
                md_cell(x)
                for x in (cells["verdict"], fam[i] or "—", cells["size"], cells["claim"],
                          cells["source"], cells["decided on"], cells["d [95 % interval]"],
                          f"[{nb}](../notebooks/{nb}.ipynb)")) + " | " +
                         (", ".join(f"[{f}](../figures/{scale}/{f}.png)"
                                    for f in figs) or "—") + " |")
        lines.append("")
    return "\n".join(lines)
