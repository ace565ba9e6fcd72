"""The Postgres :class:`~mindfile.storage.consolidation.ConsolidationStore`.

The contract of :mod:`mindfile.storage.consolidation` (which plans stay in
:mod:`mindfile.manage.consolidate`), with arrays instead of ``json_each`` and ``jsonb``
casts instead of ``json_extract``. Merge candidates' vectors leave as little-endian
float32 bytes, as the protocol says.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from mindfile.storage.chunks import ChunkRow, chunk_id_for
from mindfile.storage.consolidation import (
    ConsolidationRow,
    GroupChunk,
    MergeCandidate,
    SpanChunk,
    SpanEvent,
    SurvivorUpdate,
)
from mindfile.storage.postgres.db import PgDatabase
from mindfile.storage.postgres.manage_stores import SCOPE_SESSIONS
from mindfile.storage.postgres.sessions import FIND_CHUNK, insert_chunks
from mindfile.storage.postgres.writer_lock import lock_chunk_writes

__all__ = ["PgConsolidationStore"]


def _blob(value: object) -> bytes:
    """A pgvector value (its ``Vector`` or an array) as little-endian float32 bytes."""
    to_numpy = getattr(value, "to_numpy", None)
    raw = to_numpy() if callable(to_numpy) else value
    return np.asarray(raw, dtype="<f4").tobytes()


_KIND = "coalesce(c.metadata_json::jsonb ->> 'kind', '')"
_PLAIN = f"{_KIND} NOT IN ('note', 'fact', 'summary')"
_LINKED = "EXISTS (SELECT 1 FROM event_chunks AS l WHERE l.chunk_rowid = c.id)"

ONE_SESSION = "SELECT session_id FROM sessions WHERE session_id = %s"
ALL_SESSIONS = "SELECT session_id FROM sessions ORDER BY session_id"

MERGE_CANDIDATES = f"""
SELECT c.id, c.pinned, v.embedding
FROM chunks AS c JOIN chunks_vec AS v ON v.chunk_rowid = c.id
WHERE c.session_id = %(sid)s AND {_PLAIN} AND {_LINKED}
  AND (c.expires_at IS NULL OR c.expires_at > %(now)s OR c.pinned = 1)
ORDER BY c.pinned DESC, c.id
"""

GROUP_ROWS = """
SELECT id, chunk_id, chunk_text, sequence_start, sequence_end, importance, pinned,
       expires_at, access_count, last_accessed_at, metadata_json
FROM chunks WHERE session_id = %s AND id = ANY(%s::bigint[])
"""

UPDATE_SURVIVOR = """
UPDATE chunks SET sequence_start = %s, sequence_end = %s, importance = %s, pinned = %s,
    expires_at = %s, access_count = %s, last_accessed_at = %s, metadata_json = %s,
    consolidated_at = %s, user_statement = %s
WHERE id = %s
"""

RELINK = """
INSERT INTO event_chunks (session_id, sequence, chunk_rowid)
SELECT session_id, sequence, %s FROM event_chunks WHERE chunk_rowid = ANY(%s::bigint[])
ON CONFLICT DO NOTHING
"""

DELETE_ABSORBED = "DELETE FROM chunks WHERE id = ANY(%s::bigint[])"

INSERT_RECORD = """
INSERT INTO consolidations (kind, session_id, chunk_id, sequence_start, sequence_end,
                            sources_json, created_at)
VALUES (%s, %s, %s, %s, %s, %s, %s)
"""

SPAN_EVENTS = """
SELECT e.sequence, e.payload_json, e.created_at,
       EXISTS (SELECT 1 FROM event_chunks AS l JOIN chunks AS c ON c.id = l.chunk_rowid
               WHERE l.session_id = e.session_id AND l.sequence = e.sequence
                 AND (c.pinned = 1 OR (c.metadata_json::jsonb ->> 'kind') = 'summary')),
       EXISTS (SELECT 1 FROM notes AS n
               WHERE n.session_id = e.session_id AND n.sequence = e.sequence)
FROM conversation_events AS e
WHERE e.session_id = %s{range}
ORDER BY e.sequence
"""

SPAN_CHUNKS = f"""
SELECT c.id, c.importance, c.expires_at,
       NOT EXISTS (SELECT 1 FROM event_chunks AS o
                   WHERE o.chunk_rowid = c.id
                     AND (o.session_id <> %(sid)s OR o.sequence < %(first)s
                          OR o.sequence > %(last)s))
FROM chunks AS c
WHERE c.id IN (SELECT chunk_rowid FROM event_chunks
               WHERE session_id = %(sid)s AND sequence BETWEEN %(first)s AND %(last)s)
  AND {_KIND} <> 'summary'
ORDER BY c.id
"""

LINK_SPAN = """
INSERT INTO event_chunks (session_id, sequence, chunk_rowid)
SELECT session_id, sequence, %s FROM conversation_events
WHERE session_id = %s AND sequence = ANY(%s::bigint[])
ON CONFLICT DO NOTHING
"""

SET_CONSOLIDATED = "UPDATE chunks SET consolidated_at = %s WHERE id = ANY(%s::bigint[])"

PROVENANCE = """
SELECT kind, session_id, chunk_id, sequence_start, sequence_end, sources_json, created_at
FROM consolidations WHERE chunk_id = %s ORDER BY id
"""


def _record_params(r: ConsolidationRow, chunk_id: str) -> tuple[Any, ...]:
    return (
        r.kind, r.session_id, chunk_id, r.sequence_start, r.sequence_end, r.sources_json,
        r.created_at,
    )  # fmt: skip


class PgConsolidationStore:
    """:class:`~mindfile.storage.consolidation.ConsolidationStore` on Postgres."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def sessions(self, session_id: str | None = None, scope: str | None = None) -> list[str]:
        if session_id is not None:
            rows = self.db.query(ONE_SESSION, (session_id,))
        elif scope is not None:
            rows = self.db.query(SCOPE_SESSIONS + " ORDER BY session_id", {"scope": scope})
        else:
            rows = self.db.query(ALL_SESSIONS)
        return [str(r[0]) for r in rows]

    def merge_candidates(self, session_id: str, now: str) -> list[MergeCandidate]:
        rows = self.db.query(MERGE_CANDIDATES, {"sid": session_id, "now": now})
        return [MergeCandidate(int(r[0]), bool(r[1]), _blob(r[2])) for r in rows]

    def group_chunks(self, session_id: str, rowids: Sequence[int]) -> dict[int, GroupChunk]:
        rows = self.db.query(GROUP_ROWS, (session_id, [int(r) for r in rowids]))
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
        s, gone = survivor, [int(r) for r in absorbed]
        with self.db.atomic():
            lock_chunk_writes(self.db)
            self.db.execute(
                UPDATE_SURVIVOR,
                (
                    s.sequence_start, s.sequence_end, s.importance, int(s.pinned),
                    s.expires_at, s.access_count, s.last_accessed_at, s.metadata_json,
                    record.created_at, int(s.user_statement), s.rowid,
                ),
            )  # fmt: skip
            self.db.execute(RELINK, (s.rowid, gone))
            self.db.execute(INSERT_RECORD, _record_params(record, record.chunk_id))
            self.db.execute(DELETE_ABSORBED, (gone,))

    def span_events(
        self, session_id: str, first: int | None = None, last: int | None = None
    ) -> list[SpanEvent]:
        if first is None or last is None:
            rows = self.db.query(SPAN_EVENTS.format(range=""), (session_id,))
        else:
            rows = self.db.query(
                SPAN_EVENTS.format(range=" AND e.sequence BETWEEN %s AND %s"),
                (session_id, first, last),
            )
        return [
            SpanEvent(int(seq), str(payload), str(created), bool(blocked), bool(is_note))
            for seq, payload, created, blocked, is_note in rows
        ]

    def span_chunks(self, session_id: str, first: int, last: int) -> list[SpanChunk]:
        rows = self.db.query(SPAN_CHUNKS, {"sid": session_id, "first": first, "last": last})
        return [
            SpanChunk(int(r[0]), float(r[1]), None if r[2] is None else str(r[2]), bool(r[3]))
            for r in rows
        ]

    def has_chunk(self, session_id: str, content_hash: str) -> bool:
        return self.db.scalar(FIND_CHUNK, (session_id, content_hash)) is not None

    def add_summary_chunk(
        self,
        row: ChunkRow,
        vector: npt.NDArray[np.floating] | None,
        model_id: str,
        sequences: Sequence[int],
        record: ConsolidationRow,
    ) -> str:
        with self.db.atomic():
            lock_chunk_writes(self.db)
            [rowid] = insert_chunks(self.db, [row], [vector], model_id, record.created_at)
            self.db.execute(LINK_SPAN, (rowid, row.session_id, [int(q) for q in sequences]))
            chunk_id = chunk_id_for(row.session_id, row.content_hash)
            self.db.execute(INSERT_RECORD, _record_params(record, chunk_id))
        return chunk_id

    def mark_consolidated(self, rowids: Sequence[int], now: str) -> None:
        self.db.execute(SET_CONSOLIDATED, (now, [int(r) for r in rowids]))

    def records(self, chunk_id: str) -> list[ConsolidationRow]:
        return [
            ConsolidationRow(
                str(kind), str(sid), str(cid), int(start), int(end), str(src), str(created)
            )
            for kind, sid, cid, start, end, src, created in self.db.query(PROVENANCE, (chunk_id,))
        ]
