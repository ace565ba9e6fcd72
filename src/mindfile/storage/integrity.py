"""The integrity store: what the reconciler compares (chunks, vectors, the text index).

:mod:`mindfile.jobs.reconcile` decides what disagrees and what to repair; this store
counts and lists the rows and applies the repairs. Vectors are addressed by their
chunk's row id. Every method runs inside the caller's transaction (the reconciler reads
everything in one snapshot, or one write transaction when it repairs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from mindfile.storage import log
from mindfile.storage.db import Database

__all__ = ["IntegrityStore", "SqliteIntegrityStore"]


class IntegrityStore(Protocol):
    """Consistency checks between chunks, their vectors and the text index."""

    def unembedded(self) -> list[tuple[int, str | None]]:
        """Chunks with no vector, each with its job's status (None: no job at all)."""
        ...

    def foreign_vectors(self, model_id: str, dimensions: int) -> list[int]:
        """Chunks whose vector is of another model or another size."""
        ...

    def orphan_vectors(self) -> list[int]:
        """Vectors whose chunk is gone."""
        ...

    def chunk_count(self) -> int:
        """Chunks in the store."""
        ...

    def vector_count(self) -> int:
        """Vectors in the store (the derived vector indexes should hold as many)."""
        ...

    def row_counts(self) -> dict[str, int]:
        """Rows of ``sessions``, ``conversation_events``, ``chunks`` and ``chunks_vec``
        (``Mindfile.info``)."""
        ...

    def text_index_rows(self) -> int:
        """Rows in the full-text index itself (not its content table)."""
        ...

    def drop_vectors(self, chunk_rowids: Sequence[int]) -> None:
        """Delete these vectors and log them as changed, so every process's vector
        index re-reads (and drops) them."""
        ...

    def rebuild_text_index(self) -> None:
        """Rebuild the full-text index from the chunks."""
        ...


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


class SqliteIntegrityStore:
    """:class:`IntegrityStore` over ``chunks``, ``chunks_vec`` (float32 blobs) and FTS5."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def unembedded(self) -> list[tuple[int, str | None]]:
        return [(int(r), status) for r, status in self.db.query(UNEMBEDDED)]

    def foreign_vectors(self, model_id: str, dimensions: int) -> list[int]:
        blob_bytes = dimensions * 4  # float32
        return [int(r[0]) for r in self.db.query(BAD_VECTORS, (model_id, blob_bytes))]

    def orphan_vectors(self) -> list[int]:
        return [int(r[0]) for r in self.db.query(ORPHAN_VECTORS)]

    def chunk_count(self) -> int:
        return int(self.db.scalar("SELECT count(*) FROM chunks"))

    def vector_count(self) -> int:
        return int(self.db.scalar("SELECT count(*) FROM chunks_vec"))

    def row_counts(self) -> dict[str, int]:
        return log.count_rows(self.db)

    def text_index_rows(self) -> int:
        return int(self.db.scalar(FTS_ROWS))

    def drop_vectors(self, chunk_rowids: Sequence[int]) -> None:
        rows = [(r,) for r in chunk_rowids]
        with self.db.atomic():
            self.db.executemany(DELETE_VECTOR, rows)
            self.db.executemany(LOG_CHANGE, rows)

    def rebuild_text_index(self) -> None:
        self.db.execute(REBUILD_FTS)
