"""Postgres implementations of the agent-memory stores: events, notes, facts, session state.

Each class implements the protocol of the same aggregate in :mod:`mindfile.storage`
(:class:`~mindfile.storage.events.EventStore`, ...) with the same contract, and the
tests in tests/storage run both backends against it. JSON documents are text columns
(see 0001_core.sql); queries cast them to ``jsonb`` to look inside.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from mindfile.storage.events import CHECKSUM_PRIME, EventSignature
from mindfile.storage.facts import FactRecord, FactVersionRecord
from mindfile.storage.notes import StoredNote
from mindfile.storage.postgres.db import PgDatabase, Row
from mindfile.storage.postgres.writer_lock import lock_chunk_writes
from mindfile.types import MemoryRecord

__all__ = ["PgEventStore", "PgFactStore", "PgNoteStore", "PgSessionStateStore"]

# -- events ------------------------------------------------------------------------------

EVENTS_ALL = """
SELECT sequence, payload_json, created_at, occurred_at FROM conversation_events
WHERE session_id = %s ORDER BY sequence
"""

EVENTS_RECENT = """
SELECT * FROM (
    SELECT sequence, payload_json, created_at, occurred_at FROM conversation_events
    WHERE session_id = %s ORDER BY sequence DESC LIMIT %s
) AS recent ORDER BY sequence
"""

EVENTS_AFTER = """
SELECT sequence, payload_json, created_at FROM conversation_events
WHERE session_id = %s AND sequence > %s ORDER BY sequence
"""

EVENT_EXISTS = "SELECT 1 FROM conversation_events WHERE session_id = %s AND sequence = %s"

# Every commit writes a WAL record, so the WAL insert position moves whenever anything
# was written by anyone (and sometimes when nothing this store holds was: a harmless
# refresh). Postgres has no per-database data_version.
STAMP = "SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint"

_SIGNATURE = """
    SELECT count(*) AS n, max(sequence) AS last,
           coalesce(sum(mod(sequence, 1000000007)), 0) AS checksum,
           (SELECT created_at FROM conversation_events
            WHERE session_id = %(session)s ORDER BY sequence DESC LIMIT 1) AS newest
    FROM conversation_events WHERE session_id = %(session)s
"""

SIGNATURE = _SIGNATURE

# The signature and the newest events above a sequence in one statement: one snapshot.
NEWEST = f"""
WITH sig AS ({_SIGNATURE}),
newer AS (
    SELECT sequence, payload_json, created_at FROM conversation_events
    WHERE session_id = %(session)s AND sequence > %(after)s
    ORDER BY sequence DESC LIMIT %(limit)s
)
SELECT sig.n, sig.last, sig.checksum, sig.newest, e.sequence, e.payload_json, e.created_at
FROM sig LEFT JOIN newer AS e ON true
ORDER BY e.sequence
"""

TAIL = """
SELECT sequence, payload_json, created_at FROM (
    SELECT sequence, payload_json, created_at FROM conversation_events
    WHERE session_id = %s ORDER BY sequence DESC LIMIT %s
) AS tail ORDER BY sequence
"""


class PgEventStore:
    """:class:`~mindfile.storage.events.EventStore` on ``conversation_events``."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def recent(self, session_id: str, limit: int | None) -> list[MemoryRecord]:
        if limit is None:
            rows = self.db.query(EVENTS_ALL, (session_id,))
        else:
            rows = self.db.query(EVENTS_RECENT, (session_id, limit))
        return [
            MemoryRecord(session_id, int(s), json.loads(p), str(c), str(o or c))
            for s, p, c, o in rows
        ]

    def after(self, session_id: str, sequence: int) -> list[MemoryRecord]:
        rows = self.db.query(EVENTS_AFTER, (session_id, sequence))
        return [MemoryRecord(session_id, int(s), json.loads(p), str(c)) for s, p, c in rows]

    def exists(self, session_id: str, sequence: int) -> bool:
        return self.db.query_one(EVENT_EXISTS, (session_id, sequence)) is not None

    def change_stamp(self) -> tuple[int, int]:
        return int(self.db.scalar(STAMP)), 0

    def signature(self, session_id: str) -> EventSignature:
        row = self.db.query_one(SIGNATURE, {"session": session_id})
        assert row is not None
        return _signature(row)

    def newest(
        self, session_id: str, after: int, limit: int
    ) -> tuple[EventSignature, list[MemoryRecord]]:
        rows = self.db.query(NEWEST, {"session": session_id, "after": after, "limit": limit})
        events = _records(session_id, (r[4:] for r in rows if r[4] is not None))
        return _signature(rows[0]), events

    def tail(self, session_id: str, limit: int) -> list[MemoryRecord]:
        return _records(session_id, self.db.query(TAIL, (session_id, limit)))


def _signature(row: Row) -> EventSignature:
    count, last, checksum, created = row[:4]
    return (
        int(count),
        None if last is None else int(last),
        int(checksum) % CHECKSUM_PRIME,
        None if created is None else str(created),
    )


def _records(session_id: str, rows: Iterable[Row]) -> list[MemoryRecord]:
    return [MemoryRecord(session_id, int(s), json.loads(p), str(c)) for s, p, c in rows]


# -- notes -------------------------------------------------------------------------------

FIND_NOTE = """
SELECT n.sequence, e.payload_json
FROM notes AS n
JOIN conversation_events AS e ON e.session_id = n.session_id AND e.sequence = n.sequence
WHERE n.session_id = %s AND n.note_id = %s
"""

NOTE_SEQUENCE = "SELECT sequence FROM notes WHERE session_id = %s AND note_id = %s"

LIST_NOTES = """
SELECT n.sequence, e.payload_json
FROM notes AS n
JOIN conversation_events AS e ON e.session_id = n.session_id AND e.sequence = n.sequence
WHERE n.session_id = %s{tags}
ORDER BY n.sequence DESC
LIMIT %s OFFSET %s
"""

_PAYLOAD_TAG = " AND (e.payload_json::jsonb -> 'tags') @> jsonb_build_array(%s::text)"

INSERT_NOTE = "INSERT INTO notes (session_id, note_id, sequence) VALUES (%s, %s, %s)"

DELETE_NOTE_CHUNKS = """
DELETE FROM chunks
WHERE session_id = %s AND (metadata_json::jsonb ->> 'note_id') = %s
  AND (metadata_json::jsonb ->> 'kind') = 'note'
"""

# Deleting the event removes the `notes` row by cascade.
DELETE_NOTE_EVENT = "DELETE FROM conversation_events WHERE session_id = %s AND sequence = %s"


class PgNoteStore:
    """:class:`~mindfile.storage.notes.NoteStore` on the ``notes`` table."""

    def __init__(self, db: PgDatabase) -> None:
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
            lock_chunk_writes(self.db)
            self.db.execute(DELETE_NOTE_CHUNKS, (session_id, note_id))
            removed = self.db.changes()
            if sequence is not None:
                self.db.execute(DELETE_NOTE_EVENT, (session_id, sequence))
        return removed


# -- facts -------------------------------------------------------------------------------

_COLUMNS = "scope, category, key, value, source, created_at, updated_at"

SELECT_FACT = f"SELECT id, {_COLUMNS} FROM facts WHERE scope = %s AND category = %s AND key = %s"

LIST_FACTS = f"SELECT id, {_COLUMNS} FROM facts WHERE scope = %s ORDER BY category, key"

LIST_CATEGORY = f"SELECT id, {_COLUMNS} FROM facts WHERE scope = %s AND category = %s ORDER BY key"

INSERT_FACT = f"INSERT INTO facts ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)"

UPDATE_FACT = "UPDATE facts SET value = %s, source = %s, updated_at = %s WHERE id = %s"

ARCHIVE_FACT = f"""
INSERT INTO fact_history ({_COLUMNS}, superseded_at, reason)
SELECT {_COLUMNS}, %s, %s FROM facts WHERE id = %s
"""

DELETE_FACT = "DELETE FROM facts WHERE id = %s"

DELETE_HISTORY = "DELETE FROM fact_history WHERE scope = %s AND category = %s AND key = %s"

DELETE_FACT_CHUNKS = """
DELETE FROM chunks
WHERE session_id = %s AND (metadata_json::jsonb ->> 'kind') = 'fact'
  AND (metadata_json::jsonb ->> 'category') = %s AND (metadata_json::jsonb ->> 'key') = %s
"""

SELECT_HISTORY = f"""
SELECT {_COLUMNS}, superseded_at, reason FROM fact_history
WHERE scope = %s AND category = %s AND key = %s
ORDER BY id DESC
"""


class PgFactStore:
    """:class:`~mindfile.storage.facts.FactStore` on ``facts`` and ``fact_history``."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def get(self, scope: str, category: str, key: str) -> FactRecord | None:
        row = self.db.query_one(SELECT_FACT, (scope, category, key))
        return None if row is None else _fact(row)

    def list_facts(self, scope: str, category: str | None) -> list[FactRecord]:
        if category is None:
            rows = self.db.query(LIST_FACTS, (scope,))
        else:
            rows = self.db.query(LIST_CATEGORY, (scope, category))
        return [_fact(r) for r in rows]

    def insert(
        self, scope: str, category: str, key: str, value: str, source: str, now: str
    ) -> None:
        lock_chunk_writes(self.db)  # a fact's row, then its chunks: lock first
        self.db.execute(INSERT_FACT, (scope, category, key, value, source, now, now))

    def update(self, fact_id: int, value: str, source: str, now: str) -> None:
        lock_chunk_writes(self.db)  # a fact's row, then its chunks: lock first
        self.db.execute(UPDATE_FACT, (value, source, now, fact_id))

    def archive(self, fact_id: int, superseded_at: str, reason: str) -> None:
        lock_chunk_writes(self.db)  # a fact's row, then its chunks: lock first
        self.db.execute(ARCHIVE_FACT, (superseded_at, reason, fact_id))

    def delete(self, fact_id: int) -> None:
        lock_chunk_writes(self.db)  # a fact's row, then its chunks: lock first
        self.db.execute(DELETE_FACT, (fact_id,))

    def erase_history(self, scope: str, category: str, key: str) -> int:
        self.db.execute(DELETE_HISTORY, (scope, category, key))
        return self.db.changes()

    def history(self, scope: str, category: str, key: str) -> list[FactVersionRecord]:
        rows = self.db.query(SELECT_HISTORY, (scope, category, key))
        return [FactVersionRecord(*(str(v) for v in r)) for r in rows]

    def remove_chunks(self, session_id: str, category: str, key: str) -> None:
        lock_chunk_writes(self.db)  # a fact's row, then its chunks: lock first
        self.db.execute(DELETE_FACT_CHUNKS, (session_id, category, key))


def _fact(row: Row) -> FactRecord:
    fact_id, scope, category, key, value, source, created_at, updated_at = row
    return FactRecord(
        int(fact_id),
        str(scope),
        str(category),
        str(key),
        str(value),
        str(source),
        str(created_at),
        str(updated_at),
    )


# -- session state -----------------------------------------------------------------------

READ_SUMMARY = """
SELECT (state_json::jsonb -> 'summary_state')::text FROM session_state WHERE session_id = %s
"""

ENSURE_STATE = """
INSERT INTO session_state (session_id, state_json, updated_at) VALUES (%s, '{}', %s)
ON CONFLICT (session_id) DO NOTHING
"""

# Under READ COMMITTED a concurrent writer of the same row waits for this one's commit,
# then re-checks the epoch on the new row version: of writers holding one epoch,
# exactly one updates a row.
COMPARE_AND_SWAP = """
UPDATE session_state
SET state_json = jsonb_set(state_json::jsonb, '{summary_state}', %(state)s::jsonb)::text,
    updated_at = %(now)s
WHERE session_id = %(session)s
  AND coalesce((state_json::jsonb #>> '{summary_state,epoch}')::bigint, 0) = %(epoch)s
"""

CURRENT_EPOCH = """
SELECT coalesce((state_json::jsonb #>> '{summary_state,epoch}')::bigint, 0)
FROM session_state WHERE session_id = %s
"""

READ_SCRATCHPAD = """
SELECT (state_json::jsonb -> 'scratchpad')::text FROM session_state WHERE session_id = %s
"""

WRITE_SCRATCHPAD = """
INSERT INTO session_state (session_id, state_json, updated_at)
VALUES (%(session)s, jsonb_build_object('scratchpad', %(pad)s::jsonb)::text, %(now)s)
ON CONFLICT (session_id) DO UPDATE SET
    state_json = jsonb_set(session_state.state_json::jsonb, '{scratchpad}', %(pad)s::jsonb)::text,
    updated_at = %(now)s
"""

CLEAR_SCRATCHPAD = """
UPDATE session_state
SET state_json = (state_json::jsonb - 'scratchpad')::text, updated_at = %(now)s
WHERE session_id = %(session)s AND jsonb_exists(state_json::jsonb, 'scratchpad')
"""


class PgSessionStateStore:
    """:class:`~mindfile.storage.session_state.SessionStateStore` on ``session_state``."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def read_summary(self, session_id: str) -> dict[str, Any] | None:
        return _decoded(self.db.scalar(READ_SUMMARY, (session_id,)))

    def swap_summary(self, session_id: str, expected_epoch: int, state_json: str, now: str) -> bool:
        with self.db.atomic():
            if expected_epoch == 0:
                self.db.execute(ENSURE_STATE, (session_id, now))
            self.db.execute(
                COMPARE_AND_SWAP,
                {"state": state_json, "now": now, "session": session_id, "epoch": expected_epoch},
            )
            return self.db.changes() > 0

    def summary_epoch(self, session_id: str) -> int:
        return int(self.db.scalar(CURRENT_EPOCH, (session_id,)) or 0)

    def read_scratchpad(self, session_id: str) -> dict[str, Any] | None:
        return _decoded(self.db.scalar(READ_SCRATCHPAD, (session_id,)))

    def write_scratchpad(self, session_id: str, pad_json: str, now: str) -> None:
        self.db.execute(WRITE_SCRATCHPAD, {"session": session_id, "pad": pad_json, "now": now})

    def clear_scratchpad(self, session_id: str, now: str) -> bool:
        self.db.execute(CLEAR_SCRATCHPAD, {"session": session_id, "now": now})
        return self.db.changes() > 0


def _decoded(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    data: dict[str, Any] = json.loads(raw)
    return data
