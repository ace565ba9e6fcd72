"""Postgres implementations of the meta, privacy and embedding-cache stores.

Same contracts as :mod:`mindfile.storage.meta`, :mod:`mindfile.storage.privacy`
(:mod:`mindfile.storage.erase` documents what is erased) and
:mod:`mindfile.storage.embedding_cache`. On Postgres, "purge" means: drop cached
vectors of texts no chunk holds, clear the ``purge_pending`` flag, and ``VACUUM`` the
tables deletes leave dead tuples in (deleted text stays in dead tuples until vacuumed;
docs/postgres.md). Cached vectors stay little-endian float32 ``bytea``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from mindfile.storage.embedding_cache import CachedModel
from mindfile.storage.postgres.db import Params, PgDatabase
from mindfile.storage.postgres.writer_lock import lock_chunk_writes

__all__ = ["PgEmbeddingCacheStore", "PgMetaStore", "PgPrivacyStore"]

# -- meta ------------------------------------------------------------------------------

SELECT_ONE = "SELECT value FROM store_meta WHERE key = %s"
SELECT_ALL = "SELECT key, value FROM store_meta"
SELECT_KEYS = "SELECT key, value FROM store_meta WHERE key = ANY(%s::text[])"
REPLACE = """
INSERT INTO store_meta (key, value) VALUES (%s, %s)
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value
"""
INSERT_NEW = "INSERT INTO store_meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING"


class PgMetaStore:
    """:class:`~mindfile.storage.meta.MetaStore` on ``store_meta``."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def get(self, key: str) -> str | None:
        value = self.db.scalar(SELECT_ONE, (key,))
        return None if value is None else str(value)

    def get_many(self, keys: Iterable[str] | None = None) -> dict[str, str]:
        if keys is None:
            rows = self.db.query(SELECT_ALL)
        else:
            rows = self.db.query(SELECT_KEYS, (list(keys),))
        return {str(k): str(v) for k, v in rows}

    def set(self, values: Mapping[str, str]) -> None:
        with self.db.atomic():
            self.db.executemany(REPLACE, list(values.items()))

    def set_default(self, values: Mapping[str, str]) -> None:
        with self.db.atomic():
            self.db.executemany(INSERT_NEW, list(values.items()))


# -- privacy ---------------------------------------------------------------------------

USER_SESSIONS = """
SELECT session_id FROM sessions
WHERE user_id = %(user)s OR session_id = 'memory:' || %(user)s
   OR session_id = 'facts:' || %(user)s
"""

_IN = "= ANY(%(sessions)s::text[])"

ERASE_COUNTS = f"""
SELECT (SELECT count(*) FROM conversation_events WHERE session_id {_IN}),
       (SELECT count(*) FROM chunks WHERE session_id {_IN}),
       (SELECT count(*) FROM notes WHERE session_id {_IN}),
       (SELECT count(*) FROM schedule_runs WHERE schedule_id IN
            (SELECT schedule_id FROM schedules WHERE user_id = %(user)s))
"""

# Tables a purge vacuums: where deleted memories leave dead tuples.
PURGED_TABLES = (
    "sessions", "conversation_events", "session_state", "chunks", "chunks_vec", "notes",
    "facts", "fact_history", "event_chunks", "consolidations", "memory_jobs",
    "llm_failures", "embedding_cache",
)  # fmt: skip

PRUNE_ORPHANS = """
DELETE FROM embedding_cache
WHERE text_hash NOT IN (SELECT text_hash FROM chunks WHERE text_hash IS NOT NULL)
"""


class PgPrivacyStore:
    """:class:`~mindfile.storage.privacy.PrivacyStore` on Postgres."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def _delete(self, sql: str, params: Params) -> int:
        self.db.execute(sql, params)
        return self.db.changes()

    def delete_session(self, session_id: str) -> bool:
        with self.db.atomic():
            lock_chunk_writes(self.db)  # the delete cascades into chunks: lock first
            return self._delete("DELETE FROM sessions WHERE session_id = %s", (session_id,)) > 0

    def erase_facts_scope(self, scope: str) -> int:
        with self.db.atomic():
            n = self._delete("DELETE FROM facts WHERE scope = %s", (scope,))
            return n + self._delete("DELETE FROM fact_history WHERE scope = %s", (scope,))

    def user_sessions(self, user_id: str) -> list[str]:
        return [str(r[0]) for r in self.db.query(USER_SESSIONS, {"user": user_id})]

    def erase_user(self, user_id: str) -> dict[str, int]:
        with self.db.atomic():
            lock_chunk_writes(self.db)  # before any row: the sessions cascade into chunks
            sessions = self.user_sessions(user_id)
            args = {"user": user_id, "sessions": sessions}
            row = self.db.query_one(ERASE_COUNTS, args)
            assert row is not None
            events, chunks, notes, runs = (int(v) for v in row)
            counts = {"sessions": len(sessions), "events": events, "chunks": chunks}
            counts["notes"] = notes
            counts["llm_failures"] = self._delete(
                f"DELETE FROM llm_failures WHERE scope = %(user)s OR session_id {_IN}", args
            )
            counts["quotas"] = self._delete(
                "DELETE FROM quotas WHERE scope = 'user:' || %(user)s OR scope = ANY("
                "ARRAY(SELECT 'session:' || s FROM unnest(%(sessions)s::text[]) AS s))",
                args,
            )
            self.db.execute(f"DELETE FROM sessions WHERE session_id {_IN}", args)
            counts["facts"] = self._delete("DELETE FROM facts WHERE scope = %s", (user_id,))
            counts["fact_history"] = self._delete(
                "DELETE FROM fact_history WHERE scope = %s", (user_id,)
            )
            counts["schedule_runs"] = runs
            counts["schedules"] = self._delete(
                "DELETE FROM schedules WHERE user_id = %s", (user_id,)
            )  # their runs go by cascade
        return counts

    def purge_pending(self) -> bool:
        found = self.db.scalar("SELECT 1 FROM store_meta WHERE key = 'purge_pending'")
        return found is not None

    def purge(self) -> int:
        with self.db.atomic():
            dropped = self._delete(PRUNE_ORPHANS, None)
            self.db.execute("DELETE FROM store_meta WHERE key = 'purge_pending'")
        # VACUUM cannot run inside a transaction block: autocommit, outside atomic().
        self.db.execute(f"VACUUM {', '.join(PURGED_TABLES)}")
        return dropped


# -- embedding cache ---------------------------------------------------------------------

LOOKUP = """
SELECT text_hash, embedding_blob FROM embedding_cache
WHERE model_id = %s AND text_hash = ANY(%s::text[])
"""

TOUCH = """
UPDATE embedding_cache SET last_used_at = %s WHERE model_id = %s AND text_hash = ANY(%s::text[])
"""

PUT = """
INSERT INTO embedding_cache (model_id, text_hash, embedding_blob, created_at, last_used_at)
VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (model_id, text_hash) DO UPDATE SET
    embedding_blob = EXCLUDED.embedding_blob, last_used_at = EXCLUDED.last_used_at
"""

EVICT = """
DELETE FROM embedding_cache WHERE (model_id, text_hash) IN (
    SELECT model_id, text_hash FROM embedding_cache
    ORDER BY last_used_at, model_id, text_hash
    LIMIT greatest(0, (SELECT count(*) FROM embedding_cache) - %s)
)
"""

PRUNE_UNUSED_SINCE = "DELETE FROM embedding_cache WHERE last_used_at < %s"

SUMMARY = """
SELECT model_id, count(*), coalesce(sum(octet_length(embedding_blob)), 0), min(last_used_at)
FROM embedding_cache GROUP BY model_id ORDER BY model_id
"""


class PgEmbeddingCacheStore:
    """:class:`~mindfile.storage.embedding_cache.EmbeddingCacheStore` on Postgres."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def lookup(self, model_id: str, hashes: Sequence[str]) -> dict[str, bytes]:
        if not hashes:
            return {}
        rows = self.db.query(LOOKUP, (model_id, list(hashes)))
        return {str(h): bytes(b) for h, b in rows}

    def record(
        self,
        model_id: str,
        used: Sequence[str],
        new: Sequence[tuple[str, bytes]],
        now: str,
        max_entries: int | None,
    ) -> None:
        with self.db.atomic():
            if used:
                self.db.execute(TOUCH, (now, model_id, list(used)))
            if new:
                self.db.executemany(PUT, [(model_id, h, blob, now, now) for h, blob in new])
                if max_entries is not None:
                    self.db.execute(EVICT, (max_entries,))

    def summary(self) -> list[CachedModel]:
        return [
            CachedModel(str(m), int(n), int(b), None if o is None else str(o))
            for m, n, b, o in self.db.query(SUMMARY)
        ]

    def prune(self, *, unused_since: str | None = None, everything: bool = False) -> int:
        with self.db.atomic():
            if everything:
                self.db.execute("DELETE FROM embedding_cache")
                return self.db.changes()
            self.db.execute(PRUNE_ORPHANS)
            removed = self.db.changes()
            if unused_since is not None:
                self.db.execute(PRUNE_UNUSED_SINCE, (unused_since,))
                removed += self.db.changes()
            return removed

    def drop_model(self, model_id: str) -> int:
        self.db.execute("DELETE FROM embedding_cache WHERE model_id = %s", (model_id,))
        return self.db.changes()
