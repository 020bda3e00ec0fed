"""docs/adding-a-paper.md's toy paper works as the page says: its folder, built from the page's
code blocks in a temporary package, registers with the paper registry, plans at smoke scale,
trains its runs into a temporary results store through its notebook's cells, and its claims come
out as verdict rows of the claims page."""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path

import pytest

from fedlib.companion import papers, report, results
from fedlib.companion.claims_page import claims_overview, findings, paper_names
from fedlib.companion.common import RunId
from fedlib.companion.results import Store

DOC = Path(__file__).resolve().parent.parent / "docs" / "adding-a-paper.md"
FOLDER = "fedlib/companion/papers/toyfed/"
PACKAGE = "docs_toy_papers"  # the temporary package standing for fedlib.companion.papers
NOTEBOOK = "10_toyfed_table1"
CELLS = f"notebooks/{NOTEBOOK}.ipynb"


def doc_blocks() -> dict[str, str]:
    """The page's python blocks by the file their first line names (``# <path>`` or
    ``# <path>: <which part>``)."""
    out = {}
    for block in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S):
        head, _, code = block.partition("\n")
        out[head.removeprefix("# ")] = code
    return out


def test_the_page_gives_each_file_of_the_folder_and_the_notebook():
    blocks = doc_blocks()
    assert {k for k in blocks if k.startswith(FOLDER)} == {
        FOLDER + f for f in ("preset.py", "plans.py", "claims.py", "__init__.py")}
    assert {k.split(":")[0] for k in blocks if k.startswith("notebooks/")} == {CELLS}
    registry = blocks["fedlib/companion/papers/__init__.py: the import and the registry's line"]
    assert "toyfed.TOYFED_PAPER)" in registry  # the registry's line the test sets below


def register(monkeypatch: pytest.MonkeyPatch, paper: papers.Paper) -> None:
    """``paper`` added to the registry as its line in ``PAPERS`` adds it, with the views read
    from it."""
    monkeypatch.setattr(papers, "PAPERS", (*papers.PAPERS, paper))
    monkeypatch.setattr(papers, "NOTEBOOKS",
                        {**papers.NOTEBOOKS, **{nb.name: nb for nb in paper.notebooks}})
    for nb in paper.notebooks:
        monkeypatch.setitem(papers.PLANS, nb.name, nb.plan)
        monkeypatch.setitem(papers.PAPER_DATASETS, nb.name, nb.datasets)


@pytest.fixture
def toyfed(tmp_path, monkeypatch):
    """The page's folder as ``docs_toy_papers.toyfed``, imported and its paper registered, the
    results store in ``tmp_path``; the package forgotten afterwards."""
    pkg = tmp_path / "src" / PACKAGE / "toyfed"
    pkg.mkdir(parents=True)
    (pkg.parent / "__init__.py").write_text("")
    for path, code in doc_blocks().items():
        if path.startswith(FOLDER):
            text = code.replace("fedlib.companion.papers.toyfed", f"{PACKAGE}.toyfed")
            (pkg / path.removeprefix(FOLDER)).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    try:
        module = importlib.import_module(f"{PACKAGE}.toyfed")
        register(monkeypatch, module.TOYFED_PAPER)
        monkeypatch.setattr(results, "DEFAULT_ROOT", tmp_path / "results")  # Store.for_scale's
        monkeypatch.setattr(report, "DEFAULT_ROOT", tmp_path / "results")  # Report.save's
        yield module
    finally:
        for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def test_the_toy_paper_of_the_docs_plans_trains_and_judges(toyfed, tmp_path, monkeypatch):
    assert "ToyFed" in paper_names() and papers.notebook("10") is toyfed.TOYFED_PAPER.notebooks[0]
    plan = papers.plan("10", "smoke", seeds=(0, 1))
    assert set(plan) == {"table1"}
    assert set(plan["table1"]) == {RunId(m, s) for m in ("FedAvg", "FedProx") for s in (0, 1)}
    cfg = plan["table1"][RunId("FedProx", 1)]
    assert (cfg.strategy, cfg.strategy_kw, cfg.seed) == ("fedprox", {"mu": 0.01}, 1)
    assert (cfg.rounds, cfg.n_train, cfg.scale) == (1, 300, "smoke")
    assert papers.priority(NOTEBOOK, "Table 1") == 35 and papers.priority(NOTEBOOK, "Fig. 2") == 45

    store = Store(tmp_path / "results" / "smoke")
    (row,) = papers.judge("10", "smoke", store=store, seeds=(0, 1)).claims
    assert row["status"] == "pending" and row["claim"] == "FedProx performs like FedAvg"

    # the notebook's cells: the parameters cell as papermill runs it (-p seeds "[0, 1]"), the calls
    blocks = doc_blocks()
    monkeypatch.setenv("FEDLIB_SCALE", "smoke")
    monkeypatch.setenv("FEDLIB_TRAIN", "1")
    ns: dict = {}
    exec(blocks[f"{CELLS}: the parameters cell"], ns)
    ns["seeds"] = [0, 1]
    exec(blocks[f"{CELLS}: the cells after it"], ns)
    assert ns["plan"] == plan and len(list(store.root.glob("records/*.json"))) == 4  # trained

    # the claims read the plan's records: decided on both seeds a side; a smoke row is not
    # testable, saying why
    (verdict,) = ns["nb"].claims(plan, ns["records"], scale="smoke", dataset="fmnist")
    assert verdict.verdict != "pending" and verdict.n == {"FedProx": 2, "FedAvg": 2}
    assert "at this scale" in verdict.data  # what smoke changes of the paper's setup
    (row,) = papers.judge("10", "smoke", store=store, seeds=(0, 1)).claims
    assert row["status"] == "not testable at this scale" and "smoke scale" in row["why"]
    assert ns["report"].claims == [row]

    # the summary the notebook saved, on the claims page: the paper's own section
    summary = json.loads((tmp_path / "results" / "summary" / f"{NOTEBOOK}.smoke.json").read_text())
    page = claims_overview([summary], "smoke")
    assert "## ToyFed" in page and "| FedProx performs like FedAvg |" in page
    assert findings([summary], "smoke")[0].startswith("ToyFed: 1 claims")
