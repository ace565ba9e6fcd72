"""The commit stage of the indexing pipeline: the one place a chunk row is written.

Every writer (``store``/``store_many``, notes, facts, consolidation summaries, LLM
extraction through notes and facts) prepares its chunks and vectors outside any
transaction (:mod:`mindfile.index.pipeline`, :func:`mindfile.index.embedding.
prepare_vectors`), then, inside one short write transaction, calls
:func:`insert_chunk` (or :func:`insert_chunks`) for its new chunks. It writes the chunk
row (the FTS5 row follows by trigger, in the same transaction) and either the chunk's
vector or, when the vector is not there yet (``indexing="background"``), a job that embeds it later
(:mod:`mindfile.jobs`, whose :func:`~mindfile.jobs.queue.complete` is the deferred half
of this stage). See docs/architecture.md, "Write path".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import blake3
import numpy as np
import numpy.typing as npt

from mindfile.index.chunking import content_hash as text_hash
from mindfile.storage.db import Database

_T = TypeVar("_T", bound=tuple[Any, ...])

__all__ = [
    "INSERT_VECTOR",
    "ChunkRow",
    "chunk_id_for",
    "find_chunk",
    "insert_chunk",
    "insert_chunks",
    "vector_blob",
]

INSERT_CHUNK = """
INSERT INTO chunks (chunk_id, session_id, chunk_text, content_hash, sequence_start,
                    sequence_end, metadata_json, created_at, context_before,
                    context_after, importance, expires_at, consolidated_at, text_hash,
                    file_id, occurred_at, user_statement)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING id
"""

INSERT_VECTOR = """
INSERT INTO chunks_vec (chunk_rowid, embedding_blob, embedding_model) VALUES (?, ?, ?)
"""

# Background indexing (docs/background-indexing.md): a job embeds the chunk later.
ENQUEUE_JOB = """
INSERT INTO memory_jobs (chunk_rowid, status, next_retry_at, created_at, updated_at)
VALUES (?1, 'pending', ?2, ?2, ?2)
"""

FIND_CHUNK = "SELECT id FROM chunks WHERE session_id = ? AND content_hash = ?"

# Many chunks in one statement (:func:`insert_chunks`): the head of INSERT_CHUNK, then
# one ``(?, ...)`` per row. RETURNING's row order is unspecified: rows come back with
# their (unique) chunk id.
INSERT_CHUNKS_HEAD = INSERT_CHUNK[: INSERT_CHUNK.index("VALUES")] + "VALUES "
INSERT_CHUNKS_TAIL = " RETURNING chunk_id, id"
INSERT_VECTORS_HEAD = INSERT_VECTOR[: INSERT_VECTOR.index("VALUES")] + "VALUES "
#: Rows per multi-row INSERT: 17 parameters each, well under SQLite's 32,766.
ROWS_PER_INSERT = 512


@dataclass(frozen=True, slots=True)
class ChunkRow:
    """Everything a chunk row holds besides its id and creation time."""

    session_id: str
    text: str
    content_hash: str
    metadata_json: str
    sequence_start: int
    sequence_end: int
    importance: float = 0.5
    expires_at: str | None = None
    context_before: str = ""
    context_after: str = ""
    consolidated_at: str | None = None
    file_id: int | None = None
    #: When the event happened (None: when the chunk is stored; migration 0013).
    occurred_at: str | None = None
    #: A user-side statement about the user (migration 0014); None: written unclassified
    #: (NULL), for the background backfill (:func:`mindfile.retrieve.preferences.
    #: backfill`): classifying ~1 KB chat chunks here cost ~14% of ingest throughput.
    user_statement: bool | None = None


def chunk_id_for(session_id: str, chunk_hash: str) -> str:
    """Chunk ids are deterministic: one chunk per (session, content)."""
    digest = blake3.blake3(f"{session_id}\x00{chunk_hash}".encode()).hexdigest(length=12)
    return f"ch_{digest}"


def vector_blob(vector: npt.NDArray[np.floating]) -> bytes:
    """A vector as stored: little-endian float32."""
    return np.asarray(vector, dtype="<f4").tobytes()


def find_chunk(db: Database, session_id: str, content_hash: str) -> int | None:
    """The rowid of the session's chunk with this content hash (dedup), or None."""
    found = db.scalar(FIND_CHUNK, (session_id, content_hash))
    return None if found is None else int(found)


def insert_chunk(
    db: Database,
    row: ChunkRow,
    vector: npt.NDArray[np.floating] | None,
    model_id: str,
    now: str,
) -> int:
    """Write one chunk and its vector (or its embedding job); returns the chunk rowid.

    Must run inside the caller's ``db.atomic()``; the caller has de-duplicated the chunk
    (:func:`find_chunk`). ``vector=None`` queues a ``memory_jobs`` row instead.
    """
    return insert_chunks(db, [row], [vector], model_id, now)[0]


def insert_chunks(
    db: Database,
    rows: Sequence[ChunkRow],
    vectors: Sequence[npt.NDArray[np.floating] | None],
    model_id: str,
    now: str,
) -> list[int]:
    """:func:`insert_chunk` for many chunks in a few multi-row statements (file sync
    writes thousands per transaction); returns their rowids in order."""
    if len(rows) != len(vectors):
        raise ValueError("one vector (or None) per chunk row")
    params = [
        (
            chunk_id_for(row.session_id, row.content_hash),
            row.session_id,
            row.text,
            row.content_hash,
            row.sequence_start,
            row.sequence_end,
            row.metadata_json,
            now,
            row.context_before,
            row.context_after,
            row.importance,
            row.expires_at,
            row.consolidated_at,
            text_hash(row.text),
            row.file_id,
            row.occurred_at,
            None if row.user_statement is None else int(row.user_statement),
        )
        for row in rows
    ]
    # One statement per ROWS_PER_INSERT rows, not one per row: a statement that writes
    # through the FTS5 trigger opens a savepoint, and FTS5 flushes its pending terms at
    # every savepoint, so one row per statement wrote (and then merged) one tiny segment
    # per chunk. 20,000 source chunks in groups of 256: 1.05 -> 0.53 CPU-seconds.
    found: dict[str, int] = {}
    for block in _blocks(params):
        sql = INSERT_CHUNKS_HEAD + ",".join([_row_marks(17)] * len(block)) + INSERT_CHUNKS_TAIL
        found.update((str(c), int(i)) for c, i in db.raw_query(sql, _flat(block)))
    rowids = [found[p[0]] for p in params]
    pairs = list(zip(rowids, vectors, strict=True))
    stored = [(rowid, vector_blob(v), model_id) for rowid, v in pairs if v is not None]
    for some in _blocks(stored):
        db.execute(INSERT_VECTORS_HEAD + ",".join([_row_marks(3)] * len(some)), _flat(some))
    db.executemany(ENQUEUE_JOB, [(rowid, now) for rowid, v in pairs if v is None])
    return rowids


def _blocks(rows: list[_T]) -> list[list[_T]]:
    return [rows[i : i + ROWS_PER_INSERT] for i in range(0, len(rows), ROWS_PER_INSERT)]


def _row_marks(columns: int) -> str:
    return "(" + ",".join("?" * columns) + ")"


def _flat(rows: list[tuple[Any, ...]]) -> list[Any]:
    return [value for row in rows for value in row]
