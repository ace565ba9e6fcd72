"""Heap tuning (mindfile._heap): where it is ours to choose, the first ``mindfile.open``
keeps freed C-heap memory for reuse, so a search's large temporaries stop faulting
their pages in again each time; otherwise the process's malloc is left alone.

Each case runs in a fresh interpreter: the setting is process-wide and lasts."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

glibc = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="the tuning exists only for glibc on Linux",
)

#: Opens a store, then allocates and frees 80 MB in five 16 MB arrays ten times (a
#: large search's temporaries) and counts the page faults after the first round.
PROBE = """
import json, resource, sys
import numpy as np
import mindfile
from mindfile import _heap
with mindfile.open(sys.argv[1], embedder="hash"):
    pass
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for round in range(10):
    if round == 1:
        before = faults()
    arrays = [np.ones(2 << 20) for _ in range(5)]
    del arrays
print(json.dumps({"tuned": _heap.tuned(), "faults": faults() - before}))
"""


#: Opens a store, then runs six threads that each allocate while all are alive (as a
#: service's worker threads do) and counts glibc's arenas (``malloc_info``).
ARENAS = """
import ctypes, json, os, sys, threading
import mindfile
from mindfile import _heap
with mindfile.open(sys.argv[1], embedder="hash"):
    pass
barrier = threading.Barrier(6)
def work():
    blocks = [bytearray(100_000) for _ in range(5)]
    barrier.wait()
    del blocks
threads = [threading.Thread(target=work) for _ in range(6)]
for t in threads:
    t.start()
for t in threads:
    t.join()
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
path = sys.argv[1] + ".xml"
fp = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, fp)
libc.fclose(fp)
with open(path) as f:
    arenas = f.read().count("<heap nr=")
print(json.dumps({"tuned": _heap.tuned(), "arenas": arenas}))
"""


def _probe(tmp_path: Path, probe: str = PROBE, **env: str) -> dict[str, object]:
    ours = (
        "MINDFILE_HEAP_TUNING",
        "MALLOC_MMAP_THRESHOLD_",
        "MALLOC_TRIM_THRESHOLD_",
        "MALLOC_ARENA_MAX",
    )
    environ = {k: v for k, v in os.environ.items() if k not in (*ours, "GLIBC_TUNABLES")}
    environ.update(env)
    out = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "h.db")],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@glibc
def test_open_keeps_freed_memory_for_the_next_large_allocations(tmp_path: Path) -> None:
    tuned = _probe(tmp_path)
    untuned = _probe(tmp_path, MINDFILE_HEAP_TUNING="0")
    assert tuned["tuned"] is True and untuned["tuned"] is False
    # Untuned, glibc hands part of the 80 MB back after each round and faults it in
    # again the next (~2k pages a round measured); tuned, the heap keeps it (none).
    assert isinstance(tuned["faults"], int) and isinstance(untuned["faults"], int)
    assert untuned["faults"] > 9 * 1_000
    assert tuned["faults"] * 20 < untuned["faults"]


@glibc
def test_threads_share_two_arenas(tmp_path: Path) -> None:
    """Each thread of a process got its own arena (up to 8 a core), and each kept up
    to the trim threshold of freed memory: a 5-minute mixed load's two processes grew
    by 728 MB of anonymous memory, 337 MB untuned (benchmarks/README.md, "A long mixed
    load"). Tuned, threads share two."""
    tuned = _probe(tmp_path, ARENAS)
    untuned = _probe(tmp_path, ARENAS, MINDFILE_HEAP_TUNING="0")
    assert tuned["tuned"] is True and untuned["tuned"] is False
    assert isinstance(tuned["arenas"], int) and isinstance(untuned["arenas"], int)
    assert untuned["arenas"] >= 4
    assert tuned["arenas"] <= 2


@glibc
@pytest.mark.parametrize(
    "env",
    [
        {"MALLOC_ARENA_MAX": "4"},
        {"MALLOC_TRIM_THRESHOLD_": "1048576"},
        {"MALLOC_MMAP_THRESHOLD_": "1048576"},
        {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1048576"},
    ],
)
def test_the_process_s_own_malloc_settings_are_left_alone(
    tmp_path: Path, env: dict[str, str]
) -> None:
    assert _probe(tmp_path, **env)["tuned"] is False
