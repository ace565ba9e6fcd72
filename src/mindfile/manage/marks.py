"""Explicit importance: mark an event or note important, pin it, record that it was used.

An event's chunks are found through ``event_chunks``. A chunk shared by several events
(the same text said twice) carries one importance and one pin for all of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mindfile.errors import InvalidInputError, NotFoundError
from mindfile.index.pipeline import check_id
from mindfile.manage.importance import USE_BOOST, check_importance
from mindfile.storage.db import Database

__all__ = [
    "MAX_USE_IDS",
    "EventState",
    "event_exists",
    "event_state",
    "note_sequence",
    "record_use",
    "restore_state",
    "set_event_chunks",
]

MAX_USE_IDS = 10_000

EVENT_EXISTS = "SELECT 1 FROM conversation_events WHERE session_id = ? AND sequence = ?"

NOTE_SEQUENCE = "SELECT sequence FROM notes WHERE session_id = ? AND note_id = ?"

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

RECORD_USE = f"""
UPDATE chunks SET
    importance = importance + {USE_BOOST!r} * (1.0 - importance),
    access_count = access_count + 1,
    last_accessed_at = ?
WHERE chunk_id IN (SELECT value FROM json_each(?))
"""


def event_exists(db: Database, session_id: str, sequence: Any) -> int:
    """``sequence`` if the event exists, else :class:`NotFoundError`."""
    check_id(session_id, "session_id")
    if isinstance(sequence, bool) or not isinstance(sequence, int):
        raise InvalidInputError("sequence must be an integer")
    if db.query_one(EVENT_EXISTS, (session_id, sequence)) is None:
        raise NotFoundError(
            f"no event {sequence} in session {session_id!r}",
            session_id=session_id,
            sequence=sequence,
        )
    return sequence


def note_sequence(db: Database, session_id: str, note_id: str) -> int:
    """The event sequence of a note, or :class:`NotFoundError`."""
    check_id(session_id, "session_id")
    check_id(note_id, "note_id")
    found = db.scalar(NOTE_SEQUENCE, (session_id, note_id))
    if found is None:
        raise NotFoundError(f"no note {note_id!r} in {session_id!r}", note_id=note_id)
    return int(found)


def set_event_chunks(
    db: Database,
    session_id: str,
    sequence: int,
    *,
    importance: float | None = None,
    pinned: bool | None = None,
) -> int:
    """Set importance and/or the pin on an event's chunks; returns chunks changed.

    An event with no indexable text has no chunks: 0, and nothing to rank or keep.
    """
    value = None if importance is None else check_importance(importance)
    with db.atomic():
        event_exists(db, session_id, sequence)
        changed = 0
        if value is not None:
            db.execute(SET_IMPORTANCE, (value, session_id, sequence))
            changed = db.changes()
        if pinned is not None:
            db.execute(SET_PINNED, (int(pinned), session_id, sequence))
            changed = max(changed, db.changes())
    return changed


def record_use(db: Database, chunk_ids: Iterable[str], now: str) -> int:
    """Boost chunks a caller actually used; returns how many exist.

    Each id counts once per call: ``importance += USE_BOOST × (1 − importance)``,
    ``access_count += 1``, ``last_accessed_at = now``. Unknown ids are ignored (the chunk
    may have been swept since it was retrieved).
    """
    if isinstance(chunk_ids, str | bytes) or not isinstance(chunk_ids, Iterable):
        raise InvalidInputError("chunk_ids must be a list of chunk id strings")
    ids: dict[str, None] = {}
    for chunk_id in chunk_ids:
        ids.setdefault(check_id(chunk_id, "chunk_id"), None)
    if len(ids) > MAX_USE_IDS:
        raise InvalidInputError(f"at most {MAX_USE_IDS} chunk ids per call")
    if not ids:
        return 0
    with db.atomic():
        db.execute(RECORD_USE, (now, json.dumps(list(ids))))
        return db.changes()


@dataclass(frozen=True, slots=True)
class EventState:
    """What a replaced item (a note stored again) carries over to its new chunks."""

    importance: float
    pinned: bool
    expires_at: str | None
    access_count: int
    last_accessed_at: str | None


def event_state(db: Database, session_id: str, sequence: int) -> EventState | None:
    """The management state of an event's chunks, or None if it has none."""
    row = db.query_one(EVENT_STATE, (session_id, sequence))
    if row is None or not row[0]:
        return None
    _, importance, pinned, expires, count, used = row
    return EventState(float(importance), bool(pinned), expires, int(count), used)


def restore_state(db: Database, session_id: str, sequence: int, state: EventState) -> None:
    """Give an event's (new) chunks the pin and use statistics of ``state``."""
    db.execute(
        RESTORE_STATE,
        (int(state.pinned), state.access_count, state.last_accessed_at, session_id, sequence),
    )
