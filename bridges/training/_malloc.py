"""Keep freed tensor memory in the process heap (glibc).

Every training step allocates and frees the same few megabyte-sized activations. Above glibc's mmap
threshold a block is mapped on allocation and unmapped on free, so each step page-faults its
activations in again: about a fifth of Model A's step on 2 CPU threads (depth 6, budget 4, batch 256).
``keep_freed_memory`` raises the mmap threshold to glibc's 32 MiB cap and the heap trim threshold, so
freed blocks are reused. The memory held is the peak of one step; numbers are unchanged. Process-wide,
applied once; a no-op off glibc, or with the environment variable ``FV_MALLOC=default``.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3  # mallopt parameters of glibc's malloc.h


@functools.cache
def keep_freed_memory() -> bool:
    """Tune glibc's malloc as above; True if it took effect."""
    if os.environ.get("FV_MALLOC", "") == "default":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (macOS, Windows, musl without mallopt)
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    ok = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1
    ok = ok and mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1 and mallopt(M_TOP_PAD, 64 << 20) == 1
    return ok
