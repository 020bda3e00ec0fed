"""FedIntR's benchmark artifacts (notebook 05): Tables I, II, III and V beside the paper's numbers, their figures
(every series visible, the paper drawn), and pending or diverged runs shown as such, never as numbers."""

import matplotlib

matplotlib.use("Agg")

from dataclasses import replace  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from fedlib.companion.papers.fedintr import tables as fi  # noqa: E402
from fedlib.companion.papers.fedintr import claims as fc  # noqa: E402
from fedlib.companion.papers.fedintr import figures as ff  # noqa: E402
from fedlib.config import Config  # noqa: E402
from fedlib.companion.grid import Diverged, fmt_interval  # noqa: E402
from fedlib.companion.common import FedIntRRunId as R  # noqa: E402
from fedlib.companion.results import Pending, Record  # noqa: E402

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
        runs[R("FedAvg", s)] = _rec(84.0 + s, s)
        runs[R("FedProx", s, mu=0.001)] = _rec(84.5 + s, s)
        runs[R("FedIntR", s, mu=1)] = _rec(83.0 + s, s)
        runs[R("FedIntR", s, mu=10)] = _pending() if intr_pending and s == 2 else _rec(86.0 + s, s)
    if prox_diverged:
        cfg = Config(strategy="fedprox")
        runs[R("FedProx", 1, mu=0.001)] = Diverged(cfg.key(), cfg.to_dict(), 3, "loss is nan")
    return runs


LEFT_OUT = {"FedCKA": "over the budget", "MOON": "over the budget"}


def test_table1_puts_the_papers_column_beside_each_methods_best_mu():
    t1 = fi.Table1.from_records(table1_runs(), last=3, dataset="fmnist", left_out=LEFT_OUT)
    assert t1.best.loc["FedIntR", "μ"] == 10  # the μ with the best mean, as the paper reports
    vs = t1.versus_paper()
    assert list(vs.index) == list(fi.FEDINTR_T1["fmnist"])
    assert vs.loc["FedIntR", "paper (%)"] == fi.FEDINTR_T1["fmnist"]["FedIntR"][0]
    assert vs.loc["FedIntR", "paper μ"] == fi.FEDINTR_T1["fmnist"]["FedIntR"][1]
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
    assert set(fi.FEDINTR_T2) <= set(t2.index)
    assert t2.loc[3, "paper (%)"] == fi.FEDINTR_T2[3]["fmnist"] and t2.loc[3, "ours (%)"] == "—"
    assert t2.loc[10, "seeds"] == 3 and isinstance(t2.loc[10, "ours (%)"], float)


def test_pending_and_diverged_runs_are_no_numbers():
    t1 = fi.Table1.from_records(table1_runs(intr_pending=True, prox_diverged=True), 3, "fmnist")
    runs = t1.runs()
    assert np.isnan(runs.loc["FedIntR | μ=10 | seed=2", "median (%)"])
    assert fi.readable(runs).loc["FedIntR | μ=10 | seed=2", "median (%)"] == "pending"
    assert np.isnan(t1.all.loc[("FedProx", 0.001), "median (%)"])  # a diverged seed: no mean for its μ
    assert t1.all.loc[("FedIntR", 10.0), "seeds"] == 2  # the pending seed is not counted
    all_prox_diverged = {k: (Diverged("k", Config().to_dict(), 2, "nan") if k.method == "FedProx" else v)
                         for k, v in table1_runs().items()}
    vs = fi.Table1.from_records(all_prox_diverged, 3, "fmnist").versus_paper()
    assert vs.loc["FedProx", "ours (%)"] == "diverged"
    records = {"table1": table1_runs(intr_pending=True)}
    claims = fc.claims(fi.Table1.from_records(records["table1"], 3, "fmnist", LEFT_OUT), records, "quick")
    by = {v.claim: v for v in claims}
    assert by["FedIntR beats FedAvg on Fashion-MNIST, each at its best μ"].verdict == "pending"
    assert by["FedIntR ties with MOON for the best accuracy on Fashion-MNIST, each at its best μ"].why == \
        "over the budget"


def test_claims_compare_seeds_and_carry_the_papers_effect():
    records = {"table1": table1_runs()}
    t1 = fi.Table1.from_records(records["table1"], 3, "fmnist", LEFT_OUT)
    by = {v.claim: v for v in fc.claims(t1, records, "quick")}
    v = by["FedIntR beats FedAvg on Fashion-MNIST, each at its best μ"]  # §IV-B: FedIntR (and MOON) best
    assert v.verdict == "reproduced" and v.n == {"FedIntR": 3, "FedAvg": 3} and v.region.startswith("d > 0")
    assert v.paper_d == pytest.approx(89.15 - 88.90) and v.size() == "larger than the paper's"  # d = +2
    assert v.paper == f"{fi.FEDINTR_T1['fmnist']['FedIntR'][0] - fi.FEDINTR_T1['fmnist']['FedAvg'][0]:+.2f}"
    assert by["FedIntR's gain over FedAvg grows as β falls"].verdict == "not testable at this scale"
    fidelity = [v for c, v in by.items() if "policy margin (±1 point) of FedIntR Table I" in c]
    assert len(fidelity) == 5 and {v.verdict for v in fidelity} == {"not testable at this scale"}
    assert all(v.control for v in fidelity)  # the fidelity targets are the project's, not the paper's claims


def _panel_text(ax) -> set[str]:
    return {c.get_text().get_text() for t in ax.tables for c in t.get_celld().values()}


def _paper_on_axes(ax, values) -> bool:
    """Whether any drawn point of ``ax`` sits at one of the paper's ``values``."""
    return any(np.isclose(float(y), v) for ln in ax.get_lines() for y in np.atleast_1d(ln.get_ydata()) for v in values)


def test_mu_figure_draws_each_method_at_its_mu_on_a_method_axis_and_the_paper_in_panels_of_their_own():
    t1 = fi.Table1.from_records(table1_runs(), 3, "fmnist", LEFT_OUT)
    fig = ff.mu_figure(t1, "quick")
    ax, p1, p2 = fig.axes
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == ["FedAvg (no μ)", "FedProx (μ=0.001)", "FedIntR (μ=1)", "FedIntR (μ=10)"]  # methods, not a μ axis
    assert ax.get_xscale() == "linear" and ax.get_xlabel() == ""
    title = fig.subfigs[0]._suptitle.get_text()
    assert "3 seeds (0-2); bars: 95 % t interval" in title and "best μ" not in title
    assert "not run at this scale: FedCKA, MOON" in title and "Fashion-MNIST" in title
    paper = [v[0] for v in fi.FEDINTR_T1["fmnist"].values()] + [v["fmnist"] for v in fi.FEDINTR_T2.values()]
    assert not _paper_on_axes(ax, paper)  # the paper's 100-round numbers are never on our axes
    assert {"89.15", "88.67", "0.001"} <= _panel_text(p1) | _panel_text(p2)
    assert "not run at this scale" not in p2.get_title()  # FedIntR ran two μ here: Table II has ours
    one = {k: v for k, v in table1_runs().items() if k.mu != 1}
    p2 = ff.mu_figure(fi.Table1.from_records(one, 3, "fmnist", LEFT_OUT), "quick").axes[2]
    assert "ours: not run at this scale (one μ)" in p2.get_title()


def test_describe_mu_states_each_methods_mean_and_interval_or_pending():
    t1 = fi.Table1.from_records(table1_runs(), 3, "fmnist", LEFT_OUT)
    text = ff.describe_mu(t1)
    assert f"FedIntR (μ=10) {fmt_interval(t1.per_seed('FedIntR'))}" in text and "(3 seeds)" in text
    assert "FedCKA" not in text  # left out at this scale: not described as pending
    pend = {k: _pending() for k in table1_runs()}
    assert "pending" in ff.describe_mu(fi.Table1.from_records(pend, 3, "fmnist", LEFT_OUT))


def test_curves_figure_draws_the_mean_of_every_seed_the_paired_differences_and_the_paper_in_a_panel():
    t1 = fi.Table1.from_records(table1_runs(), 3, "fmnist")
    curves = t1.curves(table1_runs())
    assert set(curves) == {"FedAvg", "FedProx (μ=0.001)", "FedIntR (μ=10)"}
    assert all(set(v) == {0, 1, 2} for v in curves.values())  # every seed, not the first one only
    fig = ff.curves_figure(curves, "fmnist", "quick")
    ax, diff, panel = fig.axes
    ours = [ln for ln in ax.get_lines() if str(ln.get_label()).endswith("(n=3)")]
    assert len(ours) == 3 and len({(ln.get_color(), ln.get_linestyle(), ln.get_marker()) for ln in ours}) == 3
    mean = np.mean([100 * r.metric("test_acc").iloc[-1] for k, r in table1_runs().items() if k.method == "FedAvg"])
    fedavg = next(ln for ln in ax.get_lines() if ln.get_label() == "FedAvg (n=3)")
    assert fedavg.get_ydata()[-1] == pytest.approx(mean)  # percent, once
    assert list(ax.get_xticks())[:2] == [1, 2] and 0 not in ax.get_xticks()
    assert min(diff.get_lines()[0].get_xdata()) == 8 and "3 seeds (0-2); band: 95 % t" in fig._suptitle.get_text()
    gaps = {ln.get_label(): ln for ln in diff.get_lines() if not ln.get_label().startswith("_")}
    assert "FedProx (μ=0.001) − FedAvg (n=3)" in gaps  # paired by seed: about +0.5 points late in training
    assert gaps["FedProx (μ=0.001) − FedAvg (n=3)"].get_ydata() == pytest.approx(0.5, abs=0.01)
    assert not _paper_on_axes(ax, [v[0] for v in fi.FEDINTR_T1["fmnist"].values()])
    assert "88.90" in _panel_text(panel)


def test_describe_curves_states_the_last_round_and_the_largest_gap():
    curves = fi.Table1.from_records(table1_runs(), 3, "fmnist").curves(table1_runs())
    text = ff.describe_curves(curves)
    last = np.mean([c.iloc[-1] for c in curves["FedIntR (μ=10)"].values()])
    assert f"At round {ROUNDS} the means over 3 seeds" in text and f"FedIntR (μ=10) {last:.2f} %" in text
    assert "largest gap" in text and "pending" in ff.describe_curves({})


def test_round_ticks_read_naturally():
    import matplotlib.pyplot as plt

    for rounds, expect in ((30, [1, 5, 10, 15, 20, 25, 30]), (1000, [1, 200, 400, 600, 800, 1000]), (3, [1, 2, 3])):
        fig, ax = plt.subplots()
        fi.round_ticks(ax, rounds)
        assert list(ax.get_xticks()) == expect
        plt.close(fig)


def test_table3_and_table5_put_the_papers_numbers_beside_ours():
    t1 = fi.Table1.from_records(table1_runs(), 3, "fmnist")
    low = {R("FedAvg", s, beta=0.1): _rec(70.0 + s, s) for s in (0, 1, 2)}
    low |= {R("FedIntR", s, beta=0.1, mu=10): _rec(74.0 + s, s) for s in (0, 1, 2)}
    t3 = fi.Table3.from_records(low, t1, 0.5)
    table = t3.table()
    assert list(table.columns) == ["β=0.5", "β=0.1"] and t3.reference == "cifar10"
    assert table.loc["paper FedIntR − FedAvg (cifar10)", "β=0.1"] == pytest.approx(58.32 - 55.62)
    assert table.loc["FedIntR − FedAvg", "β=0.1"] > 0
    gains = t3.gains()
    assert set(gains) == {0.5, 0.1} and gains[0.1] == pytest.approx(
        {s: t1.per_seed("FedIntR", t3.runs3)[s] - t1.per_seed("FedAvg", t3.runs3)[s] for s in (0, 1, 2)})
    ax, panel = ff.table3_figure(t3, "smoke").axes
    assert not _paper_on_axes(ax, [*t3.paper_gain("cifar10").values(), *t3.paper_gain("cifar100").values()])
    assert {"+2.70", "+1.97"} <= _panel_text(panel) and "3 seeds (0-2)" in ax.get_title()
    assert len(ax.containers) == 1 and ax.containers[0].lines[0].get_linestyle() == "None"  # two β: dots
    assert f"β=0.1 {fmt_interval(gains[0.1], '+')}" in ff.describe_beta(t3) and "+2.70" in ff.describe_beta(t3)
    pend = fi.Table3.from_records({k: _pending() for k in low}, t1, 0.5)
    assert "β=0.1 pending" in ff.describe_beta(pend)
    assert "not run yet: β=0.1" in ff.table3_figure(pend, "smoke").axes[0].get_title()
    records = {"table1": table1_runs(), "table3": low}
    v = {x.claim: x for x in fc.claims(t1, records, "paper", t3)}
    gain = v["FedIntR's gain over FedAvg is larger at β = 0.1 than at β = 0.5"]
    assert gain.verdict == "reproduced" and gain.paper_d == pytest.approx(2.70 - 1.41)
    uniform = {R("uniform (Eq. 6)", s, mu=10): _rec(85.0 + s, s) for s in (0, 1)}
    t5 = fi.table5(uniform, t1, 10)
    assert list(t5.index) == ["α (Eq. 5)", "uniform (Eq. 6)"] and list(t5["seeds"]) == [2, 2]
    assert list(t5["paper (%)"]) == list(fi.FEDINTR_T5["fmnist"]) and t5.attrs["seeds"] == [0, 1]


def _only(runs: dict, mus: dict) -> dict:
    """``runs`` keeping each regularized method at the μ of ``mus`` alone."""
    return {k: r for k, r in runs.items() if k.method == "FedAvg" or k.mu == mus.get(k.method)}


def test_table1_reads_each_dataset_as_section_iv_b_does_at_the_margin_policy():
    """Fashion-MNIST: FedIntR and MOON tie for the best (a "within" claim at the policy's 1 point), FedIntR beats
    the others (direction against 0); each row carries the paper's effect and names the μ it was run at."""
    runs = _only(table1_runs(), {"FedProx": 0.001, "FedIntR": 10})
    for s in (0, 1, 2):
        runs[R("MOON", s, mu=1)] = _rec(86.2 + s, s)
    t1 = fi.Table1.from_records(runs, 3, "fmnist", {"FedCKA": "over the budget"})
    assert t1.mu_phrase == "the paper's μ"  # one μ per method, Table I's for the dataset: no search ran
    by = {v.claim: v for v in fc.claims(t1, {"table1": runs}, "quick")}
    tie = by["FedIntR ties with MOON for the best accuracy on Fashion-MNIST, each at the paper's μ"]
    assert tie.kind == "within" and tie.margin == 1.0 and "margin policy" in tie.region and tie.paper_d == 0.0
    assert tie.verdict == "reproduced"
    prox = by["FedIntR beats FedProx on Fashion-MNIST, each at the paper's μ"]
    assert prox.kind == "greater" and prox.margin == 0.0 and prox.paper_d == pytest.approx(89.15 - 88.95)
    assert {v.margin for v in by.values() if v.kind} <= {0.0, 1.0}  # no case-by-case margin anywhere
    assert fi.Table1.from_records(table1_runs(), 3, "fmnist").mu_phrase == "its best μ"  # FedIntR at μ = 1, 10
    other = _only(table1_runs(), {"FedProx": 0.001, "FedIntR": 1})
    assert fi.Table1.from_records(other, 3, "fmnist").mu_phrase == "the μ it was run at"


def test_a_case_by_case_margin_is_an_error():
    from fedlib.companion.verdicts import decide

    with pytest.raises(ValueError, match="margin policy"):
        decide("FedIntR performs like MOON", "FedIntR Table I", [1.0, 2.0, 3.0], [1.0, 2.0, 3.0], kind="within",
               margin=0.5)


def test_sentences_on_datasets_a_render_does_not_run_are_rows_of_their_own_not_testable():
    t1 = fi.Table1.from_records(table1_runs(), 3, "fmnist", LEFT_OUT)
    by = {v.claim: v for v in fc.claims(t1, {"table1": table1_runs()}, "quick")}
    sup = by["FedIntR beats every baseline on SVHN and CIFAR-10"]
    assert sup.verdict == "not testable at this scale" and "here Fashion-MNIST" in sup.why
    assert "superior performance in the SVHN and CIFAR-10" in sup.source and "87.17" in sup.paper
    c100 = by["FedCKA beats FedIntR on CIFAR-100, but FedIntR's accuracy stays comparable"]
    assert c100.verdict == "not testable at this scale" and "dataset='cifar100'" in c100.why
    for claim in ("FedAvg beats every other method run at β = 5 on CIFAR-100",
                  "FedProx's accuracy is comparable to FedIntR's at β = 5"):
        assert by[claim].verdict == "not testable at this scale"
    on10 = {v.claim: v for v in fc.claims(fi.Table1.from_records(table1_runs(), 3, "cifar10", LEFT_OUT),
                                          {"table1": table1_runs()}, "quick")}
    assert "FedIntR beats every baseline on SVHN" in on10  # the other dataset of the sentence only
    assert on10["FedIntR beats FedProx on CIFAR-10, each at its best μ"].kind == "greater"


def test_table2_is_decided_where_several_mu_run_and_not_testable_with_one():
    t1 = fi.Table1.from_records(table1_runs(), 3, "fmnist", LEFT_OUT)
    by = {v.claim: v for v in fc.claims(t1, {"table1": table1_runs()}, "quick")}
    v = by["FedIntR is most accurate at μ = 10 of Table II's μ on Fashion-MNIST"]
    assert v.verdict == "reproduced" and set(v.means) == {"μ=10", "μ=1"}
    assert v.paper_d == pytest.approx(89.15 - 89.07)
    one = _only(table1_runs(), {"FedProx": 0.001, "FedIntR": 10})
    by = {v.claim: v for v in fc.claims(fi.Table1.from_records(one, 3, "fmnist", LEFT_OUT), {"table1": one}, "quick")}
    v = by["FedIntR is most accurate at μ = 10 of Table II's μ on Fashion-MNIST"]
    assert v.verdict == "not testable at this scale" and "μ = 10 only" in v.why


def test_section_iv_c_decides_superiority_at_each_beta_but_table_is_and_fedprox_where_it_runs():
    t1 = fi.Table1.from_records(table1_runs(), 3, "fmnist", LEFT_OUT)
    low = {R("FedAvg", s, beta=b): _rec(70.0 + s, s) for s in (0, 1, 2) for b in (5.0, 0.1)}
    low |= {R("FedIntR", s, beta=b, mu=10): _rec(72.0 + s + 0.1 * s * s, s) for s in (0, 1, 2) for b in (5.0, 0.1)}
    records = {"table1": table1_runs(), "table3": low}
    t3 = fi.Table3.from_records(low, t1, 0.5)
    by = {v.claim: v for v in fc.claims(t1, records, "quick", t3)}
    sup = [v for c, v in by.items() if c.startswith("FedIntR beats every other method run at β")
           and "CIFAR-100" not in c]
    assert len(sup) == 2 and {v.verdict for v in sup} == {"reproduced"}  # β = 0.5 is Table I's row, not repeated
    five = by["FedIntR beats every other method run at β = 5 (FedAvg the best of the others)"]
    assert five.paper_d == pytest.approx(70.66 - 68.69) and "runs FedAvg, FedIntR only" in five.why
    prox = by["FedProx's accuracy is comparable to FedIntR's at β = 5"]
    assert prox.verdict == "not testable at this scale" and "FedProx is not run" in prox.why
    low |= {R("FedProx", s, beta=b, mu=0.01): _rec(71.9 + s + (0 if b == 5 else -3), s)
            for s in (0, 1, 2) for b in (5.0, 0.1)}
    t3 = fi.Table3.from_records(low, t1, 0.5)
    by = {v.claim: v for v in fc.claims(t1, {**records, "table3": low}, "quick", t3)}
    assert by["FedProx's accuracy is comparable to FedIntR's at β = 5"].paper_d == pytest.approx(70.03 - 70.66)
    falls = by["FedProx falls further behind FedIntR at β = 0.1 than at β = 5"]
    assert falls.verdict == "reproduced" and falls.paper_d == pytest.approx((56.55 - 58.32) - (70.03 - 70.66))


def test_rows_say_what_the_scale_changes_from_the_papers_setup():
    from fedlib.companion.papers import preset
    from fedlib.companion.verdicts import not_testable

    v = not_testable("c", "FedIntR Table I; §IV-B", "why")
    quick = fc.labelled([v], preset("fedintr", "quick", dataset="fmnist"))[0].data
    assert "12,000 of the 60,000 training images" in quick and "40 rounds × 6 local epochs" in quick
    assert "batch 64 (the paper: 512)" in quick and quick.startswith("the paper's data and model")
    assert fc.labelled([v], preset("fedintr", "paper", dataset="fmnist"))[0].data == ""  # the paper's setup
    t3 = fc.labelled([replace(v, source="FedIntR Table III")], preset("fedintr", "quick"),
                     {"Table III": "β = 0.1: 120"})
    assert t3[0].data.startswith("Fashion-MNIST, FedIntR CNN; the paper: CIFAR-10") and "β = 0.1: 120" in t3[0].data


def test_titles_name_the_mu_as_run_not_a_best_mu_no_search_found():
    one = _only(table1_runs(), {"FedProx": 0.001, "FedIntR": 10})
    t1 = fi.Table1.from_records(one, 3, "fmnist", LEFT_OUT)
    assert "Each method at the paper's μ" in ff.describe_mu(t1) and "our μ" in t1.versus_paper().columns
    curves = t1.curves(one)
    assert ff.curves_phrase(curves, "fmnist") == "the paper's μ"
    assert "at the paper's μ, per round" in ff.curves_figure(curves, "fmnist", "quick")._suptitle.get_text()
    assert ff.curves_phrase(curves, "cifar10") == "the μ in its label"  # CIFAR-10's Table I μ are others
