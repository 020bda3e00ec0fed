"""The README and docs against the code: every README command that reads records runs here in under a minute, every
one that trains says how long it takes, and the numbers the docs quote are the ones the code produces."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fedlib.companion.costs import CHECKPOINT_AFTER_S, CostTable
from fedlib.companion.presets import preset
from fedlib.companion.provenance import device_name
from fedlib.companion.results import Store

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DOCS = {p.relative_to(ROOT).as_posix(): p.read_text() for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]}
# Commands that only read: run here, each within a minute.
READS = ("-m fedlib.companion show ", "-m fedlib.companion.papers claims ", "-m fedlib.companion.campaign plan ")
# Commands that train nothing or whose length is their budget: they need no duration.
NO_TRAINING = ("make test", "make lab", "make bundle", "--no-train", "make reproduce", "BUDGET=", "--budget")
DURATION = re.compile(r"~?\d+(\.\d+)?(-\d+)?\s*(s|min|h)\b|minutes|GPU")


def _commands(kind: str = "bash", text: str = README) -> list[tuple[str, str]]:
    """``(command, comment)`` for each line of ``text``'s ``kind`` blocks that is a command (not a continuation)."""
    out = []
    for block in re.findall(rf"```{kind}\n(.*?)```", text, re.S):
        for line in block.splitlines():
            code, _, comment = line.partition("  #")
            if code.strip() and not line.startswith(" "):
                out.append((code.strip(), comment.strip()))
    return out


def _estimate_min(cfg) -> float:
    return CostTable().estimate(cfg, "cpu", device_name=device_name("cpu")).seconds / 60


def test_every_readme_command_that_trains_says_how_long_it_takes():
    silent = [c for c, why in _commands() if not any(r in c for r in READS + NO_TRAINING) and not DURATION.search(why)]
    silent += [c for c, why in _commands("python") if re.search(r"\brun\(", c) and not DURATION.search(why)]
    assert not silent, f"README commands that train without saying how long: {silent}"


@pytest.mark.parametrize("args", sorted({" ".join(c.split()[1:]) for text in DOCS.values()
                                          for c, _ in _commands("bash", text)
                                          if any(r in c for r in READS) and c.split()[0].endswith("python")}))
def test_each_documented_command_that_reads_records_runs_in_a_minute(args):
    argv = [sys.executable, *args.split()]
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]


def test_the_checkpoint_rule_is_stated_one_way():
    assert CHECKPOINT_AFTER_S == 60
    texts = {**DOCS, **{p.relative_to(ROOT).as_posix(): p.read_text() for p in (ROOT / "fedlib").rglob("*.py")}}
    stale = [f"{name}: {m[0]}" for name, t in texts.items()
             for m in re.finditer(r"[^.]*checkpoint[^.]*(few minutes|3 minutes)[^.]*", " ".join(t.split()))]
    assert not stale, stale
    assert "estimated over a minute checkpoints every round" in " ".join(README.split())


def test_the_first_run_example_quotes_its_estimate():
    lo, hi = map(int, re.search(r"seed=1\s+# trains ~(\d+)-(\d+) min", README).groups())
    cfg = preset("fedintr", "quick", strategy="fedprox", strategy_kw={"mu": 0.01}, seed=1)
    assert 0.75 * lo <= _estimate_min(cfg) <= hi


def test_the_record_readme_shows_is_the_one_its_python_example_runs():
    prefix = re.search(r"-m fedlib.companion show (\w+)", README)[1]
    cfg = preset("fedintr", "quick", strategy="fedprox", strategy_kw={"mu": 0.001})
    assert cfg.key().startswith(prefix) and Store().get(cfg) is not None
    assert "--scale quick strategy=fedprox" in README and 'strategy_kw={"mu": 0.001})' in README


def test_strategies_quick_quotes_the_presets_numbers_and_its_estimate():
    doc = (ROOT / "scripts" / "strategies_quick.py").read_text()
    rounds, epochs, n_train, batch, minutes = re.search(
        r"preset's (\d+) rounds of (\d+) local epochs on ([\d,]+) training images at\s+batch (\d+): about (\d+) min",
        doc).groups()
    cfg = preset("fedintr", "quick", strategy="scaffold")
    assert (cfg.rounds, cfg.local_epochs, cfg.n_train, cfg.batch_size) == (int(rounds), int(epochs),
                                                                          int(n_train.replace(",", "")), int(batch))
    assert int(minutes) / 1.5 <= _estimate_min(cfg) <= int(minutes) * 1.5
    assert f"about {minutes} min on a 2-core CPU" in " ".join(README.split())


def test_the_readme_counts_the_paper_claims_as_the_claims_page_does():
    page = (ROOT / "results" / "claims-paper.md").read_text()
    counts = {v: len(re.findall(rf"^\| {v} \|", page, re.M)) for v in ("pending", "not testable at this scale")}
    text = " ".join(README.split())
    assert "every paper claim still pending" not in text or counts["not testable at this scale"] == 0
    for m in re.finditer(r"(\d+) pending, (\d+) not testable at this scale", text):
        assert (int(m[1]), int(m[2])) == (counts["pending"], counts["not testable at this scale"])


def test_every_test_the_docs_cite_exists():
    cited = {(f, t) for text in DOCS.values() for f, t in re.findall(r"`(test_\w+\.py)::(test_\w+)", text)}
    missing = [f"{f}::{t}" for f, t in sorted(cited)
               if not (ROOT / "tests" / f).exists() or f"def {t}(" not in (ROOT / "tests" / f).read_text()]
    assert cited and not missing, missing
