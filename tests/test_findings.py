"""The findings per paper (notebook 09): read from the notebooks' stored claim rows, counted, Holm-adjusted per
paper, drawn as a forest plot, and the README's first screen generated from the same rows."""

import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from fedlib.companion import findings  # noqa: E402
from fedlib.companion.verdicts import decide, not_testable  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _store(tmp_path, claims_by_nb):
    folder = tmp_path / "summary"
    folder.mkdir(exist_ok=True)
    for nb, claims in claims_by_nb.items():
        rows = [{"status": v.verdict, **v.to_dict()} for v in claims]
        (folder / f"{nb}.quick.json").write_text(json.dumps({"notebook": nb, "claims": rows, "controls": []}))
    return tmp_path


def _rows(tmp_path):
    a, b = {0: 86.0, 1: 86.4, 2: 85.8}, {0: 84.0, 1: 84.5, 2: 83.9}
    cka = [decide("FedCKA beats FedAvg at α = 5", "FedCKA Table 2", b, a, paper_d=3.49,
                  finding="FedCKA below the baselines"),
           decide("the first two layers are more similar", "FedCKA (arXiv) §3.1", [0.03, 0.02, 0.03], unit="CKA"),
           decide("MOON beats FedAvg", "FedCKA Table 2", [86.0, 84.4, 85.8], [84.0, 84.5, 85.9], paper_d=0.88),
           not_testable("ResNet-50 layers", "FedCKA (Appl. Sci.) §3.2", "over the budget")]
    intr = [decide("FedIntR beats FedAvg", "FedIntR Table I", a, b, paper_d=0.25)]
    return findings.load("quick", _store(tmp_path, {"03_x": cka, "05_y": intr}))


def test_rows_are_read_per_paper_and_held_to_holm_within_each(tmp_path):
    df = _rows(tmp_path)
    assert list(df["study"]) == ["FedCKA"] * 4 + ["FedIntR"]
    fam = findings.verdict_counts(df)
    assert fam.loc["FedCKA", "contradicted"] == 1 and fam.loc["FedCKA", "not testable at this scale"] == 1
    assert fam.loc["FedCKA", "decided"] == 2 and fam.loc["FedIntR", "decided"] == 1
    assert fam.loc["FedCKA", "false decisions allowed (expected, at most)"] == pytest.approx(2 * 0.025)
    assert set(df.loc[df["status"].isin(["reproduced", "contradicted"]), "holm"]) <= {"holds", "not after Holm"}
    assert (df.loc[~df["status"].isin(["reproduced", "contradicted"]), "holm"] == "").all()


def test_the_forest_plot_has_a_panel_per_unit_and_marks_the_papers_effect(tmp_path):
    df = _rows(tmp_path)
    fig = findings.forest(df, "FedCKA")
    panels = [ax for ax in fig.axes if ax.get_xlabel()]
    assert [ax.get_xlabel() for ax in panels] == ["d (accuracy points)", "d (CKA)"]
    points = panels[0]
    assert len(points.get_yticks()) == 2  # the not-testable row has no interval: counted, not drawn
    diamonds = [ln for ln in points.lines if ln.get_marker() == "D"]
    assert sorted(float(d.get_xdata()[0]) for d in diamonds) == pytest.approx([0.88, 3.49])
    assert all(t.get_fontsize() >= 8 for ax in fig.axes for t in ax.get_yticklabels())
    assert findings.forest(df, "FedSHIBU") is None


def test_the_paragraph_names_the_finding_and_the_rows_below_the_papers_effect(tmp_path):
    text = findings.paragraph(_rows(tmp_path), "FedCKA")
    assert "4 claims" in text and "FedCKA below the baselines" in text and "1 contradicted" in text
    assert "our interval lies below the paper's effect" in text
    assert "no claim rows" in findings.paragraph(_rows(tmp_path), "FedER")


def test_the_readme_block_counts_the_rows_and_replaces_only_itself(tmp_path):
    df = _rows(tmp_path)
    block = findings.readme_block(df, "quick")
    assert "| FedCKA | 1 | 1 | 1 | 1 |" in block and "notebooks/09_findings.ipynb" in block
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{findings.README_BEGIN}\nold\n{findings.README_END}\nrest\n")
    assert findings.write_readme(readme, block) and not findings.write_readme(readme, block)
    assert readme.read_text().startswith("intro\n") and readme.read_text().endswith("\nrest\n")


def test_the_committed_readme_gives_the_findings_of_the_committed_claim_rows():
    expected = findings.readme_block(findings.load("quick"), "quick")
    text = (ROOT / "README.md").read_text()
    assert expected in text, "README's findings block is stale: render the notebooks (reproduce --write-back)"
    assert text.index(findings.README_BEGIN) < text.index("## The two commands")  # the first screen


def test_the_margin_policy_is_stated_in_the_docs():
    from fedlib.companion.verdicts import MARGINS

    doc = (ROOT / "docs" / "verdicts.md").read_text()
    assert f"±{MARGINS['points']:g} accuracy point" in doc and f"{MARGINS['CKA']:g} CKA" in doc
    assert not math.isnan(MARGINS["points"])
