"""The paper registry: every notebook and preset has one home, each notebook's plan builds and its claims are
read from records alone (never training), and the campaign ranks artifacts by the registry."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fedlib.companion import papers
from fedlib.companion.papers import NOTEBOOKS, PAPERS, PRESETS, Notebook, judge, notebook, priority
from fedlib.companion.results import Store

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"


def test_every_notebook_file_is_registered_once_and_every_registered_notebook_exists():
    files = sorted(p.stem for p in NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))
    names = [nb.name for p in PAPERS for nb in p.notebooks]
    assert sorted(names) == files and len(set(names)) == len(names)


def test_every_preset_belongs_to_exactly_one_paper():
    owners = {name: [p.name for p in PAPERS if pr in p.presets] for name, pr in PRESETS.items()}
    assert all(len(o) == 1 for o in owners.values()), owners
    assert {pr.name for p in PAPERS for pr in p.presets} == set(PRESETS)
    assert set(PRESETS) == {"fedcka", "fedintr", "feder", "fedshibu"}


@pytest.mark.parametrize("name", sorted(n for n, nb in NOTEBOOKS.items() if nb.plan is not None))
def test_each_priority_names_an_artifact_its_plan_has(name):
    nb = NOTEBOOKS[name]
    arts = {papers.artifact_id(a) for scale in ("quick", "paper") for a in papers.plan(name, scale)}
    for pattern in nb.priorities:
        assert pattern == "*" or any(a.startswith(pattern) for a in arts), (name, pattern, sorted(arts))
    assert all(priority(name, a) == nb.priority(a) for a in arts)


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_claims_come_from_the_records_alone_and_an_empty_store_decides_nothing(name, tmp_path):
    report = judge(name, "smoke", store=Store(tmp_path))
    rows = report.claims + report.controls
    assert all(r["status"] in ("pending", "not testable at this scale") for r in rows), rows
    assert not any(tmp_path.rglob("*.json")), "judging trained or wrote something"
    if NOTEBOOKS[name].plan is not None:
        assert report.claims, f"{name} states no claim"


def test_a_notebook_is_found_by_number_and_a_wrong_name_lists_the_valid_ones():
    assert notebook("05") is notebook("05_fedintr_benchmarks")
    with pytest.raises(ValueError, match="05_fedintr_benchmarks"):
        notebook("10")
    with pytest.raises(ValueError, match="two digits"):
        Notebook("fedintr")


def test_priorities_rank_the_fashion_mnist_tables_first_and_unknown_artifacts_last():
    assert priority("05_fedintr_benchmarks", "Table I") < priority("01_fedavg_baseline", "table1") \
        < priority("03_fedcka_heterogeneity", "table2") < priority("08_fedshibu_shards", "table1") \
        < priority("08_fedshibu_shards", "fig3")
    assert priority("99_new", "anything") == papers.DEFAULT_PRIORITY


def test_the_command_line_prints_a_notebooks_claims(tmp_path, capsys):
    assert papers.main(["claims", "05", "--scale", "smoke", "--store", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "05_fedintr_benchmarks:" in out and "FedIntR" in out
    assert papers.main([]) == 0 and "FedSHIBU (fedshibu.txt)" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        papers.main(["claims", "42", "--scale", "smoke"])


def test_claims_name_each_not_testable_reason_and_a_missing_store_is_an_error(tmp_path, capsys):
    assert papers.main(["claims", "05", "--scale", "smoke", "--store", str(tmp_path)]) == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("  not testable")]
    assert rows and all("| why: smoke scale proves the code runs" in ln for ln in rows)
    with pytest.raises(SystemExit):
        papers.main(["claims", "05", "--store", str(tmp_path / "missing")])
    assert f"--store {tmp_path / 'missing'}: no such folder" in capsys.readouterr().err


SUMMARY = Path(__file__).resolve().parent.parent / "results" / "summary"


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_the_registry_judges_the_committed_records_as_the_rendered_notebook_did(name):
    """The claims a notebook rendered (results/summary/<notebook>.quick.json, committed with its records) are what
    its registered claims function says of the committed records, row for row."""
    path = SUMMARY / f"{name}.quick.json"
    if not path.exists():
        pytest.skip(f"{path.name} is not committed")
    summary = json.loads(path.read_text())
    report = judge(name, "quick", dataset=summary["dataset"])
    if report.provenance.get("pending", 0) != summary.get("pending", 0):
        pytest.skip("records were committed after the last render (scripts/render-head.sh renders them)")
    assert report.claims == summary["claims"]
    assert report.controls == summary.get("controls", [])


def test_a_process_without_the_registry_is_told_to_import_it_rather_than_given_no_preset():
    """The presets are the registry's: a process that never imported it names no model in a claim's
    "decided on" and looks no preset up; each says to import fedlib.companion.papers."""
    code = ("from fedlib.companion.report import Report\n"
            "from fedlib.companion.presets import preset\n"
            "from fedlib.companion.verdicts import decide\n"
            "for call in (lambda: preset('fedintr'), lambda: Report('x', scale='quick', "
            "dataset='fmnist').verdict(decide('a', 'FedCKA Table 2', [1, 2, 3], [0, 1, 2]))):\n"
            "    try:\n        call()\n"
            "    except (RuntimeError, ValueError) as e:\n        print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.stdout.count("import fedlib.companion.papers") == 2, out.stdout + out.stderr
