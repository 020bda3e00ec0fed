"""Notebooks 05 (FedIntR Tables I, II, III, V) and 06 (Table IV / Fig. 4, Fig. 5): the runs at each
scale.

Runs are identified by :class:`~fedlib.companion.common.FedIntRRunId`, ``"<method> | μ=<mu> |
seed=<seed>"`` (FedAvg has no μ; Table III adds ``"β=<beta> | "`` in front, Table IV ``"N=<clients>
| "``, Fig. 5 ``"E=<epochs> | "``).

``quick`` (the preset's 40 rounds × 6 epochs on 12,000 images at batch 64, on the plateau) runs each
method at the μ FedIntR Table I found best for the dataset, 5 seeds each, with Table III at β = 5
and 0.1 (β = 0.1 for 120 rounds: :data:`FEDINTR_TABLE3_ROUNDS`) and Table V. Notebook 06 at quick
leaves Table IV and Fig. 5 above the preset's E out (:func:`fedintr_scaling_plan`: tens of
worker-hours each) and runs Fig. 5 for FedAvg and FedIntR at E = 1 and the preset's E. ``paper`` is
every grid of the paper; ``smoke`` one value of each, for CI.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

from fedlib.config import Config
from fedlib.companion.papers.fedintr.preset import (FEDINTR_FIG5_ROUNDS, FEDINTR_TABLE3_ROUNDS,
                                                    FEDINTR_PRESET, TABLE3_METHODS,
                                                    TABLE3_PAPER_COLUMNS, TABLE5_PER_SAMPLE,
                                                    TUNES_MU)
from fedlib.companion.common import SEEDS, FedIntRRunId, Plan
from fedlib.companion.budget import Part, Scope, fit

__all__ = [
    "FEDINTR_LAST", "fedintr_benchmarks_plan", "fedintr_scaling_plan", "FEDINTR_METHODS", "mu_grid",
    "FEDINTR_BEST_MU", "FEDINTR_BETAS", "FEDINTR_TABLE4", "FEDINTR_TABLE4_METHODS",
    "FEDINTR_EPOCHS", "FEDINTR_TABLE4_AT", "FEDINTR_QUICK_LEFT_OUT", "TABLE4_PART", "FIG5_PART",
    "FIG5_LONG_PART", "scaling_left_out", "benchmarks_left_out", "fig5_rounds"
]

# "We report the median of test accuracy values attained by the global model over the course of last
# 10 training rounds"; quick's 10 rounds still climb, so it takes the median of the last 3 (smoke:
# the last round).
FEDINTR_LAST = {"paper": 10, "quick": 3, "smoke": 1}

# the strategies of FedIntR's comparisons
FEDINTR_METHODS: dict[str, str] = {
    "FedAvg": "fedavg", "FedCKA": "fedcka", "FedProx": "fedprox", "MOON": "moon",
    "FedIntR": "fedintr"
}

# §IV-B: "For FedIntR and FedCKA, we tune μ from [0.1, 1, 3, 5, 10] ... [0.1, 1, 5, 10] for MOON and
# [0.001, 0.01, 0.1, 1] for FedProx"
_PAPER_GRID: dict[str, tuple[float, ...]] = {
    "FedAvg": (), "FedCKA": (0.1, 1, 3, 5, 10), "FedProx": (0.001, 0.01, 0.1, 1),
    "MOON": (0.1, 1, 5, 10), "FedIntR": (0.1, 1, 3, 5, 10)
}

# Table I's best μ per dataset (in parentheses there); Fig. 5 and Table V reuse them ("the same μ
# values tuned for each dataset as in Table I").
FEDINTR_BEST_MU: dict[str, dict[str, float]] = {
    "fmnist": {"FedCKA": 3, "FedProx": 0.001, "MOON": 1, "FedIntR": 10},
    "svhn": {"FedCKA": 1, "FedProx": 0.01, "MOON": 10, "FedIntR": 10},
    "cifar10": {"FedCKA": 0.1, "FedProx": 0.01, "MOON": 5, "FedIntR": 3},
    "cifar100": {"FedCKA": 10, "FedProx": 0.1, "MOON": 0.1, "FedIntR": 10},
}


def _best(dataset: str) -> dict[str, float]:
    return FEDINTR_BEST_MU.get(dataset, FEDINTR_BEST_MU["cifar10"])


def mu_grid(scale: str, dataset: str = "fmnist") -> dict[str, tuple[float, ...]]:
    """The μ values each method runs at ``scale``: the paper's grids, or (quick, smoke) Table I's
    best μ for ``dataset`` (more rounds before more μ values)."""
    if TUNES_MU[scale]:
        return dict(_PAPER_GRID)
    best = _best(dataset)
    return {m: () if m == "FedAvg" else (best[m],) for m in FEDINTR_METHODS}


# What a scale leaves out, with why: the notebook reports the claims that need it as not testable at
# that scale. Quick plans every method of Table I and Tables III and V (the campaign trains them; a
# quick run of the preset, 30 rounds x 6 epochs x 12,000 images at batch 64, takes about 3.8 min for
# FedAvg and 11.8 for FedIntR on one thread).
FEDINTR_QUICK_LEFT_OUT: dict[str, dict[str, str]] = {"paper": {}, "smoke": {}, "quick": {}}
TABLE3_DATASETS = ("cifar10", "cifar100")  # Table III's columns


def benchmarks_left_out(scale: str, dataset: str = "fmnist") -> dict[str, str]:
    """What notebook 05 leaves out at ``scale`` on ``dataset``, by artifact, with why: the scale's
    budget (:data:`FEDINTR_QUICK_LEFT_OUT`), and at paper scale Table III on a dataset the paper's
    table has no column for (smaller scales run its β pattern on any dataset)."""
    out = dict(FEDINTR_QUICK_LEFT_OUT[scale])
    if TABLE3_PAPER_COLUMNS[scale] and dataset not in TABLE3_DATASETS:
        out["table3"] = ("the paper's Table III reports CIFAR-10 and CIFAR-100 only, not "
                         f"{dataset} (dataset='cifar10' or 'cifar100' runs it)")
    return out

# Table III, besides Table I's 0.5
FEDINTR_BETAS = {"paper": (5.0, 0.1), "quick": (5.0, 0.1), "smoke": (0.1,)}

# Table IV (§IV-D): N clients, 20 % sampled per round, T rounds (smoke: a 3-round stand-in that
# proves the code)
FEDINTR_TABLE4 = {"paper": {50: 800, 100: 1000}, "smoke": {10: 3}}
FEDINTR_TABLE4_AT = {  # the rounds Table IV reports
    "paper": {50: (100, 200, 500, 800), 100: (100, 200, 500, 800, 1000)},
    "smoke": {10: (1, 2, 3)},
}
# "For FedProx, μ value is set to 0.01, and for all other approaches, we experiment with both μ = 1
# and μ = 10"
_TABLE4_PAPER = (("FedAvg", None), ("FedCKA", 1), ("FedCKA", 10), ("FedProx", 0.01), ("MOON", 1),
                 ("MOON", 10), ("FedIntR", 1), ("FedIntR", 10))
FEDINTR_TABLE4_METHODS = {"paper": _TABLE4_PAPER, "smoke": (("FedAvg", None), ("FedIntR", 10))}
# Fig. 5 (§IV-E): local epochs, 100 rounds, each method at Table I's μ for the dataset. quick:
# FedAvg and FedIntR at the paper's E over the quick preset's rounds, the preset's E = 6 standing
# for the paper's default 10.
FEDINTR_EPOCHS = {"paper": (1, 5, 10, 20, 40), "quick": (1, 6, 20, 40), "smoke": (1, 2)}
# the E that stands for the paper's default (10)
FEDINTR_DEFAULT_E = {"paper": 10, "quick": 6, "smoke": 2}
_FIG5_METHODS = {"paper": tuple(FEDINTR_METHODS), "quick": ("FedAvg", "FedIntR"),
                 "smoke": ("FedAvg", "FedIntR")}
FEDINTR_SCALING_SEEDS = {k: len(v) for k, v in SEEDS.items()}  # seeds per run
# Notebook 06's parts (fedlib.companion.budget.fit): quick leaves out a part whose runs need more
# than 10 worker-hours and its claims say so with the estimate. Quick plans Table IV as the paper
# has it (its N, T and method settings).
TABLE4_PART = "Table IV / Fig. 4"
FIG5_PART = "Fig. 5 up to the default E"
FIG5_LONG_PART = "Fig. 5 above the default E"


def _method(base: Config, method: str, mu: float | None) -> Config:
    kw = {} if mu is None else {"mu": float(mu)}
    return base.replace(strategy=FEDINTR_METHODS[method], strategy_kw=kw)


def _grid(base: Config, grid: dict[str, tuple[float, ...]],
          seeds_of: Any) -> dict[FedIntRRunId, Config]:
    out = {}
    for method, mus in grid.items():
        for mu in (mus or (None,)):
            for s in seeds_of(method, mu):
                out[FedIntRRunId(method, s, mu=mu)] = _method(base, method, mu).replace(seed=s)
    return out


def fedintr_benchmarks_plan(scale: str, dataset: str = "fmnist", device: str = "cpu", seed: int = 0,
                            seeds: Sequence[int] | None = None, executor: str = "auto") -> Plan:
    """Notebook 05: Table I (every method over its μ grid; Table II is FedIntR's rows), Table III (β
    = 5, 0.1), Table V (Eq. 6's uniform layer weights at Table I's best μ, and at paper scale the
    per-sample option).

    Every run with each of ``seeds`` (default :data:`fedlib.companion.common.SEEDS`). ``paper``: the
    paper's grids; ``quick`` and ``smoke``: each method at Table I's best μ, Table III at β = 0.1
    for FedAvg and FedIntR; the methods and artifacts of :func:`benchmarks_left_out` are left out
    (their claims: not testable, with why). ``seed``: the only seed when ``seeds`` is empty."""
    seeds = SEEDS[scale] if seeds is None else (tuple(seeds) or (seed,))
    base = FEDINTR_PRESET.config(scale, dataset=dataset, device=device, executor=executor)
    grid, best = mu_grid(scale, dataset), _best(dataset)
    left_out = benchmarks_left_out(scale, dataset)
    table1 = _grid(base, {m: mus
                          for m, mus in grid.items() if m not in left_out}, lambda m, mu: seeds)
    methods3 = TABLE3_METHODS[scale]
    table3_grid = grid if methods3 is None else {m: grid[m] for m in methods3}
    rounds3 = FEDINTR_TABLE3_ROUNDS[scale]
    table3 = {
        replace(rid, beta=b): c.replace(partition_kw={**base.partition_kw, "beta": b},
                                        rounds=rounds3.get(b, base.rounds))
        for b in FEDINTR_BETAS[scale]
        for rid, c in _grid(base, table3_grid, lambda m, mu: seeds).items()
    }
    intr = _method(base, "FedIntR", best["FedIntR"])
    options = {"uniform (Eq. 6)": {"weighting": "uniform"}}
    if TABLE5_PER_SAMPLE[scale]:
        options["α per sample"] = {"per_sample": True}
    table5 = {
        FedIntRRunId(opt, s, mu=best["FedIntR"]): intr.replace(
            strategy_kw={**intr.strategy_kw, **kw}, seed=s)
        for opt, kw in options.items()
        for s in seeds
    }
    plan = {"table1": table1, "table3": table3, "table5": table5}
    return {a: runs for a, runs in plan.items() if a not in left_out}


def fedintr_scaling_plan(scale: str, dataset: str = "fmnist", device: str = "cpu", seed: int = 0,
                         executor: str = "auto", seeds: Sequence[int] | None = None) -> Scope:
    """Notebook 06's runs: Table IV / Fig. 4 (N clients, 20 % sampled per round, T rounds,
    evaluated every round) and Fig. 5 (local epochs E at Table I's μ for the dataset, the preset's
    rounds), up to and above the default E, each run with every seed;
    :func:`fedlib.companion.budget.fit` decides what ``quick`` keeps (:data:`TABLE4_PART` needs
    tens of worker-hours; each E above the default is a part of its own, :data:`FIG5_LONG_PART` at
    that E), and the plan names what it leaves out. ``seeds``: default ``seed, seed + 1, ...``
    (:data:`FEDINTR_SCALING_SEEDS`)."""
    seeds = tuple(seeds) if seeds is not None else tuple(
        seed + i for i in range(FEDINTR_SCALING_SEEDS[scale]))
    base = FEDINTR_PRESET.config(scale, dataset=dataset, device=device, executor=executor)
    nt, settings = FEDINTR_TABLE4.get(scale, FEDINTR_TABLE4["paper"]), FEDINTR_TABLE4_METHODS.get(
        scale, _TABLE4_PAPER)
    table4 = {
        FedIntRRunId(m, s, N=n, mu=mu): _method(base, m,
                                                mu).replace(num_clients=n, sample_fraction=0.2,
                                                            rounds=t, seed=s)
        for n, t in nt.items()
        for m, mu in settings
        for s in seeds
    }
    best, rounds, default = _best(dataset), fig5_rounds(scale, dataset), FEDINTR_DEFAULT_E[scale]

    def fig5(es: Sequence[int]) -> Plan:
        return {
            "fig5": {
                FedIntRRunId(m, s, E=e, mu=best.get(m)): _method(base, m, best.get(m)).replace(
                    local_epochs=e, seed=s, rounds=rounds[e])
                for e in es
                for m in _FIG5_METHODS[scale]
                for s in seeds
            }
        }

    es, n = FEDINTR_EPOCHS[scale], f"{len(seeds)} seed{'s' * (len(seeds) != 1)}"
    long = [e for e in es if e > default]
    t4 = (f"{TABLE4_PART} ({_and(nt)} clients, 20 % sampled, {_and(f'{t:,}' for t in nt.values())} "
          f"rounds, {len(settings)} method settings, {n})")
    return fit(
        [Part(t4, {"table4": table4}),
         Part(FIG5_PART, fig5([e for e in es if e <= default]))] + [
             Part(f"{FIG5_LONG_PART} at E = {e} ({_and(_FIG5_METHODS[scale])}, {n})", fig5([e]))
             for e in long
         ], scale)


def _and(items: Any) -> str:
    """``"a, b and c"``."""
    xs = [str(x) for x in items]
    return ", ".join(xs[:-1]) + " and " + xs[-1] if len(xs) > 1 else "".join(xs)


def fig5_rounds(scale: str, dataset: str = "fmnist") -> dict[int, int]:
    """Fig. 5's rounds by E at ``scale``: the preset's, except where :data:`FEDINTR_FIG5_ROUNDS`
    runs an E longer (to its plateau)."""
    base = FEDINTR_PRESET.config(scale, dataset=dataset).rounds
    return {e: FEDINTR_FIG5_ROUNDS[scale].get(e, base) for e in FEDINTR_EPOCHS[scale]}


def scaling_left_out(plan: Scope) -> dict[str, str]:
    """What notebook 06's ``plan`` (:func:`fedintr_scaling_plan`) leaves out, by artifact
    (``"table4"``; ``"fig5 E > default"``: the E of Fig. 5 above the default E that are left out,
    one part each), each with the parts and why (the estimate)."""
    def key(part: str) -> str:
        if part.startswith(TABLE4_PART):
            return "table4"
        return "fig5 E > default" if part.startswith(FIG5_LONG_PART) else "fig5"

    out: dict[str, str] = {}
    for p, w in plan.left_out.items():
        out[key(p)] = "; ".join(filter(None, (out.get(key(p)), f"{p}: {w}")))
    return out
