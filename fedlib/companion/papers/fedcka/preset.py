"""FedCKA's setup (fedcka-arxiv.txt and fedcka-applsci.txt, Experimental Setup) at each scale, its
stated per-dataset models and its named variant, and what each scale runs of the notebooks' grids
(notebooks 02-04, :mod:`fedlib.companion.papers.fedcka.plans`): rounds by α and by local epochs, and
the runs only some scales keep."""

from __future__ import annotations

from fedlib.companion.presets import Preset

__all__ = ["FEDCKA_PRESET", "ALPHA_ROUNDS", "TABLE2_ROUNDS", "EPOCH_ROUNDS", "R50_SIMILARITY",
           "TABLE1_ONLY", "PRINTED_METRICS", "R50_TIMED_ON"]

# ResNet-50 with MOON's projection head ("as per MOON": l1, l2, classifier l3 on the 256-d one)
_R50 = dict(model="resnet50", model_kw={"projection": True})

FEDCKA_PRESET = Preset(
    "fedcka",
    # FedCKA (arXiv & Appl. Sci.) Experimental Setup: "SGD ... learning rate of 0.1, momentum of
    # 0.9, weight decay of 0.00001. Local epochs are set to 10 ... batch size 128 ... 100
    # communication rounds on CIFAR-10 ... These are also the parameters used in MOON"; 10 clients,
    # Dirichlet α = 5.0 by default. MOON's paper and code use lr 0.01, and at 0.1 the simple CNN
    # diverges (a non-finite loss in round 1 on Fashion-MNIST), so we read the sentence about MOON
    # as the intended setting: lr 0.01; the literal 0.1 is variant "lr0.1". MOON's loader drops the
    # last partial batch (a client smaller than a batch keeps one): drop_last.
    setup=dict(dataset="cifar10", model="simple_cnn", partition="dirichlet",
               partition_kw={"beta": 5.0}, num_clients=10, rounds=100, local_epochs=10,
               batch_size=128, lr=0.01, momentum=0.9, weight_decay=1e-5, augment="none",
               drop_last=True),
    scales={
        "paper": {},
        # a 2-core CPU, budgeted by local SGD steps per client (benchmarks/quick_scale.py): FedAvg
        # ends on its plateau at α = 5; notebooks 03 and 04 take their rounds by α (ALPHA_ROUNDS).
        "quick": dict(rounds=20, local_epochs=5, n_train=15000, n_test=2000, batch_size=64),
        "smoke": dict(rounds=2, local_epochs=1, n_train=1200, n_test=400),
    },
    datasets={"cifar100": dict(**_R50, rounds=40), "tinyimagenet": dict(**_R50, rounds=20)},
    variants={
        # the papers' literal "learning rate of 0.1" (diverges with the simple CNN)
        "lr0.1": dict(lr=0.1),
    },
)

# Rounds by α: every quick run ends on its plateau (benchmarks/RESULTS.md, "FedCKA's quick rounds by
# α", "FedCKA's quick α = 0.1 column: 240 rounds"); paper and smoke keep the preset's rounds.
ALPHA_ROUNDS: dict[str, dict[float, int]] = {
    "paper": {}, "quick": {5.0: 25, 1.0: 35, 0.5: 35, 0.1: 240}, "smoke": {}}
# Table 2's quick rounds where they differ from ALPHA_ROUNDS: MOON, which only Table 2 trains, ends
# on its plateau, and a column compares its methods at equal rounds (benchmarks/RESULTS.md, "MOON's
# plateau in FedCKA's Table 2 at α = 5 and 0.5").
TABLE2_ROUNDS: dict[str, dict[float, int]] = {**ALPHA_ROUNDS,
                                              "quick": {**ALPHA_ROUNDS["quick"], 5.0: 35, 0.5: 45}}
# The local-epoch sweep's quick rounds below the preset's E: each E ends on its plateau, the same
# 300 local epochs (benchmarks/RESULTS.md, "FedCKA's local-epoch sweep below E = 5").
EPOCH_ROUNDS: dict[str, dict[int, int]] = {"paper": {}, "quick": {1: 300, 2: 150}, "smoke": {}}
# Notebook 02's ResNet-50 runs (Appl. Sci. Fig. 2's second panel): what a scale changes of the
# simple CNN's setup besides the model; smoke trains one round on 40 images, to exercise the code.
R50_SIMILARITY: dict[str, dict[str, int]] = {"paper": {}, "quick": {},
                                             "smoke": dict(rounds=1, n_train=40, n_test=20)}
# The datasets on which a scale runs Table 1's α = 5 column only (notebook 03: Table 1's other
# columns).
TABLE1_ONLY: dict[str, tuple[str, ...]] = {
    "paper": ("cifar100", "tinyimagenet"), "quick": (), "smoke": ()}
# Whether notebook 04 trains Table 3's metrics in their printed forms (unsigned / unnormalized) too.
PRINTED_METRICS = {"paper": True, "quick": False, "smoke": False}
# The dataset whose shape Table 4's ResNet-50 is timed on: Tiny ImageNet as the paper (64x64, 200
# classes), or CIFAR-100's smaller one.
R50_TIMED_ON = {"paper": "tinyimagenet", "quick": "cifar100", "smoke": "cifar100"}
