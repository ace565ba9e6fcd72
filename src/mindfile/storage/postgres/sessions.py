"""The Postgres :class:`~mindfile.storage.sessions.SessionStore`: sessions, sequences and
the log's write path (events, their chunks, vectors or embedding jobs).

The statements are :mod:`mindfile.storage.log`'s and :mod:`mindfile.storage.chunks`'s in
Postgres terms, and the rules the same (a sequence must be above the session's
high-water mark, a session's user and channel are fixed once, chunks are de-duplicated
per session by content hash and carry their neighbours' text).

**Sequences under concurrent writers.** SQLite serialises writers with one write lock.
Here, a transaction that reads a session's sequences (``next_sequence``, the batch
writer) first takes a transaction-scoped advisory lock on the session id, so two writers
of one session, on any hosts, run that step one after the other: the second sees the
first's events (or none, if it rolled back) and never reuses a sequence. The batch
writer locks its sessions in sorted order, so two batches never deadlock. The lock
lasts until the caller's transaction ends: call these inside ``db.atomic()``.

**Chunk ids in commit order.** Before any session lock, these methods take the chunk
writers' lock (:mod:`mindfile.storage.postgres.writer_lock`, migration 0008), which the
triggers on ``chunks`` and ``chunks_vec`` take anyway at the first chunk write: one
transaction at a time writes chunks, so ids and change-log seqs are handed out in
commit order. Taking it first keeps it free of deadlocks (the reasons are in that
module).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from mindfile.errors import ConflictError, ScopeError
from mindfile.index.chunking import content_hash as text_hash
from mindfile.index.pipeline import PreparedChunk, PreparedEvent
from mindfile.storage.chunks import ChunkRow, chunk_id_for
from mindfile.storage.log import CONTEXT_CHARS, namespace_user
from mindfile.storage.postgres.db import PgDatabase
from mindfile.storage.postgres.writer_lock import lock_chunk_writes
from mindfile.types import SessionInfo

__all__ = ["PgSessionStore", "insert_chunks", "prune_changes"]

LOCK_SESSION = "SELECT pg_advisory_xact_lock(hashtextextended('mindfile.session:' || %s, 0))"

UPSERT_SESSION = """
INSERT INTO sessions (session_id, agent_identity, created_at, updated_at, user_id, channel)
VALUES (%(sid)s, %(agent)s, %(now)s, %(now)s, %(user)s, %(channel)s)
ON CONFLICT (session_id) DO UPDATE SET
    updated_at = EXCLUDED.updated_at,
    agent_identity = coalesce(EXCLUDED.agent_identity, sessions.agent_identity),
    user_id = coalesce(sessions.user_id, EXCLUDED.user_id),
    channel = coalesce(sessions.channel, EXCLUDED.channel)
RETURNING user_id, channel
"""

ENSURE_SESSION = """
INSERT INTO sessions (session_id, agent_identity, created_at, updated_at, user_id, channel)
VALUES (%(sid)s, NULL, %(now)s, %(now)s, %(user)s, NULL)
ON CONFLICT (session_id) DO UPDATE SET user_id = coalesce(sessions.user_id, EXCLUDED.user_id)
RETURNING user_id, channel
"""

SESSION_EXISTS = "SELECT 1 FROM sessions WHERE session_id = %s"
SESSION_SCOPE = "SELECT user_id, channel FROM sessions WHERE session_id = %s"
HIGH_WATER = "SELECT sequence_high_water FROM sessions WHERE session_id = %s"

SESSION_CURSOR = """
SELECT sequence_high_water,
       (SELECT max(sequence) FROM conversation_events WHERE session_id = %(sid)s)
FROM sessions WHERE session_id = %(sid)s
"""

RAISE_HIGH_WATER = """
UPDATE sessions SET sequence_high_water = %(seq)s
WHERE session_id = %(sid)s AND (sequence_high_water IS NULL OR sequence_high_water < %(seq)s)
"""

INSERT_EVENT = """
INSERT INTO conversation_events (session_id, sequence, payload_json, created_at, occurred_at)
VALUES (%s, %s, %s, %s, %s)
"""

SET_LAST_SEQUENCE = """
INSERT INTO session_state (session_id, state_json, updated_at)
VALUES (%(sid)s, jsonb_build_object('last_sequence', %(seq)s::bigint)::text, %(now)s)
ON CONFLICT (session_id) DO UPDATE SET
    state_json = jsonb_set(session_state.state_json::jsonb, '{last_sequence}',
                           to_jsonb(%(seq)s::bigint))::text,
    updated_at = %(now)s
"""

FIND_CHUNKS = """
SELECT content_hash, id FROM chunks WHERE session_id = %s AND content_hash = ANY(%s::text[])
"""

FIND_CHUNK = "SELECT id FROM chunks WHERE session_id = %s AND content_hash = %s"

# A shared chunk keeps the highest importance, expires only when every event holding it
# has, and carries the newest of its events' times (as on SQLite, storage/log.py).
EXTEND_CHUNK = """
UPDATE chunks SET
    sequence_end = greatest(sequence_end, %(seq)s),
    importance = greatest(importance, %(importance)s),
    expires_at = CASE WHEN expires_at IS NULL OR %(expires)s::text IS NULL THEN NULL
                      ELSE greatest(expires_at, %(expires)s::text) END,
    occurred_at = CASE WHEN %(occurred)s::text IS NULL THEN occurred_at
                       ELSE greatest(coalesce(occurred_at, created_at), %(occurred)s::text) END
WHERE id = %(id)s
"""

PREVIOUS_CHUNK_TEXT = """
SELECT chunk_text FROM chunks WHERE session_id = %s AND sequence_end = %s
ORDER BY id DESC LIMIT 1
"""

SET_CONTEXT_AFTER = """
UPDATE chunks SET context_after = %s
WHERE session_id = %s AND sequence_end = %s AND context_after = ''
"""

LIST_SESSIONS = """
SELECT s.session_id, s.agent_identity, s.created_at, s.updated_at,
       coalesce(s.sequence_high_water, -1),
       (SELECT count(*) FROM conversation_events e WHERE e.session_id = s.session_id),
       s.user_id, s.channel
FROM sessions AS s
WHERE (%(user)s::text IS NULL OR s.user_id = %(user)s)
  AND (%(channel)s::text IS NULL OR s.channel = %(channel)s)
ORDER BY s.updated_at DESC, s.rowid DESC
"""

INSERT_CHUNK = """
INSERT INTO chunks (chunk_id, session_id, chunk_text, content_hash, sequence_start,
                    sequence_end, metadata_json, created_at, context_before,
                    context_after, importance, expires_at, consolidated_at, text_hash,
                    file_id, occurred_at, user_statement)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
RETURNING id
"""

INSERT_VECTOR = (
    "INSERT INTO chunks_vec (chunk_rowid, embedding, embedding_model) VALUES (%s, %s, %s)"
)

ENQUEUE_JOB = """
INSERT INTO memory_jobs (chunk_rowid, status, next_retry_at, created_at, updated_at)
VALUES (%s, 'pending', %s, %s, %s)
"""

#: Rows kept in each change log, and how often (in commits) the write path prunes.
KEEP_CHANGES = 100_000
PRUNE_EVERY = 64


def insert_chunks(
    db: PgDatabase,
    rows: Sequence[ChunkRow],
    vectors: Sequence[npt.NDArray[np.floating] | None],
    model_id: str,
    now: str,
) -> list[int]:
    """Write chunk rows with their vectors (or embedding jobs); returns their row ids.

    The commit stage of :mod:`mindfile.storage.chunks` on Postgres: the caller holds the
    transaction and has de-duplicated the chunks.
    """
    if len(rows) != len(vectors):
        raise ValueError("one vector (or None) per chunk row")
    params = [
        (
            chunk_id_for(row.session_id, row.content_hash), row.session_id, row.text,
            row.content_hash, row.sequence_start, row.sequence_end, row.metadata_json, now,
            row.context_before, row.context_after, row.importance, row.expires_at,
            row.consolidated_at, text_hash(row.text), row.file_id, row.occurred_at,
            None if row.user_statement is None else int(row.user_statement),
        )
        for row in rows
    ]  # fmt: skip
    rowids = [int(r[0]) for r in db.executemany_returning(INSERT_CHUNK, params)]
    pairs = list(zip(rowids, vectors, strict=True))
    db.executemany(
        INSERT_VECTOR,
        [(rowid, np.asarray(v, dtype=np.float32), model_id) for rowid, v in pairs if v is not None],
    )
    db.executemany(ENQUEUE_JOB, [(rowid, now, now, now) for rowid, v in pairs if v is None])
    return rowids


def prune_changes(
    db: PgDatabase,
    tables: Sequence[str] = ("chunks_changes", "chunks_vec_changes"),
    keep: int = KEEP_CHANGES,
) -> None:
    """Drop all but the newest ``keep`` rows of each change log (never the newest one).

    The newest row stays even for ``keep=0``: its seq is the log's high-water mark (the
    readers' ``newest``, :mod:`mindfile.storage.postgres.index_source`), which SQLite
    keeps in ``sqlite_sequence`` and an identity sequence cannot give transactionally."""
    for table in tables:
        db.execute(
            f"DELETE FROM {table} WHERE seq <= (SELECT max(seq) FROM {table}) - greatest(%s, 1)",
            (keep,),
        )


#: ``write_events``' mark for a chunk of the batch not inserted yet (ids are positive).
_PENDING = -1


@dataclass(slots=True)
class _Cursor:
    """What the batch writer remembers about a session between its events."""

    last: int | None
    newest: int | None
    previous_text: str = ""
    first: bool = True


class PgSessionStore:
    """:class:`~mindfile.storage.sessions.SessionStore` on Postgres."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def exists(self, session_id: str) -> bool:
        return self.db.scalar(SESSION_EXISTS, (session_id,)) is not None

    def scope(self, session_id: str) -> tuple[str | None, str | None] | None:
        row = self.db.query_one(SESSION_SCOPE, (session_id,))
        return None if row is None else (row[0], row[1])

    def upsert(
        self, session_id: str, now: str, *, user_id: str | None = None, touch: bool = True
    ) -> None:
        self._upsert(session_id, now, user_id=user_id, touch=touch)

    def _upsert(
        self,
        session_id: str,
        now: str,
        *,
        agent_identity: str | None = None,
        user_id: str | None = None,
        channel: str | None = None,
        touch: bool = True,
    ) -> None:
        owner = namespace_user(session_id)
        if owner is not None and user_id is not None and user_id != owner:
            raise ScopeError(
                f"session {session_id!r} belongs to user {owner!r}, not {user_id!r}",
                session_id=session_id,
            )
        user = user_id if user_id is not None else owner
        params = {"sid": session_id, "agent": agent_identity, "now": now, "user": user}
        if touch:
            rows = self.db.query(UPSERT_SESSION, {**params, "channel": channel})
        else:
            rows = self.db.query(ENSURE_SESSION, params)
        stored_user, stored_channel = rows[0] if rows else (None, None)
        for given, stored, what in (
            (user, stored_user, "user_id"),
            (channel, stored_channel, "channel"),
        ):
            if given is not None and stored != given:
                raise ScopeError(
                    f"session {session_id!r} belongs to {what} {stored!r}, not {given!r}",
                    session_id=session_id,
                )

    def next_sequence(self, session_id: str) -> int:
        lock_chunk_writes(self.db)  # before the session's lock (writer_lock.py)
        self.db.execute(LOCK_SESSION, (session_id,))
        last = self.db.scalar(HIGH_WATER, (session_id,))
        return 1 if last is None or int(last) < 1 else int(last) + 1

    def list_sessions(
        self, *, user_id: str | None = None, channel: str | None = None
    ) -> list[SessionInfo]:
        rows = self.db.query(LIST_SESSIONS, {"user": user_id, "channel": channel})
        return [
            SessionInfo(
                str(sid), agent, str(created), str(updated), int(last), int(count), user, chan
            )
            for sid, agent, created, updated, last, count, user, chan in rows
        ]

    def write_event(
        self,
        event: PreparedEvent,
        vectors: npt.NDArray[np.float32] | None,
        model_id: str,
        now: str,
        *,
        neighbor_context: bool = True,
    ) -> int:
        return self.write_events([event], vectors, model_id, now, neighbor_context=neighbor_context)

    def write_events(
        self,
        events: Sequence[PreparedEvent],
        vectors: npt.NDArray[np.float32] | None,
        model_id: str,
        now: str,
        *,
        agent_identity: str | None = None,
        user_id: str | None = None,
        channel: str | None = None,
        neighbor_context: bool = True,
    ) -> int:
        db = self.db
        with db.atomic():
            lock_chunk_writes(db)  # first: then the sessions' locks (writer_lock.py)
            for sid in sorted({e.session_id for e in events}):
                db.execute(LOCK_SESSION, (sid,))
            cursors: dict[str, _Cursor] = {}
            after = _next_heads(events) if neighbor_context else [""] * len(events)
            known = self._existing_chunks(events)
            offset = added = 0
            # New chunks are inserted together (one pipelined batch, not a round trip
            # each: 4x the ingest rate); a chunk repeated within the batch flushes them
            # first, so its extension finds the row. The events are all in by then, so
            # the link trigger finds each chunk's event as before.
            pending: list[tuple[tuple[str, str], ChunkRow, Any]] = []
            pending_events: list[tuple[Any, ...]] = []

            def flush_events() -> None:  # before anything whose trigger needs the event
                if pending_events:
                    db.executemany(INSERT_EVENT, pending_events)
                    pending_events.clear()

            def flush() -> None:
                flush_events()
                if pending:
                    ids = insert_chunks(
                        db, [r for _, r, _ in pending], [v for _, _, v in pending], model_id, now
                    )
                    known.update(zip([k for k, _, _ in pending], ids, strict=True))
                    pending.clear()

            for i, event in enumerate(events):
                sid = event.session_id
                cur = cursors.get(sid)
                if cur is None:
                    self._upsert(
                        sid, now, agent_identity=agent_identity, user_id=user_id, channel=channel
                    )
                    cur = cursors[sid] = self._cursor(sid, neighbor_context)
                if cur.last is not None and event.sequence <= cur.last:
                    raise ConflictError(
                        f"sequence {event.sequence} is not above session {sid!r}'s "
                        f"last sequence {cur.last}",
                        session_id=sid,
                        sequence=event.sequence,
                        last_sequence=cur.last,
                    )
                pending_events.append(
                    (sid, event.sequence, event.payload_json, now, event.occurred_at)
                )
                n = len(event.chunks)
                rows: list[Any] = (
                    [None] * n if vectors is None else list(vectors[offset : offset + n])
                )
                offset += n
                if neighbor_context and event.chunks and cur.first and cur.newest is not None:
                    head = event.chunks[0].text[:CONTEXT_CHARS]
                    db.execute(SET_CONTEXT_AFTER, (head, sid, cur.newest))
                before = cur.previous_text if neighbor_context and cur.newest is not None else ""
                for chunk, vector in zip(event.chunks, rows, strict=True):
                    key = (sid, chunk.content_hash)
                    existing = known.get(key)
                    if existing == _PENDING:
                        flush()
                        existing = known[key]
                    if existing is not None:
                        flush_events()  # the extension links the chunk to this event
                        db.execute(EXTEND_CHUNK, {
                            "seq": event.sequence, "importance": event.importance,
                            "expires": event.expires_at, "occurred": event.occurred_at,
                            "id": existing,
                        })  # fmt: skip
                        continue
                    new = ChunkRow(
                        sid, chunk.text, chunk.content_hash, chunk.metadata_json,
                        event.sequence, event.sequence, event.importance, event.expires_at,
                        before, after[i], occurred_at=event.occurred_at,
                        user_statement=chunk.user_statement,
                    )  # fmt: skip
                    pending.append((key, new, vector))
                    known[key] = _PENDING
                    added += 1
                cur.last = cur.newest = event.sequence
                cur.first = False
                cur.previous_text = event.chunks[-1].text[-CONTEXT_CHARS:] if event.chunks else ""
            flush()
            for sid, cur in cursors.items():
                self._raise_high_water(sid, cur.last, now)
        if db.commit_count % PRUNE_EVERY == 0:
            prune_changes(db)
        return added

    def add_chunks(
        self,
        session_id: str,
        chunks: Sequence[PreparedChunk],
        vectors: npt.NDArray[np.float32] | None,
        model_id: str,
        sequence: int,
        now: str,
    ) -> int:
        db = self.db
        added = 0
        rows = [None] * len(chunks) if vectors is None else list(vectors)
        with db.atomic():
            lock_chunk_writes(db)
            for chunk, vector in zip(chunks, rows, strict=True):
                if db.scalar(FIND_CHUNK, (session_id, chunk.content_hash)) is not None:
                    continue  # the same text twice within one item
                row = ChunkRow(
                    session_id, chunk.text, chunk.content_hash, chunk.metadata_json,
                    sequence, sequence, user_statement=chunk.user_statement,
                )  # fmt: skip
                insert_chunks(db, [row], [vector], model_id, now)
                added += 1
            self._raise_high_water(session_id, sequence, now)
        return added

    # -- helpers -----------------------------------------------------------------------

    def _cursor(self, session_id: str, neighbor_context: bool) -> _Cursor:
        row = self.db.query_one(SESSION_CURSOR, {"sid": session_id})
        last, newest = (None, None) if row is None else row
        cur = _Cursor(None if last is None else int(last), None if newest is None else int(newest))
        if neighbor_context and cur.newest is not None:
            prev = self.db.scalar(PREVIOUS_CHUNK_TEXT, (session_id, cur.newest))
            cur.previous_text = str(prev or "")[-CONTEXT_CHARS:]
        return cur

    def _raise_high_water(self, session_id: str, sequence: int | None, now: str) -> None:
        self.db.execute(RAISE_HIGH_WATER, {"sid": session_id, "seq": sequence})
        high = self.db.scalar(HIGH_WATER, (session_id,))
        self.db.execute(SET_LAST_SEQUENCE, {"sid": session_id, "seq": high, "now": now})

    def _existing_chunks(self, events: Sequence[PreparedEvent]) -> dict[tuple[str, str], int]:
        wanted: dict[str, set[str]] = {}
        for event in events:
            wanted.setdefault(event.session_id, set()).update(c.content_hash for c in event.chunks)
        found: dict[tuple[str, str], int] = {}
        for sid, hashes in wanted.items():
            if hashes:
                for content_hash, rowid in self.db.query(FIND_CHUNKS, (sid, sorted(hashes))):
                    found[(sid, str(content_hash))] = int(rowid)
        return found


def _next_heads(events: Sequence[PreparedEvent]) -> list[str]:
    """For each event, the head of the next event of its session in this batch."""
    out = [""] * len(events)
    following: dict[str, int] = {}
    for i in range(len(events) - 1, -1, -1):
        nxt = following.get(events[i].session_id)
        if nxt is not None and events[nxt].chunks:
            out[i] = events[nxt].chunks[0].text[:CONTEXT_CHARS]
        following[events[i].session_id] = i
    return out
