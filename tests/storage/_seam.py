"""One harness per backend for the storage seam's conformance tests.

A test gets a :class:`Seam`: the backend's :class:`~mindfile.storage.stores.Stores`,
its ``atomic()``, and a few ways to create the rows a store reads (sessions, events,
chunks with vectors, notes). On SQLite they go through the public API of a real engine;
on Postgres, where the engine does not run yet (docs/postgres.md, "Status"), through the
Postgres session store (the log's write path) from events the pipeline prepares, so
every store is held to one contract.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

import mindfile
from mindfile.embed import HashEmbedder
from mindfile.index.pipeline import PreparedEvent, prepare_event
from mindfile.memory._write import scoped_chunks
from mindfile.storage import changes
from mindfile.storage.db import Database, utcnow
from mindfile.storage.files import SqliteFilesStore
from mindfile.storage.meta import MODEL_KEY
from mindfile.storage.postgres import PgDatabase
from mindfile.storage.postgres.files import PgFilesStore
from mindfile.storage.postgres.read_stores import PgRecallStore, PgSearchStore
from mindfile.storage.postgres.sessions import prune_changes
from mindfile.storage.postgres.stores import pg_stores
from mindfile.storage.recall import SqliteRecallStore
from mindfile.storage.search import SqliteSearchStore
from mindfile.storage.stores import Stores


def _now() -> str:
    """The write time, as the engine takes it: the current time."""
    return utcnow()


class SqliteSeam:
    """The SQLite backend, behind a real engine (hash embedder)."""

    name = "sqlite"

    def __init__(self, engine: mindfile.Mindfile) -> None:
        self.engine = engine
        self.stores: Stores = engine.stores
        self.embedder = engine.embedder
        self.model_id = engine.embedder.model_id
        self.dimensions = engine.embedder.dimensions

    @property
    def db(self) -> Database:
        """The backend's database (what ``index_source(db)`` and ``full_text(db)`` take)."""
        return self.engine.db

    def atomic(self) -> AbstractContextManager[Any]:
        return self.engine.db.atomic()

    def forget(self, session_id: str) -> None:
        """Delete a session with its chunks and vectors (``Mindfile.forget``)."""
        self.engine.forget(session_id)

    def prune_changes(self, keep: int) -> None:
        """Prune both change logs to their newest ``keep`` rows, as the write path does."""
        with self.engine.db.atomic():
            changes.prune(self.engine.db, keep=keep)

    def bind_model(self) -> None:
        """Bind the store to the embedder's model (the engine did on open)."""

    def add_event(self, session_id: str, sequence: int, text: str) -> None:
        self.engine.store(session_id, sequence, {"role": "user", "content": text})

    def store(
        self,
        session_id: str,
        sequence: int,
        payload: Any,
        *,
        user_id: str | None = None,
        importance: float | None = None,
        ttl: float | None = None,
        tags: Sequence[str] | None = None,
    ) -> None:
        """Like ``Mindfile.store``: one event with this payload."""
        self.engine.store(
            session_id,
            sequence,
            payload,
            user_id=user_id,
            importance=importance,
            ttl=ttl,
            tags=None if tags is None else list(tags),
        )

    def pin(self, session_id: str, sequence: int) -> None:
        self.engine.pin(session_id, sequence)

    #: The placeholder of the backend's SQL (read filters are conditions in its dialect).
    mark = "?"

    def read_stores(self) -> tuple[Any, Any]:
        """The read path's search and recall stores (not in the ``Stores`` bundle)."""
        return SqliteSearchStore(self.engine.db), SqliteRecallStore(self.engine.db)

    def files_store(self) -> Any:
        """File sync's store (not in the ``Stores`` bundle)."""
        return SqliteFilesStore(self.engine.db)

    def add_note(self, namespace: str, note_id: str, text: str, tags: Sequence[str]) -> int:
        return self.engine.store_note(namespace, note_id, text, tags=list(tags)).sequence

    def add_fact(self, scope: str, category: str, key: str, value: str) -> str:
        self.engine.set_fact(scope, category, key, value)
        return mindfile.memory.facts_session(scope)

    def chunk_texts(self, session_id: str) -> list[str]:
        sql = "SELECT chunk_text FROM chunks WHERE session_id = ? ORDER BY id"
        return [str(r[0]) for r in self.engine.db.query(sql, (session_id,))]

    def chunk_ids(self, session_id: str) -> list[str]:
        sql = "SELECT chunk_id FROM chunks WHERE session_id = ? ORDER BY id"
        return [str(r[0]) for r in self.engine.db.query(sql, (session_id,))]

    def rowids(self) -> list[int]:
        """Every chunk's row id, oldest first."""
        return [int(r[0]) for r in self.engine.db.query("SELECT id FROM chunks ORDER BY id")]


class PgSeam:
    """The Postgres backend on a migrated schema. Rows are written by the Postgres
    session store (the log's write path) from events prepared by the pipeline, with the
    same hash embedder as the SQLite engine."""

    name = "postgres"

    def __init__(self, db: PgDatabase) -> None:
        self.db = db
        self.stores: Stores = pg_stores(db)
        self.embedder = HashEmbedder()
        self.model_id = self.embedder.model_id
        self.dimensions = self.embedder.dimensions

    def atomic(self) -> AbstractContextManager[Any]:
        return self.db.atomic()

    def forget(self, session_id: str) -> None:
        """Delete a session with its chunks and vectors (what ``Mindfile.forget`` runs)."""
        with self.db.atomic():
            self.stores.privacy.delete_session(session_id)

    def prune_changes(self, keep: int) -> None:
        """Prune both change logs to their newest ``keep`` rows, as the write path does
        (Postgres keeps the newest row even for 0: the logs' high-water mark)."""
        prune_changes(self.db, keep=keep)

    def bind_model(self) -> None:
        """Bind the store to the embedder's model, as the engine does on open."""
        self.stores.meta.set_default({MODEL_KEY: self.model_id})

    def _write(self, event: PreparedEvent, *, neighbor_context: bool = True) -> None:
        texts = [c.text for c in event.chunks]
        vectors = self.embedder.embed_documents(texts) if texts else None
        self.stores.sessions.write_event(
            event, vectors, self.model_id, _now(), neighbor_context=neighbor_context
        )

    def add_event(self, session_id: str, sequence: int, text: str) -> None:
        self.store(session_id, sequence, {"role": "user", "content": text})

    def store(
        self,
        session_id: str,
        sequence: int,
        payload: Any,
        *,
        user_id: str | None = None,
        importance: float | None = None,
        ttl: float | None = None,
        tags: Sequence[str] | None = None,
    ) -> None:
        """Like ``Mindfile.store``: one event with this payload (expiring ``ttl``
        seconds from now, as the engine computes it)."""
        expires = None
        if ttl is not None:
            expires = (datetime.now(UTC) + timedelta(seconds=ttl)).isoformat(
                timespec="microseconds"
            )
        event = prepare_event(
            session_id, sequence, payload, tags=tags, importance=importance, expires_at=expires
        )
        texts = [c.text for c in event.chunks]
        vectors = self.embedder.embed_documents(texts) if texts else None
        with self.db.atomic():
            self.stores.sessions.write_events(
                [event], vectors, self.model_id, _now(), user_id=user_id
            )

    def pin(self, session_id: str, sequence: int) -> None:
        self.stores.marks.set_pinned(session_id, sequence, True)

    mark = "%s"

    def read_stores(self) -> tuple[Any, Any]:
        """The read path's search and recall stores (not in the ``Stores`` bundle)."""
        return PgSearchStore(self.db), PgRecallStore(self.db)

    def files_store(self) -> Any:
        """File sync's store (not in the ``Stores`` bundle)."""
        return PgFilesStore(self.db)

    def add_note(self, namespace: str, note_id: str, text: str, tags: Sequence[str]) -> int:
        with self.db.atomic():
            sequence = self.stores.sessions.next_sequence(namespace)
            fields = {"kind": "note", "note_id": note_id, "tags": list(tags)}
            payload = json.dumps({**fields, "content": text})
            chunks = scoped_chunks([text], f"note\x00{note_id}", json.dumps(fields))
            self._write(PreparedEvent(namespace, sequence, payload, chunks), neighbor_context=False)
            self.stores.notes.link(namespace, note_id, sequence)
        return sequence

    def add_fact(self, scope: str, category: str, key: str, value: str) -> str:
        session = f"facts:{scope}"
        sessions = self.stores.sessions
        with self.db.atomic():
            self.stores.facts.insert(scope, category, key, value, "agent", _now())
            sessions.upsert(session, _now())
            meta = json.dumps({"kind": "fact", "category": category, "key": key})
            text = f"{category} / {key}: {value}"
            chunks = scoped_chunks([text], f"fact\x00{category}\x00{key}", meta)
            vectors = self.embedder.embed_documents([text])
            sequence = sessions.next_sequence(session)
            sessions.add_chunks(session, chunks, vectors, self.model_id, sequence, _now())
        return session

    def chunk_texts(self, session_id: str) -> list[str]:
        sql = "SELECT chunk_text FROM chunks WHERE session_id = %s ORDER BY id"
        return [str(r[0]) for r in self.db.query(sql, (session_id,))]

    def chunk_ids(self, session_id: str) -> list[str]:
        sql = "SELECT chunk_id FROM chunks WHERE session_id = %s ORDER BY id"
        return [str(r[0]) for r in self.db.query(sql, (session_id,))]

    def rowids(self) -> list[int]:
        """Every chunk's row id, oldest first."""
        return [int(r[0]) for r in self.db.query("SELECT id FROM chunks ORDER BY id")]


Seam = SqliteSeam | PgSeam
