"""docs/design.md's example of a fifth paper runs: its plan builds, and its claims are pending on an empty store
and decided once its records are stored (smoke runs, one round)."""

from __future__ import annotations

import re
from pathlib import Path

from fedlib.companion.grid import fetch_runs
from fedlib.companion.results import Store

DOC = Path(__file__).resolve().parent.parent / "docs" / "design.md"


def _example() -> dict:
    text = DOC.read_text()
    section = text[text.index("## A paper: one template filled in"):]
    code = re.search(r"```python\n(.*?)```", section, re.S)[1]
    assert len(code.splitlines()) <= 40, "the example should stay short"
    ns: dict = {}
    exec(compile(code, str(DOC), "exec"), ns)
    return ns


def test_the_design_docs_paper_example_plans_and_judges(tmp_path):
    ns = _example()
    nb, = ns["PAPER"].notebooks
    runs = nb.plan("smoke", seeds=(0, 1))
    assert len(runs["table1"]) == 4 and nb.priority("Table 1") == 35
    store = Store(tmp_path)
    v, = nb.claims({"table1": fetch_runs(runs["table1"], store=store, train=False)}, scale="smoke")
    assert v.verdict == "pending"
    short = {rid: c.replace(rounds=1) for rid, c in runs["table1"].items()}
    v, = nb.claims({"table1": fetch_runs(short, store=store, progress=False)}, scale="smoke")
    assert v.verdict != "pending" and v.n == {"FedProx": 2, "FedAvg": 2}
