"""The session store: sessions, their sequences, and writing into the log.

The log's write path (:mod:`mindfile.storage.log`: upsert the session and fix its user
and channel, check sequences against the high-water mark, insert events and their
chunks) is the one writer every feature shares; this store is how feature code reaches
it without the database. Every method runs inside the caller's transaction when one is
open; the writers must be called inside one (``engine.db.atomic()``), as the engine's
own ``store`` is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from mindfile.index.pipeline import PreparedChunk, PreparedEvent
from mindfile.storage import log
from mindfile.storage.chunks import ChunkRow, find_chunk, insert_chunk
from mindfile.storage.db import Database
from mindfile.types import SessionInfo

__all__ = ["SessionStore", "SqliteSessionStore"]


class SessionStore(Protocol):
    """Sessions and the log's write path (backend-neutral)."""

    def exists(self, session_id: str) -> bool:
        """Whether the session is stored."""
        ...

    def scope(self, session_id: str) -> tuple[str | None, str | None] | None:
        """``(user_id, channel)`` of a stored session, or None."""
        ...

    def upsert(
        self,
        session_id: str,
        now: str,
        *,
        user_id: str | None = None,
        touch: bool = True,
    ) -> None:
        """Create the session, or (``touch``) bump its ``updated_at``; its user is fixed
        by the first write that gives one (:class:`~mindfile.errors.ScopeError` when a
        later one differs)."""
        ...

    def next_sequence(self, session_id: str) -> int:
        """One above the highest sequence ever stored in the session (1 for a new one)."""
        ...

    def list_sessions(
        self, *, user_id: str | None = None, channel: str | None = None
    ) -> list[SessionInfo]:
        """Sessions (only ``user_id``'s / ``channel``'s when given), most recently
        updated first."""
        ...

    def write_events(
        self,
        events: Sequence[PreparedEvent],
        vectors: npt.NDArray[np.float32] | None,
        model_id: str,
        now: str,
        *,
        agent_identity: str | None = None,
        user_id: str | None = None,
        channel: str | None = None,
        neighbor_context: bool = True,
    ) -> int:
        """Store prepared events in order, with their sessions, chunks and vectors (or
        jobs); returns the chunks added. :class:`~mindfile.errors.ConflictError` when a
        sequence is not above its session's high-water mark (the caller's transaction
        rolls back)."""
        ...

    def write_event(
        self,
        event: PreparedEvent,
        vectors: npt.NDArray[np.float32] | None,
        model_id: str,
        now: str,
        *,
        neighbor_context: bool = True,
    ) -> int:
        """Store one prepared event and its chunks (vectors, or jobs when None);
        returns the chunks added."""
        ...

    def add_chunks(
        self,
        session_id: str,
        chunks: Sequence[PreparedChunk],
        vectors: npt.NDArray[np.float32] | None,
        model_id: str,
        sequence: int,
        now: str,
    ) -> int:
        """Chunks with no backing event at ``sequence`` (a chunk whose content hash the
        session holds already is skipped), raising the high-water mark; returns rows
        added. They carry no neighbouring-event context."""
        ...


SESSION_EXISTS = "SELECT 1 FROM sessions WHERE session_id = ?"


class SqliteSessionStore:
    """:class:`SessionStore` over :mod:`mindfile.storage.log` and the chunk writer."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def exists(self, session_id: str) -> bool:
        return self.db.scalar(SESSION_EXISTS, (session_id,)) is not None

    def scope(self, session_id: str) -> tuple[str | None, str | None] | None:
        return log.session_scope(self.db, session_id)

    def upsert(
        self,
        session_id: str,
        now: str,
        *,
        user_id: str | None = None,
        touch: bool = True,
    ) -> None:
        log.upsert_session(self.db, session_id, now, user_id=user_id, touch=touch)

    def next_sequence(self, session_id: str) -> int:
        return log.next_sequence(self.db, session_id)

    def list_sessions(
        self, *, user_id: str | None = None, channel: str | None = None
    ) -> list[SessionInfo]:
        return log.list_sessions(self.db, user_id=user_id, channel=channel)

    def write_events(
        self,
        events: Sequence[PreparedEvent],
        vectors: npt.NDArray[np.float32] | None,
        model_id: str,
        now: str,
        *,
        agent_identity: str | None = None,
        user_id: str | None = None,
        channel: str | None = None,
        neighbor_context: bool = True,
    ) -> int:
        return log.write_events(
            self.db,
            events,
            vectors,
            model_id,
            now,
            agent_identity=agent_identity,
            user_id=user_id,
            channel=channel,
            neighbor_context=neighbor_context,
        )

    def write_event(
        self,
        event: PreparedEvent,
        vectors: npt.NDArray[np.float32] | None,
        model_id: str,
        now: str,
        *,
        neighbor_context: bool = True,
    ) -> int:
        return log.write_event(
            self.db, event, vectors, model_id, now, neighbor_context=neighbor_context
        )

    def add_chunks(
        self,
        session_id: str,
        chunks: Sequence[PreparedChunk],
        vectors: npt.NDArray[np.float32] | None,
        model_id: str,
        sequence: int,
        now: str,
    ) -> int:
        db = self.db
        added = 0
        rows = [None] * len(chunks) if vectors is None else list(vectors)
        for chunk, vector in zip(chunks, rows, strict=True):
            if find_chunk(db, session_id, chunk.content_hash) is not None:
                continue  # the same text twice within one item
            row = ChunkRow(
                session_id,
                chunk.text,
                chunk.content_hash,
                chunk.metadata_json,
                sequence,
                sequence,
                user_statement=chunk.user_statement,
            )
            insert_chunk(db, row, vector, model_id, now)
            added += 1
        log.raise_high_water(db, session_id, sequence, now)
        return added
