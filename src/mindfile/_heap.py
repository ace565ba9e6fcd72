"""Keep freed C-heap memory for the next search instead of returning it to the kernel
(glibc's ``malloc``; docs/architecture.md, "Index lifecycle and memory model").

A search at 1M chunks allocates tens of MB of short-lived numpy arrays (a common
query's BM25 postings: their contributions, the per-document sums). glibc returns such
memory to the kernel as soon as the free space at the top of its heap exceeds twice
the largest block freed so far, so every search faulted it in again: 3-7k page faults
a search for the BM25 leg's largest queries at 1M, ~20 ms of a 40 ms search on this
machine (a page fault in a virtual machine costs ~2-3 us; benchmarks/README.md, "Page
faults and pruning at 1M"). Two ``mallopt`` settings keep it: blocks up to
:data:`MMAP_THRESHOLD` come from the heap rather than from ``mmap`` of their own, and
up to :data:`TRIM_THRESHOLD` of free heap stays mapped. The cost is resident memory the
process keeps after its largest searches (+60 MB at 1M chunks, nothing measurable at
117k).

That threshold holds for each of glibc's arenas, and glibc gives each new thread an
arena of its own (up to eight a core): a service's worker threads each kept their own
free memory. Two processes of four threads under a mixed load for five minutes grew by
728 MB of anonymous memory, against 337 MB with glibc's defaults (benchmarks/README.md,
"A long mixed load"). So threads share :data:`ARENA_MAX` arenas (the same load: 279 and
377 MB in two runs); the interpreter lock serialises most allocations anyway.

Process-wide, so applied once, at the first ``mindfile.open``, and only where it is
ours to choose: glibc on Linux, ``MINDFILE_HEAP_TUNING`` not turned off, and the
process's own ``malloc`` settings (``MALLOC_MMAP_THRESHOLD_``,
``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_ARENA_MAX``, ``GLIBC_TUNABLES`` with
``glibc.malloc``) not set.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import threading

from mindfile._helpers import turned_off

__all__ = ["ARENA_MAX", "MMAP_THRESHOLD", "TRIM_THRESHOLD", "tune_heap", "tuned"]

#: ``mallopt`` parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
#: Blocks below this come from the heap (glibc's largest allowed value on 64-bit).
MMAP_THRESHOLD = 32 << 20
#: Free memory at the heap's top kept mapped (64 MB still faulted ~100 pages a search
#: at 1M; 128 MB and 256 MB kept the same ~158 MB anonymous memory).
TRIM_THRESHOLD = 128 << 20
#: Arenas the process's threads share (each keeps up to TRIM_THRESHOLD free).
ARENA_MAX = 2

_lock = threading.Lock()
_state: bool | None = None  # None: not tried yet


def _ours_to_choose() -> bool:
    if turned_off("MINDFILE_HEAP_TUNING"):
        return False
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return False
    own = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_ARENA_MAX")
    if any(name in os.environ for name in own):
        return False
    return "glibc.malloc" not in os.environ.get("GLIBC_TUNABLES", "")


def tune_heap() -> bool:
    """Apply the settings once per process where it is ours to choose; whether they
    are in effect (set by this call or an earlier one)."""
    global _state
    with _lock:
        if _state is None:
            _state = False
            if _ours_to_choose():
                try:
                    mallopt = ctypes.CDLL(None).mallopt
                except (OSError, AttributeError):
                    return False
                mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
                mallopt.restype = ctypes.c_int
                _state = bool(
                    mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
                    and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
                    and mallopt(_M_ARENA_MAX, ARENA_MAX)
                )
        return _state


def tuned() -> bool:
    """Whether this process's heap was tuned (:func:`tune_heap`)."""
    return bool(_state)
