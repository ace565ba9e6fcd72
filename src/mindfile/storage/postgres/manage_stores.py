"""Postgres implementations of the lifecycle, quota and model stores.

Same contracts as :mod:`mindfile.storage.lifecycle`, :mod:`mindfile.storage.quotas` and
:mod:`mindfile.storage.models`: the statements
in Postgres terms (arrays instead of ``json_each``, ``jsonb`` casts instead of
``json_extract``, timestamps compared as ``timestamptz`` where SQLite used
``julianday``). Vectors leave as little-endian float32 bytes, as the protocols say.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mindfile.storage.lifecycle import Deleted, ManagedChunk
from mindfile.storage.log import CONTEXT_CHARS
from mindfile.storage.postgres.db import PgDatabase, Row
from mindfile.storage.postgres.writer_lock import lock_chunk_writes
from mindfile.storage.quotas import CandidateEvent, QuotaRow, ScopeUsage

__all__ = ["SCOPE_SESSIONS", "PgLifecycleStore", "PgModelStore", "PgQuotaStore"]

_PAIRS = """
WITH pairs AS (
    SELECT * FROM unnest(%(sids)s::text[], %(seqs)s::bigint[]) AS p(session_id, sequence)
)"""


def _pairs(pairs: Sequence[tuple[str, int]]) -> dict[str, list[Any]]:
    return {"sids": [str(s) for s, _ in pairs], "seqs": [int(q) for _, q in pairs]}


# -- lifecycle ---------------------------------------------------------------------------

HIDDEN = "SELECT id FROM chunks WHERE expires_at <= %s AND pinned = 0"

LIVE_MANAGED = """
SELECT c.id, c.importance, coalesce(c.last_accessed_at, c.created_at)
FROM chunks AS c
WHERE c.pinned = 0 AND (c.expires_at IS NULL OR c.expires_at > %s)
  AND EXISTS (SELECT 1 FROM event_chunks AS l WHERE l.chunk_rowid = c.id)
"""

LINKED_EVENTS = (
    "SELECT DISTINCT session_id, sequence FROM event_chunks WHERE chunk_rowid = ANY(%s::bigint[])"
)
CHUNK_TEXTS = "SELECT session_id, chunk_text FROM chunks WHERE id = ANY(%s::bigint[])"
DELETE_CHUNKS = "DELETE FROM chunks WHERE id = ANY(%s::bigint[])"

ORPHANS = f"""
{_PAIRS}
SELECT p.session_id, p.sequence,
       EXISTS (SELECT 1 FROM notes AS n
               WHERE n.session_id = p.session_id AND n.sequence = p.sequence)
FROM pairs AS p
WHERE NOT EXISTS (SELECT 1 FROM event_chunks AS l
                  WHERE l.session_id = p.session_id AND l.sequence = p.sequence)
"""

DELETE_EVENTS = f"""
{_PAIRS}
DELETE FROM conversation_events
WHERE (session_id, sequence) IN (SELECT session_id, sequence FROM pairs)
"""

CLEAR_CONTEXT = """
UPDATE chunks SET
    context_before = CASE WHEN context_before = ANY(%(tails)s::text[])
                          THEN '' ELSE context_before END,
    context_after = CASE WHEN context_after = ANY(%(heads)s::text[])
                         THEN '' ELSE context_after END
WHERE session_id = %(sid)s
  AND (context_before = ANY(%(tails)s::text[]) OR context_after = ANY(%(heads)s::text[]))
"""


class PgLifecycleStore:
    """:class:`~mindfile.storage.lifecycle.LifecycleStore` on Postgres."""

    def __init__(self, db: PgDatabase) -> None:
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
        ids = sorted({int(r) for r in rowids})
        with db.atomic():
            lock_chunk_writes(db)
            events = [(str(s), int(q)) for s, q in db.query(LINKED_EVENTS, (ids,))]
            texts: dict[str, list[str]] = {}
            for session_id, text in db.query(CHUNK_TEXTS, (ids,)):
                texts.setdefault(str(session_id), []).append(str(text))
            db.execute(DELETE_CHUNKS, (ids,))
            removed = db.changes()
            orphans = db.query(ORPHANS, _pairs(events)) if events else []
            if orphans:
                db.execute(DELETE_EVENTS, _pairs([(s, q) for s, q, _ in orphans]))
            for session_id, gone in texts.items():
                heads = [t[:CONTEXT_CHARS] for t in gone]
                tails = [t[-CONTEXT_CHARS:] for t in gone]
                db.execute(CLEAR_CONTEXT, {"sid": session_id, "tails": tails, "heads": heads})
        return Deleted(removed, len(orphans), sum(1 for *_, is_note in orphans if is_note))


# -- quotas ------------------------------------------------------------------------------


def scope_sql(alias: str = "sessions") -> str:
    """The SQL twin of :func:`mindfile.manage.quota.scope_for` (as SQLite's)."""
    a = alias
    return (
        f"CASE WHEN {a}.agent_identity IS NOT NULL THEN 'agent:' || {a}.agent_identity "
        f"WHEN substr({a}.session_id, 1, 7) = 'memory:' AND length({a}.session_id) > 7 "
        f"THEN 'user:' || substr({a}.session_id, 8) "
        f"ELSE 'session:' || {a}.session_id END"
    )


SCOPE_SESSIONS = f"SELECT session_id FROM sessions WHERE ({scope_sql()}) = %(scope)s"
MANAGED_SESSIONS = f"{SCOPE_SESSIONS} AND substr(session_id, 1, 6) <> 'facts:'"

_QUOTA_COLUMNS = (
    "scope, max_items, max_bytes, policy, evicted_items, evicted_bytes, created_at, updated_at"
)
SELECT_QUOTA = f"SELECT {_QUOTA_COLUMNS} FROM quotas WHERE scope = %s"
LIST_QUOTAS = f"SELECT {_QUOTA_COLUMNS} FROM quotas ORDER BY scope"
ANY_QUOTA = "SELECT 1 FROM quotas LIMIT 1"
DELETE_QUOTA = "DELETE FROM quotas WHERE scope = %s"
AGENT_OF = "SELECT agent_identity FROM sessions WHERE session_id = %s"

UPSERT_QUOTA = """
INSERT INTO quotas (scope, max_items, max_bytes, policy, created_at, updated_at)
VALUES (%(scope)s, %(items)s, %(bytes)s, %(policy)s, %(now)s, %(now)s)
ON CONFLICT (scope) DO UPDATE SET
    max_items = EXCLUDED.max_items, max_bytes = EXCLUDED.max_bytes,
    policy = EXCLUDED.policy, updated_at = EXCLUDED.updated_at
"""

COUNT_ITEMS = f"""
WITH s AS ({MANAGED_SESSIONS})
SELECT count(*),
       (SELECT count(*) FROM chunks
        WHERE session_id IN (SELECT session_id FROM s) AND expires_at <= %(now)s AND pinned = 0)
FROM chunks WHERE session_id IN (SELECT session_id FROM s)
"""

COUNT_BYTES = f"""
WITH s AS ({MANAGED_SESSIONS})
SELECT (SELECT coalesce(sum(octet_length(chunk_text)), 0) FROM chunks
        WHERE session_id IN (SELECT session_id FROM s))
     + (SELECT coalesce(sum(octet_length(payload_json)), 0) FROM conversation_events
        WHERE session_id IN (SELECT session_id FROM s))
"""

SCOPES_WITH_QUOTAS = f"""
SELECT DISTINCT q.scope FROM sessions AS s
JOIN quotas AS q ON q.scope = ({scope_sql("s")})
WHERE s.session_id = ANY(%s::text[])
"""

CANDIDATES = f"""
WITH s AS ({MANAGED_SESSIONS})
SELECT c.id, octet_length(c.chunk_text)
FROM chunks AS c
WHERE c.session_id IN (SELECT session_id FROM s) AND c.pinned = 0
  AND c.id <> ALL(%(protected)s::bigint[])
ORDER BY coalesce(c.expires_at <= %(now)s, false) DESC, {{importance}}, c.created_at, c.id
LIMIT %(limit)s OFFSET %(offset)s
"""
STORED_IMPORTANCE = "c.importance"
# mindfile.manage.importance's decay: importance × 2^(−age / half_life), age in seconds.
# Postgres raises on float underflow where SQLite rounds to 0: past 1,000 half-lives
# the decayed importance is 0 here too.
_HALF_LIVES = (
    "greatest(0.0, extract(epoch FROM (%(now)s::timestamptz - "
    "coalesce(c.last_accessed_at, c.created_at)::timestamptz))::float8) / %(half_life)s"
)
DECAYED_IMPORTANCE = (
    f"CASE WHEN {_HALF_LIVES} > 1000 THEN 0.0 "
    f"ELSE c.importance * power(2.0::float8, -({_HALF_LIVES})) END"
)

PROTECTED = f"""
{_PAIRS}
SELECT DISTINCT l.chunk_rowid FROM event_chunks AS l
JOIN pairs AS p ON p.session_id = l.session_id AND p.sequence = l.sequence
"""

CANDIDATE_EVENTS = """
SELECT l.chunk_rowid, l.session_id, l.sequence, octet_length(e.payload_json),
       (SELECT count(*) FROM event_chunks AS m
        WHERE m.session_id = l.session_id AND m.sequence = l.sequence)
FROM event_chunks AS l
JOIN conversation_events AS e ON e.session_id = l.session_id AND e.sequence = l.sequence
WHERE l.chunk_rowid = ANY(%s::bigint[])
"""

COUNT_EVICTION = """
UPDATE quotas SET evicted_items = evicted_items + %s, evicted_bytes = evicted_bytes + %s
WHERE scope = %s
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


class PgQuotaStore:
    """:class:`~mindfile.storage.quotas.QuotaStore` on Postgres."""

    def __init__(self, db: PgDatabase) -> None:
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
        self.db.execute(
            UPSERT_QUOTA,
            {"scope": scope, "items": max_items, "bytes": max_bytes, "policy": policy, "now": now},
        )

    def remove(self, scope: str) -> bool:
        self.db.execute(DELETE_QUOTA, (scope,))
        return self.db.changes() > 0

    def agent_of(self, session_id: str) -> str | None:
        agent = self.db.scalar(AGENT_OF, (session_id,))
        return None if agent is None else str(agent)

    def scope_sessions(self, scope: str) -> list[str]:
        rows = self.db.query(SCOPE_SESSIONS + " ORDER BY session_id", {"scope": scope})
        return [str(r[0]) for r in rows]

    def usage(self, scope: str, now: str, *, count_bytes: bool) -> ScopeUsage:
        row = self.db.query_one(COUNT_ITEMS, {"scope": scope, "now": now})
        assert row is not None
        size = int(self.db.scalar(COUNT_BYTES, {"scope": scope})) if count_bytes else 0
        return ScopeUsage(int(row[0]), int(row[1]), size)

    def scopes_with_quotas(self, session_ids: Sequence[str]) -> list[str]:
        return [str(r[0]) for r in self.db.query(SCOPES_WITH_QUOTAS, (list(session_ids),))]

    def protected(self, written: Sequence[tuple[str, int]]) -> list[int]:
        if not written:
            return []
        return [int(r[0]) for r in self.db.query(PROTECTED, _pairs(written))]

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
        params = {
            "scope": scope, "protected": [int(p) for p in protected], "now": now,
            "limit": limit, "offset": offset, "half_life": half_life,
        }  # fmt: skip
        return [(int(r[0]), int(r[1])) for r in self.db.query(sql, params)]

    def candidate_events(self, rowids: Sequence[int]) -> list[CandidateEvent]:
        rows = self.db.query(CANDIDATE_EVENTS, ([int(r) for r in rowids],))
        return [
            CandidateEvent(int(rowid), str(sid), int(seq), int(payload), int(links))
            for rowid, sid, seq, payload, links in rows
        ]

    def count_eviction(self, scope: str, items: int, freed_bytes: int) -> None:
        self.db.execute(COUNT_EVICTION, (items, freed_bytes, scope))


# -- models ------------------------------------------------------------------------------

META = "SELECT key, value FROM store_meta WHERE key = ANY(%s::text[])"
SET_META = """
INSERT INTO store_meta (key, value) VALUES (%s, %s)
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value
"""
CLEAR_REEMBED = "DELETE FROM store_meta WHERE key IN ('reembed_owner', 'reembed_target')"
CHUNK_BATCH = "SELECT id, chunk_text, text_hash FROM chunks WHERE id > %s ORDER BY id LIMIT %s"
SET_TEXT_HASH = "UPDATE chunks SET text_hash = %s WHERE id = %s"
MISSING_TEXT_HASHES = "SELECT id, chunk_text FROM chunks WHERE text_hash IS NULL"

# The staged vectors (cache blobs of the new model's size) for every chunk whose text
# the cache holds; written back as pgvector values (the triggers log every change).
STAGED = """
SELECT c.id, ec.embedding_blob
FROM chunks AS c
JOIN embedding_cache AS ec ON ec.model_id = %s AND ec.text_hash = c.text_hash
WHERE octet_length(ec.embedding_blob) = %s
"""
PUT_VECTOR = """
INSERT INTO chunks_vec (chunk_rowid, embedding, embedding_model) VALUES (%s, %s, %s)
ON CONFLICT (chunk_rowid) DO UPDATE SET
    embedding = EXCLUDED.embedding, embedding_model = EXCLUDED.embedding_model
"""
UNSTAGED = """
SELECT c.id FROM chunks AS c
WHERE NOT EXISTS (
    SELECT 1 FROM chunks_vec AS v WHERE v.chunk_rowid = c.id AND v.embedding_model = %s
)
"""
DROP_VECTORS = "DELETE FROM chunks_vec WHERE chunk_rowid = ANY(%s::bigint[])"


class PgModelStore:
    """:class:`~mindfile.storage.models.ModelStore` on Postgres."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def reembed_holder(self) -> tuple[str | None, str | None]:
        rows = self.db.query(META, (["reembed_owner", "reembed_target"],))
        held = {str(k): str(v) for k, v in rows}
        return held.get("reembed_owner"), held.get("reembed_target")

    def claim_reembed(self, owner: str, target: str) -> None:
        with self.db.atomic():
            self.db.executemany(SET_META, [("reembed_owner", owner), ("reembed_target", target)])

    def clear_reembed(self) -> None:
        self.db.execute(CLEAR_REEMBED)

    def chunk_batch(self, after: int, limit: int) -> list[tuple[int, str, str | None]]:
        return [
            (int(i), str(t), None if h is None else str(h))
            for i, t, h in self.db.query(CHUNK_BATCH, (after, limit))
        ]

    def missing_text_hashes(self) -> list[tuple[int, str]]:
        return [(int(i), str(t)) for i, t in self.db.query(MISSING_TEXT_HASHES)]

    def set_text_hashes(self, pairs: Sequence[tuple[str, int]]) -> None:
        # No index reads the hashes, but re-embedding's switch locks these rows and then
        # writes vectors in one transaction: the chunk lock first (writer_lock.py).
        lock_chunk_writes(self.db)
        self.db.executemany(SET_TEXT_HASH, [(h, int(i)) for h, i in pairs])

    def switch_model(self, model_id: str, dims: int) -> list[int]:
        db = self.db
        with db.atomic():
            lock_chunk_writes(db)
            staged = db.query(STAGED, (model_id, dims * 4))
            db.executemany(
                PUT_VECTOR,
                [
                    (
                        int(rowid),
                        np.frombuffer(bytes(blob), dtype="<f4").astype(np.float32),
                        model_id,
                    )
                    for rowid, blob in staged
                ],
            )
            unstaged = [int(r[0]) for r in db.query(UNSTAGED, (model_id,))]
            if unstaged:
                db.execute(DROP_VECTORS, (unstaged,))
            db.executemany(SET_META, [("embedding_model", model_id), ("embedding_dims", str(dims))])
            db.execute(CLEAR_REEMBED)
        return unstaged
