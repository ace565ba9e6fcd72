"""The :class:`Engram` facade: the conversation log and hybrid retrieval on one file."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from engram import context as _ctx
from engram import memory as _mem
from engram.embed import Embedder, embedder_for_model_id, resolve_embedder
from engram.embed.base import Vectors, check_vectors
from engram.errors import ConfigError, EmbeddingError, EngramError, InvalidInputError
from engram.index.chunking import ChunkSpec
from engram.index.pipeline import PreparedEvent, check_id, prepare_event
from engram.manage import consolidate as _consolidate
from engram.manage import expiry as _expiry
from engram.manage import marks as _marks
from engram.manage import quota as _quota
from engram.manage import types as _mt
from engram.manage.importance import expires_at as _expires_at
from engram.retrieve.lexical import Bm25Index
from engram.retrieve.search import SearchRequest, SearchResults, run_search
from engram.storage import log
from engram.storage.db import Database, utcnow
from engram.storage.migrations import apply_migrations
from engram.tokens import TokenCounter, estimate_tokens, message_tokens
from engram.types import (
    FusionMode,
    MemoryHybridQueryRequest,
    MemoryRecord,
    SearchMode,
    SessionInfo,
    StoreInfo,
)
from engram.vector import VectorIndex, make_index

if TYPE_CHECKING:
    from engram.jobs import (
        Clock,
        JobInfo,
        JobPolicy,
        JobQueueStatus,
        JobReport,
        ReconcileReport,
    )
    from engram.scheduler import SqliteSchedulerStore

__all__ = ["Engram", "Event", "open"]

#: ``(session_id, sequence, payload)`` or the same plus a metadata mapping.
Event = tuple[str, int, Any] | tuple[str, int, Any, Mapping[str, Any] | None]


def open(  # shadows the builtin on purpose: engram.open(path)
    path: str | Path = ":memory:",
    *,
    embedder: str | Embedder | None = None,
    vector_index: str = "exact",
    chunk_max_chars: int = 640,
    chunk_overlap: int = 96,
    neighbor_context: bool = True,
    indexing: Literal["sync", "background"] = "sync",
    lexical_index: Literal["memory", "fts5"] = "memory",
) -> Engram:
    """Open (creating if needed) a memory store.

    ``path`` is a file path or ``":memory:"``. ``embedder`` is a spec such as
    ``"static"`` (the bundled model, default for new stores) or ``"hash"``, or any
    :class:`~engram.embed.Embedder`; reopening a store without one uses the model the
    store was made with. ``vector_index`` is ``"exact"`` (in-memory, default) or
    ``"sqlite-vec"``. ``neighbor_context`` indexes each chunk with the text of the
    events around it in its session (low-weight FTS columns; see docs/retrieval.md).
    ``indexing="background"`` makes ``store``/``store_many`` queue embedding jobs
    instead of calling the embedder (see docs/background-indexing.md).
    ``lexical_index`` picks where BM25 ranks: ``"memory"`` (default, an in-memory index
    derived from the file, exact FTS5-compatible scores, fast at any size) or ``"fts5"``
    (SQLite's own ``bm25()``; no memory, slow when query words are common).
    """
    return Engram(
        path,
        embedder=embedder,
        vector_index=vector_index,
        chunk=ChunkSpec(chunk_max_chars, chunk_overlap),
        neighbor_context=neighbor_context,
        indexing=indexing,
        lexical_index=lexical_index,
    )


class Engram:
    """A memory store. Thread-safe; use as a context manager or call :meth:`close`."""

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        embedder: str | Embedder | None = None,
        vector_index: str = "exact",
        chunk: ChunkSpec = ChunkSpec(),
        neighbor_context: bool = True,
        indexing: Literal["sync", "background"] = "sync",
        lexical_index: Literal["memory", "fts5"] = "memory",
    ) -> None:
        if indexing not in ("sync", "background"):
            raise ConfigError(f"indexing must be 'sync' or 'background', not {indexing!r}")
        if lexical_index not in ("memory", "fts5"):
            raise ConfigError(f"lexical_index must be 'memory' or 'fts5', not {lexical_index!r}")
        self.indexing = indexing
        self.path = str(path)
        self.db = Database(self.path)
        try:
            self.schema_version = apply_migrations(self.db)
            self.embedder = self._bind_embedder(embedder)
            self.index: VectorIndex = make_index(vector_index, self.db, self.embedder.dimensions)
            self.lexical = Bm25Index(self.db) if lexical_index == "memory" else None
        except BaseException:
            self.db.close()
            raise
        self.chunk_spec = chunk
        self.neighbor_context = neighbor_context
        self._schedules: SqliteSchedulerStore | None = None
        #: The latest events of active sessions, kept in process (engram.context.cache).
        self.working_memory = _ctx.WorkingMemory()

    # -- lifecycle ----------------------------------------------------------------------

    def _bind_embedder(self, spec: str | Embedder | None) -> Embedder:
        """Record the store's model on first open; refuse a different one later."""
        stored: dict[str, str] = dict(self.db.query("SELECT key, value FROM store_meta"))
        model_id, dims = stored.get("embedding_model"), stored.get("embedding_dims")
        if spec is None and model_id is not None:
            found = embedder_for_model_id(model_id)
            if found is None:
                raise ConfigError(
                    f"this store's vectors were made with {model_id!r}; pass that embedder "
                    "to engram.open(..., embedder=...)",
                    embedding_model=model_id,
                )
            embedder = found
        else:
            embedder = resolve_embedder(spec)
        if model_id is None:
            with self.db.atomic():
                self.db.executemany(
                    "INSERT OR IGNORE INTO store_meta (key, value) VALUES (?, ?)",
                    [
                        ("embedding_model", embedder.model_id),
                        ("embedding_dims", str(embedder.dimensions)),
                    ],
                )
            stored = dict(self.db.query("SELECT key, value FROM store_meta"))
            model_id, dims = stored["embedding_model"], stored["embedding_dims"]
        if model_id != embedder.model_id or int(dims or 0) != embedder.dimensions:
            raise ConfigError(
                f"this store's vectors were made with {model_id!r} ({dims} dims), not "
                f"{embedder.model_id!r} ({embedder.dimensions} dims); open it with the same "
                "embedder (re-embedding is not supported yet)",
                embedding_model=model_id,
            )
        return embedder

    def close(self) -> None:
        """Release the database connection and the in-memory index."""
        if not self.db.closed:
            self.index.close()
            if self.lexical is not None:
                self.lexical.close()
            self.db.close()

    def __enter__(self) -> Engram:
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
        importance: float | None = None,
        ttl: float | timedelta | None = None,
    ) -> int:
        """Store one event and index it, atomically; returns how many chunks were added.

        ``sequence`` must be above the session's highest, else :class:`ConflictError`
        and nothing is written. ``metadata`` and ``tags`` go into every chunk's metadata.
        ``importance`` (in [0, 1]) defaults to the role's; ``ttl`` (seconds or a
        timedelta) makes the event expire (docs/memory-management.md).
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
        )
        return self._write([event], agent_identity=agent_identity)

    def store_many(
        self,
        events: Iterable[Event],
        *,
        agent_identity: str | None = None,
        importance: float | None = None,
        ttl: float | timedelta | None = None,
    ) -> int:
        """Store many events in one transaction (all or nothing); returns chunks added.

        ``importance`` and ``ttl`` apply to every event, as in :meth:`store`.
        """
        expires = _expires_at(ttl)
        if not isinstance(events, Iterable):
            raise InvalidInputError("events must be an iterable of event tuples")
        prepared: list[PreparedEvent] = []
        for item in events:
            if not isinstance(item, tuple | list) or len(item) not in (3, 4):
                raise InvalidInputError(
                    "each event must be (session_id, sequence, payload[, metadata])"
                )
            meta = item[3] if len(item) == 4 else None
            prepared.append(
                prepare_event(
                    item[0],
                    item[1],
                    item[2],
                    metadata=meta,
                    spec=self.chunk_spec,
                    importance=importance,
                    expires_at=expires,
                )
            )
        return self._write(prepared, agent_identity=agent_identity)

    def _write(self, events: list[PreparedEvent], *, agent_identity: str | None) -> int:
        if agent_identity is not None:
            check_id(agent_identity, "agent_identity")
        # Background indexing: no embedder call; write_event enqueues jobs instead.
        vectors = None if self.indexing == "background" else self._embed_chunks(events)
        added = 0
        offset = 0
        now = utcnow()
        with self.db.atomic():
            for event in events:
                n = len(event.chunks)
                added += log.write_event(
                    self.db,
                    event,
                    None if vectors is None else vectors[offset : offset + n],
                    self.embedder.model_id,
                    now,
                    agent_identity=agent_identity,
                    neighbor_context=self.neighbor_context,
                )
                offset += n
            # Quotas: evict or fail inside this transaction (docs/memory-management.md).
            _quota.enforce_quotas(
                self.db,
                [e.session_id for e in events],
                [(e.session_id, e.sequence) for e in events],
                now,
            )
        self.index.invalidate()
        self.working_memory.note_write(events, now)
        return added

    def _embed_chunks(self, events: list[PreparedEvent]) -> Vectors:
        texts = [c.text for e in events for c in e.chunks]
        if not texts:
            return np.zeros((0, self.embedder.dimensions), dtype=np.float32)
        try:
            raw = self.embedder.embed_documents(texts)
        except EngramError:
            raise
        except Exception as exc:  # a provider's own failure: nothing has been written
            raise EmbeddingError(f"embedding failed: {exc}") from exc
        return check_vectors(raw, len(texts), self.embedder.dimensions, self.embedder.model_id)

    def recall(self, session_id: str, limit: int | None = None) -> list[MemoryRecord]:
        """The session's events in sequence order (the last ``limit`` when given)."""
        check_id(session_id, "session_id")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise InvalidInputError("limit must be an integer or None")
        if limit is not None and limit < 0:
            raise InvalidInputError("limit must not be negative")
        return log.load_events(self.db, session_id, limit)

    def forget(self, session_id: str) -> bool:
        """Delete a session and everything derived from it; True if it existed."""
        check_id(session_id, "session_id")
        with self.db.atomic():
            existed = log.delete_session(self.db, session_id)
        self.index.invalidate()
        self.working_memory.invalidate(session_id)
        return existed

    def list_sessions(self) -> list[SessionInfo]:
        """All sessions, most recently updated first."""
        return log.list_sessions(self.db)

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

    # -- retrieval ----------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        session_id: str | Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        top_k: int = 10,
        mode: SearchMode = "hybrid",
        fusion: FusionMode = "weighted",
        vector_weight: float = 0.7,
        fts_weight: float = 0.3,
        min_score: float | None = None,
        query_embedding: Sequence[float] | None = None,
    ) -> SearchResults:
        """Search chunks by vector similarity, BM25, or both fused.

        ``session_id``: one id, a list, or None for the whole store. ``tags``: every tag
        must be on the chunk (filtered in SQL). Weighted fusion min-max normalises each
        list and combines them with the weights; ``fusion="rrf"`` uses reciprocal rank
        fusion (k=60) with the same weights. Ties go to the most recent chunk.
        """
        req = SearchRequest.build(
            query,
            session_id=session_id,
            tags=tags,
            top_k=top_k,
            mode=mode,
            fusion=fusion,
            vector_weight=vector_weight,
            fts_weight=fts_weight,
            min_score=min_score,
            query_embedding=query_embedding,
            dims=self.embedder.dimensions,
        )
        return run_search(self.db, self.index, self.embedder, req, self.lexical)

    def hybrid_query(self, request: MemoryHybridQueryRequest) -> SearchResults:
        """The seed's entry point: weighted hybrid search from a request object."""
        if not isinstance(request, MemoryHybridQueryRequest):
            raise InvalidInputError("request must be a MemoryHybridQueryRequest")
        return self.search(
            request.query,
            session_id=request.session_id,
            tags=request.tags,
            top_k=request.top_k,
            vector_weight=request.vector_weight,
            fts_weight=request.fts_weight,
            query_embedding=request.query_embedding,
        )

    def rebuild_index(self) -> None:
        """Rebuild the derived vector index from the vectors in SQLite."""
        self.index.rebuild()
        if self.lexical is not None:
            self.lexical.rebuild()

    @property
    def schedules(self) -> SqliteSchedulerStore:
        """The scheduler store on this file (see :mod:`engram.scheduler`)."""
        if self._schedules is None:
            from engram.scheduler import SqliteSchedulerStore

            self._schedules = SqliteSchedulerStore(self.db)
        return self._schedules

    def info(self) -> StoreInfo:
        """Schema version, counts, the embedding model and the index."""
        counts = log.count_rows(self.db)
        size = 0
        if not self.db.in_memory:
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
        )

    # -- agent memory (notes, scratchpad, summaries, facts) ------------------------------
    # Thin delegations to engram.memory; see docs/agent-memory.md for the semantics.

    def store_note(
        self,
        session_id: str,
        note_id: str,
        content: str,
        *,
        source: str | None = None,
        tags: Sequence[str] | None = None,
        importance: float | None = None,
        ttl: float | timedelta | None = None,
    ) -> _mem.Note:
        """Store a note; an existing ``note_id`` is replaced atomically.

        ``session_id`` is the namespace, ``memory:{user_id}`` by convention (see
        :func:`engram.memory.notes_session`). Timestamps are set by Engram; a replaced
        note keeps its ``created_at``, pin, importance and expiry unless ``importance``
        or ``ttl`` are given (docs/memory-management.md).
        """
        return _mem.store_note(
            self,
            session_id,
            note_id,
            content,
            source=source,
            tags=tags,
            importance=importance,
            ttl=ttl,
        )

    def update_note(
        self,
        session_id: str,
        note_id: str,
        *,
        content: str | None = None,
        source: str | None = None,
        tags: Sequence[str] | None = None,
    ) -> _mem.Note:
        """Change an existing note (``None`` keeps a field); :class:`NotFoundError` if absent."""
        return _mem.update_note(
            self, session_id, note_id, content=content, source=source, tags=tags
        )

    def delete_note(self, session_id: str, note_id: str) -> bool:
        """Delete a note with all its chunks, vectors and FTS rows; True if it existed."""
        return _mem.delete_note(self, session_id, note_id)

    def get_note(self, session_id: str, note_id: str) -> _mem.Note | None:
        """One note, or None."""
        return _mem.get_note(self, session_id, note_id)

    def list_notes(
        self,
        session_id: str,
        *,
        tags: Sequence[str] | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[_mem.Note]:
        """Notes, most recently written first, optionally only those with all ``tags``."""
        return _mem.list_notes(self, session_id, tags=tags, limit=limit, offset=offset)

    def search_notes(
        self,
        session_id: str,
        query: str,
        *,
        tags: Sequence[str] | None = None,
        top_k: int = 10,
        facts_scope: str | None = None,
    ) -> list[_mem.MemoryHit]:
        """Hybrid search over notes (and ``facts_scope``'s facts): one hit per item."""
        return _mem.search_notes(
            self, session_id, query, tags=tags, top_k=top_k, facts_scope=facts_scope
        )

    def read_scratchpad(self, session_id: str) -> _mem.ScratchpadState | None:
        """The session's working-memory scratchpad, or None."""
        return _mem.read_scratchpad(self, session_id)

    def write_scratchpad(self, session_id: str, items: Sequence[str]) -> _mem.ScratchpadState:
        """Replace the scratchpad (at most 32 items of at most 240 characters)."""
        return _mem.write_scratchpad(self, session_id, items)

    def clear_scratchpad(self, session_id: str) -> bool:
        """Remove the scratchpad; True if there was one."""
        return _mem.clear_scratchpad(self, session_id)

    def read_summary_state(self, session_id: str) -> _mem.SummaryState | None:
        """The session's rolling summary state, or None."""
        return _mem.read_summary_state(self, session_id)

    def write_summary_state(
        self, session_id: str, state: _mem.SummaryState, expected_epoch: int
    ) -> _mem.SummaryWriteOutcome:
        """Compare-and-swap the summary state on its epoch (see :mod:`engram.memory.summary`)."""
        return _mem.write_summary_state(self, session_id, state, expected_epoch)

    def summarize(
        self,
        session_id: str,
        token_budget: int,
        *,
        config: _mem.SummaryConfig | None = None,
        condenser: _mem.Condenser | None = None,
        token_counter: TokenCounter = estimate_tokens,
    ) -> _mem.SummaryContext:
        """Fold old messages into the rolling summary when over budget; return the context."""
        return _mem.summarize(
            self,
            session_id,
            token_budget,
            config=config,
            condenser=condenser,
            token_counter=token_counter,
        )

    def set_fact(
        self,
        scope: str,
        category: str,
        key: str,
        value: str,
        *,
        source: _mem.FactSource = "agent",
    ) -> _mem.Fact:
        """Set a fact in ``scope`` (a user or agent id); the old value goes to history."""
        return _mem.set_fact(self, scope, category, key, value, source=source)

    def get_fact(self, scope: str, category: str, key: str) -> _mem.Fact | None:
        """The current fact, or None."""
        return _mem.get_fact(self, scope, category, key)

    def list_facts(self, scope: str, *, category: str | None = None) -> list[_mem.Fact]:
        """The scope's facts, by category then key."""
        return _mem.list_facts(self, scope, category=category)

    def delete_fact(
        self, scope: str, category: str, key: str, *, keep_history: bool = True
    ) -> bool:
        """Delete a fact (its value kept in history unless ``keep_history=False``)."""
        return _mem.delete_fact(self, scope, category, key, keep_history=keep_history)

    def fact_history(self, scope: str, category: str, key: str) -> list[_mem.FactVersion]:
        """Earlier values of a fact, most recently superseded first."""
        return _mem.fact_history(self, scope, category, key)

    # -- context building ---------------------------------------------------------------
    # Thin delegations to engram.context; see docs/context.md for the rules.

    def build_context(
        self,
        session_id: str,
        query: str,
        *,
        token_budget: int,
        user_id: str | None = None,
        agent_identity: str | None = None,
        channel: str | None = None,
        system_prompt: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        reserve_system: int = 0,
        reserve_tools: int = 0,
        config: _ctx.ContextConfig | None = None,
        token_counter: TokenCounter = estimate_tokens,
        query_embedding: Sequence[float] | None = None,
        now: datetime | None = None,
    ) -> _ctx.Context:
        """The prompt context for the next turn: summary, memories, latest turns, in budget.

        Recency (the last turns), salience (importance >= 0.85 or pinned) and relevance
        (cosine >= 0.655) from the session, the agent's other sessions and ``user_id``'s
        notes and facts; memories reranked by ``0.70*similarity + 0.20*recency +
        0.10*importance``. ``tokens`` never exceeds ``token_budget``; every item says why
        it is there. Reads only.
        """
        return _ctx.build_context(
            self,
            session_id,
            query,
            token_budget=token_budget,
            user_id=user_id,
            agent_identity=agent_identity,
            channel=channel,
            system_prompt=system_prompt,
            tools=tools,
            reserve_system=reserve_system,
            reserve_tools=reserve_tools,
            config=config,
            token_counter=token_counter,
            query_embedding=query_embedding,
            now=now,
        )

    def cache_stats(self) -> _ctx.CacheStats:
        """Counters of the working-memory cache (hits, refreshes, loads...)."""
        return self.working_memory.stats()

    # -- background indexing (jobs, worker, reconciler) --
    # Thin delegations to engram.jobs; see docs/background-indexing.md. For a worker in
    # threads use ``engram.jobs.IndexWorker(engine)``.

    def run_jobs(
        self,
        *,
        max_jobs: int | None = None,
        batch_size: int = 64,
        policy: JobPolicy | None = None,
        clock: Clock | None = None,
    ) -> JobReport:
        """Embed and index the chunks whose jobs are due now (one synchronous pass)."""
        from engram.jobs import run_jobs

        return run_jobs(self, max_jobs=max_jobs, batch_size=batch_size, policy=policy, clock=clock)

    def job_status(self, *, clock: Clock | None = None) -> JobQueueStatus:
        """Job counts by status, how many are due, the oldest waiting job."""
        from engram.jobs import queue_status

        return queue_status(self.db) if clock is None else queue_status(self.db, clock)

    def list_jobs(self, *, status: str | None = None, limit: int = 50) -> list[JobInfo]:
        """Jobs in id order (``status``: pending, running, done or failed)."""
        from engram.jobs import list_jobs

        return list_jobs(self.db, status, limit)

    def retry_failed_jobs(self) -> int:
        """Re-queue every dead-lettered job with its retries reset; returns how many."""
        from engram.jobs import queue

        return queue.retry_failed(self.db, queue.utc_clock())

    def prune_jobs(self, *, older_than_seconds: float = 86_400.0) -> int:
        """Delete ``done`` jobs finished more than ``older_than_seconds`` ago."""
        from datetime import timedelta

        from engram.jobs import queue

        if isinstance(older_than_seconds, bool) or not isinstance(older_than_seconds, int | float):
            raise InvalidInputError("older_than_seconds must be a number")
        before = queue.utc_clock() - timedelta(seconds=max(0.0, float(older_than_seconds)))
        return queue.prune_done(self.db, before)

    def reconcile(self, *, repair: bool = True) -> ReconcileReport:
        """Find chunk/vector/index mismatches and, with ``repair``, fix them."""
        from engram.jobs import reconcile

        return reconcile(self, repair=repair)

    # -- memory management (importance, expiry, quotas, consolidation) -----------------
    # Thin delegations to engram.manage; see docs/memory-management.md for the rules.

    def mark_important(self, session_id: str, sequence: int, importance: float = 0.9) -> int:
        """Set the importance of an event's chunks; returns how many chunks changed."""
        return _marks.set_event_chunks(self.db, session_id, sequence, importance=importance)

    def pin(self, session_id: str, sequence: int) -> int:
        """Pin an event: never evicted or expired, importance 1.0 for salience."""
        return _marks.set_event_chunks(self.db, session_id, sequence, pinned=True)

    def unpin(self, session_id: str, sequence: int) -> int:
        """Undo :meth:`pin` (the event's TTL and importance apply again)."""
        return _marks.set_event_chunks(self.db, session_id, sequence, pinned=False)

    def mark_note_important(self, session_id: str, note_id: str, importance: float = 0.9) -> int:
        """:meth:`mark_important` for a note, by its id."""
        sequence = _marks.note_sequence(self.db, session_id, note_id)
        return self.mark_important(session_id, sequence, importance)

    def pin_note(self, session_id: str, note_id: str) -> int:
        """:meth:`pin` for a note, by its id (kept when the note is replaced)."""
        return self.pin(session_id, _marks.note_sequence(self.db, session_id, note_id))

    def unpin_note(self, session_id: str, note_id: str) -> int:
        """:meth:`unpin` for a note, by its id."""
        return self.unpin(session_id, _marks.note_sequence(self.db, session_id, note_id))

    def record_use(self, chunk_ids: Iterable[str]) -> int:
        """Boost chunks retrieved *and used* (search never writes); returns how many exist."""
        return _marks.record_use(self.db, chunk_ids, utcnow())

    def set_decay_policy(
        self, *, half_life: float | timedelta | None, floor: float = 0.0
    ) -> _mt.DecayPolicy:
        """Importance halves every ``half_life`` unused; the sweep drops items below ``floor``."""
        return _expiry.set_decay_policy(self.db, half_life, floor)

    def get_decay_policy(self) -> _mt.DecayPolicy:
        """The store's decay policy (no decay by default)."""
        return _expiry.get_decay_policy(self.db)

    def sweep_expired(self, now: datetime | str | None = None) -> _mt.SweepResult:
        """Delete expired and decayed-below-floor chunks, and events left without any."""
        result = _expiry.sweep_expired(self.db, now)
        self.index.invalidate()
        return result

    def set_quota(
        self,
        scope: str,
        *,
        max_items: int | None = None,
        max_bytes: int | None = None,
        policy: _mt.QuotaPolicy = "evict",
    ) -> _mt.Quota:
        """Limit a scope (``agent:{id}``, ``user:{id}``, ``session:{id}``); see the docs."""
        return _quota.set_quota(
            self.db, scope, max_items=max_items, max_bytes=max_bytes, policy=policy
        )

    def get_quota(self, scope: str) -> _mt.Quota | None:
        """A scope's quota, or None."""
        return _quota.get_quota(self.db, scope)

    def list_quotas(self) -> list[_mt.Quota]:
        """Every quota, by scope."""
        return _quota.list_quotas(self.db)

    def remove_quota(self, scope: str) -> bool:
        """Remove a scope's quota; True if it had one."""
        return _quota.remove_quota(self.db, scope)

    def quota_usage(self, scope: str) -> _mt.QuotaUsage:
        """A scope's items and bytes as counted against its quota."""
        return _quota.quota_usage(self.db, scope)

    def quota_scope(self, session_id: str) -> str:
        """The scope a session's items count against."""
        return _quota.session_scope(self.db, session_id)

    def consolidate(
        self,
        *,
        session_id: str | None = None,
        scope: str | None = None,
        similarity: float | None = _consolidate.DEFAULT_SIMILARITY,
        older_than: float | timedelta | None = _consolidate.DEFAULT_OLDER_THAN,
        min_span: int = 2,
        max_span: int = 20,
        condenser: _mem.Condenser | None = None,
        drop_originals: bool = False,
        now: datetime | str | None = None,
    ) -> _mt.ConsolidationReport:
        """Merge near-duplicate chunks and condense old spans into summaries; idempotent."""
        return _consolidate.consolidate(
            self,
            session_id=session_id,
            scope=scope,
            similarity=similarity,
            older_than=older_than,
            min_span=min_span,
            max_span=max_span,
            condenser=condenser,
            drop_originals=drop_originals,
            now=now,
        )

    def provenance(self, chunk_id: str) -> list[_mt.ConsolidationRecord]:
        """What consolidation folded into a chunk (merges, summaries), oldest first."""
        return _consolidate.provenance(self.db, chunk_id)
