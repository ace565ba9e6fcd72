"""Explicit importance: mark an event or note important, pin it, record that it was used.

The rules live here; the rows change through the mark store
(:mod:`mindfile.storage.marks`). An event's chunks are the ones linked to it; a chunk
shared by several events (the same text said twice) carries one importance and one pin
for all of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from mindfile.errors import InvalidInputError, NotFoundError
from mindfile.index.pipeline import check_id
from mindfile.manage.importance import USE_BOOST, check_importance
from mindfile.storage.marks import EventState

if TYPE_CHECKING:
    from mindfile._deps import StoreDeps

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


def event_exists(engine: StoreDeps, session_id: str, sequence: Any) -> int:
    """``sequence`` if the event exists, else :class:`NotFoundError`."""
    check_id(session_id, "session_id")
    if isinstance(sequence, bool) or not isinstance(sequence, int):
        raise InvalidInputError("sequence must be an integer")
    if not engine.stores.events.exists(session_id, sequence):
        raise NotFoundError(
            f"no event {sequence} in session {session_id!r}",
            session_id=session_id,
            sequence=sequence,
        )
    return sequence


def note_sequence(engine: StoreDeps, session_id: str, note_id: str) -> int:
    """The event sequence of a note, or :class:`NotFoundError`."""
    check_id(session_id, "session_id")
    check_id(note_id, "note_id")
    found = engine.stores.notes.sequence_of(session_id, note_id)
    if found is None:
        raise NotFoundError(f"no note {note_id!r} in {session_id!r}", note_id=note_id)
    return found


def set_event_chunks(
    engine: StoreDeps,
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
    marks = engine.stores.marks
    with engine.db.atomic():
        event_exists(engine, session_id, sequence)
        changed = 0
        if value is not None:
            changed = marks.set_importance(session_id, sequence, value)
        if pinned is not None:
            changed = max(changed, marks.set_pinned(session_id, sequence, pinned))
    return changed


def record_use(engine: StoreDeps, chunk_ids: Iterable[str], now: str) -> int:
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
    with engine.db.atomic():
        return engine.stores.marks.record_use(list(ids), now, USE_BOOST)


def event_state(engine: StoreDeps, session_id: str, sequence: int) -> EventState | None:
    """The management state of an event's chunks, or None if it has none."""
    return engine.stores.marks.event_state(session_id, sequence)


def restore_state(engine: StoreDeps, session_id: str, sequence: int, state: EventState) -> None:
    """Give an event's (new) chunks the pin and use statistics of ``state``."""
    engine.stores.marks.restore_state(session_id, sequence, state)
