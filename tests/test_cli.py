"""`python -m fedlib.companion run` / `show`: one experiment from a preset with overrides, stored as run() stores it; bad
overrides named before training; per-round scalars to TensorBoard, read back."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedlib.companion.cli import main, parse_overrides
from fedlib.companion.presets import preset
from fedlib.companion.results import Store, run


def test_overrides_are_json_then_python_literals_then_strings():
    assert parse_overrides(["rounds=2", 'strategy_kw={"mu": 0.5}', "lr=1e-3", "augment=none", "x=(1, 2)"]) == {
        "rounds": 2, "strategy_kw": {"mu": 0.5}, "lr": 1e-3, "augment": "none", "x": (1, 2)}
    with pytest.raises(ValueError, match="key=value"):
        parse_overrides(["rounds"])


def test_run_stores_the_record_run_stores_and_a_second_call_does_not_train(tmp_path, capsys, monkeypatch):
    args = ["run", "fedintr", "--scale", "smoke", "--store", str(tmp_path), "--no-progress", "rounds=2",
            "strategy=fedprox", 'strategy_kw={"mu": 0.5}']
    assert main(args) == 0
    cfg = preset("fedintr", "smoke", rounds=2, strategy="fedprox", strategy_kw={"mu": 0.5})
    rec = Store(tmp_path).get(cfg)
    assert rec is not None and rec.key in capsys.readouterr().out
    again = run(cfg, store=Store(tmp_path), progress=False)  # what run() gives: the same stored record
    assert again.history == rec.history and again.final_params_hash == rec.final_params_hash
    monkeypatch.setattr("fedlib.engine.Engine.run", lambda *a, **k: pytest.fail("trained a stored record"))
    assert main(args) == 0


@pytest.mark.parametrize("override, named", [("roundz=2", "roundz"), ("rounds=2.5", "rounds"),
                                             ('strategy_kw={"muu": 1}', "muu"), ("lr=nan", "lr")])
def test_a_bad_override_is_one_error_naming_it_before_training(override, named, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("fedlib.engine.Engine.run", lambda *a, **k: pytest.fail("trained"))
    assert main(["run", "fedintr", "--scale", "smoke", "--store", str(tmp_path), override]) == 2
    assert named in capsys.readouterr().err
    assert not (tmp_path / "records").exists() or not list((tmp_path / "records").iterdir())


def test_tensorboard_gets_one_scalar_per_round(tmp_path):
    pytest.importorskip("tensorboard", reason="pip install 'fedlib[tensorboard]' (make test installs it)")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tb = tmp_path / "tb"
    assert main(["run", "fedintr", "--scale", "smoke", "--store", str(tmp_path / "s"), "--no-progress",
                 "--tensorboard", str(tb), "rounds=3"]) == 0
    (run_dir,) = tb.iterdir()
    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    assert [e.step for e in acc.Scalars("test_acc")] == [1, 2, 3]
    rec = Store(tmp_path / "s").get(run_dir.name)
    assert [e.value for e in acc.Scalars("test_acc")] == pytest.approx([h["test_acc"] for h in rec.history])


def test_show_prints_config_provenance_and_final_metrics_by_key_or_prefix(tmp_path, capsys):
    cfg = preset("fedintr", "smoke", rounds=1)
    rec = run(cfg, store=Store(tmp_path), progress=False)
    for key in (rec.key, rec.key[:6]):
        assert main(["show", key, "--store", str(tmp_path)]) == 0
        out = capsys.readouterr().out
        assert "rounds = 1" in out and "commit" in out and "test_acc" in out
    assert main(["show", "zzzz", "--store", str(tmp_path)]) == 2
    assert "no record has a key starting 'zzzz'" in capsys.readouterr().err


def test_cli_errors_are_one_line_with_exit_code_2(tmp_path, capsys):
    from fedlib.companion.cli import main

    assert main(["run", "fedintr", "rounds=1", "rounds=3", "--store", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "given twice" in err
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "0123456789abcdef.json").write_text('{"key": "01')
    assert main(["show", "0123", "--store", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not valid JSON" in err and "--debug" in err


def test_ctrl_c_saves_says_how_to_resume_and_the_resumed_run_ends_as_an_uninterrupted_one(tmp_path):
    import json
    import signal
    import subprocess
    import sys
    import time

    args = ["fedintr", "--scale", "quick", "--no-progress", "dataset=synthetic", "n_train=1200", "n_test=100",
            "rounds=4", "local_epochs=1", "checkpoint_every=1"]
    cmd = [sys.executable, "-m", "fedlib.companion", "run", *args]
    ckpts = tmp_path / "a" / "checkpoints"
    p = subprocess.Popen([*cmd, "--store", str(tmp_path / "a")], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not any(ckpts.glob("*.pt")) and time.monotonic() < deadline and p.poll() is None:  # a renamed one, not a .tmp
        time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    err = p.communicate(timeout=120)[1]
    if p.returncode == 0:  # it finished before the signal: nothing to resume (a very fast machine)
        return
    assert p.returncode == 130 and "run the same command to resume" in err and "Traceback" not in err
    subprocess.run([*cmd, "--store", str(tmp_path / "a")], check=True, capture_output=True, timeout=300)
    subprocess.run([*cmd, "--store", str(tmp_path / "b")], check=True, capture_output=True, timeout=300)
    rec = {s: json.loads(next((tmp_path / s / "records").glob("*.json")).read_text()) for s in "ab"}
    assert rec["a"]["final_params_hash"] == rec["b"]["final_params_hash"]
    assert rec["a"]["provenance"]["resumed_from_round"] >= 1


def test_help_is_plain_text_and_lists_every_entry_point(capsys):
    import re

    from fedlib.companion.cli import main

    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert not re.search(r"``|:(func|mod|class|data|meth):", text)
    root = Path(__file__).resolve().parent.parent
    targets = re.search(r"^\.PHONY:(.*)$", (root / "Makefile").read_text(), re.M).group(1).split()
    mains = {".".join(p.relative_to(root).with_suffix("").parts[:-1]) for p in root.glob("fedlib/**/__main__.py")}
    mains |= {".".join(p.relative_to(root).with_suffix("").parts) for p in root.glob("fedlib/*.py")
              if '__name__ == "__main__"' in p.read_text() and p.stem != "cli"}
    missing = [f"make {t}" for t in targets if t != "setup" and f"make {t}" not in text]
    missing += [f"python -m {m}" for m in sorted(mains) if f"python -m {m} " not in text]
    missing += [f"scripts/{p.name}" for p in (root / "scripts").iterdir()
                if p.name not in ("setup.sh", "offline-bundle.sh") and f"scripts/{p.name}" not in text]
    assert not missing, f"--help does not name: {missing}"


def test_a_warning_during_run_is_one_line(tmp_path, monkeypatch, capsys):
    import warnings
    from types import SimpleNamespace

    def warned(*_a, **_k):
        warnings.warn("The last run of this config failed in round 2", RuntimeWarning, stacklevel=2)
        return SimpleNamespace(key="k", history=[{"round": 1, "test_acc": 0.5}])

    monkeypatch.setattr("fedlib.companion.cli.run", warned)
    assert main(["run", "fedintr", "--scale", "smoke", "rounds=1", "--store", str(tmp_path)]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["fedlib run: RuntimeWarning: The last run of this config failed in round 2"]
