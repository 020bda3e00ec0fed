"""Notebook 06's verdicts: Fig. 5 and Table IV claims decided over seeds, pending, chance and left-out artifacts."""

from types import SimpleNamespace

import matplotlib
import numpy as np
import pandas as pd
import pytest

from fedlib.companion.papers.fedintr.tables import FEDINTR_T1
from fedlib.companion.grid import fmt_interval
from fedlib.companion.papers.fedintr.scaling import (describe_fig4, describe_fig5, fig4_figure, fig5_figure, mean_table,
                                              values_frame)
from fedlib.companion.papers.fedintr.scaling_claims import BEST_E_FINDING, epochs_verdicts, table4_verdicts
from fedlib.companion.plots import OFF_NOTE, t_interval
from fedlib.companion.common import FedIntRRunId as R
from fedlib.companion.results import Pending

ACC = {"acc": lambda r: r.acc}


def _rec(acc: float) -> SimpleNamespace:
    """A stand-in record of a Fashion-MNIST run with its accuracy."""
    return SimpleNamespace(acc=acc, cfg=SimpleNamespace(dataset="fmnist"))


def fig5(values: dict[tuple[int, str], tuple[float, ...]]) -> dict:
    """Fig. 5 runs identified as the plan identifies them, each a stand-in record with its accuracy."""
    mu = {"FedAvg": None, "FedIntR": 10}
    return {R(m, s, E=e, mu=mu[m]): _rec(v) for (e, m), vs in values.items() for s, v in enumerate(vs)}


def by_claim(verdicts):
    return {v.claim: v for v in verdicts}


QUICK = {(1, "FedAvg"): (60.0, 62.0, 61.0), (1, "FedIntR"): (55.0, 58.0, 56.0),
         (6, "FedAvg"): (80.0, 81.0, 80.5), (6, "FedIntR"): (80.9, 81.6, 81.2)}


def test_fig5_at_quick_decides_what_e_1_and_the_default_can_show_and_says_why_not_the_rest():
    v = by_claim(epochs_verdicts(values_frame(fig5(QUICK), ACC), default_e=6, budget_note="no E > 6 fits"))
    assert v["E = 1 gives FedAvg a lower accuracy than E = 6"].verdict == "reproduced"
    e1 = v["E = 1 gives FedIntR (μ=10) a lower accuracy than E = 6"]
    assert e1.n == {"E=1": 3, "E=6": 3} and e1.method.startswith("paired t") and e1.estimate == pytest.approx(-24.9)
    for m in ("FedAvg", "FedIntR (μ=10)"):
        assert not any(c.startswith(f"{m} is more accurate at the default E") for c in v)  # no E between 1 and 6
        assert v[f"E ≥ 20 lowers {m}'s accuracy below E = 6"].why == "no E > 6 fits"
    assert v["FedIntR (μ=10) beats FedAvg at E = 1"].verdict == "contradicted"  # 56.3 vs 61.0, every seed
    at6 = v["FedIntR (μ=10) beats FedAvg at E = 6"]
    assert at6.control and "Table I" in at6.why  # the default E's runs are Table I's: the claim is notebook 05's
    assert at6.verdict == "reproduced" and at6.means == pytest.approx({"FedIntR (μ=10)": 81.2333, "FedAvg": 80.5},
                                                                        abs=1e-3)


def test_fig5_at_paper_scale_tests_the_best_e_and_the_large_e_against_the_strongest_other_setting():
    runs = {**QUICK, (3, "FedAvg"): (79.0, 80.0, 79.4), (3, "FedIntR"): (79.0, 80.1, 79.5),
            (20, "FedAvg"): (78.0, 79.0, 78.4), (20, "FedIntR"): (79.0, 79.9, 79.5),
            (40, "FedAvg"): (75.0, 76.0, 75.5), (40, "FedIntR"): (76.0, 77.0, 76.5)}
    v = by_claim(epochs_verdicts(values_frame(fig5(runs), ACC), default_e=6))
    best = v["FedAvg is more accurate at the default E = 6 (the paper's 10) than at the E below it (E = 3, the best "
             "of them)"]
    assert best.verdict == "reproduced" and set(best.means) == {"E=6", "E=3"}  # E = 1 and E ≥ 20: rows of their own
    assert best.finding == BEST_E_FINDING
    assert v["E ≥ 20 lowers FedIntR (μ=10)'s accuracy below E = 6"].verdict == "reproduced"
    assert "FedIntR (μ=10) beats FedAvg at E = 40" in v


def test_fig5_with_only_some_large_e_run_decides_on_those_and_names_the_one_left_out():
    """Quick runs E = 20 but leaves out E = 40: the large-E claims are decided on E = 20, each saying so, and E = 6
    against E = 20 is one row, not two with the sign flipped ("best at E = 6" and "E ≥ 20 lowers")."""
    runs = {**QUICK, (20, "FedAvg"): (78.0, 79.0, 78.4), (20, "FedIntR"): (79.0, 79.9, 79.5)}
    vs = epochs_verdicts(values_frame(fig5(runs), ACC), default_e=6, budget_note="E = 40: over the budget")
    v = by_claim(vs)
    pairs = [(v_.claim, frozenset(v_.means)) for v_ in vs if frozenset(v_.means) == {"E=6", "E=20"}]
    assert len(pairs) == 2 and len({c for c, _ in pairs}) == 2  # one row per method
    for claim in ("E ≥ 20 lowers FedAvg's accuracy below E = 6", "E ≥ 20 lowers FedIntR (μ=10)'s accuracy below "
                  "E = 6"):
        assert v[claim].verdict == "reproduced" and "E=20" in v[claim].means
        assert v[claim].why == "of the E above 6, decided on E = 20 alone; not run at this scale: E = 40: over the " \
                               "budget"
    assert v["FedIntR (μ=10) beats FedAvg at E = 20"].why == ""  # a claim at one E is whole


def test_fig5_pending_and_chance_runs_are_no_verdict():
    runs = fig5(QUICK)
    runs[R("FedIntR", 1, E=1, mu=10)] = _rec(11.0)  # within 2 points of chance
    runs[R("FedAvg", 2, E=6)] = Pending("k", {})
    v = by_claim(epochs_verdicts(values_frame(runs, ACC), default_e=6))
    assert v["E = 1 gives FedIntR (μ=10) a lower accuracy than E = 6"].verdict == "not testable at this scale"
    assert v["E = 1 gives FedAvg a lower accuracy than E = 6"].verdict == "pending"
    assert v["FedIntR (μ=10) beats FedAvg at E = 6"].verdict == "pending"
    frame = values_frame(runs, ACC)
    frame.loc[frame["name"] == str(R("FedAvg", 0, E=1)), "off"] = "rises +1.20 points"
    v = by_claim(epochs_verdicts(frame, default_e=6))  # a finished run off its plateau: whatever FedAvg seed 2 reads
    assert v["E = 1 gives FedAvg a lower accuracy than E = 6"].verdict == "not testable at this scale"
    assert "rises +1.20" in v["E = 1 gives FedAvg a lower accuracy than E = 6"].why


def test_table4_left_out_is_not_testable_and_keeps_the_papers_effects():
    vs = table4_verdicts(None, left_out="no plateau within the budget")
    assert len(vs) == 6 and {v.verdict for v in vs} == {"not testable at this scale"}
    last = [v for v in vs if "FedIntR" in v.claim]
    assert [v.paper for v in last] == ["+1.19 over the second best, FedProx (μ=0.01), at N = 50, T = 800",
                                       "+1.45 over the second best, MOON (μ=10), at N = 100, T = 1000"]
    assert all(v.why == "no plateau within the budget" for v in vs)


def test_table4_rows_carry_the_papers_effect_state_their_fixed_round_and_check_each_runs_plateau():
    acc = {("FedAvg", None): (50.0, 51.0, 49.0), ("FedProx", 0.01): (48.0, 49.5, 47.0),
           ("FedIntR", 10.0): (45.0, 47.0, 44.0), ("MOON", 1.0): (52.0, 53.0, 51.0)}
    runs = {R(method, s, N=50, mu=mu): _rec(v) for (method, mu), vs in acc.items() for s, v in enumerate(vs)}
    df = values_frame(runs, {"T=100": lambda r: r.acc, "T=200": lambda r: r.acc + 1, "T=800": lambda r: r.acc})
    early = by_claim(table4_verdicts(df))["FedAvg beats the majority of the other methods early in training (N = 50, "
                                          "T = 100)"]
    assert early.paper_d == pytest.approx(49.41 - 46.17) and early.size()  # the median of the other seven
    assert "read at T = 100" in early.why and "a fixed round" in early.why
    df.loc[df["name"] == str(R("MOON", 1, N=50, mu=1.0)), "off"] = "rises +1.50 points"
    for v in table4_verdicts(df):
        assert v.verdict == "not testable at this scale" and "rises +1.50" in v.why, v.claim


def test_table4_fedavg_against_the_median_of_the_others_per_seed():
    acc = {("FedAvg", None): (50.0, 51.0, 49.0), ("FedProx", 0.01): (48.0, 49.5, 47.0),
           ("FedIntR", 10.0): (45.0, 47.0, 44.0), ("MOON", 1.0): (52.0, 53.0, 51.0)}
    runs = {R(method, s, N=50, mu=mu): _rec(v) for (method, mu), vs in acc.items() for s, v in enumerate(vs)}
    df = values_frame(runs, {"T=100": lambda r: r.acc, "T=200": lambda r: r.acc + 1, "T=800": lambda r: r.acc})
    v = by_claim(table4_verdicts(df))
    early = v["FedAvg beats the majority of the other methods early in training (N = 50, T = 100)"]
    assert early.estimate == pytest.approx(11 / 6) and early.verdict == "reproduced"  # medians 48, 49.5, 47
    late = v["FedIntR (μ = 10) beats every other method after enough rounds (N = 50, T = 800)"]
    assert late.verdict == "contradicted" and set(late.means) == {"FedIntR (μ=10)", "MOON (μ=1)"}
    assert mean_table(df[df["what"] == "T=100"], "method", "what").loc["FedAvg", "T=100"] == "50.00 ± 1.00"


def test_paper_table4_has_every_printed_n_and_method():
    from fedlib.companion.papers.fedintr.scaling import FEDINTR_T4, FEDINTR_T4_AT, paper_table4
    tables = paper_table4()
    assert set(tables) == set(FEDINTR_T4)
    for n, t in tables.items():
        assert list(t.columns) == [f"T={T}" for T in FEDINTR_T4_AT[n]] and set(t.index) == set(FEDINTR_T4[n])


def _panel_text(ax) -> set[str]:
    return {c.get_text().get_text() for t in ax.tables for c in t.get_celld().values()}


def test_fig5_figure_draws_dots_with_95_t_bars_and_the_papers_table_i_in_a_panel():
    matplotlib.use("Agg")
    df = values_frame(fig5(QUICK), ACC)
    ax, panel = fig5_figure(df, "fmnist", "quick", last=5).axes
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["FedAvg (n=3)", "FedIntR (μ=10) (n=3)"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "6"]  # the E run, not the paper's 10
    assert all(c.lines[0].get_linestyle() == "None" for c in ax.containers)  # two E: dots, no line
    fedavg = next(c for c in ax.containers if c.get_label() == "FedAvg (n=3)")
    (_, lo), (_, hi) = fedavg.lines[2][0].get_segments()[0]
    assert (hi - lo) / 2 == pytest.approx(t_interval(QUICK[(1, "FedAvg")])[1])  # 95 % t, not the std
    assert not any(np.isclose(float(y), FEDINTR_T1["fmnist"]["FedIntR"][0]) for ln in ax.get_lines()
                   for y in np.atleast_1d(ln.get_ydata()))
    assert {"88.90", "89.15"} <= _panel_text(panel)
    assert "3 seeds (0-2); bars: 95 % t interval" in ax.get_title() and "Fashion-MNIST" in ax.get_title()
    runs = fig5(QUICK) | {R(m, s, E=1, mu=mu): Pending("k", {}) for m, mu in (("FedAvg", None), ("FedIntR", 10))
                          for s in (0, 1, 2)}
    assert "not run yet: E = 1" in fig5_figure(values_frame(runs, ACC), "fmnist", "quick", 5).axes[0].get_title()


def test_describe_fig5_states_each_e_and_the_paired_differences_or_pending():
    df = values_frame(fig5(QUICK), ACC)
    text = describe_fig5(df, 6)
    assert f"FedAvg {fmt_interval(QUICK[(1, 'FedAvg')])}" in text and "E = 6:" in text
    d = [a - b for a, b in zip(QUICK[(1, "FedIntR")], QUICK[(6, "FedIntR")])]
    assert f"FedIntR (μ=10): E = 1 − E = 6 {fmt_interval(d, '+')}" in text
    assert "FedIntR (μ=10) − FedAvg at E = 6" in text
    pend = {k: Pending("k", {}) if k.E == 1 else v for k, v in fig5(QUICK).items()}
    assert "Pending: E = 1." in describe_fig5(values_frame(pend, ACC), 6)
    assert "pending" in describe_fig5(values_frame({k: Pending("k", {}) for k in fig5(QUICK)}, ACC), 6)


def test_fig5_rings_and_names_the_runs_off_their_plateau():
    matplotlib.use("Agg")
    df = values_frame(fig5(QUICK), ACC)
    df.loc[(df["E"] == 1) & (df["method"] == "FedAvg") & (df["seed"] > 0), "off"] = "test_acc rose 2.0 points"
    ax = fig5_figure(df, "fmnist", "quick", last=5).axes[0]
    assert [t.get_text() for t in ax.texts] == ["2 of 3 still rising"]
    ring = [ln for ln in ax.get_lines() if ln.get_markersize() == 14]
    assert len(ring) == 1 and ring[0].get_ydata()[0] == pytest.approx(np.mean(QUICK[(1, "FedAvg")]))
    assert ax.get_title().endswith(OFF_NOTE)
    assert "Off their plateau" in describe_fig5(df, 6) and "FedAvg at E = 1, seeds 1, 2" in describe_fig5(df, 6)
    clean = values_frame(fig5(QUICK), ACC)
    assert not fig5_figure(clean, "fmnist", "quick", 5).axes[0].texts and "Off their" not in describe_fig5(clean, 6)


def _curve(v: float) -> pd.Series:
    return pd.Series([v / 3, v / 2, v], index=[1, 2, 3])


def test_fig4_figure_draws_mean_curves_and_the_papers_table_iv_in_a_panel():
    matplotlib.use("Agg")
    cv = {"FedAvg": {0: _curve(30.0), 1: _curve(32.0)}, "FedIntR (μ=10)": {0: _curve(28.0), 1: _curve(31.0)}}
    ax, panel = fig4_figure(cv, 100, "fmnist", "smoke").axes
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert lines["FedAvg (n=2)"].get_ydata()[-1] == pytest.approx(31.0)
    assert lines["FedIntR (μ=10) (n=2)"].get_markerfacecolor() == "none"  # μ = 10: hollow, dashed
    assert lines["FedIntR (μ=10) (n=2)"].get_linestyle() != lines["FedAvg (n=2)"].get_linestyle()
    assert "2 seeds (0,1); band: 95 % t interval" in ax.get_title() and "66.57" in _panel_text(panel)
    assert not ax.texts and len(ax.get_lines()) == 2  # no paper stars on our axes


def test_describe_fig4_names_the_leader_early_and_late_or_why_not():
    cv = {"FedAvg": {0: pd.Series([40.0, 50.0, 60.0, 61.0, 62.0, 63.0, 64.0, 65.0, 66.0, 67.0], index=range(1, 11))},
          "FedIntR (μ=10)": {0: pd.Series([30.0, 45.0, 58.0, 62.0, 64.0, 66.0, 67.0, 68.0, 69.0, 70.0],
                                          index=range(1, 11))}}
    text = describe_fig4(cv, 100)
    assert "round 2: FedAvg leads with 50.00 % (FedIntR (μ=10) 45.00 %)" in text
    assert "round 10: FedIntR (μ=10) leads with 70.00 % (FedAvg 67.00 %)" in text
    assert describe_fig4(None, None, "tens of worker-hours") == "Fig. 4 is not run at this scale: tens of worker-hours."
    assert "pending" in describe_fig4({}, 100)


def _climbing(cfg, rounds: int, top: float, rise: int, s: int):
    """A Fashion-MNIST record that climbs linearly from 30 % to ``top`` over ``rise`` rounds, then stays there."""
    from fedlib.companion.results import Record

    accs = [min(top, 0.30 + (top - 0.30) * r / rise) + 0.001 * s for r in range(1, rounds + 1)]
    hist = [{"round": r, "test_acc": a, "train_time_s": 1.0} for r, a in enumerate(accs, 1)]
    c = cfg.replace(rounds=rounds, seed=s)
    return Record(key=c.key(), config=c.to_dict(), history=hist, provenance={}, partition_hash="", final_params_hash="")


def test_where_e_1_runs_longer_its_poor_accuracy_is_decided_at_its_end_and_in_the_same_rounds_as_the_paper():
    """E = 1 run to its plateau (450 rounds) ends above E = 6's 40 rounds, but at round 40 it is far below: the two
    readings of 'E = 1 results in poor accuracy' give opposite verdicts, each named with its rounds."""
    from fedlib.companion.papers.fedintr.scaling import fig5_equal, fig5_frame
    from fedlib.config import Config

    base = Config(dataset="fmnist")
    runs = {}
    for s in range(5):
        for m, mu in (("FedAvg", None), ("FedIntR", 10)):
            runs[R(m, s, E=1, mu=mu)] = _climbing(base, 450, 0.87, 200, s)
            runs[R(m, s, E=6, mu=mu)] = _climbing(base, 40, 0.86, 10, s)
    rounds = {1: 450, 6: 40}
    df, eq = fig5_frame(runs, 3), fig5_equal(runs, 3, rounds, 6)
    assert set(eq["E"]) == {1} and eq["acc"].to_numpy() == pytest.approx(100 * (0.30 + 0.57 * 39 / 200) + 0.1 *
                                                                           eq["seed"].to_numpy())
    assert fig5_equal(runs, 3, {1: 40, 6: 40}, 6) is None
    v = by_claim(epochs_verdicts(df, 6, equal=eq, rounds=rounds))
    end = v["E = 1 gives FedAvg a lower accuracy than E = 6, each run to its plateau (450 and 40 rounds)"]
    same = v["E = 1 gives FedAvg a lower accuracy than E = 6 in the same 40 rounds (the paper's setup: the same "
             "rounds for every E)"]
    assert end.verdict == "contradicted" and same.verdict == "reproduced"
    assert same.means == pytest.approx({"E=1 at round 40": 41.3150, "E=6": 86.2}, abs=1e-3)
    assert "E = 1 gives FedAvg a lower accuracy than E = 6" not in v  # one reading per row, each named
    assert "E = 1 gives FedAvg a lower accuracy than E = 6" in by_claim(epochs_verdicts(df, 6))  # paper: one reading
    text = describe_fig5(df, 6, eq, 40)
    assert text.startswith("Median accuracy (%) at 40 rounds for every E") and "E = 1: FedAvg 41.31" in text
    assert "FedAvg at E = 1, 450 rounds:" in text and "to their plateau (hollow" in text
    fig = fig5_figure(df, "fmnist", "quick", 3, eq, 40)
    ax = fig.axes[0]
    assert "solid: every E at 40 rounds" in ax.get_title() and "hollow: the same E = 1 runs" in ax.get_title()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "FedAvg, E = 1 at 450 rounds (n=5)" in legend
    solid = {s["label"]: s for s in ax._fedlib_series if "450" not in s["label"]}
    assert all(s["rounds"] == [40] for s in solid.values())  # the solid series: every E at the same rounds
    e1 = [c for c in ax.containers if c.get_label() == "FedAvg (n=5)"][0].lines[0].get_ydata()[0]
    assert e1 == pytest.approx(41.3150, abs=1e-3)  # E = 1's solid point: its runs at round 40
    fig.canvas.draw()
    from fedlib.companion.figcheck import figure_facts, figure_problems
    assert not [p for p in figure_problems(figure_facts(fig)) if "rounds" in p]
