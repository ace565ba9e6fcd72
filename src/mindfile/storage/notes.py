"""The note store: the seam between :mod:`mindfile.memory.notes` and a backend's tables.

A note is a conversation event (its payload holds the note) plus an index row mapping
``(session_id, note_id)`` to that event, plus the chunks indexed from it. The feature
module validates, embeds and writes the event through the write path; this store only
finds, lists, links and removes. Every method runs inside the caller's transaction when
one is open (``db.atomic()``), so a replace stays one atomic step.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from mindfile.storage.db import Database

__all__ = ["NoteStore", "SqliteNoteStore", "StoredNote"]


@dataclass(frozen=True)
class StoredNote:
    """A note as stored: the sequence of its event and the event's decoded payload."""

    sequence: int
    payload: dict[str, Any]


class NoteStore(Protocol):
    """What the notes feature needs from storage (backend-neutral)."""

    def find(self, session_id: str, note_id: str) -> StoredNote | None:
        """The note's event, or None."""
        ...

    def sequence_of(self, session_id: str, note_id: str) -> int | None:
        """The sequence of the note's event, or None (cheaper than :meth:`find`)."""
        ...

    def list_notes(
        self, session_id: str, tags: Sequence[str], limit: int, offset: int
    ) -> list[StoredNote]:
        """The session's notes having every tag in ``tags``, most recent event first."""
        ...

    def link(self, session_id: str, note_id: str, sequence: int) -> None:
        """Record that ``note_id`` is the event at ``sequence`` (the event exists)."""
        ...

    def remove(self, session_id: str, note_id: str, sequence: int | None) -> int:
        """Delete the note's chunks (with their vectors and FTS rows) and, given its
        ``sequence``, its event and index row; returns how many chunks went."""
        ...


FIND_NOTE = """
SELECT n.sequence, e.payload_json
FROM notes AS n
JOIN conversation_events AS e ON e.session_id = n.session_id AND e.sequence = n.sequence
WHERE n.session_id = ? AND n.note_id = ?
"""

NOTE_SEQUENCE = "SELECT sequence FROM notes WHERE session_id = ? AND note_id = ?"

LIST_NOTES = """
SELECT n.sequence, e.payload_json
FROM notes AS n
JOIN conversation_events AS e ON e.session_id = n.session_id AND e.sequence = n.sequence
WHERE n.session_id = ?{tags}
ORDER BY n.sequence DESC
LIMIT ? OFFSET ?
"""

_PAYLOAD_TAG = " AND EXISTS (SELECT 1 FROM json_each(e.payload_json, '$.tags') WHERE value = ?)"

INSERT_NOTE = "INSERT INTO notes (session_id, note_id, sequence) VALUES (?, ?, ?)"

DELETE_NOTE_CHUNKS = """
DELETE FROM chunks
WHERE session_id = ? AND json_extract(metadata_json, '$.note_id') = ?
  AND json_extract(metadata_json, '$.kind') = 'note'
"""

# Deleting the event removes the `notes` row by cascade.
DELETE_NOTE_EVENT = "DELETE FROM conversation_events WHERE session_id = ? AND sequence = ?"


class SqliteNoteStore:
    """:class:`NoteStore` on the ``notes`` table of a SQLite store."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def find(self, session_id: str, note_id: str) -> StoredNote | None:
        row = self.db.query_one(FIND_NOTE, (session_id, note_id))
        return None if row is None else StoredNote(int(row[0]), json.loads(row[1]))

    def sequence_of(self, session_id: str, note_id: str) -> int | None:
        found = self.db.scalar(NOTE_SEQUENCE, (session_id, note_id))
        return None if found is None else int(found)

    def list_notes(
        self, session_id: str, tags: Sequence[str], limit: int, offset: int
    ) -> list[StoredNote]:
        sql = LIST_NOTES.format(tags="".join(_PAYLOAD_TAG for _ in tags))
        rows = self.db.query(sql, [session_id, *tags, limit, offset])
        return [StoredNote(int(seq), json.loads(payload)) for seq, payload in rows]

    def link(self, session_id: str, note_id: str, sequence: int) -> None:
        self.db.execute(INSERT_NOTE, (session_id, note_id, sequence))

    def remove(self, session_id: str, note_id: str, sequence: int | None) -> int:
        with self.db.atomic():
            self.db.execute(DELETE_NOTE_CHUNKS, (session_id, note_id))
            removed = self.db.changes()
            if sequence is not None:
                self.db.execute(DELETE_NOTE_EVENT, (session_id, sequence))
        return removed
