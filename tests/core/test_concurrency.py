"""Several processes writing one file: nothing lost, nothing duplicated, order kept."""

from __future__ import annotations

import multiprocessing as mp

import mindfile

from ._support import assert_consistent

WRITERS = 3
EVENTS = 60


def _writer(path: str, name: str, shared_session_rounds: int) -> None:
    with mindfile.open(path, embedder="hash") as mem:
        for i in range(1, EVENTS + 1):
            mem.store(f"own-{name}", i, {"role": "user", "content": f"{name} says {i}"})
        # All writers race for the next sequence of one shared session: a lost race is a
        # ConflictError (nothing written), retried with the new maximum.
        done = 0
        while done < shared_session_rounds:
            newest = mem.recall("shared", 1)
            last = newest[0].sequence if newest else 0
            try:
                mem.store("shared", last + 1, f"{name} round {done}")
                done += 1
            except mindfile.ConflictError:
                continue


def test_processes_writing_one_file(store_location: str) -> None:
    """On both backends (tests/conftest.py): one file, or one Postgres store."""
    path = store_location
    mindfile.open(path, embedder="hash").close()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), f"w{n}", 20)) for n in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    with mindfile.open(path) as mem:
        for n in range(WRITERS):
            events = mem.recall(f"own-w{n}")
            assert [e.sequence for e in events] == list(range(1, EVENTS + 1))
        shared = mem.recall("shared")
        assert [e.sequence for e in shared] == list(range(1, WRITERS * 20 + 1))
        texts = sorted(e.payload for e in shared)
        assert texts == sorted(f"w{n} round {r}" for n in range(WRITERS) for r in range(20))
        assert_consistent(mem)
        assert len(mem.search("w1 says 7", mode="fts", top_k=1)) == 1
