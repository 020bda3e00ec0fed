"""Every notebook checks its parameters first: a bad ``papermill -p`` value fails at once, naming the value."""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

from fedlib.companion.report import check_params

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _cells(nb_path: Path) -> tuple[str, str]:
    """The parameters cell's source and the source of the cell after it."""
    nb = nbformat.read(nb_path, as_version=4)
    i = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    return nb.cells[i].source, nb.cells[i + 1].source


@pytest.mark.parametrize("bad,words", [
    (dict(scale="huge"), "'smoke', 'quick', 'paper'"),
    (dict(dataset="mnist"), "valid datasets"),
    (dict(device="gpu"), "device string"),
    (dict(seed=-1), ">= 0"),
    (dict(seed="0"), "whole number"),
    (dict(executor="parallel"), "valid executors"),
    (dict(n_eval=0), ">= 2"),
    (dict(seeds=[0, 0]), "distinct whole numbers"),
    (dict(seeds=[]), "non-empty list"),
    (dict(train="no"), "True (train missing runs)"),
    (dict(seeds=[0, -1]), "every seed must be >= 0"),
])
def test_check_params_names_the_parameter_the_value_and_the_valid_values(bad, words):
    with pytest.raises(ValueError) as err:
        check_params(**bad)
    (name, value), = bad.items()
    assert f"{name}={value!r}" in str(err.value) and words in str(err.value)


def test_check_params_accepts_the_defaults_and_rejects_unknown_names():
    check_params(scale="smoke", dataset="fmnist", device="cpu", seed=0, executor="auto", n_eval=None)
    check_params(seeds=[0, 1, 2], train=False)
    with pytest.raises(ValueError, match="unknown parameter"):
        check_params(scael="smoke")


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_checks_all_its_parameters_right_after_the_parameters_cell(nb_path):
    params_src, next_src = _cells(nb_path)
    names = {t.id for node in ast.parse(params_src).body if isinstance(node, ast.Assign)
             for t in node.targets if isinstance(t, ast.Name)}
    call = next(n for n in ast.walk(ast.parse(next_src))
                if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "check_params")
    assert {k.arg for k in call.keywords} == names  # every parameter is checked


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_run_with_scale_huge_stops_before_any_work(nb_path, monkeypatch):
    monkeypatch.setenv("FEDLIB_SCALE", "smoke")
    params_src, next_src = _cells(nb_path)
    ns: dict = {}
    exec(params_src, ns)
    ns["scale"] = "huge"  # what papermill's injected-parameters cell does
    with pytest.raises(ValueError, match="scale='huge'"):
        exec(next_src, ns)


def test_compare_refuses_a_missing_setting_instead_of_a_nan_row():
    from fedlib.companion.report import compare

    assert compare({"FedAvg": 88.9}, {"FedAvg": 88.0}).loc["FedAvg", "diff"] == -0.9
    with pytest.raises(ValueError, match="FedProx"):
        compare({"FedAvg": 88.9, "FedProx": 88.95}, {"FedAvg": 88.0, "Fedprox": 87.0})


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_reads_as_short_cells_over_fedlib_and_ends_with_its_claims(nb_path):
    """Code cells of at most 12 lines (the parameters cell excepted): the wrangling lives in fedlib.companion.papers; the
    last code cell stores the summary and shows the claims table."""
    nb = nbformat.read(nb_path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code" and "parameters" not in c.metadata.get("tags", [])]
    long = {i: n for i, c in enumerate(code) if (n := len(c.source.strip().splitlines())) > 12}
    assert not long, f"{nb_path.stem}: code cells longer than 12 lines (index: lines): {long}"
    assert "# noqa" not in "".join(c.source for c in code)
    last = code[-1].source.strip().splitlines()
    if any("Report(" in c.source for c in code):  # the findings notebook shows every notebook's rows
        assert last[-2:] in (["report.save()", "report.claims_table()"], ["report.save()", "claims_view(rows)"]), \
            last[-2:]


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_papermill_sees_every_parameter_so_reproduce_can_pass_train_false(nb_path, monkeypatch):
    """papermill reads the parameters cell line by line: a line it cannot parse is silently not a parameter, and
    ``reproduce --no-train`` would then skip the notebook."""
    import papermill as pm

    params_src, _ = _cells(nb_path)
    ns: dict = {}
    exec(params_src, ns)
    assigned = {k for k in ns if not k.startswith("__") and k != "os"}
    assert set(pm.inspect_notebook(str(nb_path))) == assigned
    from fedlib.companion.papers import PLANS

    if nb_path.stem not in PLANS:  # a notebook that trains nothing (the findings) needs no train parameter
        return
    monkeypatch.setenv("FEDLIB_TRAIN", "0")
    exec(params_src, ns)
    assert ns["train"] is False
