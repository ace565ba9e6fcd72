"""The lifecycle store: what search hides, what the sweep may drop, and deleting chunks.

:mod:`mindfile.manage.expiry` and :mod:`mindfile.manage.quota` hold the rules (TTLs,
decay, eviction order); this store reads the rows they decide on and deletes what they
chose. Only chunks that belong to events are managed; fact chunks follow the facts API.

**Deleting chunks** (:meth:`LifecycleStore.delete_chunks`) leaves the log consistent:
a chunk's vector and FTS row go with it (cascade and trigger) and its ``event_chunks``
links; an event that thereby loses its *last* chunk goes too (a note with it: its
``notes`` row cascades, exactly as :func:`mindfile.memory.delete_note` does); events that
never had chunks (no indexable text) are left alone. Neighbouring chunks whose FTS
context columns quote a deleted chunk get that context cleared, so deleted text cannot
still be found through a neighbour.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from mindfile.storage.db import Database
from mindfile.storage.log import CONTEXT_CHARS

__all__ = [
    "Deleted",
    "LifecycleStore",
    "ManagedChunk",
    "SqliteLifecycleStore",
    "alive_clause",
    "ids_json",
]


@dataclass(frozen=True, slots=True)
class Deleted:
    """How many chunks, events and notes one deletion removed."""

    chunks: int
    events: int
    notes: int


@dataclass(frozen=True, slots=True)
class ManagedChunk:
    """A live, unpinned managed chunk and when it was last used (else created)."""

    rowid: int
    importance: float
    last_used: str


class LifecycleStore(Protocol):
    """Expiry and deletion of managed chunks (backend-neutral)."""

    def hidden(self, now: str) -> set[int]:
        """Rowids of chunks past their expiry at ``now`` and not pinned."""
        ...

    def managed_live(self, now: str) -> list[ManagedChunk]:
        """Unpinned chunks of events that are not expired at ``now``."""
        ...

    def delete_chunks(self, rowids: Sequence[int]) -> Deleted:
        """Delete chunks, then the events left without any (see the module docstring)."""
        ...


def ids_json(rowids: Sequence[int]) -> str:
    """Chunk rowids as a JSON array, for ``json_each`` parameters."""
    return json.dumps([int(r) for r in rowids])


def alive_clause(now: str, alias: str = "c") -> tuple[str, list[Any]]:
    """SQL keeping only chunks that are not expired at ``now`` (pinned ones always are)."""
    sql = f" AND ({alias}.expires_at IS NULL OR {alias}.expires_at > ? OR {alias}.pinned = 1)"
    return sql, [now]


#: Chunks search must not return: past their expiry and not pinned (partial index).
HIDDEN = "SELECT id FROM chunks WHERE expires_at <= ? AND pinned = 0"

LIVE_MANAGED = """
SELECT c.id, c.importance, coalesce(c.last_accessed_at, c.created_at)
FROM chunks AS c
WHERE c.pinned = 0 AND (c.expires_at IS NULL OR c.expires_at > ?)
  AND EXISTS (SELECT 1 FROM event_chunks AS l WHERE l.chunk_rowid = c.id)
"""

_IN_IDS = "(SELECT value FROM json_each(?))"

LINKED_EVENTS = f"""
SELECT DISTINCT session_id, sequence FROM event_chunks WHERE chunk_rowid IN {_IN_IDS}
"""

CHUNK_TEXTS = f"SELECT session_id, chunk_text FROM chunks WHERE id IN {_IN_IDS}"

DELETE_CHUNKS = f"DELETE FROM chunks WHERE id IN {_IN_IDS}"

# Of the given (session_id, sequence) pairs, the events left with no chunk.
_PAIRS = """
WITH pairs (session_id, sequence) AS (
    SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?)
)
"""

ORPHANS = (
    _PAIRS
    + """
SELECT p.session_id, p.sequence,
       EXISTS (SELECT 1 FROM notes AS n
               WHERE n.session_id = p.session_id AND n.sequence = p.sequence)
FROM pairs AS p
WHERE NOT EXISTS (SELECT 1 FROM event_chunks AS l
                  WHERE l.session_id = p.session_id AND l.sequence = p.sequence)
"""
)

DELETE_EVENTS = (
    _PAIRS
    + """
DELETE FROM conversation_events
WHERE (session_id, sequence) IN (SELECT session_id, sequence FROM pairs)
"""
)

CLEAR_CONTEXT = """
UPDATE chunks SET
    context_before = CASE WHEN context_before IN (SELECT value FROM json_each(?2))
                          THEN '' ELSE context_before END,
    context_after = CASE WHEN context_after IN (SELECT value FROM json_each(?3))
                         THEN '' ELSE context_after END
WHERE session_id = ?1
  AND (context_before IN (SELECT value FROM json_each(?2))
       OR context_after IN (SELECT value FROM json_each(?3)))
"""


class SqliteLifecycleStore:
    """:class:`LifecycleStore` on ``chunks``, ``event_chunks`` and ``conversation_events``."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def hidden(self, now: str) -> set[int]:
        return {int(r[0]) for r in self.db.query(HIDDEN, (now,))}

    def managed_live(self, now: str) -> list[ManagedChunk]:
        return [
            ManagedChunk(int(rowid), float(importance), str(used))
            for rowid, importance, used in self.db.query(LIVE_MANAGED, (now,))
        ]

    def delete_chunks(self, rowids: Sequence[int]) -> Deleted:
        if not rowids:
            return Deleted(0, 0, 0)
        db = self.db
        ids = ids_json(sorted(set(rowids)))
        with db.atomic():
            events = [[str(s), int(q)] for s, q in db.query(LINKED_EVENTS, (ids,))]
            texts: dict[str, list[str]] = {}
            for session_id, text in db.query(CHUNK_TEXTS, (ids,)):
                texts.setdefault(str(session_id), []).append(str(text))
            with db.lock:  # changes() must be this statement's
                db.execute(DELETE_CHUNKS, (ids,))
                removed = db.changes()
            orphans = db.query(ORPHANS, (json.dumps(events),)) if events else []
            if orphans:
                db.execute(DELETE_EVENTS, (json.dumps([[s, q] for s, q, _ in orphans]),))
            for session_id, gone in texts.items():
                # The write path quotes the head of an event's first chunk as the previous
                # event's context_after and the tail of its last chunk as the next
                # event's context_before (storage.log); any deleted chunk may have been
                # either.
                heads = json.dumps([t[:CONTEXT_CHARS] for t in gone])
                tails = json.dumps([t[-CONTEXT_CHARS:] for t in gone])
                db.execute(CLEAR_CONTEXT, (session_id, tails, heads))
        return Deleted(removed, len(orphans), sum(1 for *_, is_note in orphans if is_note))
