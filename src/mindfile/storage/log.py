"""SQL for the conversation log: sessions, events, chunks and their vectors.

Functions take a :class:`Database` and run inside the caller's transaction where they
write; the engine owns transaction boundaries.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from mindfile.errors import ConflictError, ScopeError
from mindfile.index.pipeline import PreparedEvent
from mindfile.storage import changes
from mindfile.storage.chunks import ChunkRow, insert_chunks
from mindfile.storage.db import Database
from mindfile.types import MemoryRecord, SessionInfo

__all__ = [
    "delete_session",
    "high_water",
    "list_sessions",
    "load_events",
    "namespace_user",
    "next_sequence",
    "raise_high_water",
    "scoped_sessions",
    "session_scope",
    "source_sessions",
    "upsert_session",
    "write_event",
    "write_events",
]

# A session's user and channel are set once (NULL = unscoped) and never change:
# coalesce keeps the stored ones, and the writer compares what comes back.
UPSERT_SESSION = """
INSERT INTO sessions (session_id, agent_identity, created_at, updated_at, user_id, channel)
VALUES (?1, ?2, ?3, ?3, ?4, ?5)
ON CONFLICT (session_id) DO UPDATE SET
    updated_at = excluded.updated_at,
    agent_identity = coalesce(excluded.agent_identity, sessions.agent_identity),
    user_id = coalesce(sessions.user_id, excluded.user_id),
    channel = coalesce(sessions.channel, excluded.channel)
RETURNING user_id, channel
"""

ENSURE_SESSION = """
INSERT INTO sessions (session_id, agent_identity, created_at, updated_at, user_id, channel)
VALUES (?1, NULL, ?2, ?2, ?3, NULL)
ON CONFLICT (session_id) DO UPDATE SET user_id = coalesce(sessions.user_id, excluded.user_id)
RETURNING user_id, channel
"""

#: Sessions whose id names their user: notes (``memory:{user}``) and facts
#: (``facts:{user}``) namespaces belong to that user whoever writes them.
USER_NAMESPACES = ("memory:", "facts:")


# The highest sequence ever stored in the session (migration 0010), which deletions
# never lower: a new sequence must be above it. NULL = nothing stored yet.
HIGH_WATER = "SELECT sequence_high_water FROM sessions WHERE session_id = ?"

# The high-water mark and the newest event still stored (whose text the next event
# quotes as neighbour context), in one statement.
SESSION_CURSOR = """
SELECT sequence_high_water,
       (SELECT max(sequence) FROM conversation_events WHERE session_id = ?1)
FROM sessions WHERE session_id = ?1
"""

RAISE_HIGH_WATER = """
UPDATE sessions SET sequence_high_water = ?2
WHERE session_id = ?1 AND (sequence_high_water IS NULL OR sequence_high_water < ?2)
"""

INSERT_EVENT = """
INSERT INTO conversation_events (session_id, sequence, payload_json, created_at, occurred_at)
VALUES (?, ?, ?, ?, ?)
"""

SET_LAST_SEQUENCE = """
INSERT INTO session_state (session_id, state_json, updated_at)
VALUES (?1, json_object('last_sequence', ?2), ?3)
ON CONFLICT (session_id) DO UPDATE SET
    state_json = json_set(session_state.state_json, '$.last_sequence', ?2),
    updated_at = ?3
"""

FIND_CHUNKS = """
SELECT content_hash, id FROM chunks
WHERE session_id = ? AND content_hash IN (SELECT value FROM json_each(?))
"""

# A chunk shared by several events keeps the highest importance, and expires only when
# every event holding it has (NULL = never; see docs/memory-management.md). Its time is
# the newest of its events' (occurred_at NULL = created_at; migration 0013).
EXTEND_CHUNK = """
UPDATE chunks SET
    sequence_end = max(sequence_end, ?1),
    importance = max(importance, ?2),
    expires_at = CASE WHEN expires_at IS NULL OR ?3 IS NULL THEN NULL
                      ELSE max(expires_at, ?3) END,
    occurred_at = CASE WHEN ?5 IS NULL THEN occurred_at
                       ELSE max(coalesce(occurred_at, created_at), ?5) END
WHERE id = ?4
"""

#: How much of a neighbouring event's text a chunk carries as FTS context.
CONTEXT_CHARS = 400

PREVIOUS_CHUNK_TEXT = """
SELECT chunk_text FROM chunks WHERE session_id = ? AND sequence_end = ?
ORDER BY id DESC LIMIT 1
"""

# One statement for the whole batch: each UPDATE of an indexed column queues an FTS5
# change, and FTS5 flushes its queue as a new segment (and merges) at the start of the
# next write statement. One UPDATE per session cost ~20% of bulk-ingest time at 117k.
SET_CONTEXT_AFTER = """
UPDATE chunks SET context_after = json_extract(j.value, '$[0]')
FROM json_each(?) AS j
WHERE chunks.session_id = json_extract(j.value, '$[1]')
  AND chunks.sequence_end = json_extract(j.value, '$[2]')
  AND chunks.context_after = ''
"""

LIST_SESSIONS = """
SELECT s.session_id, s.agent_identity, s.created_at, s.updated_at,
       coalesce(s.sequence_high_water, -1),
       (SELECT count(*) FROM conversation_events e WHERE e.session_id = s.session_id),
       s.user_id, s.channel
FROM sessions AS s
WHERE (?1 IS NULL OR s.user_id = ?1) AND (?2 IS NULL OR s.channel = ?2)
ORDER BY s.updated_at DESC, s.rowid DESC
"""


def namespace_user(session_id: str) -> str | None:
    """The user a namespace session belongs to by its id, or None for other sessions."""
    for prefix in USER_NAMESPACES:
        if session_id.startswith(prefix) and len(session_id) > len(prefix):
            return session_id[len(prefix) :]
    return None


def upsert_session(
    db: Database,
    session_id: str,
    now: str,
    *,
    agent_identity: str | None = None,
    user_id: str | None = None,
    channel: str | None = None,
    touch: bool = True,
) -> None:
    """Create the session or (``touch``) bump its ``updated_at``; set its scope once.

    A session's ``user_id`` and ``channel`` are fixed by the first write that gives
    them (a namespace session's user by its id); a later write that gives a different
    one raises :class:`ScopeError` and the caller's transaction rolls back.
    """
    owner = namespace_user(session_id)
    if owner is not None and user_id is not None and user_id != owner:
        raise ScopeError(
            f"session {session_id!r} belongs to user {owner!r}, not {user_id!r}",
            session_id=session_id,
        )
    user = user_id if user_id is not None else owner
    if touch:
        rows = db.query(UPSERT_SESSION, (session_id, agent_identity, now, user, channel))
    else:
        rows = db.query(ENSURE_SESSION, (session_id, now, user))
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


def scoped_sessions(db: Database, *, user_id: str | None, channel: str | None = None) -> list[str]:
    """The ids of the sessions of ``user_id`` (and of ``channel`` when given)."""
    if user_id is None and channel is None:
        raise ValueError("scoped_sessions needs a user_id or a channel")
    sql, params = "SELECT session_id FROM sessions WHERE 1", []
    if user_id is not None:
        sql += " AND user_id = ?"
        params.append(user_id)
    if channel is not None:
        sql += " AND channel = ?"
        params.append(channel)
    return [str(r[0]) for r in db.query(sql + " ORDER BY session_id", params)]


def session_scope(db: Database, session_id: str) -> tuple[str | None, str | None] | None:
    """``(user_id, channel)`` of a session, or None when it does not exist."""
    row = db.query_one("SELECT user_id, channel FROM sessions WHERE session_id = ?", (session_id,))
    return None if row is None else (row[0], row[1])


def high_water(db: Database, session_id: str) -> int | None:
    """The highest sequence ever stored in the session (None: nothing yet).

    Deleting events (notes, the expiry sweep, quota eviction) never lowers it; only
    forgetting the session does, by deleting its row.
    """
    value = db.scalar(HIGH_WATER, (session_id,))
    return None if value is None else int(value)


def next_sequence(db: Database, session_id: str) -> int:
    """The session's next sequence: one above its high-water mark (1 for a new one)."""
    last = high_water(db, session_id)
    return 1 if last is None or last < 1 else last + 1


def raise_high_water(db: Database, session_id: str, sequence: int, now: str) -> None:
    """Record ``sequence`` as stored in the session (its row must exist).

    Raises the high-water mark (never lowers it) and mirrors it into
    ``session_state.last_sequence``, where stores before 0.2 kept it.
    """
    db.execute(RAISE_HIGH_WATER, (session_id, sequence))
    db.execute(SET_LAST_SEQUENCE, (session_id, high_water(db, session_id), now))


def write_event(
    db: Database,
    event: PreparedEvent,
    vectors: npt.NDArray[np.float32] | None,
    model_id: str,
    now: str,
    *,
    agent_identity: str | None = None,
    user_id: str | None = None,
    channel: str | None = None,
    neighbor_context: bool = True,
) -> int:
    """Store one prepared event; see :func:`write_events`."""
    return write_events(
        db,
        [event],
        vectors,
        model_id,
        now,
        agent_identity=agent_identity,
        user_id=user_id,
        channel=channel,
        neighbor_context=neighbor_context,
    )


@dataclass(slots=True)
class _SessionCursor:
    """What the batch writer remembers about a session between its events.

    ``last`` is the high-water mark (a new sequence must be above it); ``newest`` the
    newest event still stored, whose chunks the next event quotes as context.
    """

    last: int | None
    newest: int | None
    previous_text: str = ""
    first: bool = True


def write_events(
    db: Database,
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
    """Store prepared events (in order) with their chunks and vectors; returns new chunks.

    Must run inside ``db.atomic()``. Raises :class:`ConflictError` when a sequence is not
    above the highest ever stored in its session (the high-water mark, which deleting
    events never lowers; the caller's transaction then rolls back). ``vectors``
    holds one row per chunk of every event, in order.

    Per session the batch upserts the session, reads its last sequence and records the
    new one once, so a bulk ingest costs about three statements per single-chunk event.

    With ``neighbor_context`` new chunks carry the tail of the session's previous event
    as ``context_before`` and the head of the next one as ``context_after`` (filled in
    when that event arrives; both indexed by BM25 with low weights).

    ``vectors=None`` (background indexing) enqueues a ``memory_jobs`` row for each new
    chunk instead of inserting its vector, in the same transaction.
    """
    cursors: dict[str, _SessionCursor] = {}
    after = _next_heads(events) if neighbor_context else [""] * len(events)
    known = _existing_chunks(db, events)
    # New chunks are written together at the end, in multi-row statements (one statement
    # per chunk made FTS5 flush a one-chunk segment at each: insert_chunks), and the
    # chunks repeated within the batch are extended after that, in their order.
    pending: list[ChunkRow] = []
    pending_vectors: list[Any] = []
    pending_at: dict[tuple[str, str], int] = {}
    extends: list[tuple[tuple[Any, ...], int | None, int]] = []
    heads: list[tuple[str, str, int]] = []  # (text, session, sequence) for SET_CONTEXT_AFTER
    offset = 0
    added = 0
    for i, event in enumerate(events):
        sid = event.session_id
        cur = cursors.get(sid)
        if cur is None:
            upsert_session(
                db, sid, now, agent_identity=agent_identity, user_id=user_id, channel=channel
            )
            row = db.query_one(SESSION_CURSOR, (sid,))
            last, newest = (None, None) if row is None else row
            cur = cursors[sid] = _SessionCursor(
                None if last is None else int(last), None if newest is None else int(newest)
            )
            if neighbor_context and cur.newest is not None:
                prev = db.scalar(PREVIOUS_CHUNK_TEXT, (sid, cur.newest))
                cur.previous_text = str(prev or "")[-CONTEXT_CHARS:]
        if cur.last is not None and event.sequence <= cur.last:
            raise ConflictError(
                f"sequence {event.sequence} is not above session {sid!r}'s "
                f"last sequence {cur.last}",
                session_id=sid,
                sequence=event.sequence,
                last_sequence=cur.last,
            )
        db.execute(INSERT_EVENT, (sid, event.sequence, event.payload_json, now, event.occurred_at))
        n = len(event.chunks)
        rows: list[Any] = [None] * n if vectors is None else list(vectors[offset : offset + n])
        offset += n
        if neighbor_context and event.chunks and cur.first and cur.newest is not None:
            heads.append((event.chunks[0].text[:CONTEXT_CHARS], sid, cur.newest))
        before = cur.previous_text if neighbor_context and cur.newest is not None else ""
        for chunk, vector in zip(event.chunks, rows, strict=True):
            key = (sid, chunk.content_hash)
            existing = known.get(key)
            if existing is not None or key in pending_at:
                extend = (event.sequence, event.importance, event.expires_at, event.occurred_at)
                extends.append((extend, existing, pending_at.get(key, -1)))
                continue
            new = ChunkRow(
                sid,
                chunk.text,
                chunk.content_hash,
                chunk.metadata_json,
                event.sequence,
                event.sequence,
                event.importance,
                event.expires_at,
                before,
                after[i],
                occurred_at=event.occurred_at,
                user_statement=chunk.user_statement,
            )
            pending_at[key] = len(pending)
            pending.append(new)
            pending_vectors.append(vector)
            added += 1
        cur.last = cur.newest = event.sequence
        cur.first = False
        cur.previous_text = event.chunks[-1].text[-CONTEXT_CHARS:] if event.chunks else ""
    if heads:  # before the extensions below move any chunk's sequence_end
        db.execute(SET_CONTEXT_AFTER, (json.dumps(heads, ensure_ascii=False),))
    rowids = insert_chunks(db, pending, pending_vectors, model_id, now) if pending else []
    for (sequence, importance, expires_at, occurred_at), existing, at in extends:
        rowid = existing if existing is not None else rowids[at]
        db.execute(EXTEND_CHUNK, (sequence, importance, expires_at, rowid, occurred_at))
    for sid, cur in cursors.items():
        db.execute(RAISE_HIGH_WATER, (sid, cur.last))
        db.execute(SET_LAST_SEQUENCE, (sid, cur.last, now))
    changes.prune_now_and_then(db)
    return added


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


def _existing_chunks(db: Database, events: Sequence[PreparedEvent]) -> dict[tuple[str, str], int]:
    """Chunks already stored with the batch's (session, content hash) pairs (dedup)."""
    wanted: dict[str, set[str]] = {}
    for event in events:
        wanted.setdefault(event.session_id, set()).update(c.content_hash for c in event.chunks)
    found: dict[tuple[str, str], int] = {}
    for sid, hashes in wanted.items():
        if not hashes:
            continue
        for content_hash, rowid in db.query(FIND_CHUNKS, (sid, json.dumps(sorted(hashes)))):
            found[(sid, str(content_hash))] = int(rowid)
    return found


def load_events(db: Database, session_id: str, limit: int | None) -> list[MemoryRecord]:
    """Events in sequence order; with ``limit``, the most recent ``limit`` of them."""
    if limit is None:
        rows = db.query(
            "SELECT sequence, payload_json, created_at, occurred_at FROM conversation_events "
            "WHERE session_id = ? ORDER BY sequence",
            (session_id,),
        )
    else:
        rows = db.query(
            "SELECT * FROM (SELECT sequence, payload_json, created_at, occurred_at "
            "FROM conversation_events WHERE session_id = ? ORDER BY sequence DESC LIMIT ?) "
            "ORDER BY sequence",
            (session_id, limit),
        )
    return [
        MemoryRecord(session_id, int(s), json.loads(p), str(c), str(o or c)) for s, p, c, o in rows
    ]


def list_sessions(
    db: Database, *, user_id: str | None = None, channel: str | None = None
) -> list[SessionInfo]:
    """Sessions (of ``user_id`` / ``channel`` when given), most recently updated first."""
    return [
        SessionInfo(str(sid), agent, str(created), str(updated), int(last), int(count), user, chan)
        for sid, agent, created, updated, last, count, user, chan in db.query(
            LIST_SESSIONS, (user_id, channel)
        )
    ]


def source_sessions(db: Database, *, files: bool) -> list[str]:
    """The sessions of synced folders (``files:...``), or all the others."""
    op = "LIKE" if files else "NOT LIKE"
    rows = db.query(f"SELECT session_id FROM sessions WHERE session_id {op} 'files:%'")
    return [str(r[0]) for r in rows]


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


def chunk_ends(db: Database, rowids: Sequence[int]) -> dict[int, int]:
    """``sequence_end`` by rowid (for breaking ties toward the most recent chunk)."""
    if not rowids:
        return {}
    rows = db.query(
        "SELECT id, sequence_end FROM chunks WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps([int(r) for r in rowids]),),
    )
    return {int(r): int(e) for r, e in rows}


def chunk_rows(db: Database, rowids: Sequence[int]) -> dict[int, tuple[Any, ...]]:
    """Chunk columns by rowid, for building search hits."""
    if not rowids:
        return {}
    rows = db.query(
        "SELECT id, chunk_id, session_id, chunk_text, sequence_start, sequence_end, "
        "metadata_json, coalesce(occurred_at, created_at) "
        "FROM chunks WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps([int(r) for r in rowids]),),
    )
    return {int(r[0]): r for r in rows}
