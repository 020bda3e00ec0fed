"""Progress of long work: one line per round in a terminal, Jupyter without a tqdm warning, the round log that
``fedlib.companion.reproduce`` echoes from the kernels it runs, and the campaign's lines."""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

import pytest

from fedlib import progress
from fedlib.companion.papers import preset
from fedlib.companion.results import Store, run

LINE = r"\[fedlib\] fedintr/smoke fedavg · round {r}/2 · acc \d+\.\d\d % · test loss \d\.\d{{4}} · \d+\.\d\d s/round · ETA"


def test_a_terminal_gets_one_line_per_round(tmp_path, capsys):
    import re

    run(preset("fedintr", "smoke"), store=Store(tmp_path))
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("[fedlib] ") and "2 rounds, estimated" in out[0]  # said before the first round
    lines = [x for x in out[1:] if "round" in x]
    assert len(lines) == 2 and all(re.match(LINE.format(r=r), x) for r, x in zip((1, 2), lines)), lines


def test_progress_false_prints_nothing_but_the_round_log_still_gets_every_round(tmp_path, capsys, monkeypatch):
    log = tmp_path / "rounds.log"
    monkeypatch.setenv(progress.ROUND_LOG_ENV, str(log))
    run(preset("fedintr", "smoke"), store=Store(tmp_path), progress=False)
    assert "round" not in capsys.readouterr().out
    assert [x.split(" · ")[1] for x in log.read_text().splitlines()] == ["round 1/2", "round 2/2"]


def test_jupyter_without_ipywidgets_shows_text_never_a_tqdm_warning(tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(progress, "in_jupyter", lambda: True)
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "ipywidgets" else real(n, *a))
    assert progress.progress_mode(None) == "text" and progress.progress_mode(False) == "off"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # tqdm's "IProgress not found" would raise here
        run(preset("fedintr", "smoke"), store=Store(tmp_path))
    out = capsys.readouterr().out
    assert out.count("\r[fedlib]") == 2 and out.endswith("\n")  # one line, rewritten in place
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: object() if n == "ipywidgets" else real(n, *a))
    assert progress.progress_mode(None) == "bar"
    monkeypatch.setattr(progress, "in_jupyter", lambda: False)
    assert progress.progress_mode(None) == progress.progress_mode(True) == "lines"


def test_reproduce_prints_the_rounds_its_notebooks_report(monkeypatch, capsys, tmp_path):
    from fedlib.companion import reproduce

    def fake_execute(nb, scale, device, dataset, out_dir, train=True):
        with open(os.environ[progress.ROUND_LOG_ENV], "a") as f:
            f.write("[fedlib] x fedavg · round 1/2 · acc 50.00 %\n")
        time.sleep(0.7)
        with open(os.environ[progress.ROUND_LOG_ENV], "a") as f:
            f.write("[fedlib] x fedavg · round 2/2 · acc 60.00 %\n")
        return "ok", 0.7

    monkeypatch.setattr(reproduce, "execute", fake_execute)
    assert reproduce.execute_logged(Path("01_x.ipynb"), "smoke", "cpu", None, tmp_path) == ("ok", 0.7)
    out = capsys.readouterr().out
    assert "  [fedlib] x fedavg · round 1/2" in out and "  [fedlib] x fedavg · round 2/2" in out
    assert progress.ROUND_LOG_ENV not in os.environ


def test_the_campaign_prints_a_line_per_round_by_default(tmp_path, monkeypatch, capfd):  # fd level: the CPU default trains in worker processes
    import fedlib.companion.papers
    from fedlib.companion.campaign import main

    monkeypatch.setattr(fedlib.companion.papers, "PLANS", {"05_x": lambda scale, **kw: {"table1": {"a": preset("fedintr", scale)}}})
    args = ["run", "--scale", "smoke", "--budget", "10m", "--store", str(tmp_path), "--costs", str(tmp_path / "c.json")]
    assert main(args) == 0
    out = capfd.readouterr().out
    assert "fedintr/smoke fedavg · round 1/2" in out and "· round 2/2" in out and "ETA" in out
    make = (Path(__file__).resolve().parent.parent / "Makefile").read_text()
    assert "--no-progress" not in next(x for x in make.splitlines() if "fedlib.companion.campaign run" in x)
