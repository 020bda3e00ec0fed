"""FedSHIBU's artifacts (notebook 08): Table 1 as tidy tables with the paper's values beside ours, Fig. 1, 3, 4 and 5
as figures of the shared kinds (mean over seeds with a 95 % t band or interval, the paper's numbers in a panel of
their own), the sentences that describe them, and pending or diverged runs marked, never dropped."""

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from fedlib.companion.papers.fedshibu import tables as art  # noqa: E402
from fedlib.companion.papers.fedshibu import claims as fc  # noqa: E402
from fedlib.companion.papers.fedshibu import figures as ff  # noqa: E402
from fedlib.companion.papers.fedshibu.tables import PAPER_ORDER, FEDSHIBU_T1  # noqa: E402
from fedlib.companion.papers.fedshibu.figures import plot_shards  # noqa: E402
from fedlib.companion.papers.fedshibu.findings import crsm_readings, describe_crsm_readings, finetune_table  # noqa: E402
from fedlib.config import Config  # noqa: E402
from fedlib.companion.common import FedSHIBURunId as R  # noqa: E402
from fedlib.companion.papers.fedshibu.plans import AVG, BABU, IDENTITY, LINEAR  # noqa: E402
from fedlib.companion.results import Pending, Record  # noqa: E402
from fedlib.companion.style import method_style  # noqa: E402

BASE = Config(dataset="synthetic", model="intr_cnn", partition="shards", partition_kw={"shards_per_user": 5},
              num_clients=10, n_train=400, n_test=200, personal_eval=True)


def _rec(cfg: Config, accs, crsm: bool = True) -> Record:
    cfg = cfg.replace(rounds=len(accs))
    eye = np.eye(cfg.num_clients)
    hist = [{"round": i + 1, "personal_acc_mean": a, "personal_noft_acc_mean": a - 0.1, "train_time_s": 1.0,
             **({"crsm": (0.8 * eye + 0.2 * (i + 1) / len(accs)).tolist(), "crsm_self": 0.5, "crsm_offdiag": 0.2}
                if crsm else {})} for i, a in enumerate(accs)]
    return Record(key=cfg.key(), config=cfg.to_dict(), history=hist, provenance={}, partition_hash="",
                  final_params_hash="")


def _runs(methods, *, pending: str = "", crsm: bool = True, seeds=(0, 1), flat: int = 0):
    """Two rounds per run, or ``flat`` rounds, flat after the first: on their plateau (the verdicts check it)."""
    out = {}
    for k, m in enumerate(methods):
        for s in seeds:
            c = BASE.replace(seed=s, lr=0.01 * (k + 1))  # one key per method and seed
            out[R(m, s, s=5)] = Pending(c.key(), c.to_dict()) if m == pending else \
                _rec(c, [0.4 + 0.1 * k] + [0.6 + 0.1 * k + 0.01 * s] * max(1, flat - 1), crsm)
    return out


def _frame(rows):
    """Rows of personal_frame: (method, s, seed, acc | "pending" | "diverged")."""
    return pd.DataFrame([{"name": f"{m} | s={s} | seed={n}", "method": m, "s": s, "seed": n,
                          "pending": a == "pending", "diverged": a == "diverged", "chance": 20.0,
                          "acc": a if isinstance(a, float) else np.nan, "acc (no ft)": np.nan,
                          "self-weight": 0.5 if m == LINEAR else np.nan, "off-diagonal": np.nan,
                          "kept ft_lr (%)": 20.0, "kept a lower lr (%)": 70.0 + n, "kept no fine-tuning (%)": 10.0 - n}
                         for m, s, n, a in rows])


def _paper_cells(fig) -> list[str]:
    return [c.get_text().get_text() for ax in fig.axes for t in ax.tables for c in t.get_celld().values()]


def test_fig4_sweeps_after_and_before_fine_tuning_and_the_paper_in_its_own_panel():
    rows = [(LINEAR, 2, n, 80.0 + n) for n in range(3)] + [(BABU, 2, n, 70.0 + n) for n in range(3)]
    rows += [(AVG, 2, 0, 60.0), (IDENTITY, 2, 0, "pending"), (LINEAR, 5, 0, "pending")]
    frame = _frame(rows)
    frame["acc (no ft)"] = np.where(frame["method"] == AVG, np.nan, frame["acc"] - 40)
    fig = plot_shards(frame, "fmnist", 10)
    after, before, paper = fig.axes
    assert "after fine-tuning" in after.get_title() and "before fine-tuning" in before.get_title()
    assert all("3 seeds (0-2)" in ax.get_title() and "95 % t interval" in ax.get_title() for ax in (after, before))
    assert "pending: identity CRSM" in after.get_title() and "does not fine-tune: FedAvg" in before.get_title()
    assert "not run yet: s = 5" in fig._suptitle.get_text() and "Fashion-MNIST" in fig._suptitle.get_text()
    labels = [t.get_text() for t in after.get_legend().get_texts()]
    assert labels == [f"{LINEAR} (n=3)", f"{BABU} (n=3)", f"{AVG} (n=1)"]
    assert not any("paper" in label for ax in (after, before) for label in ax.get_legend_handles_labels()[1])
    assert [t.get_text() for t in after.get_xticklabels()] == ["2"]  # only the levels run
    assert all(line.get_linestyle() == "None" for line in after.get_lines() if len(line.get_xdata()))  # 1 level: dots
    cells = _paper_cells(fig)
    assert f"{FEDSHIBU_T1['cifar10'][2][0]:.2f}" in cells and "CIFAR-10" in paper.get_title()


def test_table1_is_tidy_marks_pending_diverged_and_not_run():
    rows = [(m, s, n, 80.0 + n) for m in (LINEAR, BABU) for s in (2, 5) for n in (0, 1)]
    rows += [(IDENTITY, 2, 0, "pending"), (IDENTITY, 2, 1, 70.0), (AVG, 5, 0, "diverged"), (AVG, 5, 1, 60.0)]
    wide, detail = art.table1(_frame(rows))
    assert list(wide.index) == [2, 5] and list(wide.columns) == [LINEAR, BABU, IDENTITY, AVG]
    assert wide.loc[2, LINEAR] == "80.50 ± 0.71"
    assert wide.loc[2, IDENTITY] == "pending" and wide.loc[5, AVG] == "diverged"
    assert wide.loc[5, IDENTITY] == "not run" and wide.loc[2, AVG] == "not run"
    assert detail.index.names == ["s", "method"]
    assert {"n", "acc", "acc (no ft)", "self-weight", "off-diagonal"} <= set(detail.columns)
    assert detail.loc[(2, BABU), "self-weight"] == "–"  # FedBABU records no CRSM


def test_table1_versus_sets_every_paper_value_beside_ours():
    frame = _frame([(m, 2, n, 90.0 + n) for m in (LINEAR, BABU) for n in (0, 1)])
    vs = art.table1_versus(frame, art.paper_column("fmnist"))
    assert len(vs) == len(FEDSHIBU_T1["cifar10"]) * len(PAPER_ORDER)
    for s, vals in FEDSHIBU_T1["cifar10"].items():
        for i, m in enumerate(PAPER_ORDER):
            assert vs.loc[f"{m} | s={s}", "paper (%)"] == vals[i]
    assert vs.loc[f"{LINEAR} | s=2", "ours (%)"] == 90.5
    assert vs.loc[f"{LINEAR} | s=2", "diff"] == round(90.5 - FEDSHIBU_T1["cifar10"][2][0], 2)
    assert vs.loc["FedSHIBU (CKA RBF) | s=2", "ours (%)"] == "not run at this scale"
    assert art.paper_column("cifar100") == "cifar100"


def test_fig1_mean_curves_after_and_before_fine_tuning_in_the_methods_styles():
    runs = _runs(["all bodies aggregated (FedBABU)", "aggregated within each group"], crsm=False)
    table, fig = ff.fig1(runs, "fmnist")
    assert list(table.index) == list(ff.FIG1_LABELS) and set(table["n"]) == {2}
    after, before = fig.axes
    for ax in (after, before):
        assert ax.get_legend().get_title().get_text() == ""  # no paper legend over our curves
        lines = {ln.get_label().split(" (n=")[0]: ln for ln in ax.get_lines()}
        assert set(lines) == set(ff.FIG1_LABELS.values())
        for label, ln in lines.items():
            assert ln.get_color() == method_style(label)["color"]
        assert "2 seeds (0,1); band: 95 % t interval" in ax.get_title()
    assert np.allclose(after.get_lines()[0].get_ydata(), [40.0, 60.5])  # mean over seeds, in %
    assert np.allclose(before.get_lines()[0].get_ydata(), [30.0, 50.5])  # before fine-tuning
    title = fig._suptitle.get_text()
    assert "Fashion-MNIST" in title and "within groups 70.5 %, all bodies 60.5 %" in title
    table, fig = ff.fig1(_runs(["aggregated within each group"], pending="aggregated within each group"), "fmnist")
    assert fig is None and table.loc["aggregated within each group", "acc"] == "pending"


def test_describe_fig1_states_both_accuracies_and_the_paired_difference():
    runs = _runs(["all bodies aggregated (FedBABU)", "aggregated within each group"], crsm=False)
    text = ff.describe_fig1(art.personal_frame(runs))
    assert "70.5 ± 6.4 %" in text and "(60.5 % before)" in text and "60.5 ± 6.4 %" in text
    assert "+10.0 ± 0.0 points over 2 paired seed(s)" in text
    pend = ff.describe_fig1(art.personal_frame(_runs(["aggregated within each group"],
                                                     pending="aggregated within each group")))
    assert "pending" in pend and "0 of 2 runs stored" in pend


def test_fig5_curves_with_the_controls_and_the_paper_in_its_own_panel():
    runs = _runs(["FedAvg", "FedAvg+CRSM", "Local only"])
    table, fig = ff.fig5(runs, "fmnist")
    assert set(table.index) == {"FedAvg", "FedAvg+CRSM", "Local only"}
    ax, paper = fig.axes
    labels = [ln.get_label() for ln in ax.get_lines()]
    assert labels == ["Local only (n=2)", "FedAvg+CRSM (n=2)", "FedAvg (n=2)"]  # local-only under, FedAvg on top
    assert np.allclose(ax.get_lines()[2].get_ydata(), [40.0, 60.5])  # FedAvg: mean over seeds, in %
    assert "2 seeds (0,1); band: 95 % t interval" in ax.get_title()
    assert f"{FEDSHIBU_T1['cifar10'][5][3]:.2f}" in _paper_cells(fig) and not ax.tables
    assert "self-weight of 0.50" in fig._suptitle.get_text()
    assert ff.fig5(_runs(["FedAvg"], pending="FedAvg"), "fmnist")[1] is None


def _same_as_local(runs):
    """FedAvg+CRSM's records given local-only's accuracies: a near-identity CRSM's result."""
    out = dict(runs)
    for s in (0, 1):
        crsm, local = out[R("FedAvg+CRSM", s, s=5)], out[R("Local only", s, s=5)]
        hist = [{**e, "personal_acc_mean": f["personal_acc_mean"]} for e, f in zip(crsm.history, local.history)]
        out[R("FedAvg+CRSM", s, s=5)] = Record(key=crsm.key, config=crsm.config, history=hist,
                                                      provenance={}, partition_hash="", final_params_hash="")
    return out


def test_describe_fig5_says_which_control_fedavg_crsm_follows():
    runs = _same_as_local(_runs(["FedAvg", "FedAvg+CRSM", "Local only"]))
    text = ff.describe_fedavg_crsm(art.personal_frame(runs), runs)
    assert "FedAvg 60.5 ± 6.4 %" in text and "FedAvg+CRSM − FedAvg +20.0 ± 0.0 points over 2 paired seed(s)" in text
    assert "self-weight of 0.50" in text and "within 0.0 points of local-only training's at every round" in text
    assert "local-only training" in ff.fig5(runs, "fmnist")[1]._suptitle.get_text()
    pend = _runs(["FedAvg", "FedAvg+CRSM", "Local only"], pending="FedAvg")
    assert "pending" in ff.describe_fedavg_crsm(art.personal_frame(pend), pend)


def test_fig3_one_row_per_reading_with_the_label_overlap_and_the_crsm_table():
    runs = _runs(["own samples (§4.3)", "shared samples (Algorithm 2's D)"])
    table, fig = ff.fig3(runs, "fmnist")
    assert table.index.names == ["method", "round"] and len(table) == 4
    assert list(table.columns) == ["self-weight", "off-diagonal", "corr. with label overlap"]
    images = [ax for ax in fig.axes if ax.collections and ax.get_xlabel() == "client"]
    assert len(images) == 2 * 3  # per row: the two rounds stored (two panels left blank), the label overlap
    assert sum("label overlap (seed 0)" in ax.get_title() for ax in fig.axes) == 2
    crsm = [ax for ax in images if "round" in ax.get_title()]
    assert all(ax.collections[0].get_clim()[1] < 1.0 or ax.collections[0].get_clim()[0] > 0.0 for ax in crsm)
    assert not any("r =" in ax.get_title() for ax in fig.axes)  # r is in the text, with its interval
    assert "2 seed(s) (0, 1)" in fig._suptitle.get_text() and "diagonal blank" in fig._suptitle.get_text()
    table, fig = ff.fig3(_runs(["own samples (§4.3)"], pending="own samples (§4.3)"), "fmnist")
    assert table.empty and fig is None


def test_describe_fig3_gives_r_and_the_self_weight_per_reading():
    runs = _runs(["own samples (§4.3)"])
    text = ff.describe_fig3(runs)
    assert "own samples (§4.3): r = " in text and "at round 1" in text and "at round 2" in text
    assert "self-weight 0.50" in text and "2 stored run(s) of 2" in text
    assert "pending" in ff.describe_fig3(_runs(["own samples (§4.3)"], pending="own samples (§4.3)"))


def test_describe_fig4_per_level_with_the_paired_gap_and_what_is_pending():
    rows = [(LINEAR, 2, n, 80.0 + n) for n in range(2)] + [(BABU, 2, n, 70.0 + n) for n in range(2)]
    frame = _frame(rows + [(AVG, 2, 0, "pending"), (LINEAR, 5, 0, "pending")])
    frame["acc (no ft)"] = frame["acc"] - 40
    text = ff.describe_shards(frame)
    assert "at s = 2, FedSHIBU 80.5 % (40.5 % before fine-tuning), 2 seed(s)" in text
    assert "FedBABU 70.5 %" in text and "FedSHIBU − FedBABU +10.0 ± 0.0 points over 2 paired seed(s)" in text
    assert "pending: FedAvg" in text and "Not run yet: s = 5." in text and "4 of 6 runs stored" in text
    assert "pending" in ff.describe_shards(_frame([(LINEAR, 2, 0, "pending")]))
    frame = frame.assign(rounds=20, off=[None, "rises +3.00 points", None, None, None, None])
    text = ff.describe_shards(frame)  # each s says its rounds, and the runs still rising
    assert "at s = 2 (20 rounds), FedSHIBU" in text and "still rising at the end (ringed): FedSHIBU 1 of 2" in text


def test_verdicts_invariants_and_personal_table_with_pending_runs():
    records = {"table1": {}, "fig1": _runs(["all bodies aggregated (FedBABU)", "aggregated within each group"],
                                           pending="aggregated within each group", flat=10),
               "fig3": _runs(["own samples (§4.3)"], pending="own samples (§4.3)"),
               "fig5": _runs(["FedAvg", "FedAvg+CRSM", "Local only"], pending="FedAvg", flat=10)}
    frames = {a: art.personal_frame(rs) for a, rs in records.items() if rs}
    frames["table1"] = _frame([(m, 2, n, "pending") for m in (LINEAR, BABU, IDENTITY) for n in (0, 1)])
    vs = {v.claim: v.verdict for v in fc.shards_verdicts(frames, records, "quick")}
    stored = "FedAvg+CRSM ends more accurate than local-only training (the identity CRSM) at s = 5"
    assert vs.pop(stored) not in ("pending", "not testable at this scale")  # both sides stored: decided
    assert vs and set(vs.values()) == {"pending", "not testable at this scale"}
    assert [v for c, v in vs.items() if "within each label group" in c or "FedAvg (the" in c] == ["pending"] * 2
    ok = art.invariants(frames)
    assert all(ok.values()) and len(ok) == 2
    ident = _frame([(IDENTITY, 2, 0, 50.0)]).assign(**{"self-weight": 0.9, "off-diagonal": 0.1})
    assert not all(art.invariants({"table1": ident}).values())
    runs = art.personal_table(frames)
    assert runs.index.names == ["artifact", "name"] and len(runs) == sum(map(len, frames.values()))


@pytest.mark.parametrize("dataset,column", [("fmnist", "cifar10"), ("cifar10", "cifar10"), ("cifar100", "cifar100")])
def test_paper_column(dataset, column):
    assert art.paper_column(dataset) == column


def test_crsm_readings_show_shared_samples_finding_the_label_groups_and_own_samples_not():
    df, fig = crsm_readings()
    last = df[df["round"] == df["round"].max()].set_index(["setting", "reading"])
    groups = "label groups, FedSHIBU (shared)"
    assert last.loc[(groups, "shared samples"), "corr"] > 0.8 > abs(last.loc[(groups, "own samples"), "corr"])
    assert last.loc[(groups, "shared samples"), "self-weight"] < 0.12  # near-uniform weights (1/10)
    assert len(fig.axes) == 2 and all(ax.get_xlabel() == "local steps per client" for ax in fig.axes)
    assert [ax.get_title().split("\n")[0] for ax in fig.axes] == ["1 seed (0), no interval"] * 2
    assert "not drawn: IID" in fig.axes[0].get_title() and fig.axes[0].get_legend() and fig.axes[1].get_legend()
    assert f"shared r = {last.loc[(groups, 'shared samples'), 'corr']:+.2f}" in fig._suptitle.get_text()


def test_describe_crsm_readings_states_the_last_step():
    df, _ = crsm_readings()
    text = describe_crsm_readings(df)
    last = df[df["steps"] == df["steps"].max()].set_index(["setting", "reading"])
    assert f"{last.loc[('label groups, FedSHIBU (shared)', 'shared samples'), 'corr']:+.2f}" in text
    assert "at 1000 local steps" in text and "One seed, 10 clients" in text


def test_finetune_table_gives_both_accuracies_and_the_change():
    t = finetune_table(_frame([(LINEAR, 2, 0, 90.0), (LINEAR, 2, 1, 92.0)]).assign(**{"acc (no ft)": [85.0, 86.0]}))
    row = t.loc[(LINEAR, 2)]
    assert row["seeds"] == 2 and row["before fine-tuning (%)"] == 85.5 and row["change (points)"] == 5.5
    assert (row["kept ft_lr (%)"], row["kept a lower lr (%)"], row["kept no fine-tuning (%)"]) == (20.0, 70.5, 9.5)


def test_kept_lrs_reads_the_last_fine_tuning():
    """The share of clients at the papers' lr (ft_lr), at a lower lr of the ladder, un-fine-tuned."""
    cfg = Config(dataset="synthetic", model="intr_cnn", strategy="fedbabu", strategy_kw={"ft_lr": 1e-3})
    hist = [{"round": 1, "personal_ft_lr": [1e-3] * 4}, {"round": 2, "personal_ft_lr": [1e-3, 1e-4, 1e-5, 0.0]}]
    rec = Record(key=cfg.key(), config=cfg.to_dict(), history=hist, provenance={}, partition_hash="",
                 final_params_hash="")
    assert art.kept_lrs(rec) == {"kept ft_lr (%)": 25.0, "kept a lower lr (%)": 50.0, "kept no fine-tuning (%)": 25.0}
    lower = Record(key=cfg.key(), config=cfg.to_dict(), history=[{"round": 1, "personal_ft_lr": [1e-4, 1e-5]}],
                   provenance={}, partition_hash="", final_params_hash="")
    assert art.kept_lrs(lower)["kept ft_lr (%)"] == 0.0  # the top is the strategy's ft_lr, not the highest kept
    assert all(np.isnan(v) for v in art.kept_lrs(Pending(cfg.key(), cfg.to_dict())).values())
    avg = Config(dataset="synthetic", model="intr_cnn", strategy="fedavg")
    plain = Record(key=avg.key(), config=avg.to_dict(), history=[{"round": 1}], provenance={}, partition_hash="",
                   final_params_hash="")
    assert all(np.isnan(v) for v in art.kept_lrs(plain).values())  # it does not fine-tune
    assert finetune_table(_frame([(LINEAR, 2, 0, "pending")])).empty


def _curves(curves, seeds=(0, 1, 2)):
    """Runs of Fig. 5's methods at s = 5 with the given personalized-accuracy curves (fractions, one per round)."""
    out = {}
    for k, (m, accs) in enumerate(curves.items()):
        for s in seeds:
            c = BASE.replace(seed=s, lr=0.01 * (k + 1))
            out[R(m, s, s=5)] = _rec(c, [a + 0.001 * s for a in accs])
    return out


def _faster(runs):
    return next(v for v in fc.fedavg_crsm_verdicts(art.personal_frame(runs), runs) if "fewer rounds" in v.claim)


def test_converging_faster_is_not_testable_when_the_slower_run_is_there_at_its_first_evaluation():
    flat = [0.9] * 10
    v = _faster(_curves({"FedAvg+CRSM": flat, "FedAvg": flat, "Local only": flat}))
    assert v.verdict == "not testable at this scale" and "first evaluation" in v.why and "seed 0 (round 1)" in v.why
    v = _faster(_curves({"FedAvg+CRSM": [0.5] + flat[1:], "FedAvg": [0.3, 0.5, 0.7] + flat[3:], "Local only": flat}))
    assert v.verdict == "reproduced" and v.estimate == 2.0  # FedAvg reaches 81 % in round 3, FedAvg+CRSM in round 2


def test_quick_runs_take_their_shard_levels_rounds_and_the_other_scales_the_presets():
    """Every quick run of notebook 08 runs the rounds of its shard level (FEDSHIBU_ROUNDS) or of its
    figure (Figs. 1, 3 and 5), every method of a level alike; paper and smoke keep the preset's
    rounds."""
    from fedlib.companion.papers import plan
    from fedlib.companion.papers.fedshibu.preset import FEDSHIBU_ROUNDS
    FEDSHIBU_QUICK_ROUNDS = FEDSHIBU_ROUNDS["quick"]
    from fedlib.companion.papers import preset
    quick = plan("08_fedshibu_shards", "quick")
    for art, rs in quick.items():
        assert {c.rounds for rid, c in rs.items()} == ({FEDSHIBU_QUICK_ROUNDS[art]} if art in FEDSHIBU_QUICK_ROUNDS else
                                                      {FEDSHIBU_QUICK_ROUNDS[rid.s] for rid in rs}), art
    assert all(c.rounds == FEDSHIBU_QUICK_ROUNDS[rid.s] for rid, c in quick["table1"].items())
    assert {rid.s for rid in quick["table1"]} | {"fig1", "fig3", "fig5"} == set(FEDSHIBU_QUICK_ROUNDS)
    for scale in ("paper", "smoke"):
        rounds = {c.rounds for rs in plan("08_fedshibu_shards", scale).values() for c in rs.values()}
        assert rounds == {preset("fedshibu", scale).rounds}


def test_chance_is_the_clients_majority_class_for_a_model_per_client_and_one_class_for_the_global_model():
    """At s = 2 a fine-tuned or local model can reach a two-class client's majority share (about 50 %) by a constant
    prediction; FedAvg's one global model, predicting alike on every client, only the best single class's mean
    share (about 1/classes)."""
    from fedlib.companion.papers import preset
    base = preset("fedshibu", "smoke", dataset="synthetic").replace(partition="shards",
                                                                     partition_kw={"shards_per_user": 2})
    babu = base.replace(strategy="fedbabu", strategy_kw={"head": "dense"})
    avg = base.replace(strategy="fedavg", strategy_kw={})
    assert not art.one_model(babu) and art.one_model(avg)
    assert not art.one_model(base.replace(strategy="local_only", strategy_kw={}))
    assert 45 <= art.personal_chance(babu) <= 100 and art.personal_chance(avg) <= 100 / 10 * 1.6
    assert art.personal_chance(base.replace(strategy="fedshibu", strategy_kw={"sim": "identity"})) == \
        art.personal_chance(babu)


def _uniform(runs, method):
    """``runs`` with ``method``'s CRSM all ones (uniform weights) in every round."""
    out = dict(runs)
    for rid, r in runs.items():
        if rid.method == method:
            hist = [{**e, "crsm": np.ones((10, 10)).tolist()} for e in r.history]
            out[rid] = Record(key=r.key, config=r.config, history=hist, provenance={}, partition_hash="",
                              final_params_hash="")
    return out


def test_fig5_rows_read_the_crsm_of_the_records_and_are_not_testable_where_it_is_uniform():
    """personal_frame reads each run's CRSM over its second half; Fig. 5's rows are decided where FedAvg+CRSM's
    CRSM weighs clients unequally and not testable, naming the measured weights, where it is uniform."""
    runs = _runs(["FedAvg", "FedAvg+CRSM", "Local only"], seeds=(0, 1, 2), flat=10)
    frame = art.personal_frame(runs)
    crsm = frame[frame["method"] == "FedAvg+CRSM"]
    assert (crsm["crsm deviation"] > 1).all() and (crsm["clients"] == 10).all()
    decided = fc.fedavg_crsm_verdicts(frame, runs)
    assert all(v.verdict != "not testable at this scale" for v in decided[:2])
    flat = _uniform(runs, "FedAvg+CRSM")
    frame = art.personal_frame(flat)
    assert (frame.loc[frame["method"] == "FedAvg+CRSM", "crsm deviation"] == 0).all()
    vs = fc.fedavg_crsm_verdicts(frame, flat)
    assert all(v.verdict == "not testable at this scale" and v.finding == fc.UNIFORM for v in vs)
    assert "uniform in all 3 FedAvg+CRSM runs" in vs[0].why and "self-weight 0.1000-0.1000" in vs[0].why


def test_each_row_names_what_its_artifacts_runs_change_of_the_papers_setup():
    records = {"table1": {}, "fig1": _runs(["all bodies aggregated (FedBABU)", "aggregated within each group"],
                                           flat=10),
               "fig3": _runs(["own samples (§4.3)"]), "fig5": _runs(["FedAvg", "FedAvg+CRSM", "Local only"], flat=10)}
    frames = {a: art.personal_frame(rs) for a, rs in records.items() if rs}
    frames["table1"] = _frame([(m, 2, n, "pending") for m in (LINEAR, BABU, IDENTITY) for n in (0, 1)])
    paper = {a: BASE.replace(num_clients=100, rounds=500, model="resnet18") for a in records}
    vs = fc.shards_verdicts(frames, records, "quick", paper=paper)
    fig5 = next(v for v in vs if v.claim.startswith("FedAvg+CRSM ends more accurate than FedAvg"))
    assert fig5.data.startswith("Fashion-MNIST, FedIntR CNN, 10 clients, 10 rounds; the paper: CIFAR-10, ResNet-18, "
                                "100 clients, 500 rounds")
