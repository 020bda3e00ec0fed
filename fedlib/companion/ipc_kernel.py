"""The kernel manager of headless notebook runs (:mod:`fedlib.companion.reproduce`; papermill
imports it by name, so Jupyter stays an optional dependency of the package): the kernel talks over
local IPC sockets, not TCP, so nothing listens on the network and the kernel has no reason to warn
that its TCP traffic is unencrypted. Each manager's sockets lie in a private temporary folder
(removed when its kernel shuts down), so renders running at once never share one."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from jupyter_client.manager import AsyncKernelManager

__all__ = ["IPCKernelManager"]


class IPCKernelManager(AsyncKernelManager):
    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.transport = "ipc"
        self._ipc_dir = tempfile.mkdtemp(prefix="fedlib-ipc-")
        # sockets kernel-1..5 there, not in the notebooks' folder
        self.ip = os.path.join(self._ipc_dir, "kernel")

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart:
            shutil.rmtree(self._ipc_dir, ignore_errors=True)
