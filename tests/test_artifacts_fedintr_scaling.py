"""Notebook 06's verdicts: Fig. 5 and Table IV claims decided over seeds, pending, chance and left-out artifacts."""

from types import SimpleNamespace

import pytest

from fedlib.artifacts.fedintr_scaling import mean_table, runs_frame, fig5_verdicts, table4_verdicts
from fedlib.plans.fedintr import run_name
from fedlib.results import Pending

ACC = {"acc": lambda r: r.acc}


def fig5(values: dict[tuple[int, str], tuple[float, ...]]) -> dict:
    """Fig. 5 runs named as the plan names them, each a stand-in record with its accuracy."""
    mu = {"FedAvg": None, "FedIntR": 10}
    return {f"E={e} | {run_name(m, mu[m], s)}": SimpleNamespace(acc=v) for (e, m), vs in values.items()
            for s, v in enumerate(vs)}


def by_claim(verdicts):
    return {v.claim: v for v in verdicts}


QUICK = {(1, "FedAvg"): (60.0, 62.0, 61.0), (1, "FedIntR"): (55.0, 58.0, 56.0),
         (6, "FedAvg"): (80.0, 81.0, 80.5), (6, "FedIntR"): (80.9, 81.6, 81.2)}


def test_fig5_at_quick_decides_what_e_1_and_the_default_can_show_and_says_why_not_the_rest():
    v = by_claim(fig5_verdicts(runs_frame(fig5(QUICK), ACC), default_e=6, budget_note="no E > 6 fits"))
    assert v["E = 1 gives FedAvg a lower accuracy than E = 6"].verdict == "reproduced"
    e1 = v["E = 1 gives FedIntR (μ=10) a lower accuracy than E = 6"]
    assert e1.n == {"E=1": 3, "E=6": 3} and e1.method.startswith("paired t") and e1.estimate == pytest.approx(-24.9)
    for m in ("FedAvg", "FedIntR (μ=10)"):
        assert v[f"{m} is best at the default E = 6 (the paper's 10)"].why == "no E > 6 fits"
        assert v[f"E ≥ 20 lowers {m}'s accuracy below E = 6"].verdict == "not testable at this scale"
    assert v["FedIntR (μ=10) beats FedAvg at E = 1"].verdict == "contradicted"  # 56.3 vs 61.0, every seed
    at6 = v["FedIntR (μ=10) beats FedAvg at E = 6"]
    assert at6.verdict == "reproduced" and at6.means == pytest.approx({"FedIntR (μ=10)": 81.2333, "FedAvg": 80.5},
                                                                        abs=1e-3)


def test_fig5_at_paper_scale_tests_the_best_e_and_the_large_e_against_the_strongest_other_setting():
    runs = {**QUICK, (20, "FedAvg"): (78.0, 79.0, 78.4), (20, "FedIntR"): (79.0, 79.9, 79.5),
            (40, "FedAvg"): (75.0, 76.0, 75.5), (40, "FedIntR"): (76.0, 77.0, 76.5)}
    v = by_claim(fig5_verdicts(runs_frame(fig5(runs), ACC), default_e=6))
    best = v["FedAvg is best at the default E = 6 (the paper's 10)"]
    assert best.verdict == "reproduced" and set(best.means) == {"E=6", "E=20"}  # vs the best other E
    assert v["E ≥ 20 lowers FedIntR (μ=10)'s accuracy below E = 6"].verdict == "reproduced"
    assert "FedIntR (μ=10) beats FedAvg at E = 40" in v


def test_fig5_pending_and_chance_runs_are_no_verdict():
    runs = fig5(QUICK)
    runs["E=1 | FedIntR | μ=10 | seed=1"] = SimpleNamespace(acc=11.0)  # within 2 points of chance
    runs["E=6 | FedAvg | seed=2"] = Pending("k", {})
    v = by_claim(fig5_verdicts(runs_frame(runs, ACC), default_e=6))
    assert v["E = 1 gives FedIntR (μ=10) a lower accuracy than E = 6"].verdict == "not testable at this scale"
    assert v["E = 1 gives FedAvg a lower accuracy than E = 6"].verdict == "pending"
    assert v["FedIntR (μ=10) beats FedAvg at E = 6"].verdict == "pending"


def test_table4_left_out_is_not_testable_and_keeps_the_papers_effects():
    vs = table4_verdicts(None, left_out="no plateau within the budget")
    assert len(vs) == 6 and {v.verdict for v in vs} == {"not testable at this scale"}
    last = [v for v in vs if "FedIntR" in v.claim]
    assert [v.paper for v in last] == ["+1.19 over the second best, FedProx (μ=0.01), at N = 50, T = 800",
                                       "+1.45 over the second best, MOON (μ=10), at N = 100, T = 1000"]
    assert all(v.why == "no plateau within the budget" for v in vs)


def test_table4_fedavg_against_the_median_of_the_others_per_seed():
    acc = {"FedAvg": (50.0, 51.0, 49.0), "FedProx (μ=0.01)": (48.0, 49.5, 47.0), "FedIntR (μ=10)": (45.0, 47.0, 44.0),
           "MOON (μ=1)": (52.0, 53.0, 51.0)}
    runs = {}
    for m, vs in acc.items():
        method, _, mu = m.partition(" (μ=")
        for s, v in enumerate(vs):
            runs[f"N=50 | {run_name(method, float(mu[:-1]) if mu else None, s)}"] = SimpleNamespace(acc=v)
    df = runs_frame(runs, {"T=100": lambda r: r.acc, "T=200": lambda r: r.acc + 1, "T=800": lambda r: r.acc})
    v = by_claim(table4_verdicts(df))
    early = v["FedAvg beats the majority of the other methods early in training (N = 50, T = 100)"]
    assert early.estimate == pytest.approx(11 / 6) and early.verdict == "reproduced"  # medians 48, 49.5, 47
    late = v["FedIntR (μ = 10) beats every other method after enough rounds (N = 50, T = 800)"]
    assert late.verdict == "contradicted" and set(late.means) == {"FedIntR (μ=10)", "MOON (μ=1)"}
    assert mean_table(df[df["what"] == "T=100"], "method", "what").loc["FedAvg", "T=100"] == "50.00 ± 1.00"


def test_paper_table4_has_every_printed_n_and_method():
    from fedlib.artifacts.fedintr_scaling import PAPER_T4, PAPER_T4_AT, paper_table4
    tables = paper_table4()
    assert set(tables) == set(PAPER_T4)
    for n, t in tables.items():
        assert list(t.columns) == [f"T={T}" for T in PAPER_T4_AT[n]] and set(t.index) == set(PAPER_T4[n])


def test_fig5_figure_draws_a_series_per_method_and_the_papers_table_i_stars():
    import matplotlib
    matplotlib.use("Agg")
    from fedlib.artifacts.fedintr_scaling import fig5_figure
    fig = fig5_figure(runs_frame(fig5(QUICK), ACC), "fmnist", "quick", last=5)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "FedAvg" in labels and "FedIntR (μ=10)" in labels
    assert any(lab.startswith("paper Table I (Fashion-MNIST") for lab in labels)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "6", "10"]  # the paper's default E = 10 drawn
    assert "Fashion-MNIST" in ax.get_title()


def test_fig4_figure_with_rounds_short_of_the_papers_t_says_so_instead_of_drawing_stars():
    import matplotlib
    import pandas as pd
    matplotlib.use("Agg")
    from fedlib.artifacts.fedintr_scaling import fig4_figure
    cv = pd.DataFrame({"FedAvg": [10.0, 20.0, 30.0], "FedProx": [10.0, 21.0, 31.0]}, index=[1, 2, 3])
    ax = fig4_figure(cv, 100, "fmnist", "smoke").axes[0]
    assert len(ax.get_lines()) == 2 and any("beyond these 3 rounds" in t.get_text() for t in ax.texts)
