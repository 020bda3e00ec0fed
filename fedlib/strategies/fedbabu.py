"""FedBABU (Oh et al. 2022): train and aggregate the body only; fine-tune the head per client to evaluate.

The head — the model's final linear layer (``FedModel.head``) — stays at its shared random initialization during
federated training (lr 0: it is not trained); the body is averaged (FedAvg's weights) and broadcast. Personalized
evaluation: each client fine-tunes the head (``ft_part="full"``: the whole model) for ``ft_epochs`` epochs on its
own training split and is tested on its own test split; the engine reports the unweighted mean ± std over clients,
with and without fine-tuning (``personal_acc_*``, ``personal_noft_acc_*``).

Fine-tuning defaults follow FedBABU's code (5 epochs, lr 1e-3, momentum 0.9, batch 50); weight decay 0 is our
choice (the FedSHIBU paper is silent on fine-tuning). Training: lr 0.1 decayed ×0.1 at 1/2 and 3/4 of the rounds
(``Config.lr_milestones``), momentum 0.9, batch 50 — the ``fedshibu`` preset.
"""

from __future__ import annotations

from ..options import at_least, between
from .base import FineTune, Strategy

FT_PARTS = ("head", "full")


class FedBABU(Strategy):
    name = "fedbabu"
    option_ranges = {"ft_epochs": at_least(0), "ft_lr": at_least(0), "ft_momentum": between(0, 1, hi_open=True),
                     "ft_batch_size": at_least(1), "ft_part": FT_PARTS}

    def __init__(self, ft_epochs: int = 5, ft_lr: float = 1e-3, ft_momentum: float = 0.9, ft_batch_size: int = 50,
                 ft_part: str = "head") -> None:
        if ft_part not in FT_PARTS:
            raise ValueError(f"Unknown ft_part {ft_part!r}; valid: {FT_PARTS}.")
        if ft_epochs < 0 or ft_lr < 0 or ft_batch_size < 1:
            raise ValueError("FedBABU needs ft_epochs >= 0, ft_lr >= 0 and ft_batch_size >= 1.")
        self.ft_epochs, self.ft_lr, self.ft_momentum = int(ft_epochs), float(ft_lr), float(ft_momentum)
        self.ft_batch_size, self.ft_part = int(ft_batch_size), ft_part
        self._head: frozenset[str] = frozenset()

    def setup(self, model, cfg) -> None:
        self._head = frozenset(model.head_parameter_names())
        if not self._head:
            raise ValueError(f"{type(model).__name__} names no head (FedModel.head); FedBABU needs one.")

    def is_head(self, name: str) -> bool:
        return name in self._head

    def trainable(self, name: str) -> bool:
        return not self.is_head(name)

    def finetune(self) -> FineTune | None:
        if self.ft_epochs == 0:
            return None
        keep = self.is_head if self.ft_part == "head" else (lambda n: True)
        return FineTune(trainable=keep, epochs=self.ft_epochs, lr=self.ft_lr, momentum=self.ft_momentum,
                        weight_decay=0.0, batch_size=self.ft_batch_size)
