"""The numbered notebooks are committed executed at quick scale, and nbval's comparing run (the second line of
``make test``) fails when a committed output no longer matches a render from the records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_code_cell_is_committed_with_its_outputs(path):
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    unexecuted = [i for i, c in enumerate(code) if c.get("execution_count") is None]
    assert not unexecuted, f"{path.name}: code cells {unexecuted} were never executed (reproduce --write-back)"
    shown = {o.get("output_type") for c in code for o in c["outputs"]}
    assert shown & {"display_data", "execute_result"}, f"{path.name} shows no figure or table"
    assert not any(o.get("name") == "stderr" for c in code for o in c["outputs"]), f"{path.name} keeps stderr"


def test_the_comparing_run_fails_when_a_committed_output_is_edited(tmp_path):
    nb = json.loads(NOTEBOOKS[0].read_text())
    printed = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"]
               if o.get("output_type") == "stream" and o.get("name") == "stdout"]
    assert printed, f"{NOTEBOOKS[0].name} prints nothing to edit"
    printed[0]["text"] = ["an edited output line\n"]
    edited = tmp_path / NOTEBOOKS[0].name
    edited.write_text(json.dumps(nb))
    env = {**os.environ, "FEDLIB_SCALE": "quick", "FEDLIB_TRAIN": "0",  # its figures and summary: not the committed ones
           "FEDLIB_FIGURES": str(tmp_path / "figures"), "FEDLIB_RESULTS": str(tmp_path / "results")}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval", str(edited)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 1, out.stdout[-3000:]
    assert "Cell outputs differ" in out.stdout and "an edited output line" in out.stdout, out.stdout[-3000:]
    assert out.stdout.count("FAILED") == 1, out.stdout[-3000:]  # only the edited cell
    assert any((tmp_path / "figures" / "quick").iterdir())  # drawn where it was told, not over the committed ones
