"""Executors: how a round's local training runs. Each receives a :class:`~fedlib.local.LocalTask`
and a list of :class:`~fedlib.local.ClientJob` and returns one :class:`~fedlib.local.ClientResult`
per job; none knows the engine or any strategy.

==========  ========================================================================================
sequential  one client after another on one reused model and ``torch.optim`` optimizer (the
            reference)
vectorized  the clients' parameters stacked and trained together under ``torch.func.vmap``
            (:mod:`.vectorized`; chunks of clients, stacked, in :mod:`.chunk`; fixed-shape steps and
            CUDA graphs in :mod:`.static`; per-client CPU layers in :mod:`.cpu_conv`)
==========  ========================================================================================
"""

from __future__ import annotations

from typing import Callable, Union

import torch

from fedlib.local import LocalTask
from fedlib.executors.sequential import SequentialExecutor
from fedlib.executors.fast.static import use_static
from fedlib.executors.fast.vectorized import VectorizedExecutor

Executor = Union[SequentialExecutor, VectorizedExecutor]
Notice = Callable[[str], None]

__all__ = [
    "Executor", "SequentialExecutor", "VectorizedExecutor", "make_executor", "supports",
    "use_static"
]


def supports(task: LocalTask, device: torch.device | str, mode: str) -> tuple[bool, str]:
    """Whether ``mode`` ("vectorized" or "auto") should run ``task`` vectorized, and if not, why."""
    ok, why = VectorizedExecutor.can_run(task)
    if ok and mode == "auto":
        return VectorizedExecutor.prefer(torch.device(device))
    return ok, why


def make_executor(task: LocalTask, device: torch.device | str, mode: str = "auto", *,
                  chunk_size: int | None = None, compile: bool = False,
                  cuda_graph: bool | None = None, notice: Notice = print) -> Executor:
    """The executor ``mode`` ("auto" | "sequential" | "vectorized") asks for, or the sequential one
    with a one-line notice when the vectorized one cannot run ``task`` (on the CPU, ``auto`` prefers
    sequential silently). On CUDA the vectorized executor replays its steps from a CUDA graph
    whenever they apply (``cuda_graph=None``, see
    :func:`fedlib.executors.fast.static.use_static`)."""
    if mode not in ("auto", "sequential", "vectorized"):
        raise ValueError(f"Unknown executor {mode!r}; valid executors: 'auto', 'sequential', "
                         "'vectorized'.")
    if mode != "sequential":
        ok, why = supports(task, device, mode)
        if ok:
            return VectorizedExecutor(task, device, chunk_size=chunk_size, compile=compile,
                                      cuda_graph=cuda_graph)
        if mode == "vectorized" or torch.device(device).type != "cpu":
            notice(f"fedlib: vectorized executor unavailable ({why}); using the sequential one.")
    return SequentialExecutor(task)
