"""The mark store: importance, pins and use statistics on an event's chunks.

:mod:`mindfile.manage.marks` holds the rules (validation, the use boost, what a
replaced note keeps); this store applies them to the rows. An event's chunks are the
ones linked to it (``event_chunks`` in SQLite); a chunk shared by several events carries
one importance and one pin for all of them. Every method runs inside the caller's
transaction when one is open.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from mindfile.storage.db import Database

__all__ = ["EventState", "MarkStore", "SqliteMarkStore"]


@dataclass(frozen=True, slots=True)
class EventState:
    """What a replaced item (a note stored again) carries over to its new chunks."""

    importance: float
    pinned: bool
    expires_at: str | None
    access_count: int
    last_accessed_at: str | None


class MarkStore(Protocol):
    """Management marks on chunks (backend-neutral)."""

    def set_importance(self, session_id: str, sequence: int, importance: float) -> int:
        """Set the importance of the event's chunks; returns how many changed."""
        ...

    def set_pinned(self, session_id: str, sequence: int, pinned: bool) -> int:
        """Pin or unpin the event's chunks; returns how many changed."""
        ...

    def record_use(self, chunk_ids: Sequence[str], now: str, boost: float) -> int:
        """For each existing chunk id: ``importance += boost × (1 − importance)``, one
        more use, last used ``now``; returns how many exist."""
        ...

    def event_state(self, session_id: str, sequence: int) -> EventState | None:
        """The most protective state over the event's chunks, or None if it has none
        (expiry only when every chunk expires)."""
        ...

    def restore_state(self, session_id: str, sequence: int, state: EventState) -> None:
        """Give the event's chunks ``state``'s pin and use statistics (never fewer uses)."""
        ...


_EVENT_CHUNKS = "SELECT chunk_rowid FROM event_chunks WHERE session_id = ? AND sequence = ?"

SET_IMPORTANCE = f"UPDATE chunks SET importance = ? WHERE id IN ({_EVENT_CHUNKS})"

SET_PINNED = f"UPDATE chunks SET pinned = ? WHERE id IN ({_EVENT_CHUNKS})"

# An event's management state: the most protective value over its chunks.
EVENT_STATE = """
SELECT count(*), max(c.importance), max(c.pinned),
       CASE WHEN count(c.expires_at) = count(*) THEN max(c.expires_at) END,
       max(c.access_count), max(c.last_accessed_at)
FROM event_chunks AS l JOIN chunks AS c ON c.id = l.chunk_rowid
WHERE l.session_id = ? AND l.sequence = ?
"""

RESTORE_STATE = f"""
UPDATE chunks SET pinned = ?, access_count = max(access_count, ?),
    last_accessed_at = coalesce(?, last_accessed_at)
WHERE id IN ({_EVENT_CHUNKS})
"""

RECORD_USE = """
UPDATE chunks SET
    importance = importance + ?1 * (1.0 - importance),
    access_count = access_count + 1,
    last_accessed_at = ?2
WHERE chunk_id IN (SELECT value FROM json_each(?3))
"""


class SqliteMarkStore:
    """:class:`MarkStore` on ``chunks`` through ``event_chunks``."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def _changed(self, sql: str, params: Sequence[object]) -> int:
        with self.db.lock:  # changes() must be this statement's
            self.db.execute(sql, params)
            return self.db.changes()

    def set_importance(self, session_id: str, sequence: int, importance: float) -> int:
        return self._changed(SET_IMPORTANCE, (importance, session_id, sequence))

    def set_pinned(self, session_id: str, sequence: int, pinned: bool) -> int:
        return self._changed(SET_PINNED, (int(pinned), session_id, sequence))

    def record_use(self, chunk_ids: Sequence[str], now: str, boost: float) -> int:
        return self._changed(RECORD_USE, (boost, now, json.dumps(list(chunk_ids))))

    def event_state(self, session_id: str, sequence: int) -> EventState | None:
        row = self.db.query_one(EVENT_STATE, (session_id, sequence))
        if row is None or not row[0]:
            return None
        _, importance, pinned, expires, count, used = row
        return EventState(float(importance), bool(pinned), expires, int(count), used)

    def restore_state(self, session_id: str, sequence: int, state: EventState) -> None:
        self.db.execute(
            RESTORE_STATE,
            (int(state.pinned), state.access_count, state.last_accessed_at, session_id, sequence),
        )
