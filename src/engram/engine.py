"""The :class:`Engram` facade: the conversation log and hybrid retrieval on one file."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np

from engram import memory as _mem
from engram.embed import Embedder, embedder_for_model_id, resolve_embedder
from engram.embed.base import Vectors, check_vectors
from engram.errors import ConfigError, EmbeddingError, EngramError, InvalidInputError
from engram.index.chunking import ChunkSpec
from engram.index.pipeline import PreparedEvent, check_id, prepare_event
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
) -> Engram:
    """Open (creating if needed) a memory store.

    ``path`` is a file path or ``":memory:"``. ``embedder`` is a spec such as
    ``"static"`` (the bundled model, default for new stores) or ``"hash"``, or any
    :class:`~engram.embed.Embedder`; reopening a store without one uses the model the
    store was made with. ``vector_index`` is ``"exact"`` (in-memory, default) or
    ``"sqlite-vec"``. ``neighbor_context`` indexes each chunk with the text of the
    events around it in its session (low-weight FTS columns; see docs/retrieval.md).
    """
    return Engram(
        path,
        embedder=embedder,
        vector_index=vector_index,
        chunk=ChunkSpec(chunk_max_chars, chunk_overlap),
        neighbor_context=neighbor_context,
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
    ) -> None:
        self.path = str(path)
        self.db = Database(self.path)
        try:
            self.schema_version = apply_migrations(self.db)
            self.embedder = self._bind_embedder(embedder)
            self.index: VectorIndex = make_index(vector_index, self.db, self.embedder.dimensions)
        except BaseException:
            self.db.close()
            raise
        self.chunk_spec = chunk
        self.neighbor_context = neighbor_context
        self._schedules: SqliteSchedulerStore | None = None

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
    ) -> int:
        """Store one event and index it, atomically; returns how many chunks were added.

        ``sequence`` must be above the session's highest, else :class:`ConflictError`
        and nothing is written. ``metadata`` and ``tags`` go into every chunk's metadata.
        """
        event = prepare_event(
            session_id, sequence, payload, metadata=metadata, tags=tags, spec=self.chunk_spec
        )
        return self._write([event], agent_identity=agent_identity)

    def store_many(self, events: Iterable[Event], *, agent_identity: str | None = None) -> int:
        """Store many events in one transaction (all or nothing); returns chunks added."""
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
                prepare_event(item[0], item[1], item[2], metadata=meta, spec=self.chunk_spec)
            )
        return self._write(prepared, agent_identity=agent_identity)

    def _write(self, events: list[PreparedEvent], *, agent_identity: str | None) -> int:
        if agent_identity is not None:
            check_id(agent_identity, "agent_identity")
        vectors = self._embed_chunks(events)
        added = 0
        offset = 0
        now = utcnow()
        with self.db.atomic():
            for event in events:
                n = len(event.chunks)
                added += log.write_event(
                    self.db,
                    event,
                    vectors[offset : offset + n],
                    self.embedder.model_id,
                    now,
                    agent_identity=agent_identity,
                    neighbor_context=self.neighbor_context,
                )
                offset += n
        self.index.invalidate()
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
        return run_search(self.db, self.index, self.embedder, req)

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
    ) -> _mem.Note:
        """Store a note; an existing ``note_id`` is replaced atomically.

        ``session_id`` is the namespace, ``memory:{user_id}`` by convention (see
        :func:`engram.memory.notes_session`). Timestamps are set by Engram; a replaced
        note keeps its ``created_at``.
        """
        return _mem.store_note(self, session_id, note_id, content, source=source, tags=tags)

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
