"""Quotas per scope: max items and max bytes, enforced inside the write transaction.

**Scope of a session** (one per session): ``agent:{agent_identity}`` when the session
has an agent identity; else ``user:{u}`` for a notes namespace ``memory:{u}``; else
``session:{session_id}``.

**Items** are the chunks that belong to events (messages, notes, summaries): a short
message or note is one item, a long one several. Fact chunks are not counted.
**Bytes** are the UTF-8 bytes of those chunks' text plus the JSON payload bytes of the
scope's events. Expired-but-unswept items count until the sweep deletes them.

**On a write that ends over a limit**: policy ``fail`` raises
:class:`~mindfile.errors.LimitExceededError` and the transaction (the whole write) rolls
back; policy ``evict`` deletes items in this order until the scope fits — expired
first, then lowest effective (decayed) importance, then oldest (``created_at``, then
id) — never pinned items and never the items being written. An event whose last chunk
is evicted is deleted with it (its payload bytes are freed). If that cannot free
enough, the write fails as with ``fail``. Eviction happens in the same transaction as
the write.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, get_args

from mindfile.errors import InvalidInputError, LimitExceededError
from mindfile.index.pipeline import MAX_ID_CHARS, check_id
from mindfile.manage._delete import delete_chunks, ids_json
from mindfile.manage.expiry import get_decay_policy
from mindfile.manage.importance import iso, parse_time
from mindfile.manage.types import Quota, QuotaPolicy, QuotaUsage
from mindfile.storage.db import Database, Row, utcnow

__all__ = [
    "SCOPE_KINDS",
    "SCOPE_SESSIONS",
    "check_scope",
    "enforce_quotas",
    "get_quota",
    "list_quotas",
    "quota_usage",
    "remove_quota",
    "scope_for",
    "scope_sql",
    "session_scope",
    "set_quota",
]

SCOPE_KINDS = ("agent", "user", "session")
NOTES_PREFIX = "memory:"


def scope_sql(alias: str = "sessions") -> str:
    """SQL twin of :func:`scope_for` over the ``sessions`` row ``alias``."""
    a = alias
    return (
        f"CASE WHEN {a}.agent_identity IS NOT NULL THEN 'agent:' || {a}.agent_identity "
        f"WHEN substr({a}.session_id, 1, 7) = 'memory:' AND length({a}.session_id) > 7 "
        f"THEN 'user:' || substr({a}.session_id, 8) "
        f"ELSE 'session:' || {a}.session_id END"
    )


SCOPE_SESSIONS = f"SELECT session_id FROM sessions WHERE ({scope_sql()}) = ?1"

_QUOTA_COLUMNS = (
    "scope, max_items, max_bytes, policy, evicted_items, evicted_bytes, created_at, updated_at"
)

SELECT_QUOTA = f"SELECT {_QUOTA_COLUMNS} FROM quotas WHERE scope = ?"

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


def scope_for(session_id: str, agent_identity: str | None) -> str:
    """The quota scope of a session (see the module docstring)."""
    if agent_identity is not None:
        return f"agent:{agent_identity}"
    if session_id.startswith(NOTES_PREFIX) and len(session_id) > len(NOTES_PREFIX):
        return f"user:{session_id[len(NOTES_PREFIX) :]}"
    return f"session:{session_id}"


def session_scope(db: Database, session_id: str) -> str:
    """The scope a (possibly not yet stored) session's items count against."""
    check_id(session_id, "session_id")
    agent = db.scalar("SELECT agent_identity FROM sessions WHERE session_id = ?", (session_id,))
    return scope_for(session_id, agent)


def check_scope(scope: Any) -> str:
    """``scope`` if it is ``agent:{id}``, ``user:{id}`` or ``session:{id}``."""
    if not isinstance(scope, str):
        raise InvalidInputError("scope must be a string like 'agent:{id}' or 'user:{id}'")
    kind, sep, rest = scope.partition(":")
    if not sep or kind not in SCOPE_KINDS or not rest:
        raise InvalidInputError(
            f"scope must be 'agent:{{id}}', 'user:{{id}}' or 'session:{{id}}', not {scope!r}"
        )
    check_id(rest, "scope id")
    if len(scope) > MAX_ID_CHARS + len("session:"):
        raise InvalidInputError("scope is too long")
    return scope


def _limit(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(f"{what} must be a non-negative integer or None")
    if value >= 2**63:
        raise InvalidInputError(f"{what} is too large")
    return value


def set_quota(
    db: Database,
    scope: str,
    *,
    max_items: int | None = None,
    max_bytes: int | None = None,
    policy: QuotaPolicy = "evict",
) -> Quota:
    """Create or replace a scope's quota; enforced from the scope's next write on."""
    check_scope(scope)
    items, size = _limit(max_items, "max_items"), _limit(max_bytes, "max_bytes")
    if items is None and size is None:
        raise InvalidInputError("give max_items and/or max_bytes (remove_quota removes one)")
    if policy not in get_args(QuotaPolicy):
        raise InvalidInputError(f"policy must be 'evict' or 'fail', not {policy!r}")
    with db.atomic():
        db.execute(UPSERT_QUOTA, (scope, items, size, policy, utcnow()))
        quota = get_quota(db, scope)
    assert quota is not None
    return quota


def get_quota(db: Database, scope: str) -> Quota | None:
    """The scope's quota, or None."""
    row = db.query_one(SELECT_QUOTA, (check_scope(scope),))
    return None if row is None else _quota(row)


def list_quotas(db: Database) -> list[Quota]:
    """Every quota, by scope."""
    return [_quota(r) for r in db.query(f"SELECT {_QUOTA_COLUMNS} FROM quotas ORDER BY scope")]


def remove_quota(db: Database, scope: str) -> bool:
    """Remove a scope's quota; True if it had one."""
    check_scope(scope)
    with db.atomic():
        db.execute("DELETE FROM quotas WHERE scope = ?", (scope,))
        return db.changes() > 0


def quota_usage(
    db: Database, scope: str, now: str | None = None, *, count_bytes: bool = True
) -> QuotaUsage:
    """The scope's items and bytes as counted against its quota.

    ``count_bytes=False`` skips reading the scope's text (``bytes`` is then 0).
    """
    check_scope(scope)
    row = db.query_one(COUNT_ITEMS, (scope, now or utcnow()))
    assert row is not None
    size = int(db.scalar(COUNT_BYTES, (scope,))) if count_bytes else 0
    return QuotaUsage(scope, int(row[0]), size, int(row[1]), get_quota(db, scope))


def enforce_quotas(
    db: Database,
    session_ids: Sequence[str],
    written: Sequence[tuple[str, int]],
    now: datetime | str | None = None,
) -> None:
    """Bring every quota'd scope touched by a write back within its limits.

    Run inside the write's transaction, after the write: ``written`` are the events it
    stored (never evicted). Raises :class:`LimitExceededError` (rolling the write back)
    for policy ``fail``, or when eviction cannot free enough.
    """
    if db.query_one("SELECT 1 FROM quotas LIMIT 1") is None:
        return  # the common case: no quotas, no cost
    moment = parse_time(now)
    stamp = iso(moment)
    scopes = [str(r[0]) for r in db.query(SCOPES_WITH_QUOTAS, (json.dumps(list(session_ids)),))]
    for scope in scopes:
        quota = get_quota(db, scope)
        assert quota is not None
        usage = quota_usage(db, scope, stamp, count_bytes=quota.max_bytes is not None)
        if _fits(quota, usage.items, usage.bytes):
            continue
        if quota.policy == "fail":
            raise _over(quota, usage, "")
        plan = _plan_eviction(db, quota, usage, written, moment)
        if plan is None:
            raise _over(quota, usage, " and evicting every unpinned older item would not fit it")
        rowids, freed_bytes = plan
        delete_chunks(db, rowids)
        db.execute(COUNT_EVICTION, (len(rowids), freed_bytes, scope))


#: The first page of eviction candidates; each further page is twice as large.
FIRST_PAGE = 64


def _plan_eviction(
    db: Database,
    quota: Quota,
    usage: QuotaUsage,
    written: Sequence[tuple[str, int]],
    now: datetime,
) -> tuple[list[int], int] | None:
    """Rowids to evict (in order) and the bytes that frees, or None if it cannot fit.

    Candidates come from SQL in eviction order, a page at a time, so a write at
    capacity reads only the few rows it evicts (plus one sort of the scope in SQLite).
    """
    half_life = get_decay_policy(db).half_life_seconds
    sql = CANDIDATES.format(
        importance=STORED_IMPORTANCE if half_life is None else DECAYED_IMPORTANCE
    )
    pairs = json.dumps([[s, q] for s, q in written])
    protected = ids_json([int(r[0]) for r in db.query(PROTECTED, (pairs,))])
    items, size = usage.items, usage.bytes
    remaining: dict[tuple[str, int], int] = {}  # an event's chunks not yet chosen
    chosen: list[int] = []
    freed = 0
    offset = 0
    page = max(FIRST_PAGE, items - (quota.max_items if quota.max_items is not None else items))
    while not _fits(quota, items, size):
        params: list[Any] = [quota.scope, protected, iso(now), page, offset]
        rows = db.query(sql, params if half_life is None else [*params, half_life])
        if not rows:
            return None
        offset, page = offset + len(rows), page * 2
        events: dict[int, list[tuple[tuple[str, int], int]]] = {}
        for rowid, session_id, sequence, payload, links in db.query(
            CANDIDATE_EVENTS, (ids_json([int(r[0]) for r in rows]),)
        ):
            key = (str(session_id), int(sequence))
            remaining.setdefault(key, int(links))
            events.setdefault(int(rowid), []).append((key, int(payload)))
        for rowid, text_bytes in rows:
            if _fits(quota, items, size):
                break
            chosen.append(int(rowid))
            gained = int(text_bytes)
            for key, payload in events.get(int(rowid), []):
                remaining[key] -= 1
                if remaining[key] == 0:  # the event goes with its last chunk
                    gained += payload
            items, size, freed = items - 1, size - gained, freed + gained
    return chosen, freed


def _fits(quota: Quota, items: int, size: int) -> bool:
    return (quota.max_items is None or items <= quota.max_items) and (
        quota.max_bytes is None or size <= quota.max_bytes
    )


def _over(quota: Quota, usage: QuotaUsage, why: str) -> LimitExceededError:
    parts: list[str] = []
    details: dict[str, int] = {}
    if quota.max_items is not None:
        parts.append(f"{usage.items} items (max {quota.max_items})")
        details.update(items=usage.items, max_items=quota.max_items)
    if quota.max_bytes is not None:
        parts.append(f"{usage.bytes} bytes (max {quota.max_bytes})")
        details.update(bytes=usage.bytes, max_bytes=quota.max_bytes)
    hint = (
        f"; {usage.expired_items} of its items are expired (sweep_expired() frees them)"
        if usage.expired_items
        else ""
    )
    return LimitExceededError(
        f"quota for {quota.scope!r} exceeded (policy {quota.policy!r}): this write would "
        f"leave {' and '.join(parts)}{why}; nothing was written{hint}",
        scope=quota.scope,
        policy=quota.policy,
        **details,
    )


def _quota(row: Row) -> Quota:
    scope, max_items, max_bytes, policy, ev_items, ev_bytes, created, updated = row
    return Quota(
        scope=str(scope),
        max_items=None if max_items is None else int(max_items),
        max_bytes=None if max_bytes is None else int(max_bytes),
        policy=policy,
        evicted_items=int(ev_items),
        evicted_bytes=int(ev_bytes),
        created_at=str(created),
        updated_at=str(updated),
    )
