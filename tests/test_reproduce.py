"""The batch runner's summary: rebuilt from the notebooks' stored summaries without executing anything."""

from __future__ import annotations

import json

import fedlib.reproduce as rp


def test_collect_rebuilds_the_summary_from_stored_notebook_summaries(tmp_path, monkeypatch):
    (tmp_path / "summary").mkdir()
    doc = {"notebook": "01_fedavg_baseline", "scale": "quick", "dataset": "fmnist", "commit": "abcdef123",
           "seconds": 90.0, "claims": [{"claim": "A beats B", "status": "reproduced", "detail": "1 vs 0"},
                                       {"claim": "C", "status": "pending", "detail": ""}],
           "tables": {"T": [{"method": "A", "acc": 1.0}]}}
    (tmp_path / "summary" / "01_fedavg_baseline.quick.json").write_text(json.dumps(doc))
    monkeypatch.setattr("fedlib.results.DEFAULT_ROOT", tmp_path)
    monkeypatch.setattr(rp, "execute", lambda *a, **k: (_ for _ in ()).throw(AssertionError("executed")))
    assert rp.main(["--collect", "--scale", "quick", "--only", "00", "01"]) == 0
    text = (tmp_path / "summary-quick.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| 01_fedavg_baseline"))
    assert "stored (commit abcdef1)" in row and "| 1.5 |" in row and row.endswith("| 1 | 0 | 0 | 1 |")
    assert "| 00_data_partitions | no stored summary | — |" in text
    assert "[reproduced] A beats B — 1 vs 0" in text and "| A | 1.0 |" in text
    assert "not paper-scale results" in text
