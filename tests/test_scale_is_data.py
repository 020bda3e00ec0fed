"""Scale is data: code reads a scale's attributes (:class:`fedlib.companion.scales.Scale`) and each
paper's values keyed by scale (its preset), never the scale's name. Outside the scale table and the
papers' presets no comparison names a scale: ``scale == "quick"``, ``cfg.scale != "paper"``, ``x in
("smoke", "quick")``."""

from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path

import pytest

from fedlib.config import SCALES
from fedlib.companion.papers import PAPERS, PRESETS
from fedlib.companion.scales import SCALE, Scale, scale_of

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "fedlib"
# the modules where the scales' names are the data: the scale table and the papers' presets
DATA = {PACKAGE / "companion" / "scales.py",
        *(PACKAGE / "companion" / "papers").glob("*/preset.py")}
# comparisons with a scale's name that are not about a scale: the normalization named after the
# papers
NOT_A_SCALE = {("fedlib/data.py", "normalize")}


def _strings(node: ast.AST) -> set[str]:
    """The string literals ``node`` is or holds (a tuple, list or set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*map(_strings, node.elts)) if node.elts else set()
    return set()


def _names_scale(node: ast.AST) -> bool:
    """Whether ``node`` is a variable named ``scale`` or an attribute ``.scale``."""
    return (isinstance(node, ast.Name) and node.id == "scale") or (
        isinstance(node, ast.Attribute) and node.attr == "scale")


def branches_on_scale_names(source: str, rel: str) -> list[str]:
    """Each comparison in ``source`` (the file ``rel``) of a scale (``scale``, ``x.scale``) with a
    string, or of anything with a scale's name (``"smoke"``, ``"quick"``, ``"paper"``), and each
    ``match`` on a scale: ``"file:line: code"``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Match) and _names_scale(node.subject):
            out.append(f"{rel}:{node.lineno}: match {ast.unparse(node.subject)}")
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        named = [o for o in operands if _strings(o) & set(SCALES)]
        others = {ast.unparse(o) for o in operands if not _strings(o)}
        on_scale = any(map(_names_scale, operands)) and any(map(_strings, operands))
        if on_scale or (named and not {(rel, o) for o in others} & NOT_A_SCALE):
            out.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    return out


def test_no_code_branches_on_a_scales_name():
    found = [hit for p in sorted(PACKAGE.rglob("*.py")) if p not in DATA
             for hit in branches_on_scale_names(p.read_text(), p.relative_to(ROOT).as_posix())]
    assert not found, ("comparisons with a scale's name (read a Scale attribute or a paper's value "
                       "keyed by scale instead):\n" + "\n".join(found))


@pytest.mark.parametrize("code", ['scale == "quick"', 'cfg.scale != "paper"', 'x == "smoke"',
                                  'a.scale in ("smoke", "quick")', '"paper" == s', 'scale == ""'])
def test_the_scan_finds_a_branch_on_a_scale(code):
    assert len(branches_on_scale_names(f"if {code}:\n    pass\n", "fedlib/x.py")) == 1
    assert not branches_on_scale_names('normalize == "paper"', "fedlib/data.py")  # not a scale


def test_the_scale_table_describes_the_librarys_scales():
    assert tuple(SCALE) == SCALES
    assert all(isinstance(s, Scale) and s.name == n for n, s in SCALE.items())
    assert scale_of("paper").exact and not scale_of("quick").exact and not scale_of("smoke").decides
    with pytest.raises(ValueError, match="valid scales"):
        scale_of("huge")


def test_every_paper_value_keyed_by_scale_names_every_scale():
    """A preset module's tables keyed by scale (``{"paper": ..., "quick": ..., "smoke": ...}``) name
    each scale, so a plan reads ``table[scale]`` at any scale; every preset is its paper's,
    registered once."""
    assert sorted(PRESETS) == sorted(pr.name for p in PAPERS for pr in p.presets)
    for path in sorted((PACKAGE / "companion" / "papers").glob("*/preset.py")):
        mod = importlib.import_module(f"fedlib.companion.papers.{path.parent.name}.preset")
        preset = getattr(mod, f"{path.parent.name.upper()}_PRESET", None)
        if preset is None:  # the partitions notebook's samples, no training setup
            assert path.parent.name not in PRESETS, path
        else:
            assert preset.name == path.parent.name and PRESETS[preset.name] is preset
        tables = {n: v for n, v in vars(mod).items()
                  if isinstance(v, dict) and set(v) & set(SCALES)}
        assert tables, path
        bad = {n: sorted(v) for n, v in tables.items() if set(v) != set(SCALES)}
        assert not bad, f"{path}: tables keyed by scale that miss a scale: {bad}"


NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_no_notebook_cell_branches_on_a_scales_name(path):
    """A notebook reads the scale's attributes too (``scale_of(scale).exact``): its code cells hold
    no comparison with a scale's name."""
    cells = json.loads(path.read_text())["cells"]
    found = [hit for i, c in enumerate(cells) if c["cell_type"] == "code"
             for hit in branches_on_scale_names(
                 "\n".join(ln for ln in "".join(c["source"]).splitlines()
                           if not ln.lstrip().startswith(("%", "!"))), f"{path.name} cell {i}")]
    assert not found, "\n".join(found)
