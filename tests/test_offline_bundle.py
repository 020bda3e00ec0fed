"""scripts/offline-bundle.sh: a bundle installs into a new virtual environment with no package index.

The test bundles a small requirement set with the fedlib wheel and Fashion-MNIST: tqdm, and one of torch's CUDA
libraries whose only wheel is tagged manylinux_2_25 (as cuDNN's and cuBLAS's are _2_27, NCCL's _2_18: tags a fixed
platform list missed). The full bundle (torch with its CUDA libraries, 3.1 GB) is the same script without
``--requirements``: ``FEDLIB_BUNDLE_FULL=1`` runs it here too; docs/campaign.md shows its output. Building
downloads from the package index; installing does not (``--no-index``, pip's configuration and environment
ignored)."""

from __future__ import annotations

import hashlib
import os
import re
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
    from fedlib.companion.campaign import dataset_missing

    if dataset_missing("fmnist"):
        pytest.skip("Fashion-MNIST is not on this machine (README, Data)")
    reqs = tmp_path / "reqs.txt"
    reqs.write_text("tqdm\nnvidia-cuda-cupti==13.0.85\n")  # its one Linux wheel: py3-none-manylinux_2_25_x86_64
    b = tmp_path / "bundle"
    r = subprocess.run(["bash", "scripts/offline-bundle.sh", "--out", str(b), "--requirements", str(reqs),
                        "--python", f"{sys.version_info.major}.{sys.version_info.minor}"],
                       cwd=REPO, env={**os.environ, "PYTHON": sys.executable}, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"[bundle] {b}: " in r.stdout and " in all (wheels " in r.stdout and not (tmp_path / "bundle.partial").exists()
    wheels = sorted(p.name for p in (b / "wheels").glob("*.whl"))
    assert any(w.startswith("nvidia_cuda_cupti-") and "manylinux_2_25" in w for w in wheels)
    assert any(w.startswith("fedlib-") for w in wheels) and any(w.startswith("tqdm-") for w in wheels)
    assert any(w.startswith("setuptools-") for w in wheels)  # the build backend, for `pip install -e .` there
    sums = (b / "data" / "fashion-mnist" / "SHA256SUMS").read_text().split("\n")
    files = dict(reversed(line.split("  ")) for line in sums if line)
    assert len(files) == 4
    for name, digest in files.items():
        assert hashlib.sha256((b / "data" / "fashion-mnist" / name).read_bytes()).hexdigest() == digest
    with tarfile.open(b / "fedlib-src.tar.gz") as t:
        assert {"pyproject.toml", "scripts/setup.sh", "fedlib/companion/campaign.py"} <= set(t.getnames())
    # the one-line install, offline: a new venv from the bundle's wheels only
    venv = tmp_path / "venv"
    env = _no_pip_config()
    r = subprocess.run(["bash", str(b / "install.sh"), "--venv", str(venv)], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"\[install\] .*packages from .* in \d+ s", r.stdout)
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


def test_a_failed_bundle_leaves_nothing_partial_and_the_old_bundle_untouched(tmp_path):
    b = tmp_path / "bundle"
    (b / "wheels").mkdir(parents=True)
    (b / "wheels" / "old.whl").write_text("")
    r = subprocess.run(["bash", "scripts/offline-bundle.sh", "--out", str(b), "--no-data", "--requirements",
                        str(tmp_path / "missing.txt")], cwd=REPO, env={**os.environ, "PYTHON": sys.executable},
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "[bundle] failed" in r.stderr
    assert not (tmp_path / "bundle.partial").exists() and (b / "wheels" / "old.whl").exists()
    r = subprocess.run(["bash", "scripts/offline-bundle.sh", "--glibc", "two"], cwd=REPO, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "--glibc two: write e.g. 2.28" in r.stderr


@pytest.mark.skipif(os.environ.get("FEDLIB_BUNDLE_FULL") != "1",
                    reason="the full bundle downloads 3.1 GB (torch and its CUDA libraries): FEDLIB_BUNDLE_FULL=1")
def test_the_full_bundle_with_torch_installs_without_an_index(tmp_path):
    b = tmp_path / "bundle"
    r = subprocess.run(["bash", "scripts/offline-bundle.sh", "--out", str(b), "--no-data"], cwd=REPO,
                       env={**os.environ, "PYTHON": sys.executable}, capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, r.stdout + r.stderr
    wheels = {p.name.split("-")[0] for p in (b / "wheels").glob("*.whl")}
    assert {"torch", "nvidia_cudnn_cu13", "nvidia_nccl_cu13", "nvidia_cublas", "triton", "fedlib"} <= wheels
    venv = tmp_path / "venv"
    r = subprocess.run(["bash", str(b / "install.sh"), "--venv", str(venv)], env=_no_pip_config(),
                       capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, r.stdout + r.stderr
    out = subprocess.run([str(venv / "bin" / "python"), "-c", "import torch, fedlib; print(torch.__version__)"],
                         env=_no_pip_config(), capture_output=True, text=True, check=True).stdout
    assert out.startswith("2.14.1")
