"""The package's import graph has no cycles, and modules import at their top: an import inside a function is
only for an optional dependency (or one costly submodule needed by one code path), so a module's dependencies are
read in its first lines and a cycle cannot hide behind a deferred import. An import under
``if TYPE_CHECKING:`` is an edge of the graph like any other: a type one module needs from another
is a dependency all the same."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "fedlib"
# imported where they are used: packages a user may not have installed
OPTIONAL = {"papermill", "IPython", "tqdm", "ray", "torch.utils.tensorboard", "adamp", "rmsgd", "torchvision", "PIL"}
DEFERRED = {"torch._dynamo"}  # 2.5 s to import, needed only by compile=True


def _modules() -> dict[str, Path]:
    out = {}
    for p in ROOT.rglob("*.py"):
        parts = list(p.relative_to(ROOT.parent).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


MODULES = _modules()


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def _targets(mod: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The fedlib modules ``node`` (in module ``mod``) imports."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in MODULES]
    base = mod.split(".") if MODULES[mod].name == "__init__.py" else mod.split(".")[:-1]
    src = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else [])) if node.level \
        else (node.module or "")
    out = [f"{src}.{a.name}" if f"{src}.{a.name}" in MODULES else src for a in node.names]
    return [m for m in out if m in MODULES and m != mod]


def _graph() -> dict[str, set[str]]:
    return {m: {t for n in ast.walk(_tree(p)) if isinstance(n, (ast.Import, ast.ImportFrom)) for t in _targets(m, n)}
            for m, p in MODULES.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (a path that returns to its start), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                return stack[stack.index(t):] + [t]
            if t not in state and (found := visit(t)):
                return found
        state[m] = 2
        stack.pop()
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_the_import_graph_of_fedlib_has_no_cycle():
    graph = _graph()
    assert sum(map(len, graph.values())) > 100  # the graph was read (relative imports resolved)
    assert graph["fedlib.companion.results"] >= {"fedlib.engine", "fedlib.companion.costs", "fedlib.config"}
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_library_never_imports_the_companion():
    """The library (fedlib outside fedlib.companion) trains; the companion reproduces the papers with it."""
    inward = [f"{m} imports {t}" for m, ts in _graph().items() if not m.startswith("fedlib.companion")
              for t in ts if t.startswith("fedlib.companion")]
    assert not inward, "the library imports the companion:\n" + "\n".join(inward)


def test_the_cycle_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]


def test_an_import_for_type_checking_is_an_edge(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("from typing import TYPE_CHECKING\n"
                    "if TYPE_CHECKING:\n    from fedlib.config import Config\n")
    edges = {t for n in ast.walk(_tree(path)) if isinstance(n, (ast.Import, ast.ImportFrom))
             for t in _targets("fedlib.companion.plan_text", n)}
    assert edges == {"fedlib.config"}


def test_imports_inside_functions_are_only_optional_dependencies():
    bad = []
    for mod, path in sorted(MODULES.items()):
        for fn in ast.walk(_tree(path)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for n in ast.walk(fn):
                if isinstance(n, ast.Import):
                    names = [a.name for a in n.names]
                elif isinstance(n, ast.ImportFrom):
                    names = ["." * n.level + (n.module or "")]
                else:
                    continue
                for name in names:
                    if not any(name == o or name.startswith(o + ".") for o in OPTIONAL | DEFERRED):
                        bad.append(f"{path.relative_to(ROOT.parent)}:{n.lineno} {fn.name}: {name}")
    assert not bad, "imports inside functions:\n" + "\n".join(bad)


@pytest.mark.parametrize("mod", sorted(m for m in MODULES if not m.endswith("__main__")))
def test_every_module_imports_on_its_own(mod):
    importlib.import_module(mod)


def _layers() -> dict[str, int]:
    """docs/design.md's module map: each fedlib module's layer (a package name stands for its modules)."""
    text = (ROOT.parent / "docs" / "design.md").read_text()
    table = text[text.index("## Module map"):].split("\n\n")[2]
    names: dict[str, int] = {}
    for i, line in enumerate(ln for ln in table.splitlines()[2:] if ln.startswith("|")):
        for name in re.findall(r"`([a-z_]+)`", line.split("|")[2]):
            assert name not in names, f"{name} is listed twice in docs/design.md's module map"
            names[name] = i
    out = {}
    for mod in MODULES:
        parts = mod.split(".")
        key = "fedlib" if mod == "fedlib" else (parts[2] if parts[1] == "companion" and len(parts) > 2 else parts[1])
        assert key in names, f"{mod} is not in docs/design.md's module map"
        out[mod] = names[key]
    return out


def test_every_module_is_on_the_design_docs_map_and_imports_only_its_layer_or_those_above():
    layers = _layers()
    upward = [f"{m} (layer {layers[m] + 1}) imports {t} (layer {layers[t] + 1})"
              for m, ts in _graph().items() for t in ts if layers[t] > layers[m]]
    assert not upward, "imports against docs/design.md's layers:\n" + "\n".join(upward)


SCRIPTS = sorted([*(ROOT.parent / "benchmarks").glob("*.py"), *(ROOT.parent / "scripts").glob("*.py")])


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_benchmark_and_script_imports_what_fedlib_offers(path, monkeypatch):
    """A benchmark imports fedlib's names at its top: loading it (its main() does not run) fails on a name fedlib
    no longer offers."""
    name = f"_script_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)


def test_every_module_reads_in_one_sitting_and_a_strategy_holds_only_what_differs_from_fedavg():
    """Modules up to 450 lines; a strategy file up to 150 (``strategies/base.py`` is the Strategy class and its
    hooks, not a strategy)."""
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > 450}
    assert not long, f"modules over 450 lines: {long}"
    strategies = {p.name: n for p in (ROOT / "strategies").glob("*.py")
                  if p.name not in ("base.py", "__init__.py") and (n := len(p.read_text().splitlines())) > 150}
    assert not strategies, f"strategy files over 150 lines: {strategies}"


def test_every_line_of_the_package_fits_in_100_columns():
    """Code, docstrings and comments alike: a module reads without scrolling sideways."""
    long = [f"{p.relative_to(ROOT.parent).as_posix()}:{i} ({len(line)})" for p in MODULES.values()
            for i, line in enumerate(p.read_text().splitlines(), 1) if len(line) > 100]
    assert not long, f"{len(long)} lines over 100 characters:\n" + "\n".join(long[:40])
