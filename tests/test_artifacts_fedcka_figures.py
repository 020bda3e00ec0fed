"""FedCKA's accuracy and ablation artifacts (notebooks 03, 04): tidy tables with the papers' numbers beside ours,
figures that show every series and mark what a scale left out."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd

from fedlib.artifacts.fedcka_ablations import PAPER_M, layer_variance, m_layers, table3, table4
from fedlib.artifacts.fedcka_accuracy import PAPER_T2, Table2, epochs_artifact, rounds_figure, seed_curves
from fedlib.config import Config
from fedlib.results import Pending, Record
from fedlib.similarity import LayerSimilarity


def _rec(cfg: Config, accs) -> Record:
    hist = [{"round": i + 1, "test_acc": a, "train_time_s": 1.0} for i, a in enumerate(accs)]
    return Record(key=cfg.key(), config=cfg.to_dict(), history=hist, provenance={}, partition_hash="",
                  final_params_hash="")


def _t2_records(pending_moon: bool = False):
    out = {}
    for s in (0, 1, 2):
        base = Config(partition_kw={"beta": 5.0}, seed=s)
        out[f"FedAvg | α=5 | seed={s}"] = _rec(base, [0.5, 0.80 + 0.01 * s])
        for mu, acc in ((3.0, 0.84), (5.0, 0.82)):
            out[f"FedCKA (μ={mu:g}) | α=5 | seed={s}"] = _rec(base.replace(strategy="fedcka", strategy_kw={"mu": mu}),
                                                             [0.4, acc + 0.01 * s])
        moon = base.replace(strategy="moon", strategy_kw={"mu": 10.0})
        out[f"MOON (μ=10) | α=5 | seed={s}"] = Pending(moon.key(), moon.to_dict()) if pending_moon else \
            _rec(moon, [0.3, 0.81])
    return out


def test_table2_reports_the_best_mu_beside_both_versions_of_the_paper():
    t2 = Table2.from_records(_t2_records())
    table = t2.table()
    assert list(table.columns) == ["α = 5", "best μ (α order)"]
    assert table.loc["FedCKA", "best μ (α order)"] == "3" and table.loc["FedCKA", "α = 5"] == "85.00 ± 1.00"
    assert table.loc["MOON", "α = 5"] == "81.00 ± 0.00"
    vs = t2.versus_paper()
    assert set(vs) == {"arXiv", "Appl. Sci."}
    assert vs["arXiv"].loc["FedCKA | α=5", "paper (%)"] == PAPER_T2[5.0]["FedCKA"]
    assert vs["arXiv"].loc["FedCKA | α=5", "diff"] == round(85.0 - PAPER_T2[5.0]["FedCKA"], 2)
    assert vs["Appl. Sci."].loc["FedAvg | α=1", "ours (%)"] == "not run at this scale"
    assert {"FedCKA (μ=3)", "FedCKA (μ=5)"} <= set(t2.full().index)


def test_table2_figure_starts_at_zero_draws_the_paper_and_no_empty_error_bars():
    t2 = Table2.from_records(_t2_records(pending_moon=True))
    assert t2.table().loc["MOON", "α = 5"] == "pending"
    ax = t2.figure("fmnist").axes[0]
    assert ax.get_ylim()[0] == 0
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert len(labels) == len(PAPER_T2)  # every α of both versions, run or not
    assert sum("not run" in t.get_text() for t in ax.texts) == len(PAPER_T2) - 1
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("paper (CIFAR-10" in t for t in legend) and {"FedAvg", "FedCKA", "MOON"} <= set(legend)
    one_seed = Table2.from_records({k: v for k, v in _t2_records().items() if k.endswith("seed=0")})
    assert not one_seed.figure("fmnist").axes[0].collections  # one seed: no error bars at all


def test_rounds_figure_gives_every_method_its_own_line_style():
    t2 = Table2.from_records(_t2_records())
    curves = t2.curves(_t2_records(), seed=0)
    assert set(curves) == {"FedAvg", "FedCKA (μ=3)", "MOON (μ=10)"}
    lines = rounds_figure(curves, "fmnist").axes[0].get_lines()
    assert len({(ln.get_color(), ln.get_linestyle(), ln.get_marker()) for ln in lines}) == 3
    pairs = seed_curves(_t2_records(pending_moon=True), {"FedAvg": "FedAvg", "MOON": "MOON (μ=10)"}, [0, 1])
    assert pairs == {}  # MOON pending: no seed has both


def test_epochs_artifact_is_empty_without_records():
    table, fig = epochs_artifact({}, "fmnist", 20)
    assert table.empty and fig is None


def test_m_layers_marks_the_m_not_run_and_shows_the_papers_printed_values():
    m_runs, bounds = {}, {}
    for s in (0, 1, 2):
        base = Config(partition_kw={"beta": 5.0}, seed=s)
        m_runs[f"M=2 | seed={s}"] = _rec(base.replace(strategy="fedcka", strategy_kw={"mu": 3.0, "M": 2}), [0.85])
        bounds[f"FedAvg | seed={s}"] = _rec(base, [0.86])
        c = base.replace(strategy="centralized")
        bounds[f"centralized | seed={s}"] = Pending(c.key(), c.to_dict())
    table, versus, fig = m_layers(m_runs, bounds, "fmnist", 3.0)
    assert table.loc["centralized", "final test accuracy (%)"] == "pending"
    assert versus.loc["FedCKA, M = 2", "paper (%)"] == PAPER_M["FedCKA, M = 2"]
    ours, paper = fig.axes
    assert [t.get_text() for t in ours.get_xticklabels()] == [str(m) for m in range(1, 8)]
    assert len(ours.patches) == 6  # M = 1, 3..7 shaded: not run
    assert any("67.86" in t.get_text() for t in paper.get_legend().get_texts())


def test_layer_variance_is_pending_until_a_similarity_exists_and_marks_the_papers_layer():
    cfg = Config()
    table, fig = layer_variance({"FedAvg": {0: Pending(cfg.key(), cfg.to_dict())}}, "fmnist")
    assert fig is None and table.iloc[0, 0] == "pending"
    rng = np.random.default_rng(0)
    between = rng.uniform(0.8, 1.0, (3, 4, 4))
    sim = LayerSimilarity(("conv1", "conv2", "fc1"), (0, 1, 2, 3), rng.uniform(size=(4, 3)), between)
    table, fig = layer_variance({"FedAvg": {0: sim}}, "fmnist")
    assert np.allclose(table["FedAvg: variance"].to_numpy(), sim.pair_var(), rtol=1e-5)
    assert any("third layer" in t.get_text() for t in fig.axes[0].get_legend().get_texts())


def test_tables_3_and_4_say_what_was_not_run_or_timed():
    t3 = table3({}, None, timing_planned=True)
    assert (t3["ours acc (%)"] == "not run at this scale").all() and (t3["ours × FedAvg (timed)"] == "pending").all()
    t4, fig = table4({"cnn": None}, {}, "cpu")
    assert fig is None
    assert set(t4.loc["simple CNN", "ours × FedAvg"]) == {"pending"}
    assert set(t4.loc["ResNet-50", "ours × FedAvg"]) == {"not timed at this scale"}
    assert isinstance(t4, pd.DataFrame) and t4.loc[("simple CNN", "FedAvg"), "paper × FedAvg"] == 1.0
