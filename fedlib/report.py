"""Paper-vs-ours tables and named claims, collected into a per-notebook summary for ``fedlib.reproduce``.

In a notebook::

    report = Report("01_fedavg_baseline", scale=scale, dataset=dataset)
    report.table("FedIntR Table I", compare({"FedAvg": 88.90}, {"FedAvg": 100 * acc}))
    report.claim("FedIntR Table I: FedAvg reaches >= 75% at quick scale", acc >= 0.75, applies=scale != "smoke")
    report.save()

``claim`` asserts (so a failing claim fails the notebook) unless ``applies`` is False, in which case it is
recorded as "not checked at this scale" — a smoke run proves the code runs, not the paper. ``verdict`` records
a paper claim as "reproduced" or "not reproduced" with its numbers, without raising.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from .results import DEFAULT_ROOT, atomic_write_text, git_commit


def compare(paper: Mapping[str, float], ours: Mapping[str, float], unit: str = "%") -> pd.DataFrame:
    """The paper's numbers beside ours with the difference (ours − paper)."""
    rows = []
    for k in paper:
        p, o = float(paper[k]), float(ours.get(k, np.nan))
        rows.append({"setting": k, f"paper ({unit})": p, f"ours ({unit})": round(o, 2), "diff": round(o - p, 2)})
    return pd.DataFrame(rows).set_index("setting")


class ClaimFailed(AssertionError):
    pass


class Report:
    """What one notebook run showed: its tables, its checked claims, and how it was produced."""

    def __init__(self, notebook: str, *, scale: str, dataset: str, **meta: Any) -> None:
        self.notebook, self.scale, self.dataset = notebook, scale, dataset
        self.meta = {k: (v if isinstance(v, (int, float, str, bool, list)) else str(v)) for k, v in meta.items()}
        self.tables: dict[str, pd.DataFrame] = {}
        self.claims: list[dict[str, Any]] = []

    def table(self, name: str, df: pd.DataFrame) -> pd.DataFrame:
        self.tables[name] = df
        return df

    def claim(self, text: str, ok: bool, *, applies: bool = True, detail: str = "") -> None:
        status = ("pass" if ok else "FAIL") if applies else "not checked at this scale"
        self.claims.append({"claim": text, "status": status, "detail": detail})
        print(f"[{status}] {text}" + (f" — {detail}" if detail else ""))
        if applies and not ok:
            raise ClaimFailed(f"Paper claim not reproduced: {text}. {detail}")

    def verdict(self, text: str, ok: bool, *, applies: bool = True, detail: str = "") -> bool:
        """Record whether a paper claim was reproduced, with its numbers in ``detail``; never raises (use
        :meth:`claim` for invariants a notebook must not get past). Returns ``ok``."""
        status = ("reproduced" if ok else "not reproduced") if applies else "not checked at this scale"
        self.claims.append({"claim": text, "status": status, "detail": detail})
        print(f"[{status}] {text}" + (f" — {detail}" if detail else ""))
        return bool(ok)

    def save(self, root: Path | None = None) -> Path:
        root = Path(root or DEFAULT_ROOT) / "summary"
        doc = {"notebook": self.notebook, "scale": self.scale, "dataset": self.dataset, "commit": git_commit(),
               **self.meta, "claims": self.claims,
               "tables": {k: json.loads(v.reset_index().to_json(orient="records")) for k, v in self.tables.items()}}
        path = root / f"{self.notebook}.{self.scale}.json"
        atomic_write_text(path, json.dumps(doc, indent=1))
        return path
