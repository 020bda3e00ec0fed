"""Notebook 06: FedIntR Table IV / Fig. 4 (many clients) and Fig. 5 (local epochs) as tables and
figures; their verdicts are in :mod:`fedlib.companion.papers.fedintr.scaling_claims`.

Runs come as ``{FedIntRRunId: Record | Pending | Diverged}``
(:func:`fedlib.companion.grid.fetch_runs` over
:func:`fedlib.companion.papers.fedintr.plans.fedintr_scaling_plan`); :func:`values_frame` reads each
run's method, N, E and seed from its id. The figures draw our runs with the shared kinds of
:mod:`fedlib.companion.plots` (means over seeds, 95 % t intervals) and the paper's numbers only in a
panel of their own: Table IV's CIFAR-10 accuracies beside Fig. 4, Table I's accuracy of each method
for the dataset (its default E = 10, 100 rounds) beside Fig. 5; :func:`describe_fig4` and
:func:`describe_fig5` say what each figure shows, from the numbers.
"""

from __future__ import annotations

from typing import Any, Mapping

import matplotlib.pyplot as plt
import pandas as pd

from fedlib.companion.grid import Runs, cell
from fedlib.companion.common import FedIntRRunId
from fedlib.companion.results import Pending, Record
from fedlib.companion.plots import mean_curves, paper_panel
from fedlib.companion.style import dataset_name, method_style
from fedlib.companion.papers.fedintr.tables import round_ticks
from fedlib.companion.papers.fedintr.epochs import (accuracy_at, describe_fig5, fig5_equal,
                                                    fig5_figure, fig5_frame, fig5_off, fig5_points,
                                                    values_frame)

__all__ = ["FEDINTR_T4", "FEDINTR_T4_AT", "accuracy_at", "values_frame", "table4_frame", "curves",
           "mean_table", "paper_table4", "series_style", "fig4_figure", "describe_fig4",
           "fig5_frame", "fig5_equal", "fig5_figure", "fig5_points", "fig5_off", "describe_fig5",
           "setup_table", "T4_SOURCE", "FIG5_SOURCE", "INTR"]

T4_SOURCE = "FedIntR §IV-D, Table IV"
FIG5_SOURCE = "FedIntR §IV-E, Fig. 5 (CIFAR-10)"

FEDINTR_T4 = {  # FedIntR Table IV, CIFAR-10: N → {method: accuracy at each reported T}
    50: {"FedAvg": (49.41, 57.79, 65.26, 64.62), "FedCKA (μ=1)": (45.28, 56.76, 64.90, 63.96),
         "FedCKA (μ=10)": (44.45, 53.83, 58.69, 59.08),
         "FedProx (μ=0.01)": (46.17, 58.12, 65.44, 65.75),
         "MOON (μ=1)": (48.25, 57.98, 64.24, 64.23), "MOON (μ=10)": (42.71, 55.83, 64.52, 65.18),
         "FedIntR (μ=1)": (47.02, 58.01, 63.89, 63.75),
         "FedIntR (μ=10)": (46.63, 56.39, 65.48, 66.94)},
    100: {"FedAvg": (37.98, 50.69, 61.00, 63.64, 64.90),
          "FedCKA (μ=1)": (36.81, 47.10, 60.43, 64.30, 64.41),
          "FedCKA (μ=10)": (36.68, 46.85, 56.51, 59.91, 60.49),
          "FedProx (μ=0.01)": (37.79, 50.37, 61.08, 64.48, 64.75),
          "MOON (μ=1)": (38.08, 47.98, 60.08, 63.66, 64.85),
          "MOON (μ=10)": (34.34, 46.81, 61.68, 63.97, 65.12),
          "FedIntR (μ=1)": (35.87, 48.15, 60.59, 63.46, 64.26),
          "FedIntR (μ=10)": (32.13, 49.76, 61.31, 65.55, 66.57)},
}
FEDINTR_T4_AT = {50: (100, 200, 500, 800), 100: (100, 200, 500, 800, 1000)}
INTR = "FedIntR (μ=10)"


def table4_frame(runs: Runs, at: Mapping[int, tuple[int, ...]]) -> pd.DataFrame:
    """:func:`values_frame` of Table IV's runs with ``what`` = ``"T=<round>"`` for the rounds
    ``at[N]`` of each N."""
    parts = [
        values_frame({rid: r
                      for rid, r in runs.items() if rid.N == n},
                     {f"T={T}": (lambda r, T=T: accuracy_at(r, T))
                      for T in ts}) for n, ts in at.items()
    ]
    return pd.concat(parts, ignore_index=True) if parts else values_frame({}, {})


def curves(runs: Runs, **where: Any) -> dict[str, dict[int, pd.Series]]:
    """Test accuracy (%) per round of the finished runs whose id has every ``field=value`` of
    ``where`` (e.g. ``N=100``), ``{label: {seed: series}}`` (the input of
    :func:`fedlib.companion.plots.mean_curves`)."""
    out: dict[str, dict[int, pd.Series]] = {}
    for rid, r in runs.items():
        if isinstance(r, Record) and all(getattr(rid, k) == v for k, v in where.items()):
            out.setdefault(rid.label, {})[rid.seed] = 100 * r.metric("test_acc")
    return out


def mean_table(df: pd.DataFrame, index: str, columns: str) -> pd.DataFrame:
    """``index`` × ``columns`` cells "mean ± std" over seeds ("pending", "diverged")."""
    g = df.groupby([index, columns], sort=False)
    cells = {
        k: cell(x["acc"].mean(), x["acc"].std(ddof=1), x["acc"].count(), bool(x["pending"].any()),
                bool(x["diverged"].any()), int(x["diverged"].sum()))
        for k, x in g
    }
    out = pd.Series(cells).unstack()
    return out.loc[list(dict.fromkeys(df[index])), list(dict.fromkeys(df[columns]))]


def paper_table4() -> dict[int, pd.DataFrame]:
    """FedIntR Table IV (CIFAR-10) as printed: per N, one row per method, one column per reported
    round T."""
    return {
        n: pd.DataFrame(
            {m: dict(zip([f"T={T}" for T in FEDINTR_T4_AT[n]], v))
             for m, v in rows.items()}).T
        for n, rows in FEDINTR_T4.items()
    }


def series_style(name: str) -> dict[str, Any]:
    """:func:`fedlib.companion.style.method_style` of a run's label; a method's μ = 10 is dashed
    (dotted where its μ = 1 is dashed) with hollow markers, so that both of its μ show."""
    st = method_style(name)
    if "μ=10" in name:
        st.update(ls=":" if st["ls"] == "--" else "--", mfc="none")
    return st


def fig4_figure(cv: Mapping[str, Mapping[int, pd.Series]], n: int, dataset: str,
                scale: str) -> plt.Figure:
    """Fig. 4: test accuracy per round of every method with N clients, 20 % per round: the mean over
    seeds with a 95 % t band (a method's μ = 10 dashed with hollow markers); the paper's Table IV
    (CIFAR-10) in a panel below."""
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
    ax.set_title(f"FedIntR Fig. 4: N = {n} clients, {round(0.2 * n)} per round — "
                 f"{dataset_name(dataset)}, scale={scale}\n{note}", fontsize=10)
    pn = n if n in FEDINTR_T4 else 100
    paper_panel(fig.add_subplot(gs[1]),
                [[m, *(f"{v:.2f}" for v in vs)] for m, vs in FEDINTR_T4[pn].items()],
                ["method", *(f"T = {T}" for T in FEDINTR_T4_AT[pn])],
                f"paper, Table IV (CIFAR-10, N = {pn}): median test accuracy (%) of the 10 rounds "
                "ending at T")
    return fig


def describe_fig4(cv: Mapping[str, Mapping[int, pd.Series]] | None, n: int | None,
                  left_out: str | None = None) -> str:
    """What Fig. 4 shows: the leading method early (the paper's first T, else a fifth of the rounds)
    and at the last round, with FedAvg's and FedIntR's (μ = 10) means; or why there is no figure."""
    if left_out:
        return f"Fig. 4 is not run at this scale: {left_out}."
    means = pd.DataFrame({m: pd.concat(v, axis=1).mean(axis=1)
                          for m, v in (cv or {}).items() if v}).dropna()
    if means.empty:
        return f"Fig. 4's runs (N = {n}) are pending: no curves yet."
    last = int(means.index.max())
    early = next((T for T in FEDINTR_T4_AT.get(n or 0, FEDINTR_T4_AT[100]) if T < last),
                 max(1, last // 5))
    early = int(means.index[means.index <= early].max())

    def at(r: int) -> str:
        row = means.loc[r].sort_values(ascending=False)
        own = ", ".join(f"{m} {row[m]:.2f} %" for m in ("FedAvg", INTR)
                        if m in row and m != row.index[0])
        return (f"round {r}: {row.index[0]} leads with {row.iloc[0]:.2f} %"
                + (f" ({own})" if own else ""))

    seeds = sorted({len(v) for v in cv.values() if v})
    span = f"{seeds[0]}{'–' + str(seeds[-1]) if len(seeds) > 1 else ''}"
    return f"Means over {span} seed(s) — {at(early)}; {at(last)}."


def setup_table(records: Mapping[str, Runs]) -> pd.DataFrame:
    """Every run by name: rounds, clients, local epochs, seed, seconds per round ("pending",
    "diverged") and its record."""
    return pd.DataFrame({
        str(rid): {
            "rounds": r.config["rounds"], "clients": r.config["num_clients"],
            "local epochs": r.config["local_epochs"], "seed": r.config["seed"],
            "s / round": round(r.frame()["time_s"].mean(), 2) if isinstance(
                r, Record) else "pending" if isinstance(r, Pending) else "diverged", "record": r.key
        }
        for rs in records.values()
        for rid, r in rs.items()
    }).T
