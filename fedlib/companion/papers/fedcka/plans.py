"""Notebooks 02-04 (FedCKA, arXiv and Appl. Sci. versions): layer similarity, heterogeneity,
ablations and costs.

Every run is a config of FedCKA's preset at ``scale``
(:mod:`fedlib.companion.papers.fedcka.preset`); a run that several artifacts share (FedAvg, or
FedCKA with μ = 3, M = 2, linear CKA, at α = 5: notebook 04, the local-epoch sweep and, but at
quick, Table 2) is the same Config, so the store trains it once.

Each notebook's runs are :class:`~fedlib.companion.budget.Part` s in priority order (the claim that
needs them most first); ``paper`` and ``smoke`` run every part, ``quick`` every part but those over
10 worker-hours or that cannot reach their plateau (:func:`fedlib.companion.budget.fit`) — their
claims are "not testable at this scale", with the reason (each plan's ``left_out``: a
:class:`~fedlib.companion.budget.Scope`). Seeds: 0-4 at ``quick`` and ``paper`` (every comparison
has five seeds per method), 0 at ``smoke``.

* μ: ``paper`` tunes over the papers' grids (§4.2: FedProx {0.001, 0.01, 0.1, 1}, MOON {0.1, 1, 5,
  10}, FedCKA {3, 5, 10}); ``quick`` and ``smoke`` run the papers' best μ on CIFAR-10 (FedProx 0.001
  at α = 5 and 0.1; MOON 10, Table 1's α = 5 and Table 2's α = 0.1; FedCKA 3, Table 1's α = 5 and
  Table 2's α = 0.1 and 0.5 / 1).
* ``quick`` — rounds by α (:data:`~fedlib.companion.papers.fedcka.preset.ALPHA_ROUNDS`: 25 at α = 5,
  35 at α = 1 and 0.5, 240 at α = 0.1; Table 2 runs 35 at α = 5 and 45 at α = 0.5, where MOON needs
  them: ``TABLE2_ROUNDS``). Notebook 03: Table 2 at every α with every method; the local-epoch sweep
  at E = 1, 2, 5, 10, 20, E < 5 with more rounds (``EPOCH_ROUNDS``: they cannot leave chance level
  in α = 5's 25 rounds). Notebook 04: FedAvg and FedCKA (M = 2) at α = 5, the cost timings, M = 1-7,
  the centralized bound, Table 3's metrics.
* Notebook 02: the preset with §3.1's changes (IID, 20 rounds); ResNet-50 (Appl. Sci. Fig. 2) at
  paper scale, and at smoke on 40 images to exercise the code.
* Costs (Tables 3-4, :func:`cost_setups`): synthetic data of the papers' shapes, every method timed
  in each of at least 5 interleaved repeats (:func:`fedlib.companion.timing.round_costs`).
"""

from __future__ import annotations

from typing import Any

from fedlib.config import Config
from fedlib.companion.grid import method_name
from fedlib.companion.papers.fedcka.preset import (ALPHA_ROUNDS, EPOCH_ROUNDS, FEDCKA_PRESET,
                                                   PRINTED_METRICS, R50_SIMILARITY, R50_TIMED_ON,
                                                   TABLE1_ONLY, TABLE2_ROUNDS)
from fedlib.companion.common import SEEDS, FedCKARunId, RunId
from fedlib.companion.budget import Part, Scope, fit

__all__ = ["fedcka_similarity_plan", "fedcka_heterogeneity_plan", "fedcka_ablations_plan",
           "table2_part", "paper_mu_part", "PAPER_T2_MU", "FEDCKA_MU_GRID", "FEDCKA_ALPHAS",
           "FEDCKA_EPOCHS", "at_alpha", "FEDCKA_M", "FEDCKA_METRICS", "FEDCKA_VARIANT_METRICS",
           "FEDCKA_SEEDS", "FEDCKA_MU", "COST_METHODS", "TIMING_PART", "cost_setups", "method_name",
           "keeps_artifacts"]

# The papers' μ grids (§4.2) and, at quick / smoke, the papers' best μ on CIFAR-10.
FEDCKA_MU_GRID: dict[str, dict[str, tuple[float, ...]]] = {
    "paper": {
        "fedprox": (0.001, 0.01, 0.1, 1.0), "moon": (0.1, 1.0, 5.0, 10.0),
        "fedcka": (3.0, 5.0, 10.0)
    },
    "quick": {"fedprox": (0.001, ), "moon": (10.0, ), "fedcka": (3.0, )},
    "smoke": {"fedprox": (0.001, ), "moon": (10.0, ), "fedcka": (3.0, )},
}
FEDCKA_MU = 3.0  # the ablations' μ: FedCKA's best μ on CIFAR-10 in Table 1
# Table 2's μ per α as both versions state it (§4.2: "For FedCKA, the best μ is 5, 3, and 3 for each
# α ∈ [5.0, 0.5 (Appl. Sci.: 1.0), 0.1], respectively. For MOON, the best μ is 0.1, 10, and 10. For
# FedProx, the best μ is 0.001, 0.1, and 0.001."). Quick and smoke run it beside the fixed μ above:
# "the paper's μ for this setting", no search.
PAPER_T2_MU: dict[float, dict[str, float]] = {
    5.0: {"fedcka": 5.0, "moon": 0.1, "fedprox": 0.001},
    1.0: {"fedcka": 3.0, "moon": 10.0, "fedprox": 0.1},
    0.5: {"fedcka": 3.0, "moon": 10.0, "fedprox": 0.1},
    0.1: {"fedcka": 3.0, "moon": 10.0, "fedprox": 0.001},
}
# α in priority order (quick runs what fits); the arXiv Table 2 has 0.5, the Appl. Sci. one 1.0
FEDCKA_ALPHAS = {"paper": (5.0, 1.0, 0.5, 0.1), "quick": (5.0, 0.1, 1.0, 0.5), "smoke": (5.0, 0.1)}
FEDCKA_EPOCHS = {"paper": (1, 2, 5, 10, 20), "quick": (1, 2, 5, 10, 20), "smoke": (1, 2)}
FEDCKA_M = {"paper": (1, 2, 3, 4, 5, 6, 7), "quick": (1, 2, 3, 4, 5, 6, 7), "smoke": (1, 2, 3)}
# Table 3: label -> FedCKA `sim`; paper scale adds the printed (unsigned / unnormalized) forms.
FEDCKA_METRICS = {
    "Frobenius norm": "frobenius", "vectorized cosine": "cosine", "kernel CKA": "rbf_cka",
    "linear CKA": "linear_cka"
}
_PRINTED_METRICS = {"Frobenius norm (printed: +‖a₁ − a₂‖²)": "frobenius_literal",
                    "vectorized cosine (printed: ‖a₁‖‖a₂‖cos θ)": "cosine_unnormalized"}
# Not the paper's: Table 3's squared Frobenius norm summed over a batch's activation maps diverges
# in FedCKA's setup (fedlib.strategies.fedcka.FEDCKA_SIMILARITIES); its mean over the entries shows
# what the metric does when it trains.
FEDCKA_VARIANT_METRICS = {"Frobenius norm per entry (not the paper's)": "frobenius_mean"}
FEDCKA_SEEDS = SEEDS
# Table 2's methods, in quick's priority order
METHODS = ("fedavg", "fedcka", "moon", "fedprox", "scaffold")
# Table 4's methods with the μ each is timed at (the cost does not depend on μ)
COST_METHODS: dict[str, tuple[str, dict[str, Any]]] = {
    "FedAvg": ("fedavg", {}), "SCAFFOLD": ("scaffold", {}), "FedProx": ("fedprox", {"mu": 0.001}),
    "MOON": ("moon", {"mu": 10.0}), "FedCKA": ("fedcka", {"mu": FEDCKA_MU}),
}
TIMING_PART = "Tables 3-4: training cost per round (timed)"
# the shape Table 4's ResNet-50 is timed on
R50_SHAPE = {"tinyimagenet": "Tiny ImageNet", "cifar100": "CIFAR-100"}
# Seconds the timings of cost_setups take on this CPU (5 interleaved repeats after one untimed round
# each; measured 8.4 min on one thread beside the campaign, about half that on an idle CPU).
_TIMING_S = {"paper": 0.0, "quick": 420.0, "smoke": 0.0}


def _seeds(scale: str, seeds: Any) -> tuple[int, ...]:
    return tuple(seeds) if seeds is not None else FEDCKA_SEEDS[scale]


def _mus(scale: str, strategy: str, alpha: float | None = None) -> list[dict[str, Any]]:
    """The μ a method runs at: the scale's grid and, at ``alpha``, Table 2's stated μ
    (:data:`PAPER_T2_MU`)."""
    grid = FEDCKA_MU_GRID[scale]
    if strategy not in grid:
        return [{}]
    stated = PAPER_T2_MU.get(alpha, {}).get(strategy) if alpha is not None else None
    return [{"mu": mu}
            for mu in dict.fromkeys((*grid[strategy], *((stated, ) if stated is not None else ())))]


def paper_mu_part(method: str, alpha: float) -> str:
    """The part of the runs at Table 2's stated μ that the fixed μ does not cover (``method``: a
    table label)."""
    return f"Table 2, α = {alpha:g}: {method} at the paper's μ"


def at_alpha(base: Config, scale: str, alpha: float,
             rounds: dict[str, dict[float, int]] = ALPHA_ROUNDS) -> Config:
    """``base`` on clients split by Dirichlet ``alpha``, with the rounds ``scale`` runs at that α
    where it names them (``rounds[scale]``:
    :data:`~fedlib.companion.papers.fedcka.preset.ALPHA_ROUNDS`; Table 2:
    :data:`~fedlib.companion.papers.fedcka.preset.TABLE2_ROUNDS`)."""
    c = base.replace(partition_kw={"beta": alpha})
    return c.replace(rounds=rounds[scale][alpha]) if alpha in rounds[scale] else c


def table2_part(method: str, alpha: float) -> str:
    """The name of the part that holds ``method`` (a table label: "FedAvg", "MOON", ...) at
    ``alpha``."""
    who = "FedAvg, FedCKA" if method in ("FedAvg", "FedCKA") else method
    return f"Table 2, α = {alpha:g}: {who}"


def fedcka_similarity_plan(scale: str, dataset: str = "fmnist", device: str = "cpu",
                           seeds: Any = None, executor: str = "auto",
                           variant: str | None = None) -> Scope:
    """Notebook 02: FedCKA §3.1 — 10 clients on IID splits, 20 rounds of FedAvg (arXiv Fig. 2, Appl.
    Sci. Fig. 2).

    ``simple_cnn``: ``"FedAvg (simple CNN) | seed=<s>"``, the preset with §3.1's changes (IID, 20
    rounds; quick: the quick preset's epochs, data and batch). ``resnet50`` (Appl. Sci. Fig. 2's
    second panel, ResNet-50 with MOON's projection head): at paper scale, and at smoke on 40 images
    to exercise the code; at quick its five seeds are over the budget's 10 worker-hours
    (:func:`~fedlib.companion.budget.fit` names the estimate)."""
    over = {"smoke": {}, "quick": {"rounds": 20}, "paper": {"rounds": 20}}[scale]
    cnn = {s: FEDCKA_PRESET.config(scale, variant=variant, dataset=dataset, device=device, seed=s,
                            executor=executor, partition="iid", partition_kw={}, **over)
           for s in _seeds(scale, seeds)}
    r50 = {s: c.replace(model="resnet50", model_kw={"projection": True}, **R50_SIMILARITY[scale])
           for s, c in cnn.items()}
    parts = [Part("Fig. 2: FedAvg on IID clients, simple CNN",
                  {"simple_cnn": {RunId("FedAvg (simple CNN)", s): c for s, c in cnn.items()}}),
             Part("Appl. Sci. Fig. 2: FedAvg on IID clients, ResNet-50",
                  {"resnet50": {RunId("FedAvg (ResNet-50)", s): c for s, c in r50.items()}})]
    return fit(parts, scale)


def fedcka_heterogeneity_plan(scale: str, dataset: str = "fmnist", device: str = "cpu",
                              seeds: Any = None, executor: str = "auto") -> Scope:
    """Notebook 03: Table 2 of both versions (Table 1's α = 5 column), Appl. Sci. Fig. 5 (accuracy
    per round at α = 5, and the local-epoch sweep).

    ``table2``: :class:`~fedlib.companion.common.FedCKARunId` ``"<method> | α=<a> | seed=<s>"`` (one
    part per α and method; FedAvg and FedCKA together); ``epochs``: ``"<method> | E=<e> |
    seed=<s>"`` for FedAvg and FedCKA (μ = 3) at α = 5."""
    base = FEDCKA_PRESET.config(scale, dataset=dataset, device=device, executor=executor)
    seeds = _seeds(scale, seeds)
    parts: dict[str, dict[RunId, Config]] = {}
    table1_only = dataset in TABLE1_ONLY[scale]  # Table 1's other columns: α = 5
    for a in (5.0,) if table1_only else FEDCKA_ALPHAS[scale]:
        for m in METHODS:
            label = method_name(m)
            for kw in _mus(scale, m, a):
                extra = kw and kw["mu"] not in FEDCKA_MU_GRID[scale][m]
                runs = parts.setdefault(
                    paper_mu_part(label, a) if extra else table2_part(label, a), {})
                for s in seeds:
                    runs[FedCKARunId(method_name(m, kw), s, alpha=a)] = at_alpha(
                        base, scale, a, TABLE2_ROUNDS).replace(strategy=m, strategy_kw=kw, seed=s)
    at5 = at_alpha(base, scale, 5.0)
    ep_rounds = EPOCH_ROUNDS[scale]
    epochs = {
        FedCKARunId(method_name(m, kw), s, E=e): at5.replace(strategy=m, strategy_kw=kw,
                                                             local_epochs=e,
                                                             rounds=ep_rounds.get(e, at5.rounds),
                                                             seed=s)
        for e in (() if table1_only else FEDCKA_EPOCHS[scale])
        for m, kw in (("fedavg", {}), ("fedcka", {"mu": FEDCKA_MU}))
        for s in seeds
    }
    return fit([Part(n, {"table2": r}) for n, r in parts.items()] + [
        Part("Appl. Sci. Fig. 5: local epochs E ≥ 5",
             {"epochs": {n: c
                         for n, c in epochs.items() if c.local_epochs >= 5}}),
        Part("Appl. Sci. Fig. 5: local epochs E < 5",
             {"epochs": {n: c
                         for n, c in epochs.items() if c.local_epochs < 5}})
    ], scale)


def fedcka_ablations_plan(scale: str, dataset: str = "fmnist", device: str = "cpu",
                          seeds: Any = None, executor: str = "auto") -> Scope:
    """Notebook 04 at α = 5: the M-layer ablation (arXiv Fig. 5 / Appl. Sci. Fig. 6) with the
    centralized upper bound, Table 3's similarity metrics, the between-client variance per layer
    (FedAvg and FedCKA, their clients' models kept: :func:`keeps_artifacts`) and the timed costs
    (Tables 3-4, :data:`TIMING_PART`).

    ``M``: ``"FedCKA (μ=3, M=<m>) | seed=<s>"``; ``metrics``: ``"<label> | seed=<s>"`` (FedAvg as
    "None (FedAvg)"); ``bounds``: FedAvg and the centralized model; ``variance``: FedAvg and FedCKA
    (M = 2)."""
    base = FEDCKA_PRESET.config(scale, dataset=dataset, device=device, executor=executor)
    base = at_alpha(base, scale, 5.0)
    seeds = _seeds(scale, seeds)
    fedavg = {s: base.replace(strategy="fedavg", strategy_kw={}, seed=s) for s in seeds}
    cka = lambda s, **kw: base.replace(strategy="fedcka", strategy_kw={"mu": FEDCKA_MU, **kw}, seed=
                                       s)  # noqa: E731
    m_runs = lambda ms: {"M": {RunId(f"FedCKA (μ={FEDCKA_MU:g}, M={m})", s):  # noqa: E731
                               cka(s, **({} if m == 2 else {"M": m})) for m in ms for s in seeds}}
    sims = {**FEDCKA_METRICS, **_PRINTED_METRICS, **FEDCKA_VARIANT_METRICS}
    metric = lambda labels: {
        "metrics": {
            RunId(lab, s): cka(s, sim=sims[lab])
            for lab in labels  # noqa: E731
            for s in seeds
        }
    }
    ms = FEDCKA_M[scale]
    parts = [
        Part("FedAvg and FedCKA (M = 2) at α = 5", {
            **m_runs([2]), "bounds": {RunId("FedAvg", s): fedavg[s] for s in seeds},
            "metrics": {**{RunId("None (FedAvg)", s): fedavg[s] for s in seeds},
                        **{RunId("linear CKA", s): cka(s) for s in seeds}},
            "variance": {**{RunId("FedAvg", s): fedavg[s] for s in seeds},
                         **{RunId(f"FedCKA (μ={FEDCKA_MU:g}, M=2)", s): cka(s) for s in seeds}}}),
        Part(TIMING_PART, {}, extra_s=_TIMING_S[scale]),
        Part("M = 3", m_runs([m for m in ms if m == 3])),
        Part("centralized upper bound", {"bounds": {RunId("centralized", s): base.replace(
            strategy="centralized", strategy_kw={}, seed=s) for s in seeds}}),
        Part("M = 1", m_runs([m for m in ms if m == 1])),
        Part("Table 3: Frobenius norm, vectorized cosine",
             metric(["Frobenius norm", "vectorized cosine"])),
        Part("Table 3: kernel CKA", metric(["kernel CKA"])),
        Part("M = 4-7", m_runs([m for m in ms if m >= 4])),
        Part("Table 3: Frobenius norm per entry", metric(list(FEDCKA_VARIANT_METRICS))),
    ]
    if PRINTED_METRICS[scale]:
        parts.append(Part("Table 3: the printed forms", metric(list(_PRINTED_METRICS))))
    return fit([p for p in parts if p.extra_s or any(p.runs.values())], scale)


def keeps_artifacts(cfg: Config) -> bool:
    """Whether a run keeps its clients' final models (``fetch(..., artifacts=True)``): FedAvg on IID
    clients (FedCKA §3.1, notebook 02's layer similarity), and FedAvg and FedCKA (μ = 3, M = 2,
    linear CKA) at α = 5 and the preset's epochs and α = 5's rounds, every seed — notebook 04's
    between-client variance per layer. Notebook 03 runs the latter too (the local-epoch sweep's
    preset E; Table 2's α = 5 column but at quick, where it runs longer), and asks for the same, so
    that they are trained once."""
    if not cfg.scale:
        return False
    if cfg.partition == "iid":
        return cfg.strategy == "fedavg"
    at5 = at_alpha(FEDCKA_PRESET.config(cfg.scale), cfg.scale, 5.0)
    return (cfg.partition == "dirichlet" and cfg.partition_kw.get("beta") == 5.0 and
            cfg.local_epochs == at5.local_epochs and cfg.rounds == at5.rounds and
            (cfg.strategy == "fedavg" or
             (cfg.strategy == "fedcka" and cfg.strategy_kw == {"mu": FEDCKA_MU})))


def cost_setups(scale: str, device: str = "cpu") -> dict[str, dict[str, Any]]:
    """The timing setups: ``cnn`` and ``r50`` (Table 4: the simple CNN and ResNet-50 with MOON's
    projection head) and ``metrics`` (Table 3's similarity metrics on the simple CNN), each
    ``{"title", "configs": {label: Config}, "dataset": the shape it copies, "n_train", "reps"}`` for
    :func:`fedlib.companion.timing.cached_costs` (synthetic data, equal IID clients; ``reps`` >= 5
    interleaved repeats). The cost does not depend on μ; FedCKA's M = 2 layers are ResNet-50's stem
    and first post-residual block. ``paper`` times one local epoch per round (the papers run 10: the
    ratios to FedAvg do not depend on it); ``smoke`` has no ``r50`` (minutes on a CPU even for 4
    images)."""
    cnn = FEDCKA_PRESET.config("paper", dataset="cifar10", device=device, rounds=2)
    r50_data = R50_TIMED_ON[scale]  # ResNet-50 + projection head, timed on this dataset's shape
    r50 = FEDCKA_PRESET.config("paper", dataset=r50_data, device=device, rounds=2)
    size = {
        "paper": dict(cnn=dict(n_train=50_000, reps=5, local_epochs=1),
                      r50=dict(n_train=100_000, reps=5, local_epochs=1)),
        "quick": dict(cnn=dict(n_train=2_560, reps=5, local_epochs=1),
                      r50=dict(n_train=8, reps=5, num_clients=2, batch_size=4, local_epochs=1)),
        "smoke": dict(cnn=dict(n_train=64, reps=5, num_clients=2, batch_size=16, local_epochs=1))
    }[scale]
    metrics = {"None (FedAvg)": ("fedavg", {})}
    metrics.update(
        {label: ("fedcka", {"mu": FEDCKA_MU, "sim": sim})
         for label, sim in FEDCKA_METRICS.items()})
    setups = {
        "cnn": (cnn, "cifar10", "simple CNN (7 layers), CIFAR-10-shaped", COST_METHODS, "cnn"),
        "r50": (r50, r50_data, f"ResNet-50 + projection head, {R50_SHAPE[r50_data]}-shaped",
                COST_METHODS, "r50"),
        "metrics": (cnn, "cifar10", "FedCKA's similarity metrics, simple CNN, CIFAR-10-shaped",
                    metrics, "cnn")
    }
    out = {}
    for name, (cfg, shape, title, methods, sized) in setups.items():
        if sized not in size:  # smoke: no ResNet-50 (minutes on a CPU even for a few images)
            continue
        kw = dict(size[sized])
        n_train, reps = kw.pop("n_train"), kw.pop("reps")
        cfg = cfg.replace(dataset="synthetic", partition="iid", partition_kw={}, **kw)
        out[name] = {
            "title": title, "dataset": shape, "n_train": n_train, "reps": reps, "configs": {
                label: cfg.replace(strategy=st, strategy_kw=skw)
                for label, (st, skw) in methods.items()
            }
        }
    return out


def keeps_models(cfg: Config) -> bool:
    """Whether a planned run keeps its clients' final models, as the notebook that renders it asks
    (:func:`fedlib.companion.papers.fedcka.plans.keeps_artifacts`: FedCKA's layer similarity,
    notebooks 02 and 04), so rendering does not retrain it."""
    return cfg.model == "simple_cnn" and keeps_artifacts(cfg)
