"""The batch runner: its summary rebuilt from the notebooks' stored summaries without executing anything; bad
options and parameters named before anything runs; the committed summary never replaced by a failed or partial
batch."""

from __future__ import annotations

import json
import os
from contextlib import nullcontext
from dataclasses import replace

import nbformat
import pytest
import torch

import fedlib.companion.reproduce as rp
from fedlib.companion.report import check_params, injected_names


@pytest.fixture
def results(tmp_path, monkeypatch):
    """A results folder holding a committed summary; executing a notebook is an error unless a test allows it."""
    monkeypatch.setattr("fedlib.companion.results.DEFAULT_ROOT", tmp_path)
    monkeypatch.setattr(rp, "execute", lambda *a, **k: (_ for _ in ()).throw(AssertionError("executed")))
    monkeypatch.setattr(rp, "pretrain", lambda *a, **k: None)
    monkeypatch.setattr(rp, "batch_lock", lambda folder: nullcontext())  # a render running in this tree meanwhile
    (tmp_path / "summary-quick.md").write_text("the committed summary\n")
    return tmp_path


def test_collect_rebuilds_the_summary_from_stored_notebook_summaries(results):
    (results / "summary").mkdir()
    doc = {"notebook": "01_fedavg_baseline", "scale": "quick", "dataset": "fmnist", "commit": "abcdef123",
           "seconds": 90.0, "training_minutes": 1.5, "seeds": [0, 1, 2],
           "claims": [{"claim": "A beats B", "source": "Table 1", "status": "reproduced", "n": {"A": 3, "B": 3},
                       "means": {"A": 1.0, "B": 0.0}, "estimate": 1.0, "interval": [0.5, 1.5], "region": "d > 0",
                       "method": "paired t 95 %"},
                      {"claim": "C | D", "source": "Fig. 2", "status": "pending", "why": "runs not stored"}],
           "tables": {"T": [{"method": "A", "acc": 1.0}]}}
    (results / "summary" / "01_fedavg_baseline.quick.json").write_text(json.dumps(doc))
    assert rp.main(["--collect", "--scale", "quick", "--only", "00", "01"]) == 0
    # two notebooks of all: the committed summary stays, the batch's goes to the .partial file
    assert (results / "summary-quick.md").read_text() == "the committed summary\n"
    text = (results / "summary-quick.partial.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| 01_fedavg_baseline"))
    assert "stored (commit abcdef1)" in row and "| 0 / 20 | 0.0 / " in row and row.endswith("| 1 | 0 | 0 | 0 | 1 |")
    assert "| 00_data_partitions | no stored summary | — |" in text
    assert ("| reproduced | A beats B | Table 1 | the paper's data and model | A 3, B 3 | A 1.00, B 0.00 | "
            "+1.00 [+0.50, +1.50] | 0.50 | d > 0 | — | — | "
            "paired t 95 % |") in text and "| A | 1.0 |" in text
    assert "| pending | C \\| D | Fig. 2 |" in text and "not paper-scale results" in text
    assert rp.main(["--collect", "--scale", "quick"]) == 0  # every notebook: the summary is rebuilt
    assert "| 01_fedavg_baseline | stored (commit abcdef1)" in (results / "summary-quick.md").read_text()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_cuda_device_on_a_cpu_machine_is_named_before_anything_runs(results, capsys):
    with pytest.raises(SystemExit) as err:
        rp.main(["--only", "00", "--device", "cuda"])
    msg = capsys.readouterr().err
    assert err.value.code == 2 and "--device 'cuda': CUDA is not available on this machine; use device='cpu'" in msg
    assert (results / "summary-quick.md").read_text() == "the committed summary\n"
    with pytest.raises(SystemExit, match=None):
        rp.main(["--only", "00", "--dataset", "mnist"])
    assert "--dataset 'mnist'" in capsys.readouterr().err


def test_a_failed_batch_leaves_the_committed_summary_as_it_was(results, monkeypatch, capsys):
    why = "FAILED (ValueError: Invalid notebook parameter(s) (papermill -p NAME VALUE): - seed=-1: must be >= 0.)"
    monkeypatch.setattr(rp, "execute", lambda *a, **k: (why, 1.0))
    assert rp.main(["--scale", "quick"]) == 1
    assert (results / "summary-quick.md").read_text() == "the committed summary\n"
    assert "seed=-1: must be >= 0" in (results / "summary-quick.partial.md").read_text()
    assert "left as it was (a notebook failed)" in capsys.readouterr().out


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_unwritable_results_folder_is_one_error_naming_it(results, capsys):
    results.chmod(0o500)
    try:
        with pytest.raises(SystemExit) as err:
            rp.main(["--collect", "--scale", "quick"])
    finally:
        results.chmod(0o700)
    msg = capsys.readouterr().err
    assert err.value.code == 2 and f"cannot write to {results}" in msg and "Traceback" not in msg


def test_an_unwritable_results_path_is_one_error_naming_it(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("")  # a file where the results folder should be: unwritable even for root
    monkeypatch.setattr("fedlib.companion.results.DEFAULT_ROOT", blocker / "results")
    with pytest.raises(SystemExit) as err:
        rp.main(["--collect", "--scale", "quick"])
    assert err.value.code == 2 and f"cannot write to {blocker / 'results'}" in capsys.readouterr().err


def test_a_parameter_the_notebook_does_not_define_is_named(tmp_path, monkeypatch):
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "language": "python",
                                                           "display_name": "Python 3"}})
    cell = nbformat.v4.new_code_cell("scale = 'quick'\ndevice = 'cpu'")
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [cell]
    path = tmp_path / "09_x.ipynb"
    nbformat.write(nb, path)
    args = rp.argparse.Namespace(device="cpu", dataset="fmnist", collect=False)
    assert rp.parameter_problems([path], args) == ["09_x.ipynb has no parameter dataset (its parameters: device, "
                                                   "scale)"]


def test_check_params_names_a_papermill_parameter_the_notebook_does_not_have():
    history = ["", "scale = 'smoke'\nseed = 0", "# Parameters\nsedd = 3\nscale = \"smoke\"\n", "check_params(...)"]
    assert injected_names(history) == ["sedd", "scale"]
    with pytest.raises(ValueError, match=r"sedd: not a parameter of this notebook .*its parameters are scale, seed"):
        check_params(scale="smoke", seed=0, _history=history)
    check_params(scale="smoke", seed=0, _history=history[:2] + history[3:])  # not run by papermill
    assert injected_names(None) is None  # outside IPython


def test_papermill_with_a_misspelt_parameter_stops_at_the_check(tmp_path):
    pm = pytest.importorskip("papermill")
    with pytest.raises(pm.PapermillExecutionError, match="sedd: not a parameter of this notebook"):
        pm.execute_notebook(str(rp.NOTEBOOK_DIR / "00_data_partitions.ipynb"), str(tmp_path / "out.ipynb"),
                            parameters={"sedd": 3, "scale": "smoke"}, cwd=str(rp.NOTEBOOK_DIR), kernel_name="python3",
                            progress_bar=False)


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


def test_missing_runs_are_trained_by_worker_processes_before_the_notebook_renders(tmp_path, monkeypatch):
    """On a CPU a notebook's pending runs are trained side by side first; the notebook then finds their records."""
    import fedlib.companion.papers
    from fedlib.companion.papers import preset
    from fedlib.companion.results import Store

    monkeypatch.setattr("fedlib.companion.results.DEFAULT_ROOT", tmp_path)
    cfgs = {"FedAvg": preset("fedintr", "smoke"), "FedProx": preset("fedintr", "smoke", strategy="fedprox")}
    monkeypatch.setattr(fedlib.companion.papers, "PLANS", {"05_x": lambda scale, **kw: {"table1": cfgs}})
    rp.pretrain(rp.Path("notebooks/05_x.ipynb"), "smoke", "cpu", None, jobs=2)
    store = Store.for_scale("smoke")
    assert all(store.get(c) is not None for c in cfgs.values())


def test_jobs_reach_the_pretraining_and_a_bad_value_is_named(results, monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(rp, "pretrain", lambda nb, scale, device, dataset, jobs: seen.append(jobs))
    monkeypatch.setattr(rp, "execute", lambda *a, **k: ("ok", 1.0))
    rp.main(["--scale", "smoke", "--only", "00", "--jobs", "3"])
    assert seen == [3]
    with pytest.raises(SystemExit):
        rp.main(["--scale", "smoke", "--only", "00", "--jobs", "0"])
    assert "--jobs 0" in capsys.readouterr().err


def test_claims_table_shows_each_verdict_with_its_numbers_and_colour():
    from fedlib.companion.report import CLAIM_COLUMNS, VERDICT_COLOURS, Report
    from fedlib.companion.verdicts import decide, not_testable

    r = Report("nb", scale="quick", dataset="fmnist")
    r.verdict(decide("A beats B", "Table 1", {0: 80.0, 1: 81.0, 2: 83.0}, {0: 70.0, 1: 71.0, 2: 72.0},
                     kind="greater", chance=10, paper="+3.1"))
    r.verdict(not_testable("C beats D", "Fig. 2", "needs 1,000 rounds"))
    df = r.claims_frame()
    assert list(df.columns) == list(CLAIM_COLUMNS) and len(df) == 2
    row = df.iloc[0]
    assert row["verdict"] == "reproduced" and row["n"] == "A 3, B 3" and row["paper"] == "+3.1"
    assert row["d [95 % interval]"].startswith("+10.33 [")
    assert df.iloc[1]["how / why"] == "needs 1,000 rounds"
    html = r.claims_table()._repr_html_()
    assert VERDICT_COLOURS["reproduced"] in html and VERDICT_COLOURS["not testable at this scale"] in html
    # a committed notebook's output is compared with a fresh render: no random table id, no memory address
    assert html == r.claims_table()._repr_html_() and " at 0x" not in repr(r.claims_table())
    assert "A beats B" in repr(r.claims_table())
    only = Report("01", scale="quick", dataset="fmnist")
    only.verdict(replace(not_testable("ours", "control", "x"), control=True))
    html = only.claims_table()._repr_html_()
    assert html.count("<table") == 1 and "no claim of the papers here; our controls" in html


def test_write_back_copies_outputs_by_position_without_the_injected_cell_or_stderr(tmp_path):
    src = {"cells": [{"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": ["scale = 'quick'"],
                      "outputs": [], "execution_count": None},
                     {"cell_type": "markdown", "metadata": {}, "source": ["# x"]},
                     {"cell_type": "code", "metadata": {}, "source": "print(1)", "outputs": [],
                      "execution_count": None}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    ran = json.loads(json.dumps(src))
    ran["cells"].insert(1, {"cell_type": "code", "metadata": {"tags": ["injected-parameters"]},
                            "source": "train = False", "outputs": [], "execution_count": 2})
    ran["cells"][3]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "1\n"},
                                  {"output_type": "stream", "name": "stderr", "text": "/home/me/warning\n"}]
    ran["cells"][3]["execution_count"] = 3
    (tmp_path / "ran.ipynb").write_text(json.dumps(ran))
    (tmp_path / "nb.ipynb").write_text(json.dumps(src))
    rp.write_back(tmp_path / "ran.ipynb", tmp_path / "nb.ipynb")
    out = json.loads((tmp_path / "nb.ipynb").read_text())
    assert len(out["cells"]) == 3 and out["cells"][2]["outputs"] == [ran["cells"][3]["outputs"][0]]
    assert out["cells"][2]["execution_count"] == 3
    src["cells"][2]["source"] = "print(2)"
    (tmp_path / "nb.ipynb").write_text(json.dumps(src))
    with pytest.raises(ValueError, match="render it again"):
        rp.write_back(tmp_path / "ran.ipynb", tmp_path / "nb.ipynb")


def test_write_back_merges_a_cells_consecutive_prints_however_the_kernel_split_them():
    """The same prints split into one or two stream messages (timing) are written back as the same bytes."""
    one = [{"output_type": "stream", "name": "stdout", "text": ["a\n", "b\n"]}]
    two = [{"output_type": "stream", "name": "stdout", "text": ["a\n"]},
           {"output_type": "stream", "name": "stdout", "text": "b\n"}]
    assert rp.merged_streams(two) == rp.merged_streams(one) == one
    table = {"output_type": "execute_result", "data": {"text/plain": "t"}, "metadata": {}, "execution_count": 1}
    kept = [two[0], table, two[1]]  # prints on either side of a table stay apart
    assert rp.merged_streams(kept) == kept


def test_claims_overview_groups_every_claim_by_paper_with_a_link_to_its_notebook():
    rows = [{"notebook": "05_fedintr_benchmarks", "claims": [
        {"claim": "FedIntR beats FedAvg", "source": "FedIntR Table I", "status": "reproduced", "estimate": 1.0,
         "interval": [0.5, 1.5]}],
             "controls": [{"claim": "ours", "source": "FedIntR Table I", "status": "reproduced"}]},
            {"notebook": "03_fedcka_heterogeneity", "claims": [
                {"claim": "FedCKA beats FedAvg", "source": "FedCKA Table 2", "status": "contradicted",
                 "estimate": -1.0, "interval": [-1.5, -0.5], "p": 0.001, "paper_d": 3.49,
                 "size": "smaller than the paper's",
                 "data": "Fashion-MNIST, simple CNN; the paper: CIFAR-10, simple CNN"},
                {"claim": "FedCKA beats MOON", "source": "FedCKA Table 2", "status": "pending",
                 "data": "Fashion-MNIST, simple CNN; the paper: CIFAR-10, simple CNN"}]}]
    text = rp.claims_overview(rows, "quick")
    assert text.index("## FedCKA") < text.index("## FedIntR") and "## FedER" not in text
    assert "[05_fedintr_benchmarks](../notebooks/05_fedintr_benchmarks.ipynb)" in text
    assert "+1.00 [+0.50, +1.50]" in text and "the paper: CIFAR-10" in text and "| ours |" not in text
    row = next(ln for ln in text.splitlines() if "FedCKA beats FedAvg" in ln)
    assert "| holds | smaller than the paper's (+3.49) |" in row  # the family-wise and the size readings
    assert "decided t rows holding after Holm: 1 of 1" in text
    pend = next(ln for ln in text.splitlines() if "FedCKA beats MOON" in ln)
    assert "the paper: CIFAR-10" not in pend  # a row nothing decided was decided on nothing
    lines = rp.findings(rows + [{"notebook": "06_fedintr_scaling", "claims": [
        {"claim": "x", "source": "FedIntR Fig. 5", "status": "not testable at this scale"}]}], "quick")
    assert lines == ["FedCKA: 2 claims — 1 contradicted, 1 pending",
                     "  read: results/claims-quick.md#fedcka; notebooks/03_fedcka_heterogeneity.ipynb",
                     "FedIntR: 2 claims — 1 reproduced, 1 not testable at this scale",
                     "  read: results/claims-quick.md#fedintr; notebooks/05_fedintr_benchmarks.ipynb, "
                     "notebooks/06_fedintr_scaling.ipynb"]


def test_a_claim_links_the_figures_drawn_for_the_table_or_figure_it_cites():
    figs = ["fedintr_table1_curves_fmnist", "fedintr_table1_mu_fmnist", "fedintr_table3_beta_fmnist",
            "fedintr_fig5_epochs_fmnist"]
    assert rp.claim_figures("FedIntR Table I, Fashion-MNIST column", figs) == figs[:2]
    assert rp.claim_figures("FedIntR Fig. 5 / Table III", figs) == figs[2:]
    assert rp.claim_figures("FedIntR Table IV", figs) == [] and rp.claim_figures("§4.2", figs) == []
    rows = [{"notebook": "05_x", "figures": figs,
             "claims": [{"claim": "A beats B", "source": "FedIntR Table I", "status": "pending", "why": "-"}]}]
    text = rp.claims_overview(rows, "quick")
    assert "| figure |" in text and "[fedintr_table1_mu_fmnist](../figures/quick/fedintr_table1_mu_fmnist.png)" in text


def test_a_whole_batch_names_the_figures_no_notebook_drew(tmp_path):
    for name in ("fedintr_table1_curves_fmnist", "fedintr_old_plan_fmnist"):
        (tmp_path / f"{name}.json").write_text("{}")
    rows = [{"notebook": "05_x", "figures": ["fedintr_table1_curves_fmnist"]}, {"notebook": "00_y"}]
    assert rp.stale_figures(rows, tmp_path) == ["fedintr_old_plan_fmnist"]
