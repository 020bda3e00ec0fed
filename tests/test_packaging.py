"""environment.yml (conda) and pyproject.toml (pip) must list the same dependencies and pins."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _norm(req: str) -> str:
    return re.sub(r"\s+", "", req).lower()


def test_environment_yml_agrees_with_pyproject():
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    want = {_norm(r) for r in py["dependencies"] + sum(py["optional-dependencies"].values(), [])}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert {_norm(r) for r in pip} == want


def test_the_ray_extra_is_pinned_and_installed_by_setup():
    from fedlib.companion.ray_backend import RAY_VERSION

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["ray"] == [f"ray=={RAY_VERSION}"]
    assert '.[dev,ray]' in (ROOT / "scripts" / "setup.sh").read_text()


def test_torch_pins_are_exact():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert "torch==2.14.1" in deps and "torchvision==0.29.1" in deps


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make test" in (ROOT / ".ci" / "run").read_text()
    assert "make reproduce" in readme
