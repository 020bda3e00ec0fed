"""Notebooks 02-04 (FedCKA, arXiv and Appl. Sci. versions): layer similarity, heterogeneity, ablations and costs.

Every run is a :func:`~fedlib.presets.preset` ``("fedcka", scale)`` config; a run that two artifacts share (FedAvg,
or FedCKA with μ = 3, M = 2, linear CKA, at α = 5) is the same Config, so the store trains it once.

What ``quick`` keeps of the papers' grids (the preset's quick scale: 10 rounds × 2 local epochs on 15,000 training
images), one seed:

* Table 2: α ∈ {5, 0.1} (the papers' outer columns; 0.5 and 1.0 at paper scale), one μ per method — FedProx
  0.001 (the papers' best μ at α = 5 and 0.1 on CIFAR-10), MOON 5 (MOON's own CIFAR-10 value), FedCKA 3 (FedCKA's
  default, Table 1's best on CIFAR-10);
* local epochs E ∈ {1, 2} for FedAvg and FedCKA (paper: {1, 2, 5, 10, 20});
* M ∈ {1, 2, 3} (paper: 1..7); Table 3's four metrics; the centralized upper bound;
* costs (Table 3 / 4): the simple CNN on 5,000 synthetic CIFAR-10-shaped images, one local epoch; ResNet-50 with
  MOON's projection head on 2 clients × 8 synthetic CIFAR-100-shaped images, one step of batch 8 each (paper:
  Tiny ImageNet's shape, 10 clients, all 100,000 images, batch 128, 10 local epochs).

``paper``: the papers' exact grids — α ∈ {5, 1, 0.5, 0.1}, μ grids FedProx {0.001, 0.01, 0.1, 1}, MOON
{0.1, 1, 5, 10}, FedCKA {3, 5, 10}, E ∈ {1, 2, 5, 10, 20}, M = 1..7, Table 3's metrics (and the printed forms of
Frobenius and cosine), seeds 0, 1, 2 (the methods differ by less than a point).
"""

from __future__ import annotations

from typing import Any

from ..config import Config
from ..grid import method_name
from ..presets import preset
from ._base import Plan

__all__ = ["fedcka_similarity_plan", "fedcka_heterogeneity_plan", "fedcka_ablations_plan", "FEDCKA_MU_GRID",
           "FEDCKA_ALPHAS", "FEDCKA_EPOCHS", "FEDCKA_M", "FEDCKA_METRICS", "FEDCKA_SEEDS", "FEDCKA_MU",
           "COST_METHODS", "cost_setups", "method_name", "keeps_artifacts"]

# The papers' μ grids (§4.2) and, at quick / smoke, the subset run.
FEDCKA_MU_GRID: dict[str, dict[str, tuple[float, ...]]] = {
    "paper": {"fedprox": (0.001, 0.01, 0.1, 1.0), "moon": (0.1, 1.0, 5.0, 10.0), "fedcka": (3.0, 5.0, 10.0)},
    "quick": {"fedprox": (0.001,), "moon": (5.0,), "fedcka": (3.0,)},
    "smoke": {"fedprox": (0.001,), "moon": (5.0,), "fedcka": (3.0,)},
}
FEDCKA_MU = 3.0  # the ablations' μ: FedCKA's default and Table 1's best μ on CIFAR-10
FEDCKA_ALPHAS = {"paper": (5.0, 1.0, 0.5, 0.1), "quick": (5.0, 0.1), "smoke": (5.0, 0.1)}
FEDCKA_EPOCHS = {"paper": (1, 2, 5, 10, 20), "quick": (1, 2), "smoke": (1, 2)}
FEDCKA_M = {"paper": (1, 2, 3, 4, 5, 6, 7), "quick": (1, 2, 3), "smoke": (1, 2, 3)}
# Table 3: label -> FedCKA `sim`; paper scale adds the printed (unsigned / unnormalized) forms.
FEDCKA_METRICS = {"Frobenius norm": "frobenius", "vectorized cosine": "cosine", "kernel CKA": "rbf_cka",
                  "linear CKA": "linear_cka"}
_PRINTED_METRICS = {"Frobenius norm (printed: +‖a₁ − a₂‖²)": "frobenius_literal",
                    "vectorized cosine (printed: ‖a₁‖‖a₂‖cos θ)": "cosine_unnormalized"}
FEDCKA_SEEDS = {"paper": (0, 1, 2), "quick": (0,), "smoke": (0,)}
METHODS = ("fedavg", "fedprox", "scaffold", "moon", "fedcka")
# Table 4's methods with the μ each is timed at (the cost does not depend on μ)
COST_METHODS: dict[str, tuple[str, dict[str, Any]]] = {
    "FedAvg": ("fedavg", {}), "SCAFFOLD": ("scaffold", {}), "FedProx": ("fedprox", {"mu": 0.001}),
    "MOON": ("moon", {"mu": 5.0}), "FedCKA": ("fedcka", {"mu": FEDCKA_MU}),
}


def _seeds(scale: str, seeds: Any) -> tuple[int, ...]:
    return tuple(seeds) if seeds is not None else FEDCKA_SEEDS[scale]


def _base(scale: str, dataset: str, device: str, executor: str, **kw: Any) -> Config:
    return preset("fedcka", scale, dataset=dataset, device=device, executor=executor, **kw)


def _grid(scale: str) -> list[tuple[str, dict[str, Any]]]:
    """(strategy, strategy_kw) of every method and μ of the scale's grid."""
    grid = FEDCKA_MU_GRID[scale]
    return [(m, {"mu": mu} if m in grid else {}) for m in METHODS for mu in grid.get(m, (None,))]


def fedcka_similarity_plan(scale: str, dataset: str = "fmnist", device: str = "cpu", seed: int = 0,
                           executor: str = "auto", variant: str | None = None) -> Plan:
    """Notebook 02: FedCKA §3.1 — 10 clients on IID splits, 20 rounds of FedAvg (arXiv Fig. 2, Appl. Sci. Fig. 2).

    ``simple_cnn``: the 7-layer CNN at every scale (quick: 20 rounds × 1 local epoch on all the data; smoke: the
    preset's smoke scale). ``resnet50`` (Appl. Sci. Fig. 2's second panel, ResNet-50 with MOON's projection head):
    at paper scale, and at smoke on 40 images to exercise the code; not at quick (a 2-core CPU trains ResNet-50 at
    ~0.3 s per image)."""
    over = {"smoke": {}, "quick": {"rounds": 20, "local_epochs": 1, "n_train": None, "n_test": None},
            "paper": {"rounds": 20}}[scale]
    cnn = preset("fedcka", scale, variant=variant, dataset=dataset, device=device, seed=seed, executor=executor,
                 partition="iid", partition_kw={}, **over)
    out: Plan = {"simple_cnn": {"FedAvg (simple CNN)": cnn}}
    if scale != "quick":
        r50 = cnn.replace(model="resnet50", model_kw={"projection": True})
        if scale == "smoke":
            r50 = r50.replace(rounds=1, n_train=40, n_test=20)
        out["resnet50"] = {"FedAvg (ResNet-50)": r50}
    return out


def fedcka_heterogeneity_plan(scale: str, dataset: str = "fmnist", device: str = "cpu", seeds: Any = None,
                              executor: str = "auto") -> Plan:
    """Notebook 03: Table 2 of both versions (Table 1's α = 5 column), Appl. Sci. Fig. 5 (accuracy per round at
    α = 5, and the local-epoch sweep).

    ``table2``: ``"<method> | α=<a> | seed=<s>"`` over :data:`FEDCKA_ALPHAS` × the μ grid × seeds;
    ``epochs``: ``"<method> | E=<e> | seed=<s>"`` for FedAvg and FedCKA (μ = 3) at α = 5."""
    base = _base(scale, dataset, device, executor)
    table: dict[str, Config] = {}
    for a in FEDCKA_ALPHAS[scale]:
        for m, kw in _grid(scale):
            for s in _seeds(scale, seeds):
                table[f"{method_name(m, kw)} | α={a:g} | seed={s}"] = base.replace(
                    strategy=m, strategy_kw=kw, partition_kw={"beta": a}, seed=s)
    epochs: dict[str, Config] = {}
    for e in FEDCKA_EPOCHS[scale]:
        for m, kw in (("fedavg", {}), ("fedcka", {"mu": FEDCKA_MU})):
            for s in _seeds(scale, seeds):
                epochs[f"{method_name(m, kw)} | E={e} | seed={s}"] = base.replace(
                    strategy=m, strategy_kw=kw, local_epochs=e, seed=s)
    return {"table2": table, "epochs": epochs}


def fedcka_ablations_plan(scale: str, dataset: str = "fmnist", device: str = "cpu", seeds: Any = None,
                          executor: str = "auto") -> Plan:
    """Notebook 04 at α = 5: the M-layer ablation (arXiv Fig. 5 / Appl. Sci. Fig. 6) with the centralized upper
    bound, Table 3's similarity metrics, and the runs whose clients' models give the between-client variance per
    layer (FedAvg and FedCKA, kept with ``artifacts=True``).

    ``M``: ``"FedCKA (μ=3, M=<m>) | seed=<s>"``; ``metrics``: ``"<label> | seed=<s>"`` (with FedAvg as "None
    (FedAvg)"); ``bounds``: FedAvg and the centralized model; ``variance``: FedAvg and FedCKA (M = 2)."""
    base = _base(scale, dataset, device, executor)
    seeds = _seeds(scale, seeds)
    fedavg = {s: base.replace(strategy="fedavg", strategy_kw={}, seed=s) for s in seeds}
    cka = lambda s, **kw: base.replace(strategy="fedcka", strategy_kw={"mu": FEDCKA_MU, **kw}, seed=s)  # noqa: E731
    M = {f"FedCKA (μ={FEDCKA_MU:g}, M={m}) | seed={s}": cka(s, **({} if m == 2 else {"M": m}))
         for m in FEDCKA_M[scale] for s in seeds}
    metrics_ = dict(FEDCKA_METRICS, **(_PRINTED_METRICS if scale == "paper" else {}))
    metrics = {f"None (FedAvg) | seed={s}": fedavg[s] for s in seeds}
    metrics.update({f"{label} | seed={s}": cka(s, **({} if sim == "linear_cka" else {"sim": sim}))
                    for label, sim in metrics_.items() for s in seeds})
    # the centralized model: one trainer holding all the data, with the same local-training budget per round
    bounds = {f"FedAvg | seed={s}": fedavg[s] for s in seeds}
    bounds.update({f"centralized | seed={s}": base.replace(strategy="centralized", strategy_kw={}, seed=s)
                   for s in seeds})
    variance = {"FedAvg": fedavg[seeds[0]], f"FedCKA (μ={FEDCKA_MU:g}, M=2)": cka(seeds[0])}
    return {"M": M, "metrics": metrics, "bounds": bounds, "variance": variance}


def keeps_artifacts(cfg: Config) -> bool:
    """Whether a run keeps its clients' final models (``fetch(..., artifacts=True)``): FedAvg and FedCKA (μ = 3,
    M = 2, linear CKA) at α = 5, seed 0 — notebook 04's between-client variance per layer. Notebook 03 runs them
    too, and asks for the same, so that they are trained once."""
    return (cfg.seed == 0 and cfg.partition == "dirichlet" and cfg.partition_kw.get("beta") == 5.0
            and cfg.local_epochs == preset("fedcka", _scale_of(cfg)).local_epochs
            and (cfg.strategy == "fedavg" or (cfg.strategy == "fedcka" and cfg.strategy_kw == {"mu": FEDCKA_MU})))


def _scale_of(cfg: Config) -> str:
    return cfg.label.split("/")[1] if cfg.label.count("/") >= 1 else "paper"


def cost_setups(scale: str, device: str = "cpu") -> dict[str, dict[str, Any]]:
    """The timing setups: ``cnn`` and ``r50`` (Table 4: the simple CNN and ResNet-50 with MOON's projection head) and
    ``metrics`` (Table 3's similarity metrics on the simple CNN), each ``{"title", "configs": {label: Config},
    "dataset": the shape it copies, "n_train", "reps"}`` for :func:`fedlib.timing.cached_costs` (synthetic data,
    equal IID clients). The cost does not depend on μ; FedCKA's M = 2 layers are ResNet-50's stem and first
    post-residual block."""
    cnn = preset("fedcka", "paper", dataset="cifar10", device=device, rounds=2)
    # ResNet-50 + projection head; Table 4 times it on Tiny ImageNet (64x64, 200 classes), quick on CIFAR-100's shape
    r50_data = "tinyimagenet" if scale == "paper" else "cifar100"
    r50 = preset("fedcka", "paper", dataset=r50_data, device=device, rounds=2)
    size = {"paper": dict(cnn=dict(n_train=50_000, reps=2), r50=dict(n_train=100_000, reps=1)),
            "quick": dict(cnn=dict(n_train=5_000, reps=2, local_epochs=1),
                          r50=dict(n_train=16, reps=3, num_clients=2, batch_size=8, local_epochs=1)),
            "smoke": dict(cnn=dict(n_train=600, reps=1, local_epochs=1),
                          r50=dict(n_train=8, reps=1, num_clients=2, batch_size=4, local_epochs=1))}[scale]
    metrics = {"None (FedAvg)": ("fedavg", {})}
    metrics.update({label: ("fedcka", {"mu": FEDCKA_MU, "sim": sim}) for label, sim in FEDCKA_METRICS.items()})
    setups = {"cnn": (cnn, "cifar10", "simple CNN (7 layers), CIFAR-10-shaped", COST_METHODS, "cnn"),
              "r50": (r50, r50_data, f"ResNet-50 + projection head, {r50_data}-shaped", COST_METHODS, "r50"),
              "metrics": (cnn, "cifar10", "FedCKA's similarity metrics, simple CNN, CIFAR-10-shaped", metrics, "cnn")}
    out = {}
    for name, (cfg, shape, title, methods, sized) in setups.items():
        kw = dict(size[sized])
        n_train, reps = kw.pop("n_train"), kw.pop("reps")
        cfg = cfg.replace(dataset="synthetic", partition="iid", partition_kw={}, **kw)
        out[name] = {"title": title, "dataset": shape, "n_train": n_train, "reps": reps,
                     "configs": {label: cfg.replace(strategy=st, strategy_kw=skw) for label, (st, skw) in
                                 methods.items()}}
    return out
