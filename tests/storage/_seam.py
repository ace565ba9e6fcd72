"""One harness per backend for the storage seam's conformance tests.

A test gets a :class:`Seam`: the backend's :class:`~mindfile.storage.stores.Stores`,
its ``atomic()``, and a few ways to create the rows a store reads (sessions, events,
chunks with vectors, notes). On SQLite they go through the public API of a real engine;
on Postgres, where the engine does not run yet (docs/postgres.md, "Status"), through the
SQL the Postgres write path will run, so every store is held to one contract.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import mindfile
from mindfile.storage.postgres import PgDatabase
from mindfile.storage.postgres.stores import pg_stores
from mindfile.storage.stores import Stores

NOW = "2026-01-01T00:00:00.000000+00:00"


class SqliteSeam:
    """The SQLite backend, behind a real engine (hash embedder)."""

    name = "sqlite"

    def __init__(self, engine: mindfile.Mindfile) -> None:
        self.engine = engine
        self.stores: Stores = engine.stores
        self.model_id = engine.embedder.model_id
        self.dimensions = engine.embedder.dimensions

    def atomic(self) -> AbstractContextManager[Any]:
        return self.engine.db.atomic()

    def add_event(self, session_id: str, sequence: int, text: str) -> None:
        self.engine.store(session_id, sequence, {"role": "user", "content": text})

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


class PgSeam:
    """The Postgres backend on a migrated database; rows written with plain SQL."""

    name = "postgres"
    model_id = "test/unit-vectors"
    dimensions = 8

    def __init__(self, db: PgDatabase) -> None:
        self.db = db
        self.stores: Stores = pg_stores(db)

    def atomic(self) -> AbstractContextManager[Any]:
        return self.db.atomic()

    def _session(self, session_id: str) -> None:
        self.db.execute(
            "INSERT INTO sessions (session_id, created_at, updated_at) VALUES (%s, %s, %s) "
            "ON CONFLICT (session_id) DO NOTHING",
            (session_id, NOW, NOW),
        )

    def _event(self, session_id: str, sequence: int, payload: dict[str, Any]) -> None:
        self._session(session_id)
        self.db.execute(
            "INSERT INTO conversation_events (session_id, sequence, payload_json, created_at) "
            "VALUES (%s, %s, %s, %s)",
            (session_id, sequence, json.dumps(payload), NOW),
        )

    def _chunk(self, session_id: str, sequence: int, text: str, meta: dict[str, Any]) -> None:
        rowid = self.db.scalar(
            "INSERT INTO chunks (chunk_id, session_id, chunk_text, content_hash, sequence_start, "
            "sequence_end, metadata_json, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
            "RETURNING id",
            (
                f"ch_{uuid.uuid4().hex}", session_id, text,
                hashlib.sha256(text.encode()).hexdigest(), sequence, sequence,
                json.dumps(meta), NOW,
            ),
        )  # fmt: skip
        self.db.execute(
            "INSERT INTO chunks_vec (chunk_rowid, embedding, embedding_model) "
            "VALUES (%s, %s::vector, %s)",
            (rowid, _unit_vector(text, self.dimensions), self.model_id),
        )

    def add_event(self, session_id: str, sequence: int, text: str) -> None:
        with self.db.atomic():
            self._event(session_id, sequence, {"role": "user", "content": text})
            if text:
                self._chunk(session_id, sequence, text, {"role": "user"})

    def add_note(self, namespace: str, note_id: str, text: str, tags: Sequence[str]) -> int:
        with self.db.atomic():
            self._session(namespace)
            sequence = int(
                self.db.scalar(
                    "SELECT coalesce(max(sequence), -1) + 1 FROM conversation_events "
                    "WHERE session_id = %s",
                    (namespace,),
                )
            )
            payload = {"kind": "note", "note_id": note_id, "content": text, "tags": list(tags)}
            self._event(namespace, sequence, payload)
            self._chunk(namespace, sequence, text, {"kind": "note", "note_id": note_id})
            self.stores.notes.link(namespace, note_id, sequence)
        return sequence

    def add_fact(self, scope: str, category: str, key: str, value: str) -> str:
        session = f"facts:{scope}"
        with self.db.atomic():
            self._session(session)
            self.stores.facts.insert(scope, category, key, value, "agent", NOW)
            meta = {"kind": "fact", "category": category, "key": key}
            self._chunk(session, 0, f"{category} / {key}: {value}", meta)
        return session

    def chunk_texts(self, session_id: str) -> list[str]:
        sql = "SELECT chunk_text FROM chunks WHERE session_id = %s ORDER BY id"
        return [str(r[0]) for r in self.db.query(sql, (session_id,))]

    def chunk_ids(self, session_id: str) -> list[str]:
        sql = "SELECT chunk_id FROM chunks WHERE session_id = %s ORDER BY id"
        return [str(r[0]) for r in self.db.query(sql, (session_id,))]


Seam = SqliteSeam | PgSeam


def _unit_vector(text: str, dimensions: int) -> str:
    """A deterministic unit vector for ``text``, in pgvector's text form."""
    digest = hashlib.sha256(text.encode()).digest()
    values = [digest[i] + 1.0 for i in range(dimensions)]
    norm = sum(v * v for v in values) ** 0.5
    return "[" + ",".join(f"{v / norm:.6f}" for v in values) + "]"
