"""FedIntR's benchmark artifacts (notebook 05): Tables I, II, III and V beside the paper's numbers, their figures
(every series visible, the paper drawn), and pending or diverged runs shown as such, never as numbers."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from fedlib.artifacts import fedintr as fi  # noqa: E402
from fedlib.config import Config  # noqa: E402
from fedlib.grid import Diverged  # noqa: E402
from fedlib.results import Pending, Record  # noqa: E402

ROUNDS = 12


def _rec(acc: float, seed: int = 0) -> Record:
    cfg = Config(seed=seed, rounds=ROUNDS)
    accs = [acc * (1 - 0.5 ** (i + 1)) for i in range(ROUNDS)]
    hist = [{"round": i + 1, "test_acc": a / 100, "time_s": 2.0} for i, a in enumerate(accs)]
    return Record(key=f"k{acc}-{seed}", config=cfg.to_dict(), history=hist, provenance={}, partition_hash="",
                  final_params_hash="")


def _pending() -> Pending:
    cfg = Config()
    return Pending(cfg.key(), cfg.to_dict())


def table1_runs(intr_pending: bool = False, prox_diverged: bool = False) -> dict:
    """Table I runs as the plan names them: FedAvg, FedProx (μ = 0.001) and FedIntR (μ = 1, 10), three seeds."""
    runs = {}
    for s in (0, 1, 2):
        runs[f"FedAvg | seed={s}"] = _rec(84.0 + s, s)
        runs[f"FedProx | μ=0.001 | seed={s}"] = _rec(84.5 + s, s)
        runs[f"FedIntR | μ=1 | seed={s}"] = _rec(83.0 + s, s)
        runs[f"FedIntR | μ=10 | seed={s}"] = _pending() if intr_pending and s == 2 else _rec(86.0 + s, s)
    if prox_diverged:
        cfg = Config(strategy="fedprox")
        runs["FedProx | μ=0.001 | seed=1"] = Diverged(cfg.key(), cfg.to_dict(), 3, "loss is nan")
    return runs


LEFT_OUT = {"FedCKA": "over the budget", "MOON": "over the budget"}


def test_table1_puts_the_papers_column_beside_each_methods_best_mu():
    t1 = fi.Table1.from_records(table1_runs(), last=3, dataset="fmnist", left_out=LEFT_OUT)
    assert t1.best.loc["FedIntR", "μ"] == 10  # the μ with the best mean, as the paper reports
    vs = t1.versus_paper()
    assert list(vs.index) == list(fi.PAPER_T1["fmnist"])
    assert vs.loc["FedIntR", "paper (%)"] == fi.PAPER_T1["fmnist"]["FedIntR"][0]
    assert vs.loc["FedIntR", "paper μ"] == fi.PAPER_T1["fmnist"]["FedIntR"][1]
    assert vs.loc["FedCKA", "ours (%)"] == "not run at this scale"
    ours = vs.loc["FedIntR", "ours (%)"]
    assert vs.loc["FedIntR", "diff"] == pytest.approx(ours - vs.loc["FedIntR", "paper (%)"], abs=0.01)
    assert vs.loc["FedIntR", "seeds"] == 3 and vs.loc["FedAvg", "our best μ"] == "—"
    assert {"± std", "last round (%)", "seeds [0, 1, 2] only (%)"} <= set(vs.columns)
    assert fi.Table1.from_records(table1_runs(), 3, "synthetic").versus_paper().equals(
        fi.Table1.from_records(table1_runs(), 3, "synthetic").best)  # no paper column: ours only


def test_table2_has_every_paper_mu_and_dashes_the_ones_not_run():
    t1 = fi.Table1.from_records(table1_runs(), last=3, dataset="fmnist")
    t2 = t1.table2([1, 10])
    assert set(fi.PAPER_T2) <= set(t2.index)
    assert t2.loc[3, "paper (%)"] == fi.PAPER_T2[3]["fmnist"] and t2.loc[3, "ours (%)"] == "—"
    assert t2.loc[10, "seeds"] == 3 and isinstance(t2.loc[10, "ours (%)"], float)


def test_pending_and_diverged_runs_are_no_numbers():
    t1 = fi.Table1.from_records(table1_runs(intr_pending=True, prox_diverged=True), 3, "fmnist")
    runs = t1.runs()
    assert np.isnan(runs.loc["FedIntR | μ=10 | seed=2", "median (%)"])
    assert fi.readable(runs).loc["FedIntR | μ=10 | seed=2", "median (%)"] == "pending"
    assert np.isnan(t1.all.loc[("FedProx", 0.001), "median (%)"])  # a diverged seed: no mean for its μ
    assert t1.all.loc[("FedIntR", 10.0), "seeds"] == 2  # the pending seed is not counted
    all_prox_diverged = {k: (Diverged("k", Config().to_dict(), 2, "nan") if k.startswith("FedProx") else v)
                         for k, v in table1_runs().items()}
    vs = fi.Table1.from_records(all_prox_diverged, 3, "fmnist").versus_paper()
    assert vs.loc["FedProx", "ours (%)"] == "diverged"
    records = {"table1": table1_runs(intr_pending=True)}
    claims = fi.claims(fi.Table1.from_records(records["table1"], 3, "fmnist", LEFT_OUT), records, "quick")
    by = {v.claim: v for v in claims}
    assert by["FedIntR is equivalent to or better than FedAvg on Fashion-MNIST, each at its best μ (at most 0.5 points below)"].verdict == "pending"
    assert by["FedIntR performs like MOON on Fashion-MNIST, each at its best μ (within 0.5 points)"].why == "over the budget"


def test_claims_compare_seeds_and_carry_the_papers_effect():
    records = {"table1": table1_runs()}
    t1 = fi.Table1.from_records(records["table1"], 3, "fmnist", LEFT_OUT)
    by = {v.claim: v for v in fi.claims(t1, records, "quick")}
    v = by["FedIntR is equivalent to or better than FedAvg on Fashion-MNIST, each at its best μ (at most 0.5 points below)"]
    assert v.verdict == "reproduced" and v.n == {"FedIntR": 3, "FedAvg": 3}
    assert v.paper == f"{fi.PAPER_T1['fmnist']['FedIntR'][0] - fi.PAPER_T1['fmnist']['FedAvg'][0]:+.2f}"
    assert by["FedIntR's gain over FedAvg grows as β falls"].verdict == "not testable at this scale"
    fidelity = [v for c, v in by.items() if "within ±0.5 points" in c]
    assert len(fidelity) == 5 and {v.verdict for v in fidelity} == {"not testable at this scale"}
    assert all(v.control for v in fidelity)  # the ±0.5 targets are the project's, not the paper's claims


def test_mu_figure_draws_ours_and_both_paper_tables():
    t1 = fi.Table1.from_records(table1_runs(), 3, "fmnist", LEFT_OUT)
    ax = t1.mu_figure("quick").axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"FedProx (ours)", "FedIntR (ours)"} <= set(labels)
    assert any("paper Table II" in t and "Fashion-MNIST" in t for t in labels)
    assert any("paper Table I" in t and "best μ" in t for t in labels)
    sweep = next(ln for ln in ax.get_lines() if ln.get_label().startswith("paper Table II"))
    assert list(sweep.get_ydata()) == [fi.PAPER_T2[mu]["fmnist"] for mu in sorted(fi.PAPER_T2)]
    assert {t.get_text() for t in ax.texts} >= {"FedCKA", "MOON"}  # paper stars of methods not run are named
    assert "Fashion-MNIST" in ax.get_title()


def test_curves_figure_keeps_fedavg_visible_under_fedprox_with_natural_round_ticks():
    t1 = fi.Table1.from_records(table1_runs(), 3, "fmnist")
    curves = t1.curves(table1_runs(), seed=0)
    assert set(curves) == {"FedAvg", "FedProx (μ=0.001)", "FedIntR (μ=10)"}
    ax = fi.curves_figure(curves, "fmnist", 0, "quick").axes[0]
    ours = [ln for ln in ax.get_lines() if ln.get_label() in curves]
    assert len({(ln.get_color(), ln.get_linestyle(), ln.get_marker()) for ln in ours}) == 3
    assert list(ax.get_xticks())[:2] == [1, 2] and 0 not in ax.get_xticks()
    assert not [ln for ln in ax.get_lines() if len(set(ln.get_xdata())) == 1 and len(ln.get_xdata()) == 2]  # no vlines
    stars = [ln for ln in ax.get_lines() if ln.get_marker() == "*" and len(ln.get_xdata())]
    assert sorted(ln.get_ydata()[0] for ln in stars) == sorted(fi.PAPER_T1["fmnist"][m][0]
                                                               for m in ("FedAvg", "FedProx", "FedIntR"))


def test_round_ticks_read_naturally():
    import matplotlib.pyplot as plt

    for rounds, expect in ((30, [1, 5, 10, 15, 20, 25, 30]), (1000, [1, 200, 400, 600, 800, 1000]), (3, [1, 2, 3])):
        fig, ax = plt.subplots()
        fi.round_ticks(ax, rounds)
        assert list(ax.get_xticks()) == expect
        plt.close(fig)


def test_table3_and_table5_put_the_papers_numbers_beside_ours():
    t1 = fi.Table1.from_records(table1_runs(), 3, "fmnist")
    low = {f"β=0.1 | FedAvg | seed={s}": _rec(70.0 + s, s) for s in (0, 1, 2)}
    low |= {f"β=0.1 | FedIntR | μ=10 | seed={s}": _rec(74.0 + s, s) for s in (0, 1, 2)}
    t3 = fi.Table3.from_records(low, t1, 0.5)
    table = t3.table()
    assert list(table.columns) == ["β=0.5", "β=0.1"] and t3.reference == "cifar10"
    assert table.loc["paper FedIntR − FedAvg (cifar10)", "β=0.1"] == pytest.approx(58.32 - 55.62)
    assert table.loc["FedIntR − FedAvg", "β=0.1"] > 0
    ax = t3.figure("smoke").axes[0]
    assert {"paper (CIFAR-10, Table III)", "paper (CIFAR-100, Table III)"} <= {ln.get_label() for ln in ax.get_lines()}
    records = {"table1": table1_runs(), "table3": low}
    v = {x.claim: x for x in fi.claims(t1, records, "paper", t3)}
    assert v["FedIntR's gain over FedAvg is larger at β = 0.1 than at β = 0.5"].verdict == "reproduced"
    uniform = {f"uniform (Eq. 6) | μ=10 | seed={s}": _rec(85.0 + s, s) for s in (0, 1)}
    t5 = fi.table5(uniform, t1, 10)
    assert list(t5.index) == ["α (Eq. 5)", "uniform (Eq. 6)"] and list(t5["seeds"]) == [2, 2]
    assert list(t5["paper (%)"]) == list(fi.PAPER_T5["fmnist"]) and t5.attrs["seeds"] == [0, 1]
