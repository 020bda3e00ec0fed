"""One home per name: no top-level name is defined in two modules of fedlib.

A name defined at the top of a module (``def``, ``class``, or an assignment to a module-level
name) names one concept, and that concept lives in one module: the others import it from there.
Two unrelated things get two descriptive names, private helpers (``_x``) included, so that a name
read anywhere in the package (or grepped for) means one thing.

The exemptions, each a name that by convention every module may have:

* dunder names (``__all__``, ``__doc__``, ``__version__``, ...): a module's own metadata;
* ``main``: the entry point of a module run with ``python -m``, called by its ``__main__`` block.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "fedlib"
EXEMPT = {"main"}


def _assigned(target: ast.expr) -> list[str]:
    """The module-level names an assignment target binds (``a = ...``, ``a, b = ...``), not
    attributes or items."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for t in target.elts for n in _assigned(t)]
    if isinstance(target, ast.Starred):
        return _assigned(target.value)
    return []


def top_level_names(tree: ast.Module) -> list[tuple[str, int]]:
    """``(name, line)`` of every name the module's top level defines: functions, classes and
    assignments, also those under a top-level ``if``, ``try`` or ``with`` (module-level names
    still)."""
    out: list[tuple[str, int]] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.append((node.name, node.lineno))
            elif isinstance(node, ast.Assign):
                out.extend((n, node.lineno) for t in node.targets for n in _assigned(t))
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                out.extend((n, node.lineno) for n in _assigned(node.target))
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for part in ("body", "orelse", "finalbody"):
                    visit(getattr(node, part, []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(tree.body)
    return out


def definitions(root: Path = ROOT) -> dict[str, list[str]]:
    """Every checked top-level name: ``{name: ["<module path>:<line>", ...]}``, one entry per
    definition."""
    out: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent)
        for name, line in top_level_names(ast.parse(path.read_text(), str(path))):
            if not (name.startswith("__") and name.endswith("__")) and name not in EXEMPT:
                out[name].append(f"{rel}:{line}")
    return out


def twice(defs: dict[str, list[str]]) -> dict[str, list[str]]:
    """The names defined in two or more modules (a name redefined within one module is that
    module's business)."""
    return {n: where for n, where in sorted(defs.items())
            if len({w.rsplit(":", 1)[0] for w in where}) > 1}


def test_every_top_level_name_of_fedlib_has_one_home():
    defs = definitions()
    assert len(defs) > 500  # the package was read
    found = twice(defs)
    assert not found, (f"{len(found)} names defined in two or more modules (import each from one "
                       "home; rename unrelated ones):\n"
                       + "\n".join(f"{n}: {', '.join(w)}" for n, w in found.items()))


def test_the_scan_sees_functions_classes_and_assignments(tmp_path):
    pkg = tmp_path / "fedlib"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("__all__ = ['f']\nX = 1\ndef f(): pass\ndef main(): pass\n")
    (pkg / "sub" / "b.py").write_text("class f: pass\nY: int = 2\nif True:\n    X, Z = 3, 4\n"
                                      "__doc__ = 'b'\ndef main(): pass\n")
    (pkg / "sub" / "c.py").write_text("from a import X\nZ = 1\nZ += 1\n"
                                      "obj = object()\nobj.attr = 1\n")
    found = twice(definitions(pkg))
    assert set(found) == {"X", "f", "Z"}
    assert found["X"] == ["fedlib/a.py:2", "fedlib/sub/b.py:4"]
