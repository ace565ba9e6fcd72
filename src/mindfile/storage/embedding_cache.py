"""The embedding-cache store (table ``embedding_cache``, migration 0011).

Rows are document vectors keyed by ``(model_id, text_hash)``; ``text_hash`` is the
blake3 hash of the chunk text (:func:`mindfile.index.chunking.content_hash`), the same
value :func:`mindfile.storage.chunks.insert_chunk` writes to ``chunks.text_hash``.
Policy (when to consult it, counters) lives in :mod:`mindfile.index.cache`, which
reaches the rows through :class:`EmbeddingCacheStore`; the functions below are its
SQLite implementation (the purge calls :func:`prune` directly).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from mindfile.storage.db import Database, Row

__all__ = [
    "CachedModel",
    "EmbeddingCacheStore",
    "SqliteEmbeddingCacheStore",
    "count",
    "drop_model",
    "evict_lru",
    "lookup",
    "prune",
    "put",
    "summary",
]


@dataclass(frozen=True, slots=True)
class CachedModel:
    """One model's share of the cache."""

    model_id: str
    entries: int
    bytes: int
    oldest_used_at: str | None


class EmbeddingCacheStore(Protocol):
    """Cached document vectors by ``(model, text hash)`` (backend-neutral)."""

    def lookup(self, model_id: str, hashes: Sequence[str]) -> dict[str, bytes]:
        """Cached vectors (little-endian float32 bytes) of the hashes that have one."""
        ...

    def record(
        self,
        model_id: str,
        used: Sequence[str],
        new: Sequence[tuple[str, bytes]],
        now: str,
        max_entries: int | None,
    ) -> None:
        """In one transaction: mark ``used`` entries used at ``now``, add ``new``
        ``(text hash, vector bytes)`` entries, and with ``max_entries`` drop the least
        recently used beyond it."""
        ...

    def summary(self) -> list[CachedModel]:
        """Per model, by model id: entries, bytes, oldest last use."""
        ...

    def prune(self, *, unused_since: str | None = None, everything: bool = False) -> int:
        """Drop entries of texts no chunk holds and those unused since ``unused_since``,
        or with ``everything`` all of them; returns how many."""
        ...

    def drop_model(self, model_id: str) -> int:
        """Forget every cached vector of ``model_id``; returns how many."""
        ...


LOOKUP = """
SELECT text_hash, embedding_blob FROM embedding_cache
WHERE model_id = ?1 AND text_hash IN (SELECT value FROM json_each(?2))
"""

TOUCH = """
UPDATE embedding_cache SET last_used_at = ?3
WHERE model_id = ?1 AND text_hash IN (SELECT value FROM json_each(?2))
"""

PUT = """
INSERT INTO embedding_cache (model_id, text_hash, embedding_blob, created_at, last_used_at)
VALUES (?1, ?2, ?3, ?4, ?4)
ON CONFLICT (model_id, text_hash) DO UPDATE SET
    embedding_blob = excluded.embedding_blob, last_used_at = excluded.last_used_at
"""

EVICT = """
DELETE FROM embedding_cache WHERE (model_id, text_hash) IN (
    SELECT model_id, text_hash FROM embedding_cache
    ORDER BY last_used_at, model_id, text_hash
    LIMIT max(0, (SELECT count(*) FROM embedding_cache) - ?1)
)
"""

# Vectors of texts that no chunk holds any more (deleted means gone). Chunks written
# before migration 0011 have no text_hash; their texts never entered the cache.
PRUNE_ORPHANS = """
DELETE FROM embedding_cache
WHERE text_hash NOT IN (SELECT text_hash FROM chunks WHERE text_hash IS NOT NULL)
"""

PRUNE_UNUSED_SINCE = "DELETE FROM embedding_cache WHERE last_used_at < ?"

SUMMARY = """
SELECT model_id, count(*), coalesce(sum(length(embedding_blob)), 0), min(last_used_at)
FROM embedding_cache GROUP BY model_id ORDER BY model_id
"""


def lookup(db: Database, model_id: str, hashes: Sequence[str]) -> dict[str, bytes]:
    """Cached vectors (raw blobs) of the hashes that have one."""
    if not hashes:
        return {}
    rows = db.query(LOOKUP, (model_id, json.dumps(list(hashes))))
    return {str(h): bytes(b) for h, b in rows}


def touch(db: Database, model_id: str, hashes: Sequence[str], now: str) -> None:
    """Mark cached vectors used (LRU order). Must run inside ``db.atomic()``."""
    if hashes:
        db.execute(TOUCH, (model_id, json.dumps(list(hashes)), now))


def put(db: Database, model_id: str, items: Sequence[tuple[str, bytes]], now: str) -> None:
    """Add vectors (``(text_hash, blob)``). Must run inside ``db.atomic()``."""
    db.executemany(PUT, [(model_id, h, blob, now) for h, blob in items])


def evict_lru(db: Database, max_entries: int) -> int:
    """Drop the least recently used entries beyond ``max_entries``; returns how many."""
    db.execute(EVICT, (max_entries,))
    return db.changes()


def prune(
    db: Database, *, unused_since: str | None = None, orphans: bool = True, everything: bool = False
) -> int:
    """Drop orphaned entries and (optionally) those unused since a time, or everything;
    returns how many."""
    if everything:
        db.execute("DELETE FROM embedding_cache")
        return db.changes()
    removed = 0
    if orphans:
        db.execute(PRUNE_ORPHANS)
        removed += db.changes()
    if unused_since is not None:
        db.execute(PRUNE_UNUSED_SINCE, (unused_since,))
        removed += db.changes()
    return removed


def drop_model(db: Database, model_id: str) -> int:
    """Forget every cached vector of ``model_id``; returns how many."""
    db.execute("DELETE FROM embedding_cache WHERE model_id = ?", (model_id,))
    return db.changes()


def count(db: Database) -> int:
    return int(db.scalar("SELECT count(*) FROM embedding_cache"))


def summary(db: Database) -> list[Row]:
    """Per model: entries, bytes, oldest last use."""
    return db.query(SUMMARY)


class SqliteEmbeddingCacheStore:
    """:class:`EmbeddingCacheStore` on ``embedding_cache``."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def lookup(self, model_id: str, hashes: Sequence[str]) -> dict[str, bytes]:
        return lookup(self.db, model_id, hashes)

    def record(
        self,
        model_id: str,
        used: Sequence[str],
        new: Sequence[tuple[str, bytes]],
        now: str,
        max_entries: int | None,
    ) -> None:
        with self.db.atomic():
            touch(self.db, model_id, used, now)
            if new:
                put(self.db, model_id, new, now)
                if max_entries is not None:
                    evict_lru(self.db, max_entries)

    def summary(self) -> list[CachedModel]:
        return [
            CachedModel(str(m), int(n), int(b), None if o is None else str(o))
            for m, n, b, o in summary(self.db)
        ]

    def prune(self, *, unused_since: str | None = None, everything: bool = False) -> int:
        with self.db.atomic():
            return prune(self.db, unused_since=unused_since, everything=everything)

    def drop_model(self, model_id: str) -> int:
        with self.db.atomic():
            return drop_model(self.db, model_id)
