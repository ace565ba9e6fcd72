"""The embedding cache's policy: consult it before the embedder, fill it after.

:func:`mindfile.index.embedding.prepare_vectors` (the prepare stage every writer uses)
asks an :class:`EmbeddingCache` for vectors: texts whose ``(model, text hash)`` is in
the ``embedding_cache`` table are served from it, only the others go to the embedder,
and their vectors are added (in a short transaction of their own, after the embedder
returned: never under the write lock during the call). The cache is shared by every
session and agent of the store.

**When it is on.** ``mindfile.open(..., embedding_cache=None)`` (default) turns it on
for embedders that are not ``local`` (remote providers: a call costs a network round
trip and money) and off for in-process ones (the bundled static model embeds a chunk
in microseconds; the lookup would cost more than it saves, see
``benchmarks/embedding_cache.py``). ``True``/``False`` force it.

**Bounds and deletion.** Entries exist only for texts the store holds: ``purge()``
(run by ``forget_user``, and on close after any deletion) drops the vectors of texts no
chunk holds any more. ``embedding_cache_max_entries`` bounds the table, evicting the
least recently used entries; ``prune(older_than=...)`` drops entries unused for a time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

import numpy as np

from mindfile.embed.base import Embedder, Vectors, check_vectors
from mindfile.errors import ConfigError, InvalidInputError
from mindfile.index.chunking import content_hash
from mindfile.storage.db import Database, utcnow
from mindfile.storage.embedding_cache import EmbeddingCacheStore, SqliteEmbeddingCacheStore
from mindfile.types import EmbeddingCacheStats

__all__ = ["EmbeddingCache"]


class EmbeddingCache:
    """One store's embedding cache (thread-safe counters; rows through its store).

    ``store`` is the embedding-cache store (``engine.stores.embedding_cache``); a
    database is taken as its SQLite one.
    """

    def __init__(
        self,
        store: EmbeddingCacheStore | Database,
        *,
        enabled: bool,
        max_entries: int | None = None,
    ) -> None:
        if max_entries is not None and (
            isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1
        ):
            raise ConfigError("embedding_cache_max_entries must be a positive integer or None")
        self.store = SqliteEmbeddingCacheStore(store) if isinstance(store, Database) else store
        self.enabled = enabled
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0

    def vectors(
        self,
        embedder: Embedder,
        texts: Sequence[str],
        embed: Callable[[Sequence[str]], Vectors],
    ) -> Vectors:
        """Vectors of distinct ``texts``: cached ones looked up, the rest via ``embed``.

        ``embed(texts) -> Vectors`` is the guarded embedder call of the prepare stage.
        """
        model = embedder.model_id
        dims = embedder.dimensions
        hashes = [content_hash(t) for t in texts]
        found = self.store.lookup(model, hashes)
        cached: dict[str, np.ndarray] = {}
        for h, blob in found.items():
            if len(blob) != dims * 4:
                continue  # damaged: embedded again (and overwritten) below
            vector = np.frombuffer(blob, dtype="<f4")
            if vector.shape == (dims,) and np.isfinite(vector).all():
                cached[h] = vector.astype(np.float32)
        missing = [i for i, h in enumerate(hashes) if h not in cached]
        fresh = embed([texts[i] for i in missing]) if missing else None
        out = np.zeros((len(texts), dims), dtype=np.float32)
        for i, h in enumerate(hashes):
            if h in cached:
                out[i] = cached[h]
        if fresh is not None:
            out[missing] = fresh
        blobs = (
            []
            if fresh is None
            else [
                (hashes[i], np.asarray(v, dtype="<f4").tobytes())
                for i, v in zip(missing, fresh, strict=True)
            ]
        )
        self.store.record(model, list(cached), blobs, utcnow(), self.max_entries)
        with self._lock:
            self._hits += len(texts) - len(missing)
            self._misses += len(missing)
        return check_vectors(out, len(texts), dims, model)

    @property
    def hits(self) -> int:
        """Texts served from the cache by this object since it was made."""
        with self._lock:
            return self._hits

    @property
    def misses(self) -> int:
        """Texts this object had to send to the embedder."""
        with self._lock:
            return self._misses

    def stats(self) -> EmbeddingCacheStats:
        """Table size by model, and this process's hits and misses."""
        rows = self.store.summary()
        with self._lock:
            hits, misses = self._hits, self._misses
        return EmbeddingCacheStats(
            enabled=self.enabled,
            entries=sum(r.entries for r in rows),
            bytes=sum(r.bytes for r in rows),
            models={r.model_id: r.entries for r in rows},
            hits=hits,
            misses=misses,
            max_entries=self.max_entries,
            oldest_used_at=min((str(r.oldest_used_at) for r in rows), default=None),
        )

    def prune(
        self, *, older_than: timedelta | float | None = None, everything: bool = False
    ) -> int:
        """Drop entries of texts no chunk holds, those unused for ``older_than`` (a
        timedelta or seconds), or with ``everything`` the whole table; returns count."""
        since = None
        if older_than is not None:
            seconds = (
                older_than.total_seconds() if isinstance(older_than, timedelta) else older_than
            )
            if (
                isinstance(seconds, bool)
                or not isinstance(seconds, int | float)
                or not 0 <= seconds < 1e12
            ):
                raise InvalidInputError("older_than must be a non-negative number of seconds")
            since = (datetime.now(UTC) - timedelta(seconds=seconds)).isoformat(
                timespec="microseconds"
            )
        return self.store.prune(unused_since=since, everything=everything)
