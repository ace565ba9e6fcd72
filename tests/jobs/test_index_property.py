"""Property: with background jobs, notes, deletions and two connections interleaved at
random, both processes' vector indexes always match a brute-force scan of ``chunks_vec``."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

import mindfile
from mindfile.jobs import queue

from ._support import DIMS, open_store

SESSIONS = ("a", "b")


def unit(seed: int) -> npt.NDArray[np.float32]:
    vec = np.random.default_rng(seed).standard_normal(DIMS).astype(np.float32)
    return vec / np.linalg.norm(vec)


def oracle(mem: mindfile.Mindfile, query: npt.NDArray[np.float32], k: int) -> list[float]:
    """The top-``k`` cosine similarities by brute force over ``chunks_vec``."""
    rows = mem.db.query("SELECT embedding_blob FROM chunks_vec")
    scores = sorted(
        (float(np.frombuffer(b, dtype="<f4").astype(np.float64) @ query) for (b,) in rows),
        reverse=True,
    )
    return scores[:k]


class JobsMachine(RuleBasedStateMachine):
    reader_index = "exact"

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="mindfile-jobs-"))
        self.saved_keep = queue.CHANGE_LOG_KEEP
        queue.CHANGE_LOG_KEEP = 3  # prune hard, so stale indexes must rebuild
        path = self.dir / "m.db"
        self.reader = open_store(path, vector_index=self.reader_index)
        self.writer = open_store(path)
        self.seq = dict.fromkeys(SESSIONS, 0)
        self.notes = 0

    def teardown(self) -> None:
        queue.CHANGE_LOG_KEEP = self.saved_keep
        self.reader.close()
        self.writer.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _next(self, session: str) -> int:
        self.seq[session] += 1
        return self.seq[session]

    @rule(
        session=st.sampled_from(SESSIONS),
        words=st.lists(st.integers(0, 50), min_size=1, max_size=4),
    )
    def store_background(self, session: str, words: list[int]) -> None:
        events = [
            (session, self._next(session), f"event word{w} n{self.seq[session]}") for w in words
        ]
        self.reader.store_many(events)

    @rule(session=st.sampled_from(SESSIONS))
    def note_sync(self, session: str) -> None:
        self.notes += 1
        self.writer.store_note(f"memory:{session}", f"n{self.notes}", f"note {self.notes}")

    @rule(which=st.booleans(), max_jobs=st.integers(1, 6), batch=st.integers(1, 3))
    def run_some_jobs(self, which: bool, max_jobs: int, batch: int) -> None:
        (self.writer if which else self.reader).run_jobs(max_jobs=max_jobs, batch_size=batch)

    @rule(data=st.data())
    def jump_the_queue(self, data: st.DataObject) -> None:
        pending = [
            int(r[0])
            for r in self.writer.db.query("SELECT job_id FROM memory_jobs WHERE status = 'pending'")
        ]
        if pending:
            job = data.draw(st.sampled_from(pending))
            self.writer.db.execute(
                "UPDATE memory_jobs SET next_retry_at = '0' WHERE job_id = ?", (job,)
            )

    @rule(session=st.sampled_from(SESSIONS), which=st.booleans())
    def forget(self, session: str, which: bool) -> None:
        (self.writer if which else self.reader).forget(session)
        self.seq[session] = 0

    @rule(n=st.integers(1, 20))
    def delete_note(self, n: int) -> None:
        for session in SESSIONS:
            self.writer.delete_note(f"memory:{session}", f"n{n}")

    @rule(data=st.data(), which=st.booleans())
    def repair_a_foreign_vector(self, data: st.DataObject, which: bool) -> None:
        ids = [int(r[0]) for r in self.writer.db.query("SELECT chunk_rowid FROM chunks_vec")]
        if ids:
            rowid = data.draw(st.sampled_from(ids))
            self.writer.db.execute(
                "UPDATE chunks_vec SET embedding_model = 'other', embedding_blob = ? "
                "WHERE chunk_rowid = ?",
                (unit(rowid).astype("<f4").tobytes(), rowid),
            )
        report = (self.writer if which else self.reader).reconcile()
        assert report.wrong_model_vectors == (1 if ids else 0)

    @invariant()
    def indexes_match_the_oracle(self) -> None:
        count = int(self.writer.db.scalar("SELECT count(*) FROM chunks_vec"))
        for seed in (1, 2):
            query = unit(seed)
            expected = oracle(self.writer, query, 6)
            for mem in (self.reader, self.writer):
                got = [s for _, s in mem.index.search(query, 6)]
                assert got == pytest.approx(expected, abs=1e-5)
        for mem in (self.reader, self.writer):
            assert mem.index.size() == count


@pytest.mark.parametrize("reader_index", ["exact", "sqlite-vec"])
def test_indexes_match_brute_force_under_background_indexing(reader_index: str) -> None:
    machine = type(f"Jobs_{reader_index}", (JobsMachine,), {"reader_index": reader_index})
    run_state_machine_as_test(
        machine, settings=settings(max_examples=30, stateful_step_count=40, deadline=None)
    )
