"""Notebook 08's findings about FedSHIBU's parts: what its CRSM can detect, and what fine-tuning
does.

* :func:`crsm_readings` — the controlled test of ``benchmarks/crsm_groups.py`` (Fig. 1's label
  groups, Fig. 3's shards, IID data; quick preset, Fashion-MNIST, one seed): per reading of D̂_i,
  the CRSM's correlation with the clients' label overlap and the weight a client keeps of its own
  body, per round; :func:`describe_crsm_readings` says what they reach.
* :func:`finetune_table` — personalized accuracy before and after fine-tuning per method and shards
  per user, from the runs' records (:func:`fedlib.companion.papers.fedshibu.tables.personal_frame`),
  with the change it makes.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from fedlib.companion.plots import mean_curves

__all__ = [
    "CRSM_GROUPS", "SETTINGS", "READINGS", "crsm_readings", "describe_crsm_readings",
    "finetune_table"
]

CRSM_GROUPS = Path(__file__).resolve().parents[4] / "benchmarks" / "crsm_groups.json"
# the runs of the controlled test shown, each a body-training setting: label groups (Fig. 1), shards
# (Fig. 3), IID
SETTINGS = {"groups_local": "label groups, bodies trained alone",
            "groups_shared": "label groups, FedSHIBU (shared)",
            "shards_local": "shards s = 5, bodies trained alone",
            "iid_local": "IID, bodies trained alone"}
READINGS = {"own": "own samples", "shared": "shared samples"}
# one seed: dashed
STYLES = {"own samples": dict(ls=":", marker="o", mfc="none"),
          "shared samples": dict(ls="--", marker="s")}


def _last_step(df: pd.DataFrame) -> str:
    """At the last step: the correlation each reading reaches on the label groups and the
    self-weight it leaves."""
    last = df[df["steps"] == df["steps"].max()].set_index(["setting", "reading"])
    groups, shards = SETTINGS["groups_shared"], SETTINGS["shards_local"]
    own, shared = READINGS.values()
    weight = last.xs(own, level="reading")["self-weight"]
    return (
        f"at {int(df['steps'].max())} local steps, label groups: own samples r = "
        f"{last.loc[(groups, own), 'corr']:+.2f}, shared r = "
        f"{last.loc[(groups, shared), 'corr']:+.2f} (FedSHIBU); shards s = 5: own "
        f"{last.loc[(shards, own), 'corr']:+.2f}, shared "
        f"{last.loc[(shards, shared), 'corr']:+.2f}; self-weight own "
        f"{weight.min():.2f}-{weight.max():.2f}, shared "
        f"{last.xs(shared, level='reading')['self-weight'].max():.2f} (uniform 0.10)")


def crsm_readings(path: Path = CRSM_GROUPS) -> tuple[pd.DataFrame, plt.Figure]:
    """Per setting, reading and round: ``corr`` (the off-diagonal CRSM's correlation with label
    overlap), ``self-weight`` (after Algorithm 3's row normalization; 0.1 is uniform for 10 clients)
    and ``off-diagonal`` (mean CKA); the figure draws the first two over local steps (one seed:
    :func:`fedlib.companion.plots.mean_curves` draws its curve alone), colour by setting and line by
    reading, titled with what they reach at the last step."""
    doc = json.loads(Path(path).read_text())
    rows = [{
        "setting": SETTINGS[k], "reading": READINGS[r], "round": e["round"], "steps": e["steps"],
        "corr": e[r]["corr_overlap"], "self-weight": e[r]["self_weight"],
        "off-diagonal": e[r]["offdiag"]
    } for k in SETTINGS for e in doc["runs"][k]["rounds"] for r in READINGS]
    df = pd.DataFrame(rows)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), layout="constrained")
    colors = dict(zip(SETTINGS.values(), plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for ax, col, label in ((axes[0], "corr", "correlation r of the CRSM with label overlap"),
                           (axes[1], "self-weight", "self-weight (own body)")):
        groups = {
            f"{s} · {r}": (s, r, g)
            for (s, r), g in df.groupby(["setting", "reading"], sort=False)
            if not (col == "corr" and s.startswith("IID"))
        }  # IID: no label overlap to follow
        curves = {name: {0: g.set_index("steps")[col]} for name, (_, _, g) in groups.items()}
        note = mean_curves(ax, curves, percent=False, ylabel=label, xlabel="local steps per client")
        # colour: the setting; dashed squares: shared samples, dotted circles: own
        for line in ax.get_lines():
            setting, reading, _ = groups[line.get_label().rsplit(" (n=", 1)[0]]
            line.set(color=colors[setting], **STYLES[reading])
        ax.legend(fontsize=8, loc="center right")  # each panel its own: the left one has no IID
        left = [s for s in SETTINGS.values() if s.startswith("IID")] if col == "corr" else []
        ax.set_title(
            note + (f"\nnot drawn: {', '.join(left)} (no label overlap to correlate with)"
                    if left else ""), fontsize=9)
    axes[0].axhline(0, color="grey", lw=0.8)
    axes[1].axhline(0.1, color="grey", lw=0.8, ls=":")
    axes[1].text(0, 0.12, "uniform (1/10)", color="grey", fontsize=8)
    axes[0].set_ylim(-1.05, 1.05)
    axes[1].set_ylim(0, 1)
    fig.suptitle("What the CRSM detects (benchmarks/crsm_groups.py, 10 clients, one "
                 f"seed)\n{_last_step(df)}",
                 fontsize=10)
    return df.round(3), fig


def describe_crsm_readings(df: pd.DataFrame) -> str:
    """The controlled test in numbers (``df`` from :func:`crsm_readings`): what each reading of D̂_i
    reaches."""
    return (f"One seed, 10 clients: {_last_step(df)}. A CRSM that finds the groups but keeps the "
            "uniform weight aggregates like FedBABU; one at CKA's chance level keeps each client "
            "near its own body.")


def finetune_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per method and shards per user ``s``: mean personalized accuracy (%) without and with
    fine-tuning over the stored seeds, the change fine-tuning makes, and the share of clients that
    kept the papers' lr, a lower one or no fine-tuning at the last round (``frame``:
    :func:`fedlib.companion.papers.fedshibu.tables.personal_frame`)."""
    kept = ["kept ft_lr (%)", "kept a lower lr (%)", "kept no fine-tuning (%)"]
    done = frame[~frame["pending"] & ~frame["diverged"]]
    if done.empty:
        return pd.DataFrame(columns=[
            "seeds", "before fine-tuning (%)", "after fine-tuning (%)", "change (points)", *kept
        ])
    g = done.groupby(["method", "s"], sort=False, dropna=False)
    out = pd.DataFrame({
        "seeds": g["acc"].count(), "before fine-tuning (%)": g["acc (no ft)"].mean(),
        "after fine-tuning (%)": g["acc"].mean()
    })
    out["change (points)"] = out["after fine-tuning (%)"] - out["before fine-tuning (%)"]
    for c in kept:
        out[c] = g[c].mean()
    return out.round(2)
