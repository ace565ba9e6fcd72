"""The consolidation store: near-duplicate merges, span summaries and their records.

:mod:`mindfile.manage.consolidate` plans (which chunks are near-duplicates, which
spans are old enough, what the summary says) and this store reads what planning needs
and applies a plan's rows: the merged survivor, re-linked events, the summary chunks
linked to their span, the ``consolidations`` records. Every method runs inside the
caller's transaction (consolidation applies one session at a time in one); a method
that writes several rows opens its own, which nests as a savepoint.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from mindfile.storage.chunks import ChunkRow, chunk_id_for, find_chunk, insert_chunk
from mindfile.storage.db import Database
from mindfile.storage.lifecycle import alive_clause, ids_json
from mindfile.storage.quotas import SCOPE_SESSIONS

__all__ = [
    "ConsolidationRow",
    "ConsolidationStore",
    "GroupChunk",
    "MergeCandidate",
    "SpanChunk",
    "SpanEvent",
    "SqliteConsolidationStore",
    "SurvivorUpdate",
]


@dataclass(frozen=True, slots=True)
class MergeCandidate:
    """A conversation chunk that may be merged: its rowid, pin and vector (float32 bytes)."""

    rowid: int
    pinned: bool
    vector: bytes


@dataclass(frozen=True, slots=True)
class GroupChunk:
    """A chunk of a planned merge group, as it is now."""

    rowid: int
    chunk_id: str
    text: str
    sequence_start: int
    sequence_end: int
    importance: float
    pinned: bool
    expires_at: str | None
    access_count: int
    last_accessed_at: str | None
    metadata_json: str


@dataclass(frozen=True, slots=True)
class SurvivorUpdate:
    """What a merge group's survivor takes from the group."""

    rowid: int
    sequence_start: int
    sequence_end: int
    importance: float
    pinned: bool
    expires_at: str | None
    access_count: int
    last_accessed_at: str | None
    metadata_json: str
    #: Whether the survivor, with its new metadata, is a user-side statement about the
    #: user (``chunks.user_statement``): computed again rather than assumed, though a
    #: merge keeps the survivor's text and role.
    user_statement: bool


@dataclass(frozen=True, slots=True)
class SpanEvent:
    """An event of a session, and whether a span may include it."""

    sequence: int
    payload_json: str
    created_at: str
    blocked: bool  # pinned, or already linked to a summary
    is_note: bool


@dataclass(frozen=True, slots=True)
class SpanChunk:
    """One of a span's own chunks; ``own`` when it holds no text of events outside it."""

    rowid: int
    importance: float
    expires_at: str | None
    own: bool


@dataclass(frozen=True, slots=True)
class ConsolidationRow:
    """A ``consolidations`` record (:class:`mindfile.manage.types.ConsolidationRecord`)."""

    kind: str
    session_id: str
    chunk_id: str
    sequence_start: int
    sequence_end: int
    sources_json: str
    created_at: str


class ConsolidationStore(Protocol):
    """What consolidation reads and writes (backend-neutral)."""

    def sessions(self, session_id: str | None = None, scope: str | None = None) -> list[str]:
        """Stored sessions, sorted: the one named, a scope's, or all."""
        ...

    def merge_candidates(self, session_id: str, now: str) -> list[MergeCandidate]:
        """Unexpired conversation chunks (not notes, facts or summaries) with a vector
        and an event, pinned first, then by rowid."""
        ...

    def group_chunks(self, session_id: str, rowids: Sequence[int]) -> dict[int, GroupChunk]:
        """The session's chunks among ``rowids`` that still exist, by rowid."""
        ...

    def merge(
        self, survivor: SurvivorUpdate, absorbed: Sequence[int], record: ConsolidationRow
    ) -> None:
        """Update the survivor, re-link the absorbed chunks' events to it, record the
        merge and delete the absorbed chunks."""
        ...

    def span_events(
        self, session_id: str, first: int | None = None, last: int | None = None
    ) -> list[SpanEvent]:
        """The session's events (from ``first`` to ``last`` when given), by sequence."""
        ...

    def span_chunks(self, session_id: str, first: int, last: int) -> list[SpanChunk]:
        """The chunks of the span's events (summaries excluded), by rowid."""
        ...

    def has_chunk(self, session_id: str, content_hash: str) -> bool:
        """Whether the session holds a chunk with this content hash."""
        ...

    def add_summary_chunk(
        self,
        row: ChunkRow,
        vector: npt.NDArray[np.floating] | None,
        model_id: str,
        sequences: Sequence[int],
        record: ConsolidationRow,
    ) -> str:
        """Insert a summary chunk (``record.chunk_id`` is ignored: the new chunk's id is
        recorded and returned), link it to the span's events and record it."""
        ...

    def mark_consolidated(self, rowids: Sequence[int], now: str) -> None:
        """Set ``consolidated_at`` on these chunks."""
        ...

    def records(self, chunk_id: str) -> list[ConsolidationRow]:
        """The consolidation records of a chunk, oldest first."""
        ...


_PLAIN = "coalesce(json_extract(c.metadata_json, '$.kind'), '') NOT IN ('note', 'fact', 'summary')"
_LINKED = "EXISTS (SELECT 1 FROM event_chunks AS l WHERE l.chunk_rowid = c.id)"

ONE_SESSION = "SELECT session_id FROM sessions WHERE session_id = ?"

ALL_SESSIONS = "SELECT session_id FROM sessions ORDER BY session_id"

MERGE_CANDIDATES = f"""
SELECT c.id, c.pinned, v.embedding_blob
FROM chunks AS c JOIN chunks_vec AS v ON v.chunk_rowid = c.id
WHERE c.session_id = ? AND {_PLAIN} AND {_LINKED}{{alive}}
ORDER BY c.pinned DESC, c.id
"""

GROUP_ROWS = """
SELECT id, chunk_id, chunk_text, sequence_start, sequence_end, importance, pinned,
       expires_at, access_count, last_accessed_at, metadata_json
FROM chunks WHERE session_id = ? AND id IN (SELECT value FROM json_each(?))
"""

UPDATE_SURVIVOR = """
UPDATE chunks SET sequence_start = ?, sequence_end = ?, importance = ?, pinned = ?,
    expires_at = ?, access_count = ?, last_accessed_at = ?, metadata_json = ?,
    consolidated_at = ?, user_statement = ?
WHERE id = ?
"""

RELINK = """
INSERT OR IGNORE INTO event_chunks (session_id, sequence, chunk_rowid)
SELECT session_id, sequence, ? FROM event_chunks
WHERE chunk_rowid IN (SELECT value FROM json_each(?))
"""

DELETE_ABSORBED = "DELETE FROM chunks WHERE id IN (SELECT value FROM json_each(?))"

INSERT_RECORD = """
INSERT INTO consolidations (kind, session_id, chunk_id, sequence_start, sequence_end,
                            sources_json, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?)
"""

SPAN_EVENTS = """
SELECT e.sequence, e.payload_json, e.created_at,
       EXISTS (SELECT 1 FROM event_chunks AS l JOIN chunks AS c ON c.id = l.chunk_rowid
               WHERE l.session_id = e.session_id AND l.sequence = e.sequence
                 AND (c.pinned = 1 OR json_extract(c.metadata_json, '$.kind') = 'summary')),
       EXISTS (SELECT 1 FROM notes AS n
               WHERE n.session_id = e.session_id AND n.sequence = e.sequence)
FROM conversation_events AS e
WHERE e.session_id = ?{range}
ORDER BY e.sequence
"""

# The span's own chunks (not summaries), and whether each holds text of events outside it.
SPAN_CHUNKS = """
SELECT c.id, c.importance, c.expires_at,
       NOT EXISTS (SELECT 1 FROM event_chunks AS o
                   WHERE o.chunk_rowid = c.id
                     AND (o.session_id <> ?1 OR o.sequence < ?2 OR o.sequence > ?3))
FROM chunks AS c
WHERE c.id IN (SELECT chunk_rowid FROM event_chunks
               WHERE session_id = ?1 AND sequence BETWEEN ?2 AND ?3)
  AND coalesce(json_extract(c.metadata_json, '$.kind'), '') <> 'summary'
ORDER BY c.id
"""

LINK_SPAN = """
INSERT OR IGNORE INTO event_chunks (session_id, sequence, chunk_rowid)
SELECT session_id, sequence, ?3 FROM conversation_events
WHERE session_id = ?1 AND sequence IN (SELECT value FROM json_each(?2))
"""

SET_CONSOLIDATED = (
    "UPDATE chunks SET consolidated_at = ? WHERE id IN (SELECT value FROM json_each(?))"
)

PROVENANCE = """
SELECT kind, session_id, chunk_id, sequence_start, sequence_end, sources_json, created_at
FROM consolidations WHERE chunk_id = ? ORDER BY id
"""


def _record_params(record: ConsolidationRow, chunk_id: str) -> tuple[Any, ...]:
    r = record
    return (
        r.kind,
        r.session_id,
        chunk_id,
        r.sequence_start,
        r.sequence_end,
        r.sources_json,
        r.created_at,
    )


class SqliteConsolidationStore:
    """:class:`ConsolidationStore` on ``chunks``, ``event_chunks`` and ``consolidations``."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def sessions(self, session_id: str | None = None, scope: str | None = None) -> list[str]:
        if session_id is not None:
            rows = self.db.query(ONE_SESSION, (session_id,))
        elif scope is not None:
            rows = self.db.query(SCOPE_SESSIONS + " ORDER BY session_id", (scope,))
        else:
            rows = self.db.query(ALL_SESSIONS)
        return [str(r[0]) for r in rows]

    def merge_candidates(self, session_id: str, now: str) -> list[MergeCandidate]:
        alive, params = alive_clause(now)
        rows = self.db.query(MERGE_CANDIDATES.format(alive=alive), [session_id, *params])
        return [MergeCandidate(int(r[0]), bool(r[1]), bytes(r[2])) for r in rows]

    def group_chunks(self, session_id: str, rowids: Sequence[int]) -> dict[int, GroupChunk]:
        rows = self.db.query(GROUP_ROWS, (session_id, ids_json(rowids)))
        return {
            int(r[0]): GroupChunk(
                rowid=int(r[0]),
                chunk_id=str(r[1]),
                text=str(r[2]),
                sequence_start=int(r[3]),
                sequence_end=int(r[4]),
                importance=float(r[5]),
                pinned=bool(r[6]),
                expires_at=None if r[7] is None else str(r[7]),
                access_count=int(r[8]),
                last_accessed_at=None if r[9] is None else str(r[9]),
                metadata_json=str(r[10]),
            )
            for r in rows
        }

    def merge(
        self, survivor: SurvivorUpdate, absorbed: Sequence[int], record: ConsolidationRow
    ) -> None:
        s = survivor
        with self.db.atomic():
            self.db.execute(
                UPDATE_SURVIVOR,
                (
                    s.sequence_start,
                    s.sequence_end,
                    s.importance,
                    int(s.pinned),
                    s.expires_at,
                    s.access_count,
                    s.last_accessed_at,
                    s.metadata_json,
                    record.created_at,
                    int(s.user_statement),
                    s.rowid,
                ),
            )
            self.db.execute(RELINK, (s.rowid, ids_json(absorbed)))
            self.db.execute(INSERT_RECORD, _record_params(record, record.chunk_id))
            self.db.execute(DELETE_ABSORBED, (ids_json(absorbed),))

    def span_events(
        self, session_id: str, first: int | None = None, last: int | None = None
    ) -> list[SpanEvent]:
        if first is None or last is None:
            rows = self.db.query(SPAN_EVENTS.format(range=""), (session_id,))
        else:
            rows = self.db.query(
                SPAN_EVENTS.format(range=" AND e.sequence BETWEEN ? AND ?"),
                (session_id, first, last),
            )
        return [
            SpanEvent(int(seq), str(payload), str(created), bool(blocked), bool(is_note))
            for seq, payload, created, blocked, is_note in rows
        ]

    def span_chunks(self, session_id: str, first: int, last: int) -> list[SpanChunk]:
        return [
            SpanChunk(int(r[0]), float(r[1]), None if r[2] is None else str(r[2]), bool(r[3]))
            for r in self.db.query(SPAN_CHUNKS, (session_id, first, last))
        ]

    def has_chunk(self, session_id: str, content_hash: str) -> bool:
        return find_chunk(self.db, session_id, content_hash) is not None

    def add_summary_chunk(
        self,
        row: ChunkRow,
        vector: npt.NDArray[np.floating] | None,
        model_id: str,
        sequences: Sequence[int],
        record: ConsolidationRow,
    ) -> str:
        with self.db.atomic():
            rowid = insert_chunk(self.db, row, vector, model_id, record.created_at)
            self.db.execute(LINK_SPAN, (row.session_id, json.dumps(list(sequences)), rowid))
            chunk_id = chunk_id_for(row.session_id, row.content_hash)
            self.db.execute(INSERT_RECORD, _record_params(record, chunk_id))
        return chunk_id

    def mark_consolidated(self, rowids: Sequence[int], now: str) -> None:
        self.db.execute(SET_CONSOLIDATED, (now, ids_json(rowids)))

    def records(self, chunk_id: str) -> list[ConsolidationRow]:
        return [
            ConsolidationRow(
                str(kind), str(sid), str(cid), int(start), int(end), str(src), str(created)
            )
            for kind, sid, cid, start, end, src, created in self.db.query(PROVENANCE, (chunk_id,))
        ]
