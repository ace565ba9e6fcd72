"""insert_chunks: many chunks per statement, each row with its own id, vector and FTS entry."""

from __future__ import annotations

from pathlib import Path

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
