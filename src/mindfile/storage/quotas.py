"""The quota store: quotas per scope, a scope's usage, and eviction candidates.

:mod:`mindfile.manage.quota` holds the rules (scopes, limits, policies, how much to
evict); this store reads and writes the rows. A session's scope is
``agent:{agent_identity}``, else ``user:{u}`` for a notes namespace ``memory:{u}``, else
``session:{session_id}`` (:func:`scope_sql` is the SQL twin of
:func:`mindfile.manage.quota.scope_for`). Every method runs inside the caller's
transaction when one is open.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from mindfile.storage.db import Database, Row
from mindfile.storage.lifecycle import ids_json

__all__ = [
    "CandidateEvent",
    "QuotaRow",
    "QuotaStore",
    "ScopeUsage",
    "SqliteQuotaStore",
    "scope_sql",
]


@dataclass(frozen=True, slots=True)
class QuotaRow:
    """A scope's stored quota (:class:`mindfile.manage.types.Quota` has the same fields)."""

    scope: str
    max_items: int | None
    max_bytes: int | None
    policy: str
    evicted_items: int
    evicted_bytes: int
    created_at: str
    updated_at: str


@dataclass(frozen=True, slots=True)
class ScopeUsage:
    """A scope's managed items, how many of them are expired, and their bytes."""

    items: int
    expired_items: int
    bytes: int


@dataclass(frozen=True, slots=True)
class CandidateEvent:
    """An event linked to an eviction candidate: its payload bytes and chunk count."""

    chunk_rowid: int
    session_id: str
    sequence: int
    payload_bytes: int
    chunks: int


class QuotaStore(Protocol):
    """Quotas and what enforcing them reads (backend-neutral)."""

    def has_any(self) -> bool:
        """Whether any scope has a quota (the common case: none, and no cost)."""
        ...

    def get(self, scope: str) -> QuotaRow | None:
        """The scope's quota, or None."""
        ...

    def list_quotas(self) -> list[QuotaRow]:
        """Every quota, by scope."""
        ...

    def upsert(
        self, scope: str, max_items: int | None, max_bytes: int | None, policy: str, now: str
    ) -> None:
        """Create the scope's quota, or replace its limits (eviction counts are kept)."""
        ...

    def remove(self, scope: str) -> bool:
        """Remove the scope's quota; True if it had one."""
        ...

    def agent_of(self, session_id: str) -> str | None:
        """The agent identity of a stored session, or None."""
        ...

    def scope_sessions(self, scope: str) -> list[str]:
        """The sessions whose items count against ``scope``, sorted."""
        ...

    def usage(self, scope: str, now: str, *, count_bytes: bool) -> ScopeUsage:
        """The scope's managed items (fact sessions excluded) and, with ``count_bytes``,
        their text and payload bytes (else 0)."""
        ...

    def scopes_with_quotas(self, session_ids: Sequence[str]) -> list[str]:
        """The scopes of these sessions that have a quota."""
        ...

    def protected(self, written: Sequence[tuple[str, int]]) -> list[int]:
        """Rowids of the chunks of the events being written (never evicted by them)."""
        ...

    def candidates(
        self,
        scope: str,
        protected: Sequence[int],
        now: str,
        half_life: float | None,
        *,
        limit: int,
        offset: int,
    ) -> list[tuple[int, int]]:
        """A page of ``(rowid, text bytes)`` evictable chunks in eviction order: unpinned
        and not protected; expired first, then lowest (decayed, with ``half_life``)
        importance, then oldest."""
        ...

    def candidate_events(self, rowids: Sequence[int]) -> list[CandidateEvent]:
        """The events linked to these chunks."""
        ...

    def count_eviction(self, scope: str, items: int, freed_bytes: int) -> None:
        """Add an eviction to the scope's quota's counters."""
        ...


def scope_sql(alias: str = "sessions") -> str:
    """SQL twin of :func:`mindfile.manage.quota.scope_for` over the ``sessions`` row ``alias``."""
    a = alias
    return (
        f"CASE WHEN {a}.agent_identity IS NOT NULL THEN 'agent:' || {a}.agent_identity "
        f"WHEN substr({a}.session_id, 1, 7) = 'memory:' AND length({a}.session_id) > 7 "
        f"THEN 'user:' || substr({a}.session_id, 8) "
        f"ELSE 'session:' || {a}.session_id END"
    )


SCOPE_SESSIONS = f"SELECT session_id FROM sessions WHERE ({scope_sql()}) = ?1"

AGENT_OF = "SELECT agent_identity FROM sessions WHERE session_id = ?"

_QUOTA_COLUMNS = (
    "scope, max_items, max_bytes, policy, evicted_items, evicted_bytes, created_at, updated_at"
)

SELECT_QUOTA = f"SELECT {_QUOTA_COLUMNS} FROM quotas WHERE scope = ?"

LIST_QUOTAS = f"SELECT {_QUOTA_COLUMNS} FROM quotas ORDER BY scope"

ANY_QUOTA = "SELECT 1 FROM quotas LIMIT 1"

DELETE_QUOTA = "DELETE FROM quotas WHERE scope = ?"

UPSERT_QUOTA = """
INSERT INTO quotas (scope, max_items, max_bytes, policy, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?5)
ON CONFLICT (scope) DO UPDATE SET
    max_items = excluded.max_items, max_bytes = excluded.max_bytes,
    policy = excluded.policy, updated_at = excluded.updated_at
"""

# A scope's sessions whose chunks are managed: all but the facts API's derived
# `facts:{scope}` sessions, whose chunks mirror the facts table and have no events.
MANAGED_SESSIONS = f"{SCOPE_SESSIONS} AND substr(session_id, 1, 6) <> 'facts:'"

# Cheap (index only): the common item-count quota never reads chunk text.
COUNT_ITEMS = f"""
WITH s AS ({MANAGED_SESSIONS})
SELECT count(*),
       (SELECT count(*) FROM chunks WHERE session_id IN s AND expires_at <= ?2 AND pinned = 0)
FROM chunks WHERE session_id IN s
"""

# Reads the scope's text and payloads: only for quotas with max_bytes.
COUNT_BYTES = f"""
WITH s AS ({MANAGED_SESSIONS})
SELECT (SELECT coalesce(sum(octet_length(chunk_text)), 0) FROM chunks WHERE session_id IN s)
     + (SELECT coalesce(sum(octet_length(payload_json)), 0) FROM conversation_events
        WHERE session_id IN s)
"""

SCOPES_WITH_QUOTAS = f"""
SELECT DISTINCT q.scope FROM sessions AS s
JOIN quotas AS q ON q.scope = ({scope_sql("s")})
WHERE s.session_id IN (SELECT value FROM json_each(?))
"""

# Evictable chunks of a scope in eviction order: unpinned and not held by an event being
# written; expired first, then lowest effective importance, then oldest. {importance}
# is the stored importance, or (with a decay policy) the decay formula of
# mindfile.manage.importance in SQL: importance × 2^(−age / half_life). Paged.
CANDIDATES = f"""
WITH s AS ({MANAGED_SESSIONS})
SELECT c.id, octet_length(c.chunk_text)
FROM chunks AS c
WHERE c.session_id IN s AND c.pinned = 0
  AND c.id NOT IN (SELECT value FROM json_each(?2))
ORDER BY coalesce(c.expires_at <= ?3, 0) DESC, {{importance}}, c.created_at, c.id
LIMIT ?4 OFFSET ?5
"""

STORED_IMPORTANCE = "c.importance"

DECAYED_IMPORTANCE = (
    "c.importance * pow(2.0, -max(0.0, julianday(?3) - "
    "julianday(coalesce(c.last_accessed_at, c.created_at))) * 86400.0 / ?6)"
)

# Chunks held by the events being written (never evicted by their own write).
PROTECTED = """
WITH pairs (session_id, sequence) AS (
    SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?)
)
SELECT DISTINCT l.chunk_rowid FROM event_chunks AS l
JOIN pairs AS p ON p.session_id = l.session_id AND p.sequence = l.sequence
"""

# For each event linked to a candidate: its payload bytes and how many chunks it has.
CANDIDATE_EVENTS = """
SELECT l.chunk_rowid, l.session_id, l.sequence, octet_length(e.payload_json),
       (SELECT count(*) FROM event_chunks AS m
        WHERE m.session_id = l.session_id AND m.sequence = l.sequence)
FROM event_chunks AS l
JOIN conversation_events AS e ON e.session_id = l.session_id AND e.sequence = l.sequence
WHERE l.chunk_rowid IN (SELECT value FROM json_each(?))
"""

COUNT_EVICTION = """
UPDATE quotas SET evicted_items = evicted_items + ?, evicted_bytes = evicted_bytes + ?
WHERE scope = ?
"""


def _quota(row: Row) -> QuotaRow:
    scope, max_items, max_bytes, policy, ev_items, ev_bytes, created, updated = row
    return QuotaRow(
        scope=str(scope),
        max_items=None if max_items is None else int(max_items),
        max_bytes=None if max_bytes is None else int(max_bytes),
        policy=str(policy),
        evicted_items=int(ev_items),
        evicted_bytes=int(ev_bytes),
        created_at=str(created),
        updated_at=str(updated),
    )


class SqliteQuotaStore:
    """:class:`QuotaStore` on ``quotas``, ``sessions``, ``chunks`` and the log."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def has_any(self) -> bool:
        return self.db.query_one(ANY_QUOTA) is not None

    def get(self, scope: str) -> QuotaRow | None:
        row = self.db.query_one(SELECT_QUOTA, (scope,))
        return None if row is None else _quota(row)

    def list_quotas(self) -> list[QuotaRow]:
        return [_quota(r) for r in self.db.query(LIST_QUOTAS)]

    def upsert(
        self, scope: str, max_items: int | None, max_bytes: int | None, policy: str, now: str
    ) -> None:
        self.db.execute(UPSERT_QUOTA, (scope, max_items, max_bytes, policy, now))

    def remove(self, scope: str) -> bool:
        with self.db.lock:  # changes() must be this statement's
            self.db.execute(DELETE_QUOTA, (scope,))
            return self.db.changes() > 0

    def agent_of(self, session_id: str) -> str | None:
        agent = self.db.scalar(AGENT_OF, (session_id,))
        return None if agent is None else str(agent)

    def scope_sessions(self, scope: str) -> list[str]:
        return [str(r[0]) for r in self.db.query(SCOPE_SESSIONS + " ORDER BY session_id", (scope,))]

    def usage(self, scope: str, now: str, *, count_bytes: bool) -> ScopeUsage:
        row = self.db.query_one(COUNT_ITEMS, (scope, now))
        assert row is not None
        size = int(self.db.scalar(COUNT_BYTES, (scope,))) if count_bytes else 0
        return ScopeUsage(int(row[0]), int(row[1]), size)

    def scopes_with_quotas(self, session_ids: Sequence[str]) -> list[str]:
        rows = self.db.query(SCOPES_WITH_QUOTAS, (json.dumps(list(session_ids)),))
        return [str(r[0]) for r in rows]

    def protected(self, written: Sequence[tuple[str, int]]) -> list[int]:
        pairs = json.dumps([[s, q] for s, q in written])
        return [int(r[0]) for r in self.db.query(PROTECTED, (pairs,))]

    def candidates(
        self,
        scope: str,
        protected: Sequence[int],
        now: str,
        half_life: float | None,
        *,
        limit: int,
        offset: int,
    ) -> list[tuple[int, int]]:
        sql = CANDIDATES.format(
            importance=STORED_IMPORTANCE if half_life is None else DECAYED_IMPORTANCE
        )
        params: list[Any] = [scope, ids_json(protected), now, limit, offset]
        if half_life is not None:
            params.append(half_life)
        return [(int(r[0]), int(r[1])) for r in self.db.query(sql, params)]

    def candidate_events(self, rowids: Sequence[int]) -> list[CandidateEvent]:
        return [
            CandidateEvent(int(rowid), str(sid), int(seq), int(payload), int(links))
            for rowid, sid, seq, payload, links in self.db.query(
                CANDIDATE_EVENTS, (ids_json(rowids),)
            )
        ]

    def count_eviction(self, scope: str, items: int, freed_bytes: int) -> None:
        self.db.execute(COUNT_EVICTION, (items, freed_bytes, scope))
