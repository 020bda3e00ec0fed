"""The CPU allocator setting the vectorized executor needs: freed memory kept for reuse."""

from __future__ import annotations

import ctypes

__all__ = ["keep_freed_memory"]

def keep_freed_memory() -> bool:
    """Ask glibc to keep freed memory for reuse instead of returning it to the OS
    (``mallopt(M_MMAP_MAX, 0)``, ``mallopt(M_TRIM_THRESHOLD, 1 GiB)``). A chunk's activations are
    10x one client's (100+ MB per tensor); by default glibc serves such blocks with fresh ``mmap``
    pages on every step, and the page faults slow the vectorized executor down
    (``benchmarks/RESULTS.md``). Process-wide; set ``FEDLIB_CPU_MALLOC=0`` to leave the allocator
    alone. Returns whether it applied (glibc only)."""
    global _MALLOC_TUNED
    if _MALLOC_TUNED:
        return True
    try:
        libc = ctypes.CDLL("libc.so.6")
        # M_MMAP_MAX, M_TRIM_THRESHOLD
        _MALLOC_TUNED = bool(libc.mallopt(-4, 0)) and bool(libc.mallopt(-1, 1 << 30))
    except (OSError, AttributeError):
        _MALLOC_TUNED = False
    return _MALLOC_TUNED


_MALLOC_TUNED = False
