"""Threads sharing one engine never deadlock (issue 16), with a watchdog that shows why.

The long run of the same harness: ``python scripts/stress_threads.py --minutes 10``.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

import mindfile

from ._stress import run_stress


def test_index_search_inside_atomic_races_plain_searches(store_location: str) -> None:
    """The reproduction from the issue: two threads, opposite lock orders before the fix."""
    mem = mindfile.open(store_location, embedder="hash")
    mem.store_many([("s", i, f"hike lisbon dog number {i}") for i in range(1, 30)])
    query = mem.embedder.embed_query("hike")
    stop = threading.Event()
    done = [0, 0]

    def inside_atomic() -> None:
        seq = 100
        while not stop.is_set():
            with mem.db.atomic():
                mem.index.search(query, 3)
            seq += 1
            mem.store("s", seq, "another hike")
            done[0] += 1

    def plain() -> None:
        while not stop.is_set():
            mem.index.search(query, 3)
            assert mem.lexical is not None
            mem.lexical.search("hike dog", 3)
            done[1] += 1

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    threads = [threading.Thread(target=f, daemon=True) for f in (inside_atomic, plain)]
    try:
        for t in threads:
            t.start()
        stop.wait(3.0)
        stop.set()
        for t in threads:
            t.join(10.0)
    finally:
        sys.setswitchinterval(old)
    assert not any(t.is_alive() for t in threads), f"deadlock after {done} operations"
    assert min(done) > 10
    mem.close()


def test_many_threads_every_operation_no_deadlock(store_location: str) -> None:
    """On both backends (on Postgres each thread's transaction is its own connection's)."""
    report = run_stress(store_location, seconds=12, threads=8, stall_seconds=10)
    assert report.stalled is None, report.stalled
    assert report.failures == [], report.failures[:5]
    # Every kind of operation ran, and each many times.
    assert len(report.ops) >= 20, report.ops
    assert min(report.ops.values()) >= 1, report.ops
    assert report.total > 500


def test_threads_on_the_sqlite_vec_index(tmp_path: Path) -> None:
    report = run_stress(
        tmp_path / "vec.db", seconds=5, threads=6, stall_seconds=10, vector_index="sqlite-vec"
    )
    assert report.stalled is None, report.stalled
    assert report.failures == [], report.failures[:5]
    assert report.total > 100


@pytest.mark.parametrize("index", ["zvec", "lancedb", "exact"])
def test_threads_on_an_ann_index_merging_in_the_background(
    tmp_path: Path, index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Background merges (every 50 changes here) while threads write and search."""
    from mindfile.vector.exact_disk import ExactDiskIndex
    from mindfile.vector.lance_index import LanceIndex
    from mindfile.vector.zvec_index import ZvecIndex

    for cls in (ZvecIndex, LanceIndex, ExactDiskIndex):
        monkeypatch.setattr(cls, "min_delta", 50)
    report = run_stress(
        tmp_path / "ann.db", seconds=5, threads=6, stall_seconds=20, vector_index=index
    )
    assert report.stalled is None, report.stalled
    assert report.failures == [], report.failures[:5]
    assert report.total > 100
    assert (tmp_path / "ann.db.index" / index / "manifest.json").is_file()  # merges ran
