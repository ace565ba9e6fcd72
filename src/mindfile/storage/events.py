"""The event store: reads of the conversation log that feature code needs.

The log's write path (sessions, sequences, events and their chunks) stays in
:mod:`mindfile.storage.log`, the one writer the engine and the memory features share;
this store is the read side the features use, so they do not write SQL over
``conversation_events``. Every method runs inside the caller's transaction when one is
open.
"""

from __future__ import annotations

import json
from typing import Protocol

from mindfile.storage import log
from mindfile.storage.db import Database
from mindfile.types import MemoryRecord

__all__ = ["EventStore", "SqliteEventStore"]


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


EVENTS_AFTER = """
SELECT sequence, payload_json, created_at FROM conversation_events
WHERE session_id = ? AND sequence > ? ORDER BY sequence
"""

EVENT_EXISTS = "SELECT 1 FROM conversation_events WHERE session_id = ? AND sequence = ?"


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
