"""The :class:`Mindfile` facade: the conversation log and hybrid retrieval on one file."""

from __future__ import annotations

import functools
import logging
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date, datetime, timedelta
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from mindfile import context as _ctx
from mindfile._api.context import ContextAPI
from mindfile._api.files import FilesAPI
from mindfile._api.jobs import JobsAPI
from mindfile._api.manage import ManageAPI
from mindfile._api.memory import AgentMemoryAPI
from mindfile._api.search import SearchAPI
from mindfile._follow import IdleFollower
from mindfile._heap import tune_heap
from mindfile._helpers import flags_deferred
from mindfile._publish import publisher_for
from mindfile.embed import Embedder
from mindfile.embed.binding import bind_embedder
from mindfile.errors import ConfigError, InvalidInputError, MindfileError, ScopeError
from mindfile.index.cache import EmbeddingCache
from mindfile.index.chunking import ChunkSpec
from mindfile.index.embedding import prepare_vectors
from mindfile.index.pipeline import PreparedEvent, check_id, prepare_event
from mindfile.index.reembed import ReembedReport
from mindfile.index.reembed import reembed as _reembed
from mindfile.manage import quota as _quota
from mindfile.manage.importance import expires_at as _expires_at
from mindfile.retrieve.lexical import Bm25Index
from mindfile.retrieve.preferences import backfill as backfill_statements
from mindfile.retrieve.reranker import Reranker, check_reranker
from mindfile.retrieve.temporal import load_parser
from mindfile.retrieve.token_match import backfill as backfill_token_sets
from mindfile.retrieve.token_match import matcher_for
from mindfile.retrieve.token_match import stop as stop_token_sets
from mindfile.retrieve.token_match import warm_up as warm_token_match
from mindfile.storage.backend import (
    AnyDatabase,
    check_postgres_options,
    is_postgres_url,
    open_postgres,
    scheduler_store,
)
from mindfile.storage.db import Database, utcnow
from mindfile.storage.meta import MODEL_KEY
from mindfile.storage.migrations import apply_migrations, check_migrations
from mindfile.storage.stores import Stores, sqlite_stores
from mindfile.tokens import TokenCounter, estimate_tokens, message_tokens
from mindfile.types import (
    EmbeddingCacheStats,
    MemoryRecord,
    SessionInfo,
    StoreInfo,
)
from mindfile.vector import VectorIndex, choose_index, make_index

if TYPE_CHECKING:
    from mindfile.scheduler.protocol import SchedulerStore

logger = logging.getLogger("mindfile")

__all__ = ["Event", "Mindfile", "open"]

#: ``(session_id, sequence, payload)`` or the same plus a metadata mapping.
Event = (
    tuple[str, int, Any]
    | tuple[str, int, Any, Mapping[str, Any] | None]
    | tuple[str, int, Any, Mapping[str, Any] | None, datetime | date | str | float | None]
)


def open(  # shadows the builtin on purpose: mindfile.open(path)
    path: str | Path = ":memory:",
    *,
    embedder: str | Embedder | None = None,
    vector_index: str = "auto",
    chunk_max_chars: int = 640,
    chunk_overlap: int = 96,
    neighbor_context: bool = True,
    indexing: Literal["sync", "background"] = "sync",
    lexical_index: Literal["memory", "fts5"] = "memory",
    durability: Literal["normal", "full"] = "normal",
    read_only: bool = False,
    embedding_cache: bool | None = None,
    embedding_cache_max_entries: int | None = None,
    reranker: Reranker | None = None,
) -> Mindfile:
    """Open (creating if needed) a memory store.

    ``path`` is a file path, ``":memory:"``, or a ``postgresql://`` (``postgres://``) URL:
    the same store on a Postgres + pgvector server, every feature alike (extra
    ``[postgres]``; docs/postgres.md; ``durability`` and the file-only vector indexes
    are a :class:`~mindfile.errors.ConfigError` there, the password is never shown).
    ``embedder`` is a spec such as
    ``"static"`` (the bundled model, default for new stores) or ``"hash"``, or any
    :class:`~mindfile.embed.Embedder`; reopening a store without one uses the model the
    store was made with. ``vector_index`` is ``"auto"`` (default: ``"exact"`` below
    200,000 chunks, ``"zvec"`` from there when installed; chosen at open, shown by
    ``info()``), ``"exact"`` (in-memory), ``"sqlite-vec"``, or an on-disk ANN index
    shared by processes, ``"zvec"`` or ``"lancedb"`` (extras; docs/vector-indexes.md).
    ``neighbor_context`` indexes each chunk with the text of the events around it in its
    session (low-weight FTS columns; see docs/retrieval.md).
    ``indexing="background"`` makes ``store``/``store_many`` queue embedding jobs
    instead of calling the embedder (see docs/background-indexing.md).
    ``lexical_index`` picks where BM25 ranks: ``"memory"`` (default, an in-memory index
    derived from the file, exact FTS5-compatible scores, fast at any size) or ``"fts5"``
    (SQLite's own ``bm25()``; no memory, slow when query words are common).
    ``durability`` is ``"normal"`` (default: WAL with ``synchronous=NORMAL``; a power
    loss or OS crash may lose the last transactions, never corrupt the file; a process
    crash loses nothing) or ``"full"`` (``synchronous=FULL``: every acknowledged write
    survives power loss, at the cost of an fsync per commit; see docs/architecture.md).
    ``read_only=True`` opens an existing store for reading only: nothing is created or
    changed on disk (a missing file is a :class:`~mindfile.errors.NotFoundError`, every
    write a :class:`~mindfile.errors.ReadOnlyError`); it works on read-only media too.
    ``embedding_cache`` consults stored vectors by (model, text) before calling the
    embedder: ``None`` (default) = on for remote embedders, off for local ones;
    ``embedding_cache_max_entries`` bounds it with LRU eviction (docs/embedding-cache.md).
    ``reranker`` (optional, none by default): anything with ``score(query, texts)``, e.g.
    :func:`mindfile.llm.llm_reranker`; every search then returns its first 50 hits in
    the reranker's order (docs/retrieval.md "Reranking").
    """
    if not isinstance(path, str | PathLike):
        raise ConfigError(f"path must be a str or a path, not {type(path).__name__}")
    for name, value in (("chunk_max_chars", chunk_max_chars), ("chunk_overlap", chunk_overlap)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{name} must be an integer, not {type(value).__name__}")
    if not isinstance(vector_index, str):
        raise ConfigError("vector_index must be a string")
    return Mindfile(
        path,
        embedder=embedder,
        vector_index=vector_index,
        chunk=ChunkSpec(chunk_max_chars, chunk_overlap),
        neighbor_context=neighbor_context,
        indexing=indexing,
        lexical_index=lexical_index,
        durability=durability,
        read_only=read_only,
        embedding_cache=embedding_cache,
        embedding_cache_max_entries=embedding_cache_max_entries,
        reranker=reranker,
    )


def _close_embedder(embedder: Embedder) -> None:
    """Close an embedder's resources (a provider's HTTP pool) if it has any."""
    closer = getattr(embedder, "close", None)
    if callable(closer):
        try:
            closer()
        except Exception as exc:  # closing a pool loses nothing; say so and go on
            logger.warning("closing the embedder failed: %s", exc)


def _read_only_uri(path: str) -> bool:
    """A SQLite URI that asks for read-only access (``mode=ro`` or ``immutable=1``)."""
    if not path.startswith("file:"):
        return False
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
    return "ro" in query.get("mode", []) or "1" in query.get("immutable", [])


class Mindfile(AgentMemoryAPI, ContextAPI, FilesAPI, JobsAPI, ManageAPI, SearchAPI):
    """A memory store. Thread-safe; use as a context manager or call :meth:`close`."""

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        embedder: str | Embedder | None = None,
        vector_index: str = "auto",
        chunk: ChunkSpec = ChunkSpec(),
        neighbor_context: bool = True,
        indexing: Literal["sync", "background"] = "sync",
        lexical_index: Literal["memory", "fts5"] = "memory",
        durability: Literal["normal", "full"] = "normal",
        read_only: bool = False,
        embedding_cache: bool | None = None,
        embedding_cache_max_entries: int | None = None,
        reranker: Reranker | None = None,
    ) -> None:
        tune_heap()  # process-wide, once (mindfile._heap)
        if embedding_cache is not None and not isinstance(embedding_cache, bool):
            raise ConfigError("embedding_cache must be True, False or None")
        if not isinstance(read_only, bool):
            raise ConfigError("read_only must be True or False")
        try:
            self._reranker = check_reranker(reranker)
        except InvalidInputError as exc:
            raise ConfigError(exc.message) from exc
        postgres = is_postgres_url(path)
        if postgres:
            check_postgres_options(vector_index, durability)
        read_only = read_only or (not postgres and _read_only_uri(str(path)))
        if read_only and not postgres and vector_index not in ("exact", "auto"):
            raise ConfigError(
                f"vector_index={vector_index!r} keeps its index in the store file and needs "
                "a writable store; read_only stores use vector_index='exact'"
            )
        if durability not in ("normal", "full"):
            raise ConfigError(f"durability must be 'normal' or 'full', not {durability!r}")
        if indexing not in ("sync", "background"):
            raise ConfigError(f"indexing must be 'sync' or 'background', not {indexing!r}")
        if lexical_index not in ("memory", "fts5"):
            raise ConfigError(f"lexical_index must be 'memory' or 'fts5', not {lexical_index!r}")
        self.indexing = indexing
        self.durability = durability
        self.read_only = read_only
        #: The store's database: SQLite's ``Database``, or a ``PgDatabase`` for a
        #: ``postgresql://`` URL (docs/postgres.md).
        self.db: AnyDatabase
        #: The storage seam: the backend's per-aggregate stores (mindfile.storage.stores).
        self.stores: Stores
        migrate: Callable[[], int]
        if postgres:
            pg, self.stores, migrate = open_postgres(str(path), read_only)
            self.db = pg
            #: Where the store is: its file, or the Postgres URL without its password.
            self.path = pg.path
        else:
            self.path = str(path)
            sqlite = Database(
                self.path,
                readonly=read_only,
                synchronous="FULL" if durability == "full" else "NORMAL",
            )
            self.db, self.stores = sqlite, sqlite_stores(sqlite)
            check = check_migrations if read_only else apply_migrations
            migrate = functools.partial(check, sqlite)
        try:
            self.schema_version = migrate()
            self.embedder = bind_embedder(self.stores.meta, embedder, read_only=read_only)
            # An embedder built here from a spec is ours to close (a provider's HTTP
            # pool); one passed in as an object belongs to the caller.
            self._owns_embedder = not isinstance(embedder, Embedder)
            self._vector_index_kind = vector_index
            self._index_choice = choose_index(self.db)[1] if vector_index == "auto" else None
            self.index: VectorIndex = make_index(vector_index, self.db, self.embedder.dimensions)
            self.lexical = Bm25Index(self.db) if lexical_index == "memory" else None
            self._cache_choice = embedding_cache
            self.embedding_cache = self._make_cache(embedding_cache_max_entries)
            self._model_version = self.db.data_version()
        except BaseException:
            self.db.close()
            raise
        self.chunk_spec = chunk
        self.neighbor_context = neighbor_context
        self._schedules: SchedulerStore | None = None
        self._syncing = 0
        self._last_error: str | None = None
        #: The latest events of active sessions, kept in process (mindfile.context.cache).
        self.working_memory = _ctx.WorkingMemory()
        #: Catches the indexes up once a bulk write pauses (mindfile._follow).
        self._follower = IdleFollower(self._follow_indexes, prepare=self._prepare_reads)
        #: Publishes the indexes from a helper process during a bulk ingest (_publish).
        self._publisher = publisher_for(
            self.db, self.path, self.index, self.lexical, read_only=self.read_only
        )

    # -- lifecycle ----------------------------------------------------------------------

    def _make_cache(self, max_entries: int | None) -> EmbeddingCache:
        local = getattr(self.embedder, "local", False) is True
        choice = self._cache_choice
        enabled = (not local if choice is None else choice) and not self.read_only
        return EmbeddingCache(self.stores.embedding_cache, enabled=enabled, max_entries=max_entries)

    def _switch_embedder(self, embedder: Embedder, *, owned: bool = False) -> None:
        """Switch this engine to ``embedder`` after the store's model was changed to it
        (:meth:`reembed` does this); rebuilds the vector index for its dimensions."""
        if self.stores.meta.get(MODEL_KEY) != embedder.model_id:
            raise ConfigError("the store's model is not this embedder's; use reembed()")
        old = self.index
        if self._owns_embedder:
            _close_embedder(self.embedder)
        self.embedder = embedder
        self._owns_embedder = owned
        self.index = make_index(self._vector_index_kind, self.db, embedder.dimensions)
        self.embedding_cache = self._make_cache(self.embedding_cache.max_entries)
        self._model_version = self.db.data_version()
        old.close()

    def check_model(self) -> None:
        """:class:`ConfigError` when another process re-embedded the store with another
        model since this engine opened it (its embedder would mix two vector spaces).

        Costs one ``PRAGMA data_version`` unless another connection committed (on
        Postgres one query of the WAL position, which every commit moves)."""
        version = self.db.data_version()
        if version == self._model_version:
            return
        stored = self.stores.meta.get(MODEL_KEY)
        if stored is not None and stored != self.embedder.model_id:
            raise ConfigError(
                f"this store was re-embedded with {stored!r} by another process; reopen it "
                f"(this engine still uses {self.embedder.model_id!r})",
                embedding_model=stored,
            )
        self._model_version = version

    def reembed(
        self,
        embedder: str | Embedder,
        *,
        batch_size: int = 256,
        progress: Callable[[int, int], None] | None = None,
    ) -> ReembedReport:
        """Re-embed every chunk with ``embedder`` and make it the store's model.

        Searches keep using the old model until one final transaction switches every
        vector and the model; resumable after a crash (staged vectors are kept in the
        embedding cache), one run at a time (``ConflictError``). ``progress(done,
        total)`` is called after each batch. See docs/embedding-cache.md.
        """
        return _reembed(self, embedder, batch_size=batch_size, progress=progress)

    def close(self) -> None:
        """Release the database connection and the in-memory index."""
        if not self.db.closed:
            self._follower.close(timeout=0.0 if self.db.held_by_me() else 30.0)
            stop_token_sets(self.db, timeout=0.0 if self.db.held_by_me() else 30.0)
            if self._publisher is not None:
                self._publisher.close()
            if not self.read_only:
                self._purge_if_pending()
            self.index.close()
            if self.lexical is not None:
                self.lexical.close()
            self.db.close()
            if self._owns_embedder:
                _close_embedder(self.embedder)

    def _purge_if_pending(self) -> None:
        try:
            if self.stores.privacy.purge_pending():
                self.stores.privacy.purge()
                if self.lexical is not None:
                    self.lexical.purge()
        except MindfileError as exc:  # e.g. another process holds the write lock
            logger.warning("purge on close failed, left for the next close: %s", exc)

    def __enter__(self) -> Mindfile:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the conversation log -----------------------------------------------------------

    def store(
        self,
        session_id: str,
        sequence: int,
        payload: Any,
        *,
        metadata: Mapping[str, Any] | None = None,
        tags: Sequence[str] | None = None,
        agent_identity: str | None = None,
        user_id: str | None = None,
        channel: str | None = None,
        importance: float | None = None,
        ttl: float | timedelta | None = None,
        occurred_at: datetime | date | str | float | None = None,
    ) -> int:
        """Store one event and index it, atomically; returns how many chunks were added.

        ``sequence`` must be above the session's highest, else :class:`ConflictError`
        and nothing is written. ``metadata`` and ``tags`` go into every chunk's metadata.
        ``importance`` (in [0, 1]) defaults to the role's; ``ttl`` (seconds or a
        timedelta) makes the event expire (docs/memory-management.md).
        ``occurred_at``: when it happened (a datetime, a date, ISO-8601 text or epoch
        seconds; naive = UTC; default: now), for time-aware search (docs/retrieval.md);
        anything else is an :class:`InvalidTimeError`.

        ``user_id`` and ``channel`` scope the session (docs/privacy.md): the first write
        that gives them fixes them, a different one later is a :class:`ScopeError`.
        """
        event = prepare_event(
            session_id,
            sequence,
            payload,
            metadata=metadata,
            tags=tags,
            spec=self.chunk_spec,
            importance=importance,
            expires_at=_expires_at(ttl),
            occurred_at=occurred_at,
            classify=True,
        )
        return self._write([event], agent_identity, user_id, channel)

    def store_many(
        self,
        events: Iterable[Event],
        *,
        agent_identity: str | None = None,
        user_id: str | None = None,
        channel: str | None = None,
        importance: float | None = None,
        ttl: float | timedelta | None = None,
        occurred_at: datetime | date | str | float | None = None,
    ) -> int:
        """Store many events in one transaction (all or nothing); returns chunks added.

        ``agent_identity``, ``user_id``, ``channel``, ``importance``, ``ttl`` and
        ``occurred_at`` apply to every event, as in :meth:`store`; an event given as
        ``(session_id, sequence, payload, metadata, occurred_at)`` has its own time.
        """
        expires = _expires_at(ttl)
        if not isinstance(events, Iterable):
            raise InvalidInputError("events must be an iterable of event tuples")
        prepared: list[PreparedEvent] = []
        for item in events:
            if not isinstance(item, tuple | list) or len(item) not in (3, 4, 5):
                raise InvalidInputError(
                    "each event must be (session_id, sequence, payload[, metadata[, occurred_at]])"
                )
            meta = item[3] if len(item) >= 4 else None
            when = item[4] if len(item) == 5 and item[4] is not None else occurred_at
            prepared.append(
                prepare_event(
                    item[0],
                    item[1],
                    item[2],
                    metadata=meta,
                    spec=self.chunk_spec,
                    importance=importance,
                    expires_at=expires,
                    occurred_at=when,
                )
            )
        return self._write(prepared, agent_identity, user_id, channel)

    def _write(
        self,
        events: list[PreparedEvent],
        agent_identity: str | None,
        user_id: str | None,
        channel: str | None,
    ) -> int:
        for value, what in (
            (agent_identity, "agent_identity"),
            (user_id, "user_id"),
            (channel, "channel"),
        ):
            if value is not None:
                check_id(value, what)
        # Prepare (outside the transaction), then commit: docs/architecture.md "Write
        # path". Background indexing embeds nothing here; the commit queues jobs.
        self.check_model()
        vectors = prepare_vectors(
            self.embedder,
            self.db,
            [c.text for e in events for c in e.chunks],
            background=self.indexing == "background",
            cache=self.embedding_cache,
        )
        now = utcnow()
        with self.db.atomic():
            added = self.stores.sessions.write_events(
                events,
                vectors,
                self.embedder.model_id,
                now,
                agent_identity=agent_identity,
                user_id=user_id,
                channel=channel,
                neighbor_context=self.neighbor_context,
            )
            # Quotas: evict or fail inside this transaction (docs/memory-management.md).
            _quota.enforce_quotas(
                self,
                [e.session_id for e in events],
                [(e.session_id, e.sequence) for e in events],
                now,
            )
        self.working_memory.note_write(events, now)
        self._follower.wrote(added)
        if self._publisher is not None:
            self._publisher.wrote(added)
        return added

    def _prepare_reads(self) -> None:
        """Load what the first search would (a bulk ingest started: searches follow)."""
        if self.db.closed:
            return
        load_parser()
        matcher = matcher_for(self.embedder)
        if matcher is not None:
            warm_token_match(self.db, matcher)

    def _follow_indexes(self) -> None:
        """After a bulk write and a pause: catch the vector index up (publishing its
        generation when the delta is large) and start the BM25 index's background build."""
        if self.db.closed:
            return
        self.index.size()
        if self.lexical is not None:
            self.lexical.warm()
        # The chunks written without statement flags (preference recall) and word pieces
        # (token match), unless the bulk ingest's flags helper writes them.
        if not self.read_only and not flags_deferred(self.db):
            backfill_statements(self.db)
            matcher = matcher_for(self.embedder)
            if matcher is not None:
                backfill_token_sets(self.db, matcher)

    def recall(
        self, session_id: str, limit: int | None = None, *, user_id: str | None = None
    ) -> list[MemoryRecord]:
        """The session's events in sequence order (the last ``limit`` when given).

        With ``user_id``, a session of another user is a :class:`ScopeError`.
        """
        check_id(session_id, "session_id")
        self.check_owner(session_id, user_id)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise InvalidInputError("limit must be an integer or None")
        if limit is not None and limit < 0:
            raise InvalidInputError("limit must not be negative")
        return self.stores.events.recent(session_id, limit)

    def forget(self, session_id: str) -> bool:
        """Delete a session and everything derived from it; True if it existed."""
        check_id(session_id, "session_id")
        privacy = self.stores.privacy
        with self.db.atomic():
            existed = privacy.delete_session(session_id)
            if session_id.startswith("facts:"):  # the facts themselves, not only chunks
                existed = privacy.erase_facts_scope(session_id[len("facts:") :]) > 0 or existed
        self.working_memory.invalidate(session_id)
        return existed

    def forget_user(self, user_id: str) -> dict[str, int]:
        """Erase everything of ``user_id`` and purge what deletion leaves on disk.

        Sessions of the user (and ``memory:{user}`` / ``facts:{user}``) with their
        events, chunks, vectors, notes, scratchpads and summaries; facts and their
        history; schedules and their runs; logged LLM failures; the user's quota
        settings. Then FTS5 segments are merged, cached vectors of texts no longer stored
        dropped (``cached_vectors``) and the WAL truncated (docs/privacy.md).
        Returns how many rows of each kind were deleted.
        """
        check_id(user_id, "user_id")
        privacy = self.stores.privacy
        with self.db.atomic():
            sessions = privacy.user_sessions(user_id)
            counts = privacy.erase_user(user_id)
        for session_id in sessions:
            self.working_memory.invalidate(session_id)
        counts["cached_vectors"] = privacy.purge()
        self._purge_derived()
        return counts

    def purge(self) -> None:
        """Remove what deleted rows leave behind: merge FTS5 segments, truncate the WAL.

        Deletes already zero freed space (``secure_delete``); this drops the deleted
        text's terms from the full-text index and old page images from the WAL. Runs
        on :meth:`close` after any delete; its cost grows with the index
        (benchmarks/README.md).
        """
        self.stores.privacy.purge()
        self._purge_derived()

    def _purge_derived(self) -> None:
        """Derived files on disk must not keep deleted text either: the published BM25
        base is republished without it, an on-disk ANN base rebuilt (docs/privacy.md)."""
        if self.lexical is not None:
            self.lexical.purge()
        self.index.purge()

    def embedding_cache_stats(self) -> EmbeddingCacheStats:
        """The embedding cache: entries and bytes by model, this process's hit rate."""
        return self.embedding_cache.stats()

    def prune_embedding_cache(
        self, *, older_than: timedelta | float | None = None, everything: bool = False
    ) -> int:
        """Drop cached vectors of texts no longer stored, those unused for
        ``older_than`` (seconds or a timedelta), or ``everything``; returns how many."""
        return self.embedding_cache.prune(older_than=older_than, everything=everything)

    def list_sessions(
        self, *, user_id: str | None = None, channel: str | None = None
    ) -> list[SessionInfo]:
        """Sessions (only ``user_id``'s / ``channel``'s when given), most recently
        updated first."""
        for value, what in ((user_id, "user_id"), (channel, "channel")):
            if value is not None:
                check_id(value, what)
        return self.stores.sessions.list_sessions(user_id=user_id, channel=channel)

    def check_owner(self, session_id: str, user_id: str | None) -> None:
        """:class:`ScopeError` when ``user_id`` is given and the session is another
        user's (a missing or unscoped session passes; docs/privacy.md)."""
        check_id(session_id, "session_id")
        if user_id is None:
            return
        check_id(user_id, "user_id")
        scope = self.stores.sessions.scope(session_id)
        owner = None if scope is None else scope[0]
        if owner is not None and owner != user_id:
            raise ScopeError(
                f"session {session_id!r} belongs to another user", session_id=session_id
            )

    def restore(
        self,
        session_id: str,
        token_budget: int,
        *,
        token_counter: TokenCounter = estimate_tokens,
    ) -> list[MemoryRecord]:
        """The newest events that fit in ``token_budget`` tokens, oldest first.

        Stops at the first event (going back in time) that does not fit, so the result
        is always a contiguous tail of the conversation.
        """
        if isinstance(token_budget, bool) or not isinstance(token_budget, int):
            raise InvalidInputError("token_budget must be an integer")
        if token_budget < 0:
            raise InvalidInputError("token_budget must not be negative")
        if not callable(token_counter):
            raise InvalidInputError("token_counter must be a callable str -> int")
        kept: list[MemoryRecord] = []
        used = 0
        for record in reversed(self.recall(session_id)):
            cost = message_tokens(record.payload, token_counter)
            if used + cost > token_budget:
                break
            kept.append(record)
            used += cost
        kept.reverse()
        return kept

    def rebuild_index(self) -> None:
        """Rebuild the derived vector index from the vectors in SQLite."""
        self.index.rebuild()
        if self.lexical is not None:
            self.lexical.rebuild()

    @property
    def schedules(self) -> SchedulerStore:
        """The scheduler store of this store (see :mod:`mindfile.scheduler`)."""
        if self._schedules is None:
            self._schedules = scheduler_store(self.db)
        return self._schedules

    def info(self) -> StoreInfo:
        """Schema version, counts, the embedding model and the index."""
        counts = self.stores.integrity.row_counts()
        size = 0
        if not isinstance(self.db, Database):  # Postgres: this store's tables and indexes
            size = self.db.size_bytes()
        elif not self.db.in_memory:
            for suffix in ("", "-wal"):
                p = Path(self.path + suffix)
                size += p.stat().st_size if p.exists() else 0
        return StoreInfo(
            path=self.path,
            schema_version=self.schema_version,
            embedding_model=self.embedder.model_id,
            dimensions=self.embedder.dimensions,
            vector_index=self.index.name,
            sessions=counts["sessions"],
            events=counts["conversation_events"],
            chunks=counts["chunks"],
            vectors=counts["chunks_vec"],
            size_bytes=size,
            extra={
                # "sqlite" (size_bytes: the file and its WAL) or "postgres" (size_bytes:
                # the store's tables with their indexes, in its schema)
                "backend": "sqlite" if isinstance(self.db, Database) else "postgres",
                "durability": self.durability,
                # why vector_index="auto" opened the index it did (None: named explicitly)
                "vector_index_choice": self._index_choice,
                # ready / building / not built / failed: <reason>; "fts5" when off.
                "lexical_index": "fts5" if self.lexical is None else self.lexical.state(),
                # the shared BM25 base on disk: documents, generation, this process's delta
                "lexical": None if self.lexical is None else self.lexical.stats(),
                # the vector index: its shared part on disk (if any) and this process's
                "vector": self.index.stats(),
            },
        )
