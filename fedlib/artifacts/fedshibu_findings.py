"""Notebook 08's findings about FedSHIBU's parts: what its CRSM can detect, and what fine-tuning does.

* :func:`crsm_readings` — the controlled test of ``benchmarks/crsm_groups.py`` (Fig. 1's label groups, Fig. 3's
  shards, IID data; quick preset, Fashion-MNIST, one seed): per reading of D̂_i, the CRSM's correlation with the
  clients' label overlap and the weight a client keeps of its own body, per round.
* :func:`finetune_table` — personalized accuracy before and after fine-tuning per method and shards per user, from
  the runs' records (:func:`fedlib.artifacts.fedshibu.runs_frame`), with the change it makes.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

__all__ = ["CRSM_GROUPS", "SETTINGS", "READINGS", "crsm_readings", "finetune_table"]

CRSM_GROUPS = Path(__file__).resolve().parents[2] / "benchmarks" / "crsm_groups.json"
# the runs of the controlled test shown, each a body-training setting: label groups (Fig. 1), shards (Fig. 3), IID
SETTINGS = {"groups_local": "label groups, bodies trained alone", "groups_shared": "label groups, FedSHIBU (shared)",
            "shards_local": "shards s = 5, bodies trained alone", "iid_local": "IID, bodies trained alone"}
READINGS = {"own": "own samples", "shared": "shared samples"}


def crsm_readings(path: Path = CRSM_GROUPS) -> tuple[pd.DataFrame, plt.Figure]:
    """Per setting, reading and round: ``corr`` (the off-diagonal CRSM's correlation with label overlap),
    ``self-weight`` (after Algorithm 3's row normalization; 0.1 is uniform for 10 clients) and ``off-diagonal``
    (mean CKA); the figure draws the first two over local steps, one panel each."""
    doc = json.loads(Path(path).read_text())
    rows = [{"setting": SETTINGS[k], "reading": READINGS[r], "round": e["round"], "steps": e["steps"],
             "corr": e[r]["corr_overlap"], "self-weight": e[r]["self_weight"], "off-diagonal": e[r]["offdiag"]}
            for k in SETTINGS for e in doc["runs"][k]["rounds"] for r in READINGS]
    df = pd.DataFrame(rows)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), constrained_layout=True)
    styles = {"own samples": dict(ls="--", marker="o", mfc="none"), "shared samples": dict(ls="-", marker="s")}
    colors = dict(zip(SETTINGS.values(), plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for ax, col, label in ((axes[0], "corr", "correlation of the CRSM with label overlap"),
                           (axes[1], "self-weight", "self-weight (own body)")):
        for (setting, reading), g in df.groupby(["setting", "reading"], sort=False):
            if col == "corr" and setting.startswith("IID"):
                continue  # no label overlap to follow: every pair of clients holds every label
            ax.plot(g["steps"], g[col], color=colors[setting], label=f"{setting} · {reading}", ms=4,
                    **styles[reading])
        ax.set_xlabel("local steps per client")
        ax.set_ylabel(label)
    axes[0].axhline(0, color="grey", lw=0.8)
    axes[1].axhline(0.1, color="grey", lw=0.8, ls=":")
    axes[1].text(0, 0.11, "uniform (1/10)", color="grey", fontsize=8)
    axes[0].set_ylim(-1.05, 1.05)
    axes[1].set_ylim(0, 1)
    handles, labels = axes[0].get_legend_handles_labels()
    h1, l1 = axes[1].get_legend_handles_labels()
    extra = [(h, lab) for h, lab in zip(h1, l1) if lab not in labels]
    fig.legend(handles + [h for h, _ in extra], labels + [lab for _, lab in extra], loc="outside lower center",
               ncol=3, fontsize=8)
    fig.suptitle("What the CRSM detects (one seed, 10 clients): own samples sit at CKA's chance level whatever the "
                 "labels; shared samples\nfind the label groups but their values near 1 leave the weights near "
                 "uniform; neither follows the shards' overlap", fontsize=10)
    return df.round(3), fig


def finetune_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per method and shards per user ``s``: mean personalized accuracy (%) without and with fine-tuning over the
    stored seeds, and the change fine-tuning makes (``frame``: :func:`fedlib.artifacts.fedshibu.runs_frame`)."""
    done = frame[~frame["pending"] & ~frame["diverged"]]
    if done.empty:
        return pd.DataFrame(columns=["seeds", "before fine-tuning (%)", "after fine-tuning (%)", "change (points)"])
    g = done.groupby(["method", "s"], sort=False, dropna=False)
    out = pd.DataFrame({"seeds": g["acc"].count(), "before fine-tuning (%)": g["acc (no ft)"].mean(),
                        "after fine-tuning (%)": g["acc"].mean()})
    out["change (points)"] = out["after fine-tuning (%)"] - out["before fine-tuning (%)"]
    return out.round(2)
