"""Deleting chunks without leaving the log inconsistent (sweep, eviction, consolidation).

Deleting a chunk removes its vector and FTS row (cascade and trigger) and its
``event_chunks`` links. An event that thereby loses its *last* chunk goes too (a note
with it: its ``notes`` row cascades, exactly as :func:`mindfile.memory.delete_note` does);
events that never had chunks (no indexable text) are left alone. Neighbouring chunks
whose FTS context columns quote a deleted chunk get that context cleared, so deleted
text cannot still be found through a neighbour.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from mindfile.storage.db import Database
from mindfile.storage.log import CONTEXT_CHARS

__all__ = ["Deleted", "delete_chunks", "ids_json"]

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


@dataclass(frozen=True, slots=True)
class Deleted:
    """How many chunks, events and notes one deletion removed."""

    chunks: int
    events: int
    notes: int


def ids_json(rowids: Sequence[int]) -> str:
    """Chunk rowids as a JSON array, for ``json_each`` parameters."""
    return json.dumps([int(r) for r in rowids])


def delete_chunks(db: Database, rowids: Sequence[int]) -> Deleted:
    """Delete chunks, then the events left without any; run inside ``db.atomic()``."""
    if not rowids:
        return Deleted(0, 0, 0)
    ids = ids_json(sorted(set(rowids)))
    events = [[str(s), int(q)] for s, q in db.query(LINKED_EVENTS, (ids,))]
    texts: dict[str, list[str]] = {}
    for session_id, text in db.query(CHUNK_TEXTS, (ids,)):
        texts.setdefault(str(session_id), []).append(str(text))
    db.execute(DELETE_CHUNKS, (ids,))
    removed = db.changes()
    orphans = db.query(ORPHANS, (json.dumps(events),)) if events else []
    if orphans:
        db.execute(DELETE_EVENTS, (json.dumps([[s, q] for s, q, _ in orphans]),))
    for session_id, gone in texts.items():
        # The write path quotes the head of an event's first chunk as the previous
        # event's context_after and the tail of its last chunk as the next event's
        # context_before (storage.log); any deleted chunk may have been either.
        heads = json.dumps([t[:CONTEXT_CHARS] for t in gone])
        tails = json.dumps([t[-CONTEXT_CHARS:] for t in gone])
        db.execute(CLEAR_CONTEXT, (session_id, tails, heads))
    return Deleted(removed, len(orphans), sum(1 for *_, is_note in orphans if is_note))
