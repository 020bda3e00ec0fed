"""scripts/offline-bundle.sh: a bundle installs into a new virtual environment with no package index.

The test bundles a small requirement set (tqdm) with the fedlib wheel and Fashion-MNIST, not torch (several GB);
the full bundle is the same script without ``--requirements`` (docs/campaign.md). Building it downloads from the
package index; installing from it does not (``--no-index``, pip's configuration and environment ignored)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _no_pip_config() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PYTHON": sys.executable}


def test_offline_bundle_installs_into_a_fresh_venv_without_an_index(tmp_path):
    from fedlib.campaign import dataset_missing

    if dataset_missing("fmnist"):
        pytest.skip("Fashion-MNIST is not on this machine (README, Data)")
    reqs = tmp_path / "reqs.txt"
    reqs.write_text("tqdm\n")
    b = tmp_path / "bundle"
    r = subprocess.run(["bash", "scripts/offline-bundle.sh", "--out", str(b), "--requirements", str(reqs),
                        "--python", f"{sys.version_info.major}.{sys.version_info.minor}"],
                       cwd=REPO, env={**os.environ, "PYTHON": sys.executable}, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    wheels = sorted(p.name for p in (b / "wheels").glob("*.whl"))
    assert any(w.startswith("fedlib-") for w in wheels) and any(w.startswith("tqdm-") for w in wheels)
    assert any(w.startswith("setuptools-") for w in wheels)  # the build backend, for `pip install -e .` there
    sums = (b / "data" / "fashion-mnist" / "SHA256SUMS").read_text().split("\n")
    files = dict(reversed(line.split("  ")) for line in sums if line)
    assert len(files) == 4
    for name, digest in files.items():
        assert hashlib.sha256((b / "data" / "fashion-mnist" / name).read_bytes()).hexdigest() == digest
    with tarfile.open(b / "fedlib-src.tar.gz") as t:
        assert {"pyproject.toml", "scripts/setup.sh", "fedlib/campaign.py"} <= set(t.getnames())
    # the one-line install, offline: a new venv from the bundle's wheels only
    venv = tmp_path / "venv"
    env = _no_pip_config()
    r = subprocess.run(["bash", str(b / "install.sh"), "--venv", str(venv)], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"export FEDLIB_DATA={b}/data" in r.stdout and "export FEDLIB_COMMIT=" in r.stdout
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(b / "wheels"),
                    "--no-deps", "fedlib"], env=env, check=True, timeout=300)
    out = subprocess.run([str(py), "-c", "import tqdm, importlib.metadata as m; print(m.version('fedlib'))"],
                         env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "0.1.0"
    # nothing came from an index: with no index and no wheel, pip fails
    r = subprocess.run([str(py), "-m", "pip", "install", "--no-index", "--find-links", str(b / "wheels"),
                        "six"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
