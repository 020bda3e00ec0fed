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
        return {k: v for k, v in d.items() if k not in EXECUTION_FIELDS}

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
        ]
        for ok, msg in checks:
            if not ok:
                raise ValueError(f"Invalid config: {msg}.")
        return self


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
    # FedSHIBU §3: "ResNet18 ... on CIFAR10 and CIFAR100", "100 clients with full participation" (m = N), shards
    # per user s, "A learning rate of 0.1 is used and it is decayed as in [FedBABU]" (×0.1 at 1/2 and 3/4 of the
    # rounds), batch 50 and momentum 0.9 as FedBABU; weight decay and τ are not stated (0 and 1 local epoch here);
    # "We run both experiments for 500 epochs" (Fig. 1) → 500 rounds of 1 epoch. Personalized evaluation: each
    # client's own test shards. Fashion-MNIST: the same ResNet-18 on 1×28×28.
    "fedshibu": dict(dataset="cifar10", model="resnet18", strategy="fedshibu", partition="shards",
                     partition_kw={"shards_per_user": 5}, num_clients=100, sample_fraction=1.0, rounds=500,
                     local_epochs=1, batch_size=50, lr=0.1, momentum=0.9, weight_decay=0.0,
                     lr_milestones=(0.5, 0.75), personal_eval=True, eval_every=10),
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
    "fedshibu": {
        # a 2-core CPU: the FedIntR CNN instead of ResNet-18 (no BatchNorm: lr 0.1 diverges, 0.01 is FedIntR's lr
        # for it), 20 clients on 20 % of the data (600 images each), 10 rounds
        "quick": dict(model="intr_cnn", lr=0.01, num_clients=20, n_train=12000, n_test=2000, rounds=10,
                      eval_every=5),
        "smoke": dict(model="intr_cnn", lr=0.01, rounds=2, n_train=400, n_test=200, num_clients=10, eval_every=2),
    },
}

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
