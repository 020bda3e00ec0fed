"""Notebook 06: FedIntR Table IV / Fig. 4 (many clients) and Fig. 5 (local epochs) as tables, figures and verdicts.

Runs come as ``{FedIntRRunId: Record | Pending | Diverged}`` (:func:`fedlib.grid.fetch_runs` over
:func:`fedlib.plans.fedintr_scaling_plan`); :func:`values_frame` reads each run's method, N, E and seed from its id.
Every claim is decided by :func:`fedlib.verdicts.decide` over seeds (chance: :func:`fedlib.data.chance` of the runs' dataset); a claim whose runs
are not stored yet is pending, and one whose artifact a scale leaves out is not testable there, with the reason.
The figures draw our runs with the shared kinds of :mod:`fedlib.plots` (means over seeds, 95 % t intervals) and the
paper's numbers only in a panel of their own: Table IV's CIFAR-10 accuracies beside Fig. 4, Table I's accuracy of
each method for the dataset (its default E = 10, 100 rounds) beside Fig. 5; :func:`describe_fig4` and
:func:`describe_fig5` say what each figure shows, from the numbers.
"""

from __future__ import annotations

import statistics
from typing import Any, Mapping

import matplotlib.pyplot as plt
import pandas as pd

from ..data import chance
from ..grid import Diverged, Run, cell, offs, spoilt
from ..plans import FedIntRRunId
from ..results import Pending, Record
from ..plots import mean_curves, paper_panel
from ..style import dataset_name, method_style
from ..verdicts import Verdict, decide, not_testable, pending
from .fedintr import round_ticks
from .fedintr_epochs import (accuracy_at, describe_fig5, fig5_equal, fig5_figure, fig5_frame, fig5_off, fig5_points,
                             values_frame)
from .fedintr_figures import fmt

__all__ = ["PAPER_T4", "PAPER_T4_AT", "accuracy_at", "values_frame", "table4_frame", "curves", "mean_table",
           "paper_table4", "series_style", "fig4_figure", "describe_fig4", "fig5_frame", "fig5_equal", "fig5_figure",
           "fig5_points", "fig5_off", "describe_fig5", "setup_table", "table4_verdicts", "fig5_verdicts", "T4_SOURCE", "FIG5_SOURCE"]

T4_SOURCE = "FedIntR §IV-D, Table IV"
FIG5_SOURCE = "FedIntR §IV-E, Fig. 5 (CIFAR-10)"

PAPER_T4 = {  # FedIntR Table IV, CIFAR-10: N → {method: accuracy at each reported T}
    50: {"FedAvg": (49.41, 57.79, 65.26, 64.62), "FedCKA (μ=1)": (45.28, 56.76, 64.90, 63.96),
         "FedCKA (μ=10)": (44.45, 53.83, 58.69, 59.08), "FedProx (μ=0.01)": (46.17, 58.12, 65.44, 65.75),
         "MOON (μ=1)": (48.25, 57.98, 64.24, 64.23), "MOON (μ=10)": (42.71, 55.83, 64.52, 65.18),
         "FedIntR (μ=1)": (47.02, 58.01, 63.89, 63.75), "FedIntR (μ=10)": (46.63, 56.39, 65.48, 66.94)},
    100: {"FedAvg": (37.98, 50.69, 61.00, 63.64, 64.90), "FedCKA (μ=1)": (36.81, 47.10, 60.43, 64.30, 64.41),
          "FedCKA (μ=10)": (36.68, 46.85, 56.51, 59.91, 60.49), "FedProx (μ=0.01)": (37.79, 50.37, 61.08, 64.48, 64.75),
          "MOON (μ=1)": (38.08, 47.98, 60.08, 63.66, 64.85), "MOON (μ=10)": (34.34, 46.81, 61.68, 63.97, 65.12),
          "FedIntR (μ=1)": (35.87, 48.15, 60.59, 63.46, 64.26), "FedIntR (μ=10)": (32.13, 49.76, 61.31, 65.55, 66.57)},
}
PAPER_T4_AT = {50: (100, 200, 500, 800), 100: (100, 200, 500, 800, 1000)}
INTR = "FedIntR (μ=10)"
Runs = Mapping[FedIntRRunId, Run]


def table4_frame(runs: Runs, at: Mapping[int, tuple[int, ...]]) -> pd.DataFrame:
    """:func:`values_frame` of Table IV's runs with ``what`` = ``"T=<round>"`` for the rounds ``at[N]`` of each N."""
    parts = [values_frame({rid: r for rid, r in runs.items() if rid.N == n},
                          {f"T={T}": (lambda r, T=T: accuracy_at(r, T)) for T in ts}) for n, ts in at.items()]
    return pd.concat(parts, ignore_index=True) if parts else values_frame({}, {})


def curves(runs: Runs, **where: Any) -> dict[str, dict[int, pd.Series]]:
    """Test accuracy (%) per round of the finished runs whose id has every ``field=value`` of ``where`` (e.g.
    ``N=100``), ``{label: {seed: series}}`` (the input of :func:`fedlib.plots.mean_curves`)."""
    out: dict[str, dict[int, pd.Series]] = {}
    for rid, r in runs.items():
        if isinstance(r, Record) and all(getattr(rid, k) == v for k, v in where.items()):
            out.setdefault(rid.label, {})[rid.seed] = 100 * r.metric("test_acc")
    return out


def mean_table(df: pd.DataFrame, index: str, columns: str) -> pd.DataFrame:
    """``index`` × ``columns`` cells "mean ± std" over seeds ("pending", "diverged")."""
    g = df.groupby([index, columns], sort=False)
    cells = {k: cell(x["acc"].mean(), x["acc"].std(ddof=1), x["acc"].count(), bool(x["pending"].any()),
                     bool(x["diverged"].any()), int(x["diverged"].sum())) for k, x in g}
    out = pd.Series(cells).unstack()
    return out.loc[list(dict.fromkeys(df[index])), list(dict.fromkeys(df[columns]))]


def paper_table4() -> dict[int, pd.DataFrame]:
    """FedIntR Table IV (CIFAR-10) as printed: per N, one row per method, one column per reported round T."""
    return {n: pd.DataFrame({m: dict(zip([f"T={T}" for T in PAPER_T4_AT[n]], v)) for m, v in rows.items()}).T
            for n, rows in PAPER_T4.items()}


def series_style(name: str) -> dict[str, Any]:
    """:func:`fedlib.style.method_style` of a run's label; a method's μ = 10 is dashed (dotted where its μ = 1 is
    dashed) with hollow markers, so that both of its μ show."""
    st = method_style(name)
    if "μ=10" in name:
        st.update(ls=":" if st["ls"] == "--" else "--", mfc="none")
    return st


def fig4_figure(cv: Mapping[str, Mapping[int, pd.Series]], n: int, dataset: str, scale: str) -> plt.Figure:
    """Fig. 4: test accuracy per round of every method with N clients, 20 % per round: the mean over seeds with a
    95 % t band (a method's μ = 10 dashed with hollow markers); the paper's Table IV (CIFAR-10) in a panel below."""
    fig = plt.figure(figsize=(10, 7.4), layout="constrained")
    gs = fig.add_gridspec(2, 1, height_ratios=[2.3, 1])
    ax = fig.add_subplot(gs[0])
    note = mean_curves(ax, cv, percent=False, xlabel="communication round")
    for ln in ax.get_lines():
        if "μ=10" in str(ln.get_label()):
            ln.set_linestyle(series_style(str(ln.get_label()))["ls"])
            ln.set_markerfacecolor("none")
    if cv:
        ax.legend(fontsize=8, ncol=4, loc="lower right")
    rounds = max((int(s.index.max()) for c in cv.values() for s in c.values() if len(s)), default=1)
    round_ticks(ax, rounds)
    ax.set_title(f"FedIntR Fig. 4: N = {n} clients, {round(0.2 * n)} per round — {dataset_name(dataset)}, "
                 f"scale={scale}\n{note}", fontsize=10)
    pn = n if n in PAPER_T4 else 100
    paper_panel(fig.add_subplot(gs[1]), [[m, *(f"{v:.2f}" for v in vs)] for m, vs in PAPER_T4[pn].items()],
                ["method", *(f"T = {T}" for T in PAPER_T4_AT[pn])],
                f"paper, Table IV (CIFAR-10, N = {pn}): median test accuracy (%) of the 10 rounds ending at T")
    return fig


def describe_fig4(cv: Mapping[str, Mapping[int, pd.Series]] | None, n: int | None,
                  left_out: str | None = None) -> str:
    """What Fig. 4 shows: the leading method early (the paper's first T, else a fifth of the rounds) and at the last
    round, with FedAvg's and FedIntR's (μ = 10) means; or why there is no figure."""
    if left_out:
        return f"Fig. 4 is not run at this scale: {left_out}."
    means = pd.DataFrame({m: pd.concat(v, axis=1).mean(axis=1) for m, v in (cv or {}).items() if v}).dropna()
    if means.empty:
        return f"Fig. 4's runs (N = {n}) are pending: no curves yet."
    last = int(means.index.max())
    early = next((T for T in PAPER_T4_AT.get(n or 0, PAPER_T4_AT[100]) if T < last), max(1, last // 5))
    early = int(means.index[means.index <= early].max())

    def at(r: int) -> str:
        row = means.loc[r].sort_values(ascending=False)
        own = ", ".join(f"{m} {row[m]:.2f} %" for m in ("FedAvg", INTR) if m in row and m != row.index[0])
        return f"round {r}: {row.index[0]} leads with {row.iloc[0]:.2f} %" + (f" ({own})" if own else "")

    seeds = sorted({len(v) for v in cv.values() if v})
    return f"Means over {seeds[0]}{'–' + str(seeds[-1]) if len(seeds) > 1 else ''} seed(s) — {at(early)}; {at(last)}."


def setup_table(records: Mapping[str, Runs]) -> pd.DataFrame:
    """Every run by name: rounds, clients, local epochs, seed, seconds per round ("pending", "diverged") and its
    record."""
    return pd.DataFrame({str(rid): {"rounds": r.config["rounds"], "clients": r.config["num_clients"],
                             "local epochs": r.config["local_epochs"], "seed": r.config["seed"],
                             "s / round": round(r.frame()["time_s"].mean(), 2) if isinstance(r, Record)
                             else "pending" if isinstance(r, Pending) else "diverged", "record": r.key}
                         for rs in records.values() for rid, r in rs.items()}).T


def _side(df: pd.DataFrame) -> tuple[dict[int, float], bool, list[str]]:
    return dict(zip(df["seed"].astype(int), df["acc"])), bool(df["pending"].any()) or df.empty, \
        list(df.loc[df["diverged"], "name"])


def _compare(claim: str, source: str, a: pd.DataFrame, b: pd.DataFrame, names: tuple[str, str], kind: str,
             paper: str = "") -> Verdict:
    (av, ap, ad), (bv, bp, bd) = _side(a), _side(b)
    if (ap or bp) and (a.empty or b.empty or not spoilt(pd.concat([a, b]))):
        return pending(claim, source)
    if ap or bp:  # a finished run spoils it: decided on what finished
        a, b = a[~a["pending"]], b[~b["pending"]]
        (av, _, ad), (bv, _, bd) = _side(a), _side(b)
    both = pd.concat([a, b])
    return decide(claim, source, av, bv, kind=kind, names=names, chance=float(both["chance"].max()), diverged=ad + bd,
                  paper=paper, off=offs(both.drop_duplicates("name")))


def _runner_up(df: pd.DataFrame, exclude: str) -> str | None:
    """The method other than ``exclude`` with the highest mean (None while some run is pending)."""
    others = df[df["method"] != exclude]
    if others.empty or others["pending"].any():
        return None
    return others.groupby("method", sort=False)["acc"].mean().idxmax()


def _paper_t4(n: int, i: int) -> tuple[float, float, str]:
    row = {m: v[i] for m, v in PAPER_T4[n].items()}
    med = statistics.median(v for m, v in row.items() if m != "FedAvg")
    second = max((m for m in row if m != INTR), key=row.get)
    return row["FedAvg"] - med, row[INTR] - row[second], second


def table4_verdicts(df: pd.DataFrame | None, left_out: str | None = None) -> list[Verdict]:
    """Table IV's two claims for each N: FedAvg beats the majority of the regularized methods at the first two
    reported rounds, and FedIntR (μ = 10) beats every other method at the last one. ``df``: :func:`values_frame` with
    ``what`` = ``"T=<round>"``; ``left_out``: why this scale does not run Table IV (every claim not testable)."""
    out = []
    Ts = {n: PAPER_T4_AT[n] for n in PAPER_T4} if df is None or df.empty else \
        {int(n): tuple(int(w[2:]) for w in dict.fromkeys(g["what"])) for n, g in df.groupby("N", sort=False)}
    for n, ts in Ts.items():
        pn = n if n in PAPER_T4 else max(PAPER_T4)
        for i, T in enumerate(ts[:2]):
            claim = f"FedAvg beats the majority of the other methods early in training (N = {n}, T = {T})"
            src = f"{T4_SOURCE}: 'vanilla FedAvg outperforms the majority of other approaches in the early training " \
                  f"rounds (i.e., T = 100 and T = 200)'"
            eff = _paper_t4(pn, i)[0]
            paper = f"FedAvg − median of the others: {eff:+.2f} at N = {pn}, T = {PAPER_T4_AT[pn][i]}"
            if left_out:
                out.append(not_testable(claim, src, left_out, paper))
                continue
            at = df[(df["N"] == n) & (df["what"] == f"T={T}")]
            if at["pending"].any():
                out.append(pending(claim, src))
                continue
            wide = at.pivot(index="seed", columns="method", values="acc")
            others = [m for m in wide.columns if m != "FedAvg"]
            d = {int(s): float(wide.loc[s, "FedAvg"] - wide.loc[s, others].median()) for s in wide.index}
            out.append(decide(claim, src, d, kind="greater", names=("FedAvg − median of the others", ""),
                              chance=float(at["chance"].max()), runs=list(at["acc"]),
                              diverged=list(at.loc[at["diverged"], "name"]), paper=paper))
        T = ts[-1]
        _, eff, second = _paper_t4(pn, len(PAPER_T4_AT[pn]) - 1)
        claim = f"FedIntR (μ = 10) beats every other method after enough rounds (N = {n}, T = {T})"
        src = f"{T4_SOURCE}: 'with a sufficient number of training rounds, FedIntR with μ = 10 can significantly " \
              f"outperform all other approaches'"
        paper = f"{eff:+.2f} over the second best, {second}, at N = {pn}, T = {PAPER_T4_AT[pn][-1]}"
        if left_out:
            out.append(not_testable(claim, src, left_out, paper))
            continue
        at = df[(df["N"] == n) & (df["what"] == f"T={T}")]
        other = _runner_up(at, INTR)
        out.append(pending(claim, src) if other is None else
                   _compare(claim, src, at[at["method"] == INTR], at[at["method"] == other], (INTR, other),
                            "greater", paper))
    return out


def fig5_verdicts(df: pd.DataFrame, default_e: int, budget_note: str = "", equal: pd.DataFrame | None = None,
                  rounds: Mapping[int, int] | None = None) -> list[Verdict]:
    """Fig. 5's claims: E = 1 is poor for every method; the default E (the paper's 10; a smaller scale's stand-in
    ``default_e``) is each method's best; E ≥ 20 lowers accuracy; FedIntR is the best method at every E but 5.
    ``df``: :func:`values_frame` of the Fig. 5 runs (one value each). ``budget_note``: why this scale leaves out the E
    beyond ``default_e`` it does not run: with none run those claims are not testable, else decided on those run and
    the note says which. ``rounds`` (``{E: rounds}``) and ``equal`` (:func:`fig5_frame`
    at the default E's rounds): where E = 1 runs longer than the default E (to its plateau), "E = 1 is poor" is
    decided twice: at the end of each run, and in the same rounds, as the paper runs every E."""
    out = []
    Es = sorted(set(df["E"]))
    methods = list(dict.fromkeys(df["method"]))
    above = [e for e in Es if e > default_e]
    partly = (f"of the E above {default_e}, decided on E = {', '.join(f'{e:g}' for e in above)} alone; not run at "
              f"this scale: {budget_note}") if above and budget_note else ""
    r1, rd = (rounds or {}).get(1), (rounds or {}).get(default_e)
    both = equal is not None and r1 is not None and rd is not None and r1 > rd
    src = f"{FIG5_SOURCE}: 'setting E = 1 results in poor accuracy for all approaches'"
    for m in methods:
        d = df[df["method"] == m]
        claim = f"E = 1 gives {m} a lower accuracy than E = {default_e}" + (
            f", each run to its plateau ({r1} and {rd} rounds)" if both else "")
        out.append(_compare(claim, src, d[d["E"] == 1], d[d["E"] == default_e], ("E=1", f"E={default_e}"), "less"))
        if both:
            e1 = equal[(equal["method"] == m) & (equal["E"] == 1)]
            out.append(_compare(f"E = 1 gives {m} a lower accuracy than E = {default_e} in the same {rd} rounds "
                                f"(the paper's setup: the same rounds for every E)", src, e1, d[d["E"] == default_e],
                                (f"E=1 at round {rd}", f"E={default_e}"), "less"))
    for m in methods:
        d = df[df["method"] == m]
        claim = f"{m} is best at the default E = {default_e} (the paper's 10)"
        src = f"{FIG5_SOURCE}: 'setting E = 10 enables them to achieve their best performance'"
        rest = [e for e in Es if e not in (1, default_e)]
        if not rest:
            out.append(not_testable(claim, src, budget_note or "no E besides 1 and the default was run"))
            continue
        if d["pending"].any():
            out.append(pending(claim, src))
            continue
        best = d[d["E"].isin(rest)].groupby("E")["acc"].mean().idxmax()
        out.append(_compare(claim, src, d[d["E"] == default_e], d[d["E"] == best], (f"E={default_e}", f"E={best}"),
                            "greater").noted(partly))
    for m in methods:
        d = df[df["method"] == m]
        claim = f"E ≥ 20 lowers {m}'s accuracy below E = {default_e}"
        src = f"{FIG5_SOURCE}: 'using a larger number of local epochs (i.e., 20 or 40) can decrease the performance " \
              f"for all approaches'"
        if not above:
            out.append(not_testable(claim, src, budget_note or f"no E above {default_e} was run"))
            continue
        if d["pending"].any():
            out.append(pending(claim, src))
            continue
        best = d[d["E"].isin(above)].groupby("E")["acc"].mean().idxmax()  # the better of the large E's
        out.append(_compare(claim, src, d[d["E"] == best], d[d["E"] == default_e], (f"E={best}", f"E={default_e}"),
                            "less").noted(partly))
    intr = next((m for m in methods if m.startswith("FedIntR")), None)  # at Table I's μ for the dataset
    if intr is None:
        out.append(not_testable("FedIntR beats the other methods at every E but 5",
                                f"{FIG5_SOURCE}: 'FedIntR achieves the best performance in most settings except E = 5'",
                                budget_note or "FedIntR was not run at this scale"))
    for e in [e for e in Es if e != 5] if intr else []:
        at = df[df["E"] == e]
        claim = f"{intr} beats {', '.join(m for m in methods if m != intr)} at E = {e}"
        src = f"{FIG5_SOURCE}: 'FedIntR achieves the best performance in most settings except E = 5'"
        other = _runner_up(at, intr)
        out.append(pending(claim, src) if other is None else
                   _compare(claim, src, at[at["method"] == intr], at[at["method"] == other], (intr, other),
                            "greater"))
    return out
