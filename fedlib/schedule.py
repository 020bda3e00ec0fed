"""What happens when: client sampling, learning-rate schedule, batch plans and the randomness behind
them.

All randomness is a pure function of ``(seed, round, client, epoch)``: client sampling, batch order
and augmentation do not depend on what ran before, so a run resumed from a checkpoint, or run by
another executor, sees exactly the same batches. The engine and every executor import these helpers
from here (and nothing from each other); the one non-finite-loss error lives here too, so both
executors raise the same message.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from fedlib.config import Config
from fedlib.augment import augment_params
from fedlib.strategies.base import LR_ROUNDINGS

__all__ = [
    "NonFiniteLossError", "rng_key", "sample_clients", "round_lr", "num_batches", "epoch_plan",
    "non_finite_loss"
]


class NonFiniteLossError(FloatingPointError):
    """The training loss, or a model a client uploaded, became NaN or infinite."""


def non_finite_loss(value: float, cid: int, rnd: int, what: str, lr: float) -> NonFiniteLossError:
    """The error for a non-finite mean training loss of client ``cid`` in round ``rnd``
    (0-based)."""
    return NonFiniteLossError(
        f"Training loss became {value} for client {cid} in round {rnd + 1} ({what}, lr {lr}). "
        "Lower the learning rate or the regularization weight (mu), or check the dataset's "
        "normalization.")


def rng_key(seed: int, *parts: int) -> int:
    """A 63-bit seed derived from ``(seed, *parts)`` (numpy SeedSequence: independent streams per
    tuple)."""
    return int(
        np.random.SeedSequence([int(seed), *map(int, parts)]).generate_state(2, np.uint64)[0] >> 1)


def sample_clients(num_clients: int, fraction: float, seed: int, rnd: int) -> np.ndarray:
    """The sorted ids of the ``max(1, round(fraction · N))`` clients sampled in round ``rnd``."""
    m = max(1, int(round(fraction * num_clients)))
    if m >= num_clients:
        return np.arange(num_clients)
    rng = np.random.default_rng(rng_key(seed, rnd, 0x5A3))
    return np.sort(rng.choice(num_clients, size=m, replace=False))


def round_lr(cfg: Config, rnd: int, rounding: str = "ceil") -> float:
    """Server-side step schedule for round ``rnd`` (0-based): lr · γ^(number of milestones m with
    rnd ≥ ⌈m · rounds⌉), the first round that starts once a fraction m of the rounds has passed;
    ``rounding="floor"``: rnd ≥ ⌊m · rounds⌋ (the two differ exactly where m · rounds is not a whole
    number). The strategy chooses (``Strategy.lr_rounding``)."""
    if rounding not in LR_ROUNDINGS:
        raise ValueError(f"Unknown lr rounding {rounding!r}; valid: {LR_ROUNDINGS}.")
    at = math.ceil if rounding == "ceil" else math.floor
    passed = sum(rnd >= at(m * cfg.rounds) for m in cfg.lr_milestones)
    return cfg.lr * cfg.lr_gamma ** passed


def num_batches(n: int, batch_size: int, drop_last: bool) -> int:
    """Batches per epoch; with ``drop_last`` a client smaller than one batch still takes one
    (smaller) step."""
    if drop_last and n >= batch_size:
        return n // batch_size
    return math.ceil(n / batch_size)


def epoch_plan(n: int, augment: str, seed: int, rnd: int, cid: int, epoch: int,
               stream: int = 0) -> tuple[Tensor, dict[str, Tensor]]:
    """The order (positions into a client's index list) in which client ``cid`` visits its ``n``
    samples in ``epoch``, and the augmentation draws for them in that order. Drawn on the CPU from a
    generator keyed by ``(seed, rnd, cid, epoch)`` (and ``stream`` when not 0: e.g. fine-tuning
    before a personalized evaluation): identical on every device and in every executor."""
    key = rng_key(seed, rnd, cid, epoch) if stream == 0 else rng_key(seed, rnd, cid, epoch, stream)
    g = torch.Generator().manual_seed(key)
    order = torch.randperm(n, generator=g)
    return order, augment_params(augment, n, g)
