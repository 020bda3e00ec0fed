"""FedER's setup (feder-thesis.txt §4.2 / Table 4.1) at each scale, Table 4.2's optimizer grid
(:func:`feder_grid`), and what each scale runs of it (notebook 07,
:mod:`fedlib.companion.papers.feder.plans`)."""

from __future__ import annotations

from typing import Any

from fedlib.config import Config
from fedlib.companion.presets import Preset
from fedlib.companion.scales import scale_of

__all__ = ["FEDER_PRESET", "feder_grid", "FEDER_OPTIMIZERS", "FEDER_SETTINGS", "FEDER_ROUNDS",
           "FEDER_QUICK_RUNS", "FEDER_QUICK_ONCE", "FEDER_CELLS"]

FEDER_PRESET = Preset(
    "feder",
    # FedER thesis §4.2 / Table 4.1: ResNet-18 (CIFAR-style), CIFAR-100 with cutout, 4 clients (one
    # GPU each), batch 128, lr 1e-3, weight decay 1e-4, StepLR (if applicable) step 25 decay 0.5 per
    # epoch, "250 epochs". The thesis does not state the split into rounds or the partition: each
    # client returns its model after every epoch (§1.2.1, curves per epoch with a test point per
    # round), so 250 rounds x 1 local epoch, IID shards. Each client is one long-lived trainer: its
    # optimizer state persists across rounds (FedAvg's too).
    setup=dict(dataset="cifar100", model="resnet18", partition="iid", partition_kw={},
               num_clients=4, rounds=250, local_epochs=1, batch_size=128, optimizer="adam",
               lr=1e-3, momentum=0.9, weight_decay=1e-4, augment="crop_flip_cutout",
               persistent_optimizer=True),
    scales={
        "paper": {},
        # a 2-core CPU, budgeted by local SGD steps per client: an eighth-width ResNet-18, 100 steps
        # per client a round, 30 rounds, where FedAvg with AdamP ends on its plateau (the Adam rows:
        # FEDER_ROUNDS; StepLR's step shrinks with the epochs: feder_grid). At this scale FedER is
        # FedAvg on most client-layers (benchmarks/RESULTS.md, "FedER's floored share at quick").
        "quick": dict(rounds=30, local_epochs=1, n_train=25600, n_test=2000, batch_size=64,
                      model_kw={"width": 8}),
        "smoke": dict(rounds=2, local_epochs=1, n_train=256, n_test=128, model_kw={"width": 4}),
    },
)

# FedER thesis §4.3 / Table 4.2: the five optimizer configurations and the three ways to train each.
# RMSGD: Table 4.1's lr and weight decay; momentum 0.9 and beta 0.98 from the RMSGD paper's
# configurations (the thesis gives none). ``lrs="rmsgd_paper"`` in feder_grid takes those
# configurations' rates instead.
FEDER_OPTIMIZERS: dict[str, dict[str, Any]] = {
    "Adam": dict(optimizer="adam"),
    "Adam + StepLR": dict(optimizer="adam", lr_step=(25, 0.5)),
    "AdamP": dict(optimizer="adamp"),
    "AdamP + StepLR": dict(optimizer="adamp", lr_step=(25, 0.5)),
    "RMSGD": dict(optimizer="rmsgd", optimizer_kw={"beta": 0.98}),
}
FEDER_SETTINGS: dict[str, dict[str, Any]] = {
    # the same hyper-parameters, one trainer holding all the data
    "non-federated": dict(strategy="centralized"),
    "FedAvg": dict(strategy="fedavg"),
    "FedER": dict(strategy="feder"),
}
_FEDER_RMSGD_PAPER_LR = {"adam": 3e-4, "adamp": 0.01, "rmsgd": 0.03}
# Rounds by optimizer row where a scale departs from its preset's: at quick both Adam rows take 40,
# where FedAvg with Adam ends on its plateau, so StepLR's effect compares runs of one length
# (benchmarks/RESULTS.md, "FedER's quick Adam rows: 40 rounds").
FEDER_ROUNDS: dict[str, dict[str, int]] = {
    "paper": {}, "quick": {"Adam": 40, "Adam + StepLR": 40}, "smoke": {}}

Cells = tuple[tuple[str, str], ...]  # Table 4.2's cells: (optimizer row, setting)
# Table 4.2's cells quick trains with every seed: those of the claims on FedAvg and the
# non-federated model
FEDER_QUICK_RUNS: Cells = (("Adam", "non-federated"), ("Adam", "FedAvg"),
                           ("Adam + StepLR", "FedAvg"), ("AdamP", "non-federated"),
                           ("AdamP", "FedAvg"))
# quick: the first seed only (the floored share and the curves: no claim)
FEDER_QUICK_ONCE: Cells = (("Adam", "FedER"),)
# The cells a scale trains with every seed and with the first seed only; None: every cell with every
# seed.
FEDER_CELLS: dict[str, tuple[Cells, Cells] | None] = {
    "paper": None, "quick": (FEDER_QUICK_RUNS, FEDER_QUICK_ONCE), "smoke": None}


def feder_grid(scale: str = "paper", lrs: str = "thesis",
               **overrides: Any) -> dict[tuple[str, str], Config]:
    """Table 4.2's grid: ``{(optimizer row, setting): Config}`` of the FedER preset at ``scale``.

    StepLR keeps the thesis's shape at scales other than the thesis's setup: its step is 25/250 of
    the run's epochs (at least 1), so the rate halves ten times over any run, as over the thesis's
    250 epochs. A row's rounds at ``scale``: :data:`FEDER_ROUNDS`."""
    out, exact = {}, scale_of(scale).exact
    for row, opt in FEDER_OPTIMIZERS.items():
        for setting, strat in FEDER_SETTINGS.items():
            kw = {**opt, **strat, **overrides}
            if row in FEDER_ROUNDS[scale]:
                kw.setdefault("rounds", FEDER_ROUNDS[scale][row])
            if lrs == "rmsgd_paper":
                kw.setdefault("lr", _FEDER_RMSGD_PAPER_LR[kw["optimizer"]])
            cfg = FEDER_PRESET.config(scale, **kw)
            if cfg.lr_step is not None and not exact and "lr_step" not in overrides:
                epochs = cfg.rounds * cfg.local_epochs
                step = max(1, round(cfg.lr_step[0] * epochs / 250))
                cfg = cfg.replace(lr_step=(step, cfg.lr_step[1]))
            out[(row, setting)] = cfg
    return out
