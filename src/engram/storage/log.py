"""SQL for the conversation log: sessions, events, chunks and their vectors.

Functions take a :class:`Database` and run inside the caller's transaction where they
write; the engine owns transaction boundaries.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import blake3
import numpy as np
import numpy.typing as npt

from engram.errors import ConflictError
from engram.index.pipeline import PreparedEvent
from engram.storage.db import Database
from engram.types import MemoryRecord, SessionInfo

__all__ = [
    "chunk_id_for",
    "delete_session",
    "list_sessions",
    "load_events",
    "write_event",
]

UPSERT_SESSION = """
INSERT INTO sessions (session_id, agent_identity, created_at, updated_at)
VALUES (?1, ?2, ?3, ?3)
ON CONFLICT (session_id) DO UPDATE SET
    updated_at = excluded.updated_at,
    agent_identity = coalesce(excluded.agent_identity, sessions.agent_identity)
"""

MAX_SEQUENCE = "SELECT max(sequence) FROM conversation_events WHERE session_id = ?"

INSERT_EVENT = """
INSERT INTO conversation_events (session_id, sequence, payload_json, created_at)
VALUES (?, ?, ?, ?)
"""

SET_LAST_SEQUENCE = """
INSERT INTO session_state (session_id, state_json, updated_at)
VALUES (?1, json_object('last_sequence', ?2), ?3)
ON CONFLICT (session_id) DO UPDATE SET
    state_json = json_set(session_state.state_json, '$.last_sequence', ?2),
    updated_at = ?3
"""

FIND_CHUNK = "SELECT id FROM chunks WHERE session_id = ? AND content_hash = ?"

# A chunk shared by several events keeps the highest importance, and expires only when
# every event holding it has (NULL = never; see docs/memory-management.md).
EXTEND_CHUNK = """
UPDATE chunks SET
    sequence_end = max(sequence_end, ?1),
    importance = max(importance, ?2),
    expires_at = CASE WHEN expires_at IS NULL OR ?3 IS NULL THEN NULL
                      ELSE max(expires_at, ?3) END
WHERE id = ?4
"""

INSERT_CHUNK = """
INSERT INTO chunks (chunk_id, session_id, chunk_text, content_hash, sequence_start,
                    sequence_end, metadata_json, created_at, context_before,
                    importance, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING id
"""

#: How much of a neighbouring event's text a chunk carries as FTS context.
CONTEXT_CHARS = 400

PREVIOUS_CHUNK_TEXT = """
SELECT chunk_text FROM chunks WHERE session_id = ? AND sequence_end = ?
ORDER BY id DESC LIMIT 1
"""

SET_CONTEXT_AFTER = """
UPDATE chunks SET context_after = ?
WHERE session_id = ? AND sequence_end = ? AND context_after = ''
"""

INSERT_VECTOR = """
INSERT INTO chunks_vec (chunk_rowid, embedding_blob, embedding_model) VALUES (?, ?, ?)
"""

# Background indexing (docs/background-indexing.md): a job embeds the chunk later.
ENQUEUE_JOB = """
INSERT INTO memory_jobs (chunk_rowid, status, next_retry_at, created_at, updated_at)
VALUES (?1, 'pending', ?2, ?2, ?2)
"""

LIST_SESSIONS = """
SELECT s.session_id, s.agent_identity, s.created_at, s.updated_at,
       coalesce((SELECT max(sequence) FROM conversation_events e
                 WHERE e.session_id = s.session_id), -1),
       (SELECT count(*) FROM conversation_events e WHERE e.session_id = s.session_id)
FROM sessions AS s
ORDER BY s.updated_at DESC, s.rowid DESC
"""


def chunk_id_for(session_id: str, chunk_hash: str) -> str:
    """Chunk ids are deterministic: one chunk per (session, content)."""
    digest = blake3.blake3(f"{session_id}\x00{chunk_hash}".encode()).hexdigest(length=12)
    return f"ch_{digest}"


def write_event(
    db: Database,
    event: PreparedEvent,
    vectors: npt.NDArray[np.float32] | None,
    model_id: str,
    now: str,
    *,
    agent_identity: str | None = None,
    neighbor_context: bool = True,
) -> int:
    """Store one prepared event with its chunks and vectors; returns new chunk count.

    Must run inside ``db.atomic()``. Raises :class:`ConflictError` when the sequence is
    not above the session's highest (the caller's transaction then rolls back).

    With ``neighbor_context`` the new chunks carry the tail of the session's previous
    event as ``context_before``, and that event's chunks get the head of this one as
    ``context_after`` (both indexed by FTS5 with low weights).

    ``vectors=None`` (background indexing) enqueues a ``memory_jobs`` row for each new
    chunk instead of inserting its vector, in the same transaction.
    """
    db.execute(UPSERT_SESSION, (event.session_id, agent_identity, now))
    last = db.scalar(MAX_SEQUENCE, (event.session_id,))
    if last is not None and event.sequence <= int(last):
        raise ConflictError(
            f"sequence {event.sequence} is not above session {event.session_id!r}'s "
            f"last sequence {last}",
            session_id=event.session_id,
            sequence=event.sequence,
            last_sequence=int(last),
        )
    db.execute(INSERT_EVENT, (event.session_id, event.sequence, event.payload_json, now))
    db.execute(SET_LAST_SEQUENCE, (event.session_id, event.sequence, now))
    before = ""
    if neighbor_context and last is not None and event.chunks:
        before = str(db.scalar(PREVIOUS_CHUNK_TEXT, (event.session_id, last)) or "")
        before = before[-CONTEXT_CHARS:]
        head = event.chunks[0].text[:CONTEXT_CHARS]
        db.execute(SET_CONTEXT_AFTER, (head, event.session_id, last))
    added = 0
    rows: list[Any] = [None] * len(event.chunks) if vectors is None else list(vectors)
    for chunk, vector in zip(event.chunks, rows, strict=True):
        existing = db.scalar(FIND_CHUNK, (event.session_id, chunk.content_hash))
        if existing is not None:
            db.execute(EXTEND_CHUNK, (event.sequence, event.importance, event.expires_at, existing))
            continue
        rowid = db.scalar(
            INSERT_CHUNK,
            (
                chunk_id_for(event.session_id, chunk.content_hash),
                event.session_id,
                chunk.text,
                chunk.content_hash,
                event.sequence,
                event.sequence,
                chunk.metadata_json,
                now,
                before,
                event.importance,
                event.expires_at,
            ),
        )
        if vector is None:
            db.execute(ENQUEUE_JOB, (rowid, now))
        else:
            db.execute(INSERT_VECTOR, (rowid, np.asarray(vector, dtype="<f4").tobytes(), model_id))
        added += 1
    return added


def load_events(db: Database, session_id: str, limit: int | None) -> list[MemoryRecord]:
    """Events in sequence order; with ``limit``, the most recent ``limit`` of them."""
    if limit is None:
        rows = db.query(
            "SELECT sequence, payload_json, created_at FROM conversation_events "
            "WHERE session_id = ? ORDER BY sequence",
            (session_id,),
        )
    else:
        rows = db.query(
            "SELECT * FROM (SELECT sequence, payload_json, created_at FROM conversation_events "
            "WHERE session_id = ? ORDER BY sequence DESC LIMIT ?) ORDER BY sequence",
            (session_id, limit),
        )
    return [MemoryRecord(session_id, int(s), json.loads(p), str(c)) for s, p, c in rows]


def list_sessions(db: Database) -> list[SessionInfo]:
    """Sessions, most recently updated first."""
    return [
        SessionInfo(str(sid), agent, str(created), str(updated), int(last), int(count))
        for sid, agent, created, updated, last, count in db.query(LIST_SESSIONS)
    ]


def delete_session(db: Database, session_id: str) -> bool:
    """Delete a session and (by cascade) everything that hangs off it."""
    db.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
    return db.changes() > 0


def count_rows(db: Database) -> dict[str, int]:
    """Row counts for ``info``."""
    out: dict[str, int] = {}
    for table in ("sessions", "conversation_events", "chunks", "chunks_vec"):
        out[table] = int(db.scalar(f"SELECT count(*) FROM {table}"))
    return out


def chunk_rows(db: Database, rowids: Sequence[int]) -> dict[int, tuple[Any, ...]]:
    """Chunk columns by rowid, for building search hits."""
    if not rowids:
        return {}
    rows = db.query(
        "SELECT id, chunk_id, session_id, chunk_text, sequence_start, sequence_end, "
        "metadata_json FROM chunks WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps([int(r) for r in rowids]),),
    )
    return {int(r[0]): r for r in rows}
