"""The kernel manager of headless notebook runs (:mod:`fedlib.reproduce`; papermill imports it by name, so Jupyter
stays an optional dependency of the package): the kernel talks over local IPC sockets, not TCP, so nothing listens
on the network and the kernel has no reason to warn that its TCP traffic is unencrypted."""

from __future__ import annotations

from typing import Any

from jupyter_client.manager import AsyncKernelManager

__all__ = ["IPCKernelManager"]


class IPCKernelManager(AsyncKernelManager):
    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.transport = "ipc"
