"""FedIntR's setup (fedintr.txt §IV-A) at each scale, its stated per-dataset models and its named
variants, and what each scale runs of the notebooks' grids (notebooks 05 and 06,
:mod:`fedlib.companion.papers.fedintr.plans`)."""

from __future__ import annotations

from fedlib.companion.presets import Preset

__all__ = [
    "FEDINTR_PRESET", "TUNES_MU", "TABLE3_PAPER_COLUMNS", "TABLE3_METHODS", "TABLE5_PER_SAMPLE",
    "FEDINTR_TABLE3_ROUNDS", "FEDINTR_FIG5_ROUNDS"
]

FEDINTR_PRESET = Preset(
    "fedintr",
    # FedIntR §IV-A: "SGD ... learning rate of 0.01, weight decay of 0.00001, and momentum of 0.9.
    # batch size 512, local epochs 10, training rounds 100. random horizontal flip except SVHN", 10
    # clients, Dirichlet β=0.5. Its own Dirichlet split (the FedIntR repository) has no balance cap
    # and no minimum client size.
    setup=dict(dataset="fmnist", model="intr_cnn", partition="dirichlet",
               partition_kw={"beta": 0.5, "convention": "fedintr"}, num_clients=10, rounds=100,
               local_epochs=10, batch_size=512, lr=0.01, momentum=0.9, weight_decay=1e-5),
    scales={
        "paper": {},
        # a 2-core CPU, budgeted by local SGD steps per client (benchmarks/quick_scale.py): 40
        # rounds, where FedAvg's curve ends on its plateau (benchmarks/RESULTS.md, "The plateau of
        # every committed quick record").
        "quick": dict(rounds=40, local_epochs=6, n_train=12000, n_test=5000, batch_size=64),
        "smoke": dict(rounds=2, local_epochs=1, n_train=1200, n_test=400),
    },
    datasets={
        # ResNet-20 with a projection head on the stem and each stage
        "cifar100": dict(model="resnet20", model_kw={"intr_heads": True}),
        "svhn": dict(augment="none"),  # "random horizontal flip except SVHN"
    },
    variants={
        # MOON / NIID-Bench's Dirichlet split: balance cap and at least 10 samples per client
        "moon_split": dict(partition_kw={"beta": 0.5, "convention": "niid-bench"}),
        # Fashion-MNIST as the FedIntR code feeds it: 3 × 32 × 32 (resized, replicated), convs
        # without padding
        "code_input": dict(model_kw={"code_input": True}),
        # the FedIntR code's projection head on fc2: hidden width 96 (fc2's own width) instead of
        # 256; the paper gives the heads' output width (256) only
        "code_fc2_head": dict(model_kw={"fc2_proj_hidden": 96}),
    },
)

# μ: ``paper`` tunes every method over §IV-B's grids; ``quick`` and ``smoke`` run Table I's best μ
# for the dataset (more rounds before more μ values).
TUNES_MU = {"paper": True, "quick": False, "smoke": False}
# Table III at ``paper`` runs on the paper's columns only (CIFAR-10 and CIFAR-100); the smaller
# scales run its β pattern on any dataset.
TABLE3_PAPER_COLUMNS = {"paper": True, "quick": False, "smoke": False}
# Table III's methods: every method over its μ grid (None), or FedAvg and FedIntR at Table I's best
# μ.
TABLE3_METHODS: dict[str, tuple[str, ...] | None] = {"paper": None, "quick": ("FedAvg", "FedIntR"),
                                                     "smoke": ("FedAvg", "FedIntR")}
# Table V: uniform weights (Eq. 6) at every scale; α per sample beside them at paper scale.
TABLE5_PER_SAMPLE = {"paper": True, "quick": False, "smoke": False}
# Rounds by β where quick departs from the preset's: each β runs to its plateau, which the verdicts
# check (benchmarks/RESULTS.md, "FedIntR's Table III at β = 0.1: 120 rounds").
FEDINTR_TABLE3_ROUNDS: dict[str, dict[float, int]] = {"paper": {}, "quick": {0.1: 120}, "smoke": {}}
# Rounds by E where quick departs from the preset's: each E runs to its plateau, which the verdicts
# check (benchmarks/RESULTS.md, "FedIntR's Fig. 5 at E = 1: 450 rounds").
FEDINTR_FIG5_ROUNDS: dict[str, dict[int, int]] = {"paper": {}, "quick": {1: 450}, "smoke": {}}
