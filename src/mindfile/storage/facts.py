"""The fact store: the seam between :mod:`mindfile.memory.facts` and a backend's tables.

Facts are rows keyed by ``(scope, category, key)`` with an append-only history of
superseded values, plus chunks in the scope's ``facts:{scope}`` session (written by the
feature through the write path, removed here). The records are plain values; the
feature turns them into :class:`mindfile.memory.Fact` (storage does not import the
feature packages). Every method runs inside the caller's transaction when one is open.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from mindfile.storage.db import Database, Row

__all__ = ["FactRecord", "FactStore", "FactVersionRecord", "SqliteFactStore"]


@dataclass(frozen=True)
class FactRecord:
    """A current fact; ``id`` addresses it in :meth:`FactStore.update` and friends."""

    id: int
    scope: str
    category: str
    key: str
    value: str
    source: str
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class FactVersionRecord:
    """An earlier value of a fact; ``reason`` is ``"updated"`` or ``"deleted"``."""

    scope: str
    category: str
    key: str
    value: str
    source: str
    created_at: str
    updated_at: str
    superseded_at: str
    reason: str


class FactStore(Protocol):
    """What the facts feature needs from storage (backend-neutral)."""

    def get(self, scope: str, category: str, key: str) -> FactRecord | None:
        """The current fact, or None."""
        ...

    def list_facts(self, scope: str, category: str | None) -> list[FactRecord]:
        """The scope's facts (of one category when given), by category then key."""
        ...

    def insert(
        self, scope: str, category: str, key: str, value: str, source: str, now: str
    ) -> None:
        """A new fact created and updated at ``now``."""
        ...

    def update(self, fact_id: int, value: str, source: str, now: str) -> None:
        """Replace a fact's value and source (archive the old one first)."""
        ...

    def archive(self, fact_id: int, superseded_at: str, reason: str) -> None:
        """Copy the fact's current value into its history with ``reason``."""
        ...

    def delete(self, fact_id: int) -> None:
        """Delete the current fact (its history stays)."""
        ...

    def erase_history(self, scope: str, category: str, key: str) -> int:
        """Delete every earlier value of the key; returns how many."""
        ...

    def history(self, scope: str, category: str, key: str) -> list[FactVersionRecord]:
        """Earlier values, most recently superseded first."""
        ...

    def remove_chunks(self, session_id: str, category: str, key: str) -> None:
        """Delete the fact's chunks (with their vectors and FTS rows) from its session."""
        ...


_COLUMNS = "scope, category, key, value, source, created_at, updated_at"

SELECT_FACT = f"SELECT id, {_COLUMNS} FROM facts WHERE scope = ? AND category = ? AND key = ?"

LIST_FACTS = f"SELECT id, {_COLUMNS} FROM facts WHERE scope = ? ORDER BY category, key"

LIST_CATEGORY = f"SELECT id, {_COLUMNS} FROM facts WHERE scope = ? AND category = ? ORDER BY key"

INSERT_FACT = f"INSERT INTO facts ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"

UPDATE_FACT = "UPDATE facts SET value = ?, source = ?, updated_at = ? WHERE id = ?"

ARCHIVE_FACT = f"""
INSERT INTO fact_history ({_COLUMNS}, superseded_at, reason)
SELECT {_COLUMNS}, ?, ? FROM facts WHERE id = ?
"""

DELETE_FACT = "DELETE FROM facts WHERE id = ?"

DELETE_HISTORY = "DELETE FROM fact_history WHERE scope = ? AND category = ? AND key = ?"

DELETE_FACT_CHUNKS = """
DELETE FROM chunks
WHERE session_id = ? AND json_extract(metadata_json, '$.kind') = 'fact'
  AND json_extract(metadata_json, '$.category') = ? AND json_extract(metadata_json, '$.key') = ?
"""

SELECT_HISTORY = f"""
SELECT {_COLUMNS}, superseded_at, reason FROM fact_history
WHERE scope = ? AND category = ? AND key = ?
ORDER BY id DESC
"""


class SqliteFactStore:
    """:class:`FactStore` on the ``facts`` and ``fact_history`` tables of a SQLite store."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, scope: str, category: str, key: str) -> FactRecord | None:
        row = self.db.query_one(SELECT_FACT, (scope, category, key))
        return None if row is None else _record(row)

    def list_facts(self, scope: str, category: str | None) -> list[FactRecord]:
        if category is None:
            rows = self.db.query(LIST_FACTS, (scope,))
        else:
            rows = self.db.query(LIST_CATEGORY, (scope, category))
        return [_record(r) for r in rows]

    def insert(
        self, scope: str, category: str, key: str, value: str, source: str, now: str
    ) -> None:
        self.db.execute(INSERT_FACT, (scope, category, key, value, source, now, now))

    def update(self, fact_id: int, value: str, source: str, now: str) -> None:
        self.db.execute(UPDATE_FACT, (value, source, now, fact_id))

    def archive(self, fact_id: int, superseded_at: str, reason: str) -> None:
        self.db.execute(ARCHIVE_FACT, (superseded_at, reason, fact_id))

    def delete(self, fact_id: int) -> None:
        self.db.execute(DELETE_FACT, (fact_id,))

    def erase_history(self, scope: str, category: str, key: str) -> int:
        with self.db.lock:  # changes() must be this statement's
            self.db.execute(DELETE_HISTORY, (scope, category, key))
            return self.db.changes()

    def history(self, scope: str, category: str, key: str) -> list[FactVersionRecord]:
        rows = self.db.query(SELECT_HISTORY, (scope, category, key))
        return [FactVersionRecord(*(str(v) for v in r)) for r in rows]

    def remove_chunks(self, session_id: str, category: str, key: str) -> None:
        self.db.execute(DELETE_FACT_CHUNKS, (session_id, category, key))


def _record(row: Row) -> FactRecord:
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
