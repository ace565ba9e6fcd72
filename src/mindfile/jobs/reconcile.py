"""The reconciler: find (and repair) every way chunks, vectors and indexes can disagree.

SQLite is the source of truth; each check compares something derived with it:

* running jobs whose worker is dead (lease expired, or a process of this host that
  no longer exists: :mod:`mindfile.jobs.owner`) - put back in the queue;
* chunks without a vector and without a live job (a job lost to a bug, a vector
  deleted by hand) - re-queued;
* vectors from another model, or of the wrong size - deleted, logged as changed (so
  every process's index drops them), re-queued;
* vectors whose chunk is gone (only possible with foreign keys off) - deleted;
* the FTS index's row count vs the chunks table - ``rebuild``;
* the derived vector index's size after catching up vs ``chunks_vec`` - ``rebuild``;
* the in-memory BM25 index's size after catching up vs ``chunks`` - ``rebuild``
  (reported as -1, not checked, while unrepaired wrong-size vectors remain).

A store opened with ``indexing="sync"`` embeds the re-queued chunks at once; a
background store leaves them to its worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mindfile.jobs import queue
from mindfile.jobs.types import Clock, JobPolicy, ReconcileReport
from mindfile.jobs.worker import run_jobs
from mindfile.storage import damaged

if TYPE_CHECKING:
    from mindfile._deps import IndexDeps

__all__ = ["reconcile"]

# Chunks with no vector, and the status of their job (NULL: no job at all).
UNEMBEDDED = """
SELECT c.id, j.status FROM chunks AS c
LEFT JOIN memory_jobs AS j ON j.chunk_rowid = c.id
WHERE NOT EXISTS (SELECT 1 FROM chunks_vec AS v WHERE v.chunk_rowid = c.id)
"""

BAD_VECTORS = """
SELECT v.chunk_rowid FROM chunks_vec AS v
WHERE (v.embedding_model != ?1 OR length(v.embedding_blob) != ?2)
  AND EXISTS (SELECT 1 FROM chunks AS c WHERE c.id = v.chunk_rowid)
"""

ORPHAN_VECTORS = """
SELECT v.chunk_rowid FROM chunks_vec AS v
WHERE NOT EXISTS (SELECT 1 FROM chunks AS c WHERE c.id = v.chunk_rowid)
"""

DELETE_VECTOR = "DELETE FROM chunks_vec WHERE chunk_rowid = ?"

LOG_CHANGE = "INSERT INTO chunks_vec_changes (chunk_rowid) VALUES (?)"

# Rows in the FTS index itself (its docsize shadow table), not the external content.
FTS_ROWS = "SELECT count(*) FROM chunks_fts_docsize"

REBUILD_FTS = "INSERT INTO chunks_fts (chunks_fts) VALUES ('rebuild')"


def reconcile(
    engine: IndexDeps, *, repair: bool = True, clock: Clock | None = None
) -> ReconcileReport:
    """Check the store; with ``repair``, fix what was found (see the module docstring)."""
    clock = clock or queue.utc_clock
    db = engine.db
    model, blob_bytes = engine.embedder.model_id, engine.embedder.dimensions * 4
    # One consistent view; with repair, the fixes in the same (write) transaction.
    with db.atomic() if repair else db.snapshot():
        # First: text that is not valid UTF-8 would make the reads below fail.
        # Reads repair such cells as they meet them; report those too.
        earlier, db.repaired_text = db.repaired_text, []
        damaged_cells = damaged.find_damaged(db)
        if damaged_cells and repair:
            damaged.repair_damaged(db)
            db.repaired_text = []
        damaged_text = list(dict.fromkeys([*earlier, *(c.label for c in damaged_cells)]))
        now = clock()
        abandoned = queue.count_abandoned(db, now)
        if repair and abandoned:
            queue.recover_abandoned(db, now, JobPolicy())
        unembedded = [(int(r), status) for r, status in db.query(UNEMBEDDED)]
        missing = [r for r, status in unembedded if status not in ("pending", "running", "failed")]
        dead = sum(1 for _, status in unembedded if status == "failed")
        bad = [int(r[0]) for r in db.query(BAD_VECTORS, (model, blob_bytes))]
        orphans = [int(r[0]) for r in db.query(ORPHAN_VECTORS)]
        chunks = int(db.scalar("SELECT count(*) FROM chunks"))
        fts_rows = int(db.scalar(FTS_ROWS))
        enqueued = 0
        if repair:
            rewrite = [(r,) for r in [*bad, *orphans]]
            db.executemany(DELETE_VECTOR, rewrite)
            # Logged so every process's vector index re-reads (and drops) these ids.
            db.executemany(LOG_CHANGE, rewrite)
            enqueued = queue.enqueue(db, [*missing, *bad], now)
            if fts_rows != chunks:
                db.execute(REBUILD_FTS)
    embedded = 0
    if repair and (enqueued or abandoned) and engine.indexing == "sync":
        embedded = run_jobs(engine, clock=clock).succeeded
    vector_count = int(db.scalar("SELECT count(*) FROM chunks_vec"))
    # Vectors of the wrong size cannot be loaded into an index: not checked until repaired.
    index_size = -1 if bad and not repair else engine.index.size()
    if repair and index_size != vector_count:
        engine.index.rebuild()
    lexical_size = None if engine.lexical is None else engine.lexical.size()
    lexical_rebuilt = repair and lexical_size is not None and lexical_size != chunks
    if lexical_rebuilt and engine.lexical is not None:
        engine.lexical.rebuild()
    return ReconcileReport(
        damaged_text=damaged_text,
        abandoned_jobs=abandoned,
        repaired=repair,
        chunks=chunks,
        missing_vectors=len(missing),
        dead_lettered=dead,
        wrong_model_vectors=len(bad),
        orphan_vectors=len(orphans),
        fts_rows=fts_rows,
        vector_count=vector_count,
        index_size=index_size,
        enqueued=enqueued,
        embedded=embedded,
        fts_rebuilt=repair and fts_rows != chunks,
        index_rebuilt=repair and index_size != vector_count,
        lexical_size=lexical_size,
        lexical_rebuilt=lexical_rebuilt,
    )
