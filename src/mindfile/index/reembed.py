"""Re-embedding: move a store to another embedding model without stopping searches.

:func:`reembed` walks every chunk in id order and stages the new model's vectors in the
embedding cache (:mod:`mindfile.index.cache`; the prepare stage, outside any write
transaction), then switches in one transaction: every chunk's vector is replaced by
the staged one and ``store_meta`` names the new model. Until that commit, searches use
the old model and the old vectors; after it, the new ones. Chunks written meanwhile
whose text was not staged lose their old vector and get an embedding job (run at once
in a sync store).

**Resumable.** Staged vectors are committed batch by batch; a run killed half-way
(``kill -9``) leaves them in the cache, and the next call finds them there: no chunk is
embedded twice (except a batch that was in the embedder when the process died).
**One at a time.** ``store_meta.reembed_owner`` names the running re-embedding
(``host:pid:start:thread``); another call fails with ``ConflictError`` while that owner
is alive, and takes over when it is gone.

Other processes that have the store open keep the old embedder: their next search or
write raises ``ConfigError`` (the store's model changed) and they must reopen it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mindfile.embed import Embedder, resolve_embedder
from mindfile.errors import ConflictError, InvalidInputError
from mindfile.index.cache import EmbeddingCache
from mindfile.index.chunking import content_hash
from mindfile.index.embedding import prepare_vectors
from mindfile.jobs import queue
from mindfile.jobs.owner import default_worker_id, owner_gone
from mindfile.types import _ToDict

if TYPE_CHECKING:
    from mindfile._deps import ReembedDeps

__all__ = ["ReembedReport", "reembed"]

#: ``progress(done, total)`` after each batch.
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class ReembedReport(_ToDict):
    """What :meth:`mindfile.Mindfile.reembed` did.

    ``chunks``: chunks in the store after the switch; ``embedded``: chunk texts sent to
    the new embedder by this call; ``reused``: chunks whose new vector was already
    staged (a resumed run) or whose text repeats another's; ``queued``: chunks written
    during the run after staging ended, which got an embedding job instead.
    """

    old_model: str
    new_model: str
    chunks: int
    embedded: int
    reused: int
    queued: int
    seconds: float


def reembed(
    engine: ReembedDeps,
    new: str | Embedder,
    *,
    batch_size: int = 256,
    progress: Progress | None = None,
) -> ReembedReport:
    """Re-embed every chunk with ``new`` and make it the store's model (module docs)."""
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, int)
        or not 1 <= batch_size <= 4096
    ):
        raise InvalidInputError("batch_size must be an integer from 1 to 4096")
    if progress is not None and not callable(progress):
        raise InvalidInputError("progress must be callable")
    embedder = resolve_embedder(new)
    db, models = engine.db, engine.stores.models
    started = time.perf_counter()
    old_model = engine.embedder.model_id
    if embedder.model_id == old_model and embedder.dimensions == engine.embedder.dimensions:
        total = engine.stores.integrity.chunk_count()
        return ReembedReport(old_model, old_model, total, 0, 0, 0, 0.0)
    me = default_worker_id()
    _claim(engine, me, embedder.model_id)
    try:
        embedded, reused = _stage(engine, embedder, batch_size, progress)
        with db.atomic():
            if models.reembed_holder()[0] != me:
                raise ConflictError("another re-embedding took over this one; not switched")
            _backfill_hashes(engine)
            unstaged = models.switch_model(embedder.model_id, embedder.dimensions)
            queued = queue.enqueue(engine.stores.jobs, unstaged, queue.utc_clock())
            total = engine.stores.integrity.chunk_count()
            engine.stores.embedding_cache.drop_model(old_model)
        engine._switch_embedder(embedder, owned=not isinstance(new, Embedder))
        if not engine.embedding_cache.enabled:
            engine.stores.embedding_cache.drop_model(embedder.model_id)
    except BaseException:
        _release(engine, me)
        raise
    if queued and engine.indexing == "sync":
        engine.run_jobs()
    return ReembedReport(
        old_model,
        embedder.model_id,
        total,
        embedded,
        reused,
        queued,
        time.perf_counter() - started,
    )


def _claim(engine: ReembedDeps, me: str, target: str) -> None:
    models = engine.stores.models
    with engine.db.atomic():
        owner, target_held = models.reembed_holder()
        if owner is not None and owner != me and not owner_gone(owner):
            raise ConflictError(
                f"a re-embedding to {target_held!r} is already running "
                f"({owner}); wait for it, or run this once it has stopped",
                owner=owner,
            )
        models.claim_reembed(me, target)


def _release(engine: ReembedDeps, me: str) -> None:
    db = engine.db
    if db.closed:
        return
    models = engine.stores.models
    with db.atomic():
        if models.reembed_holder()[0] == me:
            models.clear_reembed()


def _stage(
    engine: ReembedDeps, embedder: Embedder, batch_size: int, progress: Progress | None
) -> tuple[int, int]:
    """Stage the new vectors of every chunk; returns (embedded, reused)."""
    db, models = engine.db, engine.stores.models
    total = engine.stores.integrity.chunk_count()
    staging = EmbeddingCache(engine.stores.embedding_cache, enabled=True)
    last, done, embedded = 0, 0, 0
    while True:
        rows = models.chunk_batch(last, batch_size)
        if not rows:
            break
        last = rows[-1][0]
        texts = [t for _, t, _ in rows]
        missing = [(content_hash(t), i) for i, t, h in rows if h is None]
        if missing:
            with db.atomic():
                models.set_text_hashes(missing)
        before = staging.misses
        prepare_vectors(embedder, db, texts, cache=staging)
        embedded += staging.misses - before
        done += len(rows)
        if progress is not None:
            progress(done, max(total, done))
    return embedded, done - embedded


def _backfill_hashes(engine: ReembedDeps) -> None:
    """Chunks written without ``text_hash`` meanwhile (an older Mindfile): hash them."""
    models = engine.stores.models
    missing = models.missing_text_hashes()
    if missing:
        models.set_text_hashes([(content_hash(t), i) for i, t in missing])
