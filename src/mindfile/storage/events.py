"""The event store: reads of the conversation log that feature code needs.

The log's write path (sessions, sequences, events and their chunks) stays in
:mod:`mindfile.storage.log`, the one writer the engine and the memory features share;
this store is the read side the features use, so they do not write SQL over
``conversation_events``. Every method runs inside the caller's transaction when one is
open.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Protocol

from mindfile.storage import log
from mindfile.storage.db import Database
from mindfile.types import MemoryRecord

__all__ = ["EventSignature", "EventStore", "SqliteEventStore"]

#: A session's log in four numbers: event count, highest sequence, a checksum of the
#: sequences (their sum modulo a prime) and the newest event's ``created_at``. Appends,
#: deletes, and a deleted-then-rewritten last event all change it (mindfile.context.cache).
EventSignature = tuple[int, int | None, int, str | None]

#: The checksum's modulus (keeps SQLite's integer ``sum`` from overflowing).
CHECKSUM_PRIME = 1_000_000_007


class EventStore(Protocol):
    """Conversation events by session and sequence (backend-neutral)."""

    def recent(self, session_id: str, limit: int | None) -> list[MemoryRecord]:
        """Events in sequence order; with ``limit``, the most recent ``limit`` of them."""
        ...

    def after(self, session_id: str, sequence: int) -> list[MemoryRecord]:
        """The session's events above ``sequence``, in sequence order."""
        ...

    def exists(self, session_id: str, sequence: int) -> bool:
        """Whether the session holds an event at ``sequence``."""
        ...

    def change_stamp(self) -> tuple[int, int]:
        """A value that changes whenever anything was written, by this connection or
        another; equal stamps mean nothing changed anywhere in between."""
        ...

    def signature(self, session_id: str) -> EventSignature:
        """The session's :data:`EventSignature`."""
        ...

    def newest(
        self, session_id: str, after: int, limit: int
    ) -> tuple[EventSignature, list[MemoryRecord]]:
        """The signature and the newest ``limit`` events above ``after`` (in sequence
        order), read together from one snapshot."""
        ...

    def tail(self, session_id: str, limit: int) -> list[MemoryRecord]:
        """The last ``limit`` events in sequence order, as the working-memory cache
        keeps them (``created_at`` only)."""
        ...


EVENTS_AFTER = """
SELECT sequence, payload_json, created_at FROM conversation_events
WHERE session_id = ? AND sequence > ? ORDER BY sequence
"""

EVENT_EXISTS = "SELECT 1 FROM conversation_events WHERE session_id = ? AND sequence = ?"

STAMP = "SELECT total_changes(), data_version FROM pragma_data_version"

SIGNATURE = """
SELECT count(*), max(sequence), coalesce(sum(sequence % 1000000007), 0),
       (SELECT created_at FROM conversation_events
        WHERE session_id = ?1 ORDER BY sequence DESC LIMIT 1)
FROM conversation_events WHERE session_id = ?1
"""

# The signature and the newest ``?3`` events above sequence ``?2``, in one statement so
# both come from the same snapshot (another process may commit between two statements).
NEWEST = """
WITH sig AS (
    SELECT count(*) AS n, max(sequence) AS last,
           coalesce(sum(sequence % 1000000007), 0) AS checksum,
           (SELECT created_at FROM conversation_events
            WHERE session_id = ?1 ORDER BY sequence DESC LIMIT 1) AS newest
    FROM conversation_events WHERE session_id = ?1
),
newer AS (
    SELECT sequence, payload_json, created_at FROM conversation_events
    WHERE session_id = ?1 AND sequence > ?2 ORDER BY sequence DESC LIMIT ?3
)
SELECT sig.n, sig.last, sig.checksum, sig.newest, e.sequence, e.payload_json, e.created_at
FROM sig LEFT JOIN newer AS e ON 1
ORDER BY e.sequence
"""

TAIL = """
SELECT sequence, payload_json, created_at FROM (
    SELECT sequence, payload_json, created_at FROM conversation_events
    WHERE session_id = ? ORDER BY sequence DESC LIMIT ?
) ORDER BY sequence
"""


def _signature(row: tuple[Any, ...]) -> EventSignature:
    count, last, checksum, created = row[:4]
    return (
        int(count),
        None if last is None else int(last),
        int(checksum) % CHECKSUM_PRIME,
        None if created is None else str(created),
    )


def _records(session_id: str, rows: Iterable[tuple[Any, ...]]) -> list[MemoryRecord]:
    return [MemoryRecord(session_id, int(s), json.loads(p), str(c)) for s, p, c in rows]


class SqliteEventStore:
    """:class:`EventStore` on ``conversation_events``."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def recent(self, session_id: str, limit: int | None) -> list[MemoryRecord]:
        return log.load_events(self.db, session_id, limit)

    def after(self, session_id: str, sequence: int) -> list[MemoryRecord]:
        rows = self.db.query(EVENTS_AFTER, (session_id, sequence))
        return [MemoryRecord(session_id, int(s), json.loads(p), str(c)) for s, p, c in rows]

    def exists(self, session_id: str, sequence: int) -> bool:
        return self.db.query_one(EVENT_EXISTS, (session_id, sequence)) is not None

    def change_stamp(self) -> tuple[int, int]:
        row = self.db.query_one(STAMP)
        assert row is not None
        return int(row[0]), int(row[1])

    def signature(self, session_id: str) -> EventSignature:
        row = self.db.query_one(SIGNATURE, (session_id,))
        assert row is not None
        return _signature(row)

    def newest(
        self, session_id: str, after: int, limit: int
    ) -> tuple[EventSignature, list[MemoryRecord]]:
        rows = self.db.query(NEWEST, (session_id, after, limit))
        events = _records(session_id, (r[4:] for r in rows if r[4] is not None))
        return _signature(rows[0]), events

    def tail(self, session_id: str, limit: int) -> list[MemoryRecord]:
        return _records(session_id, self.db.query(TAIL, (session_id, limit)))
