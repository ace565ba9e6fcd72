"""insert_chunks: many chunks per statement, each row with its own id, vector and FTS entry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import mindfile
from mindfile.storage import log
from mindfile.storage.chunks import ROWS_PER_INSERT, ChunkRow, insert_chunks
from mindfile.storage.db import utcnow


def test_rowids_vectors_and_fts_rows_line_up_across_statements(tmp_path: Path) -> None:
    n = 2 * ROWS_PER_INSERT + 37  # three multi-row statements, the last one short
    with mindfile.open(tmp_path / "m.db", embedder="hash") as mem:
        db, now = mem.db, utcnow()
        rows = [
            ChunkRow("s", f"chunk {i} word{i}x", f"h{i}", "{}", i, i, file_id=None)
            for i in range(n)
        ]
        # Every third chunk has no vector yet: it gets an embedding job instead.
        vectors = [None if i % 3 == 0 else np.full(4, i, dtype=np.float32) for i in range(n)]
        with db.atomic():
            log.upsert_session(db, "s", now, touch=False)
            ids = insert_chunks(db, rows, vectors, "m", now)
        assert len(set(ids)) == n
        texts = dict(db.query("SELECT id, chunk_text FROM chunks"))
        assert [texts[i] for i in ids] == [r.text for r in rows]
        stored = {
            int(r): np.frombuffer(b, dtype="<f4")
            for r, b in db.query("SELECT chunk_rowid, embedding_blob FROM chunks_vec")
        }
        jobs = {int(r) for (r,) in db.query("SELECT chunk_rowid FROM memory_jobs")}
        for i, rowid in enumerate(ids):
            if i % 3 == 0:
                assert rowid in jobs and rowid not in stored
            else:
                np.testing.assert_array_equal(stored[rowid], np.full(4, i, dtype="<f4"))
        for i in (0, ROWS_PER_INSERT - 1, ROWS_PER_INSERT, n - 1):
            hit = db.query("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?", (f"word{i}x",))
            assert hit == [(ids[i],)]


FTS_ROWS = (
    "SELECT c.chunk_id, f.chunk_text, f.context_before, f.context_after "
    "FROM chunks_fts f JOIN chunks c ON c.id = f.rowid ORDER BY c.chunk_id"
)


def test_store_many_writes_a_batch_like_one_store_at_a_time(tmp_path: Path) -> None:
    """store_many writes its new chunks together at the end (multi-row statements) and
    extends repeated ones after: the rows are the same as storing event by event, with
    texts repeated within the batch and across batches, neighbour context, importance,
    expiry and times."""
    import mindfile

    texts = ["the lake", "a heron", "the lake", "bread", "a heron", "the lake", "tea"]

    def events(start: int) -> list[tuple[Any, ...]]:
        return [
            (f"s{i % 2}", start + i, texts[i % len(texts)], None, f"2026-01-{1 + i:02d}")
            for i in range(len(texts) + 3)
        ]

    def rows(mem: mindfile.Mindfile) -> list[tuple[Any, ...]]:
        return mem.db.query(
            "SELECT chunk_id, session_id, chunk_text, sequence_start, sequence_end, "
            "context_before, context_after, importance, expires_at, occurred_at, "
            "(SELECT count(*) FROM chunks_vec v WHERE v.chunk_rowid = c.id) "
            "FROM chunks c ORDER BY chunk_id"
        )

    with mindfile.open(tmp_path / "batch.db", embedder="hash") as batch:
        batch.store_many(events(1), importance=0.7)
        batch.store_many(events(100), importance=0.4, ttl=3600)
        batched = rows(batch)
        fts_batched = batch.db.query(FTS_ROWS)
    with mindfile.open(tmp_path / "one.db", embedder="hash") as one:
        for importance, ttl, evs in ((0.7, None, events(1)), (0.4, 3600, events(100))):
            for sid, seq, text, _meta, when in evs:
                one.store(sid, seq, text, importance=importance, ttl=ttl, occurred_at=when)
        single = rows(one)
        fts_single = one.db.query(FTS_ROWS)
    assert fts_batched == fts_single and len(fts_single) == len(single)
    strip = [r[:8] + r[9:] for r in batched]  # expires_at depends on the wall clock
    assert strip == [r[:8] + r[9:] for r in single]
    assert [r[8] is None for r in batched] == [r[8] is None for r in single]


def test_context_after_across_batches_keeps_any_text_exactly(tmp_path: Path) -> None:
    """The previous batch's last chunk of each session gets the head of the session's
    next event as its context, exactly (non-BMP characters, quotes, backslashes), in the
    table and in FTS5; written for every session of the batch in one statement."""
    import mindfile

    heads = ['café 😀 "quoted" \\ back', "日本語のテキスト", "tab\tand\nnewline"]
    with mindfile.open(tmp_path / "ctx.db", embedder="hash") as mem:
        mem.store_many([(f"s{i}", 1, f"first turn of session {i}") for i in range(3)])
        mem.store_many([(f"s{i}", 2, text) for i, text in enumerate(heads)])
        got = dict(
            mem.db.query("SELECT session_id, context_after FROM chunks WHERE sequence_end = 1")
        )
        nxt = dict(mem.db.query("SELECT session_id, chunk_text FROM chunks WHERE sequence_end = 2"))
        assert got == nxt and got["s0"] == heads[0] and got["s1"] == heads[1]
        fts = mem.db.query(
            "SELECT c.session_id FROM chunks_fts f JOIN chunks c ON c.id = f.rowid "
            "WHERE chunks_fts MATCH 'context_after:quoted'"
        )
        assert fts == [("s0",)]
