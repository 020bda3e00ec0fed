"""Rendering never loses a user's work: scripts/render-head.sh refuses to start over an uncommitted notebook edit
and keeps a copy of one made while it rendered; write-back checks its notebooks before executing any."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "render-head.sh"
FAKE_RENDER = """#!/usr/bin/env bash
# stands in for python -m fedlib.companion.reproduce: rewrites the notebook in the render's worktree (its cwd)
echo '{"rendered": true}' > notebooks/01_demo.ipynb
if [ -n "${EDIT_MIDWAY:-}" ]; then echo '{"edited": "midway"}' > "$EDIT_MIDWAY"; fi
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    (repo / "notebooks").mkdir(parents=True)
    (repo / "notebooks" / "01_demo.ipynb").write_text('{"committed": true}\n')
    (repo / ".gitignore").write_text(".venv/\n.render-backup/\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "notebooks")
    python = repo / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_RENDER)
    python.chmod(0o755)
    return repo


def _render(repo: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT)], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


def test_render_head_refuses_to_start_over_an_uncommitted_notebook_edit(repo):
    nb = repo / "notebooks" / "01_demo.ipynb"
    nb.write_text('{"my": "edit"}\n')
    out = _render(repo)
    assert out.returncode != 0
    assert "notebooks/01_demo.ipynb" in out.stderr and "git stash" in out.stderr and "nothing was rendered" in out.stderr
    assert nb.read_text() == '{"my": "edit"}\n'  # the edit is still there
    assert len(out.stderr.strip().splitlines()) == 1


def test_render_head_copies_a_clean_render_and_keeps_an_edit_made_while_it_rendered(repo):
    nb = repo / "notebooks" / "01_demo.ipynb"
    out = _render(repo)
    assert out.returncode == 0, out.stderr
    assert nb.read_text() == '{"rendered": true}\n' and "copied" in out.stdout
    _git(repo, "checkout", "--", "notebooks")
    out = _render(repo, EDIT_MIDWAY=str(nb))
    assert out.returncode == 0, out.stderr
    backups = list((repo / ".render-backup").glob("*/notebooks/01_demo.ipynb"))
    assert len(backups) == 1 and backups[0].read_text() == '{"edited": "midway"}\n'
    assert ".render-backup/" in out.stdout and nb.read_text() == '{"rendered": true}\n'


@pytest.fixture
def batch(tmp_path, monkeypatch):
    """reproduce with its results and notebooks in tmp_path; executing a notebook is an error."""
    import fedlib.companion.reproduce as rp

    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    shutil.copy(rp.NOTEBOOK_DIR / "00_data_partitions.ipynb", nbs)
    monkeypatch.setattr("fedlib.companion.results.DEFAULT_ROOT", tmp_path / "results")
    monkeypatch.setattr(rp, "NOTEBOOK_DIR", nbs)
    monkeypatch.setattr(rp, "execute", lambda *a, **k: (_ for _ in ()).throw(AssertionError("executed")))
    return rp, nbs


def test_write_back_to_read_only_notebooks_is_refused_before_anything_executes(batch, capsys):
    rp, nbs = batch
    nb = nbs / "00_data_partitions.ipynb"
    nb.chmod(0o444)
    with pytest.raises(SystemExit):
        rp.main(["--only", "00", "--no-train", "--write-back"])
    err = capsys.readouterr().err
    assert f"{nb} is read-only" in err and "nothing was run" in err and "chmod u+w" in err


def test_a_second_batch_in_the_same_tree_refuses_with_one_line(batch, capsys):
    from fedlib.companion.writeback import batch_lock

    rp, nbs = batch
    with batch_lock(nbs / "executed"):
        assert rp.main(["--only", "00", "--no-train"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"process {os.getpid()}" in err[0] and "nothing was run" in err[0]


def test_write_back_leaves_a_notebook_edited_during_its_render_as_it_is(tmp_path):
    from fedlib.companion.writeback import write_back

    ran = {"cells": [{"cell_type": "code", "source": "x = 1", "outputs": [], "metadata": {}}]}
    mine = {"cells": [{"cell_type": "code", "source": "x = 2  # my edit", "outputs": [], "metadata": {}}]}
    (tmp_path / "ran.ipynb").write_text(json.dumps(ran))
    (tmp_path / "nb.ipynb").write_text(text := json.dumps(mine))
    with pytest.raises(ValueError, match="left as it is"):
        write_back(tmp_path / "ran.ipynb", tmp_path / "nb.ipynb")
    assert (tmp_path / "nb.ipynb").read_text() == text


def test_two_renders_at_once_have_their_own_kernel_sockets(tmp_path):
    import threading

    import nbformat
    import papermill as pm

    from fedlib.companion.ipc_kernel import IPCKernelManager

    a, b = IPCKernelManager(), IPCKernelManager()
    assert Path(a.ip).parent != Path(b.ip).parent and not Path(a.ip).is_relative_to(Path.cwd())
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import time; time.sleep(0.5); print('ok')")])
    nbformat.write(nb, tmp_path / "a.ipynb")
    errors: list[BaseException] = []

    def render(i: int) -> None:
        try:
            pm.execute_notebook(str(tmp_path / "a.ipynb"), str(tmp_path / f"out{i}.ipynb"), cwd=str(tmp_path),
                                kernel_name="python3", progress_bar=False,
                                kernel_manager_class="fedlib.companion.ipc_kernel.IPCKernelManager")
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=render, args=(i,)) for i in range(2)]
    [t.start() for t in threads]
    [t.join(timeout=120) for t in threads]
    assert errors == [] and sorted(p.name for p in tmp_path.iterdir()) == ["a.ipynb", "out0.ipynb", "out1.ipynb"]


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
def test_rendering_with_no_train_on_a_cpu_works_whatever_device_was_asked_for(batch, monkeypatch, capsys):
    rp, _ = batch
    devices = []
    monkeypatch.setattr(rp, "execute", lambda nb, scale, device, *a, **k: (devices.append(device), ("ok", 0.0))[1])
    assert rp.main(["--only", "00", "--scale", "paper", "--device", "cuda", "--no-train"]) == 0
    assert devices == ["cpu"] and "--no-train trains nothing" in capsys.readouterr().out


def test_a_fedlib_error_in_a_notebook_is_one_line_under_papermill(tmp_path):
    import nbformat
    import papermill as pm

    code = "from fedlib.config import Config\nConfig(rounds=-1).validate()"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)]), tmp_path / "a.ipynb")
    with pytest.raises(pm.PapermillExecutionError) as e:
        pm.execute_notebook(str(tmp_path / "a.ipynb"), str(tmp_path / "out.ipynb"), cwd=str(tmp_path),
                            kernel_name="python3", progress_bar=False)
    assert e.value.ename == "ConfigError" and len(e.value.traceback) == 1 and "rounds" in e.value.traceback[0]


def test_write_back_over_an_uncommitted_notebook_edit_keeps_a_copy_and_says_where(repo):
    from fedlib.companion.writeback import write_back

    cell = {"cell_type": "code", "source": "x = 1", "outputs": [], "metadata": {}, "execution_count": None}
    nb = repo / "notebooks" / "01_demo.ipynb"
    nb.write_text(json.dumps({"cells": [cell]}))
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "a code cell")
    assert write_back(_ran(repo, "1"), nb) is None  # committed: nothing to keep
    _git(repo, "checkout", "--", ".")
    mine = json.dumps({"cells": [{**cell, "outputs": [{"output_type": "stream", "name": "stdout", "text": ["mine"]}]}]})
    nb.write_text(mine)  # a JupyterLab user ran it and saved
    kept = write_back(_ran(repo, "2"), nb)
    assert kept is not None and kept.read_text() == mine and ".render-backup" in str(kept)
    assert json.loads(nb.read_text())["cells"][0]["outputs"][0]["text"] == ["2"]


def _ran(repo: Path, out: str) -> Path:
    ran = repo.parent / f"ran{out}.ipynb"
    ran.write_text(json.dumps({"cells": [{"cell_type": "code", "source": "x = 1", "execution_count": 1, "metadata": {},
                                          "outputs": [{"output_type": "stream", "name": "stdout", "text": [out]}]}]}))
    return ran
