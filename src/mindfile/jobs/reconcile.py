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
from mindfile.storage.db import Database

if TYPE_CHECKING:
    from mindfile._deps import IndexDeps

__all__ = ["reconcile"]


def reconcile(
    engine: IndexDeps, *, repair: bool = True, clock: Clock | None = None
) -> ReconcileReport:
    """Check the store; with ``repair``, fix what was found (see the module docstring)."""
    clock = clock or queue.utc_clock
    db, check = engine.db, engine.stores.integrity
    # One consistent view; with repair, the fixes in the same (write) transaction.
    with db.atomic() if repair else db.snapshot():
        # First: text that is not valid UTF-8 would make the reads below fail.
        # Reads repair such cells as they meet them; report those too.
        # (SQLite's problem: Postgres refuses invalid UTF-8 on the way in.)
        earlier, db.repaired_text = db.repaired_text, []
        damaged_cells = damaged.find_damaged(db) if isinstance(db, Database) else []
        if damaged_cells and repair and isinstance(db, Database):
            damaged.repair_damaged(db)
            db.repaired_text = []
        damaged_text = list(dict.fromkeys([*earlier, *(c.label for c in damaged_cells)]))
        now = clock()
        abandoned = queue.count_abandoned(engine.stores.jobs, now)
        if repair and abandoned:
            queue.recover_abandoned(engine.stores.jobs, now, JobPolicy())
        unembedded = check.unembedded()
        missing = [r for r, status in unembedded if status not in ("pending", "running", "failed")]
        dead = sum(1 for _, status in unembedded if status == "failed")
        bad = check.foreign_vectors(engine.embedder.model_id, engine.embedder.dimensions)
        orphans = check.orphan_vectors()
        chunks = check.chunk_count()
        fts_rows = check.text_index_rows()
        enqueued = 0
        if repair:
            # Logged as changed: every process's vector index re-reads (drops) these ids.
            check.drop_vectors([*bad, *orphans])
            enqueued = queue.enqueue(engine.stores.jobs, [*missing, *bad], now)
            if fts_rows != chunks:
                check.rebuild_text_index()
    embedded = 0
    if repair and (enqueued or abandoned) and engine.indexing == "sync":
        embedded = run_jobs(engine, clock=clock).succeeded
    vector_count = check.vector_count()
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
