"""Experiment configuration and the per-paper presets.

An experiment is a :class:`Config`; ``fedlib.results.run(cfg)`` turns it into a record. Every field that can
change a number is part of the config's identity (:meth:`Config.key`); fields that only say *where* or *how fast*
it runs (device, executor, checkpointing) are not, and are recorded as provenance instead.

Presets reproduce each paper's setup at three scales:

* ``paper`` — the paper's exact setup (rounds, epochs, batch, optimizer), for a GPU;
* ``quick`` — meaningful numbers on a 2-core CPU in minutes (fewer rounds / epochs, full data);
* ``smoke`` — seconds on a CPU, for CI (a few hundred samples, one or two rounds). Never a result.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

SCALES = ("smoke", "quick", "paper")

# Fields that describe where/how a run executes, not what it computes.
EXECUTION_FIELDS = frozenset({"device", "executor", "checkpoint_every", "label", "chunk_size", "compile",
                              "cuda_graph"})


@dataclass(frozen=True)
class Config:
    """One federated experiment. Names follow the papers (``mu``, ``beta``/``alpha``, ``M`` live in kwargs)."""

    # what is trained
    dataset: str = "fmnist"
    model: str = "intr_cnn"
    model_kw: dict[str, Any] = field(default_factory=dict)
    strategy: str = "fedavg"
    strategy_kw: dict[str, Any] = field(default_factory=dict)
    # the federation
    partition: str = "dirichlet"
    partition_kw: dict[str, Any] = field(default_factory=lambda: {"beta": 0.5})
    num_clients: int = 10
    sample_fraction: float = 1.0
    rounds: int = 100
    # local training
    local_epochs: int = 10
    batch_size: int = 512
    optimizer: str = "sgd"
    lr: float = 0.01
    momentum: float = 0.9
    weight_decay: float = 1e-5
    lr_milestones: tuple[float, ...] = ()  # fractions of `rounds` at which lr *= lr_gamma (FedBABU: 0.5, 0.75)
    lr_gamma: float = 0.1
    optimizer_kw: dict[str, Any] = field(default_factory=dict)  # options of package optimizers (fedlib.optim)
    lr_step: tuple[int, float] | None = None  # per-epoch StepLR inside local training: (step_size epochs, gamma)
    persistent_optimizer: bool = False  # each client keeps its optimizer state across rounds (a long-lived trainer)
    augment: str | None = None  # None: the dataset's default in the papers
    drop_last: bool = False  # MOON's loader drops the last partial batch; a client smaller than a batch keeps one
    # data scale (None: the whole split)
    n_train: int | None = None
    n_test: int | None = None
    # evaluation
    eval_every: int = 1
    personal_eval: bool = False  # per-client test splits (shards / label groups)
    seed: int = 0
    # numerics: "fp32", or "bf16" (forward pass under torch.autocast; parameters, optimizer state and the loss stay
    # float32). bf16 changes the numbers, so it is part of the identity; benchmarks/precision.py records its accuracy.
    precision: str = "fp32"
    # execution (not part of the identity)
    device: str = "cpu"
    executor: str = "auto"  # "sequential" | "vectorized" | "auto"
    chunk_size: int | None = None  # clients per vectorized chunk (None: all sampled clients)
    checkpoint_every: int = 0  # rounds; 0 disables checkpoints
    compile: bool = False  # torch.compile the vectorized executor's loss (opt-in; for GPUs, slower on this CPU)
    # CUDA only, vectorized executor: fixed-shape steps replayed from one captured CUDA graph (opt-in; the same
    # training up to float rounding, see fedlib/vectorized.py "Static steps" and benchmarks/RESULTS.md)
    cuda_graph: bool = False
    label: str = ""

    def replace(self, **changes: Any) -> "Config":
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise TypeError(f"Config has no field(s) {sorted(unknown)}; valid fields: {sorted(self.identity())}")
        return dataclasses.replace(self, **changes)

    def identity(self) -> dict[str, Any]:
        """The fields that determine the numbers (everything but execution details)."""
        d = dataclasses.asdict(self)
        return {k: v for k, v in d.items() if k not in EXECUTION_FIELDS
                and not (k in _LATER_FIELDS and v == _LATER_FIELDS[k])}

    def key(self) -> str:
        """Stable 16-hex hash of :meth:`identity` (the results store's key)."""
        blob = json.dumps(self.identity(), sort_keys=True, default=_jsonable)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(dataclasses.asdict(self), default=_jsonable))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Config":
        d = dict(d)
        if "lr_milestones" in d:
            d["lr_milestones"] = tuple(d["lr_milestones"])
        if d.get("lr_step") is not None:
            d["lr_step"] = tuple(d["lr_step"])
        return cls(**{k: v for k, v in d.items() if k in {f.name for f in dataclasses.fields(cls)}})

    def validate(self) -> "Config":
        """Raise one clear error for impossible settings."""
        checks = [
            (self.num_clients >= 1, "num_clients must be >= 1"),
            (0 < self.sample_fraction <= 1, "sample_fraction must be in (0, 1]"),
            (self.rounds >= 1, "rounds must be >= 1"),
            (self.local_epochs >= 1, "local_epochs must be >= 1"),
            (self.batch_size >= 1, "batch_size must be >= 1"),
            (self.lr >= 0, "lr must be >= 0"),
            (self.eval_every >= 1, "eval_every must be >= 1"),
            (all(0 < m <= 1 for m in self.lr_milestones), "lr_milestones are fractions of rounds in (0, 1]"),
            (self.executor in ("auto", "sequential", "vectorized"),
             f"executor {self.executor!r} is not one of 'auto', 'sequential', 'vectorized'"),
            (self.precision in ("fp32", "bf16"), f"precision {self.precision!r} is not one of 'fp32', 'bf16'"),
            (self.optimizer in _optimizers(),
             f"optimizer {self.optimizer!r} is unknown; valid optimizers: {_optimizers()}"),
            (isinstance(self.optimizer_kw, dict), "optimizer_kw must be a dict"),
            (self.lr_step is None or (len(self.lr_step) == 2 and int(self.lr_step[0]) >= 1
                                      and 0 < float(self.lr_step[1]) <= 1),
             "lr_step is (step_size >= 1 epochs, 0 < gamma <= 1) or None"),
        ]
        for ok, msg in checks:
            if not ok:
                raise ValueError(f"Invalid config: {msg}.")
        return self


# Fields added after records were first stored: left out of the identity while at these defaults, so every
# earlier config keeps its key.
_LATER_FIELDS: dict[str, Any] = {"optimizer_kw": {}, "lr_step": None, "persistent_optimizer": False}


def _optimizers() -> list[str]:
    from .optim import OPTIMIZERS

    return sorted(OPTIMIZERS)


def _jsonable(o: Any) -> Any:
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    return str(o)


# --------------------------------------------------------------------------------------------- presets
# Each paper's setup, with the sentence it comes from. `quick` / `smoke` overrides shrink it for a CPU.

_PAPER: dict[str, dict[str, Any]] = {
    # FedIntR §IV-A: "SGD ... learning rate of 0.01, weight decay of 0.00001, and momentum of 0.9. batch size
    # 512, local epochs 10, training rounds 100. random horizontal flip except SVHN", 10 clients, Dirichlet β=0.5.
    "fedintr": dict(dataset="fmnist", model="intr_cnn", partition="dirichlet", partition_kw={"beta": 0.5},
                    num_clients=10, rounds=100, local_epochs=10, batch_size=512, lr=0.01, momentum=0.9,
                    weight_decay=1e-5),
    # FedCKA (arXiv & Appl. Sci.) Experimental Setup: "SGD ... learning rate of 0.1, momentum of 0.9, weight
    # decay of 0.00001. Local epochs are set to 10 ... batch size 128 ... 100 communication rounds on CIFAR-10";
    # 10 clients, Dirichlet α = 5.0 by default. (MOON's code uses lr 0.01; the paper says 0.1 — we follow it.)
    "fedcka": dict(dataset="cifar10", model="simple_cnn", partition="dirichlet", partition_kw={"beta": 5.0},
                   num_clients=10, rounds=100, local_epochs=10, batch_size=128, lr=0.1, momentum=0.9,
                   weight_decay=1e-5, augment="none"),
    # FedER thesis §4.2 / Table 4.1: ResNet-18 (CIFAR-style), CIFAR-100 with cutout, 4 clients (one GPU each),
    # batch 128, lr 1e-3, weight decay 1e-4, StepLR (if applicable) step 25 decay 0.5 per epoch, "250 epochs".
    # The thesis does not state the split into rounds or the partition: each client returns its model after every
    # epoch (§1.2.1, curves per epoch with a test point per round), so 250 rounds x 1 local epoch, IID shards.
    # Each client is one long-lived trainer: its optimizer state persists across rounds (FedAvg's too).
    "feder": dict(dataset="cifar100", model="resnet18", partition="iid", partition_kw={}, num_clients=4,
                  rounds=250, local_epochs=1, batch_size=128, optimizer="adam", lr=1e-3, momentum=0.9,
                  weight_decay=1e-4, augment="crop_flip_cutout", persistent_optimizer=True),
}

_SCALE: dict[str, dict[str, dict[str, Any]]] = {
    "fedintr": {
        # ~5 min on a 2-core CPU on Fashion-MNIST (issue #2): 12 rounds of 5 local epochs, all data.
        "quick": dict(rounds=12, local_epochs=5),
        "smoke": dict(rounds=2, local_epochs=1, n_train=1200, n_test=400),
    },
    "fedcka": {
        "quick": dict(rounds=10, local_epochs=2),
        "smoke": dict(rounds=2, local_epochs=1, n_train=1200, n_test=400),
    },
    "feder": {
        # 16 ResNet-18 runs in ~15 min on an unshared 2-core CPU (55-65 s per run, 313 batch-128 steps each): a
        # quarter-width ResNet-18 (16-128 channels), 4000 training / 1000 test images, 10 rounds x 1 epoch
        # (StepLR's step shrinks with the epochs: feder_grid).
        "quick": dict(rounds=10, local_epochs=1, n_train=4000, n_test=1000, model_kw={"width": 16}),
        "smoke": dict(rounds=2, local_epochs=1, n_train=256, n_test=128, model_kw={"width": 4}),
    },
}

# FedER thesis §4.3 / Table 4.2: the five optimizer configurations and the three ways to train each.
# RMSGD: Table 4.1's lr and weight decay; momentum 0.9 and beta 0.98 from the RMSGD paper's configurations
# (the thesis gives none). ``lrs="rmsgd_paper"`` in feder_grid takes those configurations' rates instead.
FEDER_OPTIMIZERS: dict[str, dict[str, Any]] = {
    "Adam": dict(optimizer="adam"),
    "Adam + StepLR": dict(optimizer="adam", lr_step=(25, 0.5)),
    "AdamP": dict(optimizer="adamp"),
    "AdamP + StepLR": dict(optimizer="adamp", lr_step=(25, 0.5)),
    "RMSGD": dict(optimizer="rmsgd", optimizer_kw={"beta": 0.98}),
}
FEDER_SETTINGS: dict[str, dict[str, Any]] = {
    "non-federated": dict(strategy="centralized"),  # the same hyper-parameters, one trainer holding all the data
    "FedAvg": dict(strategy="fedavg"),
    "FedER": dict(strategy="feder"),
}
_FEDER_RMSGD_PAPER_LR = {"adam": 3e-4, "adamp": 0.01, "rmsgd": 0.03}


def feder_grid(scale: str = "paper", lrs: str = "thesis", **overrides: Any) -> dict[tuple[str, str], Config]:
    """Table 4.2's grid: ``{(optimizer row, setting): Config}`` of the FedER preset at ``scale``.

    StepLR keeps the thesis's shape at smaller scales: its step is 25/250 of the run's epochs (at least 1), so the
    rate halves ten times over any run, as over the thesis's 250 epochs."""
    out = {}
    for row, opt in FEDER_OPTIMIZERS.items():
        for setting, strat in FEDER_SETTINGS.items():
            kw = {**opt, **strat, **overrides}
            if lrs == "rmsgd_paper":
                kw.setdefault("lr", _FEDER_RMSGD_PAPER_LR[kw["optimizer"]])
            cfg = preset("feder", scale, **kw)
            if cfg.lr_step is not None and scale != "paper" and "lr_step" not in overrides:
                epochs = cfg.rounds * cfg.local_epochs
                cfg = cfg.replace(lr_step=(max(1, round(cfg.lr_step[0] * epochs / 250)), cfg.lr_step[1]))
            out[(row, setting)] = cfg
    return out

# Per-dataset model swaps stated in the papers.
_DATASET_MODEL = {
    "fedintr": {"cifar100": "resnet20"},
    "fedcka": {"cifar100": "resnet50", "tinyimagenet": "resnet50"},
}
_DATASET_ROUNDS = {"fedcka": {"cifar100": 40, "tinyimagenet": 20}}


def preset(paper: str, scale: str = "paper", **overrides: Any) -> Config:
    """The setup of ``paper`` at ``scale``, with ``overrides`` applied last.

    >>> preset("fedintr", "quick", strategy="fedprox", strategy_kw={"mu": 0.01}).rounds
    12
    """
    if paper not in _PAPER:
        raise ValueError(f"Unknown preset {paper!r}; valid presets: {sorted(_PAPER)}.")
    if scale not in SCALES:
        raise ValueError(f"Unknown scale {scale!r}; valid scales: {SCALES}.")
    base = dict(_PAPER[paper])
    dataset = overrides.get("dataset", base["dataset"])
    base["model"] = _DATASET_MODEL.get(paper, {}).get(dataset, base["model"])
    if dataset in _DATASET_ROUNDS.get(paper, {}):
        base["rounds"] = _DATASET_ROUNDS[paper][dataset]
    if paper == "fedintr" and dataset == "svhn":
        base["augment"] = "none"
    if scale != "paper":
        base.update(_SCALE[paper][scale])
    base["label"] = f"{paper}/{scale}"
    base.update(overrides)
    return Config(**base).validate()
