"""The one place chunk texts become document vectors, and the rule that goes with it.

**No embedder call while a write transaction is open.** An embedder may be a network
round trip; SQLite's write lock is shared by every writer in every process, so they
would all wait for it. Every writer (the store pipeline, background jobs, notes, facts,
consolidation, LLM extraction) embeds through :func:`embed_documents`, which refuses to
run under the calling thread's write transaction with :class:`WriteLockHeldError`.

Every writer gets its vectors from :func:`prepare_vectors` (the prepare stage of the
one indexing pipeline, docs/architecture.md "Write path"): repeated texts are embedded
once, and a store with ``indexing="background"`` embeds nothing there (its commit
stage queues jobs). A writer that must write several items in one transaction embeds
them first, with :func:`pre_embedded`, and the writes inside serve those vectors
without calling the embedder again.

Embedders that declare ``local = True`` (the bundled static model, the hash embedder:
in-process, microseconds to milliseconds, no I/O) may still run inside a caller's own
transaction (``with mem.db.atomic(): mem.store(...)``); Mindfile's own write paths never
do, which the test suite checks with :data:`STRICT` on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from contextvars import ContextVar

import numpy as np

from mindfile.embed.base import Embedder, Vectors, check_vectors
from mindfile.errors import EmbeddingError, MindfileError, StorageError
from mindfile.index.cache import EmbeddingCache
from mindfile.storage.backend import AnyDatabase

__all__ = [
    "STRICT",
    "WriteLockHeldError",
    "embed_documents",
    "pre_embedded",
    "prepare_vectors",
]

#: Refuse every embedder under a write transaction, local or not (tests of our paths).
STRICT = False

_prepared: ContextVar[dict[str, np.ndarray] | None] = ContextVar("mindfile_prepared", default=None)


class WriteLockHeldError(StorageError):
    """An embedder call was attempted inside a write transaction (a bug in the caller)."""

    code = "embed_under_write_lock"


def embed_documents(embedder: Embedder, db: AnyDatabase, texts: Sequence[str]) -> Vectors:
    """Validated document vectors for ``texts``, or :class:`EmbeddingError`."""
    dims = embedder.dimensions
    if not texts:
        return np.zeros((0, dims), dtype=np.float32)
    ready = _prepared.get()
    if ready is not None and all(t in ready for t in texts):
        return np.stack([ready[t] for t in texts])
    allowed = getattr(embedder, "local", False) is True and not STRICT
    if not allowed and db.held_by_me() and db.in_write_transaction:
        raise WriteLockHeldError(
            "an embedder call inside a write transaction would hold SQLite's write lock "
            "for it; embed first (mindfile.index.embedding.pre_embedded), then write"
        )
    try:
        raw = embedder.embed_documents(list(texts))
    except MindfileError as exc:
        if isinstance(exc, EmbeddingError):
            raise
        raise EmbeddingError(exc.message) from exc
    except Exception as exc:  # a provider's own failure: nothing has been written
        raise EmbeddingError(f"embedding failed: {exc}") from exc
    return check_vectors(raw, len(texts), dims, embedder.model_id)


def prepare_vectors(
    embedder: Embedder,
    db: AnyDatabase,
    texts: Sequence[str],
    *,
    background: bool = False,
    cache: EmbeddingCache | None = None,
) -> Vectors | None:
    """The prepare stage's vectors: one row per text, or None with ``background``.

    Every chunk-writing feature gets its vectors here, before its write transaction.
    Repeated texts are embedded once. With ``background`` (a store opened with
    ``indexing="background"``) nothing is embedded: the commit stage queues a job per
    new chunk instead (:func:`mindfile.storage.chunks.insert_chunk`). With an enabled
    ``cache`` (:mod:`mindfile.index.cache`) only texts it does not hold are embedded.
    """
    if background:
        return None
    unique = list(dict.fromkeys(texts))
    vectors = _embed_distinct(embedder, db, unique, cache)
    if len(unique) == len(texts):
        return vectors
    position = {text: i for i, text in enumerate(unique)}
    return vectors[[position[t] for t in texts]]


def _embed_distinct(
    embedder: Embedder, db: AnyDatabase, texts: Sequence[str], cache: EmbeddingCache | None
) -> Vectors:
    if cache is not None and cache.enabled and texts:
        return cache.vectors(embedder, texts, lambda ts: embed_documents(embedder, db, ts))
    return embed_documents(embedder, db, texts)


@contextlib.contextmanager
def pre_embedded(
    embedder: Embedder,
    db: AnyDatabase,
    texts: Sequence[str],
    *,
    background: bool = False,
    cache: EmbeddingCache | None = None,
) -> Iterator[None]:
    """Embed ``texts`` now (outside any transaction); writes inside reuse the vectors.

    With ``background`` nothing is embedded (the writes inside queue jobs).
    """
    if background:
        yield
        return
    unique = list(dict.fromkeys(texts))
    vectors = _embed_distinct(embedder, db, unique, cache)
    ready = dict(_prepared.get() or {})
    ready.update(zip(unique, vectors, strict=True))
    token = _prepared.set(ready)
    try:
        yield
    finally:
        _prepared.reset(token)
