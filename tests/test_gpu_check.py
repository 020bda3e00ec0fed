"""benchmarks/gpu_check.py (``make gpu-check``): its ``--smoke`` mode on the CPU runs every case of the paper plans
on the sequential and eager vectorized paths, writes the measurements as this device's, and exits non-zero on a
mismatch. ``make gpu-check SMOKE=1`` itself runs here, as a subprocess: every path of every case agrees and it
exits 0."""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch


REPO = Path(__file__).resolve().parent.parent


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


gpu_check = _load("gpu_check", REPO / "benchmarks" / "gpu_check.py")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """``make gpu-check SMOKE=1`` (``benchmarks/gpu_check.py --smoke``) run once as a subprocess, so that a crash
    fails these tests instead of ending the session: its exit status, output and the costs it measured (about 30 s
    on two CPU threads). Two threads, as on a 2-core machine, so that the multithreaded CPU kernels run (a heap
    corruption in one of them aborts the run: ``MALLOC_CHECK_=3`` makes glibc check every free); passive waiting, so
    that on a busy machine the two threads do not spin against each other."""
    costs = tmp_path_factory.mktemp("gpu_check") / "costs.json"
    env = {**os.environ, "OMP_NUM_THREADS": str(min(2, os.cpu_count() or 1)), "OMP_WAIT_POLICY": "PASSIVE",
           "MALLOC_CHECK_": "3", "PYTHONFAULTHANDLER": "1"}
    p = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), "--smoke", "--costs", str(costs),
                        "--budget", "30m"], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    devices = json.loads(costs.read_text())["devices"] if costs.exists() else {}
    return p.returncode, p.stdout + p.stderr, devices


def test_smoke_runs_every_strategy_on_its_paper_model_and_writes_this_devices_costs(smoke):
    rc, out, devices = smoke
    cases = gpu_check.cases(["fmnist"])
    rows = [line for line in out.splitlines() if line.startswith("| 0")]
    assert len(rows) == len(cases) and rc in (0, 1), out[-3000:]
    strategies = {c.strategy for _, c in cases}
    assert {"fedavg", "fedprox", "scaffold", "moon", "fedcka", "fedintr", "centralized", "fedbabu", "fedshibu",
            "local_only", "fedavg_crsm", "feder"} <= strategies
    assert {c.model for _, c in cases} >= {"simple_cnn", "intr_cnn", "resnet18", "resnet50"}
    assert all(re.search(r"\| (ok|FAIL) \|$", r) for r in rows)
    assert "graph" not in out.split("| case |")[1].splitlines()[0]  # no CUDA graph path on the CPU
    # the measurements are filed under this CPU's name (type cpu), never a GPU's
    (name, entries), = devices.items()
    assert name.startswith("cpu (") and name.endswith(f", {min(2, os.cpu_count() or 1)} threads)")
    assert entries and all(e["type"] == "cpu" and e["runs"] == 0 and e["source"].startswith("gpu-check --smoke")
                           for e in entries.values())
    assert "intr_cnn|fmnist|fedavg|b512|fp32" in entries


def test_smoke_paths_agree(smoke):
    """Every path of every case agrees within the tolerances, BatchNorm ResNets included, and the run exits 0."""
    rc, out, _ = smoke
    failed = [line for line in out.splitlines() if line.endswith("| FAIL |")]
    assert rc == 0 and not failed, "\n".join(failed) or out[-3000:]
    assert re.search(r"^(\d+) of \1 cases agree on every path", out, re.M)


def test_cnn_cases_agree_on_the_cpu(smoke):
    _, out, _ = smoke
    rows = [line for line in out.splitlines() if line.startswith("| 0") and ("| simple_cnn |" in line
                                                                            or "| intr_cnn |" in line)]
    assert rows and all(r.endswith("| ok |") for r in rows), rows


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_a_mismatch_exits_nonzero(monkeypatch, capsys, one_thread):
    real = gpu_check.train

    def perturbed(cfg, data):
        eng = real(cfg, data)
        if cfg.executor == "vectorized":
            k = next(iter(eng.global_params))
            eng.global_params[k] = eng.global_params[k] + 1e-3
        return eng

    monkeypatch.setattr(gpu_check, "train", perturbed)
    assert gpu_check.main(["--smoke", "--only", "fedprox"]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH" in out and "| FAIL |" in out and "float64 too" in out  # rechecked in float64: still apart


def test_a_float32_only_difference_is_rechecked_in_float64_and_passes_as_rounding(monkeypatch, capsys, one_thread):
    """A vectorized path apart from the sequential one in float32 only (a rounding difference) passes, and the
    table says so with both differences; the float64 rerun trains both paths in float64 on float64 data."""
    real, dtypes = gpu_check.train, set()

    def perturbed(cfg, data):
        eng = real(cfg, data)
        k = next(iter(eng.global_params))
        dtypes.add((cfg.executor, data.x_train.dtype, eng.global_params[k].dtype))
        if cfg.executor == "vectorized" and data.x_train.dtype == torch.float32:
            eng.global_params[k] = eng.global_params[k] + 1e-3
        return eng

    monkeypatch.setattr(gpu_check, "train", perturbed)
    assert gpu_check.main(["--smoke", "--only", "fedprox"]) == 0
    out = capsys.readouterr().out
    assert "rounding: float32 Δ 1.0e-03, float64 Δ 0.0e+00" in out and "| ok |" in out
    assert "2 of 2 cases agree on every path" in out and "2 of them only in float64" in out
    assert {(e, torch.float64, torch.float64) for e in ("sequential", "vectorized")} <= dtypes
    assert torch.get_default_dtype() == torch.float32


def test_an_exhausted_budget_exits_2_and_names_what_did_not_run(capsys):
    assert gpu_check.main(["--smoke", "--only", "fedprox", "--budget", "0"]) == 2
    assert "not run (budget 0)" in capsys.readouterr().out


def test_tolerances_are_test_cudas():
    test_cuda = _load("test_cuda_module", REPO / "tests" / "test_cuda.py")
    p = inspect.signature(test_cuda.close).parameters
    assert (gpu_check.ATOL, gpu_check.RTOL) == (p["atol"].default, p["rtol"].default)


def test_without_cuda_the_gpu_check_says_to_run_smoke(capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(SystemExit):
        gpu_check.main([])
    assert "--smoke" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_the_cpu_hint_names_the_make_form_under_make(monkeypatch, capsys):
    for env, hint in ((None, "run --smoke"), ("1", "run make gpu-check SMOKE=1")):
        if env is None:
            monkeypatch.delenv("MAKELEVEL", raising=False)
        else:
            monkeypatch.setenv("MAKELEVEL", env)
        with pytest.raises(SystemExit):
            gpu_check.main(["--device", "cuda"])
        assert hint in capsys.readouterr().err
