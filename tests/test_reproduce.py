"""The batch runner's summary: rebuilt from the notebooks' stored summaries without executing anything."""

from __future__ import annotations

import json

import fedlib.reproduce as rp


def test_collect_rebuilds_the_summary_from_stored_notebook_summaries(tmp_path, monkeypatch):
    (tmp_path / "summary").mkdir()
    doc = {"notebook": "01_fedavg_baseline", "scale": "quick", "dataset": "fmnist", "commit": "abcdef123",
           "seconds": 90.0, "training_minutes": 1.5, "seeds": [0, 1, 2],
           "claims": [{"claim": "A beats B", "source": "Table 1", "status": "reproduced", "n": {"A": 3, "B": 3},
                       "means": {"A": 1.0, "B": 0.0}, "estimate": 1.0, "interval": [0.5, 1.5], "region": "d > 0",
                       "method": "paired t 95 %"},
                      {"claim": "C | D", "source": "Fig. 2", "status": "pending", "why": "runs not stored"}],
           "tables": {"T": [{"method": "A", "acc": 1.0}]}}
    (tmp_path / "summary" / "01_fedavg_baseline.quick.json").write_text(json.dumps(doc))
    monkeypatch.setattr("fedlib.results.DEFAULT_ROOT", tmp_path)
    monkeypatch.setattr(rp, "execute", lambda *a, **k: (_ for _ in ()).throw(AssertionError("executed")))
    assert rp.main(["--collect", "--scale", "quick", "--only", "00", "01"]) == 0
    text = (tmp_path / "summary-quick.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| 01_fedavg_baseline"))
    assert "stored (commit abcdef1)" in row and "| 1.5 | 0, 1, 2 |" in row and row.endswith("| 1 | 0 | 0 | 0 | 1 |")
    assert "| 00_data_partitions | no stored summary | — |" in text
    assert ("| reproduced | A beats B | Table 1 | A 3, B 3 | A 1.00, B 0.00 | +1.00 [+0.50, +1.50] | d > 0 | "
            "paired t 95 % |") in text and "| A | 1.0 |" in text
    assert "| pending | C \\| D | Fig. 2 |" in text


def test_summary_tables_are_valid_markdown(tmp_path, monkeypatch):
    """Every row of every table has the header's column count (pipes in cells are escaped)."""
    rows = [{"notebook": "08", "status": "ok", "seconds": 1.0, "seeds": [0], "training_minutes": 0.1,
             "claims": [{"claim": "s = 2 | linear", "status": "inconclusive", "source": "T1 | x", "why": "a|b"}],
             "tables": {"T | 1": [{"setting": "s=2 | FedSHIBU", "acc": 1.0}]}}]
    lines = rp.summarize(rows, "quick").splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            n = _cells(lines[i])
            j = i + 1
            while j < len(lines) and lines[j].startswith("|"):
                assert _cells(lines[j]) == n, (lines[i], lines[j])
                j += 1
            i = j
        else:
            i += 1


def _cells(line: str) -> int:
    import re

    return len(re.split(r"(?<!\\)\|", line.strip().strip("|")))
    assert "not paper-scale results" in text
