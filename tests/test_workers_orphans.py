"""The campaign's workers exit when their parent dies, even by SIGKILL: no orphan trains on unseen."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

PARENT = textwrap.dedent("""
    import os, sys, time
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context
    from fedlib.companion.workers import _init_worker

    pool = ProcessPoolExecutor(1, mp_context=get_context("spawn"), initializer=_init_worker,
                               initargs=(1, os.getpid()))
    print(pool.submit(os.getpid).result(), flush=True)  # the worker's pid
    pool.submit(time.sleep, 600)
    time.sleep(600)
""")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is dead
        return f.read().split(")")[-1].split()[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_killing_the_parent_leaves_no_worker():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    worker = int(parent.stdout.readline())
    assert _alive(worker)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 30
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(worker), f"worker {worker} outlived its killed parent"
